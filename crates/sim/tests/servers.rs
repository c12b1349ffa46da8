//! Servers, policies, releases and channels, observed from the trace and statistics.

mod common;

use bulkhead_model::ChannelKind;
use bulkhead_sim::*;
use bulkhead_trace::EventKind;
use common::*;
use proptest::prelude::*;

/// Execution intervals of `task` on any CPU.
fn busy(events: &[bulkhead_trace::Event], task: &str) -> Vec<(u64, u64)> {
    segments(events)
        .into_values()
        .flatten()
        .filter(|s| s.2 == task)
        .map(|s| (s.0, s.1))
        .collect()
}

/// Largest execution inside any window of length `w` (starting at a segment start,
/// where the maximum of a sliding window over piecewise-constant execution lies).
fn max_in_window(intervals: &[(u64, u64)], w: u64) -> u64 {
    intervals
        .iter()
        .map(|&(start, _)| {
            intervals
                .iter()
                .map(|&(a, b)| b.min(start + w).saturating_sub(a.max(start)))
                .sum()
        })
        .max()
        .unwrap_or(0)
}

fn overrunning(kind: ServerKind, c: u64, t: u64, exec: Exec, release: Release) -> Spec {
    let mut spec = one_cpu(Policy::FixedPriority);
    let i = add_task(&mut spec, "hog", kind, c, t, 1);
    spec.tasks[i].exec = exec;
    spec.tasks[i].release = release;
    spec
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Sporadic server: whatever arrives and however long it runs, no window of
    /// length T sees more than C of execution (Sprunt et al.; Stanovich et al. 2010).
    #[test]
    fn sporadic_server_never_exceeds_its_budget_in_any_period(
        gaps in proptest::collection::vec(1u64..40, 1..40),
        exec in (1u64..30, 0u64..30),
    ) {
        let (c, t) = (4 * MS, 10 * MS);
        let mut at = 0;
        let arrivals: Vec<u64> = gaps.iter().map(|g| { at += g * MS / 4; at }).collect();
        let until = at + 5 * t;
        let exec = Exec::Uniform { min: exec.0 * MS / 4, max: (exec.0 + exec.1) * MS / 4 };
        let spec = overrunning(ServerKind::Sporadic, c, t, exec, Release::At(arrivals));
        let (_, events) = run(&spec, Options { seed: gaps.len() as u64, ..Options::until(until) });
        prop_assert!(max_in_window(&busy(&events, "hog"), t) <= c);
    }

    /// Deferrable server: at most B in each period [kP, (k+1)P).
    #[test]
    fn deferrable_server_never_exceeds_its_budget_per_period(
        gaps in proptest::collection::vec(1u64..40, 1..40),
        exec in 1u64..60,
    ) {
        let (b, p) = (3 * MS, 10 * MS);
        let mut at = 0;
        let arrivals: Vec<u64> = gaps.iter().map(|g| { at += g * MS / 4; at }).collect();
        let spec = overrunning(ServerKind::Deferrable, b, p, Exec::Fixed(exec * MS / 4), Release::At(arrivals));
        let (_, events) = run(&spec, Options::until(at + 5 * p));
        let intervals = busy(&events, "hog");
        for k in 0..(at + 5 * p) / p {
            let used: u64 = intervals.iter().map(|&(a, e)| e.min((k + 1) * p).saturating_sub(a.max(k * p))).sum();
            prop_assert!(used <= b, "period {k}: {used}");
        }
    }

    /// CBS temporal isolation (Abeni & Buttazzo 1998, Theorem 1): under EDF with total
    /// bandwidth at most 1, a periodic task inside its reservation meets every
    /// deadline however much a neighbouring CBS-served task overruns.
    #[test]
    fn cbs_isolates_a_task_from_an_overrunning_neighbour(
        q_hog in 1u64..6, t_hog in 6u64..20, c in 1u64..5, overrun in 1u64..50,
    ) {
        let t = 10;
        prop_assume!(q_hog * t + c * t_hog <= t * t_hog); // Q_hog/T_hog + C/T <= 1
        let mut spec = one_cpu(Policy::Edf);
        let hog = add_task(&mut spec, "hog", ServerKind::Cbs, q_hog * MS, t_hog * MS, 1);
        spec.tasks[hog].exec = Exec::Fixed(overrun * MS);
        add_task(&mut spec, "good", ServerKind::Cbs, c * MS, t * MS, 1);
        let report = simulate(&spec, Options::until(400 * MS), &mut bulkhead_trace::Discard).unwrap();
        prop_assert_eq!(stats(&report, "good").misses, 0);
        prop_assert!(stats(&report, "good").jobs >= 39);
    }
}

#[test]
fn cbs_throttles_at_zero_budget_until_its_deadline() {
    // Q = 1 ms, T = 4 ms, a single 3 ms job: runs [0,1), [4,5), [8,9) as SCHED_DEADLINE does.
    let spec = overrunning(
        ServerKind::Cbs,
        MS,
        4 * MS,
        Exec::Fixed(3 * MS),
        Release::At(vec![0]),
    );
    let (report, events) = run(&spec, Options::until(20 * MS));
    assert_eq!(
        busy(&events, "hog"),
        [(0, MS), (4 * MS, 5 * MS), (8 * MS, 9 * MS)]
    );
    assert_eq!(stats(&report, "hog").max_response_ns, 9 * MS);
}

#[test]
fn io_server_gets_a_single_replenishment_at_activation_plus_used_over_utilization() {
    // DriveOS 4.1: U_io = 10 % of a 1 ms task period: 100 us budget. A request needing
    // 250 us runs 100 us, is eligible again at 0 + 100us/0.1 = 1 ms, and so on.
    let mut spec = one_cpu(Policy::FixedPriority);
    spec.servers.push(Server::io(0, 100, MS, 1));
    let task = add_task(&mut spec, "usb_bh", ServerKind::Unlimited, 0, MS, 1);
    spec.servers.remove(1);
    spec.tasks[task].server = 0;
    spec.tasks[task].exec = Exec::Fixed(250_000);
    spec.tasks[task].release = Release::At(vec![0, 5 * MS]);
    let (_, events) = run(&spec, Options::until(8 * MS));
    let us = 1_000;
    assert_eq!(
        busy(&events, "usb_bh"),
        [
            (0, 100 * us),
            (1_000 * us, 1_100 * us),
            (2_000 * us, 2_050 * us),
            (5_000 * us, 5_100 * us),
            (6_000 * us, 6_100 * us),
            (7_000 * us, 7_050 * us)
        ]
    );
    // After using only 50 us from activation at 2 ms, it would be eligible at 2.5 ms.
    assert_eq!(max_in_window(&busy(&events, "usb_bh"), MS), 100 * us);
}

#[test]
fn edf_schedules_what_rate_monotonic_cannot() {
    // (2,5), (4,7): U = 0.97; RM misses (t2's response 8 > 7), EDF does not.
    let misses = |policy| {
        let mut spec = one_cpu(policy);
        add_task(&mut spec, "t1", ServerKind::Unlimited, 2 * MS, 5 * MS, 1);
        add_task(&mut spec, "t2", ServerKind::Unlimited, 4 * MS, 7 * MS, 2);
        let report =
            simulate(&spec, Options::until(35 * MS), &mut bulkhead_trace::Discard).unwrap();
        report.tasks.iter().map(|t| t.misses).sum::<u64>()
    };
    assert_eq!(misses(Policy::Edf), 0);
    assert!(misses(Policy::FixedPriority) > 0);
}

#[test]
fn a_domain_with_two_cpus_runs_the_two_highest_priority_jobs() {
    let mut spec = one_cpu(Policy::FixedPriority);
    spec.domains[0].cpus = vec![2, 3];
    for (i, c) in [3, 3, 3].iter().enumerate() {
        add_task(
            &mut spec,
            &format!("t{i}"),
            ServerKind::Unlimited,
            c * MS,
            10 * MS,
            i as u32 + 1,
        );
    }
    let (report, events) = run(&spec, Options::until(10 * MS));
    let seg = segments(&events);
    assert_eq!(seg.keys().copied().collect::<Vec<_>>(), [2, 3]);
    let rt: Vec<u64> = report.tasks.iter().map(|t| t.max_response_ns).collect();
    assert_eq!(
        rt,
        [3 * MS, 3 * MS, 6 * MS],
        "t3 waits for the first CPU to free up"
    );
}

#[test]
fn sporadic_releases_respect_the_minimum_gap_and_the_seed() {
    let releases = |seed| {
        let mut spec = one_cpu(Policy::FixedPriority);
        let t = add_task(&mut spec, "s", ServerKind::Unlimited, MS, 10 * MS, 1);
        spec.tasks[t].release = Release::Sporadic {
            min_gap: 10 * MS,
            offset: 0,
            max_extra: 5 * MS,
        };
        let (_, events) = run(
            &spec,
            Options {
                seed,
                ..Options::until(MS * 1000)
            },
        );
        times(&events, "s", |k| matches!(k, EventKind::JobRelease { .. }))
    };
    let r = releases(1);
    assert!(r
        .windows(2)
        .all(|w| (10 * MS..=15 * MS).contains(&(w[1] - w[0]))));
    assert!(r.windows(2).any(|w| w[1] - w[0] > 10 * MS), "gaps vary");
    assert_eq!(r, releases(1));
    assert_ne!(r, releases(2));
}

#[test]
fn fifo_loses_writes_to_a_full_ring_latest_loses_unread_messages() {
    // A producer every 1 ms, a consumer every 2 ms reading one message per job.
    let chain = |kind, depth| {
        let mut spec = one_cpu(Policy::FixedPriority);
        let w = add_task(&mut spec, "w", ServerKind::Unlimited, 100_000, MS, 1);
        let r = add_task(&mut spec, "r", ServerKind::Unlimited, 100_000, 2 * MS, 2);
        add_channel(&mut spec, "ch", kind, depth, w, r);
        let (report, _) = run(&spec, Options::until(1000 * MS));
        report
    };
    let fifo = chain(ChannelKind::Fifo, 4);
    assert_eq!(fifo.channels[0].written, 1000);
    assert_eq!(fifo.channels[0].read, 500);
    // The ring fills up, then every other write finds it full.
    assert!(
        (495..=500).contains(&fifo.channels[0].lost),
        "{:?}",
        fifo.channels[0]
    );
    let latest = chain(ChannelKind::Latest, 1);
    // Boomerang Sec. III-D: loss rate 1 - Tp/Tc = 1/2.
    let c = &latest.chains[0];
    assert_eq!(
        (latest.channels[0].written, latest.channels[0].lost),
        (1000, 499),
        "the last one is still unread"
    );
    assert_eq!(
        c.delivered + c.lost + 1,
        1000,
        "every message but the last in flight is delivered or lost"
    );
    assert!((c.lost as f64 / c.produced as f64 - 0.5).abs() < 0.01);
    assert_eq!(c.throughput_per_s, 500.0);
}

#[test]
fn continuable_tasks_without_a_suspension_run_unchanged() {
    let mut spec = one_cpu(Policy::FixedPriority);
    add_task(&mut spec, "a", ServerKind::Sporadic, MS, 4 * MS, 1);
    add_task(&mut spec, "b", ServerKind::Sporadic, 2 * MS, 6 * MS, 2);
    let (_, plain) = run(&spec, Options::until(24 * MS));
    let suspended = Options {
        suspensions: vec![Suspension {
            at: 12 * MS,
            duration: 5 * MS,
        }],
        ..Options::until(24 * MS)
    };
    let (_, with) = run(&spec, suspended);
    // Both tasks are released at 12 ms (hyperperiod boundary): their periods restart
    // exactly where they were, so the schedule is the same.
    assert_eq!(segments(&plain), segments(&with));
    assert!(
        with.windows(2).all(|w| w[0].t_ns <= w[1].t_ns),
        "events in system-time order"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Whatever the task set, server, policy and resume mode, events come in time
    /// order and a CPU never runs two jobs at once: the Perfetto export of a
    /// simulation needs no extra lanes, and its slices nest.
    #[test]
    fn simulated_traces_export_one_track_per_cpu(
        tasks in proptest::collection::vec((1u64..5, 5u64..20, any::<bool>()), 1..6),
        kind in prop_oneof![Just(ServerKind::Unlimited), Just(ServerKind::Sporadic), Just(ServerKind::Deferrable), Just(ServerKind::Cbs)],
        edf in any::<bool>(),
        two_cpus in any::<bool>(),
        seed in 0u64..100,
    ) {
        let mut spec = one_cpu(if edf { Policy::Edf } else { Policy::FixedPriority });
        if two_cpus {
            spec.domains[0].cpus = vec![0, 1];
        }
        for (i, &(c, t, restartable)) in tasks.iter().enumerate() {
            let task = add_task(&mut spec, &format!("t{i}"), kind, c * MS, t * MS, i as u32 + 1);
            spec.tasks[task].exec = Exec::Uniform { min: c * MS / 2, max: c * MS * 3 / 2 };
            if restartable {
                spec.tasks[task].resume = bulkhead_model::Resume::Restartable;
            }
        }
        let options = Options { seed, suspensions: vec![Suspension { at: 7 * MS, duration: MS }], ..Options::until(100 * MS) };
        let (_, events) = run(&spec, options);
        prop_assert!(events.windows(2).all(|w| w[0].t_ns <= w[1].t_ns), "events in time order");
        let json = bulkhead_trace::perfetto::export(&events);
        let slices: Vec<(u64, f64, f64)> = json["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X" && e["pid"] == 1)
            .map(|e| (e["tid"].as_u64().unwrap(), e["ts"].as_f64().unwrap(), e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap()))
            .collect();
        prop_assert!(slices.iter().all(|s| s.0 <= 2), "an extra lane was needed");
        for (i, a) in slices.iter().enumerate() {
            for b in &slices[i + 1..] {
                prop_assert!(a.0 != b.0 || a.2 <= b.1 + 1e-9 || b.2 <= a.1 + 1e-9, "{a:?} overlaps {b:?}");
            }
        }
    }
}

#[test]
fn an_overloaded_task_drops_releases_beyond_the_backlog_instead_of_growing_without_bound() {
    let mut spec = one_cpu(Policy::FixedPriority);
    add_task(&mut spec, "a", ServerKind::Unlimited, 2_000, 1_000, 1); // U = 2
    let report = simulate(
        &spec,
        Options::until(1_000 * (2 * MAX_BACKLOG as u64 + 10)),
        &mut bulkhead_trace::Discard,
    )
    .unwrap();
    let a = stats(&report, "a");
    assert!(
        (MAX_BACKLOG as u64 - 1..=MAX_BACKLOG as u64).contains(&a.pending),
        "{a:?}"
    );
    assert!(a.dropped > 0);
    assert_eq!(a.released, a.jobs + a.pending + a.dropped);
}
