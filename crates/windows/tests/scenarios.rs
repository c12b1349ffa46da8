//! Every DEmOS scheduling scenario as an exact expected schedule.
//!
//! The scenarios and their expected logs are those of DEmOS's `test/0300-schedule.t`
//! (`demos-sched -t 20 -C ...` with `DEMOS_SCHEDULE_LOG`), in the same notation:
//! `<ms>: cpus=<cpulist> cmd='<cmd>' budget=<ms>`. A small deterministic driver
//! plays the processes (busy, yielding after some run time, exiting).

use bulkhead_model::{CpuSet, Nanos};
use bulkhead_windows::{Action, Config, Event, Machine, ProcessId, Schedule, StopReason};
use std::collections::HashMap;

const MS: Nanos = 1_000_000;

/// How a process behaves when it runs.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Uses all CPU time it gets.
    Busy,
    /// Signals completion after running this long in a grant.
    YieldAfter(Nanos),
    /// Exits after running this long in total.
    ExitAfter(Nanos),
    /// Initializes for this long, then signals initialization completed; then busy.
    InitFor(Nanos),
}

struct Run {
    log: Vec<String>,
    actions: Vec<Action>,
    stop: Option<(Nanos, StopReason)>,
}

fn load(yaml: &str) -> Schedule {
    let system = bulkhead_model::load_str(yaml, "test.yaml")
        .expect("valid")
        .system;
    Schedule::from_system(&system, &CpuSet::parse("0-1").unwrap()).expect("has windows")
}

/// Drives the machine to its stop, playing `behaviour` (by command) for the processes.
fn drive(yaml: &str, seed: u64, timeout_ms: Nanos, behaviour: &[(&str, Behaviour)]) -> Run {
    let schedule = load(yaml);
    let behaviour_of = |p: ProcessId| {
        let cmd = &schedule.processes[p].cmd;
        behaviour
            .iter()
            .find(|(c, _)| c == cmd)
            .map_or(Behaviour::Busy, |&(_, b)| b)
    };
    let behaviours: Vec<Behaviour> = (0..schedule.processes.len()).map(behaviour_of).collect();
    let mut machine = Machine::new(
        schedule.clone(),
        Config {
            seed,
            stop_at: Some(timeout_ms * MS),
        },
    );
    let mut actions = Vec::new();
    machine.start(&mut actions);
    // Init phase: processes signal after their init time, in that order.
    if let Some(Action::InitStart { processes }) = actions.first().cloned() {
        let mut order: Vec<(Nanos, ProcessId)> = processes
            .iter()
            .map(|&p| match behaviours[p] {
                Behaviour::InitFor(d) => (d, p),
                _ => (0, p),
            })
            .collect();
        order.sort();
        for (_, p) in order {
            machine.handle(Event::Completed { process: p, t: 0 }, &mut actions);
        }
    }
    let mut used: HashMap<ProcessId, Nanos> = HashMap::new();
    let mut running: HashMap<ProcessId, Nanos> = HashMap::new(); // process -> since
    let mut seen = 0;
    loop {
        // Track which processes run since when.
        for a in &actions[seen..] {
            match a {
                Action::Grant(g) => {
                    running.insert(g.process, g.t);
                }
                Action::Freeze { process } => {
                    running.remove(process);
                }
                _ => {}
            }
        }
        seen = actions.len();
        let Some(timer) = machine.next_timer() else {
            break;
        };
        // The earliest self-initiated event of a running process.
        let external = running
            .iter()
            .filter_map(|(&p, &since)| match behaviours[p] {
                Behaviour::YieldAfter(d) => Some((
                    since + d,
                    Event::Completed {
                        process: p,
                        t: since + d,
                    },
                    p,
                )),
                Behaviour::ExitAfter(d) => {
                    let t = since + d.saturating_sub(used.get(&p).copied().unwrap_or(0));
                    Some((t, Event::Exited { process: p, t }, p))
                }
                _ => None,
            })
            .min_by_key(|&(t, _, p)| (t, p));
        let (t, event) = match external {
            Some((t, event, _)) if t < timer => (t, event),
            _ => (timer, Event::Timer { t: timer }),
        };
        // Account run time up to t.
        for (&p, since) in running.iter_mut() {
            *used.entry(p).or_insert(0) += t - *since;
            *since = t;
        }
        if let Event::Exited { process, .. } = event {
            running.remove(&process);
        }
        machine.handle(event, &mut actions);
    }
    let log = actions
        .iter()
        .filter_map(|a| match a {
            Action::Grant(g) => Some(format!(
                "{:>6}: cpus={} cmd='{}' budget={}",
                ms(g.t),
                g.cpus,
                schedule.processes[g.process].cmd,
                ms(g.budget)
            )),
            _ => None,
        })
        .collect();
    let stop = actions.iter().find_map(|a| match a {
        Action::Stop { t, reason } => Some((*t, *reason)),
        _ => None,
    });
    Run { log, actions, stop }
}

fn ms(t: Nanos) -> String {
    if t % MS == 0 {
        (t / MS).to_string()
    } else {
        format!("{}", t as f64 / MS as f64)
    }
}

fn expect(run: &Run, expected: &str) {
    let expected: Vec<String> = expected.lines().map(str::to_string).collect();
    assert_eq!(run.log, expected, "\nactual:\n{}\n", run.log.join("\n"));
}

#[test]
fn sc_budget_below_window() {
    let run = drive(
        "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: dummy, budget: 5}]}]}",
        0,
        20,
        &[],
    );
    expect(&run, "     0: cpus=0 cmd='dummy' budget=5\n    10: cpus=0 cmd='dummy' budget=5\n    20: cpus=0 cmd='dummy' budget=5");
    assert_eq!(run.stop, Some((20 * MS, StopReason::Timeout)));
}

#[test]
fn sc_budget_above_window() {
    let run = drive(
        "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: dummy, budget: 15}]}]}",
        0,
        20,
        &[],
    );
    expect(&run, "     0: cpus=0 cmd='dummy' budget=15\n    10: cpus=0 cmd='dummy' budget=15\n    20: cpus=0 cmd='dummy' budget=15");
}

#[test]
fn two_sc_processes() {
    let run = drive(
        "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: dummy 1, budget: 2}, {cmd: dummy 2, budget: 3}]}]}",
        0,
        20,
        &[],
    );
    expect(
        &run,
        "     0: cpus=0 cmd='dummy 1' budget=2
     2: cpus=0 cmd='dummy 2' budget=3
    10: cpus=0 cmd='dummy 1' budget=2
    12: cpus=0 cmd='dummy 2' budget=3
    20: cpus=0 cmd='dummy 1' budget=2",
    );
}

#[test]
fn be_budget_below_window() {
    let run = drive(
        "{windows: [{cpu: 0, length: 10, be_partition: [{cmd: dummy, budget: 5}]}]}",
        0,
        20,
        &[],
    );
    expect(&run, "     0: cpus=0 cmd='dummy' budget=5\n    10: cpus=0 cmd='dummy' budget=5\n    20: cpus=0 cmd='dummy' budget=5");
}

#[test]
fn be_carried_over_to_next_window() {
    let run = drive(
        "{windows: [{cpu: 0, length: 10, be_partition: [{cmd: dummy, budget: 15}]}]}",
        0,
        20,
        &[],
    );
    expect(&run, "     0: cpus=0 cmd='dummy' budget=15\n    10: cpus=0 cmd='dummy' budget=5\n    20: cpus=0 cmd='dummy' budget=15");
}

#[test]
fn two_be_processes() {
    let run = drive(
        "{windows: [{cpu: 0, length: 10, be_partition: [{cmd: dummy 1, budget: 2}, {cmd: dummy 2, budget: 3}]}]}",
        0,
        20,
        &[],
    );
    expect(
        &run,
        "     0: cpus=0 cmd='dummy 1' budget=2
     2: cpus=0 cmd='dummy 2' budget=3
    10: cpus=0 cmd='dummy 1' budget=2
    12: cpus=0 cmd='dummy 2' budget=3
    20: cpus=0 cmd='dummy 1' budget=2",
    );
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
    let run = drive(yaml, 0, 20, &[]);
    expect(
        &run,
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
    let run = drive(yaml, 0, 20, &[]);
    expect(
        &run,
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

/// DEmOS's maximum-jitter scenario (`budget: 1, jitter: 2` in 2 ms windows, seed 2).
/// Budgets are drawn in nanoseconds from 0..=2 ms; the expected log is pinned for
/// seed 2 and re-derived independently from the documented draw rule.
#[test]
fn jitter_with_fixed_seed() {
    let yaml = "windows: [{length: 2, cpu: 0, sc_processes: [{cmd: dummy, budget: 1, jitter: 2}]}]";
    let run = drive(yaml, 2, 10, &[]);
    // Independent re-derivation: window k starts at 2k ms and grants one fresh draw.
    let mut draw = bulkhead_windows::jitter::BudgetDraw::new(2, 0, MS, 2 * MS);
    let expected: Vec<String> = (0..=5)
        .map(|k| {
            format!(
                "{:>6}: cpus=0 cmd='dummy' budget={}",
                2 * k,
                ms(draw.next_budget())
            )
        })
        .collect();
    assert_eq!(run.log, expected);
    expect(
        &run,
        "     0: cpus=0 cmd='dummy' budget=1.266716
     2: cpus=0 cmd='dummy' budget=0.411837
     4: cpus=0 cmd='dummy' budget=0.767094
     6: cpus=0 cmd='dummy' budget=1.873287
     8: cpus=0 cmd='dummy' budget=1.343053
    10: cpus=0 cmd='dummy' budget=0.02422",
    );
    // Pinned: a change of the RNG or the draw rule changes seeded schedules.
    let grants: Vec<Nanos> = run
        .actions
        .iter()
        .filter_map(|a| {
            if let Action::Grant(g) = a {
                Some(g.budget)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(grants, PINNED_SEED_2);
    assert!(grants.iter().all(|&b| b <= 2 * MS));
    // Another seed gives another schedule.
    assert_ne!(drive(yaml, 3, 10, &[]).log, run.log);
}

const PINNED_SEED_2: [Nanos; 6] = [1_266_716, 411_837, 767_094, 1_873_287, 1_343_053, 24_220];

#[test]
fn jitter_zero_draw_skips_the_process() {
    // budget 1 ns, jitter 2 ns: draws are 0, 1 or 2 ns; zero draws produce no grant.
    let yaml = "
partitions:
  - name: P
    processes: [{cmd: a, budget: 1ns, jitter: 2ns}, {cmd: b, budget: 1ms}]
windows: [{length: 2ms, cpu: 0, sc_partition: P}]
";
    let run = drive(yaml, 5, 100, &[]);
    let a_grants = run.log.iter().filter(|l| l.contains("cmd='a'")).count();
    let b_grants = run.log.iter().filter(|l| l.contains("cmd='b'")).count();
    assert_eq!(b_grants, 51, "b runs in every window");
    assert!(
        a_grants > 10 && a_grants < 51,
        "some draws of a are 0 and skipped: {a_grants}"
    );
}

#[test]
fn init_phase_then_schedule() {
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
    let run = drive(
        yaml,
        0,
        10,
        &[
            ("init-sc", Behaviour::InitFor(5)),
            ("init-be", Behaviour::InitFor(2)),
        ],
    );
    let schedule = load(yaml);
    let init = run.actions.first().cloned();
    assert_eq!(
        init,
        Some(Action::InitStart {
            processes: vec![0, 2]
        })
    );
    // Widest CPU sets: SC only ever on CPU 0, BE on 0-1 (second window).
    assert_eq!(schedule.partitions[0].widest_cpus.to_string(), "0");
    assert_eq!(schedule.partitions[1].widest_cpus.to_string(), "0-1");
    // Both complete initialization (BE first), and only then does the schedule start.
    let kinds: Vec<String> = run
        .actions
        .iter()
        .take(5)
        .map(|a| format!("{a:?}"))
        .collect();
    assert_eq!(kinds[1], "Freeze { process: 2 }");
    assert_eq!(kinds[2], "Freeze { process: 0 }");
    assert_eq!(kinds[3], "ScheduleStart");
    assert_eq!(kinds[4], "FrameStart { t: 0 }");
    expect(
        &run,
        "     0: cpus=0 cmd='init-sc' budget=3
     3: cpus=0 cmd='plain' budget=2
     5: cpus=1 cmd='init-be' budget=4
    10: cpus=0-1 cmd='init-be' budget=4",
    );
    // Moving BE to 0-1 in window 2 re-pins its cgroup; SC never moves.
    assert!(run.actions.contains(&Action::SetCpus {
        partition: 1,
        cpus: CpuSet::parse("1").unwrap()
    }));
    assert!(run.actions.contains(&Action::SetCpus {
        partition: 1,
        cpus: CpuSet::parse("0-1").unwrap()
    }));
    assert!(!run
        .actions
        .iter()
        .any(|a| matches!(a, Action::SetCpus { partition: 0, .. })));
}

#[test]
fn init_process_that_exits_does_not_block_the_start() {
    let yaml = "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: a, budget: 5, init: true}, {cmd: b, budget: 5}]}]}";
    let schedule = load(yaml);
    let mut machine = Machine::new(
        schedule,
        Config {
            seed: 0,
            stop_at: None,
        },
    );
    let mut out = Vec::new();
    machine.start(&mut out);
    assert_eq!(machine.next_timer(), None, "no timer during init");
    machine.handle(Event::Exited { process: 0, t: 0 }, &mut out);
    assert!(out.contains(&Action::ScheduleStart));
    let grants: Vec<_> = out
        .iter()
        .filter_map(|a| {
            if let Action::Grant(g) = a {
                Some(g.process)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(grants, [1], "the exited process is never granted");
}

#[test]
fn yield_starts_the_next_process_early() {
    let run = drive(
        "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: yielder, budget: 4}, {cmd: busy, budget: 3}]}]}",
        0,
        20,
        &[("yielder", Behaviour::YieldAfter(MS))],
    );
    expect(
        &run,
        "     0: cpus=0 cmd='yielder' budget=4
     1: cpus=0 cmd='busy' budget=3
    10: cpus=0 cmd='yielder' budget=4
    11: cpus=0 cmd='busy' budget=3
    20: cpus=0 cmd='yielder' budget=4",
    );
}

#[test]
fn yield_of_last_sc_process_starts_be() {
    let yaml = "
windows:
  - length: 10
    cpu: 0
    sc_partition: [{cmd: sc, budget: 6}]
    be_partition: [{cmd: be, budget: 8}]
";
    let run = drive(yaml, 0, 10, &[("sc", Behaviour::YieldAfter(2 * MS))]);
    expect(
        &run,
        "     0: cpus=0 cmd='sc' budget=6
     2: cpus=0 cmd='be' budget=8
    10: cpus=0 cmd='sc' budget=6",
    );
}

#[test]
fn late_completion_is_ignored() {
    let yaml = "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: a, budget: 4}, {cmd: b, budget: 4}]}]}";
    let mut machine = Machine::new(load(yaml), Config::default());
    let mut out = Vec::new();
    machine.start(&mut out);
    machine.handle(Event::Timer { t: 4 * MS }, &mut out); // a's budget ends, b starts
    out.clear();
    // a's completion arrives after its budget ended: b keeps running.
    machine.handle(
        Event::Completed {
            process: 0,
            t: 4 * MS + 10,
        },
        &mut out,
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(machine.next_timer(), Some(8 * MS));
}

#[test]
fn window_and_frame_start_order() {
    let yaml = "
partitions:
  - name: P
    processes: [{cmd: p, budget: 1}]
windows:
  - {length: 2, cpu: 0, sc_partition: P}
  - {length: 3}
";
    let run = drive(yaml, 0, 10, &[]);
    let marks: Vec<String> = run
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::FrameStart { t } => Some(format!("frame@{}", ms(*t))),
            Action::WindowStart { t, window } => Some(format!("window{window}@{}", ms(*t))),
            _ => None,
        })
        .collect();
    assert_eq!(
        marks,
        [
            "frame@0",
            "window0@0",
            "window1@2",
            "frame@5",
            "window0@5",
            "window1@7",
            "frame@10",
            "window0@10"
        ]
    );
    expect(&run, "     0: cpus=0 cmd='p' budget=1\n     5: cpus=0 cmd='p' budget=1\n    10: cpus=0 cmd='p' budget=1");
}

#[test]
fn timeout_stops_after_events_at_that_time() {
    let run = drive(
        "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: dummy, budget: 5}]}]}",
        0,
        15,
        &[],
    );
    expect(
        &run,
        "     0: cpus=0 cmd='dummy' budget=5\n    10: cpus=0 cmd='dummy' budget=5",
    );
    assert_eq!(run.stop, Some((15 * MS, StopReason::Timeout)));
    assert!(matches!(run.actions.last(), Some(Action::Stop { .. })));
}

#[test]
fn exit_when_all_processes_exit() {
    let yaml = "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: short, budget: 5}, {cmd: long, budget: 3}]}]}";
    let run = drive(
        yaml,
        0,
        100,
        &[
            ("short", Behaviour::ExitAfter(7 * MS)),
            ("long", Behaviour::ExitAfter(4 * MS)),
        ],
    );
    expect(
        &run,
        "     0: cpus=0 cmd='short' budget=5
     5: cpus=0 cmd='long' budget=3
    10: cpus=0 cmd='short' budget=5
    12: cpus=0 cmd='long' budget=3",
    );
    assert_eq!(run.stop, Some((13 * MS, StopReason::AllExited)));
}

#[test]
fn stop_event_stops_at_once() {
    let yaml = "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: a, budget: 5}]}]}";
    let mut machine = Machine::new(load(yaml), Config::default());
    let mut out = Vec::new();
    machine.start(&mut out);
    machine.handle(Event::Stop { t: 3 * MS }, &mut out);
    assert_eq!(
        out.last(),
        Some(&Action::Stop {
            t: 3 * MS,
            reason: StopReason::Requested
        })
    );
    let before = out.len();
    machine.handle(Event::Timer { t: 10 * MS }, &mut out);
    assert_eq!(out.len(), before, "a stopped machine ignores events");
    assert_eq!(machine.next_timer(), None);
}

#[test]
fn be_round_robin_continues_after_the_last_run() {
    // Three BE processes of 4 ms in 10 ms windows: a, b, (c cut at 10 with 2 left),
    // then c's leftover, a, b, and c again fresh.
    let yaml = "{windows: [{cpu: 0, length: 10, be_partition: [{cmd: a, budget: 4}, {cmd: b, budget: 4}, {cmd: c, budget: 4}]}]}";
    let run = drive(yaml, 0, 20, &[]);
    expect(
        &run,
        "     0: cpus=0 cmd='a' budget=4
     4: cpus=0 cmd='b' budget=4
     8: cpus=0 cmd='c' budget=4
    10: cpus=0 cmd='c' budget=2
    12: cpus=0 cmd='a' budget=4
    16: cpus=0 cmd='b' budget=4
    20: cpus=0 cmd='c' budget=4",
    );
}

#[test]
fn grants_are_schedule_log_run_lines() {
    let yaml = "
partitions:
  - name: SC1
    processes: [{cmd: ./a --flag \"x y\", budget: 2}]
windows: [{length: 10, cpu: 0-1, sc_partition: SC1}]
";
    let run = drive(yaml, 0, 10, &[]);
    let schedule = load(yaml);
    let lines: String = run
        .actions
        .iter()
        .filter_map(|a| {
            if let Action::Grant(g) = a {
                Some(g)
            } else {
                None
            }
        })
        .map(|g| bulkhead_trace::schedule_log::line(&bulkhead_windows::run_event(&schedule, g)))
        .collect();
    assert_eq!(
        lines,
        concat!(
            r#"{"t_ns":0,"event":"run","cpus":"0-1","partition":"SC1","cmd":"./a --flag \"x y\"","budget_ns":2000000}"#,
            "\n",
            r#"{"t_ns":10000000,"event":"run","cpus":"0-1","partition":"SC1","cmd":"./a --flag \"x y\"","budget_ns":2000000}"#,
            "\n"
        )
    );
}

#[test]
fn freezes_and_thaws_pair_up() {
    let yaml = "
windows:
  - length: 10
    slices:
      - {cpu: 0, sc_partition: [{cmd: a, budget: 3}, {cmd: b, budget: 9}], be_partition: [{cmd: c, budget: 2}]}
      - {cpu: 1, be_partition: [{cmd: d, budget: 20}]}
";
    let run = drive(yaml, 0, 50, &[]);
    let mut thawed = std::collections::HashSet::new();
    for a in &run.actions {
        match a {
            Action::Thaw { process } => assert!(thawed.insert(*process), "thawed twice: {process}"),
            Action::Freeze { process } => {
                assert!(thawed.remove(process), "frozen while frozen: {process}")
            }
            Action::Grant(g) => assert!(thawed.contains(&g.process)),
            _ => {}
        }
    }
}
