//! `bulkhead report`: figures checked against schedules computed by hand, the same
//! figures from a schedule log and from a trace, and bad input refused with the file
//! and line named (exit code 1, no panic).

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A scratch directory removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("bulkhead-report-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        Dir(dir)
    }

    fn file(&self, name: &str, content: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bulkhead(args: &[&Path]) -> Output {
    common::bulkhead().args(args).output().unwrap()
}

/// Simulates `yaml` for its hyperperiod; returns (schedule log, trace).
fn simulate(dir: &Dir, yaml: &str) -> (PathBuf, PathBuf) {
    let system = dir.file("system.yaml", yaml.as_bytes());
    let (log, trace) = (dir.path("log.jsonl"), dir.path("trace.json"));
    let out = bulkhead(&[
        Path::new("sim"),
        &system,
        Path::new("--schedule-log"),
        &log,
        Path::new("--trace"),
        &trace,
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    (log, trace)
}

/// `bulkhead report INPUT --format json [extra]`, parsed.
fn figures(input: &Path, extra: &[&Path]) -> Value {
    let mut args = vec![
        Path::new("report"),
        input,
        Path::new("--format"),
        Path::new("json"),
    ];
    args.extend_from_slice(extra);
    let out = bulkhead(&args);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn task<'a>(figures: &'a Value, name: &str) -> &'a Value {
    figures["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no task {name} in {figures}"))
}

/// Two tasks under EDF on one CPU, hyperperiod 12 ms. By hand:
/// t1 (C 1, T 4, D 4) runs 0-1, 4-5, 9-10: responses 1, 1, 2 ms;
/// t2 (C 3, T 6, D 5) runs 1-4, 6-9 (its deadline 11 precedes t1's 12 at 8): 4, 3 ms.
const EDF: &str =
    "partitions:\n  - name: p\n    kind: rt\n    cpus: 0\n    scheduler: edf\n    tasks:\n      \
    - {name: t1, cmd: a, budget: 1ms, period: 4ms, deadline: 4ms}\n      \
    - {name: t2, cmd: b, budget: 3ms, period: 6ms, deadline: 5ms}\n";

#[test]
fn edf_figures_match_the_schedule_by_hand_from_log_and_trace() {
    let dir = Dir::new("edf");
    let (log, trace) = simulate(&dir, EDF);
    for input in [&log, &trace] {
        let f = figures(input, &[]);
        let t1 = task(&f, "t1");
        assert_eq!(t1["jobs"], 3, "{input:?}: {t1}");
        assert_eq!(t1["misses"], 0);
        assert_eq!(t1["deadline_ns"], 4_000_000);
        assert_eq!(t1["slices"], 3);
        assert_eq!(t1["executed_ns"], 3_000_000);
        let r1 = &t1["response"];
        assert_eq!(
            [&r1["min_ns"], &r1["p50_ns"], &r1["max_ns"]],
            [1_000_000, 1_000_000, 2_000_000]
        );
        assert!((r1["mean_ns"].as_f64().unwrap() - 4e6 / 3.0).abs() < 1.0);
        assert_eq!(
            t1["cdf"],
            serde_json::json!([[1_000_000, 2.0 / 3.0], [2_000_000, 1.0]])
        );
        let t2 = task(&f, "t2");
        assert_eq!(t2["jobs"], 2);
        assert_eq!(t2["deadline_ns"], 5_000_000);
        let r2 = &t2["response"];
        assert_eq!([&r2["min_ns"], &r2["max_ns"]], [3_000_000, 4_000_000]);
        let counts = t2["histogram"]["counts"].as_array().unwrap();
        assert_eq!(counts.iter().map(|c| c.as_u64().unwrap()).sum::<u64>(), 2);
        assert_eq!(f["duration_ns"], 10_000_000, "the last completion");
        assert!(f["wcrt_ns"].is_null());
    }
}

#[test]
fn the_analytic_wcrt_comes_from_the_system_and_bounds_what_ran() {
    // Fixed priority (rate monotonic): RTA gives t1 1 ms and t2 4 ms (R = 3 + ceil(R/4)·1);
    // t2's second job is preempted at 8 ms and completes at 10 ms: 4 ms, the bound.
    let dir = Dir::new("fp");
    let fp = EDF.replace("scheduler: edf", "scheduler: fixed-priority");
    let (_, trace) = simulate(&dir, &fp);
    let system = dir.path("system.yaml");
    let f = figures(&trace, &[Path::new("--system"), &system]);
    let (t1, t2) = (task(&f, "t1"), task(&f, "t2"));
    assert_eq!(t1["wcrt_ns"], 1_000_000);
    assert_eq!(t2["wcrt_ns"], 4_000_000);
    assert_eq!(t2["schedulable"], true);
    assert_eq!(t2["response"]["max_ns"], 4_000_000);
    assert_eq!(t2["slices"], 3, "one preemption");
}

#[test]
fn deadline_misses_are_counted_and_timed() {
    // C 3 ms > D 2 ms: the one job of the hyperperiod misses at 2 ms, completes at 3 ms.
    let dir = Dir::new("miss");
    let yaml = "partitions:\n  - {name: p, kind: rt, cpus: 0, tasks: [{name: t, cmd: a, budget: 3ms, period: 4ms, deadline: 2ms}]}\n";
    let (log, trace) = simulate(&dir, yaml);
    for input in [&log, &trace] {
        let t = task(&figures(input, &[]), "t").clone();
        assert_eq!(t["misses"], 1, "{input:?}: {t}");
        assert_eq!(t["miss_times_ns"], serde_json::json!([2_000_000]));
        assert_eq!(t["response"]["max_ns"], 3_000_000);
    }
}

#[test]
fn channel_latencies_and_counter_rates_from_a_log() {
    // Message 0 is read 0.5 ms and 1 ms after its write; message 1 is lost. The counter
    // grows by 100 in the first half second and by 200 in the second.
    let dir = Dir::new("log");
    let lines = [
        r#"{"t_ns":0,"event":"counter","partition":"q","task":"gw","name":"rx","value":0}"#,
        r#"{"t_ns":1000000,"event":"channel_write","cpu":0,"channel":"c","partition":"q","task":"w","msg":0}"#,
        r#"{"t_ns":1500000,"event":"channel_read","cpu":0,"channel":"c","partition":"q","task":"r","msg":0}"#,
        r#"{"t_ns":2000000,"event":"channel_read","cpu":1,"channel":"c","partition":"b","task":"s","msg":0}"#,
        r#"{"t_ns":3000000,"event":"channel_loss","channel":"c","msg":1}"#,
        r#"{"t_ns":499000000,"event":"counter","partition":"q","task":"gw","name":"rx","value":100}"#,
        r#"{"t_ns":1000000000,"event":"counter","partition":"q","task":"gw","name":"rx","value":300}"#,
    ];
    let log = dir.file("run.jsonl", (lines.join("\n") + "\n").as_bytes());
    let f = figures(&log, &[]);
    let c = &f["channels"][0];
    assert_eq!(
        (&c["name"], &c["messages"], &c["losses"]),
        (&"c".into(), &2.into(), &1.into())
    );
    assert_eq!(
        [&c["latency"]["min_ns"], &c["latency"]["max_ns"]],
        [500_000, 1_000_000]
    );
    let rx = &f["throughput"][0];
    assert_eq!(
        (&rx["name"], &rx["total"]),
        (&"q/gw rx".into(), &300.into())
    );
    assert_eq!(rx["bin_ns"], 10_000_000);
    let rates: Vec<f64> = rx["per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_f64().unwrap())
        .collect();
    assert_eq!(rates.len(), 100);
    assert_eq!(rates[49], 100.0 / 0.01, "100 in the 10 ms bin of 499 ms");
    assert_eq!(rates[99], 200.0 / 0.01);
    assert_eq!(rates.iter().sum::<f64>() * 0.01, 300.0);
}

#[test]
fn the_page_is_self_contained() {
    let dir = Dir::new("html");
    let (_, trace) = simulate(&dir, EDF);
    let page = dir.path("report.html");
    let out = bulkhead(&[Path::new("report"), &trace, Path::new("-o"), &page]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("report.html"));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    assert_eq!(html.matches("</script>").count(), 2, "data and code only");
    assert!(
        html.contains("\"name\":\"p/t2\""),
        "the Gantt rows are embedded"
    );
}

/// Runs `report` on `content`; asserts exit code 1 and returns stderr.
fn refused(dir: &Dir, name: &str, content: &[u8]) -> String {
    let input = dir.file(name, content);
    let out = bulkhead(&[
        Path::new("report"),
        &input,
        Path::new("--format"),
        Path::new("json"),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
    assert!(out.stdout.is_empty(), "{name}: nothing printed on error");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let path = input.display().to_string();
    assert!(stderr.starts_with(&format!("error: {path}:")), "{stderr}");
    stderr
}

#[test]
fn bad_input_is_refused_naming_file_and_line() {
    let dir = Dir::new("bad");
    let (log, trace) = simulate(&dir, EDF);
    let log = std::fs::read(&log).unwrap();
    let trace = std::fs::read(&trace).unwrap();

    let e = refused(&dir, "empty.json", b"");
    assert!(e.contains("empty.json:1:1: empty file"), "{e}");
    let e = refused(&dir, "blank.jsonl", b"\n\n  \n");
    assert!(e.contains(":1:1: empty file"), "{e}");

    // Cut inside the fourth line of the log.
    let fourth = log
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .nth(2)
        .unwrap()
        .0;
    let e = refused(&dir, "cut.jsonl", &log[..fourth + 20]);
    assert!(e.contains("cut.jsonl:4:"), "{e}");
    assert!(e.contains("truncated"), "{e}");

    let e = refused(&dir, "cut.json", &trace[..trace.len() / 2]);
    assert!(e.contains("cut.json:1:"), "{e}");
    assert!(e.contains("truncated"), "{e}");

    let text = String::from_utf8(trace.clone()).unwrap();
    let old = text.replacen("\"version\":\"", "\"version\":\"0.0.0-", 1);
    let e = refused(&dir, "old.json", old.as_bytes());
    assert!(e.contains("old.json:1:"), "{e}");
    assert!(e.contains("a trace of bulkhead 0.0.0-"), "{e}");
    let unstamped = format!("{{{}", &text[text.find("\"displayTimeUnit\"").unwrap()..]);
    let e = refused(&dir, "unstamped.json", unstamped.as_bytes());
    assert!(e.contains("no `otherData.version`"), "{e}");

    let mut future = log.clone();
    future.extend_from_slice(b"{\"t_ns\":1,\"event\":\"teleport\",\"cpu\":0}\n");
    let line = future.iter().filter(|&&b| b == b'\n').count();
    let e = refused(&dir, "future.jsonl", &future);
    assert!(e.contains(&format!("future.jsonl:{line}:")), "{e}");
    assert!(
        e.contains("another version") && e.contains("teleport"),
        "{e}"
    );

    let e = refused(&dir, "system.yaml", b"partitions: []\n");
    assert!(
        e.contains("system.yaml:1:1: not a bulkhead schedule log or trace"),
        "{e}"
    );

    let missing = dir.path("missing.json");
    let out = bulkhead(&[Path::new("report"), &missing]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.json"));
}

#[test]
fn pipeline_delays_from_message_events_against_the_analysed_bounds() {
    // Sink RTControl of p2 (examples/boomerang.yaml: paper bound 8 ms, exact 10.8 ms)
    // finishes four messages 1, 2, 9 and 12 ms after their origin; a sink of no
    // pipeline one message.
    let dir = Dir::new("pipes");
    let message = |t: u64, task: &str, id: u64, e2e_ms: u64| {
        format!(
            r#"{{"t_ns":{t},"event":"message","partition":"quest","task":"{task}","id":{id},"e2e_ns":{}}}"#,
            e2e_ms * 1_000_000
        )
    };
    let lines = [
        message(20_000_000, "RTControl", 0, 1),
        message(22_000_000, "RTControl", 1, 2),
        message(29_000_000, "RTControl", 2, 9),
        message(32_000_000, "RTControl", 3, 12),
        message(32_000_000, "other", 7, 5),
    ];
    let log = dir.file("run.jsonl", (lines.join("\n") + "\n").as_bytes());
    let example = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/boomerang.yaml"
    ));
    let f = figures(&log, &[Path::new("--system"), example]);
    let pipes = f["pipelines"].as_array().unwrap();
    assert_eq!(pipes.len(), 2, "{f}");
    let p2 = pipes.iter().find(|p| p["sink"] == "RTControl").unwrap();
    assert_eq!(p2["pipeline"], "p2", "{p2}");
    assert_eq!(p2["messages"], 4);
    let e = &p2["e2e"];
    assert_eq!(
        [&e["min_ns"], &e["p50_ns"], &e["p99_ns"], &e["max_ns"]],
        [1_000_000, 2_000_000, 12_000_000, 12_000_000],
        "{p2}"
    );
    assert_eq!(p2["bound_ns"], 8_000_000, "{p2}");
    assert_eq!(p2["beyond_bound"], 2, "{p2}");
    let exact = p2["exact_bound_ns"].as_u64().unwrap();
    assert!((9_000_000..12_000_000).contains(&exact), "{p2}");
    assert_eq!(p2["beyond_exact_bound"], 1, "{p2}");
    let h = &p2["histogram"];
    let bins = h["counts"].as_array().unwrap();
    assert_eq!(bins.iter().map(|c| c.as_u64().unwrap()).sum::<u64>(), 4);
    let other = pipes.iter().find(|p| p["sink"] == "other").unwrap();
    assert_eq!(other["pipeline"], Value::Null, "{other}");
    assert_eq!(other["bound_ns"], Value::Null, "{other}");
    // The page carries them, with their bounds, for its charts.
    let page = dir.path("report.html");
    let args = [Path::new("report"), &log, Path::new("-o"), &page];
    let out = bulkhead(&[&args[..], &[Path::new("--system"), example]].concat());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    let data = html
        .split("<script id=\"data\" type=\"application/json\">")
        .nth(1)
        .and_then(|rest| rest.split("</script>").next())
        .expect("the page's data");
    let data: Value = serde_json::from_str(&data.replace("<\\/", "</")).unwrap();
    let drawn = data["figures"]["pipelines"].as_array().expect("pipelines");
    let p2 = drawn.iter().find(|p| p["sink"] == "RTControl").unwrap();
    assert_eq!(
        (
            &p2["pipeline"],
            &p2["messages"],
            &p2["bound_ns"],
            &p2["beyond_bound"]
        ),
        (
            &Value::from("p2"),
            &Value::from(4),
            &Value::from(8_000_000),
            &Value::from(2)
        ),
        "{p2}"
    );
}

#[test]
fn a_sims_pipeline_sinks_give_the_same_distributions_as_its_statistics() {
    // Table I (examples/boomerang.yaml) simulated for 200 ms: each pipeline's sink
    // reports its messages, and the report's count, min and max equal the simulator's
    // own pipeline statistics, from the log and from the trace alike.
    let dir = Dir::new("sim-pipes");
    let example = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/boomerang.yaml"
    ));
    let (log, trace, stats) = (
        dir.path("log.jsonl"),
        dir.path("trace.json"),
        dir.path("stats.json"),
    );
    let out = bulkhead(&[
        Path::new("sim"),
        example,
        Path::new("--for"),
        Path::new("200ms"),
        Path::new("--schedule-log"),
        &log,
        Path::new("--trace"),
        &trace,
        Path::new("--stats-json"),
        &stats,
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stats: Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    for input in [&log, &trace] {
        let f = figures(input, &[Path::new("--system"), example]);
        let pipes = f["pipelines"].as_array().unwrap();
        assert_eq!(pipes.len(), 2, "{f}");
        for p in pipes {
            let name = p["pipeline"].as_str().unwrap();
            let sim = stats["pipelines"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == name)
                .unwrap();
            assert!(p["messages"].as_u64().unwrap() > 10, "{p}");
            assert_eq!(p["messages"], sim["messages_out"], "{p}\n{sim}");
            assert_eq!(p["e2e"]["min_ns"], sim["min_e2e_ns"], "{p}\n{sim}");
            assert_eq!(p["e2e"]["max_ns"], sim["max_e2e_ns"], "{p}\n{sim}");
        }
    }
}
