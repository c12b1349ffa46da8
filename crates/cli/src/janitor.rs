//! `bulkhead janitor --watch PID` (hidden): what a supervisor killed by SIGKILL leaves
//! behind is removed when it dies, not only at the next `bulkhead run`.
//!
//! `bulkhead run` starts it first, as its child in a session of its own (so that a
//! signal to the run's process group or session does not reach it). It waits for the
//! supervisor to end, however it ends, and then makes the clean-up a run makes at its
//! start ([`bulkhead_runtime::clean_leftovers`]): cgroups with any process still in them,
//! named channels, shields, interfaces, workqueue masks and CPUFreq settings of
//! supervisors that no longer run. After a normal stop there is nothing left to remove.
//! If the janitor is killed too, the next start still cleans up.

use bulkhead_runtime::Hierarchy;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitCode, Stdio};

#[derive(clap::Args)]
pub struct Args {
    /// The supervisor to wait for: the janitor's parent
    #[arg(long, value_name = "PID")]
    watch: u32,
}

pub fn run(args: Args) -> ExitCode {
    // The pidfd is opened before the parent is checked: once the check passes, the
    // process waited for is the supervisor, not a later process given its pid.
    let supervisor = bulkhead_os::proc::Process::open(args.watch);
    if std::os::unix::process::parent_id() == args.watch {
        let waited = supervisor.and_then(|p| p.map_or(Ok(()), |p| p.wait_exit()));
        if let Err(e) = waited {
            eprintln!("error: waiting for supervisor {}: {e}", args.watch);
            return ExitCode::from(1);
        }
    }
    let Ok(hierarchy) = Hierarchy::detect() else {
        return ExitCode::SUCCESS;
    };
    for line in bulkhead_runtime::clean_leftovers(&hierarchy) {
        eprintln!("bulkhead janitor: {line}");
    }
    ExitCode::SUCCESS
}

/// Starts the janitor of this process; `None` (and the next start cleans up) when this
/// program cannot be started again.
pub fn spawn() -> Option<Child> {
    let exe = std::env::current_exe().ok()?;
    let mut janitor = Command::new(exe);
    janitor
        .args(["janitor", "--watch", &std::process::id().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe and touches only the child.
    unsafe {
        janitor.pre_exec(|| bulkhead_os::check(libc::setsid()).map(drop));
    }
    janitor.spawn().ok()
}
