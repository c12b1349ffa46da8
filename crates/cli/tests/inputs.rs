//! Every input bounded, observed from outside: what `bulkhead` does with a closed
//! standard output, special files, endless inputs and over-long values (docs/security.md,
//! "Bounded input").

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_bulkhead")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example(name: &str) -> String {
    repo().join("examples").join(name).display().to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A pipe whose reading end is closed: every write to the other end fails with EPIPE.
fn closed_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array for pipe2 to fill.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 succeeded; both descriptors are new and owned here.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    write
}

/// Runs `bulkhead args` with its standard output on a pipe nobody reads.
fn into_closed_pipe(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .expect("bulkhead runs")
}

/// `bulkhead ... | head -1`: a reader that has gone ends the program as SIGPIPE ends
/// `cat`, with nothing on stderr (it panicked with "failed printing to stdout").
#[test]
fn a_closed_standard_output_ends_every_subcommand_quietly() {
    let dir = std::env::temp_dir().join(format!("bulkhead-inputs-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("schedule.log");
    let sim = Command::new(bin())
        .args(["sim", &example("demos-simplified.yaml"), "--for", "1s"])
        .arg("--schedule-log")
        .arg(&log)
        .output()
        .unwrap();
    assert!(sim.status.success(), "{}", text(&sim.stderr));
    let log = log.display().to_string();
    let can = repo().join("crates/can/tests/data");
    let dbc = can
        .join("toyota_new_mc_pt_generated.dbc")
        .display()
        .to_string();
    let candump = can.join("comma2k19_rav4_seg40_excerpt.log.gz");
    let candump = candump.display().to_string();
    let driveos = example("driveos.yaml");
    let boomerang = example("boomerang.yaml");
    let commands: [&[&str]; 9] = [
        &["check", &driveos],
        &["check", "--canonical", &driveos],
        &["analyze", &driveos],
        &["analyze", "--json", &driveos],
        &["sim", &driveos, "--for", "1s"],
        &["solve", &boomerang],
        &["solve", "--json", &boomerang],
        &["report", "--format", "json", &log],
        &["can", "decode", "--dbc", &dbc, &candump],
    ];
    for args in commands {
        let out = into_closed_pipe(args);
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("error:"), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A description in a fresh directory, removed on drop.
struct Description(PathBuf);

impl Description {
    fn new(tag: &str, yaml: &str) -> Description {
        let dir =
            std::env::temp_dir().join(format!("bulkhead-inputs-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{tag}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        Description(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Description {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

/// A 4 MB command (or partition name) was echoed whole, twice, in the error: a value
/// is now shown by its first 200 bytes and its length.
#[test]
fn a_long_value_is_shown_by_its_first_bytes_and_its_length() {
    let long = "x".repeat(4_000_000);
    let command = Description::new(
        "long-cmd",
        &format!(
            "partitions:\n  - {{name: p, processes: [{{cmd: {long}, budget: 20}}]}}\n\
             windows:\n  - {{length: 100, be_partition: p}}\n"
        ),
    );
    let reference = Description::new(
        "long-ref",
        &format!(
            "partitions:\n  - {{name: p, processes: [{{cmd: true, budget: 20}}]}}\n\
             windows:\n  - {{length: 100, be_partition: {long}}}\n"
        ),
    );
    let cases = [
        (
            ["run", command.path(), "--timeout", "1s"],
            "command not found",
        ),
        (["check", reference.path(), "", ""], "unknown partition"),
    ];
    for (args, what) in cases {
        let args: Vec<&str> = args.into_iter().filter(|a| !a.is_empty()).collect();
        let out = Command::new(bin()).args(&args).output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            stderr.len() < 2000,
            "{args:?}: {} bytes of stderr",
            stderr.len()
        );
        assert!(
            stderr.contains(what)
                && stderr.contains(&format!("{}...` (4000000 bytes)", &long[..197])),
            "{args:?}: {stderr}"
        );
    }
}
