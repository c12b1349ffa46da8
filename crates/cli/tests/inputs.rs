//! Every input bounded, observed from outside: what `bulkhead` does with a closed
//! standard output, special files, endless inputs and over-long values (docs/security.md,
//! "Bounded input").

mod common;

use common::Scratch;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// Runs `bulkhead args` with `stdin`, within 20 s: a child still running then is killed
/// and the test fails (a FIFO without a writer blocked `report` for ever).
fn bounded(args: &[&str], stdin: Stdio) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bulkhead runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("bulkhead {args:?} still runs after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A scratch directory with a FIFO (`fifo`) and a symbolic link to /dev/zero (`zero`),
/// removed on drop.
struct Specials(Scratch);

impl Specials {
    fn new(tag: &str) -> Specials {
        let dir = Scratch::new(&format!("inputs-{tag}"));
        let fifo = std::ffi::CString::new(dir.file("fifo").to_str().unwrap()).unwrap();
        // SAFETY: `fifo` is a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/dev/zero", dir.file("zero")).unwrap();
        Specials(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.file(name).display().to_string()
    }

    /// The special files and what each is called in the error.
    fn cases(&self) -> [(String, &'static str); 3] {
        [
            (self.path("fifo"), "a FIFO"),
            (self.path("zero"), "a character device"),
            (self.0 .0.display().to_string(), "a directory"),
        ]
    }
}

fn assert_refused(out: &Output, args: &[&str], message: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(
        stderr.contains(message),
        "{args:?}: want {message:?}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
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
    let dir = Scratch::new("inputs-pipe");
    let log = dir.file("schedule.log");
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
}

/// A description in a scratch directory of its own, removed on drop.
struct Description {
    path: String,
    _dir: Scratch,
}

impl Description {
    fn new(tag: &str, yaml: &str) -> Description {
        let dir = Scratch::new(&format!("inputs-{tag}"));
        let path = dir.file(&format!("{tag}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        Description {
            path: path.display().to_string(),
            _dir: dir,
        }
    }

    fn path(&self) -> &str {
        &self.path
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
        (["run", command.path(), "--timeout", "1s"], "not found"),
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

/// `report` of a symbolic link to /dev/zero grew to 24 GB, of a FIFO blocked for ever:
/// special files are refused before they are read, standard input is read up to
/// `--max-input-size`, and so is a log.
#[test]
fn report_refuses_special_files_and_bounds_what_it_reads() {
    let specials = Specials::new("report");
    for (path, what) in specials.cases() {
        let args = ["report", "--format", "json", &path];
        let out = bounded(&args, Stdio::null());
        assert_refused(
            &out,
            &args,
            &format!("{path}: cannot read: {what}, not a regular file"),
        );
    }
    let args = ["report", "--max-input-size", "1MiB", "-"];
    let out = bounded(
        &args,
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
    );
    assert_refused(
        &out,
        &args,
        "<stdin>: larger than the input size limit of 1048576 bytes; raise it with --max-input-size",
    );
    let log = specials.path("schedule.log");
    let sim = Command::new(bin())
        .args([
            "sim",
            &example("demos-simplified.yaml"),
            "--for",
            "1s",
            "--schedule-log",
            &log,
        ])
        .output()
        .unwrap();
    assert!(sim.status.success(), "{}", text(&sim.stderr));
    let args = [
        "report",
        "--format",
        "json",
        "--max-input-size",
        "1KiB",
        &log,
    ];
    let out = bounded(&args, Stdio::null());
    assert_refused(
        &out,
        &args,
        "larger than the input size limit of 1024 bytes",
    );
    let args = ["report", "--format", "json", &log];
    assert!(bounded(&args, Stdio::null()).status.success());
}

/// The other inputs read whole or streamed get the same file-type check: the DBC and the
/// log of `can decode`, the log of `can replay`, and a description refuses devices and
/// directories (its FIFOs are read: see the next test).
#[test]
fn every_file_input_refuses_devices_directories_and_where_it_must_fifos() {
    let specials = Specials::new("types");
    let dbc = repo().join("crates/can/tests/data/toyota_new_mc_pt_generated.dbc");
    let dbc = dbc.display().to_string();
    let log = repo().join("crates/can/tests/data/comma2k19_rav4_seg40_excerpt.log.gz");
    let log = log.display().to_string();
    for (path, what) in specials.cases() {
        let refused = format!("{path}: cannot read: {what}, not a regular file");
        let mut commands: Vec<Vec<&str>> = vec![
            vec!["can", "decode", "--dbc", &path, &log],
            vec!["can", "decode", "--dbc", &dbc, &path],
            vec!["can", "replay", &path, "--bus", "bulkhead-inputs-none"],
        ];
        if what != "a FIFO" {
            for sub in ["check", "analyze", "sim", "solve", "run"] {
                commands.push(vec![sub, &path]);
            }
        }
        for args in &commands {
            assert_refused(&bounded(args, Stdio::null()), args, &refused);
        }
    }
}

/// Writes `bytes` (`None`: endlessly, until the reader goes) into the FIFO at `path`
/// from a thread; [`Feeder::finish`] joins it, first opening and closing the FIFO for
/// reading so that a writer still waiting for a reader (bulkhead refused the FIFO) ends.
struct Feeder(String, std::thread::JoinHandle<()>);

impl Feeder {
    fn start(path: &str, bytes: Option<Vec<u8>>) -> Feeder {
        let fifo = path.to_string();
        let thread = std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            match bytes {
                Some(bytes) => drop(std::io::Write::write_all(&mut w, &bytes)),
                // Ends with EPIPE once bulkhead has stopped reading.
                None => while std::io::Write::write_all(&mut w, &[b'#'; 65536]).is_ok() {},
            }
        });
        Feeder(path.to_string(), thread)
    }

    fn finish(self) {
        use std::os::unix::fs::OpenOptionsExt;
        // A waiting writer's open returns once a reader has come, even one gone again;
        // its writes then fail with EPIPE.
        drop(
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.0),
        );
        self.1.join().unwrap();
    }
}

/// A description may be a FIFO (DEmOS reads its configuration from one; `<(generate)`
/// passes one): it is read up to `--max-input-size` like standard input (it was refused).
#[test]
fn a_description_is_read_from_a_fifo_up_to_the_limit() {
    let specials = Specials::new("fifo-description");
    let fifo = specials.path("fifo");
    let yaml = std::fs::read(example("demos-simplified.yaml")).unwrap();
    for sub in ["check", "analyze", "sim"] {
        let feeder = Feeder::start(&fifo, Some(yaml.clone()));
        let out = bounded(&[sub, &fifo], Stdio::null());
        feeder.finish();
        assert!(out.status.success(), "{sub}: {}", text(&out.stderr));
    }
    let feeder = Feeder::start(&fifo, None);
    let args = ["check", "--max-input-size", "1MiB", &fifo];
    let out = bounded(&args, Stdio::null());
    feeder.finish();
    assert_refused(
        &out,
        &args,
        "larger than the input size limit of 1048576 bytes",
    );
}

/// `ctl --control` at something that is not a socket said "left over from one that
/// stopped"; now it says what it is. `--system` names a socket in /run/bulkhead only.
#[test]
fn ctl_names_what_is_not_a_control_socket() {
    let specials = Specials::new("ctl");
    for (path, _) in specials.cases() {
        let args = ["ctl", "--control", &path, "status"];
        let out = bounded(&args, Stdio::null());
        assert_refused(&out, &args, &format!("{path} is not a socket"));
    }
    for name in ["../../tmp/x", "a/b", "..", ""] {
        let out = bounded(&["ctl", "--system", name, "status"], Stdio::null());
        assert_eq!(
            out.status.code(),
            Some(2),
            "--system {name:?}: {}",
            text(&out.stderr)
        );
    }
}

/// The kernel's longest SCHED_DEADLINE period here, in microseconds.
fn deadline_period_max_us() -> u64 {
    std::fs::read_to_string("/proc/sys/kernel/sched_deadline_period_max_us")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(4_194_304)
}

/// A CPU the machine lacks, a SCHED_DEADLINE period above the kernel's maximum and a
/// `pids` limit too small to start a process passed `check` and failed in `run` with a
/// bare errno (or, for `pids: 1`, a run that exited 0 while its process exited 127).
/// Now `check` and `run` refuse them at their position before anything starts;
/// `check --any-machine` leaves out what depends on this machine.
#[test]
fn check_and_run_refuse_what_this_machine_cannot_run_at_its_position() {
    let period = format!("{}us", deadline_period_max_us() + 1_000_000);
    let rt = |cpus: &str, scheduler: &str| {
        format!(
            "partitions:\n  - name: inputs_rt\n    kind: rt\n    cpus: {cpus}\n    scheduler: {scheduler}\n    \
             tasks: [{{name: t, cmd: sleep 1, budget: 1ms, period: {period}}}]\n"
        )
    };
    let no_cpu = Description::new("no-cpu", &rt("4095", "fixed-priority"));
    let long_period = Description::new("long-period", &rt("1", "edf"));
    let pids = Description::new(
        "pids-one",
        "partitions:\n  - name: inputs_pids\n    pids: 1\n    processes: [{cmd: sleep 0.2, budget: 20}]\n\
         windows:\n  - {length: 100, be_partition: inputs_pids}\n",
    );
    let column = rt("1", "edf")
        .lines()
        .nth(5)
        .unwrap()
        .find(&period)
        .unwrap()
        + 1;
    let at_period = format!("6:{column}: partitions[0].tasks[0].period: {period} is outside");
    let cases = [
        (
            &no_cpu,
            "4:11: partitions[0].cpus: this machine has no CPU 4095",
            true,
        ),
        (&long_period, at_period.as_str(), true),
        (
            &pids,
            "3:11: partitions[0].pids: 1 pids cannot start",
            false,
        ),
    ];
    for (description, error, machine) in cases {
        for args in [
            vec!["check", description.path()],
            vec!["run", description.path(), "--timeout", "1s"],
        ] {
            let out = bounded(&args, Stdio::null());
            let want = format!("error: {}:{error}", description.path());
            assert_refused(&out, &args, &want);
        }
        let out = bounded(
            &["check", "--any-machine", description.path()],
            Stdio::null(),
        );
        assert_eq!(out.status.success(), machine, "{}", text(&out.stderr));
    }
    let fixed = Description::new("long-period-fifo", &rt("1", "fixed-priority"));
    let out = bounded(&["check", fixed.path()], Stdio::null());
    assert!(
        out.status.success(),
        "SCHED_FIFO takes any period: {}",
        text(&out.stderr)
    );
}
