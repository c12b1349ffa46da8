//! `health:` in `bulkhead run` (issue 38), observed from outside: the exit code, the
//! run's `bulkhead: health:` lines, files the programs write and the schedule log's
//! `health_action` and mode events. Needs root (cgroups, SCHED_DEADLINE).

mod common;
use common::{exclusive_cpus_lock, Scratch};

fn run(scratch: &Scratch, yaml: &str, timeout: &str) -> (Option<i32>, String) {
    let file = scratch.file("system.yaml");
    std::fs::write(&file, yaml).unwrap();
    let log = scratch.file("log.jsonl");
    let out = common::bulkhead()
        .current_dir(&scratch.0)
        .args(["run", file.to_str().unwrap(), "--timeout", timeout])
        .arg("--schedule-log")
        .arg(&log)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An exiting process is restarted by `on_exit`, and after two restarts the escalation
/// stops the run, which fails.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn an_exiting_process_is_restarted_then_the_escalation_stops_the_run() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("health-exit");
    let (code, stderr) = run(
        &scratch,
        "system: {}\npartitions:\n  - name: hm-ivi\n    cpus: 1\n    processes:\n      - {cmd: \"sh -c 'echo x >> starts; sleep 0.1; exit 3'\", health: {on_exit: {action: restart, then: {after: 2, action: stop}}}}\n      - sleep 30\n",
        "20s",
    );
    assert_eq!(code, Some(1), "the stop fails the run: {stderr}");
    let starts = std::fs::read_to_string(scratch.file("starts")).unwrap_or_default();
    assert_eq!(
        starts.lines().count(),
        3,
        "started, restarted twice: {stderr}"
    );
    let restarts = stderr
        .matches("bulkhead: health: process 0 of partition `hm-ivi`: exit: restart")
        .count();
    assert_eq!(restarts, 2, "{stderr}");
    assert!(
        stderr.contains("bulkhead: health: process 0 of partition `hm-ivi`: exit: stop")
            && stderr.contains("exited: exit status: 3; health action: stop"),
        "{stderr}"
    );
}

/// A task that overruns every period misses 3 deadlines within 1 s: its `on_miss`
/// switches the system to mode `safe`, seen in the schedule log as the monitor's
/// `health_action` and the mode manager's finished switch.
#[test]
fn repeated_misses_switch_the_system_to_its_degraded_mode() {
    let Some((periodic, _lock)) = common::rt_test_setup() else {
        return;
    };
    let scratch = Scratch::new("health-miss");
    let yaml = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: hm-ctl\n    kind: rt\n    cpus: 1\n    scheduler: edf\n    tasks:\n      - name: late\n        cmd: {} --exec-us 15000\n        budget: 8ms\n        period: 10ms\n        health: {{on_miss: {{misses: 3, within: 1s, action: {{mode: safe}}}}}}\nmodes:\n  initial: normal\n  agent: {{budget: 100us, period: 100ms}}\n  table:\n    - name: normal\n      partitions:\n        hm-ctl: {{tasks: [late]}}\n    - name: safe\n      partitions:\n        hm-ctl: {{tasks: [{{name: late, period: 20ms, deadline: 20ms}}]}}\n",
        periodic.display()
    );
    let (code, stderr) = run(&scratch, &yaml, "2s");
    assert_eq!(code, Some(0), "{stderr}");
    let log = std::fs::read_to_string(scratch.file("log.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let actions: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "health_action")
        .collect();
    assert!(!actions.is_empty(), "no health_action: {stderr}");
    let first = actions[0];
    assert_eq!(
        (
            &first["partition"],
            &first["task"],
            &first["cause"],
            &first["action"]
        ),
        (
            &serde_json::json!("hm-ctl"),
            &serde_json::json!("late"),
            &serde_json::json!("miss"),
            &serde_json::json!("mode: safe")
        ),
        "{first}"
    );
    assert!(first.get("failed").is_none(), "{first}");
    let done = events
        .iter()
        .any(|e| e["event"] == "mode_done" && e["mode"] == "safe");
    assert!(done, "the switch to safe finished: {stderr}");
    assert!(
        stderr.contains("bulkhead: health: task `late` of partition `hm-ctl`: miss: mode: safe"),
        "{stderr}"
    );
}

/// `run` refuses what it does not carry out yet, before anything starts.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn run_refuses_a_supervision_it_does_not_carry_out() {
    let scratch = Scratch::new("health-refused");
    let (code, stderr) = run(
        &scratch,
        "system: {}\npartitions:\n  - name: hm-svc\n    cpus: 1\n    processes:\n      - {cmd: sleep 30, health: {on_exit: {action: restart_partition}}}\n",
        "2s",
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "partition `hm-svc`, process 0: health.on_exit: the action `restart_partition` is not carried out by `run` yet"
        ),
        "{stderr}"
    );
}

/// A process that stops sending heartbeats (8-byte messages 2 on its channel, fd 3,
/// what `bulkhead_heartbeat()` sends) is restarted by its watchdog; one that keeps
/// beating is left alone.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn a_silent_process_is_restarted_by_its_watchdog() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("health-watchdog");
    // Backslashes doubled for YAML's double-quoted string.
    let beat = r"printf '\\002\\000\\000\\000\\000\\000\\000\\000' >&3";
    let yaml = format!(
        "system: {{}}\npartitions:\n  - name: hm-wd\n    cpus: 1\n    processes:\n      - {{cmd: \"sh -c \\\"echo x >> silent; {beat}; sleep 30\\\"\", health: {{watchdog: {{timeout: 300ms, action: restart}}}}}}\n      - {{cmd: \"sh -c \\\"echo x >> beating; while true; do {beat}; sleep 0.05; done\\\"\", health: {{watchdog: {{timeout: 300ms, action: restart}}}}}}\n"
    );
    let (code, stderr) = run(&scratch, &yaml, "2s");
    assert_eq!(code, Some(0), "{stderr}");
    let count = |f: &str| {
        std::fs::read_to_string(scratch.file(f))
            .unwrap_or_default()
            .lines()
            .count()
    };
    // 2 s with a 300 ms timeout: about 6 starts; at least 3 whatever the load.
    assert!((3..=8).contains(&count("silent")), "{stderr}");
    assert_eq!(count("beating"), 1, "never restarted: {stderr}");
    assert!(
        stderr.contains("bulkhead: health: process 0 of partition `hm-wd`: silence: restart"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("process 1 of partition `hm-wd`: silence"),
        "{stderr}"
    );
}

/// An rt task's completed jobs feed its watchdog: a task that never completes one (a
/// program without the task library) falls silent, and its watchdog's `stop` ends the
/// run, which fails.
#[test]
fn a_task_that_completes_no_job_is_silent_and_its_watchdog_stops_the_run() {
    let Some((_periodic, _lock)) = common::rt_test_setup() else {
        return;
    };
    let scratch = Scratch::new("health-rt-watchdog");
    let (code, stderr) = run(
        &scratch,
        "system: {cpus: 0-1}\npartitions:\n  - name: hm-rt\n    kind: rt\n    cpus: 1\n    tasks:\n      - {name: mute, cmd: sleep 30, budget: 1ms, period: 10ms, health: {watchdog: {timeout: 300ms, action: stop}}}\n",
        "20s",
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("bulkhead: health: task `mute` of partition `hm-rt`: silence: stop")
            && stderr.contains("fell silent"),
        "{stderr}"
    );
}
