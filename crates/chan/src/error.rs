use std::fmt;
use std::io;

/// Everything a channel operation can fail with.
#[derive(Debug)]
pub enum Error {
    /// A system call failed; `what` names the operation.
    Io {
        what: &'static str,
        source: io::Error,
    },
    /// The shared header failed validation on connect (bad magic, version, size...).
    BadHeader(String),
    /// The arguments are unusable (name, message size, depth, buffer length...).
    Invalid(String),
    /// The peer wrote an impossible value into its control words.
    Corrupt(&'static str),
    /// `try_write` on a full fifo.
    Full,
    /// `try_read` on an empty channel.
    Empty,
    /// A blocking operation reached its timeout.
    Timeout,
    /// The peer closed its endpoint and nothing more can be transferred.
    Closed,
    /// The peer process (this pid) died without closing, while this side waited.
    PeerDied(u32),
    /// Another live process (this pid) already holds this end of the channel.
    Busy(u32),
    /// A named channel with this name exists and its creator is alive.
    Exists(String),
    /// No channel with this name exists.
    NotFound(String),
}

impl Error {
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn io(what: &'static str, source: impl Into<io::Error>) -> Error {
        Error::Io {
            what,
            source: source.into(),
        }
    }

    /// The negative errno the C API returns for this error.
    pub fn errno(&self) -> i32 {
        let e = match self {
            Error::Io { source, .. } => source.raw_os_error().unwrap_or(5),
            Error::BadHeader(_) => 71,        // EPROTO
            Error::Invalid(_) => 22,          // EINVAL
            Error::Corrupt(_) => 74,          // EBADMSG
            Error::Full | Error::Empty => 11, // EAGAIN
            Error::Timeout => 110,            // ETIMEDOUT
            Error::Closed => 32,              // EPIPE
            Error::PeerDied(_) => 130,        // EOWNERDEAD
            Error::Busy(_) => 16,             // EBUSY
            Error::Exists(_) => 17,           // EEXIST
            Error::NotFound(_) => 2,          // ENOENT
        };
        -e
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::BadHeader(m) => write!(f, "invalid channel header: {m}"),
            Error::Invalid(m) => write!(f, "invalid argument: {m}"),
            Error::Corrupt(m) => write!(f, "peer corrupted the channel: {m}"),
            Error::Full => write!(f, "channel full"),
            Error::Empty => write!(f, "channel empty"),
            Error::Timeout => write!(f, "timed out"),
            Error::Closed => write!(f, "peer closed the channel"),
            Error::PeerDied(pid) => write!(f, "peer process {pid} died"),
            Error::Busy(pid) => write!(f, "this end of the channel is held by live process {pid}"),
            Error::Exists(n) => write!(f, "channel {n:?} already exists and its creator is alive"),
            Error::NotFound(n) => write!(f, "no channel named {n:?}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
