//! The DEmOS scenario corpus (`crates/conformance/scenarios/windows-*`, [`bulkhead_windows::corpus`])
//! through the whole simulator: description -> `from_system` -> simulation -> `run`
//! lines of the schedule log, in DEmOS's notation; and the simulator's own schedule-log
//! and seed properties.

use bulkhead_sim::*;
use bulkhead_trace::{EventKind, ScheduleLogWriter};
use bulkhead_windows::corpus::{self, Scenario};
use bulkhead_windows::drive::demos_line;

const MS: u64 = 1_000_000;

/// The log of `scenario` in the simulator.
fn log(scenario: &Scenario) -> Vec<String> {
    let options = BuildOptions {
        behaviours: scenario.header.behaviours.clone(),
        ..BuildOptions::default()
    };
    let spec = from_system(&scenario.system(), &options).unwrap();
    let mut events = Vec::new();
    let options = Options {
        seed: scenario.header.seed,
        ..Options::until(scenario.header.until)
    };
    simulate(&spec, options, &mut events).unwrap();
    events.iter().filter_map(demos_line).collect()
}

#[test]
fn every_scenario_of_the_corpus_gives_its_log() {
    for s in corpus::all() {
        if let Err(e) = corpus::check(&log(&s), &s.expected) {
            panic!("scenario {}: {e}", s.name);
        }
    }
}

#[test]
fn schedule_log_lines_are_the_shared_format() {
    let yaml = "{windows: [{cpu: 0-1, length: 10, sc_partition: [{cmd: ./ctl, budget: 5}]}]}";
    let system = bulkhead_model::load_str(yaml, "demos.yaml").unwrap().system;
    let spec = from_system(&system, &BuildOptions::default()).unwrap();
    let mut events = Vec::new();
    let report = simulate(&spec, Options::until(10 * MS), &mut events).unwrap();
    let mut writer = ScheduleLogWriter::new(Vec::new());
    for e in events.iter().filter(|e| in_schedule_log(&e.kind)) {
        writer.write(e).unwrap();
    }
    let partition = &spec.windows.as_ref().unwrap().schedule.partitions[0].name;
    let text = String::from_utf8(writer.into_inner()).unwrap();
    let line = |t: u64| {
        format!("{{\"t_ns\":{t},\"event\":\"run\",\"cpus\":\"0-1\",\"partition\":\"{partition}\",\"cmd\":\"./ctl\",\"budget_ns\":5000000}}\n")
    };
    assert_eq!(text, format!("{}{}", line(0), line(10 * MS)));
    assert_eq!(
        report.windows,
        Some(WindowStats {
            frames: 2,
            grants: 2
        })
    );
}

#[test]
fn seeded_jitter_is_reproducible_and_seed_dependent() {
    let yaml = "windows: [{length: 2, cpu: 0, sc_processes: [{cmd: dummy, budget: 1, jitter: 2}]}]";
    let system = bulkhead_model::load_str(yaml, "demos.yaml").unwrap().system;
    let spec = from_system(&system, &BuildOptions::default()).unwrap();
    let budgets = |seed| {
        let mut events = Vec::new();
        simulate(
            &spec,
            Options {
                seed,
                ..Options::until(40 * MS)
            },
            &mut events,
        )
        .unwrap();
        events
            .iter()
            .filter_map(|e| {
                if let EventKind::Run { budget_ns, .. } = e.kind {
                    Some(budget_ns)
                } else {
                    None
                }
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(budgets(7), budgets(7));
    assert_ne!(budgets(7), budgets(8));
    assert!(budgets(7).iter().all(|&b| b <= 2 * MS));
}
