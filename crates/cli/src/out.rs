//! Standard output, the one way every subcommand writes it: when its reader has gone
//! (`bulkhead analyze --json | head -1`) the program ends quietly, as `cat` does, killed
//! by SIGPIPE (a shell shows 141), instead of panicking ("failed printing to stdout")
//! or reporting an error nobody reads. Another write error (`> /dev/full`) is an
//! error naming standard output, exit code 1. `print!` and `println!` are refused by
//! clippy in this crate (`clippy::print_stdout`) so that no write goes around this.

use std::fmt;
use std::io::{self, Write};

/// A writer that ends the program quietly when standard output's reader has gone.
pub struct Quiet<W>(pub W);

impl<W: Write> Write for Quiet<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        ended(self.0.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        ended(self.0.flush())
    }
}

/// `result`, unless it is a broken pipe: then the program ends of SIGPIPE.
fn ended<T>(result: io::Result<T>) -> io::Result<T> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => bulkhead_os::signal::die_of_sigpipe(),
        other => other,
    }
}

/// Standard output, locked, for a subcommand that streams what it prints.
pub fn stdout() -> Quiet<io::StdoutLock<'static>> {
    Quiet(io::stdout().lock())
}

/// Writes `text` to standard output and flushes it; a write error other than a gone
/// reader ends the program with exit code 1 and a message naming standard output.
pub fn print(text: fmt::Arguments<'_>) {
    let mut out = stdout();
    if let Err(e) = out.write_fmt(text).and_then(|_| out.flush()) {
        crate::fail::error_line(format!("standard output: {e}"));
        std::process::exit(crate::fail::INVALID.into());
    }
}

/// `print!` through [`print`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::print(format_args!($($arg)*))
    };
}

/// `println!` through [`print`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};
