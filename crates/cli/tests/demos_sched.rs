//! `demos-sched`, DEmOS's command line over bulkhead (docs/demos.md), observed from
//! outside as DEmOS's own test suite observes DEmOS (its test/*.bats, which
//! scripts/demos-tests.sh runs): exit codes, stdout, DEmOS's log lines, the normalized
//! configuration `-d` prints, and the schedule log `DEMOS_SCHEDULE_LOG` names. The runs
//! need root and cgroups (skipped otherwise); they use the stand-ins for DEmOS's test
//! programs (crates/client/tests/demos), built against DEmOS's header.

mod common;

#[path = "../../client/tests/demos/compile.rs"]
mod compile;

use common::{exclusive_cpus_lock, Scratch};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn demos_sched() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_demos-sched"));
    // The fixed level and plain lines DEmOS's configuration tests set.
    cmd.env("SPDLOG_LEVEL", "warning")
        .env("DEMOS_PLAIN_LOG", "1")
        .env_remove("DEMOS_SCHEDULE_LOG")
        .env_remove("DEMOS_RAND_SEED");
    cmd
}

fn output(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `demos-sched -d -C CONFIG`: its exit code, stdout and stderr.
fn dump(config: &str) -> (Option<i32>, String, String) {
    let out = output(demos_sched().args(["-d", "-C", config]));
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn help_and_version_exit_0_and_a_usage_error_exits_1() {
    let help = output(demos_sched().arg("-h"));
    assert_eq!(help.status.code(), Some(0));
    assert!(text(&help.stdout).starts_with("Usage: demos-sched"));
    let version = output(demos_sched().arg("-V"));
    assert_eq!(version.status.code(), Some(0));
    // DEmOS's tests of DEMOS_SCHEDULE_LOG run only where -V says `debug`.
    assert!(text(&version.stdout).contains("debug"));
    let bad = output(demos_sched().arg("-x"));
    assert_eq!(bad.status.code(), Some(1));
    assert!(text(&bad.stderr).contains("'-x'"), "{}", text(&bad.stderr));
    let nothing = output(&mut demos_sched());
    assert_eq!(nothing.status.code(), Some(1));
    assert!(text(&nothing.stdout).starts_with("Usage: demos-sched"));
}

#[test]
fn d_prints_the_configuration_as_demos_normalizes_it() {
    let (code, stdout, stderr) = dump(
        "{windows: [ {length: 500, sc_partition: SC} ],\n partitions: [ {name: SC, processes: [{cmd: echo, budget: 100, jitter: 50}] }]}",
    );
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    assert_eq!(
        stdout,
        "set_cwd: false\ndemos_cpu: all\npartitions:\n  - name: SC\n    processes:\n      - cmd: echo\n        budget: 100\n        jitter: 50\n        init: false\nwindows:\n  - length: 500\n    slices:\n      - cpu: all\n        sc_partition: SC\n"
    );
    // DEmOS's default budget: 0.6 of the window in an SC slot, shared.
    let (_, stdout, _) = dump("{windows: [ {length: 500, sc_processes: [proc1, proc2]} ]}");
    assert_eq!(stdout.matches("budget: 150\n").count(), 2, "{stdout}");
    let (_, stdout, _) = dump("{windows: [{length: 1000}]}");
    assert_eq!(
        stdout,
        "set_cwd: false\ndemos_cpu: all\npartitions: ~\nwindows:\n  - length: 1000\n"
    );
}

#[test]
fn set_cwd_is_true_for_a_file_and_a_fifo_must_say_false() {
    let scratch = Scratch::new("demos-set-cwd");
    let file = scratch.file("c.yaml");
    std::fs::write(&file, "{}").unwrap();
    let out = output(demos_sched().arg("-d").arg("-c").arg(&file));
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).starts_with("set_cwd: true\n"));
    let fifo = scratch.file("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (config, code) in [("set_cwd: false", Some(0)), ("{}", Some(1))] {
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, config).unwrap())
        };
        let out = output(demos_sched().arg("-d").arg("-c").arg(&fifo));
        writer.join().unwrap();
        assert_eq!(out.status.code(), code, "{config}: {}", text(&out.stderr));
    }
}

#[test]
fn configuration_errors_are_demos_lines_with_bulkheads_position_beside() {
    for (config, message) in [
        (
            "{partitions: [ name: p1, processes: [ cmd: proc1 ] ], windows: [{length: 100, sc_partition: p1}]}",
            "Missing budget in process definition",
        ),
        (
            "windows: [{length: 100, slices: [{}]}]",
            "Missing cpu set in slice definition (`cpu` property)",
        ),
        ("set_cwd: yes", "'set_cwd' cannot be used in inline config string"),
        ("-d", "Config must be YAML mapping node"),
    ] {
        let (code, stdout, stderr) = dump(config);
        assert_eq!(code, Some(1), "{config}");
        assert_eq!(stdout, "", "{config}");
        assert_eq!(stderr, format!(">>> [error] Exception: {message}\n"), "{config}");
    }
    // At the default level bulkhead's positioned message follows DEmOS's.
    let out = output(demos_sched().env_remove("SPDLOG_LEVEL").args([
        "-C",
        "{windows: [{length: 1, cpu: 0, sc_partition: NONE}], partitions: []}",
    ]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        ">>> [error] Exception: Reference to unknown partition 'NONE' in window #0, slice #0\n>>> [info] <inline config>:1:46: windows[0].sc_partition: unknown partition `NONE`\n"
    );
}

#[test]
fn what_demos_cannot_say_is_not_dumped_and_what_cannot_run_is_refused_before_it_starts() {
    let (code, stdout, stderr) = dump(
        "partitions: [{name: P, processes: [{cmd: a, budget: 1}], sandbox: {clean_env: false}}]\nwindows: [{length: 5, sc_partition: P}]",
    );
    assert_eq!((code, stdout.as_str()), (Some(1), ""));
    assert!(stderr.contains("bulkhead check --canonical"), "{stderr}");
    let out = output(demos_sched().args([
        "-C",
        "windows: [{length: 5, cpu: 0, sc_processes: [no-such-program-here]}]",
    ]));
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(">>> [error] Exception: <inline config>:")
            && stderr.contains(
                ": partitions[0].processes[0].cmd: program `no-such-program-here` not found"
            ),
        "{stderr}"
    );
    let empty = output(demos_sched().args(["-C", "{}"]));
    assert_eq!(
        text(&empty.stderr),
        ">>> [error] Exception: Need at least one partition in one window\n"
    );
}

/// The stand-ins for DEmOS's test programs, built into a scratch directory.
fn programs(name: &str) -> compile::ProgramDir {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let client = manifest.join("../client");
    let lib = Path::new(env!("CARGO_BIN_EXE_bulkhead")).with_file_name("libbulkhead_client.a");
    assert!(lib.exists(), "{} not built", lib.display());
    let dir = compile::ProgramDir::new(name);
    compile::build_all(
        &client.join("tests/demos"),
        &client.join("include"),
        &lib,
        &dir.0,
    )
    .unwrap();
    dir
}

/// What a run needs besides root: the lock of the suites that take CPUs, and the test
/// programs.
fn root_setup(name: &str) -> (std::fs::File, compile::ProgramDir) {
    (exclusive_cpus_lock(), programs(name))
}

/// A run of `demos-sched ARGS` with the test programs in `dir` first on its `PATH`, in
/// its own instance (`-g`); afterwards its control socket must be gone.
fn run_demos(dir: &Path, name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let instance = format!("demos-test-{name}-{}", std::process::id());
    let out = output(
        demos_sched()
            .current_dir(dir)
            .env("PATH", path)
            .envs(env.iter().copied())
            .args(["-g", &instance])
            .args(args),
    );
    let socket = Path::new("/run/bulkhead").join(format!("{instance}.sock"));
    assert!(!socket.exists(), "the run left its control socket");
    out
}

#[test]
#[ignore = "needs root: cgroups"]
fn a_run_prints_frame_and_window_messages_between_its_programs_lines() {
    let (_lock, dir) = root_setup("messages");
    let config = "windows:\n  - {length: 60, slices: [{cpu: 0, sc_partition: SC1}]}\n  - {length: 10, slices: [{cpu: 0, sc_partition: SC1}]}\n  - {length: 10, slices: [{cpu: 0, sc_partition: SC1}]}\npartitions:\n  - {name: SC1, processes: [{budget: 1000, cmd: api-test 1 2 3}]}\n";
    let out = run_demos(
        &dir.0,
        "messages",
        &["-m", "<W>", "-M", "<MF>", "-C", config],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "<MF>\n<W>\n1\n<W>\n2\n<W>\n3\n<MF>\n<W>\n"
    );
}

#[test]
#[ignore = "needs root: cgroups"]
fn init_processes_initialize_together_before_the_first_window() {
    let (_lock, dir) = root_setup("init");
    let config = "windows: [{length: 50, slices: [{cpu: 0, sc_partition: SC1}, {cpu: 1, sc_partition: SC2}]}]\npartitions:\n  - {name: SC1, processes: [{cmd: api-init-test, budget: 50, init: yes}]}\n  - {name: SC2, processes: [{cmd: api-init-test, budget: 50, init: yes}]}\n";
    let out = run_demos(&dir.0, "init", &["-m", "<W>", "-C", config], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "init start\ninit start\ninit done\ninit done\n<W>\n"
    );
    // demos-signal-completion, found in bulkhead's directory from a shell command.
    let config = "windows: [{length: 100, slices: [{cpu: 0, sc_processes: {init: yes, cmd: \"echo init && demos-signal-completion && echo done\"}}]}]";
    let out = run_demos(&dir.0, "signal", &["-m", "<W>", "-C", config], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "init\n<W>\ndone\n");
    // Processes that exit during their initialization end the run.
    let config = "windows: [{length: 1, slices: [{cpu: 0, sc_partition: SC1}]}]\npartitions:\n  - {name: SC1, processes: [{cmd: exit, budget: 100, init: yes}, {cmd: exit, budget: 100}]}\n";
    let out = run_demos(&dir.0, "exit", &["-t", "3000", "-C", config], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
#[ignore = "needs root: cgroups"]
fn demos_schedule_log_has_demos_lines_and_demos_rand_seed_demos_budgets() {
    let (_lock, dir) = root_setup("schedule");
    let log = dir.0.join("demos-schedule.log");
    let env = [
        ("DEMOS_SCHEDULE_LOG", log.to_str().unwrap()),
        ("DEMOS_RAND_SEED", "2"),
    ];
    let config = "partitions: [{name: BE, processes: [{cmd: dummy BE, budget: 9}]}]\nwindows:\n  - {length: 2, cpu: 0, be_partition: BE}\n  - {length: 3, cpu: 0, be_partition: BE}\n";
    let out = run_demos(&dir.0, "carry", &["-t", "10", "-C", config], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "     0: cpus=0 cmd='dummy BE' budget=9\n     2: cpus=0 cmd='dummy BE' budget=7\n     5: cpus=0 cmd='dummy BE' budget=4\n     7: cpus=0 cmd='dummy BE' budget=2\n    10: cpus=0 cmd='dummy BE' budget=9\n"
    );
    // DEmOS's draws for seed 2: empty budgets at 2 and 4 ms are skipped.
    let config =
        "windows: [{length: 2, cpu: 0, sc_processes: [{cmd: dummy, budget: 1, jitter: 2}]}]";
    let out = run_demos(&dir.0, "jitter", &["-t", "10", "-C", config], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "     0: cpus=0 cmd='dummy' budget=1\n     6: cpus=0 cmd='dummy' budget=2\n     8: cpus=0 cmd='dummy' budget=1\n    10: cpus=0 cmd='dummy' budget=2\n"
    );
    // -t 0 stops at once: nothing is granted.
    let out = run_demos(&dir.0, "zero", &["-t", "0", "-C", config], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "");
}
