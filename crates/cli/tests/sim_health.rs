//! `health:` in `bulkhead sim` (issue 38 item 4, docs/health.md): faults injected with
//! `--inject-miss` and `--inject-exit` fire the supervisions `run` fires, and their
//! actions show in the schedule log as `run` logs them. No root needed.

mod common;

use common::Scratch;
use serde_json::Value;

/// Simulates `yaml` with `args`; the exit code, stderr and the schedule log's events.
fn sim(name: &str, yaml: &str, args: &[&str]) -> (Option<i32>, String, Vec<Value>) {
    let scratch = Scratch::new(&format!("sim-health-{name}"));
    let (file, log) = (scratch.file("s.yaml"), scratch.file("log.jsonl"));
    std::fs::write(&file, yaml).unwrap();
    let out = common::bulkhead()
        .arg("sim")
        .arg(&file)
        .arg("--schedule-log")
        .arg(&log)
        .args(args)
        .output()
        .expect("bulkhead runs");
    let events = common::log_events(&log);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr, events)
}

/// The events of `kind` about `task`.
fn of<'a>(events: &'a [Value], kind: &str, task: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["event"] == kind && e["task"] == task)
        .collect()
}

/// Release times of `task`'s jobs, in ms.
fn releases(events: &[Value], task: &str) -> Vec<u64> {
    of(events, "job_release", task)
        .iter()
        .map(|e| e["t_ns"].as_u64().unwrap() / 1_000_000)
        .collect()
}

const DEGRADED: &str = "system: {cpus: 0-1}
partitions:
  - name: hm-ctl
    kind: rt
    cpus: 1
    scheduler: edf
    tasks:
      - name: late
        cmd: /bin/true
        budget: 8ms
        period: 10ms
        health: {on_miss: {misses: 3, within: 1s, action: {mode: safe}}}
modes:
  initial: normal
  agent: {budget: 100us, period: 100ms}
  table:
    - name: normal
      partitions:
        hm-ctl: {tasks: [late]}
    - name: safe
      partitions:
        hm-ctl: {tasks: [{name: late, period: 20ms, deadline: 20ms}]}
";

/// The run test `repeated_misses_switch_the_system_to_its_degraded_mode`, simulated:
/// three injected misses within a second switch to the degraded mode, at the third
/// miss, with the `health_action` event `run` writes; without the fault nothing fires.
#[test]
fn injected_misses_switch_the_system_to_its_degraded_mode() {
    let (code, stderr, events) = sim(
        "miss",
        DEGRADED,
        &["--for", "1s", "--inject-miss", "late:100ms:3"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let actions = of(&events, "health_action", "late");
    assert_eq!(actions.len(), 1, "{actions:?}");
    let a = actions[0];
    assert_eq!(
        (&a["partition"], &a["cause"], &a["action"]),
        (&"hm-ctl".into(), &"miss".into(), &"mode: safe".into()),
        "{a}"
    );
    let third_miss = of(&events, "deadline_miss", "late")[2]["t_ns"].clone();
    assert_eq!(a["t_ns"], third_miss, "the action follows the third miss");
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "mode_done")
        .collect();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0]["mode"], "safe");

    let (code, stderr, events) = sim("no-miss", DEGRADED, &["--for", "1s"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(of(&events, "health_action", "late").is_empty());
    assert!(of(&events, "deadline_miss", "late").is_empty());
}

const RESTARTS: &str = "system: {cpus: 0-1}
partitions:
  - name: hm-rs
    kind: rt
    cpus: 1
    scheduler: edf
    tasks:
      - {name: cont, cmd: /bin/true, budget: 2ms, period: 10ms, resume: continuable, health: {on_exit: {action: restart, then: {after: 1, action: stop}}}}
      - {name: fresh, cmd: /bin/true, budget: 2ms, period: 10ms, resume: restartable, health: {on_exit: {action: restart}}}
";

/// An exited task is restarted as its `resume` declares: the continuable one at the
/// next point of its grid (30 ms), the restartable one on a new grid from its restart
/// (25 ms, 35 ms). The second exit escalates to `stop`: the simulation ends there and
/// fails as `run` does.
#[test]
fn an_exited_task_is_restarted_continuable_or_restartable_then_escalates_to_stop() {
    let args = [
        "--for",
        "300ms",
        "--inject-exit",
        "cont:25ms",
        "--inject-exit",
        "hm-rs/fresh:25ms",
        "--inject-exit",
        "cont:200ms",
    ];
    let (code, stderr, events) = sim("exit", RESTARTS, &args);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("task `cont` of partition `hm-rs`: exit; health action: stop"),
        "{stderr}"
    );
    assert_eq!(&releases(&events, "cont")[..5], [0, 10, 20, 30, 40]);
    assert_eq!(&releases(&events, "fresh")[..5], [0, 10, 20, 25, 35]);
    let actions: Vec<(u64, &str, &str)> = events
        .iter()
        .filter(|e| e["event"] == "health_action")
        .map(|e| {
            let t = e["t_ns"].as_u64().unwrap() / 1_000_000;
            (
                t,
                e["task"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            (25, "cont", "restart"),
            (25, "fresh", "restart"),
            (200, "cont", "stop")
        ]
    );
    assert!(
        releases(&events, "fresh").iter().all(|&t| t <= 200),
        "nothing after the stop"
    );
}

/// A task that exits completes no more jobs: its watchdog fires one timeout after its
/// last completion, and again each timeout while it stays silent.
#[test]
fn an_exited_task_falls_silent_and_its_watchdog_fires() {
    let yaml = "system: {cpus: 0-1}
partitions:
  - name: hm-wd
    kind: rt
    cpus: 1
    tasks:
      - {name: mute, cmd: /bin/true, budget: 1ms, period: 10ms, health: {watchdog: {timeout: 50ms, action: log}}}
";
    let (code, stderr, events) = sim(
        "watchdog",
        yaml,
        &["--for", "200ms", "--inject-exit", "mute:100ms"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let last_done = of(&events, "job_complete", "mute").last().unwrap()["t_ns"]
        .as_u64()
        .unwrap();
    let fired: Vec<u64> = of(&events, "health_action", "mute")
        .iter()
        .map(|e| {
            assert_eq!(e["cause"], "silence");
            e["t_ns"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(fired, [last_done + 50_000_000, last_done + 100_000_000]);
}

/// Bad fault flags name the flag's form or the task, with a non-zero exit.
#[test]
fn a_fault_on_no_task_or_in_the_wrong_form_is_refused() {
    let (code, stderr, _) = sim("bad-task", RESTARTS, &["--inject-exit", "nosuch:1ms"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("injected fault on `nosuch`: no rt task"),
        "{stderr}"
    );
    let (code, stderr, _) = sim("bad-form", RESTARTS, &["--inject-miss", "cont:1ms"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--inject-miss") && stderr.contains("TASK:AT:COUNT"),
        "{stderr}"
    );
}
