//! What channel operations fail with: one enum per kind of operation, holding only
//! what that operation can return ([`OpenError`], [`SendError`], [`RecvError`]),
//! and [`Error`], their union, for code that passes any of them on with `?`.
//!
//! Each error has the negative errno the C API returns for it (`errno()`); the
//! union's is its member's.

use std::fmt;
use std::io;

/// What creating, opening, attaching to ([`crate::Channel::sender`],
/// [`crate::Channel::receiver`]), handing over, passing, inspecting or destroying a
/// channel can fail with.
#[derive(Debug)]
pub enum OpenError {
    /// A system call failed; `what` names the operation.
    Io {
        what: &'static str,
        source: io::Error,
    },
    /// The shared header failed validation on connect (bad magic, version, size...).
    BadHeader(String),
    /// The arguments are unusable (name, message size, depth, flags, descriptor...).
    Invalid(String),
    /// The end's own control words hold an impossible value (on attach).
    Corrupt(&'static str),
    /// Another live process (this pid) already holds this end of the channel.
    Busy(u32),
    /// A named channel with this name exists and its creator is alive.
    Exists(String),
    /// No channel with this name exists (or a handed descriptor is not open).
    NotFound(String),
    /// The Unix socket a channel was to be received from was closed by its peer.
    Closed,
}

/// What writing a message ([`crate::Sender::write`], `try_write`, `write_timeout`)
/// can fail with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The buffer is not one message long.
    Length { len: usize, msg_size: u32 },
    /// The peer wrote an impossible value into its control words.
    Corrupt(&'static str),
    /// `try_write` on a full fifo.
    Full,
    /// `write_timeout` reached its timeout.
    Timeout,
    /// The reader closed its endpoint: nothing written would be read.
    Closed,
    /// The reader's process (this pid) died without closing, while this side waited.
    PeerDied(u32),
}

/// What reading a message ([`crate::Receiver::read`], `try_read`, `read_timeout`)
/// can fail with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecvError {
    /// The buffer is not one message long.
    Length { len: usize, msg_size: u32 },
    /// The peer wrote an impossible value into its control words.
    Corrupt(&'static str),
    /// `try_read` on an empty channel (or a latest channel never written).
    Empty,
    /// `read_timeout` reached its timeout.
    Timeout,
    /// The writer closed its endpoint and the fifo is drained.
    Closed,
    /// The writer's process (this pid) died without closing, while this side waited.
    PeerDied(u32),
    /// The other word of `read_timeout_or` changed or was woken before a message came.
    Interrupted,
}

/// Any channel error: the union of [`OpenError`], [`SendError`] and [`RecvError`],
/// each converting into it. Displays as its member and has its member's source.
#[derive(Debug)]
pub enum Error {
    Open(OpenError),
    Send(SendError),
    Recv(RecvError),
}

const EIO: i32 = 5;
const EPROTO: i32 = 71;
const EINVAL: i32 = 22;
const EBADMSG: i32 = 74;
const EAGAIN: i32 = 11;
const EINTR: i32 = 4;
const ETIMEDOUT: i32 = 110;
const EPIPE: i32 = 32;
const EOWNERDEAD: i32 = 130;
const EBUSY: i32 = 16;
const EEXIST: i32 = 17;
const ENOENT: i32 = 2;

impl OpenError {
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn io(what: &'static str, source: impl Into<io::Error>) -> OpenError {
        OpenError::Io {
            what,
            source: source.into(),
        }
    }

    /// The negative errno the C API returns for this error.
    pub fn errno(&self) -> i32 {
        -match self {
            OpenError::Io { source, .. } => source.raw_os_error().unwrap_or(EIO),
            OpenError::BadHeader(_) => EPROTO,
            OpenError::Invalid(_) => EINVAL,
            OpenError::Corrupt(_) => EBADMSG,
            OpenError::Busy(_) => EBUSY,
            OpenError::Exists(_) => EEXIST,
            OpenError::NotFound(_) => ENOENT,
            OpenError::Closed => EPIPE,
        }
    }
}

impl SendError {
    /// The negative errno the C API returns for this error.
    pub fn errno(&self) -> i32 {
        -match self {
            SendError::Length { .. } => EINVAL,
            SendError::Corrupt(_) => EBADMSG,
            SendError::Full => EAGAIN,
            SendError::Timeout => ETIMEDOUT,
            SendError::Closed => EPIPE,
            SendError::PeerDied(_) => EOWNERDEAD,
        }
    }
}

impl RecvError {
    /// The negative errno the C API returns for this error.
    pub fn errno(&self) -> i32 {
        -match self {
            RecvError::Length { .. } => EINVAL,
            RecvError::Corrupt(_) => EBADMSG,
            RecvError::Empty => EAGAIN,
            RecvError::Timeout => ETIMEDOUT,
            RecvError::Closed => EPIPE,
            RecvError::PeerDied(_) => EOWNERDEAD,
            RecvError::Interrupted => EINTR,
        }
    }
}

impl Error {
    /// The negative errno the C API returns for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Open(e) => e.errno(),
            Error::Send(e) => e.errno(),
            Error::Recv(e) => e.errno(),
        }
    }
}

fn length(f: &mut fmt::Formatter<'_>, len: usize, msg_size: u32) -> fmt::Result {
    write!(
        f,
        "invalid argument: buffer of {len} bytes, messages are {msg_size} bytes"
    )
}

fn corrupt(f: &mut fmt::Formatter<'_>, what: &str) -> fmt::Result {
    write!(f, "peer corrupted the channel: {what}")
}

const TIMED_OUT: &str = "timed out";
const CLOSED: &str = "peer closed the channel";

fn peer_died(f: &mut fmt::Formatter<'_>, pid: u32) -> fmt::Result {
    write!(f, "peer process {pid} died")
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Io { what, source } => write!(f, "{what}: {source}"),
            OpenError::BadHeader(m) => write!(f, "invalid channel header: {m}"),
            OpenError::Invalid(m) => write!(f, "invalid argument: {m}"),
            OpenError::Corrupt(m) => corrupt(f, m),
            OpenError::Busy(pid) => {
                write!(f, "this end of the channel is held by live process {pid}")
            }
            OpenError::Exists(n) => {
                write!(f, "channel {n:?} already exists and its creator is alive")
            }
            OpenError::NotFound(n) => write!(f, "no channel named {n:?}"),
            OpenError::Closed => f.write_str(CLOSED),
        }
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Length { len, msg_size } => length(f, *len, *msg_size),
            SendError::Corrupt(m) => corrupt(f, m),
            SendError::Full => f.write_str("channel full"),
            SendError::Timeout => f.write_str(TIMED_OUT),
            SendError::Closed => f.write_str(CLOSED),
            SendError::PeerDied(pid) => peer_died(f, *pid),
        }
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Length { len, msg_size } => length(f, *len, *msg_size),
            RecvError::Corrupt(m) => corrupt(f, m),
            RecvError::Empty => f.write_str("channel empty"),
            RecvError::Timeout => f.write_str(TIMED_OUT),
            RecvError::Closed => f.write_str(CLOSED),
            RecvError::PeerDied(pid) => peer_died(f, *pid),
            RecvError::Interrupted => f.write_str("wait interrupted by a request"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Open(e) => e.fmt(f),
            Error::Send(e) => e.fmt(f),
            Error::Recv(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl std::error::Error for SendError {}

impl std::error::Error for RecvError {}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Open(e) => e.source(),
            Error::Send(e) => e.source(),
            Error::Recv(e) => e.source(),
        }
    }
}

impl From<OpenError> for Error {
    fn from(e: OpenError) -> Error {
        Error::Open(e)
    }
}

impl From<SendError> for Error {
    fn from(e: SendError) -> Error {
        Error::Send(e)
    }
}

impl From<RecvError> for Error {
    fn from(e: RecvError) -> Error {
        Error::Recv(e)
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The C API's codes: one per member variant, the union's its member's.
    #[test]
    fn errno_per_variant() {
        let os = io::Error::from_raw_os_error(13);
        let open = [
            (OpenError::io("x", os), -13),
            (OpenError::io("x", io::Error::other("no errno")), -EIO),
            (OpenError::BadHeader("m".into()), -EPROTO),
            (OpenError::Invalid("m".into()), -EINVAL),
            (OpenError::Corrupt("m"), -EBADMSG),
            (OpenError::Busy(1), -EBUSY),
            (OpenError::Exists("n".into()), -EEXIST),
            (OpenError::NotFound("n".into()), -ENOENT),
            (OpenError::Closed, -EPIPE),
        ];
        for (e, code) in open {
            assert_eq!(e.errno(), code, "{e}");
            assert_eq!(Error::from(e).errno(), code);
        }
        let len = (
            SendError::Length {
                len: 1,
                msg_size: 2,
            },
            -EINVAL,
        );
        for (e, code) in [
            len,
            (SendError::Corrupt("m"), -EBADMSG),
            (SendError::Full, -EAGAIN),
            (SendError::Timeout, -ETIMEDOUT),
            (SendError::Closed, -EPIPE),
            (SendError::PeerDied(1), -EOWNERDEAD),
        ] {
            assert_eq!(Error::from(e).errno(), code);
        }
        let len = (
            RecvError::Length {
                len: 1,
                msg_size: 2,
            },
            -EINVAL,
        );
        for (e, code) in [
            len,
            (RecvError::Corrupt("m"), -EBADMSG),
            (RecvError::Empty, -EAGAIN),
            (RecvError::Timeout, -ETIMEDOUT),
            (RecvError::Closed, -EPIPE),
            (RecvError::PeerDied(1), -EOWNERDEAD),
            (RecvError::Interrupted, -EINTR),
        ] {
            assert_eq!(Error::from(e).errno(), code);
        }
    }

    /// The union shows its member's message and source.
    #[test]
    fn union_is_transparent() {
        let e = Error::from(OpenError::io(
            "mmap channel",
            io::Error::from_raw_os_error(12),
        ));
        assert!(e.to_string().starts_with("mmap channel: "), "{e}");
        assert!(std::error::Error::source(&e).is_some());
        let e = Error::from(SendError::Length {
            len: 3,
            msg_size: 8,
        });
        assert_eq!(
            e.to_string(),
            "invalid argument: buffer of 3 bytes, messages are 8 bytes"
        );
    }
}
