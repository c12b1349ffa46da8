//! The platform's floor as an input (issue 37, docs/platform.md): `analyze` reports the
//! verdicts with the `platform:` stall beside those without it, `solve` sizes pipelines
//! for it.

mod common;

use common::Scratch;
use std::path::{Path, PathBuf};
use std::process::Output;

fn bulkhead(args: &[&str]) -> Output {
    common::bulkhead()
        .args(args)
        .output()
        .expect("bulkhead runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `examples/boomerang.yaml` with `platform: {stall: STALL}`, in a scratch directory.
struct WithPlatform {
    /// Removes the file with its directory on drop.
    _dir: Scratch,
    path: PathBuf,
}

impl WithPlatform {
    fn new(name: &str, stall: &str) -> WithPlatform {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/boomerang.yaml");
        let yaml = std::fs::read_to_string(example).unwrap().replace(
            "pipelines:",
            &format!("platform: {{stall: {stall}}}\npipelines:"),
        );
        let dir = Scratch::new(&format!("platform-{name}"));
        let path = dir.file("p.yaml");
        std::fs::write(&path, yaml).unwrap();
        WithPlatform { _dir: dir, path }
    }

    fn path(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

/// A 5 ms stall is longer than every 2 ms period of Table I: with it, every task misses
/// (the rt tasks cannot hide a stall; the pipelines' buffers do). The exit status stays
/// the verdict without it.
#[test]
fn analyze_reports_the_verdicts_with_and_without_the_stall() {
    let file = WithPlatform::new("analyze", "5ms");
    let out = bulkhead(&["analyze", file.path()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains(": SCHEDULABLE"), "{stdout}");
    assert!(
        stdout.contains("with the platform's stall (up to 5ms on a CPU")
            && stdout.contains("NOT SCHEDULABLE (7 of 7 tasks miss)"),
        "{stdout}"
    );
    let out = bulkhead(&["analyze", "--json", file.path()]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let with = &json["with_platform"];
    assert_eq!(
        (&with["stall_ns"], &with["schedulable"]),
        (&5_000_000.into(), &false.into())
    );
    let reader = &with["tasks"][0];
    assert_eq!(reader["name"], "rav4-reader");
    // The highest-priority task: its 300 µs plus the stall.
    assert_eq!(
        (&reader["wcrt_ns"], &reader["stalled_wcrt_ns"]),
        (&300_000.into(), &5_300_000.into())
    );
    let small = WithPlatform::new("analyze-small", "100us");
    let out = bulkhead(&["analyze", "--json", small.path()]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["with_platform"]["schedulable"], true,
        "{}",
        json["with_platform"]
    );
}

/// `solve` with `platform: {stall: 5ms}` gives deeper buffers than without: fifos of
/// 8 holding the stall's backlog where the ideal machine has four-slot buffers.
#[test]
fn solve_sizes_the_buffers_for_the_stall() {
    let depths = |file: &str| {
        let out = bulkhead(&["solve", "--json", file]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let pipelines = json["pipelines"].as_array().unwrap().clone();
        pipelines
            .iter()
            .flat_map(|p| p["buffers"].as_array().unwrap().clone())
            .map(|b| {
                (
                    b["kind"].as_str().unwrap().to_string(),
                    b["depth"].as_u64().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let ideal = WithPlatform::new("solve-ideal", "0s");
    let stalled = WithPlatform::new("solve-stalled", "5ms");
    let latest = ("latest".to_string(), 1);
    let fifo = ("fifo".to_string(), 8);
    assert_eq!(
        depths(ideal.path()),
        vec![latest.clone(), latest.clone(), latest]
    );
    assert_eq!(
        depths(stalled.path()),
        vec![fifo.clone(), fifo.clone(), fifo]
    );
    let out = bulkhead(&["solve", stalled.path()]);
    assert!(text(&out.stdout).contains("with one stall of up to 5ms: delay bound"));
}

/// `bulkhead probe --json` gives each CPU's figures (the wake-ups of a real-time thread
/// every 1 ms for 1 s), and `--write-platform` a section a description loads with.
#[test]
#[ignore = "needs root: the probe needs root for SCHED_FIFO"]
fn probe_reports_each_cpu_and_writes_a_platform_section() {
    let dir = Scratch::new("probe");
    let section = dir.file("platform.yaml");
    let out = bulkhead(&[
        "probe",
        "--for",
        "1s",
        "--cpus",
        "0",
        "--json",
        "--write-platform",
        section.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cpus = json["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), 1, "{json}");
    let cpu = &cpus[0];
    assert_eq!(
        (&cpu["cpu"], &cpu["samples"]),
        (&0.into(), &1000.into()),
        "{cpu}"
    );
    let f = |k: &str| cpu[k].as_f64().unwrap();
    assert!(
        f("min_us") <= f("median_us") && f("median_us") <= f("p99_us"),
        "{cpu}"
    );
    assert!(
        f("p99_us") <= f("p999_us") && f("p999_us") <= f("max_us"),
        "{cpu}"
    );
    let counted: u64 = cpu["stalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 1000);
    let written = std::fs::read_to_string(&section).unwrap();
    let file = WithPlatform::new("probed", "0s");
    let yaml = std::fs::read_to_string(&file.path)
        .unwrap()
        .replace("platform: {stall: 0s}\n", &written);
    std::fs::write(&file.path, yaml).unwrap();
    let out = bulkhead(&["check", file.path()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{written}: {}",
        text(&out.stderr)
    );
}

/// A CPU the probe cannot run on is an error naming it, not a panic.
#[test]
#[ignore = "needs root: the probe needs root for SCHED_FIFO"]
fn probe_of_a_cpu_it_cannot_use_fails_naming_it() {
    let out = bulkhead(&["probe", "--for", "10ms", "--cpus", "1000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("CPU 1000"),
        "{}",
        text(&out.stderr)
    );
}
