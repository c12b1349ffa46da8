//! `bulkhead check` observed from outside: exit codes, messages, canonical output.

mod common;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bulkhead(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(args)
        .output()
        .expect("bulkhead runs")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every file of the corpus ends with `# expect: LINE:COL: FRAGMENT` or `# expect: FRAGMENT`.
#[test]
fn every_invalid_file_is_rejected_with_file_position_and_key_path() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/invalid");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 40,
        "the corpus must hold at least 40 files, has {}",
        files.len()
    );
    for file in files {
        let src = std::fs::read_to_string(&file).unwrap();
        let expect = src
            .lines()
            .last()
            .and_then(|l| l.strip_prefix("# expect: "))
            .expect("expect line");
        let out = bulkhead(&["check", file.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: exit code, stderr: {stderr}",
            file.display()
        );
        assert!(
            !stderr.contains("panicked"),
            "{}: panicked: {stderr}",
            file.display()
        );
        let located = format!("{}:", file.display());
        assert!(
            stderr.starts_with(&format!("error: {located}")),
            "{}: names the file: {stderr}",
            file.display()
        );
        let after_file = &stderr[format!("error: {located}").len()..];
        assert!(
            after_file
                .split(':')
                .take(2)
                .all(|n| n.trim().parse::<usize>().is_ok_and(|n| n > 0)),
            "{}: names line:column: {stderr}",
            file.display()
        );
        assert!(
            after_file.contains(expect),
            "{}: expected `{expect}` in: {stderr}",
            file.display()
        );
    }
}

#[test]
fn examples_are_valid_and_their_canonical_form_reloads_identically() {
    let examples = repo().join("examples");
    let scratch = common::Scratch::new("canonical");
    let tmp = &scratch.0;
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue; // examples/c holds the C programs
        }
        let out = bulkhead(&["check", path.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            path.display(),
            text(&out.stderr)
        );
        assert!(text(&out.stdout).contains(": ok"), "{}", text(&out.stdout));
        let canonical = bulkhead(&["check", "--canonical", path.to_str().unwrap()]);
        let again = tmp.join(path.file_name().unwrap());
        std::fs::write(&again, &canonical.stdout).unwrap();
        let original = bulkhead_model::load_file(&path).unwrap().system;
        let reloaded = bulkhead_model::load_file(&again)
            .unwrap_or_else(|e| panic!("canonical form of {}: {e}", path.display()))
            .system;
        assert_eq!(original, reloaded, "{}", path.display());
        let twice = bulkhead(&["check", "--canonical", again.to_str().unwrap()]);
        assert_eq!(
            text(&canonical.stdout),
            text(&twice.stdout),
            "canonical form is a fixed point"
        );
    }
}

#[test]
fn warnings_go_to_stderr_and_do_not_fail() {
    let scratch = common::Scratch::new("warn");
    let tmp = scratch.file("warn.yaml");
    std::fs::write(
        &tmp,
        "windows: [{length: 10, sc_processes: [{cmd: true a, budget: 8}, {cmd: true b, budget: 8}]}]\n",
    )
    .unwrap();
    let out = bulkhead(&["check", tmp.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("warning:") && text(&out.stderr).contains("cannot all complete")
    );
    assert!(!text(&out.stdout).contains("warning"));
}

/// A fifo from an rt task to a best-effort partition that makes its writer wait when
/// full lets the best-effort side stall the rt one: `check` warns at the channel's line,
/// and says nothing once the fifo drops (and counts) instead.
#[test]
fn an_rt_writer_waiting_on_a_best_effort_reader_is_warned_about() {
    let desc = "system: {cpus: 0-1}\npartitions:\n  - {name: ctl, kind: rt, cpus: 0, tasks: [{name: t, cmd: \"true\", budget: 100us, period: 1ms}]}\n  - {name: ui, kind: be, cpus: 1, processes: [\"true x\"]}\nchannels:\n  - {name: speed, kind: fifo, message_size: 8, depth: 4, writer: ctl/t, readers: [ui]}\n";
    warns_until_fixed(
        "block.yaml",
        desc,
        "block.yaml:6:",
        "channels[0].overflow: channel `speed`: its writer in rt partition `ctl` waits while the fifo is full, that is on best-effort partition `ui`",
        &desc.replace("depth: 4,", "depth: 4, overflow: drop_oldest,"),
    );
}

/// `user: root` in a be partition is root of a user namespace of its own; relaxed, it
/// is the host's root, which `check` warns about with the key's position.
#[test]
fn a_be_partition_running_as_the_hosts_root_is_warned_about() {
    let desc = "system: {}\npartitions:\n  - name: ivi\n    user: root\n    sandbox: {private_users: false}\n    processes: [\"true x\"]\n";
    warns_until_fixed(
        "root.yaml",
        desc,
        "root.yaml:5:",
        "partitions[0].sandbox.private_users: partition `ivi` runs as the host's root",
        &desc.replace("    sandbox: {private_users: false}\n", ""),
    );
}

/// `check` of `desc` (written to `file`) exits 0 and warns `message` at `position`;
/// of `fixed`, it exits 0 and warns of nothing.
fn warns_until_fixed(file: &str, desc: &str, position: &str, message: &str, fixed: &str) {
    let scratch = common::Scratch::new(&format!("warn-{file}"));
    let tmp = scratch.file(file);
    std::fs::write(&tmp, desc).unwrap();
    let out = bulkhead(&["check", tmp.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(position), "{stderr}");
    assert!(stderr.contains(message), "{stderr}");
    std::fs::write(&tmp, fixed).unwrap();
    let out = bulkhead(&["check", tmp.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn missing_file_is_invalid_input() {
    let out = bulkhead(&["check", "/nonexistent/bulkhead.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("/nonexistent/bulkhead.yaml: cannot read"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["check"][..],
        &["check", "--frobnicate", "x.yaml"],
        &["no-such-command"],
        &[],
    ] {
        let out = bulkhead(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

/// The subcommands `bulkhead --help` lists.
fn subcommands() -> Vec<String> {
    let help = text(&bulkhead(&["--help"]).stdout);
    let commands = help.split("Commands:").nth(1).expect("a Commands section");
    let section = commands.split("\n\n").next().unwrap();
    section
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

#[test]
fn version_and_help_on_every_subcommand() {
    let out = bulkhead(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).starts_with("bulkhead "));
    let subs = subcommands();
    assert!(subs.contains(&"check".to_string()), "{subs:?}");
    for sub in subs {
        let out = bulkhead(&[&sub, "--help"]);
        assert_eq!(out.status.code(), Some(0), "{sub} --help");
        assert!(text(&out.stdout).contains("Usage:"), "{sub} --help");
    }
}

/// Runs `bulkhead args` with `input` on standard input; kills it after 20 s (a hang).
fn bulkhead_with_input(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bulkhead runs");
    let mut stdin = child.stdin.take().unwrap();
    // A broken pipe is fine: bulkhead may stop reading at its limit.
    let _ = stdin.write_all(input);
    drop(stdin);
    bulkhead_within(child, args)
}

/// Waits for `child` at most 20 s; a child still running then is killed and the test fails.
fn bulkhead_within(mut child: std::process::Child, args: &[&str]) -> Output {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("bulkhead {args:?} still runs after 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Runs `bulkhead args` with nothing on standard input, within 20 s.
fn bulkhead_bounded(args: &[&str]) -> Output {
    use std::process::Stdio;
    let child = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bulkhead runs");
    bulkhead_within(child, args)
}

#[test]
fn special_files_are_refused_without_reading_them() {
    let cases = [
        ("/dev/zero", "a character device, not a regular file"),
        ("/tmp", "a directory, not a regular file"),
    ];
    for (path, why) in cases {
        for sub in ["check", "analyze", "sim"] {
            let out = bulkhead_bounded(&[sub, path]);
            assert_eq!(out.status.code(), Some(1), "{sub} {path}");
            let stderr = text(&out.stderr);
            assert!(
                stderr.contains(&format!("error: {path}: cannot read: {why}")),
                "{sub} {path}: {stderr}"
            );
        }
    }
}

#[test]
fn a_file_above_the_size_limit_names_the_limit_and_the_flag() {
    let example = repo().join("examples/driveos.yaml");
    let example = example.to_str().unwrap();
    let out = bulkhead_bounded(&["check", "--max-input-size", "100B", example]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "larger than the input size limit of 100 bytes; raise it with --max-input-size"
        ),
        "{stderr}"
    );
    let out = bulkhead_bounded(&["check", example, "--max-input-size", "1MiB"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Standard input is bounded the same way: 100 MB of input stop at the 16 MiB default.
    let out = bulkhead_with_input(&["check", "-"], &vec![b'#'; 100 << 20]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("error: <stdin>: larger than the input size limit of 16777216 bytes"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn check_dash_reads_standard_input() {
    let example = std::fs::read(repo().join("examples/driveos.yaml")).unwrap();
    let out = bulkhead_with_input(&["check", "-"], &example);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("<stdin>: ok"),
        "{}",
        text(&out.stdout)
    );
    let out = bulkhead_with_input(&["check", "-"], b"partitions: 3\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("error: <stdin>:1:13: partitions: "),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_byte_order_mark_is_skipped_and_a_non_utf8_byte_is_located() {
    let mut with_bom = b"\xef\xbb\xbf".to_vec();
    with_bom.extend(std::fs::read(repo().join("examples/driveos.yaml")).unwrap());
    let out = bulkhead_with_input(&["check", "-"], &with_bom);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = bulkhead_with_input(&["check", "-"], b"system:\n  cpus: \"0\xff\"\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("error: <stdin>:2:11: not UTF-8: byte 0xff at byte offset 18"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_alias_bomb_fails_fast_in_little_memory() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/invalid/alias-bomb.yaml");
    let start = std::time::Instant::now();
    let out = bulkhead_bounded(&["check", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    // Wide margin: the unbounded loader took 5 s and 1.9 GB for a smaller bomb.
    assert!(start.elapsed() < std::time::Duration::from_secs(3));
    assert!(text(&out.stderr).contains("aliases expand to more than"));
}

/// Analysis users write task sets without programs: `cmd` is needed by `run` only.
#[test]
fn tasks_without_cmd_are_analysed_and_simulated_but_not_run() {
    let yaml = "system: {cpus: 0}\npartitions:\n  - name: control\n    kind: rt\n    cpus: 0\n    tasks:\n      - {name: brake, budget: 1ms, period: 10ms}\n";
    for sub in ["check", "analyze", "sim"] {
        let out = bulkhead_with_input(&[sub, "-"], yaml.as_bytes());
        assert_eq!(out.status.code(), Some(0), "{sub}: {}", text(&out.stderr));
    }
    let out = bulkhead_with_input(&["check", "--canonical", "-"], yaml.as_bytes());
    assert!(!text(&out.stdout).contains("cmd"), "{}", text(&out.stdout));
    let out = bulkhead_with_input(&["run", "-"], yaml.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("partition `control`, task `brake` has no `cmd`"),
        "{}",
        text(&out.stderr)
    );
}

/// A negative duration is reported against its flag, not as an unknown argument `-5`.
#[test]
fn negative_durations_are_reported_against_their_flag() {
    for args in [
        &["run", "--timeout", "-5ms", "x.yaml"][..],
        &["sim", "--for", "-5ms", "x.yaml"],
        &["ctl", "--timeout", "-1s", "status"],
        &["can", "dump", "b", "--timeout", "-5s"],
    ] {
        let out = bulkhead_bounded(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains("must not be negative"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn help_and_summary_say_what_is_there() {
    let help = text(&bulkhead(&["run", "--help"]).stdout);
    assert!(help.contains("rt partitions"), "{help}");
    let yaml = "system: {cpus: 0-1}\npartitions:\n  - {name: gw, kind: rt, cpus: 0}\n  - {name: app, kind: be}\nbuses:\n  - {name: b, gateway: gw, period: 10ms, reader_budget: 1ms, writer_budget: 1ms, clients: [{partition: app}]}\n";
    let out = bulkhead_with_input(&["check", "-"], yaml.as_bytes());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("buses:      1 (1 client partition)\n"),
        "{}",
        text(&out.stdout)
    );
}

/// An output file that cannot be created is reported against its flag.
#[test]
fn sim_output_errors_name_the_flag() {
    let example = repo().join("examples/demos-simplified.yaml");
    for flag in ["--schedule-log", "--trace", "--stats-json"] {
        let out = bulkhead_bounded(&["sim", example.to_str().unwrap(), flag, "/nonexistent/x"]);
        assert_eq!(out.status.code(), Some(1), "{flag}");
        assert!(
            text(&out.stderr).contains(&format!("error: {flag} /nonexistent/x: ")),
            "{flag}: {}",
            text(&out.stderr)
        );
    }
}
