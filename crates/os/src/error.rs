use std::fmt;
use std::io;

/// Everything a reservation operation can fail with. Each variant's message says what
/// was attempted, on what, and (for system errors) what usually causes it.
#[derive(Debug)]
pub enum Error {
    /// Parameters that no kernel would accept (e.g. runtime > deadline).
    Invalid(String),
    /// A system call or file operation failed.
    Os {
        /// What was attempted, on what (e.g. "sched_setattr(SCHED_DEADLINE) on pid 42").
        what: String,
        source: io::Error,
        /// The usual cause and remedy, or empty.
        hint: String,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn os(what: impl Into<String>, source: io::Error, hint: impl Into<String>) -> Error {
        Error::Os {
            what: what.into(),
            source,
            hint: hint.into(),
        }
    }

    /// The OS error number, if this is a system error.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Os { source, .. } => source.raw_os_error(),
            Error::Invalid(_) => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(m) => write!(f, "{m}"),
            Error::Os { what, source, hint } if hint.is_empty() => write!(f, "{what}: {source}"),
            Error::Os { what, source, hint } => write!(f, "{what}: {source} ({hint})"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Os { source, .. } => Some(source),
            Error::Invalid(_) => None,
        }
    }
}
