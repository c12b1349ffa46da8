//! `bulkhead-app`'s command line as a user meets it: help, and bad flags or programs
//! refused with a message naming them and exit status 2 (a program that fails: 1).

use std::process::{Command, Output};

fn app(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkhead-app"))
        .args(args)
        .env_remove("BULKHEAD_LISTEN")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_lists_the_programs_and_each_programs_flags() {
    let out = app(&["--help"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for program in ["usb-bh", "mhydra-tx", "aml-read", "plant", "send-frame"] {
        assert!(stdout.contains(program), "{program} missing: {stdout}");
    }
    let out = app(&["plant", "--help"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("--speed-hz <HZ>"), "{stdout}");
    assert!(stdout.contains("[default: 72]"), "{stdout}");
}

#[test]
fn no_program_shows_the_help_and_fails() {
    let out = app(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("Usage: bulkhead-app <PROGRAM>"));
}

#[test]
fn a_bad_flag_or_program_is_named_with_exit_status_2() {
    for (args, named) in [
        (
            &["plant", "--speed", "500"][..],
            "unexpected argument '--speed'",
        ),
        (
            &["plant", "--v0", "fast"],
            "invalid value 'fast' for '--v0 <KMH>'",
        ),
        (&["aml-read", "--lead"], "'--lead <KMH@S,...>'"),
        (&["mhydra-tx", "--from=c=0x9ZZ"], "'--from <CHANNEL=IDS>'"),
        (
            &["long-controller", "--bus", "car"],
            "unexpected argument '--bus'",
        ),
        (&["send-frame", "343#00"], "--to <CHANNEL>"),
        (
            &["no-such-program"],
            "unrecognized subcommand 'no-such-program'",
        ),
    ] {
        let out = app(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_program_that_fails_says_which_with_exit_status_1() {
    let out = app(&["send-frame", "--to", "bulkhead_app_cli_test", "343#00"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("bulkhead-app send-frame: error: channel bulkhead_app_cli_test"),
        "{stderr}"
    );
}
