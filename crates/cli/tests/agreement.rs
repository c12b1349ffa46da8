//! `analyze` and `sim` take the same decisions about a description (issue 33: one plan):
//! the fixed priorities of tasks with equal deadlines, and (below) where tasks run. A
//! synchronous release is the critical instant of fixed-priority tasks on one CPU
//! (Liu & Layland 1973, Theorem 1), so the simulated worst response equals the analysed
//! WCRT exactly. Observed from outside: `analyze --json` and `sim --stats-json`.

mod common;
use common::Scratch;
use serde_json::Value;

/// `analyze --json` of `file`: each task's WCRT in ns by name.
fn wcrts(file: &std::path::Path) -> Vec<(String, u64)> {
    let out = common::bulkhead()
        .args(["analyze", "--json"])
        .arg(file)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).expect("analyze --json");
    let tasks = report["tasks"].as_array().expect("tasks").iter();
    let mut out: Vec<(String, u64)> = tasks
        .map(|t| {
            (
                t["name"].as_str().unwrap().into(),
                t["wcrt_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// `sim --stats-json` of `file` for `duration`: each task's worst response in ns by name.
fn responses(scratch: &Scratch, file: &std::path::Path, duration: &str) -> Vec<(String, u64)> {
    let stats = scratch.file("stats.json");
    let out = common::bulkhead()
        .args(["sim", "--for", duration, "--stats-json"])
        .arg(&stats)
        .arg(file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::text(&out.stderr));
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let tasks = stats["tasks"].as_array().expect("tasks").iter();
    let mut out: Vec<(String, u64)> = tasks
        .map(|t| {
            let name = t["name"].as_str().unwrap().into();
            (name, t["max_response_ns"].as_u64().unwrap())
        })
        .collect();
    out.sort();
    out
}

/// Two tasks with equal deadlines: the shorter period has the higher priority in
/// `analyze` and in `sim` alike (`sim` ranked them by declaration order, giving `b`
/// 8 ms against `analyze`'s 4 ms).
#[test]
fn tasks_with_equal_deadlines_get_one_priority_order() {
    let scratch = Scratch::new("agree-tie");
    let file = scratch.file("tie.yaml");
    std::fs::write(
        &file,
        "system: {cpus: 0}\npartitions:\n  - name: p\n    kind: rt\n    cpus: 0\n    tasks:\n      - {name: a, budget: 4ms, period: 20ms, deadline: 10ms}\n      - {name: b, budget: 4ms, period: 10ms, deadline: 10ms}\n",
    )
    .unwrap();
    let analysed = wcrts(&file);
    assert_eq!(analysed, [("a".into(), 8_000_000), ("b".into(), 4_000_000)]);
    assert_eq!(responses(&scratch, &file, "100ms"), analysed);
}
