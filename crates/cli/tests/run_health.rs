//! `health:` in `bulkhead run` (issue 38), observed from outside: the exit code, the
//! run's `bulkhead: health:` lines, files the programs write and the schedule log's
//! `health_action` and mode events. Needs root (cgroups, SCHED_DEADLINE).

mod common;
use common::{exclusive_cpus_lock, Scratch};

fn run(scratch: &Scratch, yaml: &str, timeout: &str) -> (Option<i32>, String) {
    run_with(scratch, yaml, timeout, &[])
}

/// `bulkhead run` of `yaml` with `extra` flags, its schedule log in `log.jsonl`. The
/// description's file is named after the scratch directory, so that runs of tests in
/// parallel serve different default control sockets.
fn run_with(scratch: &Scratch, yaml: &str, timeout: &str, extra: &[&str]) -> (Option<i32>, String) {
    let name = scratch.0.file_name().unwrap().to_string_lossy();
    let file = scratch.file(&format!("{name}.yaml"));
    std::fs::write(&file, yaml).unwrap();
    let log = scratch.file("log.jsonl");
    let out = common::bulkhead()
        .current_dir(&scratch.0)
        .args(["run", file.to_str().unwrap(), "--timeout", timeout])
        .arg("--schedule-log")
        .arg(&log)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The schedule log's events.
fn events(scratch: &Scratch) -> Vec<serde_json::Value> {
    let log = std::fs::read_to_string(scratch.file("log.jsonl")).unwrap_or_default();
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `health_action` events, as (cause, action).
fn health_actions(events: &[serde_json::Value]) -> Vec<(String, String)> {
    let actions = events.iter().filter(|e| e["event"] == "health_action");
    actions
        .map(|e| {
            (
                e["cause"].as_str().unwrap().into(),
                e["action"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// The lines of file `name` of the scratch directory (0 when it does not exist).
fn lines(scratch: &Scratch, name: &str) -> usize {
    std::fs::read_to_string(scratch.file(name))
        .unwrap_or_default()
        .lines()
        .count()
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
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn repeated_misses_switch_the_system_to_its_degraded_mode() {
    let (periodic, _lock) = common::rt_test_setup();
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

/// A task whose jobs use more CPU time than its budget (the task library's accounting)
/// switches the system to its degraded mode, the `health_action` logged with the cause
/// `overrun`, within a second of its first release; a task beside it that keeps its
/// budget fires nothing.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn an_overrunning_task_switches_the_system_to_its_degraded_mode() {
    let (periodic, _lock) = common::rt_test_setup();
    let scratch = Scratch::new("health-overrun");
    let p = periodic.display();
    let yaml = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: ho-ctl\n    kind: rt\n    cpus: 1\n    scheduler: edf\n    tasks:\n      - name: greedy\n        cmd: {p} --exec-us 6000\n        budget: 4ms\n        period: 20ms\n        health: {{on_overrun: {{action: {{mode: safe}}}}}}\n      - name: modest\n        cmd: {p} --exec-us 300\n        budget: 2ms\n        period: 20ms\n        health: {{on_overrun: {{action: log}}}}\nmodes:\n  initial: normal\n  agent: {{budget: 100us, period: 100ms}}\n  table:\n    - name: normal\n      partitions:\n        ho-ctl: {{tasks: [greedy, modest]}}\n    - name: safe\n      partitions:\n        ho-ctl: {{tasks: [{{name: greedy, period: 40ms, deadline: 40ms, budget: 8ms}}, modest]}}\n"
    );
    let (code, stderr) = run(&scratch, &yaml, "2s");
    assert_eq!(code, Some(0), "{stderr}");
    let events = events(&scratch);
    let actions: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "health_action")
        .collect();
    assert!(!actions.is_empty(), "no health_action: {stderr}");
    assert!(
        actions.iter().all(|a| a["task"] == "greedy"),
        "the modest task fired nothing: {actions:?}"
    );
    let first = actions[0];
    assert_eq!(
        (&first["cause"], &first["action"]),
        (
            &serde_json::json!("overrun"),
            &serde_json::json!("mode: safe")
        ),
        "{first}"
    );
    assert!(first.get("failed").is_none(), "{first}");
    let t = |e: &serde_json::Value| e["t_ns"].as_u64().unwrap();
    let released = events
        .iter()
        .find(|e| e["event"] == "job_release" && e["task"] == "greedy")
        .map(t)
        .expect("greedy was released");
    let done = events
        .iter()
        .find(|e| e["event"] == "mode_done" && e["mode"] == "safe")
        .map(t)
        .expect("the switch to safe finished");
    assert!(
        done > released && done - released < 1_000_000_000,
        "mode_done at {done} ns, first release at {released} ns"
    );
    assert!(
        stderr
            .contains("bulkhead: health: task `greedy` of partition `ho-ctl`: overrun: mode: safe"),
        "{stderr}"
    );
}

/// `run` refuses what it does not carry out, before anything starts: a `health:` in a
/// system with a window schedule (here an exit's `log` of a windowed process; `check`
/// refuses it too, `invalid/health-in-windowed-system.yaml`).
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn run_refuses_a_supervision_it_does_not_carry_out() {
    let scratch = Scratch::new("health-refused");
    let yaml = "windows:\n  - length: 20\n    slices:\n      - {cpu: 0, sc_partition: hm-win}\npartitions:\n  - name: hm-win\n    processes:\n      - {budget: 5, cmd: \"sh -c 'echo x >> started; sleep 30'\", health: {on_exit: {action: log}}}\n";
    let want = "partitions[0].processes[0].health: `health:` is not carried out by `run` yet in a system with a window schedule";
    let (code, stderr) = run(&scratch, yaml, "2s");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(want), "{stderr}");
    assert_eq!(lines(&scratch, "started"), 0, "nothing started: {stderr}");
}

/// A process that stops sending heartbeats (8-byte messages 2 on its channel, fd 3,
/// what `bulkhead_heartbeat()` sends) is restarted by its watchdog; one that keeps
/// beating under the same 300 ms watchdog is left alone: it beats every 50 ms, six beats
/// of margin for a loaded machine's `sleep 0.05`. (It was once restarted: that run had
/// a keeper under SCHED_FIFO, which missed heartbeats and restarts alike, see
/// `UnwindowedKeeper::keep`.)
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
    // A system without rt tasks logs its health actions too, one per restart (and one
    // the stop may have cut short).
    let logged = health_actions(&events(&scratch));
    let restarts = count("silent") - 1;
    assert!(
        (restarts..=restarts + 1).contains(&logged.len()),
        "{logged:?}"
    );
    assert!(logged
        .iter()
        .all(|(c, a)| (c.as_str(), a.as_str()) == ("silence", "restart")));
}

/// An rt task's completed jobs feed its watchdog: a task that never completes one (a
/// program without the task library) falls silent, and its watchdog's `stop` ends the
/// run, which fails.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn a_task_that_completes_no_job_is_silent_and_its_watchdog_stops_the_run() {
    let (_periodic, _lock) = common::rt_test_setup();
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

/// An rt task that exits is restarted by its `on_exit` as its `resume:` declares
/// (JuMP2start 2.2): a continuable task goes on on its release grid (its job indices
/// continue past the 20 jobs of its first process), a restartable one begins a new grid
/// at the restart (its indices start again near 0). The second exit takes the
/// escalation's `log`, and both tasks end.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn an_exited_rt_task_is_restarted_continuable_or_restartable_as_declared() {
    let (periodic, _lock) = common::rt_test_setup();
    let scratch = Scratch::new("health-rt-restart");
    let task = |name: &str, resume: &str| {
        format!(
            "      - {{name: {name}, cmd: {} --activations 20 --exec-us 200, budget: 2ms, period: 10ms, resume: {resume}, health: {{on_exit: {{action: restart, then: {{after: 1, action: log}}}}}}}}\n",
            periodic.display()
        )
    };
    let yaml = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: hm-rs\n    kind: rt\n    cpus: 1\n    scheduler: edf\n    tasks:\n{}{}",
        task("cont", "continuable"),
        task("fresh", "restartable")
    );
    let (_, stderr) = run(&scratch, &yaml, "10s");
    let events = events(&scratch);
    let of = |task: &str| -> Vec<(String, String)> {
        let mine = events.iter().filter(|e| e["task"] == task);
        health_actions(&mine.cloned().collect::<Vec<_>>())
    };
    for task in ["cont", "fresh"] {
        let want = [("exit", "restart"), ("exit", "log")].map(|(c, a)| (c.into(), a.into()));
        assert_eq!(of(task), want.to_vec(), "{task}: {stderr}");
    }
    // Job indices completed after the restart's health_action, per task.
    let after_restart = |task: &str| -> Vec<u64> {
        let restart = events
            .iter()
            .position(|e| e["event"] == "health_action" && e["task"] == task)
            .unwrap();
        let t = events[restart]["t_ns"].as_u64().unwrap();
        let done = events.iter().filter(|e| {
            e["event"] == "job_complete" && e["task"] == task && e["t_ns"].as_u64() > Some(t)
        });
        done.map(|e| e["job"].as_u64().unwrap()).collect()
    };
    let cont = after_restart("cont");
    let fresh = after_restart("fresh");
    assert!(
        cont.len() >= 10 && fresh.len() >= 10,
        "{cont:?} {fresh:?}: {stderr}"
    );
    assert!(cont[0] >= 20, "continuable: the grid goes on: {cont:?}");
    assert!(fresh[0] <= 3, "restartable: a new grid: {fresh:?}");
    assert!(
        stderr.contains("bulkhead: health: task `cont` of partition `hm-rs`: exit: restart"),
        "{stderr}"
    );
}

/// An rt task killed from inside its partition (SIGKILL after the work of its 20th job,
/// before it completes: `bulkhead-periodic --kill-self`) is restarted by its `on_exit`
/// at its next period: the continuable task's grid goes on, so its first release after
/// the restart is the first point of the grid after the restart's end (a wide margin of
/// three periods for the new process's start-up on a loaded machine), never one before
/// the kill. In a system without modes and in one whose mode agent holds the task.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn a_killed_rt_task_is_restarted_at_its_next_period() {
    let (periodic, _lock) = common::rt_test_setup();
    let modes = "modes:\n  initial: run\n  agent: {budget: 100us, period: 100ms}\n  table:\n    - name: run\n      partitions:\n        hm-kill: {tasks: [k]}\n";
    for (case, modes) in [("without modes", ""), ("with modes", modes)] {
        let scratch = Scratch::new("health-rt-kill");
        let yaml = format!(
            "system: {{cpus: 0-1}}\npartitions:\n  - name: hm-kill\n    kind: rt\n    cpus: 1\n    scheduler: edf\n    tasks:\n      - {{name: k, cmd: {} --activations 20 --kill-self --exec-us 200, budget: 2ms, period: 10ms, resume: continuable, health: {{on_exit: {{action: restart, then: {{after: 1, action: log}}}}}}}}\n{modes}",
            periodic.display()
        );
        let (_, stderr) = run(&scratch, &yaml, "10s");
        let events = events(&scratch);
        let want = [("exit", "restart"), ("exit", "log")].map(|(c, a)| (c.into(), a.into()));
        assert_eq!(health_actions(&events), want.to_vec(), "{case}: {stderr}");
        assert!(
            stderr.contains("bulkhead: health: task `k` of partition `hm-kill`: exit: restart"),
            "{case}: {stderr}"
        );
        let at = |e: &serde_json::Value| e["t_ns"].as_u64().unwrap();
        let restart = events
            .iter()
            .find(|e| e["event"] == "health_action")
            .unwrap();
        let released = |e: &&serde_json::Value| {
            e["event"] == "job_release" && e["task"] == "k" && at(e) > at(restart)
        };
        let first = events
            .iter()
            .find(released)
            .expect("released after the restart");
        let (job, period) = (first["job"].as_u64().unwrap(), 10_000_000);
        let next = at(restart).div_ceil(period);
        assert!(
            job >= 20,
            "{case}: the grid goes on past the killed job 19: {first}"
        );
        assert!(
            (next..=next + 3).contains(&job),
            "{case}: job {job} released at the restart's next period {next}: {first} {restart}"
        );
        let completed = events.iter().filter(|e| {
            e["event"] == "job_complete" && e["task"] == "k" && e["job"].as_u64() >= Some(job)
        });
        assert!(completed.count() >= 10, "{case}: it runs on: {stderr}");
    }
}

/// `restart_partition`: a process's exit starts every process of its partition again
/// (the other one's start counter grows too); the escalation's `stop` then fails the run.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn an_exit_restarts_the_whole_partition() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("health-restart-partition");
    let (code, stderr) = run(
        &scratch,
        "system: {}\npartitions:\n  - name: hm-rp\n    cpus: 1\n    processes:\n      - {cmd: \"sh -c 'echo x >> first; sleep 0.3; exit 4'\", health: {on_exit: {action: restart_partition, then: {after: 1, action: stop}}}}\n      - \"sh -c 'echo x >> second; sleep 30'\"\n  - name: hm-other\n    cpus: 1\n    processes:\n      - \"sh -c 'echo x >> other; sleep 30'\"\n",
        "20s",
    );
    assert_eq!(code, Some(1), "the escalation's stop: {stderr}");
    assert_eq!(lines(&scratch, "first"), 2, "{stderr}");
    assert_eq!(
        lines(&scratch, "second"),
        2,
        "restarted with its partition: {stderr}"
    );
    assert_eq!(
        lines(&scratch, "other"),
        1,
        "another partition is left alone: {stderr}"
    );
    for line in [
        "bulkhead: health: process 0 of partition `hm-rp`: exit: restart_partition\n",
        "bulkhead: health: process 0 of partition `hm-rp`: exit: stop\n",
    ] {
        assert_eq!(stderr.matches(line).count(), 1, "{line}: {stderr}");
    }
}

/// `suspend`: a process's exit suspends the system through the stop-start manager
/// `ctl suspend` reaches: the schedule log has the suspend request `by: health` and the
/// frozen partitions; the system stays suspended (nothing resumes it) until the run
/// ends.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn an_exit_suspends_the_system_through_stop_start() {
    let (periodic, _lock) = common::rt_test_setup();
    let scratch = Scratch::new("health-suspend");
    let yaml = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: hm-ss-rt\n    kind: rt\n    cpus: 1\n    scheduler: edf\n    tasks:\n      - {{name: work, cmd: {} --exec-us 200, budget: 2ms, period: 10ms}}\n  - name: hm-ss-be\n    cpus: 0\n    processes:\n      - {{cmd: \"sh -c 'sleep 0.3; exit 2'\", health: {{on_exit: {{action: suspend}}}}}}\n      - sleep 30\n",
        periodic.display()
    );
    let socket = scratch.file("ctl.sock");
    let (code, stderr) = run_with(
        &scratch,
        &yaml,
        "2s",
        &["--control", socket.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let events = events(&scratch);
    assert_eq!(
        health_actions(&events),
        vec![("exit".to_string(), "suspend".to_string())],
        "{stderr}"
    );
    let request = events
        .iter()
        .position(|e| e["event"] == "suspend_request")
        .unwrap_or_else(|| panic!("no suspend_request: {stderr}"));
    assert_eq!(events[request]["by"], "health", "{}", events[request]);
    let suspended = events.iter().any(|e| e["event"] == "system_suspended");
    assert!(suspended, "{stderr}");
    // Resumed by the run's end only: no job released between the suspension and the
    // resume.
    let t_of = |name: &str| {
        let e = events.iter().find(|e| e["event"] == name);
        e.and_then(|e| e["t_ns"].as_u64())
    };
    let (from, to) = (t_of("system_suspended").unwrap(), t_of("resume_request"));
    let between = events
        .iter()
        .filter(|e| e["event"] == "job_release")
        .filter(|e| {
            e["t_ns"]
                .as_u64()
                .is_some_and(|t| t > from && t < to.unwrap_or(u64::MAX))
        })
        .count();
    assert!(between <= 1, "{between} releases while suspended: {stderr}");
}

/// `ctl status` shows each supervision's state: a silent process's watchdog has fired
/// (its `log` taken) and says how long the process has been silent; the exit
/// supervision of the other has not fired.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn ctl_status_shows_each_supervisions_state() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("health-status");
    let file = scratch.file("hm-status.yaml");
    std::fs::write(
        &file,
        "system: {}\npartitions:\n  - name: hm-st\n    cpus: 1\n    processes:\n      - {cmd: sleep 30, health: {watchdog: {timeout: 100ms, action: log, then: {after: 1000, action: stop}}}}\n      - {cmd: sleep 30, health: {on_exit: {action: restart}}}\n",
    )
    .unwrap();
    let socket = scratch.file("ctl.sock");
    let mut run = common::bulkhead()
        .current_dir(&scratch.0)
        .args([
            "run",
            file.to_str().unwrap(),
            "--timeout",
            "20s",
            "--control",
        ])
        .arg(&socket)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = || -> Option<serde_json::Value> {
        let out = common::bulkhead()
            .args([
                "ctl",
                "--control",
                socket.to_str().unwrap(),
                "status",
                "--json",
            ])
            .output()
            .ok()?;
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        Some(doc["status"]["health"].clone())
    };
    // Asked until the watchdog has fired at least twice (about 200 ms), for 10 s at most.
    let fired = |h: &serde_json::Value| h[0]["fired"].as_u64().unwrap_or(0);
    let mut health = serde_json::Value::Null;
    for _ in 0..100 {
        health = status().unwrap_or_default();
        if fired(&health) >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let text = common::bulkhead()
        .args(["ctl", "--control", socket.to_str().unwrap(), "status"])
        .output()
        .unwrap();
    // SAFETY: kill has no memory preconditions; `run` is our unreaped child.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    let _ = run.wait();
    assert!(fired(&health) >= 2, "{health}");
    assert_eq!(
        (
            &health[0]["partition"],
            &health[0]["process"],
            &health[0]["supervision"],
            &health[0]["next_action"]
        ),
        (
            &serde_json::json!("hm-st"),
            &serde_json::json!(0),
            &serde_json::json!("watchdog"),
            &serde_json::json!("log")
        ),
        "{health}"
    );
    assert!(health[0]["silent_ns"].as_u64().is_some(), "{health}");
    assert_eq!(
        (
            &health[1]["process"],
            &health[1]["supervision"],
            &health[1]["fired"]
        ),
        (
            &serde_json::json!(1),
            &serde_json::json!("on_exit"),
            &serde_json::json!(0)
        ),
        "{health}"
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            "health: process 1 of partition hm-st: on_exit fired 0 times, next action restart\n"
        ),
        "{text}"
    );
}

/// A restarted SCHED_FIFO task stays under its budget enforcer: a task that overruns its
/// budget in every job and exits after 3 jobs is restarted again and again, and the
/// summary counts it throttled in about every period, not only in its first process's.
#[test]
#[ignore = "needs root: cgroups, SCHED_FIFO"]
fn a_restarted_fifo_task_stays_under_its_budget_enforcer() {
    let (periodic, _lock) = common::rt_test_setup();
    let scratch = Scratch::new("health-fifo-restart");
    let yaml = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: hm-fifo\n    kind: rt\n    cpus: 1\n    tasks:\n      - {{name: over, cmd: {} --activations 3 --exec-us 3000, budget: 1ms, period: 10ms, health: {{on_exit: {{action: restart}}}}}}\n",
        periodic.display()
    );
    let (code, stderr) = run(&scratch, &yaml, "1500ms");
    assert_eq!(code, Some(0), "{stderr}");
    let restarts = stderr
        .matches("task `over` of partition `hm-fifo`: exit: restart")
        .count();
    assert!(restarts >= 5, "{restarts} restarts: {stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("task `over` ") && l.contains(" jobs"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let number = |before: &str| -> u64 {
        let head = line.split(before).next().unwrap();
        head.rsplit(' ')
            .find(|w| !w.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    };
    let (jobs, throttled) = (number(" jobs"), number(" periods"));
    // Without the enforcer for the new pids only the first process's 3 jobs count.
    assert!(
        jobs >= 15 && 2 * throttled >= jobs,
        "{throttled} of {jobs}: {line}"
    );
}
