//! Analyzes 1000 random sets of 10 tasks (UUniFast-discard utilizations, total U from
//! 0.50 to 0.95, log-uniform periods 1 ms .. 1 s in ns, implicit deadlines, rate
//! monotonic) three ways, best of 25 runs each:
//!
//! * `full`: what `bulkhead analyze` computes per CPU: every task's exact WCRT
//!   (`response_times`), both quick tests, and the EDF verdict by QPA;
//! * `verdict`: the fixed-priority verdict only (`fp_schedulable`: hyperbolic bound,
//!   then RTA with early exit);
//! * baseline `naive`: the textbook Joseph & Pandya iteration for every task, started
//!   from `C_i` with no quick test and no carried start value.
//!
//! The naive WCRTs are checked equal to the library's before timing counts.
//!
//! Then how the whole analysis scales with the number of tasks ([`scale`]): the shapes of
//! `scale::SHAPES` with the numbers of tasks of `SCALE` (comma-separated, default
//! `400,800,5000`), each loaded and analysed once, against the target of 5 s for 5,000
//! tasks. With `SCALE_DIR` set, the descriptions are also written there
//! (`<shape>-<n>.yaml`) to time `bulkhead analyze` itself.

mod scale;

use bulkhead_analysis::bounds::{hyperbolic, liu_layland};
use bulkhead_analysis::edf::qpa;
use bulkhead_analysis::generate::{random_task_set, seeded, Deadlines, SetConfig};
use bulkhead_analysis::rta::{fp_schedulable, response_times};
use bulkhead_analysis::task::{priority_order, PriorityRule, Task, Time};
use bulkhead_analysis::PeriodicSupply;
use std::hint::black_box;
use std::time::{Duration, Instant};

const SETS: usize = 1000;
/// Repetitions of each measurement; the best is reported (the machine is shared).
const RUNS: usize = 25;

fn sets() -> Vec<(Vec<Task>, Vec<usize>)> {
    let mut rng = seeded(2026);
    (0..SETS)
        .map(|k| {
            let cfg = SetConfig {
                tasks: 10,
                utilization: 0.50 + 0.45 * (k % 10) as f64 / 9.0,
                period_min: 1_000_000,
                period_max: 1_000_000_000,
                granularity: 1_000,
                deadlines: Deadlines::Implicit,
            };
            let ts = random_task_set(&mut rng, &cfg);
            let order = priority_order(&ts, PriorityRule::RateMonotonic);
            (ts, order)
        })
        .collect()
}

/// Joseph & Pandya 1986: `R = C_i + Σ_hp ⌈R/T_j⌉ C_j` from `R = C_i`; `None` past `D_i`.
fn naive(ts: &[Task], order: &[usize]) -> Vec<Option<Time>> {
    let mut out = vec![None; ts.len()];
    for (pos, &i) in order.iter().enumerate() {
        let mut r = ts[i].wcet;
        out[i] = loop {
            let next = ts[i].wcet
                + order[..pos]
                    .iter()
                    .map(|&j| r.div_ceil(ts[j].period) * ts[j].wcet)
                    .sum::<Time>();
            if next > ts[i].deadline {
                break None;
            }
            if next == r {
                break Some(r);
            }
            r = next;
        };
    }
    out
}

fn best_of<F: FnMut() -> usize>(mut f: F) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut count = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        count = black_box(f());
        best = best.min(start.elapsed());
    }
    (best, count)
}

fn main() {
    let sets = sets();
    let supply = PeriodicSupply::dedicated();
    for (ts, order) in &sets {
        let ours = response_times(ts, order, &supply);
        for (i, r) in naive(ts, order).iter().enumerate() {
            if let Some(w) = r {
                assert_eq!(
                    ours[i].wcrt,
                    Some(*w),
                    "naive and exact RTA disagree on {ts:?}"
                );
            }
        }
    }
    let (full, full_ok) = best_of(|| {
        sets.iter()
            .filter(|(ts, order)| {
                let r = response_times(ts, order, &supply);
                black_box((liu_layland(ts), hyperbolic(ts), qpa(ts).schedulable));
                r.iter()
                    .zip(ts.iter())
                    .all(|(r, t)| r.wcrt.is_some_and(|w| w <= t.deadline))
            })
            .count()
    });
    let (verdict, verdict_ok) = best_of(|| {
        sets.iter()
            .filter(|(ts, order)| fp_schedulable(ts, order, true))
            .count()
    });
    let (base, base_ok) = best_of(|| {
        sets.iter()
            .filter(|(ts, order)| naive(ts, order).iter().all(Option::is_some))
            .count()
    });
    assert_eq!((full_ok, verdict_ok), (base_ok, base_ok), "verdicts differ");
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("{SETS} sets x 10 tasks, U 0.50..0.95, RM, implicit deadlines; {base_ok} schedulable");
    println!(
        "full analysis (all WCRTs + L&L + hyperbolic + QPA): {:>8.3} ms",
        ms(full)
    );
    println!(
        "verdict only (hyperbolic, then RTA with early exit): {:>8.3} ms",
        ms(verdict)
    );
    println!(
        "baseline: naive Joseph & Pandya iteration, all tasks: {:>8.3} ms",
        ms(base)
    );
    println!("target: full analysis <= 5 ms total");
    let scaling = scaling();
    println!(
        "{{\"sets\": {SETS}, \"tasks_per_set\": 10, \"schedulable\": {base_ok}, \"full_ms\": {:.3}, \"verdict_ms\": {:.3}, \"baseline_naive_rta_ms\": {:.3}, \"target_ms\": 5.0, \"within_target\": {}, \"scale\": {scaling}}}",
        ms(full),
        ms(verdict),
        ms(base),
        ms(full) <= 5.0
    );
}

/// Times every shape at every size of `SCALE`; prints a table and returns it as a JSON
/// object `{"SHAPE": {"N": seconds, ...}, ..., "within_target": bool}`.
fn scaling() -> String {
    let sizes: Vec<usize> = std::env::var("SCALE")
        .unwrap_or_else(|_| "400,800,5000".into())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("SCALE: numbers of tasks, comma-separated")
        })
        .collect();
    if let Some(dir) = std::env::var_os("SCALE_DIR") {
        for shape in scale::SHAPES {
            for &n in &sizes {
                let path = std::path::Path::new(&dir).join(format!("{shape}-{n}.yaml"));
                std::fs::write(path, scale::description(shape, n)).expect("SCALE_DIR");
            }
        }
    }
    println!("whole analysis (load, validate, analyze_system), seconds:");
    println!(
        "{:<16}{}",
        "shape",
        sizes.iter().map(|n| format!("{n:>10}")).collect::<String>()
    );
    let mut within = true;
    let mut json = Vec::new();
    for shape in scale::SHAPES {
        let mut row = format!("{shape:<16}");
        let mut cells = Vec::new();
        for &n in &sizes {
            let (took, schedulable) = scale::analyze(&scale::description(shape, n));
            let s = took.as_secs_f64();
            within &= n > 5000 || s <= 5.0;
            row.push_str(&format!("{s:>9.3}{}", if schedulable { ' ' } else { '*' }));
            cells.push(format!("\"{n}\": {s:.3}"));
        }
        println!("{row}");
        json.push(format!("\"{shape}\": {{{}}}", cells.join(", ")));
    }
    println!("(* not schedulable) target: 5,000 tasks <= 5 s");
    format!("{{{}, \"within_target\": {within}}}", json.join(", "))
}
