//! The client `bulkhead ctl` uses: connect, send one request, read its reply.

use crate::protocol::{Request, RequestLine, Response};
use std::fmt;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest reply accepted (a status of a large system is well below).
pub const MAX_REPLY: usize = 16 << 20;

/// Why talking to a system failed.
#[derive(Debug)]
pub enum ClientError {
    /// Nothing is at the path: no system runs there.
    NotRunning(PathBuf),
    /// A socket is there but nobody listens: a system that stopped without cleaning up.
    Stale(PathBuf),
    /// Something other than a socket is at the path (a file, a FIFO, a directory).
    NotASocket(PathBuf),
    /// The socket is someone else's.
    PermissionDenied {
        path: PathBuf,
        owner: Option<u32>,
    },
    /// No reply in time.
    Timeout(PathBuf),
    /// The system closed the connection without a (complete) reply.
    Closed(PathBuf),
    /// A reply that is not valid JSON of the protocol, or too long.
    BadReply(PathBuf, String),
    Io(PathBuf, io::Error),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::NotRunning(p) => write!(
                f,
                "no bulkhead system is running at {} (no such socket)",
                p.display()
            ),
            ClientError::Stale(p) => write!(
                f,
                "no bulkhead system is running at {} (the socket is left over from one that stopped)",
                p.display()
            ),
            ClientError::NotASocket(p) => write!(
                f,
                "{} is not a socket, so no control socket of a bulkhead system",
                p.display()
            ),
            ClientError::PermissionDenied { path, owner } => {
                write!(f, "{}: permission denied", path.display())?;
                match owner {
                    Some(uid) => write!(f, " (the socket belongs to uid {uid}; run as root or as that user)"),
                    None => Ok(()),
                }
            }
            ClientError::Timeout(p) => write!(f, "{}: no reply in time", p.display()),
            ClientError::Closed(p) => {
                write!(f, "{}: the system closed the connection without replying", p.display())
            }
            ClientError::BadReply(p, why) => write!(f, "{}: unreadable reply: {why}", p.display()),
            ClientError::Io(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for ClientError {}

/// A connection to a running system.
pub struct Client {
    path: PathBuf,
    reader: BufReader<UnixStream>,
    next_id: u64,
}

impl Client {
    /// Connects to the system whose control socket is `path`.
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path).map_err(|e| connect_error(path, e))?;
        Ok(Client {
            path: path.to_path_buf(),
            reader: BufReader::new(stream),
            next_id: 1,
        })
    }

    /// Sends `request` and waits up to `timeout` for its reply.
    pub fn request(
        &mut self,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let line = RequestLine {
            id: Some(id),
            request,
        }
        .to_line();
        let io = |e: io::Error| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                ClientError::Timeout(self.path.clone())
            }
            _ => ClientError::Io(self.path.clone(), e),
        };
        let stream = self.reader.get_mut();
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        // A system that refuses this peer replies and closes at once: the request may
        // then not be written, but the refusal is still there to read.
        match stream.write_all(line.as_bytes()) {
            Err(e)
                if !matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) =>
            {
                return Err(io(e))
            }
            _ => {}
        }
        let mut reply = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_REPLY as u64 + 1)
            .read_until(b'\n', &mut reply)
            .map_err(io)?;
        if n == 0 || reply.last() != Some(&b'\n') {
            return Err(match n > MAX_REPLY {
                true => ClientError::BadReply(self.path.clone(), "longer than 16 MiB".into()),
                false => ClientError::Closed(self.path.clone()),
            });
        }
        serde_json::from_slice(&reply)
            .map_err(|e| ClientError::BadReply(self.path.clone(), e.to_string()))
    }
}

use std::io::Read;

fn connect_error(path: &Path, e: io::Error) -> ClientError {
    match e.kind() {
        io::ErrorKind::NotFound => ClientError::NotRunning(path.to_path_buf()),
        io::ErrorKind::ConnectionRefused if !is_socket(path) => {
            ClientError::NotASocket(path.to_path_buf())
        }
        io::ErrorKind::ConnectionRefused => ClientError::Stale(path.to_path_buf()),
        io::ErrorKind::PermissionDenied => ClientError::PermissionDenied {
            path: path.to_path_buf(),
            owner: std::fs::metadata(path).ok().map(|m| m.uid()),
        },
        _ => ClientError::Io(path.to_path_buf(), e),
    }
}

/// Whether a socket is at `path` (followed if a symbolic link).
fn is_socket(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// The directory of control sockets.
pub const SOCKET_DIR: &str = "/run/bulkhead";

/// The default control socket of the system described by `description`:
/// `/run/bulkhead/NAME.sock`, NAME being the file name without its extension
/// ([`bulkhead_os::name::safe_name`]).
pub fn default_path(description: &Path) -> PathBuf {
    let stem = description
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bulkhead".into());
    let name = bulkhead_os::name::safe_name(&stem);
    Path::new(SOCKET_DIR).join(format!("{name}.sock"))
}

/// Removes the control sockets in `dir` that no system listens on any more (left by a
/// supervisor killed by SIGKILL: `discover` would count them as running); returns
/// them. A socket counts as dead when a connection is refused twice, 50 ms apart (a
/// system starting up binds its socket and listens on it right after).
pub fn remove_stale(dir: &Path) -> Vec<PathBuf> {
    let refused = |p: &Path| {
        UnixStream::connect(p).is_err_and(|e| e.kind() == io::ErrorKind::ConnectionRefused)
    };
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let socket = entry.file_type().is_ok_and(|t| t.is_socket());
        if !socket || path.extension().is_none_or(|x| x != "sock") || !refused(&path) {
            continue;
        }
        std::thread::sleep(Duration::from_millis(50));
        if refused(&path) && std::fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Why [`discover`] finds no one control socket in its directory.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("no bulkhead system is running ({} does not exist)", .0.display())]
    NoDirectory(PathBuf),
    #[error("{}: {source}", .dir.display())]
    Read { dir: PathBuf, source: io::Error },
    #[error("no bulkhead system is running (no socket in {})", .0.display())]
    NoSocket(PathBuf),
    #[error(
        "several systems are running ({}): choose one with --control PATH",
        .0.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    Several(Vec<PathBuf>),
}

/// The one control socket in `dir`, for a `bulkhead ctl` without `--control`.
pub fn discover(dir: &Path) -> Result<PathBuf, DiscoverError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(DiscoverError::NoDirectory(dir.into()))
        }
        Err(source) => {
            let dir = dir.into();
            return Err(DiscoverError::Read { dir, source });
        }
    };
    let mut sockets: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .collect();
    sockets.sort();
    match sockets.len() {
        0 => Err(DiscoverError::NoSocket(dir.into())),
        1 => Ok(sockets.remove(0)),
        _ => Err(DiscoverError::Several(sockets)),
    }
}
