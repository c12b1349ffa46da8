//! How `bulkhead analyze` scales with the number of tasks: generated descriptions of N
//! tasks in a few shapes, loaded and analysed as the command does (load, validate,
//! `analyze_system`), timed once each (the large ones take seconds).
//!
//! Shapes (UUniFast-discard utilizations, log-uniform periods 1 ms .. 1 s in µs):
//!
//! * `fp`: one fixed-priority partition of N tasks on one CPU, U = 0.7, implicit deadlines;
//! * `fp-constrained`: the same with deadlines uniform in [C, T];
//! * `edf`: one SCHED_DEADLINE partition of N tasks on one CPU, U = 0.7;
//! * `fp-2cpu`: one fixed-priority partition of N tasks on two CPUs (first-fit placement), U = 1.2;
//! * `groups`: partitions of [`SENSITIVITY_MAX_TASKS`] tasks each (the most on one CPU
//!   whose C max is searched for), each on a CPU of its own, every other one EDF with
//!   constrained deadlines (so that the search runs), U = 0.7 each: the costliest shape of
//!   the sensitivity analysis;
//! * `partitions`: N / 10 partitions of 10 tasks each on a CPU of their own, every other
//!   one EDF, U = 0.7 each.

use bulkhead_analysis::generate::{random_task_set, seeded, Deadlines, SetConfig};
use bulkhead_analysis::system::SENSITIVITY_MAX_TASKS;
use bulkhead_analysis::task::Task;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// The shapes, in the order they are reported.
pub const SHAPES: [&str; 6] = [
    "fp",
    "fp-constrained",
    "edf",
    "fp-2cpu",
    "groups",
    "partitions",
];

/// One partition of a generated description: its scheduler, tasks and CPUs.
struct Part {
    scheduler: &'static str,
    tasks: Vec<Task>,
    cpus: String,
}

const FP: &str = "fixed-priority";

/// The description of `shape` with `n` tasks (seeded: the same text every run).
pub fn description(shape: &str, n: usize) -> String {
    let mut rng = seeded(n as u64);
    let mut set = |tasks: usize, utilization: f64, deadlines: Deadlines| {
        let cfg = SetConfig {
            tasks,
            utilization,
            period_min: 1_000_000,
            period_max: 1_000_000_000,
            granularity: 1_000,
            deadlines,
        };
        random_task_set(&mut rng, &cfg)
    };
    let part = |scheduler, tasks, cpus: &str| Part {
        scheduler,
        tasks,
        cpus: cpus.to_string(),
    };
    let parts: Vec<Part> = match shape {
        "fp" => vec![part(FP, set(n, 0.7, Deadlines::Implicit), "0")],
        "fp-constrained" => vec![part(FP, set(n, 0.7, Deadlines::Constrained), "0")],
        "edf" => vec![part("edf", set(n, 0.7, Deadlines::Implicit), "0")],
        "fp-2cpu" => vec![part(FP, set(n, 1.2, Deadlines::Implicit), "0-1")],
        "groups" => (0..n.div_ceil(SENSITIVITY_MAX_TASKS))
            .map(|i| {
                let (scheduler, deadlines) = match i % 2 {
                    0 => (FP, Deadlines::Implicit),
                    _ => ("edf", Deadlines::Constrained),
                };
                let tasks = set(SENSITIVITY_MAX_TASKS, 0.7, deadlines);
                part(scheduler, tasks, &i.to_string())
            })
            .collect(),
        _ => (0..n.div_ceil(10))
            .map(|i| {
                let scheduler = if i % 2 == 0 { FP } else { "edf" };
                part(scheduler, set(10, 0.7, Deadlines::Implicit), &i.to_string())
            })
            .collect(),
    };
    let cpus = parts.len().max(2);
    let mut out = format!("system: {{cpus: 0-{}}}\npartitions:\n", cpus - 1);
    for (p, part) in parts.iter().enumerate() {
        let _ = writeln!(
            out,
            "  - {{name: p{p}, kind: rt, cpus: \"{}\", scheduler: {}, tasks: [",
            part.cpus, part.scheduler
        );
        for (i, t) in part.tasks.iter().enumerate() {
            let _ = writeln!(
                out,
                "      {{name: t{i}, budget: {}ns, period: {}ns, deadline: {}ns}},",
                t.wcet, t.period, t.deadline
            );
        }
        out.push_str("    ]}\n");
    }
    out
}

/// Loads and analyses `text` as `bulkhead analyze` does; the time taken and whether the
/// system is schedulable.
pub fn analyze(text: &str) -> (Duration, bool) {
    let start = Instant::now();
    let loaded = bulkhead_model::load_str(text, "generated.yaml").expect("a valid description");
    let report = bulkhead_analysis::analyze_system(&loaded.system);
    (start.elapsed(), report.schedulable)
}
