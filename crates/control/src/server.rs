//! The listening side: a Unix socket that only root and the system's own user may use,
//! served without ever blocking the supervisor's event loop.
//!
//! The [`Server`] owns an epoll instance holding its listening socket and its
//! connections, and is itself one file descriptor ([`AsFd`]): the supervisor adds that
//! descriptor to its own epoll set and calls [`Server::poll`] whenever it is readable.
//! `poll` accepts, reads, parses and replies with non-blocking calls only; a reply the
//! supervisor cannot give at once (a mode switch, a suspension) is given later with
//! [`Server::reply`].
//!
//! Who may talk to the system: the socket file has mode 0600 and belongs to the
//! supervisor's user, and every connection's peer credentials (`SO_PEERCRED`) are
//! checked against the allowed users (root and the supervisor's own user) before any
//! request is read, and the peer process's cgroups (`/proc/PID/cgroup`) against the
//! refused ones ([`Server::refuse_cgroups_named`]: a partition's process is refused
//! whatever its uid, root included); another peer gets one `permission_denied` reply,
//! is reported to [`Handler::refused`] (for the log) and is disconnected.
//!
//! How many may talk at once ([`Limits`]): at most 32 accepted connections, at most 8 of
//! one user (uid), and a connection that has no request being answered and sent no
//! complete request for 10 s is closed. So a client that opens connections and says
//! nothing (or dribbles bytes that never end a line) holds none for long, and one user's
//! connections leave room for the others'. The idle timeout runs on a timerfd in the
//! server's epoll set: the server stays one descriptor to watch.

use crate::lines::{Line, LineBuffer};
use crate::protocol::{ErrorCode, Request, RequestLine, Response};
use rustix::event::epoll;
use rustix::event::Timespec;
use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags};
use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest request line accepted; a longer one gets a `too_long` reply.
pub const MAX_REQUEST: usize = 64 * 1024;

/// Accepted connections served at once; more are told so and closed.
pub const MAX_CONNECTIONS: usize = 32;

/// Accepted connections of one user served at once.
pub const MAX_PER_USER: usize = 8;

/// How long an accepted connection may wait without a request before it is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a server admits: see the module's documentation. Connections given to
/// [`Server::adopt`] are none of these: one per partition, made by the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Accepted connections open at once ([`MAX_CONNECTIONS`]).
    pub connections: usize,
    /// Accepted connections of one uid open at once ([`MAX_PER_USER`]).
    pub per_user: usize,
    /// An accepted connection with no request being answered, whose last complete
    /// request (or reply) is this old, is closed ([`IDLE_TIMEOUT`]).
    pub idle: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: MAX_CONNECTIONS,
            per_user: MAX_PER_USER,
            idle: IDLE_TIMEOUT,
        }
    }
}

/// Replies a peer has not read yet, beyond which it is disconnected.
const MAX_PENDING_OUTPUT: usize = 4 << 20;

/// Bytes read from one connection per [`Server::poll`] (the rest on the next poll).
const READ_PER_POLL: usize = 64 * 1024;

const LISTENER: u64 = 0;
/// The epoll data of the idle timer (connections count up from [`LISTENER`]).
const IDLE_TIMER: u64 = u64::MAX;

/// The credentials of a connected peer (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Where to send a reply given later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    connection: u64,
    id: Option<u64>,
}

impl Ticket {
    /// The request's id, to put into its reply.
    pub fn id(&self) -> Option<u64> {
        self.id
    }
}

/// What the handler does with a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    /// Reply now.
    Reply(Response),
    /// The handler keeps the [`Ticket`] and replies later with [`Server::reply`].
    Later,
}

/// The supervisor's side of the protocol.
pub trait Handler {
    /// A valid request from an allowed peer. Must not block.
    fn request(&mut self, request: Request, peer: Peer, ticket: Ticket) -> Handled;
    /// A peer that is not allowed connected (and was disconnected, told `why`): to be
    /// logged.
    fn refused(&mut self, peer: Peer, why: &str);
    /// A request other than `status` on a read-only connection ([`Server::adopt`]):
    /// it was answered with an error and not passed on; to be logged.
    fn refused_read_only(&mut self, _request: &Request, _peer: Peer) {}
}

/// The message of the error a read-only connection gets for anything but `status`.
pub const READ_ONLY: &str = "read-only connection";

/// Why the socket could not be made.
#[derive(Debug)]
pub enum BindError {
    /// A system answers at this path already.
    AlreadyRunning(PathBuf),
    /// Something that is not a socket is in the way.
    NotASocket(PathBuf),
    Io(PathBuf, io::Error),
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindError::AlreadyRunning(p) => write!(
                f,
                "{}: another bulkhead system is running with this control socket",
                p.display()
            ),
            BindError::NotASocket(p) => {
                write!(
                    f,
                    "{}: exists and is not a socket; remove it or choose another --control path",
                    p.display()
                )
            }
            BindError::Io(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for BindError {}

struct Connection {
    serial: u64,
    stream: UnixStream,
    peer: Peer,
    lines: LineBuffer,
    out: Vec<u8>,
    /// The events registered for it now.
    registered: epoll::EventFlags,
    /// The peer has shut down its side: nothing more is read; the connection closes
    /// once the replies are out and none is awaited.
    eof: bool,
    awaited: usize,
    /// Only `status` is served ([`Server::adopt`]).
    read_only: bool,
    /// Accepted on the socket (counted against [`Limits`]), not adopted.
    accepted: bool,
    /// The last complete request read or reply sent.
    active: Instant,
}

impl Connection {
    /// Read until the peer's end, write while replies wait for room.
    fn wanted(&self) -> epoll::EventFlags {
        let mut flags = epoll::EventFlags::empty();
        if !self.eof {
            flags |= epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
        }
        if !self.out.is_empty() {
            flags |= epoll::EventFlags::OUT;
        }
        flags
    }

    /// When the connection is closed for idleness, if nothing is going on.
    fn idle_deadline(&self, idle: Duration) -> Option<Instant> {
        let waiting = self.awaited > 0 || !self.out.is_empty();
        (self.accepted && !waiting).then(|| self.active + idle)
    }
}

/// The control socket of a running system.
pub struct Server {
    listener: UnixListener,
    epoll: OwnedFd,
    path: PathBuf,
    allowed: Vec<u32>,
    /// Peers in a cgroup with a path component starting with this are refused.
    refused_cgroup: Option<String>,
    connections: Vec<Connection>,
    serial: u64,
    limits: Limits,
    /// Fires at the earliest idle deadline ([`Connection::idle_deadline`]).
    idle_timer: OwnedFd,
}

impl Server {
    /// Listens at `path` (its directory is created if missing), mode 0600, for peers
    /// whose uid is in `allowed`. A stale socket left by a crashed system is replaced;
    /// a live one is [`BindError::AlreadyRunning`].
    pub fn bind(path: &Path, allowed: &[u32]) -> Result<Server, BindError> {
        let io = |e| BindError::Io(path.to_path_buf(), e);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.file_type().is_socket() => {
                return Err(BindError::NotASocket(path.to_path_buf()))
            }
            Ok(_) => match UnixStream::connect(path) {
                Ok(_) => return Err(BindError::AlreadyRunning(path.to_path_buf())),
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).map_err(io)?
                }
                Err(e) => return Err(io(e)),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let listener = UnixListener::bind(path).map_err(io)?;
        let restrict = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .and_then(|_| listener.set_nonblocking(true));
        if let Err(e) = restrict {
            let _ = std::fs::remove_file(path);
            return Err(io(e));
        }
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| io(e.into()))?;
        epoll::add(
            &epoll,
            &listener,
            epoll::EventData::new_u64(LISTENER),
            epoll::EventFlags::IN,
        )
        .map_err(|e| io(e.into()))?;
        let idle_timer = rustix::time::timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )
        .and_then(|timer| {
            let data = epoll::EventData::new_u64(IDLE_TIMER);
            epoll::add(&epoll, &timer, data, epoll::EventFlags::IN).map(|_| timer)
        })
        .map_err(|e| io(e.into()))?;
        Ok(Server {
            listener,
            epoll,
            path: path.to_path_buf(),
            allowed: allowed.to_vec(),
            refused_cgroup: None,
            connections: Vec::new(),
            serial: LISTENER,
            limits: Limits::default(),
            idle_timer,
        })
    }

    /// Refuses every peer whose process is, in any cgroup hierarchy, in a cgroup with a
    /// path component that starts with `prefix` (e.g. `bulkhead-`, the start of every
    /// partition's cgroup): a partition may not control the system even as root. A peer
    /// whose cgroups cannot be read (it has gone) is refused too.
    pub fn refuse_cgroups_named(&mut self, prefix: &str) {
        self.refused_cgroup = Some(prefix.to_string());
    }

    /// Whether process `pid` is in a refused cgroup (or cannot be looked at).
    fn in_refused_cgroup(&self, pid: u32) -> bool {
        let Some(prefix) = &self.refused_cgroup else {
            return false;
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return true;
        };
        text.lines()
            .filter_map(|line| line.splitn(3, ':').nth(2))
            .any(|path| {
                path.split('/')
                    .any(|part| part.starts_with(prefix.as_str()))
            })
    }

    /// Admits connections within `limits` from now on (the defaults otherwise).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.connections.len()
    }

    /// Does everything that is ready, without blocking: accepts connections, reads and
    /// answers requests, sends waiting replies. Errors of one connection close it;
    /// only a failure of the server's own epoll instance is returned.
    pub fn poll(&mut self, handler: &mut impl Handler) -> io::Result<()> {
        self.poll_within(handler, Duration::ZERO)
    }

    /// [`Server::poll`] after waiting up to `timeout` for something to do: for a thread
    /// that serves the socket alone (tools, tests); an event loop uses `poll`.
    pub fn poll_within(&mut self, handler: &mut impl Handler, timeout: Duration) -> io::Result<()> {
        let mut events: Vec<epoll::Event> = Vec::with_capacity(MAX_CONNECTIONS + 1);
        let wait = Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: timeout.subsec_nanos() as i64,
        };
        match epoll::wait(
            &self.epoll,
            rustix::buffer::spare_capacity(&mut events),
            Some(&wait),
        ) {
            Err(rustix::io::Errno::INTR) => return Ok(()),
            other => other?,
        };
        for event in events {
            match event.data.u64() {
                LISTENER => self.accept_all(handler),
                IDLE_TIMER => self.close_idle(),
                serial => self.serve(serial, event.flags, handler),
            }
        }
        self.arm_idle_timer()
    }

    /// Closes the accepted connections past their idle deadline.
    fn close_idle(&mut self) {
        let mut expirations = [0u8; 8];
        let _ = rustix::io::read(&self.idle_timer, &mut expirations);
        let now = Instant::now();
        while let Some(i) = self.connections.iter().position(|c| {
            c.idle_deadline(self.limits.idle)
                .is_some_and(|deadline| deadline <= now)
        }) {
            self.close(i);
        }
    }

    /// Sets the idle timer to the earliest idle deadline, or stops it when there is none.
    fn arm_idle_timer(&self) -> io::Result<()> {
        let earliest = self
            .connections
            .iter()
            .filter_map(|c| c.idle_deadline(self.limits.idle))
            .min();
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let value = match earliest {
            // At least a nanosecond: zero would stop the timer.
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                Timespec {
                    tv_sec: left.as_secs() as i64,
                    tv_nsec: left.subsec_nanos().max(1) as i64,
                }
            }
            None => zero,
        };
        let spec = Itimerspec {
            it_interval: zero,
            it_value: value,
        };
        rustix::time::timerfd_settime(&self.idle_timer, TimerfdTimerFlags::empty(), &spec)?;
        Ok(())
    }

    /// Sends the reply to a request that was [`Handled::Later`]; dropped if its peer
    /// has gone.
    pub fn reply(&mut self, ticket: Ticket, response: Response) {
        if let Some(i) = self.index(ticket.connection) {
            let c = &mut self.connections[i];
            c.awaited = c.awaited.saturating_sub(1);
            c.active = Instant::now();
            let response = Response {
                id: ticket.id,
                ..response
            };
            c.out.extend_from_slice(response.to_line().as_bytes());
            self.flush(i);
            let _ = self.arm_idle_timer();
        }
    }

    fn index(&self, serial: u64) -> Option<usize> {
        self.connections.iter().position(|c| c.serial == serial)
    }

    fn accept_all(&mut self, handler: &mut impl Handler) {
        loop {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            self.admit(stream, handler);
        }
    }

    /// Checks the peer and takes the connection in, or tells it why not.
    fn admit(&mut self, stream: UnixStream, handler: &mut impl Handler) {
        let Ok(cred) = rustix::net::sockopt::socket_peercred(&stream) else {
            return;
        };
        let peer = Peer {
            pid: cred.pid.as_raw_nonzero().get() as u32,
            uid: cred.uid.as_raw(),
            gid: cred.gid.as_raw(),
        };
        let why = if !self.allowed.contains(&peer.uid) {
            Some(format!(
                "uid {} may not control this system (root or its own user only)",
                peer.uid
            ))
        } else if self.in_refused_cgroup(peer.pid) {
            Some(format!(
                "pid {} runs in a partition: partitions may not control the system",
                peer.pid
            ))
        } else {
            None
        };
        let refusal = if let Some(why) = why {
            handler.refused(peer, &why);
            Some(Response::error(None, ErrorCode::PermissionDenied, why))
        } else {
            let busy = |why| Response::error(None, ErrorCode::Busy, why);
            self.full(peer.uid).map(busy)
        };
        if let Some(refusal) = refusal {
            answer_and_close(stream, &refusal);
            return;
        }
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        self.serial += 1;
        let data = epoll::EventData::new_u64(self.serial);
        let flags = epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
        if epoll::add(&self.epoll, &stream, data, flags).is_err() {
            return;
        }
        self.connections.push(Connection {
            serial: self.serial,
            stream,
            peer,
            lines: LineBuffer::new(MAX_REQUEST),
            out: Vec::new(),
            registered: flags,
            eof: false,
            awaited: 0,
            read_only: false,
            accepted: true,
            active: Instant::now(),
        });
    }

    /// Why a connection of `uid` cannot be accepted now, if it cannot.
    fn full(&self, uid: u32) -> Option<String> {
        let accepted = || self.connections.iter().filter(|c| c.accepted);
        if accepted().count() >= self.limits.connections {
            return Some(format!(
                "{} connections are open already",
                self.limits.connections
            ));
        }
        let of_user = accepted().filter(|c| c.peer.uid == uid).count();
        (of_user >= self.limits.per_user).then(|| {
            format!(
                "uid {uid} has {} connections open already",
                self.limits.per_user
            )
        })
    }

    /// Serves an already connected stream (the supervisor's end of a socket pair whose
    /// other end a partition inherits) like an accepted connection, except that with
    /// `read_only` only `status` is answered: any other request gets a
    /// `permission_denied` error "read-only connection" and goes to
    /// [`Handler::refused_read_only`]. No peer check: whoever holds the other end was
    /// given it. Not counted against [`Limits`], and never closed for idleness: one such
    /// connection per partition is what the supervisor made.
    pub fn adopt(&mut self, stream: UnixStream, read_only: bool) -> io::Result<()> {
        let cred = rustix::net::sockopt::socket_peercred(&stream)?;
        stream.set_nonblocking(true)?;
        self.serial += 1;
        let data = epoll::EventData::new_u64(self.serial);
        let flags = epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
        epoll::add(&self.epoll, &stream, data, flags)?;
        self.connections.push(Connection {
            serial: self.serial,
            stream,
            peer: Peer {
                pid: cred.pid.as_raw_nonzero().get() as u32,
                uid: cred.uid.as_raw(),
                gid: cred.gid.as_raw(),
            },
            lines: LineBuffer::new(MAX_REQUEST),
            out: Vec::new(),
            registered: flags,
            eof: false,
            awaited: 0,
            read_only,
            accepted: false,
            active: Instant::now(),
        });
        Ok(())
    }

    fn serve(&mut self, serial: u64, flags: epoll::EventFlags, handler: &mut impl Handler) {
        let Some(i) = self.index(serial) else { return };
        // HUP: both directions are shut, there is no one left to answer.
        if flags.intersects(epoll::EventFlags::ERR | epoll::EventFlags::HUP) {
            self.close(i);
            return;
        }
        if flags.intersects(epoll::EventFlags::OUT) {
            self.flush(i);
        }
        if flags.intersects(epoll::EventFlags::IN | epoll::EventFlags::RDHUP) {
            self.read(serial, handler);
        }
    }

    /// Reads what the peer sent (up to [`READ_PER_POLL`]) and answers each line.
    fn read(&mut self, serial: u64, handler: &mut impl Handler) {
        let mut lines = Vec::new();
        let mut buf = [0u8; 8192];
        let mut taken = 0;
        while let Some(i) = self.index(serial) {
            let c = &mut self.connections[i];
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    c.eof = true;
                    break;
                }
                Ok(n) => {
                    c.lines.push(&buf[..n], &mut lines);
                    taken += n;
                    if taken >= READ_PER_POLL {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.close(i);
                    return;
                }
            }
        }
        // Blank lines are no requests: they do not keep a connection from being idle.
        let requested = lines
            .iter()
            .any(|l| !matches!(l, Line::Text(t) if t.trim().is_empty()));
        if requested {
            if let Some(i) = self.index(serial) {
                self.connections[i].active = Instant::now();
            }
        }
        for line in lines {
            self.answer(serial, line, handler);
        }
        if let Some(i) = self.index(serial) {
            self.flush(i);
        }
    }

    fn answer(&mut self, serial: u64, line: Line, handler: &mut impl Handler) {
        let Some(i) = self.index(serial) else { return };
        let parsed = match line {
            Line::Text(text) if text.trim().is_empty() => return,
            Line::Text(text) => RequestLine::parse(&text),
            Line::TooLong => Err(Response::error(
                None,
                ErrorCode::TooLong,
                format!("a request line is at most {MAX_REQUEST} bytes"),
            )),
            Line::NotUtf8 => Err(Response::error(
                None,
                ErrorCode::Malformed,
                "a request line is UTF-8 JSON",
            )),
        };
        let response = match parsed {
            Err(reply) => Some(reply),
            Ok(RequestLine { id, request })
                if self.connections[i].read_only && request != Request::Status =>
            {
                handler.refused_read_only(&request, self.connections[i].peer);
                Some(Response::error(id, ErrorCode::PermissionDenied, READ_ONLY))
            }
            Ok(RequestLine { id, request }) => {
                let ticket = Ticket {
                    connection: serial,
                    id,
                };
                match handler.request(request, self.connections[i].peer, ticket) {
                    Handled::Reply(r) => Some(Response { id, ..r }),
                    Handled::Later => {
                        self.connections[i].awaited += 1;
                        None
                    }
                }
            }
        };
        if let Some(r) = response {
            self.connections[i]
                .out
                .extend_from_slice(r.to_line().as_bytes());
        }
    }

    /// Writes what it can of connection `i`'s replies; waits for room with EPOLLOUT;
    /// closes a peer that is gone, or that lets too many replies pile up.
    fn flush(&mut self, i: usize) {
        let c = &mut self.connections[i];
        while !c.out.is_empty() {
            match c.stream.write(&c.out) {
                Ok(0) => break,
                Ok(n) => {
                    c.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.close(i);
                    return;
                }
            }
        }
        let c = &mut self.connections[i];
        if c.out.len() > MAX_PENDING_OUTPUT || (c.eof && c.out.is_empty() && c.awaited == 0) {
            self.close(i);
            return;
        }
        let wanted = c.wanted();
        if wanted != c.registered {
            let data = epoll::EventData::new_u64(c.serial);
            if epoll::modify(&self.epoll, &c.stream, data, wanted).is_err() {
                self.close(i);
                return;
            }
            self.connections[i].registered = wanted;
        }
    }

    fn close(&mut self, i: usize) {
        let c = self.connections.swap_remove(i);
        let _ = epoll::delete(&self.epoll, &c.stream);
    }
}

impl AsFd for Server {
    /// The descriptor to watch for readability: the server's epoll instance.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }
}

impl Drop for Server {
    /// Removes the socket file, so that clients see that the system is gone, then tells
    /// every client it owes a reply that the system stopped ([`STOPPED`]): those whose
    /// request it has read or not yet read, and those still waiting to be accepted.
    /// Closed without that, a connection still in the listening queue is reset (the
    /// client reads "Connection reset by peer") and one whose request was read sees a
    /// bare end of stream.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let stopped = Response::error(None, ErrorCode::Refused, STOPPED);
        for i in (0..self.connections.len()).rev() {
            self.flush(i);
        }
        for c in self.connections.drain(..) {
            let mut stream = c.stream;
            if drain(&mut stream) > 0 || c.awaited > 0 {
                answer_and_close(stream, &stopped);
            }
        }
        while let Ok((stream, _)) = self.listener.accept() {
            answer_and_close(stream, &stopped);
        }
    }
}

/// The message of the error a client gets whose request a stopping system did not
/// answer.
pub const STOPPED: &str = "the system stopped before answering";

/// Sends `reply` on `stream` and closes it so that the peer reads the reply: one
/// non-blocking write of a short line, the sending side shut, and what the peer sent
/// read and dropped (closed with unread input, the socket would make the peer's next
/// read fail with "Connection reset by peer"). Best effort: a peer that is gone gets
/// nothing.
fn answer_and_close(mut stream: UnixStream, reply: &Response) {
    let _ = stream.set_nonblocking(true);
    let _ = stream.write(reply.to_line().as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Write);
    drain(&mut stream);
}

/// Reads and drops what has arrived on the non-blocking `stream` (at most
/// [`READ_PER_POLL`] bytes); how much that was.
fn drain(stream: &mut UnixStream) -> usize {
    let mut buf = [0u8; 8192];
    let mut taken = 0;
    while taken < READ_PER_POLL {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => taken += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    taken
}
