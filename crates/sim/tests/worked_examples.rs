//! The papers' worked examples, with the papers' numbers.

mod common;

use bulkhead_model::{ChannelKind, Resume};
use bulkhead_sim::*;
use bulkhead_trace::EventKind;
use common::*;

/// Rate monotonic (C, T) = (1,4), (2,6), (3,12) (Liu & Layland 1973): worst-case
/// response times 1, 3, 10 and the schedule of the first hyperperiod.
#[test]
fn rate_monotonic_example_schedule_and_response_times() {
    let yaml = "system: {cpus: 0}\npartitions:\n  - name: p\n    kind: rt\n    cpus: 0\n    tasks:\n      \
                - {name: t1, cmd: a, budget: 1ms, period: 4ms}\n      \
                - {name: t2, cmd: b, budget: 2ms, period: 6ms}\n      \
                - {name: t3, cmd: c, budget: 3ms, period: 12ms}\n";
    let system = bulkhead_model::load_str(yaml, "rm.yaml").unwrap().system;
    let spec = from_system(&system, &BuildOptions::default()).unwrap();
    let (report, events) = run(&spec, Options::until(12 * MS));
    let got = &segments(&events)[&0];
    let expected: Vec<(u64, u64, String)> = [
        (0, 1, "t1"),
        (1, 3, "t2"),
        (3, 4, "t3"),
        (4, 5, "t1"),
        (5, 6, "t3"),
        (6, 8, "t2"),
        (8, 9, "t1"),
        (9, 10, "t3"),
    ]
    .iter()
    .map(|&(a, b, t)| (a * MS, b * MS, t.to_string()))
    .collect();
    assert_eq!(got, &expected, "idle in [10, 12)");
    let wcrt: Vec<u64> = ["t1", "t2", "t3"]
        .iter()
        .map(|t| stats(&report, t).max_response_ns)
        .collect();
    assert_eq!(wcrt, [MS, 3 * MS, 10 * MS]);
    assert_eq!(report.jobs, 3 + 2 + 1);
    assert!(report.tasks.iter().all(|t| t.misses == 0));
}

/// JuMP2start Fig. 5 with the stop protocol (Fig. 2) and the stale/fresh rule, worked
/// by hand. CPU 0 runs Fig. 5 (restartable tau1 in partition `ctl`, continuable tau2 in
/// `hmi`); CPU 1 runs `sense` (partition `gw`, C=1, T=2), which writes `frames` (fifo)
/// that tau1 reads, one per job. Suspend order hmi, ctl, gw; acknowledgement deadline 2;
/// the suspend request at 5, suspended for 7.
///
/// At 5: tau1 finished its job at 4 and waits for 8 (acknowledges); sense completed its
/// job released at 4 at 5, before the request (acknowledges); tau2 is in the job it
/// started at 4 (cannot). So hmi is frozen at the deadline, wall 5 + 2 = 7, and ctl and
/// gw after it at 7; system suspended at 7, resume requested at 7 + 7 = 14, partitions
/// thawed in reverse (gw, ctl, hmi) and the system resumed at 14 (system time 5 for all:
/// the stop is left out). Frames 0-2 (written at 1, 3, 5) are stale for tau1: dropped.
/// tau1's fresh job at 5 finds no frame (sense's next release moved from 6 to 7); sense
/// writes frame 3 at 8; tau1's job of 13 reads it and completes at 17: its first fresh
/// frame, at wall time 17 + 9 = 26.
#[test]
fn jump2start_stop_protocol_order_acknowledgements_and_fresh_frames() {
    let mut spec = one_cpu(Policy::FixedPriority);
    let tau1 = add_task(&mut spec, "tau1", ServerKind::Sporadic, 4 * MS, 8 * MS, 1);
    let tau2 = add_task(&mut spec, "tau2", ServerKind::Sporadic, 3 * MS, 10 * MS, 2);
    let sense = add_task(&mut spec, "sense", ServerKind::Sporadic, MS, 2 * MS, 1);
    spec.domains.push(Domain {
        name: "gw".into(),
        cpus: vec![1],
        policy: Policy::FixedPriority,
    });
    spec.servers[spec.tasks[sense].server].domain = 1;
    for (task, partition) in [(tau1, "ctl"), (tau2, "hmi"), (sense, "gw")] {
        spec.tasks[task].partition = partition.into();
    }
    spec.tasks[tau1].resume = Resume::Restartable;
    add_channel(&mut spec, "frames", ChannelKind::Fifo, 8, sense, tau1);
    let options = Options {
        suspensions: vec![Suspension {
            at: 5 * MS,
            duration: 7 * MS,
        }],
        stop: stop::StopSpec {
            order: vec!["hmi".into(), "ctl".into(), "gw".into()],
            ack_deadline: 2 * MS,
            awake: Vec::new(),
        },
        ..Options::until(20 * MS)
    };
    let (report, events) = run(&spec, options);
    // Fig. 5's schedule is unchanged on CPU 0.
    let fig5: Vec<(u64, u64, String)> = [
        (0, 4, "tau1"),
        (4, 5, "tau2"),
        (5, 9, "tau1"),
        (9, 11, "tau2"),
        (13, 17, "tau1"),
        (17, 20, "tau2"),
    ]
    .iter()
    .map(|&(a, b, t)| (a * MS, b * MS, t.to_string()))
    .collect();
    assert_eq!(&segments(&events)[&0], &fig5);
    let got: Vec<(&str, u64, u64, String, Vec<String>)> = report
        .stops
        .iter()
        .map(|e| {
            let who = e.task.clone().or(e.partition.clone()).unwrap_or_default();
            (
                e.event,
                e.system_ns / MS,
                e.wall_ns / MS,
                who,
                e.not_acked.clone(),
            )
        })
        .collect();
    let none = Vec::new;
    let expected = vec![
        ("suspend_request", 5, 5, String::new(), none()),
        (
            "partition_suspended",
            5,
            7,
            "hmi".into(),
            vec!["tau2".to_string()],
        ),
        ("partition_suspended", 5, 7, "ctl".into(), none()),
        ("partition_suspended", 5, 7, "gw".into(), none()),
        ("system_suspended", 5, 7, String::new(), none()),
        ("resume_request", 5, 14, String::new(), none()),
        ("partition_resumed", 5, 14, "gw".into(), none()),
        ("partition_resumed", 5, 14, "ctl".into(), none()),
        ("partition_resumed", 5, 14, "hmi".into(), none()),
        ("system_resumed", 5, 14, String::new(), none()),
        ("first_fresh_frame", 17, 26, "tau1".into(), none()),
    ];
    assert_eq!(got, expected);
    let frames = &report.channels[0];
    assert_eq!((frames.stale, frames.lost), (3, 0), "{frames:?}");
    // What tau1 read: nothing before the stop, nothing stale after it, frame 3 first.
    let reads: Vec<(u64, u64)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ChannelRead { task, msg, .. } if task.as_ref() == "tau1" => {
                Some((e.t_ns / MS, *msg))
            }
            _ => None,
        })
        .collect();
    assert_eq!(reads.first(), Some(&(13, 3)), "{reads:?}");
}

/// The same kind of stop with `gw` awake, as `run` keeps the gateway of a bus a
/// stop-start trigger watches: the protocol neither asks nor freezes it (no
/// `partition_suspended` or `partition_resumed` for it), and its restartable task is
/// not restarted (it would get a fresh job at the resume instant 5); it goes on as a
/// continuable task.
#[test]
fn a_trigger_gateway_stays_awake_through_a_stop() {
    let mut spec = one_cpu(Policy::FixedPriority);
    let tau1 = add_task(&mut spec, "tau1", ServerKind::Sporadic, 4 * MS, 8 * MS, 1);
    let sense = add_task(&mut spec, "sense", ServerKind::Sporadic, MS, 2 * MS, 1);
    spec.domains.push(Domain {
        name: "gw".into(),
        cpus: vec![1],
        policy: Policy::FixedPriority,
    });
    spec.servers[spec.tasks[sense].server].domain = 1;
    spec.tasks[tau1].partition = "ctl".into();
    spec.tasks[sense].partition = "gw".into();
    spec.tasks[sense].resume = Resume::Restartable;
    let options = Options {
        suspensions: vec![Suspension {
            at: 5 * MS,
            duration: 7 * MS,
        }],
        stop: stop::StopSpec {
            awake: vec!["gw".into()],
            ..stop::StopSpec::default()
        },
        ..Options::until(20 * MS)
    };
    let (report, events) = run(&spec, options);
    let stops: Vec<String> = report
        .stops
        .iter()
        .map(|e| format!("{} {}", e.event, e.partition.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        stops,
        [
            "suspend_request ",
            "partition_suspended ctl",
            "system_suspended ",
            "resume_request ",
            "partition_resumed ctl",
            "system_resumed ",
        ]
    );
    let releases: Vec<u64> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::JobRelease { task, .. } if task.as_ref() == "sense" => Some(e.t_ns / MS),
            _ => None,
        })
        .collect();
    assert!(
        !releases.contains(&5),
        "restarted at the resume: {releases:?}"
    );
}

/// JuMP2start Fig. 5: restartable tau1 (C=4, T=8) and continuable tau2 (C=3, T=10)
/// under sporadic servers and RMS; the system suspends at t=5 for 7 time units.
/// tau1 restarts with a full budget at the stitched resume time 5; tau2 keeps its
/// budget, resumes at 9, completes at 11, and its next release is at 5 + T2 = 15.
#[test]
fn jump2start_fig5_restartable_and_continuable() {
    let mut spec = one_cpu(Policy::FixedPriority);
    let tau1 = add_task(&mut spec, "tau1", ServerKind::Sporadic, 4 * MS, 8 * MS, 1);
    let tau2 = add_task(&mut spec, "tau2", ServerKind::Sporadic, 3 * MS, 10 * MS, 2);
    spec.tasks[tau1].resume = Resume::Restartable;
    spec.tasks[tau2].resume = Resume::Continuable;
    let options = Options {
        suspensions: vec![Suspension {
            at: 5 * MS,
            duration: 7 * MS,
        }],
        ..Options::until(20 * MS)
    };
    let (report, events) = run(&spec, options);
    let got = &segments(&events)[&0];
    let expected: Vec<(u64, u64, String)> = [
        (0, 4, "tau1"),
        (4, 5, "tau2"),
        (5, 9, "tau1"),
        (9, 11, "tau2"),
        (13, 17, "tau1"),
        (17, 20, "tau2"),
    ]
    .iter()
    .map(|&(a, b, t)| (a * MS, b * MS, t.to_string()))
    .collect();
    assert_eq!(got, &expected);
    assert_eq!(
        times(&events, "tau2", |k| matches!(k, EventKind::JobStart { .. })),
        [4 * MS, 9 * MS, 17 * MS]
    );
    assert_eq!(
        times(&events, "tau2", |k| matches!(
            k,
            EventKind::JobComplete { .. }
        )),
        [11 * MS, 20 * MS]
    );
    assert_eq!(
        times(&events, "tau2", |k| matches!(
            k,
            EventKind::JobRelease { .. }
        )),
        [0, 15 * MS]
    );
    // tau1 gets a fresh job at the resume time, its period restarting there.
    assert_eq!(
        times(&events, "tau1", |k| matches!(
            k,
            EventKind::JobRelease { .. }
        )),
        [0, 5 * MS, 13 * MS]
    );
    let suspend = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Suspend {}))
        .unwrap();
    let resume = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Resume { suspended_ns: d } if d == 7 * MS))
        .unwrap();
    assert_eq!(
        (suspend.t_ns, resume.t_ns),
        (5 * MS, 5 * MS),
        "system time excludes the suspension"
    );
    // Both resumed instances meet their renewed deadlines (13 and 15).
    assert_eq!(
        stats(&report, "tau1").misses + stats(&report, "tau2").misses,
        0
    );
}

/// Boomerang Sec. III-E, Fig. 7: T tasks with budget 1 every T share a CPU; a
/// two-stage pipe tpipe1 -> tpipe2 processes data sampled by a sensor task. When
/// the other tasks and tpipe2 run before tpipe1, the data waits 2T-1 end to end.
#[test]
fn boomerang_fig7_worst_case_two_stage_delay() {
    for big_t in [4u32, 5, 10] {
        let unit = MS;
        let period = big_t as u64 * unit;
        let mut spec = one_cpu(Policy::FixedPriority);
        // The sensor samples D_in at its release and runs first; the other T-3 tasks
        // follow; then tpipe2 (old data), then tpipe1.
        let sensor = add_task(&mut spec, "sensor", ServerKind::Sporadic, unit, period, 1);
        for i in 0..big_t - 3 {
            add_task(
                &mut spec,
                &format!("other{i}"),
                ServerKind::Sporadic,
                unit,
                period,
                2 + i,
            );
        }
        let tpipe2 = add_task(
            &mut spec,
            "tpipe2",
            ServerKind::Sporadic,
            unit,
            period,
            big_t - 1,
        );
        let tpipe1 = add_task(
            &mut spec,
            "tpipe1",
            ServerKind::Sporadic,
            unit,
            period,
            big_t,
        );
        add_channel(&mut spec, "d_in", ChannelKind::Latest, 1, sensor, tpipe1);
        add_channel(&mut spec, "pipe", ChannelKind::Latest, 1, tpipe1, tpipe2);
        assert_eq!(spec.tasks.len(), big_t as usize);
        let (report, _) = run(&spec, Options::until(20 * period));
        let chain = &report.chains[0];
        assert_eq!(chain.name, "p/sensor -> p/tpipe2");
        assert_eq!(
            chain.max_delay_ns,
            Some((2 * big_t as u64 - 1) * unit),
            "T = {big_t}"
        );
        assert_eq!(
            chain.min_delay_ns, chain.max_delay_ns,
            "every sample waits the worst case here"
        );
        assert_eq!(chain.lost, 0);
        assert!(chain.delivered >= 17);
    }
}

/// M2-Xen Sec. VI-C: a VCPU (deferrable server, RTDS) with B = 4 ms, P = 10 ms whose
/// guest keeps it busy. A mode-change request reaching the guest's mode manager
/// (DMM) when the budget is exhausted waits for the replenishment: up to
/// P - B = 6 ms.
#[test]
fn m2xen_budget_replenishment_delay_is_at_most_p_minus_b() {
    let (b, p) = (4 * MS, 10 * MS);
    let step = MS / 2;
    let arrivals: Vec<u64> = (0..20).map(|k| k * (p + step)).collect(); // phases 0, 0.5, ... 9.5 ms
    let mut spec = one_cpu(Policy::FixedPriority);
    spec.servers.push(Server {
        domain: 0,
        kind: ServerKind::Deferrable,
        budget: b,
        period: p,
        priority: 1,
    });
    let task = |name: &str, priority, release, exec| TaskSpec {
        partition: "dom1".into(),
        name: name.into(),
        server: 0,
        priority,
        deadline: p,
        release,
        exec,
        resume: Resume::Continuable,
        inputs: vec![],
        outputs: vec![],
    };
    spec.tasks.push(task(
        "dmm",
        1,
        Release::At(arrivals.clone()),
        Exec::Fixed(1_000),
    ));
    spec.tasks.push(task(
        "busy",
        2,
        Release::Periodic {
            period: p,
            offset: 0,
            jitter: 0,
        },
        Exec::Fixed(p),
    ));
    let (_, events) = run(&spec, Options::until(arrivals[19] + 2 * p));
    let starts = times(&events, "dmm", |k| matches!(k, EventKind::JobStart { .. }));
    let releases = times(&events, "dmm", |k| {
        matches!(k, EventKind::JobRelease { .. })
    });
    assert_eq!(releases, arrivals);
    let delays: Vec<u64> = releases.iter().zip(&starts).map(|(r, s)| s - r).collect();
    // With budget left the request is handled at once; after exhaustion it waits for
    // the next period boundary: P - phase, at most P - B.
    for (k, &delay) in delays.iter().enumerate() {
        let phase = arrivals[k] % p;
        let expected = if phase < b { 0 } else { p - phase };
        assert_eq!(delay, expected, "request at phase {phase}");
    }
    assert_eq!(delays.iter().max(), Some(&(p - b)));
}
