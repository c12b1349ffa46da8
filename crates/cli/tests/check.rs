//! `bulkhead check` observed from outside: exit codes, messages, canonical output.

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
    let tmp = std::env::temp_dir().join(format!("bulkhead-canonical-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
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
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn warnings_go_to_stderr_and_do_not_fail() {
    let tmp = std::env::temp_dir().join(format!("bulkhead-warn-{}.yaml", std::process::id()));
    std::fs::write(
        &tmp,
        "windows: [{length: 10, sc_processes: [{cmd: a, budget: 8}, {cmd: b, budget: 8}]}]\n",
    )
    .unwrap();
    let out = bulkhead(&["check", tmp.to_str().unwrap()]);
    std::fs::remove_file(&tmp).unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("warning:") && text(&out.stderr).contains("cannot all complete")
    );
    assert!(!text(&out.stdout).contains("warning"));
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
