//! `bulkhead janitor --watch PID` (hidden): what a supervisor killed by SIGKILL leaves
//! behind is removed when it dies, not only at the next `bulkhead run`.
//!
//! `bulkhead run` starts it first ([`Janitor::start`]), as its child in a session of its
//! own (so that a signal to the run's process group or session does not reach it), with
//! a pipe as its standard input whose writing end only the supervisor holds. It waits
//! on a pidfd for the supervisor to end. A supervisor that ends normally has first
//! written one byte to the pipe ([`Janitor`]'s drop, after the run's own teardown): the
//! janitor then exits doing nothing. Without that byte the supervisor died (SIGKILL, a
//! crash), and the janitor makes the clean-up a run makes at its start
//! ([`bulkhead_runtime::clean_leftovers`]): cgroups with any process still in them,
//! named channels, shields, interfaces, workqueue masks and CPUFreq settings of
//! supervisors that no longer run, each named on the run's standard error. If the
//! janitor is killed too, the next start cleans up.

use bulkhead_runtime::Hierarchy;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitCode, Stdio};

#[derive(clap::Args)]
pub struct Args {
    /// The supervisor to wait for: the janitor's parent
    #[arg(long, value_name = "PID")]
    watch: u32,
}

/// The byte a supervisor that ends normally writes to its janitor.
const ENDED_NORMALLY: u8 = b'.';

pub fn run(args: Args) -> ExitCode {
    // The pidfd is opened before the parent is checked: once the check passes, the
    // process waited for is the supervisor, not a later process given its pid.
    let supervisor = bulkhead_os::proc::Process::open(args.watch);
    if std::os::unix::process::parent_id() == args.watch {
        let waited = supervisor.and_then(|p| p.map_or(Ok(()), |p| p.wait_exit()));
        if let Err(e) = waited {
            eprintln!(
                "bulkhead janitor: waiting for supervisor {}: {e}",
                args.watch
            );
            return ExitCode::from(1);
        }
    }
    // The supervisor has ended, so the pipe holds its byte or nothing: no wait. Not a
    // blocking read either: a child the supervisor was starting when it died (between
    // clone and exec) may still hold a copy of the pipe's writing end.
    // SAFETY: fcntl on the standard input, which this process owns.
    unsafe { libc::fcntl(0, libc::F_SETFL, libc::O_NONBLOCK) };
    let mut byte = [0u8; 1];
    if matches!(std::io::stdin().read(&mut byte), Ok(1) if byte[0] == ENDED_NORMALLY) {
        return ExitCode::SUCCESS;
    }
    let hierarchy = match Hierarchy::detect() {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!("bulkhead janitor: cgroups left as they are: {e}");
            None
        }
    };
    for line in bulkhead_runtime::clean_leftovers(hierarchy.as_ref()) {
        eprintln!("bulkhead janitor: {line}");
    }
    ExitCode::SUCCESS
}

/// The janitor of this process; dropping it tells the janitor that this process ended
/// normally (drop it after the run's teardown).
pub struct Janitor(Child);

impl Janitor {
    /// Starts the janitor of this process; `None`, with a warning (the next start then
    /// cleans up after a SIGKILL), when this program cannot be started again.
    pub fn start() -> Option<Janitor> {
        let started = std::env::current_exe().and_then(|exe| {
            let mut janitor = Command::new(exe);
            janitor
                .args(["janitor", "--watch", &std::process::id().to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::null());
            // SAFETY: setsid is async-signal-safe and touches only the child.
            unsafe {
                janitor.pre_exec(|| bulkhead_os::check(libc::setsid()).map(drop));
            }
            janitor.spawn()
        });
        match started {
            Ok(child) => Some(Janitor(child)),
            Err(e) => {
                eprintln!("bulkhead run: warning: no janitor ({e}): after a SIGKILL the next start cleans up");
                None
            }
        }
    }
}

impl Drop for Janitor {
    fn drop(&mut self) {
        if let Some(mut pipe) = self.0.stdin.take() {
            let _ = pipe.write_all(&[ENDED_NORMALLY]);
        }
    }
}
