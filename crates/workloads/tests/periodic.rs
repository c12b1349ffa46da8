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

/// A named channel of the test, removed from `/dev/shm` when dropped.
struct Named(bulkhead_chan::Channel);

impl Drop for Named {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(format!("/dev/shm/bulkhead-chan-{}", self.0.meta().name));
    }
}

/// A named channel `name` of `size`-byte messages and the variable that hands it to a
/// program as the description's channel `jobs`.
fn jobs_channel(name: &str, size: u32) -> (Named, (String, String)) {
    let name = format!("{name}-{}", std::process::id());
    let spec = bulkhead_chan::Spec::fifo(&name, size, 64);
    let channel = bulkhead_chan::Channel::create_named(&spec).unwrap();
    (Named(channel), (bulkhead_chan::env_var("jobs"), name))
}

#[test]
fn write_sends_each_jobs_index_and_release() {
    let (channel, var) = jobs_channel("periodic-write", 16);
    let link = TaskLink::create(&spec("writer", 2 * MS, 5 * MS, 5 * MS, 20 * MS)).unwrap();
    let mut cmd = periodic(
        &link,
        &["--exec-us", "100", "--activations", "10", "--write", "jobs"],
    );
    assert_eq!(run(cmd.env(var.0, var.1)), 0);
    let mut rx = channel.0.receiver().unwrap();
    let mut msg = [0u8; 16];
    let mut last = None;
    for _ in 0..10 {
        rx.try_read(&mut msg).expect("one message per job");
        let word = |i: usize| u64::from_le_bytes(msg[i..i + 8].try_into().unwrap());
        // A loaded machine may skip a release: indexes grow, by one unless skipped.
        assert!(
            last < Some(word(0)),
            "the job's index: {last:?} then {}",
            word(0)
        );
        assert_eq!(word(8), link.epoch_ns() + word(0) * 5 * MS, "its release");
        last = Some(word(0));
    }
    assert!(rx.try_read(&mut msg).is_err(), "no more than one per job");
}

#[test]
fn write_refuses_a_channel_of_another_message_size() {
    let (_channel, var) = jobs_channel("periodic-write-size", 32);
    let link = TaskLink::create(&spec("writer32", 2 * MS, 5 * MS, 5 * MS, 20 * MS)).unwrap();
    let mut cmd = periodic(&link, &["--activations", "1", "--write", "jobs"]);
    let out = cmd.env(var.0, var.1).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--write jobs: its messages are 32 bytes; a job message is 16"),
        "{stderr}"
    );
}

#[test]
fn read_checks_that_the_indexes_follow_each_other() {
    let (channel, var) = jobs_channel("periodic-read", 16);
    let mut tx = channel.0.sender().unwrap();
    for index in [0u64, 1, 3, 2, 4] {
        let mut msg = [0u8; 16];
        msg[..8].copy_from_slice(&index.to_le_bytes());
        tx.write(&msg).unwrap();
    }
    let link = TaskLink::create(&spec("reader", 2 * MS, 5 * MS, 5 * MS, 20 * MS)).unwrap();
    let mut cmd = periodic(
        &link,
        &["--exec-us", "100", "--activations", "2", "--read", "jobs"],
    );
    let out = cmd.env(var.0, var.1).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("read 5 messages, indexes 0..4, 2 gaps, 1 out of order"),
        "{stderr}"
    );
    // Released (stamp 0) before the reader's first read: none counts in the delay.
    assert!(
        stderr.contains(
            "max delay 0 us of 0 released after the first arrived (median - us, p99 - us)"
        ),
        "{stderr}"
    );
}

/// A job message: `index`, released at `release` (CLOCK_MONOTONIC ns).
fn job(index: u64, release: u64) -> [u8; 16] {
    let mut msg = [0u8; 16];
    msg[..8].copy_from_slice(&index.to_le_bytes());
    msg[8..].copy_from_slice(&release.to_le_bytes());
    msg
}

#[test]
fn read_measures_the_delay_of_what_was_released_after_the_first_arrival() {
    let (channel, var) = jobs_channel("periodic-delay", 16);
    let mut tx = channel.0.sender().unwrap();
    tx.write(&job(0, 0)).unwrap();
    let link = TaskLink::create(&spec("delay", 2 * MS, 10 * MS, 10 * MS, 20 * MS)).unwrap();
    let mut cmd = periodic(
        &link,
        &["--exec-us", "100", "--activations", "100", "--read", "jobs"],
    );
    let child = cmd
        .env(var.0, var.1)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader reads message 0 at its first job, 20 ms from now; message 1 is
    // released after that and read at most a period (10 ms) later.
    std::thread::sleep(std::time::Duration::from_millis(300));
    tx.write(&job(1, now_ns())).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let delay: u64 = stderr
        .split("max delay ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    // One delay: its median and p99 are the max.
    assert!(
        stderr.contains(&format!(
            "us of 1 released after the first arrived (median {delay} us, p99 {delay} us)"
        )),
        "{stderr}"
    );
    // Wide margin: a period is 10 ms, the shared test machine may delay a job.
    assert!(delay < 500_000, "{stderr}");
}
