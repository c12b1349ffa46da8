//! The one place the CLI turns an error into what the user reads and the exit code:
//! `error: MESSAGE` on stderr, written in one piece (a run's programs share stderr,
//! and `eprintln!` may write a line in several), and exit code 1 for invalid input, a
//! failed verdict or work that could not be carried out, 2 for a usage error found
//! after parsing (clap's own usage errors exit 2 too).

use bulkhead_can::service::ServiceError;
use bulkhead_model::excerpt;
use bulkhead_runtime::RunError;
use std::fmt::Display;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Exit code for invalid input, a failed verdict or work that could not be done.
pub const INVALID: u8 = 1;

/// Exit code of a usage error (flags that do not fit together).
pub const USAGE: u8 = 2;

/// Writes `error: MESSAGE` and a newline to stderr in one write, long values cut.
pub fn error_line(message: impl Display) {
    line("error", message);
}

/// Writes `warning: MESSAGE` and a newline to stderr in one write, long values cut.
pub fn warning_line(message: impl Display) {
    line("warning", message);
}

/// `KIND: MESSAGE` in one write, each value quoted in the message that is longer than
/// [`excerpt::MAX_VALUE`] cut (a 4 MB command is shown by its first 200 bytes).
fn line(kind: &str, message: impl Display) {
    let line = format!("{kind}: {}\n", excerpt::values(&message.to_string()));
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Reports `message` ([`error_line`]); exit code 1.
pub fn fail(message: impl Display) -> ExitCode {
    error_line(message);
    ExitCode::from(INVALID)
}

/// Reports `message` ([`error_line`]) as a usage error; exit code 2.
pub fn usage(message: impl Display) -> ExitCode {
    error_line(message);
    ExitCode::from(USAGE)
}

/// A run that could not be carried out: an output file's error names its option and
/// path, the others name the description `file`; exit code 1.
pub fn run_failed(e: &RunError, file: &Path) -> ExitCode {
    match e {
        RunError::Output { .. } => fail(e),
        _ => fail(format!("{}: {e}", file.display())),
    }
}

/// The gateway service's error: a usage error as it is (exit code 2), the others
/// naming the gateway's role and bus (exit code 1).
pub fn gateway_failed(e: &ServiceError, role: &str, bus: &str) -> ExitCode {
    match e {
        ServiceError::Usage(m) => usage(m),
        e => fail(format!("gateway {role} of {bus}: {e}")),
    }
}
