//! Every scenario in the simulator and, where it applies, the window machine: each
//! within the bounds of `analyze` and `solve` exactly, the machine's grants the
//! simulator's, and each pinned WCRT the analysis's and the critical instant's.

use bulkhead_conformance::check::{against_bounds, against_reference};
use bulkhead_conformance::{scenario, sim, Bounds, Executor, Machine, Scenario, Sim};
use bulkhead_sim::ExecModel;

fn bounds(s: &Scenario) -> Bounds {
    Bounds::of(&s.solved().unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn every_scenario_keeps_the_bounds_in_sim() {
    let scenarios = scenario::all();
    assert!(scenarios.len() >= 19, "{} scenarios", scenarios.len());
    let mut failed = Vec::new();
    for s in &scenarios {
        let o = Sim.execute(s).unwrap_or_else(|e| panic!("{}: {e}", s.name));
        let v = against_bounds(s, &o, &bounds(s));
        assert!(v.excused.is_empty(), "sim has no platform floor");
        if !v.passed() {
            failed.push(format!("{}: {}", s.name, v.failures.join("\n  ")));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn the_window_machine_grants_what_the_simulator_grants() {
    let mut ran = 0;
    for s in scenario::all()
        .iter()
        .filter(|s| Machine.cannot(s).is_none())
    {
        let reference = Sim.execute(s).unwrap();
        let o = Machine.execute(s).unwrap();
        let b = bounds(s);
        let mut v = against_bounds(s, &o, &b);
        v.failures
            .extend(against_reference(s, &o, &reference, &b).failures);
        assert!(v.passed(), "{}: {}", s.name, v.failures.join("\n"));
        ran += 1;
    }
    assert!(ran >= 19, "{ran} window scenarios");
}

/// `# wcrt:` pins the analysis to a hand-computed WCRT, and the simulation at WCET from
/// the synchronous release reaches it exactly (the critical instant: Liu & Layland
/// 1973, Theorem 1).
#[test]
fn pinned_wcrts_are_analysed_and_reached_at_the_critical_instant() {
    let mut pinned = 0;
    for s in scenario::all().iter().filter(|s| !s.wcrts.is_empty()) {
        let system = s.solved().unwrap();
        let b = Bounds::of(&system);
        let o = sim::simulate(s, &system, ExecModel::Wcet).unwrap();
        for (task, wcrt) in &s.wcrts {
            let bound = b
                .task(task)
                .unwrap_or_else(|| panic!("{}: no task {task}", s.name));
            assert_eq!(
                bound.wcrt,
                Some(*wcrt),
                "{}: analysed WCRT of {task}",
                s.name
            );
            let worst = o
                .jobs_before(s.header.until)
                .filter(|j| &j.task_name() == task)
                .filter_map(|j| j.response())
                .max();
            assert_eq!(
                worst,
                Some(*wcrt),
                "{}: simulated worst response of {task}",
                s.name
            );
            pinned += 1;
        }
    }
    assert!(pinned >= 4, "{pinned} pinned WCRTs");
}

/// The readers of `channels-fifo` and `channels-latest` consume, by the release of the
/// writer's job that wrote each message: every message in order (fifo: 0, 10, 20 ms,
/// ... read 5 ms later) and the newest of two (latest: the writer every 5 ms, the
/// reader every 10 ms at 2 ms past, after the writer's job of the same instant).
#[test]
fn channel_readers_consume_what_their_kind_gives() {
    let reads = |name: &str| -> Vec<(u64, u64)> {
        let s = scenario::all()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap();
        let o = Sim.execute(&s).unwrap();
        o.messages
            .iter()
            .take(4)
            .map(|m| (m.at / 1_000_000, m.origin / 1_000_000))
            .collect()
    };
    assert_eq!(
        reads("channels-fifo"),
        [(5, 0), (15, 10), (25, 20), (35, 30)]
    );
    assert_eq!(
        reads("channels-latest"),
        [(2, 0), (12, 10), (22, 20), (32, 30)]
    );
}
