//! Real processes under a TaskLink: the bulkhead-periodic program uses the task library;
//! the supervisor side drains its trace ring.

use bulkhead_task::clock::now_ns;
use bulkhead_task::flags;
use bulkhead_task::link::{LinkSpec, TaskLink};
use std::process::{Command, Stdio};

const MS: u64 = 1_000_000;

fn spec(name: &str, budget: u64, period: u64, deadline: u64, start_in: u64) -> LinkSpec {
    LinkSpec {
        name: name.into(),
        task_index: 0,
        budget_ns: budget,
        period_ns: period,
        deadline_ns: deadline,
        epoch_ns: now_ns() + start_in,
        ring_depth: 256,
    }
}

fn periodic(link: &TaskLink, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bulkhead-periodic"));
    cmd.args(args).stdin(Stdio::null());
    link.prepare(&mut cmd);
    cmd
}

/// Runs `cmd` to completion (killed after 30 s) and returns its exit status code.
fn run(cmd: &mut Command) -> i32 {
    let mut child = cmd.spawn().expect("spawns");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the task did not finish within 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn every_activation_reaches_the_supervisor() {
    let mut link = TaskLink::create(&spec("steady", 2 * MS, 10 * MS, 10 * MS, 20 * MS)).unwrap();
    let epoch = link.epoch_ns();
    assert_eq!(
        run(&mut periodic(
            &link,
            &["--exec-us", "300", "--activations", "30"]
        )),
        0
    );
    let mut recs = Vec::new();
    link.drain(&mut recs);
    assert_eq!(recs.len(), 30, "{recs:?}");
    // Each record is on the release grid, and consecutive indices differ by one plus the
    // releases skipped (a loaded machine can delay this SCHED_OTHER task by a period).
    let mut expect = 0;
    for r in &recs {
        assert_eq!(r.index, expect + r.skipped as u64, "{r:?}");
        assert_eq!(r.release_ns, epoch + r.index * 10 * MS);
        assert!(
            r.start_ns >= r.release_ns && r.end_ns >= r.start_ns + 300_000,
            "{r:?}"
        );
        expect = r.index + 1;
    }
    let c = link.counters();
    assert_eq!((c.activations, c.dropped), (30, 0));
    assert!(c.pid > 0);
}

#[test]
fn an_overrunning_task_reports_overruns_and_skips() {
    // 25 ms of work every 10 ms: every activation starts late and skips releases.
    let mut link = TaskLink::create(&spec("late", 2 * MS, 10 * MS, 10 * MS, 0)).unwrap();
    assert_eq!(
        run(&mut periodic(
            &link,
            &["--exec-us", "25000", "--activations", "5"]
        )),
        0
    );
    let mut recs = Vec::new();
    link.drain(&mut recs);
    assert_eq!(recs.len(), 5);
    for r in &recs[1..] {
        assert!(r.flags & flags::OVERRUN != 0, "{r:?}");
        assert!(r.flags & flags::SKIPPED != 0 && r.skipped >= 1, "{r:?}");
        assert!(r.missed(10 * MS), "{r:?}");
    }
    assert!(recs.windows(2).all(|w| w[1].index > w[0].index + 1));
}

#[test]
fn a_restarted_task_says_so_once() {
    let mut link = TaskLink::create(&spec("phoenix", MS, 5 * MS, 5 * MS, 0)).unwrap();
    assert_eq!(
        run(&mut periodic(
            &link,
            &["--exec-us", "100", "--activations", "3"]
        )),
        0
    );
    let mut recs = Vec::new();
    link.restart(&mut recs).unwrap();
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| r.flags & flags::RESTARTED == 0));
    assert_eq!(
        run(&mut periodic(
            &link,
            &["--exec-us", "100", "--activations", "3"]
        )),
        0
    );
    let mut again = Vec::new();
    link.drain(&mut again);
    assert_eq!(again.len(), 3);
    assert!(again[0].flags & flags::RESTARTED != 0, "{:?}", again[0]);
    assert!(again[1..].iter().all(|r| r.flags & flags::RESTARTED == 0));
    assert!(again[0].index > recs[2].index);
    assert_eq!(link.counters().restarts, 1);
}

#[test]
fn a_stop_request_ends_the_task() {
    let link = TaskLink::create(&spec("stoppable", MS, 5 * MS, 5 * MS, 0)).unwrap();
    let mut child = periodic(&link, &["--exec-us", "100"]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    link.request_stop();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(link.counters().activations >= 2);
}

#[test]
fn without_a_supervisor_the_program_says_why() {
    let out = Command::new(env!("CARGO_BIN_EXE_bulkhead-periodic"))
        .env_remove("BULKHEAD_TASK")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("BULKHEAD_TASK is not set"));
    let bad = Command::new(env!("CARGO_BIN_EXE_bulkhead-periodic"))
        .args(["--exec-us", "x"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--exec-us"));
}
