//! The overflow rules of a full fifo and the platform's stalls in simulation
//! (docs/pipes.md, docs/platform.md).

mod common;

use bulkhead_model::{ChannelKind, Overflow};
use bulkhead_sim::*;
use common::*;

/// A producer every 1 ms (priority 1) writing to a fifo of 4 that a consumer every 2 ms
/// reads one message per job: the producer outpaces the consumer, so the fifo fills,
/// and what happens then is the channel's overflow rule.
fn outpaced(overflow: Overflow) -> Report {
    let mut spec = one_cpu(Policy::FixedPriority);
    let w = add_task(&mut spec, "w", ServerKind::Unlimited, 100_000, MS, 1);
    let r = add_task(&mut spec, "r", ServerKind::Unlimited, 100_000, 2 * MS, 2);
    add_channel(&mut spec, "ch", ChannelKind::Fifo, 4, w, r);
    spec.channels[0].overflow = overflow;
    run(&spec, Options::until(1000 * MS)).0
}

#[test]
fn drop_newest_loses_the_writes_to_a_full_fifo_and_delivers_the_old_messages() {
    let report = outpaced(Overflow::DropNewest);
    let ch = &report.channels[0];
    assert_eq!((ch.written, ch.read), (1000, 500));
    assert!((495..=500).contains(&ch.lost), "{ch:?}");
    // The messages delivered waited in a full ring: 4 reads of 2 ms, about 8 ms.
    let chain = &report.chains[0];
    assert!(chain.max_delay_ns.unwrap() >= 7 * MS, "{chain:?}");
    assert_eq!(stats(&report, "w").misses, 0, "the writer never waits");
}

#[test]
fn drop_oldest_loses_as_many_but_delivers_the_freshest() {
    let newest = outpaced(Overflow::DropNewest);
    let report = outpaced(Overflow::DropOldest);
    let ch = &report.channels[0];
    assert_eq!(ch.lost, newest.channels[0].lost, "{ch:?}");
    // The ring holds the 4 newest: a message read waited at most about 4 ms.
    let chain = &report.chains[0];
    assert!(chain.max_delay_ns.unwrap() <= 5 * MS, "{chain:?}");
    assert!(chain.max_delay_ns < newest.chains[0].max_delay_ns);
}

#[test]
fn block_makes_the_writer_wait_and_loses_nothing() {
    let report = outpaced(Overflow::Block);
    let ch = &report.channels[0];
    assert_eq!(ch.lost, 0, "{ch:?}");
    // The writer is held to the reader's rate: about 500 of its 1,000 jobs complete
    // (each waits for a read), the rest wait and miss their deadlines.
    let w = stats(&report, "w");
    assert!((500..=506).contains(&w.jobs), "{w:?}");
    assert!(w.misses > 400, "{w:?}");
    assert_eq!(ch.written, w.jobs);
    let chain = &report.chains[0];
    assert_eq!(chain.lost, 0, "{chain:?}");
}

/// A stall takes the CPU away: the job running then stops where it is and completes
/// the stall's length later; a job released in it starts when it ends.
#[test]
fn a_stall_holds_the_cpu_and_what_runs_on_it() {
    let mut spec = one_cpu(Policy::FixedPriority);
    add_task(&mut spec, "a", ServerKind::Unlimited, 2 * MS, 10 * MS, 1);
    let stalls = vec![
        Stall {
            cpu: 0,
            at: MS,
            duration: 3 * MS,
        },
        Stall {
            cpu: 0,
            at: 25 * MS,
            duration: 10 * MS,
        },
    ];
    let options = Options {
        stalls,
        ..Options::until(50 * MS)
    };
    let (report, events) = run(&spec, options);
    let done = times(&events, "a", |k| {
        matches!(k, bulkhead_trace::EventKind::JobComplete { .. })
    });
    // Job 0: 1 ms, 3 ms held, 1 ms more. Job 1: 10-12 ms. Job 2 (20 ms): done before the
    // stall at 25 ms. Job 3 (30 ms): released in the stall, runs 35-37 ms.
    assert_eq!(done, [5 * MS, 12 * MS, 22 * MS, 37 * MS, 42 * MS]);
    assert_eq!(stats(&report, "a").max_response_ns, 7 * MS);
}

/// A stall of one CPU of a two-CPU domain leaves the other running its work.
#[test]
fn a_stall_of_one_cpu_leaves_the_other_running() {
    let mut spec = one_cpu(Policy::Edf);
    spec.domains[0].cpus = vec![0, 1];
    add_task(&mut spec, "a", ServerKind::Unlimited, 4 * MS, 10 * MS, 1);
    add_task(&mut spec, "b", ServerKind::Unlimited, 4 * MS, 10 * MS, 1);
    let stall = Stall {
        cpu: 1,
        at: 0,
        duration: 8 * MS,
    };
    let options = Options {
        stalls: vec![stall],
        ..Options::until(10 * MS)
    };
    let (report, _) = run(&spec, options);
    // Both run on CPU 0 one after the other: 4 and 8 ms.
    let worst = |n: &str| stats(&report, n).max_response_ns;
    assert_eq!(
        (worst("a").min(worst("b")), worst("a").max(worst("b"))),
        (4 * MS, 8 * MS)
    );
}

#[test]
fn random_stalls_are_drawn_from_their_seed_within_their_bounds() {
    let a = random_stalls(&[0, 1], 7, 5.0, 5 * MS, 10_000 * MS);
    assert_eq!(a, random_stalls(&[0, 1], 7, 5.0, 5 * MS, 10_000 * MS));
    assert_ne!(a, random_stalls(&[0, 1], 8, 5.0, 5 * MS, 10_000 * MS));
    // About 5 a second per CPU for 10 s.
    assert!((60..=140).contains(&a.len()), "{}", a.len());
    assert!(a
        .iter()
        .all(|s| s.duration >= 1 && s.duration <= 5 * MS && s.at < 10_000 * MS));
    for cpu in [0, 1] {
        let mine: Vec<&Stall> = a.iter().filter(|s| s.cpu == cpu).collect();
        assert!(mine.windows(2).all(|w| w[0].at + w[0].duration <= w[1].at));
    }
    assert!(random_stalls(&[0], 1, 0.0, MS, 1000 * MS).is_empty());
}
