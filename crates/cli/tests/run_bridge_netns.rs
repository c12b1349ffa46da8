//! Two systems, two network namespaces (issue 40.3, docs/zenoh.md): a `bulkhead run` in
//! one namespace writes channel `speed` (a 100 Hz `bulkhead-periodic --write` task, the
//! one stage of a pipeline) and publishes it over Zenoh; a second `bulkhead run` in
//! another namespace, joined to the first by a veth pair (10.240.0.1/30 – 10.240.0.2/30),
//! subscribes to it and reads it (`bulkhead-periodic --read`, a pipeline's stage too). The delay bound is what
//! `bulkhead solve` gives each half, the reader's bridge declaring the hop's `latency`.
//! Observed from outside: what the reader printed, each run's exit code and stderr.
//!
//! Each run is `nsenter --net=/run/netns/NS bulkhead run`, not `ip netns exec`, which
//! also remounts `/sys` (and so hides the cgroup hierarchies the run needs). The two runs
//! share the machine's two CPUs: each takes one, its writer or reader partition and its
//! bridge partition being servers of one pool there (`interface`), since two rt
//! partitions never share a CPU otherwise.

mod common;
use common::{rt_test_setup, Scratch};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Messages the reader must see at least (4 s of a 100 Hz writer).
const MESSAGES: u64 = 100;

/// Two network namespaces joined by a veth pair, removed (with the pair) on drop.
struct Namespaces {
    writer: String,
    reader: String,
}

/// `scripts/netns-pair WHAT WRITER READER` (bench/zenoh makes its namespaces with it too).
fn netns_pair(what: &str, ns: &Namespaces) -> Output {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/netns-pair");
    Command::new(script)
        .args([what, &ns.writer, &ns.reader])
        .output()
        .unwrap()
}

impl Namespaces {
    /// `bhw<TAG><PID>` (10.240.0.1) and `bhr<TAG><PID>` (10.240.0.2), a veth end of the
    /// same name in each (unique per test and test process, at most 15 bytes).
    fn new(tag: &str) -> Namespaces {
        let pid = std::process::id();
        let ns = Namespaces {
            writer: format!("bhw{tag}{pid}"),
            reader: format!("bhr{tag}{pid}"),
        };
        let out = netns_pair("up", &ns);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "netns-pair up: {stderr}");
        ns
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        netns_pair("down", self);
    }
}

/// A running `bulkhead run`, stopped (SIGTERM, then waited for) if the test leaves
/// before it ends.
struct Run(Option<Child>);

impl Run {
    /// `bulkhead run FILE --timeout T` in network namespace `ns`, its output piped.
    fn start(ns: &str, file: &Path, timeout: &str) -> Run {
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{ns}"))
            .arg(env!("CARGO_BIN_EXE_bulkhead"))
            .args(["run", file.to_str().unwrap(), "--timeout", timeout])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Run(Some(child))
    }

    fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    /// Its output and stderr once it ended.
    fn finished(mut self) -> (Output, String) {
        let out = self.0.take().unwrap().wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out, stderr)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            // SAFETY: kill has no memory preconditions; `child` is not reaped yet.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }
}

/// The two systems' descriptions: `writer` publishes `speed` on `key`, connecting to
/// the reader's namespace; `reader` listens there, subscribed, its bridge declaring the
/// hop (`latency: 50ms`: TCP over a veth pair on one shared machine, Zenoh's threads
/// unreserved, taken wide), and its task `R` prints what it read to `read.err` (`W`
/// what it wrote to `write.err`). Each
/// task is the one stage of a pipeline (`*W` whose output is `zenoh:speed`, `*R` whose
/// input is), so that `solve` bounds each half of the path, the bridge and the hop
/// included. Each system's two partitions are servers on one CPU.
fn descriptions(periodic: &Path, dir: &Scratch, key: &str) -> (String, String) {
    let p = periodic.display();
    let d = dir.0.display();
    let system = |cpu: u32, stage: &str, end: &str, zenoh: &str| {
        let (name, endpoint) = match stage {
            "W" => ("w", "output: \"zenoh:speed\""),
            _ => ("r", "input: \"zenoh:speed\", output: \"app/R/stderr\""),
        };
        format!(
            "system: {{}}
partitions:
  - {{name: app, kind: rt, cpus: {cpu}, interface: {{period: 5ms}}, scheduler: edf, tasks: []}}
  - {{name: bridge, kind: rt, cpus: {cpu}, interface: {{period: 5ms}}, scheduler: edf, tasks: []}}
channels:
  - name: speed
    kind: fifo
    message_size: 16
    depth: 256
{zenoh}pipelines:
  - name: {name}
    spec: \"*{stage}\"
    stages:
      {stage}: {{partition: app, wcet: 500us, period: 10ms, budget: 500us, {endpoint}, cmd: \"{p} --exec-us 100 {end}\"}}
"
        )
    };
    let bridge = "bridge: {period: 5ms, budget: 1ms";
    let zenoh = "zenoh: {key";
    let writer = format!(
        "    writer: app\n    {bridge}, {zenoh}: {key}, connect: [\"tcp/10.240.0.2:7447\"]}}}}\n"
    );
    let reader = format!(
        "    writer: zenoh\n    readers: [app]\n    {bridge}, latency: 50ms, {zenoh}: {key}, listen: [\"tcp/10.240.0.2:7447\"]}}}}\n"
    );
    (
        system(0, "W", &format!("--write speed 2> {d}/write.err"), &writer),
        system(1, "R", &format!("--read speed 2> {d}/read.err"), &reader),
    )
}

/// What a test needs: the exclusive CPUs' lock, the scratch directory with both
/// descriptions, their paths and the key; `None` (said) without the programs.
struct Setup {
    _lock: std::fs::File,
    dir: Scratch,
    writer: PathBuf,
    reader: PathBuf,
    key: String,
}

fn setup(name: &str) -> Setup {
    let (periodic, lock) = rt_test_setup();
    common::built("bulkhead-bridge");
    let pid = std::process::id();
    let dir = Scratch::new(&format!("netns-{name}"));
    let key = format!("bh-test/{pid}/netns-{name}");
    let (w, r) = descriptions(&periodic, &dir, &key);
    // The file names make the control sockets (`/run/bulkhead/NAME.sock`) distinct.
    let writer = dir.file(&format!("netns-writer-{pid}.yaml"));
    let reader = dir.file(&format!("netns-reader-{pid}.yaml"));
    std::fs::write(&writer, w).unwrap();
    std::fs::write(&reader, r).unwrap();
    Setup {
        _lock: lock,
        dir,
        writer,
        reader,
        key,
    }
}

/// The exact delay bound (Σ (k T + R), the bridge's task and declared hop included)
/// `bulkhead solve --json FILE` gives its one pipeline (which must be feasible), in ns.
fn solved_bound(file: &Path) -> u64 {
    let out = common::bulkhead()
        .args(["solve", "--json", file.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "solve {}: {text}",
        file.display()
    );
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["pipelines"][0]["exact_delay_bound_ns"]
        .as_u64()
        .unwrap_or_else(|| panic!("no exact bound: {text}"))
}

/// The bound of a message's delay from its release to its read, what `solve` bounds
/// on each machine added up (docs/zenoh.md: each machine solves its own half): the
/// writer's job `T + R` and the publishing bridge's `T + R`; the hop's declared
/// latency, the subscribing bridge's `T + R` and the reader's `T + R`.
fn delay_bound(s: &Setup) -> u64 {
    solved_bound(&s.writer) + solved_bound(&s.reader)
}

/// The pid of a process whose command line holds `words`, if one runs.
fn process_with(words: &[&str]) -> Option<u32> {
    std::fs::read_dir("/proc").unwrap().find_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        words.iter().all(|w| cmdline.contains(w)).then_some(pid)
    })
}

/// Waits (at most 10 s) until a process with `words` in its command line runs.
fn await_process(words: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while process_with(words).is_none() {
        assert!(Instant::now() < deadline, "no process with {words:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The number after `before` in `text`.
fn number_after(text: &str, before: &str) -> u64 {
    text.split(before)
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after {before:?} in {text}"))
}

#[test]
#[ignore = "needs root: network namespaces, SCHED_DEADLINE, cgroups"]
fn every_message_crosses_two_namespaces_in_order_within_the_bound() {
    let s = setup("order");
    let bound = delay_bound(&s);
    let ns = Namespaces::new("o");
    let reader = Run::start(&ns.reader, &s.reader, "8s");
    await_process(&["bulkhead-bridge", "subscribe", &s.key]);
    let writer = Run::start(&ns.writer, &s.writer, "4s");
    let (w_out, w_err) = writer.finished();
    let (r_out, r_err) = reader.finished();
    assert_eq!(w_out.status.code(), Some(0), "writer: {w_err}");
    assert_eq!(r_out.status.code(), Some(0), "reader: {r_err}");
    let read = std::fs::read_to_string(s.dir.file("read.err")).unwrap_or_default();
    let wrote = std::fs::read_to_string(s.dir.file("write.err")).unwrap_or_default();
    let all = format!("read: {read}\nwrote: {wrote}\nwriter: {w_err}\nreader: {r_err}");
    // The subscriber may join late: what is asserted runs from the first index read to
    // the last, every one present once, in order (the publisher reads the channel only
    // once matched, so here the first is 0 unless the channel overflowed meanwhile).
    // An index is missing only where the writer skipped its release (it ran late, as
    // this VM's stalls make it now and then): no message is lost on the way.
    let count = number_after(&read, "read ");
    let first = number_after(&read, "indexes ");
    let last = number_after(&read, "..");
    let skipped = number_after(&wrote, "releases skipped: ");
    assert!(count >= MESSAGES, "{all}");
    assert!(last + 1 - first - count <= skipped, "{all}");
    assert!(
        number_after(&read, &format!("..{last}, ")) <= skipped,
        "{all}"
    );
    assert!(read.contains(" 0 out of order"), "{all}");
    // The delay of every message released once the path carried one (read instant
    // minus release, both CLOCK_MONOTONIC on this one machine) is within the bound.
    let delay_ns = number_after(&read, "max delay ") * 1000;
    assert!(number_after(&read, "us of ") >= MESSAGES, "{all}");
    assert!(delay_ns <= bound, "{delay_ns} ns > bound {bound} ns: {all}");
    eprintln!("{read} (bound {} us)", bound / 1000);
    for (side, stderr) in [("writer", &w_err), ("reader", &r_err)] {
        assert!(
            stderr.contains(&format!("{}: peer present", s.key)),
            "{side}: {all}"
        );
    }
    // The writer's system ended first: the reader's saw its publisher go.
    assert!(r_err.contains(&format!("{}: peer lost", s.key)), "{all}");
}

#[test]
#[ignore = "needs root: network namespaces, SCHED_DEADLINE, cgroups"]
fn a_killed_system_is_a_peer_loss_for_the_other_not_a_hang() {
    let s = setup("loss");
    let ns = Namespaces::new("l");
    let started = Instant::now();
    let reader = Run::start(&ns.reader, &s.reader, "20s");
    await_process(&["bulkhead-bridge", "subscribe", &s.key]);
    let writer = Run::start(&ns.writer, &s.writer, "6s");
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill has no memory preconditions; the reader's run is our unreaped child.
    assert_eq!(unsafe { libc::kill(reader.pid() as i32, libc::SIGKILL) }, 0);
    let _ = reader.finished();
    let (out, stderr) = writer.finished();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the writer's run ended at its timeout, not stuck on the lost peer: {stderr}"
    );
    assert!(
        stderr.contains(&format!("{}: peer present", s.key)),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{}: peer lost", s.key)),
        "{stderr}"
    );
    // The killed system's janitor ends its bridge too.
    let deadline = Instant::now() + Duration::from_secs(10);
    while process_with(&["bulkhead-bridge", &s.key]).is_some() {
        assert!(Instant::now() < deadline, "a bridge of {} is left", s.key);
        std::thread::sleep(Duration::from_millis(100));
    }
}
