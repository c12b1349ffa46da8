//! rt tasks read `cmd:` as be processes do (one command planner): a compound command
//! runs whole under `sh -c`, `VAR=x cmd` sets the variable, and a missing program is
//! reported with the task's position before anything is created. Observed from outside:
//! files the commands write, the exit code and the message. Needs root (rt tasks).

mod common;
use common::{exclusive_cpus_lock, Scratch};
use std::process::Output;

/// Runs a description with one rt task `cmd` (in `scratch`, its working directory) for 1 s.
fn run_rt_task(scratch: &Scratch, cmd: &str) -> Output {
    let file = scratch.file("system.yaml");
    let src = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: ctl\n    kind: rt\n    cpus: 0\n    scheduler: fixed-priority\n    tasks:\n      - name: t\n        cmd: \"{cmd}\"\n        budget: 2ms\n        period: 10ms\n"
    );
    std::fs::write(&file, src).unwrap();
    common::bulkhead()
        .args(["run", file.to_str().unwrap(), "--timeout", "1s"])
        .output()
        .unwrap()
}

#[test]
#[ignore = "needs root: rt tasks"]
fn a_compound_rt_command_runs_every_part() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-compound");
    let out = run_rt_task(&scratch, "true && touch b-ran");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        scratch.file("b-ran").exists(),
        "`b` of `a && b` did not run: {stderr}"
    );
}

#[test]
#[ignore = "needs root: rt tasks"]
fn an_assignment_before_an_rt_command_sets_the_variable() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-assign");
    let script = scratch.file("t");
    std::fs::write(&script, "#!/bin/sh\necho \"$RUST_LOG\" > seen\n").unwrap();
    std::process::Command::new("chmod")
        .args(["755", script.to_str().unwrap()])
        .status()
        .unwrap();
    let out = run_rt_task(&scratch, "RUST_LOG=1 ./t");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let seen = std::fs::read_to_string(scratch.file("seen")).unwrap_or_default();
    assert_eq!(seen, "1\n", "{stderr}");
}

#[test]
#[ignore = "needs root: rt tasks"]
fn a_missing_rt_program_is_reported_up_front_with_its_position() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-missing");
    let out = run_rt_task(&scratch, "./no-such-task-program");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "partitions[0].tasks[0].cmd: program `./no-such-task-program` does not exist"
        ),
        "{stderr}"
    );
    // Reported before anything was created: no cgroup was made, so none was removed.
    assert!(!stderr.contains("starting task"), "{stderr}");
}

#[test]
#[ignore = "needs root: rt tasks"]
fn an_rt_task_that_ends_before_the_stop_fails_the_run_naming_it() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-ends");
    let out = run_rt_task(&scratch, "sh -c 'exit 3'");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: task `t` of `ctl` ended before the stop"),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs root: rt tasks"]
fn a_be_process_that_fails_is_reported_with_its_status() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-be-fails");
    let file = scratch.file("system.yaml");
    std::fs::write(
        &file,
        "system: {}\npartitions:\n  - {name: ivi, cpus: 1, processes: [\"sh -c 'exit 3'\", sleep 1]}\n",
    )
    .unwrap();
    let out = common::bulkhead()
        .args(["run", file.to_str().unwrap(), "--timeout", "3s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "a warning only: {stderr}");
    assert!(
        stderr.contains(
            "warning: partition `ivi`, process 0 (`sh -c 'exit 3'`) exited: exit status: 3"
        ),
        "{stderr}"
    );
    assert!(
        !stderr.contains("process 1"),
        "sleep exited with 0: {stderr}"
    );
}

/// Runs `yaml` (written to `system.yaml` in `scratch`, the processes' working directory)
/// with `--timeout timeout`.
fn run_yaml(scratch: &Scratch, yaml: &str, timeout: &str) -> (Option<i32>, String) {
    let file = scratch.file("system.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = common::bulkhead()
        .args(["run", file.to_str().unwrap(), "--timeout", timeout])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Lines in the file `name` of `scratch` (the processes append one per start).
fn lines(scratch: &Scratch, name: &str) -> usize {
    std::fs::read_to_string(scratch.file(name))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
#[ignore = "needs root: rt tasks"]
fn an_sc_process_that_ends_before_the_stop_fails_the_run_naming_it_with_its_status() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-win-fails");
    let (code, stderr) = run_yaml(
        &scratch,
        "windows:\n  - length: 20\n    slices:\n      - {cpu: 0, sc_partition: SC1}\npartitions:\n  - name: SC1\n    processes:\n      - {budget: 5, cmd: \"sh -c 'exit 3'\"}\n      - {budget: 5, cmd: \"true\"}\n",
        "2s",
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "error: partition `SC1`, process 0 (`sh -c 'exit 3'`) ended before the stop: exit status: 3"
        ) && stderr.contains(
            "error: partition `SC1`, process 1 (`true`) ended before the stop: exit status: 0"
        ),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs root: rt tasks"]
fn a_windowed_be_process_that_fails_is_a_warning_with_its_status() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-win-be-fails");
    let (code, stderr) = run_yaml(
        &scratch,
        "windows:\n  - length: 20\n    slices:\n      - {cpu: 0, sc_partition: SC1, be_partition: BE1}\npartitions:\n  - name: SC1\n    processes: [{budget: 5, cmd: sleep 30}]\n  - name: BE1\n    processes: [{budget: 5, cmd: \"sh -c 'exit 4'\"}]\n",
        "1s",
    );
    assert_eq!(code, Some(0), "a warning only: {stderr}");
    assert!(
        stderr.contains(
            "warning: partition `BE1`, process 0 (`sh -c 'exit 4'`) exited: exit status: 4"
        ),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs root: rt tasks"]
fn a_required_be_process_that_exits_fails_the_run() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-required");
    let (code, stderr) = run_yaml(
        &scratch,
        "system: {}\npartitions:\n  - {name: ivi, cpus: 1, processes: [{cmd: \"true\", required: true}, sleep 30]}\n",
        "1s",
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("error: partition `ivi`, process 0 (`true`) exited before the stop: exit status: 0 (required: the run fails)"),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs root: rt tasks"]
fn a_be_process_restarted_on_failure_stops_at_its_start_limit() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-restart-limit");
    let (code, stderr) = run_yaml(
        &scratch,
        "system: {}\npartitions:\n  - name: ivi\n    cpus: 1\n    processes:\n      - {cmd: \"sh -c 'echo x >> starts; exit 2'\", restart: on-failure, restart_delay: 10ms, start_limit_burst: 3, start_limit_interval: 30s}\n      - sleep 30\n",
        "2s",
    );
    assert_eq!(code, Some(0), "not required: a warning: {stderr}");
    assert_eq!(lines(&scratch, "starts"), 3, "{stderr}");
    assert!(
        stderr.contains("warning: partition `ivi`, process 0 (`sh -c 'echo x >> starts; exit 2'`) exited: exit status: 2; not restarted: it was started 3 times within 30s")
            && stderr.contains("was restarted 2 times; its last exit: exit status: 2"),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs root: rt tasks"]
fn a_required_be_process_that_exhausts_its_restarts_fails_the_run() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-restart-required");
    let (code, stderr) = run_yaml(
        &scratch,
        "system: {}\npartitions:\n  - name: ivi\n    cpus: 1\n    processes:\n      - {cmd: \"sh -c 'exit 2'\", restart: on-failure, restart_delay: 0s, start_limit_burst: 2, required: true}\n      - sleep 30\n",
        "1s",
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("error: partition `ivi`, process 0 (`sh -c 'exit 2'`) exited: exit status: 2; not restarted: it was started 2 times within 10s (start_limit_burst, start_limit_interval) (required: the run fails)"),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs root: rt tasks"]
fn a_be_process_restarted_always_waits_its_restart_delay() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-restart-always");
    let (code, stderr) = run_yaml(
        &scratch,
        "system: {}\npartitions:\n  - name: ivi\n    cpus: 1\n    processes:\n      - {cmd: \"sh -c 'echo x >> starts'\", restart: always, restart_delay: 250ms, start_limit_burst: 1000}\n",
        "1500ms",
    );
    assert_eq!(code, Some(0), "{stderr}");
    // About 1.5 s / 250 ms = 6 starts; a loop without the delay would make thousands.
    let starts = lines(&scratch, "starts");
    assert!((2..=8).contains(&starts), "{starts} starts: {stderr}");
    assert!(stderr.contains("was restarted"), "{stderr}");
}

/// The supervisor raises its own descriptor limit (it holds several descriptors per
/// process), but its programs get back the limit it was started with: an rt task and a
/// windowed process each write the soft limit they see.
#[test]
#[ignore = "needs root: rt tasks"]
fn programs_get_the_descriptor_limit_the_supervisor_was_started_with() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("cmd-fd-limit");
    let file = scratch.file("system.yaml");
    std::fs::write(
        &file,
        "partitions:\n  - name: ctl\n    kind: rt\n    cpus: 0\n    tasks:\n      - {name: t, cmd: \"ulimit -Sn > rt-limit; sleep 5\", budget: 2ms, period: 10ms}\n  - name: SC1\n    processes:\n      - {budget: 5, cmd: \"sh -c 'ulimit -Sn > sc-limit; sleep 5'\"}\nwindows:\n  - length: 20\n    slices:\n      - {cpu: 1, sc_partition: SC1}\n",
    )
    .unwrap();
    let mut run = common::bulkhead();
    run.args(["run", file.to_str().unwrap(), "--timeout", "1s"]);
    // SAFETY: setrlimit is async-signal-safe; lowering the soft limit needs no privilege.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut run, || {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            limit.rlim_cur = 777;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        });
    }
    let out = run.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for name in ["rt-limit", "sc-limit"] {
        let seen = std::fs::read_to_string(scratch.file(name)).unwrap_or_default();
        assert_eq!(seen.trim(), "777", "{name}: {stderr}");
    }
}
