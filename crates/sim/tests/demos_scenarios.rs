//! DEmOS window schedules through the whole simulator: YAML description ->
//! `from_system` -> simulation -> `run` lines of the schedule log. The expected logs
//! are those of DEmOS's `test/0300-schedule.t` (`demos-sched -t 20` with
//! `DEMOS_SCHEDULE_LOG`), written `<ms>: cpus=<cpulist> cmd='<cmd>' budget=<ms>`.

use bulkhead_sim::*;
use bulkhead_trace::{EventKind, ScheduleLogWriter};

const MS: u64 = 1_000_000;

fn log(yaml: &str, until_ms: u64, behaviours: &[(&str, Behaviour)]) -> Vec<String> {
    let system = bulkhead_model::load_str(yaml, "demos.yaml").unwrap().system;
    let options = BuildOptions {
        behaviours: behaviours
            .iter()
            .map(|&(c, b)| (c.to_string(), b))
            .collect(),
        ..BuildOptions::default()
    };
    let spec = from_system(&system, &options).unwrap();
    let mut events = Vec::new();
    simulate(&spec, Options::until(until_ms * MS), &mut events).unwrap();
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Run {
                cpus,
                cmd,
                budget_ns,
                ..
            } => Some(format!(
                "{:>6}: cpus={cpus} cmd='{cmd}' budget={}",
                ms(e.t_ns),
                ms(*budget_ns)
            )),
            _ => None,
        })
        .collect()
}

fn ms(t: u64) -> String {
    if t % MS == 0 {
        (t / MS).to_string()
    } else {
        format!("{}", t as f64 / MS as f64)
    }
}

fn expect(got: Vec<String>, expected: &str) {
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(got, expected, "\nactual:\n{}\n", got.join("\n"));
}

#[test]
fn sc_budget_below_and_above_window() {
    for budget in [5, 15] {
        let yaml = format!("{{windows: [{{cpu: 0, length: 10, sc_partition: [{{cmd: dummy, budget: {budget}}}]}}]}}");
        let line = |t: u64| format!("{t:6}: cpus=0 cmd='dummy' budget={budget}");
        expect(
            log(&yaml, 20, &[]),
            &[line(0), line(10), line(20)].join("\n"),
        );
    }
}

#[test]
fn two_sc_processes_run_in_order() {
    let yaml = "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: dummy 1, budget: 2}, {cmd: dummy 2, budget: 3}]}]}";
    expect(
        log(yaml, 20, &[]),
        "     0: cpus=0 cmd='dummy 1' budget=2
     2: cpus=0 cmd='dummy 2' budget=3
    10: cpus=0 cmd='dummy 1' budget=2
    12: cpus=0 cmd='dummy 2' budget=3
    20: cpus=0 cmd='dummy 1' budget=2",
    );
}

#[test]
fn be_budget_is_carried_over_to_the_next_window() {
    let yaml = "{windows: [{cpu: 0, length: 10, be_partition: [{cmd: dummy, budget: 15}]}]}";
    expect(log(yaml, 20, &[]), "     0: cpus=0 cmd='dummy' budget=15\n    10: cpus=0 cmd='dummy' budget=5\n    20: cpus=0 cmd='dummy' budget=15");
}

#[test]
fn be_waits_for_sc_on_all_slices() {
    let yaml = "
windows:
  - length: 10
    slices:
      - cpu: 0
        sc_partition: {cmd: dummy SC1, budget: 5}
      - cpu: 1
        sc_partition: {cmd: dummy SC2, budget: 3}
        be_partition: {cmd: dummy BE_,  budget: 2}
";
    expect(
        log(yaml, 20, &[]),
        "     0: cpus=0 cmd='dummy SC1' budget=5
     0: cpus=1 cmd='dummy SC2' budget=3
     5: cpus=1 cmd='dummy BE_' budget=2
    10: cpus=0 cmd='dummy SC1' budget=5
    10: cpus=1 cmd='dummy SC2' budget=3
    15: cpus=1 cmd='dummy BE_' budget=2
    20: cpus=0 cmd='dummy SC1' budget=5
    20: cpus=1 cmd='dummy SC2' budget=3",
    );
}

#[test]
fn be_across_windows_of_different_lengths() {
    let yaml = "
partitions:
  - name: BE
    processes: [{cmd: dummy BE, budget: 9}]
windows:
  - {length: 2, cpu: 0, be_partition: BE}
  - {length: 3, cpu: 0, be_partition: BE}
";
    expect(
        log(yaml, 20, &[]),
        "     0: cpus=0 cmd='dummy BE' budget=9
     2: cpus=0 cmd='dummy BE' budget=7
     5: cpus=0 cmd='dummy BE' budget=4
     7: cpus=0 cmd='dummy BE' budget=2
    10: cpus=0 cmd='dummy BE' budget=9
    12: cpus=0 cmd='dummy BE' budget=7
    15: cpus=0 cmd='dummy BE' budget=4
    17: cpus=0 cmd='dummy BE' budget=2
    20: cpus=0 cmd='dummy BE' budget=9",
    );
}

#[test]
fn a_yield_starts_the_next_process_early() {
    let yaml = "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: yielder, budget: 4}, {cmd: busy, budget: 3}]}]}";
    expect(
        log(yaml, 20, &[("yielder", Behaviour::YieldAfter(MS))]),
        "     0: cpus=0 cmd='yielder' budget=4
     1: cpus=0 cmd='busy' budget=3
    10: cpus=0 cmd='yielder' budget=4
    11: cpus=0 cmd='busy' budget=3
    20: cpus=0 cmd='yielder' budget=4",
    );
}

#[test]
fn an_exited_process_is_never_granted_again() {
    let yaml = "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: short, budget: 4}, {cmd: busy, budget: 3}]}]}";
    expect(
        log(yaml, 20, &[("short", Behaviour::ExitAfter(6 * MS))]),
        "     0: cpus=0 cmd='short' budget=4
     4: cpus=0 cmd='busy' budget=3
    10: cpus=0 cmd='short' budget=4
    12: cpus=0 cmd='busy' budget=3
    20: cpus=0 cmd='busy' budget=3",
    );
}

#[test]
fn init_phase_runs_before_schedule_time_zero() {
    let yaml = "
partitions:
  - name: SC
    processes: [{cmd: init-sc, budget: 3, init: true}, {cmd: plain, budget: 2}]
  - name: BE
    processes: [{cmd: init-be, budget: 4, init: true}]
windows:
  - length: 10
    slices:
      - {cpu: 0, sc_partition: SC}
      - {cpu: 1, be_partition: BE}
  - length: 10
    slices:
      - {cpu: 0-1, be_partition: BE}
";
    let behaviours = [
        ("init-sc", Behaviour::InitFor(5 * MS)),
        ("init-be", Behaviour::InitFor(2 * MS)),
    ];
    expect(
        log(yaml, 10, &behaviours),
        "     0: cpus=0 cmd='init-sc' budget=3
     3: cpus=0 cmd='plain' budget=2
     5: cpus=1 cmd='init-be' budget=4
    10: cpus=0-1 cmd='init-be' budget=4",
    );
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
