//! `bulkhead run` of a window schedule next to an rt partition, observed from outside:
//! the rt job events reach the schedule log while the run goes on (streamed, not kept
//! until the end), on the window schedule's time axis, and the trace holds both.

mod common;
use common::Scratch;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
#[ignore = "needs root: SCHED_DEADLINE, cgroups and cpusets"]
fn rt_job_events_of_a_window_run_are_streamed_to_the_log_and_trace() {
    let (periodic, _lock) = common::rt_test_setup();
    let scratch = Scratch::new("windows-rt-stream");
    let description = scratch.file("system.yaml");
    std::fs::write(
        &description,
        format!(
            "system: {{cpus: 0-1}}\npartitions:\n  - name: ctl\n    kind: rt\n    cpus: 0\n    scheduler: edf\n    tasks:\n      - {{name: a, cmd: {} --exec-us 200, budget: 2ms, period: 10ms}}\n  - {{name: ui, processes: [{{cmd: sleep 10, budget: 5ms}}]}}\nwindows:\n  - {{length: 5ms, cpu: 1, sc_partition: ui}}\n",
            periodic.display()
        ),
    )
    .unwrap();
    let (log, trace) = (scratch.file("log.jsonl"), scratch.file("trace.json"));
    let run = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .arg("run")
        .arg(&description)
        .args(["--timeout", "4s", "--schedule-log"])
        .arg(&log)
        .arg("--trace")
        .arg(&trace)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Job events reach the file during the run (the log is buffered: wait for several
    // buffers' worth of lines).
    std::thread::sleep(Duration::from_millis(2500));
    let during = std::fs::read_to_string(&log).unwrap_or_default();
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        during.contains("\"event\":\"job_complete\""),
        "no job event in the log 2.5 s into a 4 s run ({} bytes written)",
        during.len()
    );
    assert!(during.contains("\"event\":\"run\""), "{during}");
    let text = std::fs::read_to_string(&log).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let jobs: Vec<u64> = events
        .iter()
        .filter(|e| e["event"] == "job_complete")
        .map(|e| e["t_ns"].as_u64().unwrap())
        .collect();
    // 10 ms period over about 4 s of schedule time.
    assert!((100..=500).contains(&jobs.len()), "{} jobs", jobs.len());
    let last_job = *jobs.iter().max().unwrap();
    assert!(
        last_job <= 4_500_000_000,
        "job times are on the schedule's axis: last {last_job}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&trace).unwrap()).expect("the trace is JSON");
    let slices = json["traceEvents"].as_array().unwrap();
    let named = |name: &str| {
        slices
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"].as_str() == Some(name))
            .count()
    };
    assert!(named("ctl/a") >= 100, "job slices: {}", named("ctl/a"));
    assert!(
        named("window 0") >= 100,
        "window slices: {}",
        named("window 0")
    );
}
