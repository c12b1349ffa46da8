//! Programs are found the way a user expects, from a checkout in any directory (issue 32):
//! a be program that lives under `/tmp` outside the description's directory runs by
//! relative and absolute path, behind the partition's private `/tmp`, and cannot write
//! its own file; bulkhead's own programs are found by name in `bulkhead`'s directory,
//! directly (`bulkhead can map`) and inside a shell command (`demos-signal-completion`);
//! `check` names a missing program with its position. Observed from outside: files the
//! programs write, the schedule log, exit codes and messages.

mod common;
use common::{exclusive_cpus_lock, Scratch};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// `bulkhead run FILE --timeout T [extra...]`.
fn run(file: &std::path::Path, timeout: &str, extra: &[&str]) -> Output {
    common::bulkhead()
        .arg("run")
        .arg(file)
        .args(["--timeout", timeout])
        .args(extra)
        .output()
        .unwrap()
}

/// Writes an executable script `body` at `path`.
fn script(path: &std::path::Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    let chmod = Command::new("chmod").arg("755").arg(path).status().unwrap();
    assert!(chmod.success());
}

/// A be program in `/tmp/.../bin`, outside the description's directory `/tmp/.../desc`,
/// runs by relative and by absolute path; it sees its own file read-only.
#[test]
#[ignore = "needs root: partitions get their own uid and mounts"]
fn a_be_program_under_tmp_runs_by_relative_and_absolute_path() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("tmp-program");
    let prog = scratch.file("bin/prog");
    script(
        &prog,
        "#!/bin/sh\necho ran > \"ran-$1\"\nif echo x >> \"$0\" 2>/dev/null; then echo yes; else echo no; fi > \"wrote-$1\"\n",
    );
    let desc = scratch.file("desc");
    std::fs::create_dir(&desc).unwrap();
    let chmod = Command::new("chmod")
        .arg("1777")
        .arg(&desc)
        .status()
        .unwrap();
    assert!(chmod.success());
    let file = desc.join("system.yaml");
    let yaml = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: ivi\n    kind: be\n    cpus: 1\n    processes:\n      - ../bin/prog rel\n      - {} abs\n",
        prog.display()
    );
    std::fs::write(&file, yaml).unwrap();
    let out = run(&file, "1s", &[]);
    let stderr = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for how in ["rel", "abs"] {
        let ran = std::fs::read_to_string(desc.join(format!("ran-{how}"))).unwrap_or_default();
        assert_eq!(ran, "ran\n", "{how}: {stderr}");
        let wrote = std::fs::read_to_string(desc.join(format!("wrote-{how}"))).unwrap_or_default();
        assert_eq!(
            wrote, "no\n",
            "{how}: the program could write its own file; {stderr}"
        );
    }
    let after = std::fs::read_to_string(&prog).unwrap();
    assert!(!after.ends_with("x\n"), "the program was changed: {after}");
}

/// `check` reports a program it cannot find with the position of its `cmd` and what it
/// searched; bulkhead's own programs it finds in `bulkhead`'s directory.
#[test]
fn check_names_a_missing_program_with_its_position() {
    let scratch = Scratch::new("check-program");
    let file = scratch.file("system.yaml");
    std::fs::write(&file, MISSING_PROGRAM).unwrap();
    let out = common::bulkhead().arg("check").arg(&file).output().unwrap();
    let stderr = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let want = missing_program_message();
    assert!(stderr.contains(&want), "{stderr}");
    // Without the missing one, `bulkhead-app` is found next to `bulkhead`.
    std::fs::write(
        &file,
        MISSING_PROGRAM.replace("      - no-such-program-bulkhead --x\n", ""),
    )
    .unwrap();
    let out = common::bulkhead().arg("check").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::text(&out.stderr));
}

/// `run` refuses a missing program as `check` does, before starting anything.
#[test]
#[ignore = "needs root: cgroups"]
fn run_names_a_missing_program_with_its_position() {
    let scratch = Scratch::new("run-program");
    let file = scratch.file("system.yaml");
    std::fs::write(&file, MISSING_PROGRAM).unwrap();
    let out = run(&file, "1s", &[]);
    let stderr = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&missing_program_message()), "{stderr}");
}

/// A be partition whose second process names a program that does not exist.
const MISSING_PROGRAM: &str = "system: {cpus: 0-1}\npartitions:\n  - name: ivi\n    kind: be\n    cpus: 1\n    processes:\n      - bulkhead-app ivi-mapper\n      - no-such-program-bulkhead --x\n";

/// What `check` and `run` say of [`MISSING_PROGRAM`].
fn missing_program_message() -> String {
    let own = common::bin("bulkhead");
    format!(
        "system.yaml:8:9: partitions[0].processes[1].cmd: program `no-such-program-bulkhead` not found (searched: {}, ",
        own.parent().unwrap().display()
    )
}

/// A DEmOS configuration whose process calls `demos-signal-completion` inside a shell
/// command finds it on the partition's PATH and completes its windows: each completion
/// holds the loop until the next window, so it writes about one line per window (a
/// missing program, exit 127, lets it spin and write thousands), and past each one.
#[test]
#[ignore = "needs root: window partitions on cgroups"]
fn demos_signal_completion_is_found_inside_a_shell_command() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("demos-completion");
    let file = scratch.file("demos.yaml");
    let yaml = "windows:\n  - length: 50\n    sc_partition:\n      - cmd: \"while true; do demos-signal-completion; echo done >> ticks; done\"\n        budget: 20\n";
    std::fs::write(&file, yaml).unwrap();
    let out = run(&file, "600ms", &[]);
    let stderr = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let ticks = std::fs::read_to_string(scratch.file("ticks")).unwrap_or_default();
    let completions = ticks.lines().count();
    // 12 windows of 50 ms in 600 ms: one completion each (wide margins).
    assert!(
        (3..=20).contains(&completions),
        "{completions} completions; {stderr}"
    );
}

/// `bulkhead can map` named by a bare word in a description runs from bulkhead's
/// directory (not from a copy on the system's PATH) and sends its frame to the bus.
#[test]
#[ignore = "needs root: rt gateway tasks"]
fn bulkhead_can_map_is_found_by_name_from_a_description() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("can-map-name");
    let bus = format!("mapname{}", std::process::id());
    let mut server = common::Running(Some(
        common::bulkhead()
            .args(["can", "bus", &bus])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    ));
    std::thread::sleep(Duration::from_millis(300));
    let dump = Command::new(common::bin("bulkhead"))
        .args([
            "can",
            "dump",
            "--bus",
            &bus,
            "--count",
            "1",
            "--timeout",
            "5s",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let file = scratch.file("system.yaml");
    let yaml = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - {{name: gw, kind: rt, cpus: 0, scheduler: edf, tasks: []}}\n  - name: cluster\n    kind: be\n    cpus: 1\n    processes:\n      - bulkhead can map --bus {bus} --send 2E4#0102 --count 1 --timeout 2s\nbuses:\n  - {{name: {bus}, gateway: gw, period: 2ms, reader_budget: 250us, writer_budget: 100us, clients: [{{partition: cluster, allow: [0x2E4]}}]}}\n"
    );
    std::fs::write(&file, yaml).unwrap();
    let out = run(&file, "2s", &[]);
    let stderr = common::text(&out.stderr);
    let dumped = dump.wait_with_output().unwrap();
    drop(
        server
            .0
            .take()
            .map(|mut c| c.kill().and_then(|()| c.wait())),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let frames = common::text(&dumped.stdout);
    let sent = frames.lines().any(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        words.get(1) == Some(&"2E4") && words.ends_with(&["01", "02"])
    });
    assert!(sent, "frames: {frames:?}; {stderr}");
}
