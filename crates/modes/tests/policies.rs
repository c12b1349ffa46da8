//! The step order of each policy, checked against M2-Xen's description (Li et al.,
//! "Multi-Mode Virtualization for Soft Real-Time Systems", RTAS 2018, Sec. IV-B, V,
//! Fig. 4 and Table I).

use bulkhead_model::{CpuSet, SwitchPolicy, Task};
use bulkhead_modes::*;
use bulkhead_trace::EventKind;

const MS: u64 = 1_000_000;

/// A task set that differs per `tag` (so that the agent has to switch it).
fn tasks(tag: u64) -> Vec<Task> {
    vec![Task::periodic(format!("t{tag}"), MS, 100 * MS)]
}

/// A pool of `cpus` CPUs (full capacity) shared by members with 3 VCPUs each; mode 0
/// gives member k `before[k]` ms every 10 ms per VCPU, mode 1 `after[k]`.
fn table(cpus: u32, before: &[u64], after: &[u64]) -> Table {
    let local = |budget: u64, tag| Local {
        interface: Some(Interface {
            budget: budget * MS,
            period: 10 * MS,
        }),
        tasks: tasks(tag),
    };
    Table {
        pools: vec![Pool {
            cpus: CpuSet::from_cpus(0..cpus).unwrap(),
            capacity: cpus as u64 * CPU_PPM,
            reserve: 0,
        }],
        members: (0..before.len())
            .map(|k| Member {
                name: format!("dom{}", k + 1),
                pool: Some(0),
                cpus: 3,
            })
            .collect(),
        modes: vec![
            TableMode {
                name: "0".into(),
                locals: before.iter().map(|&b| local(b, 0)).collect(),
            },
            TableMode {
                name: "1".into(),
                locals: after.iter().map(|&b| local(b, 1)).collect(),
            },
        ],
    }
}

/// Steps as short words: `I3` interface of dom3, `R3` request (`B3` boosted), `A3` ack, `D` done.
fn words(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .map(|s| match s {
            Step::Interface { member, .. } => format!("I{}", member + 1),
            Step::Request { member, boost } => {
                format!("{}{}", if *boost { "B" } else { "R" }, member + 1)
            }
            Step::Ack { member, .. } => format!("A{}", member + 1),
            Step::Done => "D".into(),
        })
        .collect()
}

fn run(table: &Table, policy: SwitchPolicy, order: AckOrder) -> Vec<String> {
    let replay = dry_run(table, 0, 1, policy, order).unwrap();
    verify(table, 0, 1, &replay.steps).unwrap();
    words(&replay.steps)
}

/// Fig. 4's set-up: 6 VMs of 3 VCPUs on a 15-CPU host; Dom 1, 3, 4, 5 decrease their
/// bandwidth, Dom 2 and 6 increase it (budgets per VCPU in tenths of the 10 ms period:
/// bandwidths 3·b/10 CPUs). Mode 0 uses 14.1 of 15 CPUs, mode 1 13.5.
fn fig4() -> Table {
    table(15, &[9, 6, 7, 8, 10, 7], &[6, 10, 6, 5, 8, 10])
}

#[test]
fn sequential_goes_one_by_one_from_the_largest_decrease() {
    // Deltas (tenths): dom1 -3, dom2 +4, dom3 -1, dom4 -3, dom5 -2, dom6 +3. Sorted
    // ascending (ties by declaration): dom1, dom4, dom5, dom3, dom6, dom2. A decrease
    // sends its request, waits for the acknowledgement, then shrinks the interface; an
    // increase grows the interface first (Sec. IV-B, Step 3).
    let expected = "R1 A1 I1 R4 A4 I4 R5 A5 I5 R3 A3 I3 I6 R6 A6 I2 R2 A2 D";
    let got = run(&fig4(), SwitchPolicy::Sequential, AckOrder::Fifo);
    assert_eq!(got.join(" "), expected);
}

#[test]
fn boost_is_sequential_with_each_agent_boosted() {
    let expected = "B1 A1 I1 B4 A4 I4 B5 A5 I5 B3 A3 I3 I6 B6 A6 I2 B2 A2 D";
    let got = run(&fig4(), SwitchPolicy::Boost, AckOrder::Fifo);
    assert_eq!(got.join(" "), expected);
}

#[test]
fn batch_sends_the_decreases_together_then_the_increases() {
    // "The VMs in first batch ... are the ones whose bandwidths are to be reduced"; the
    // increases go out after all their acknowledgements, in any order of arrival.
    let fifo = run(&fig4(), SwitchPolicy::Batch, AckOrder::Fifo);
    assert_eq!(
        fifo.join(" "),
        "R1 R4 R5 R3 A1 I1 A4 I4 A5 I5 A3 I3 I6 R6 I2 R2 A6 A2 D"
    );
    let lifo = run(&fig4(), SwitchPolicy::Batch, AckOrder::Lifo);
    assert_eq!(
        lifo.join(" "),
        "R1 R4 R5 R3 A3 I3 A5 I5 A4 I4 A1 I1 I6 R6 I2 R2 A2 A6 D"
    );
}

#[test]
fn greedy_grows_as_soon_as_the_capacity_is_free() {
    // Mode 0 leaves 0.9 CPU free: dom6 (+0.9) starts at once, before any decrease is
    // acknowledged; dom2 (+1.2) waits until enough has been released: after dom1 (-0.9)
    // and dom4 (-0.9) in one order of acknowledgements ...
    let fifo = run(&fig4(), SwitchPolicy::Greedy, AckOrder::Fifo);
    assert_eq!(
        fifo.join(" "),
        "R1 R4 R5 R3 I6 R6 A1 I1 A4 I4 I2 R2 A5 I5 A3 I3 A6 A2 D"
    );
    // ... after dom3 (-0.3), dom5 (-0.6) and dom4 (-0.9) in the reverse order.
    let lifo = run(&fig4(), SwitchPolicy::Greedy, AckOrder::Lifo);
    assert_eq!(
        lifo.join(" "),
        "R1 R4 R5 R3 I6 R6 A6 A3 I3 A5 I5 A4 I4 I2 R2 A2 A1 I1 D"
    );
}

#[test]
fn table_1_shrinks_after_and_grows_before_the_task_switch() {
    // M2-Xen Table I: Dom 1 with one VCPU, (10 ms, 10 ms) in mode 0 and (4 ms, 10 ms)
    // in mode 1, 4 tasks changing between the modes.
    let mut t = table(1, &[10], &[4]);
    t.members[0].cpus = 1;
    let to_1 = dry_run(&t, 0, 1, SwitchPolicy::Sequential, AckOrder::Fifo).unwrap();
    assert_eq!(words(&to_1.steps).join(" "), "R1 A1 I1 D");
    assert!(matches!(
        to_1.steps[2],
        Step::Interface {
            interface: Interface {
                budget: 4_000_000,
                period: 10_000_000
            },
            bandwidth: 400_000,
            load: 400_000,
            ..
        }
    ));
    let to_0 = dry_run(&t, 1, 0, SwitchPolicy::Sequential, AckOrder::Fifo).unwrap();
    assert_eq!(words(&to_0.steps).join(" "), "I1 R1 A1 D");
}

#[test]
fn a_partition_that_only_changes_its_interface_needs_no_agent() {
    let mut t = table(15, &[9, 6], &[6, 10]);
    t.modes[1].locals[0].tasks = t.modes[0].locals[0].tasks.clone();
    t.modes[1].locals[1].tasks = t.modes[0].locals[1].tasks.clone();
    for policy in [
        SwitchPolicy::Sequential,
        SwitchPolicy::Batch,
        SwitchPolicy::Greedy,
    ] {
        assert_eq!(
            run(&t, policy, AckOrder::Fifo).join(" "),
            "I1 I2 D",
            "{policy:?}"
        );
    }
    assert_eq!(
        dry_run(&t, 0, 0, SwitchPolicy::Boost, AckOrder::Fifo)
            .unwrap()
            .steps,
        [Step::Done],
        "nothing changes"
    );
}

#[test]
fn a_new_mode_that_does_not_fit_is_an_overload_naming_partition_and_pool() {
    // Mode 1 needs 15.3 CPUs of 15: the last growth (dom6, after dom2) cannot be made.
    let t = table(15, &[9, 6, 7, 8, 10, 7], &[6, 10, 6, 8, 10, 11]);
    for policy in [
        SwitchPolicy::Sequential,
        SwitchPolicy::Batch,
        SwitchPolicy::Boost,
    ] {
        let stopped = dry_run(&t, 0, 1, policy, AckOrder::Fifo).unwrap_err();
        assert_eq!(
            stopped.error,
            SwitchError::Overload {
                member: 5,
                pool: 0,
                load: 15_300_000,
                capacity: 15_000_000
            },
            "{policy:?}"
        );
        verify(&t, 0, 1, &stopped.steps).expect("nothing overloads before the refusal");
    }
    let greedy = dry_run(&t, 0, 1, SwitchPolicy::Greedy, AckOrder::Fifo).unwrap_err();
    assert!(matches!(
        greedy.error,
        SwitchError::Overload { member: 5, .. }
    ));
}

#[test]
fn verify_catches_growth_before_shrinking_and_interfaces_shrunk_too_early() {
    let t = fig4();
    // Growing dom2 first: 14.1 + 1.2 = 15.3 CPUs.
    let grow_first = [Step::Interface {
        member: 1,
        interface: t.modes[1].locals[1].interface.unwrap(),
        bandwidth: 3_000_000,
        load: 0,
    }];
    assert!(matches!(
        verify(&t, 0, 1, &grow_first),
        Err(Violation::Host {
            step: 0,
            pool: 0,
            load: 15_300_000,
            ..
        })
    ));
    // Shrinking dom1 to 1.8 CPUs under a task set that needs more.
    let mut heavy = t.clone();
    heavy.modes[0].locals[0].tasks[0].budget = 95 * MS;
    heavy.modes[0].locals[0].tasks[0].period = 50 * MS;
    let shrink_first = [Step::Interface {
        member: 0,
        interface: heavy.modes[1].locals[0].interface.unwrap(),
        bandwidth: 1_800_000,
        load: 0,
    }];
    assert!(matches!(
        verify(&heavy, 0, 1, &shrink_first),
        Err(Violation::Partition {
            step: 0,
            member: 0,
            demand: 1_900_000,
            interface: 1_800_000
        })
    ));
}

#[test]
fn an_unexpected_acknowledgement_is_an_error() {
    let t = fig4();
    let mut s = Switch::new(&t, 0, 1, SwitchPolicy::Sequential);
    s.start().unwrap();
    assert_eq!(s.awaiting(), [0]);
    assert_eq!(s.ack(3), Err(SwitchError::UnexpectedAck { member: 3 }));
    assert!(s.ack(0).is_ok());
    assert_eq!(s.ack(0), Err(SwitchError::UnexpectedAck { member: 0 }));
}

#[test]
fn the_trace_events_carry_the_bandwidth_in_use() {
    let t = fig4();
    let mut s = Switch::new(&t, 0, 1, SwitchPolicy::Boost);
    assert_eq!(
        s.request_event(),
        EventKind::ModeRequest {
            from: "0".into(),
            to: "1".into(),
            policy: "boost".into(),
            load_ppm: 14_100_000,
            capacity_ppm: 15_000_000
        }
    );
    let first = s.start().unwrap();
    assert_eq!(
        s.event(&first[0], 0),
        EventKind::AgentRequest {
            partition: "dom1".into(),
            mode: "1".into(),
            boost: true
        }
    );
    let after = s.ack(0).unwrap();
    assert_eq!(
        s.event(&after[0], 0),
        EventKind::AgentAck {
            partition: "dom1".into(),
            demand_ppm: 10_000,
            interface_ppm: Some(2_700_000)
        }
    );
    assert_eq!(
        s.event(&after[1], 0),
        EventKind::InterfaceChange {
            partition: "dom1".into(),
            cpus: CpuSet::from_cpus(0..15).unwrap(),
            budget_ns: 6 * MS,
            period_ns: 10 * MS,
            bandwidth_ppm: 1_800_000,
            load_ppm: 13_200_000,
            capacity_ppm: 15_000_000
        }
    );
}
