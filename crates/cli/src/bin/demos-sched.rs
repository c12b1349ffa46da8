//! `demos-sched`: DEmOS's command line over bulkhead (docs/demos.md). It executes
//! `bulkhead demos-sched ARGS...` from its own directory, so that one program runs the
//! schedule as `bulkhead run` does (and the helpers a run starts, which execute the
//! running program again, find `bulkhead`).

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let bulkhead = std::env::current_exe()
        .map(|exe| exe.with_file_name("bulkhead"))
        .unwrap_or_else(|_| "bulkhead".into());
    let error = Command::new(&bulkhead)
        .arg("demos-sched")
        .args(std::env::args_os().skip(1))
        .exec();
    eprintln!("demos-sched: cannot run {}: {error}", bulkhead.display());
    ExitCode::from(1)
}
