//! `bulkhead run` with channels bridged over Zenoh (issue 40, docs/zenoh.md): a
//! `bulkhead-periodic --write` task's messages cross a publishing bridge, Zenoh over TCP,
//! and a subscribing bridge into a channel a `bulkhead-periodic --read` task reads; each
//! bridge is an rt task of the `bridge` partition. Killing the publishing bridge shows as
//! a peer loss in the subscribing one, and the run goes on to its end. Observed from
//! outside: what the reader printed, the run's exit code and stderr.
//!
//! Both bridges run in one `bulkhead run`, over the loopback interface: two runs need an
//! rt partition each for their task and their bridge, four exclusive CPUs where the test
//! machine has two.

mod common;
use common::{rt_test_setup, Scratch};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Messages the reader must see at least: the writer writes one per 10 ms job until the
/// run's end.
const MESSAGES: u64 = 100;

/// Two rt partitions: `app` (the writer of channel `speed`, the reader of `remote`) and
/// `bridge` (`speed` published on `key`, listening on `port`; `remote` subscribed to
/// `key`, connecting to `port`).
fn description(periodic: &Path, dir: &Scratch, key: &str, port: u16) -> String {
    let p = periodic.display();
    let d = dir.0.display();
    let bridge = "period: 5ms, budget: 2ms";
    format!(
        "system: {{}}
partitions:
  - name: app
    kind: rt
    cpus: 0
    scheduler: edf
    tasks:
      - {{name: w, cmd: \"{p} --exec-us 100 --write speed\", budget: 1ms, period: 10ms}}
      - {{name: r, cmd: \"{p} --exec-us 100 --read remote 2> {d}/read.err\", budget: 1ms, period: 10ms}}
  - {{name: bridge, kind: rt, cpus: 1, scheduler: edf, tasks: []}}
channels:
  - name: speed
    kind: fifo
    message_size: 16
    depth: 256
    writer: app/w
    bridge: {{{bridge}, zenoh: {{key: {key}, listen: [\"tcp/127.0.0.1:{port}\"]}}}}
  - name: remote
    kind: fifo
    message_size: 16
    depth: 256
    writer: zenoh
    readers: [app/r]
    bridge: {{{bridge}, zenoh: {{key: {key}, connect: [\"tcp/127.0.0.1:{port}\"]}}}}
"
    )
}

/// The loopback port of test `k`'s bridges.
fn port(k: u16) -> u16 {
    20000 + (std::process::id() % 20000) as u16 * 2 + k
}

/// The exclusive CPUs' lock, a scratch directory holding `system.yaml` and the key of
/// its bridges (`bh-test/PID/NAME`, on [`port`]`(k)`: `k` tells the tests apart); fails
/// without the programs.
fn setup(name: &str, k: u16) -> (std::fs::File, Scratch, String) {
    let (periodic, lock) = rt_test_setup();
    common::built("bulkhead-bridge");
    let dir = Scratch::new(&format!("bridge-{name}"));
    let key = format!("bh-test/{}/{name}", std::process::id());
    let text = description(&periodic, &dir, &key, port(k));
    std::fs::write(dir.file("system.yaml"), text).unwrap();
    (lock, dir, key)
}

/// `bulkhead run FILE --timeout T`, its output piped.
fn run(file: &Path, timeout: &str) -> std::process::Child {
    common::bulkhead()
        .args(["run", file.to_str().unwrap(), "--timeout", timeout])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The pid of the process whose command line holds `words`, within 10 s.
fn process_with(words: &[&str]) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = std::fs::read_dir("/proc").unwrap().find_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            words.iter().all(|w| cmdline.contains(w)).then_some(pid)
        });
        if let Some(pid) = found {
            return pid;
        }
        assert!(Instant::now() < deadline, "no process with {words:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn finished(child: std::process::Child) -> (Output, String) {
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE, cgroups, users and namespaces"]
fn every_message_crosses_the_bridges_in_order() {
    let (_lock, dir, key) = setup("order", 0);
    let (out, stderr) = finished(run(&dir.file("system.yaml"), "5s"));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let read = std::fs::read_to_string(dir.file("read.err")).unwrap_or_default();
    // The writer is reserved on a CPU of its own: it skips no release, so the indexes
    // the reader sees run from 0 without a gap (those in flight at the stop are cut).
    let summary = read
        .lines()
        .find_map(|l| l.strip_prefix("bulkhead-periodic: read "));
    let summary = summary.unwrap_or_else(|| panic!("reader: {read}\nrun: {stderr}"));
    let count: u64 = summary.split(' ').next().unwrap().parse().unwrap();
    assert!(count >= MESSAGES, "reader: {read}\nrun: {stderr}");
    let want = format!("messages, indexes 0..{}, 0 gaps, 0 out of order", count - 1);
    assert!(summary.contains(&want), "reader: {read}\nrun: {stderr}");
    assert!(stderr.contains(&format!("{key}: peer present")), "{stderr}");
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE, cgroups, users and namespaces"]
fn a_killed_publisher_is_a_peer_loss_not_a_hang() {
    let (_lock, dir, key) = setup("loss", 1);
    let started = Instant::now();
    let child = run(&dir.file("system.yaml"), "6s");
    let publisher = process_with(&["bulkhead-bridge", "publish", &key]);
    std::thread::sleep(Duration::from_secs(2));
    Command::new("kill")
        .args(["-KILL", &publisher.to_string()])
        .status()
        .unwrap();
    let (out, stderr) = finished(child);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the run ended at its timeout, not stuck on the lost peer: {stderr}"
    );
    assert!(stderr.contains(&format!("{key}: peer lost")), "{stderr}");
    assert!(out.status.code().is_some(), "{stderr}");
}

/// `bulkhead probe --zenoh ENDPOINT` (docs/zenoh.md) against the publishing bridge of a
/// run, listening on loopback: the round trips of queries to its echo, printed.
#[test]
#[ignore = "needs root: SCHED_DEADLINE, cgroups, users and namespaces"]
fn probe_zenoh_times_round_trips_to_a_running_bridge() {
    let (_lock, dir, key) = setup("probe", 2);
    let child = run(&dir.file("system.yaml"), "5s");
    process_with(&["bulkhead-bridge", "publish", &key]);
    let endpoint = format!("tcp/127.0.0.1:{}", port(2));
    let probe = common::bulkhead()
        .args(["probe", "--zenoh", &endpoint, "--count", "10"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&probe.stdout).into_owned();
    let (out, stderr) = finished(child);
    assert_eq!(
        probe.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&probe.stderr)
    );
    let want = format!("zenoh round trip to {endpoint}: min ");
    assert!(stdout.starts_with(&want), "{stdout}");
    assert!(stdout.contains("over 10 queries"), "{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// Where no bridge answers, `bulkhead probe --zenoh` fails and says so (no hang);
/// `--count` goes with `--zenoh` only.
#[test]
fn probe_zenoh_without_a_bridge_there_fails() {
    let bridge = common::bin("bulkhead-bridge");
    if !bridge.exists() {
        return eprintln!("skipping: {} is not built", bridge.display());
    }
    let endpoint = "tcp/127.0.0.1:9";
    let out = common::bulkhead()
        .args(["probe", "--zenoh", endpoint, "--count", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("probe tcp/127.0.0.1:9: no bridge answered within 5 s"),
        "{stderr}"
    );
    let out = common::bulkhead()
        .args(["probe", "--count", "3"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
