//! The CAN gateway attacked from inside a partition through `bulkhead run`: a best-effort
//! client floods its own allowed id through its gateway channel (`bulkhead-hog can`).
//! Observed from outside: the schedule log (the writer's jobs and deadline misses, the
//! clients' counters), the frames on the bus (`can dump`), what the other client sent.

mod common;
use common::{bulkhead, exclusive_cpus_lock, Running, Scratch};
use serde_json::Value;
use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

/// The flooder's limit (frames per second, frames waiting) and the run's length.
const RATE: u64 = 200;
const QUEUE: u64 = 4;
const RUN_S: u64 = 4;
/// The gateway's period (ms): its writer's jobs are the clock of the flooder's limit.
const PERIOD_MS: u64 = 2;
/// Frames the other client sends, one every 10 ms.
const CALM: u64 = 200;
/// The burst the other client declares: a best-effort process the machine stalls sends
/// what it owes at once (13 frames after a 130 ms stall on a loaded machine, where the
/// default of 4 dropped 9 of them with the writer missing nothing).
const CALM_QUEUE: u64 = 32;

/// `evil` writes frames of 0x050 as fast as its channel takes them, and 0x050 outranks
/// the other client's 0x100 on the bus. The gateway's writer still runs every period
/// without waiting for the bus (a handful of deadline misses at most on a busy machine,
/// where it used to miss thousands, blocked on the bus), `evil` gets its declared rate
/// and no more, its other frames dropped and counted (`evil.tx_dropped`), and every frame
/// of the other client reaches the bus, none dropped.
#[test]
#[ignore = "needs root: rt partitions, cgroups and network namespaces"]
fn a_can_client_flooding_its_allowed_id_gets_its_limit_and_stalls_nothing() {
    let hog = common::built("bulkhead-hog");
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-can-flood");
    let bus = format!("bh-flood-{}", std::process::id());
    // The bus, and what reaches it, seen by a node of the host network (both stopped
    // on drop, also when the test fails).
    let _bus = Running(Some(bulkhead().args(["can", "bus", &bus]).spawn().unwrap()));
    std::thread::sleep(Duration::from_millis(200));
    // Stopped (SIGTERM) once the run is over; its timeout is only a bound for a run that
    // hangs, longer than any start-up on a loaded machine (each line is flushed).
    let mut dump = Running(Some(
        bulkhead()
            .args(["can", "dump", "-L", &bus, "--timeout", "120s"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    // Read as they come: a pipe holds 64 KiB, about 1,190 of the dump's lines. Read only
    // after the run, a dump whose pipe had filled went with a 4 s run that lasted 240 s,
    // until the dump's own timeout, once in a clean-clone CI run. What tied the two is
    // not known: the bus does not wait for a node that stops reading (20,000 frames sent
    // past a dump whose pipe nobody read took the bus's own 3.7 s at 500 kbit/s).
    let mut frames = dump.0.as_mut().and_then(|c| c.stdout.take()).unwrap();
    let on_bus = std::thread::spawn(move || {
        let mut text = String::new();
        frames.read_to_string(&mut text).map(|_| text)
    });
    let (hog, d) = (hog.display(), dir.0.display());
    let desc = format!(
        "system: {{}}
partitions:
  - {{name: gw, kind: rt, cpus: 0, scheduler: edf, tasks: []}}
  - {{name: evil, cpus: 1, processes: [\"{hog} can --bus {bus} --id 0x050\"]}}
  - {{name: ic, cpus: 1, processes: [\"sh -c '{hog} can --bus {bus} --id 0x100 --every-us 10000 --count {CALM} > {d}/calm 2>&1'\"]}}
buses:
  - name: {bus}
    gateway: gw
    period: {PERIOD_MS}ms
    reader_budget: 200us
    writer_budget: 200us
    clients:
      - {{partition: evil, allow: [0x050], rate: {RATE}, queue: {QUEUE}}}
      - {{partition: ic, allow: [0x100], queue: {CALM_QUEUE}}}
"
    );
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let log = dir.file("schedule.jsonl");
    let out = bulkhead()
        .args([
            "run",
            path.to_str().unwrap(),
            "--timeout",
            &format!("{RUN_S}s"),
        ])
        .arg("--schedule-log")
        .arg(&log)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    drop(dump);
    let on_bus = on_bus.join().unwrap().unwrap();
    let log = std::fs::read_to_string(&log).unwrap();
    let events: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let counter = |name: &str| {
        let last = events
            .iter()
            .rev()
            .find(|e| e["event"] == "counter" && e["name"] == name);
        last.and_then(|e| e["value"].as_u64()).unwrap_or(0)
    };

    // The writer ran its jobs, period after period.
    let (jobs, misses) = writer_jobs(&events, &format!("{bus}-writer"));
    eprintln!(
        "evil.tx_sent={} evil.tx_dropped={} ic.tx_sent={} ic.tx_dropped={}",
        counter("evil.tx_sent"),
        counter("evil.tx_dropped"),
        counter("ic.tx_sent"),
        counter("ic.tx_dropped"),
    );
    assert!(jobs >= 500, "{jobs} writer jobs\n{stderr}");
    // Blocked on the bus it missed most of them (2,000 and more of 2,500, issue 35).
    // Draining the flooder's channel down to its depth each job (256 messages to count and
    // drop, 116 us of CPU in a debug build) then overran its 200 us budget in up to 58% of its jobs
    // (936 of 1,605 from a fresh clone). A job now handles the frames its budget covers
    // (9), the partitions in turn: 0 to 14 misses in 2,000 jobs over 5 runs of each build
    // on the shared machine; a tenth leaves room for a busy one.
    assert!(
        misses * 10 <= jobs,
        "{misses} writer misses in {jobs} jobs\n{stderr}"
    );
    // The flooder: no more than its rate over the time the gateway ran (its writer's
    // jobs, one a period, and a second more for jobs a busy machine skipped) and its
    // burst, the rest dropped. The run's timeout is no such clock: a run whose stop
    // waits (as the one of 240 s above) lasts longer, and its gateway sends 200 frames a
    // second all along.
    let (sent, dropped) = (counter("evil.tx_sent"), counter("evil.tx_dropped"));
    let ran_ms = jobs as u64 * PERIOD_MS + 1000;
    assert!(
        (1..=RATE * ran_ms / 1000 + QUEUE).contains(&sent),
        "evil.tx_sent = {sent} in {jobs} writer jobs"
    );
    assert!(
        dropped > 10 * sent,
        "evil.tx_dropped = {dropped}, tx_sent = {sent}"
    );
    // The other client: every frame written went out, none dropped.
    let calm = std::fs::read_to_string(dir.file("calm")).unwrap_or_default();
    assert_eq!(calm.trim(), format!("sent {CALM}"), "{stderr}");
    assert_eq!(counter("ic.tx_sent"), CALM, "{stderr}");
    assert_eq!(counter("ic.tx_dropped"), 0);
    let frames_of = |id: &str| on_bus.lines().filter(|l| l.contains(id)).count() as u64;
    assert_eq!(frames_of(" 100#"), CALM, "frames of 0x100 on the bus");
    assert_eq!(frames_of(" 050#"), sent, "the flooder's frames on the bus");
}

/// The jobs `writer` completed and the deadlines it missed in the schedule log `events`;
/// its figures, with its largest response, go to stderr for the record of a run
/// (`--nocapture`).
fn writer_jobs(events: &[Value], writer: &str) -> (usize, usize) {
    let of_writer = |event: &'static str| {
        events
            .iter()
            .filter(move |e| e["event"] == event && e["task"] == writer)
    };
    let (jobs, misses) = (of_writer("job_complete"), of_writer("deadline_miss"));
    let largest = jobs.clone().filter_map(|e| e["response_ns"].as_u64()).max();
    let (jobs, misses) = (jobs.count(), misses.count());
    eprintln!(
        "writer: {misses} misses in {jobs} jobs, largest response {:.2} ms",
        largest.unwrap_or(0) as f64 / 1e6
    );
    (jobs, misses)
}
