use std::fmt;
use std::io;

/// Everything the task library can fail with.
#[derive(Debug)]
pub enum Error {
    /// The task was not started by a bulkhead supervisor, or its environment is malformed.
    NotAttached(String),
    /// The control block is not one this library understands.
    BadControl(String),
    /// A system call failed; `what` names the operation.
    Io {
        what: &'static str,
        source: io::Error,
    },
    /// The trace channel could not be created or attached.
    Chan(bulkhead_chan::OpenError),
    /// Invalid parameters given to the supervisor side.
    Invalid(String),
    /// The supervisor asked the task to stop: it should clean up and exit.
    Stopped,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(what: &'static str, source: io::Error) -> Error {
        Error::Io { what, source }
    }

    /// The negative errno the C API returns for this error.
    pub fn errno(&self) -> i32 {
        -match self {
            Error::NotAttached(_) => bulkhead_os::errno::ENOENT,
            Error::BadControl(_) => bulkhead_os::errno::EPROTO,
            Error::Io { source, .. } => source.raw_os_error().unwrap_or(bulkhead_os::errno::EIO),
            Error::Chan(e) => -e.errno(),
            Error::Invalid(_) => bulkhead_os::errno::EINVAL,
            Error::Stopped => bulkhead_os::errno::ESHUTDOWN,
        }
    }
}

impl From<bulkhead_chan::OpenError> for Error {
    fn from(e: bulkhead_chan::OpenError) -> Error {
        Error::Chan(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotAttached(m) => write!(f, "not attached to a bulkhead supervisor: {m}"),
            Error::BadControl(m) => write!(f, "bad control block: {m}"),
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::Chan(e) => write!(f, "trace ring: {e}"),
            Error::Invalid(m) => write!(f, "{m}"),
            Error::Stopped => write!(f, "the supervisor asked the task to stop"),
        }
    }
}

impl std::error::Error for Error {}
