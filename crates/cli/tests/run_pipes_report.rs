//! A pipeline's sink reports each message it finishes to the supervisor, which writes
//! them to the run's schedule log and trace as `message` events; `bulkhead report`
//! gives each pipeline's end-to-end delay distribution against its analysed bounds.
//! Observed from outside: the log, the trace, run's summary and the report's JSON.

mod common;
use common::{bulkhead, exclusive_cpus_lock, Scratch};
use serde_json::Value;
use std::process::Child;
use std::time::Duration;

/// A child process killed on drop (the virtual bus), even when the test fails.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `pipeline-stats` JSON line of pipeline `name` in run's summary.
fn stats(stderr: &str, name: &str) -> Value {
    stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pipeline-stats "))
        .map(|j| serde_json::from_str::<Value>(j).unwrap())
        .find(|j| j["name"] == name)
        .unwrap_or_else(|| panic!("no stats of `{name}`:\n{stderr}"))
}

/// The last value of counter `name` of task `task` in the schedule log (0 if never).
fn last_counter(log: &str, task: &str, name: &str) -> u64 {
    log.lines()
        .rev()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "counter" && e["task"] == task && e["name"] == name)
        .map_or(0, |e| e["value"].as_u64().unwrap())
}

/// `bulkhead report INPUT --format json --system SYSTEM`, parsed.
fn report(input: &std::path::Path, system: &std::path::Path) -> Value {
    let out = bulkhead()
        .arg("report")
        .arg(input)
        .args(["--format", "json", "--system"])
        .arg(system)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE, cgroups and exclusive CPUs"]
fn every_message_a_sink_finishes_reaches_the_log_trace_and_report() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("run-pipes-report");
    let bus = format!("bh-pipesrep-{}", std::process::id());
    let _bus = Killed(bulkhead().args(["can", "bus", &bus]).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(200));
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/boomerang.yaml");
    let file = dir.file("boomerang.yaml");
    std::fs::write(
        &file,
        std::fs::read_to_string(example)
            .unwrap()
            .replace("rav4", &bus),
    )
    .unwrap();
    // The sources take in the frames of 0x101 and 0x102 (the example's header): one of
    // each every 2 ms, from before the run on (a source drops those before it is ready).
    let gen = |id: &str| {
        let args = ["can", "gen", &bus, "-I", id, "-L", "8", "-g", "2ms"];
        Killed(bulkhead().args(args).spawn().unwrap())
    };
    let _feed = [gen("101"), gen("102")];
    let (log, trace) = (dir.file("schedule.jsonl"), dir.file("trace.json"));
    let out = bulkhead()
        .args(["run", file.to_str().unwrap(), "--timeout", "3s"])
        .arg("--schedule-log")
        .arg(&log)
        .arg("--trace")
        .arg(&trace)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let text = std::fs::read_to_string(&log).unwrap();
    let from_log = report(&log, &file);
    let from_trace = report(&trace, &file);
    for (name, sink) in [("p1", "CanWrite"), ("p2", "RTControl")] {
        let s = stats(&stderr, name);
        let out = s["messages_out"].as_u64().unwrap();
        // A frame every 2 ms for about 2.8 s: hundreds of messages out.
        assert!(out > 300, "{name}: {s}");
        let dropped = last_counter(&text, sink, "msg_dropped");
        for f in [&from_log, &from_trace] {
            let all = f["pipelines"].as_array().unwrap();
            let p = all.iter().find(|p| p["sink"] == sink).unwrap();
            assert_eq!(p["pipeline"], name, "{p}");
            // Every message the sink counted out is an event, or counted as dropped.
            assert_eq!(
                p["messages"].as_u64().unwrap() + dropped,
                out,
                "{name}: {s}"
            );
            assert!(p["bound_ns"].as_u64() > Some(0), "{p}");
            assert!(
                p["exact_bound_ns"].as_u64() >= p["bound_ns"].as_u64(),
                "{p}"
            );
            if dropped == 0 {
                // The events carry the delays the sink measured: the same extremes.
                assert_eq!(p["e2e"]["min_ns"], s["min_e2e_ns"], "{name}: {p}\n{s}");
                assert_eq!(p["e2e"]["max_ns"], s["max_e2e_ns"], "{name}: {p}\n{s}");
            }
        }
    }
}
