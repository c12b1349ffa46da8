//! The control socket over a real Unix socket: replies, deferred replies that do not
//! hold up other clients, bad requests that get errors and disturb nothing, the
//! socket's mode, and peers of another user refused (a forked child that setuid()s).

use bulkhead_control::*;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A pretend system: mode `urban`; a switch takes `SWITCH` and is answered later.
struct Fake {
    mode: String,
    switching: Option<(Ticket, String, Instant)>,
    refused: Arc<Mutex<Vec<Peer>>>,
}

const SWITCH: Duration = Duration::from_millis(300);

/// How long the serving thread waits for work before it looks at its stop flag.
const TICK: Duration = Duration::from_millis(5);

impl Handler for Fake {
    fn request(&mut self, request: Request, _peer: Peer, ticket: Ticket) -> Handled {
        match request {
            Request::Status => Handled::Reply(Response::status(
                None,
                Status {
                    protocol: PROTOCOL_VERSION,
                    system: "vehicle".into(),
                    mode: Some(self.mode.clone()),
                    switching_to: self.switching.as_ref().map(|s| s.1.clone()),
                    state: "running".into(),
                    ..Status::default()
                },
            )),
            Request::Mode { name } if name != "highway" && name != "urban" => Handled::Reply(
                Response::error(None, ErrorCode::UnknownMode, format!("no mode `{name}`")),
            ),
            Request::Mode { .. } if self.switching.is_some() => Handled::Reply(Response::error(
                None,
                ErrorCode::Busy,
                "a switch is in progress",
            )),
            Request::Mode { name } => {
                self.switching = Some((ticket, name, Instant::now()));
                Handled::Later
            }
            Request::Suspend | Request::Resume => Handled::Reply(Response::error(
                None,
                ErrorCode::Unsupported,
                "no stop-start here",
            )),
        }
    }

    fn refused(&mut self, peer: Peer, _why: &str) {
        self.refused.lock().unwrap().push(peer);
    }
}

/// A server polled by a thread the way the supervisor's loop polls it.
struct Running {
    path: PathBuf,
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    refused: Arc<Mutex<Vec<Peer>>>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    fn start(name: &str, allowed: &[u32]) -> Running {
        Running::start_with(name, allowed, Limits::default())
    }

    fn start_with(name: &str, allowed: &[u32], limits: Limits) -> Running {
        let dir =
            std::env::temp_dir().join(format!("bulkhead-control-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.join("vehicle.sock");
        let mut server = Server::bind(&path, allowed).unwrap();
        server.set_limits(limits);
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let mut fake = Fake {
            mode: "urban".into(),
            switching: None,
            refused: refused.clone(),
        };
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                server.poll_within(&mut fake, TICK).unwrap();
                if let Some((ticket, to, since)) = fake.switching.take() {
                    if since.elapsed() < SWITCH {
                        fake.switching = Some((ticket, to, since));
                        continue;
                    }
                    let outcome = ModeOutcome {
                        from: std::mem::replace(&mut fake.mode, to.clone()),
                        to,
                        policy: "boost".into(),
                        latency_ns: since.elapsed().as_nanos() as u64,
                        steps: Vec::new(),
                    };
                    server.reply(ticket, Response::mode(None, outcome));
                }
            }
        });
        Running {
            path,
            dir,
            stop,
            refused,
            thread: Some(thread),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn me() -> u32 {
    std::fs::metadata("/proc/self").unwrap().uid()
}

const WAIT: Duration = Duration::from_secs(5);

#[test]
fn status_is_answered_with_the_request_id() {
    let sys = Running::start("status", &[0, me()]);
    let mut client = Client::connect(&sys.path).unwrap();
    let reply = client.request(Request::Status, WAIT).unwrap();
    assert!(reply.ok);
    assert_eq!(reply.id, Some(1));
    let status = reply.status.unwrap();
    assert_eq!(
        (status.system.as_str(), status.mode.as_deref()),
        ("vehicle", Some("urban"))
    );
    let again = client.request(Request::Status, WAIT).unwrap();
    assert_eq!(again.id, Some(2), "one connection, many requests");
}

#[test]
fn a_slow_switch_does_not_hold_up_other_clients() {
    let sys = Running::start("slow", &[0, me()]);
    let path = sys.path.clone();
    let started = Instant::now();
    let switcher = std::thread::spawn(move || {
        let mut client = Client::connect(&path).unwrap();
        client
            .request(
                Request::Mode {
                    name: "highway".into(),
                },
                WAIT,
            )
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(50));
    let mut other = Client::connect(&sys.path).unwrap();
    let status = other
        .request(Request::Status, WAIT)
        .unwrap()
        .status
        .unwrap();
    assert!(started.elapsed() < SWITCH, "answered while the switch runs");
    assert_eq!(status.switching_to.as_deref(), Some("highway"));
    let busy = other
        .request(
            Request::Mode {
                name: "urban".into(),
            },
            WAIT,
        )
        .unwrap();
    assert_eq!(busy.error.unwrap().code, ErrorCode::Busy);
    let done = switcher.join().unwrap();
    assert!(done.ok);
    assert_eq!(done.id, Some(1));
    let outcome = done.mode.unwrap();
    assert_eq!(
        (outcome.from.as_str(), outcome.to.as_str()),
        ("urban", "highway")
    );
    assert!(started.elapsed() >= SWITCH);
}

/// Sends `bytes` on `stream` and reads one reply line.
fn exchange(reader: &mut BufReader<UnixStream>, bytes: &[u8]) -> Response {
    reader.get_mut().write_all(bytes).unwrap();
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[test]
fn bad_requests_get_errors_and_disturb_nothing() {
    let sys = Running::start("bad", &[0, me()]);
    let stream = UnixStream::connect(&sys.path).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut reader = BufReader::new(stream);
    let code = |r: Response| r.error.unwrap().code;
    assert_eq!(
        code(exchange(&mut reader, b"hello\n")),
        ErrorCode::Malformed
    );
    assert_eq!(
        code(exchange(
            &mut reader,
            b"{\"id\":4,\"request\":\"reboot\"}\n"
        )),
        ErrorCode::UnknownRequest
    );
    let unknown = exchange(
        &mut reader,
        b"{\"id\":5,\"request\":\"mode\",\"name\":\"moon\"}\n",
    );
    assert_eq!(unknown.id, Some(5));
    assert_eq!(code(unknown), ErrorCode::UnknownMode);
    let mut huge = vec![b'x'; MAX_REQUEST * 3];
    huge.push(b'\n');
    assert_eq!(code(exchange(&mut reader, &huge)), ErrorCode::TooLong);
    assert_eq!(
        code(exchange(&mut reader, b"\xff\xfe\n")),
        ErrorCode::Malformed
    );
    assert_eq!(
        code(exchange(&mut reader, b"{\"request\":\"suspend\"}\n")),
        ErrorCode::Unsupported
    );
    // serde_json keeps the last of two keys: this reached the system as a suspend.
    assert_eq!(
        code(exchange(
            &mut reader,
            b"{\"request\":\"status\",\"request\":\"suspend\"}\n"
        )),
        ErrorCode::Malformed
    );
    // The same connection and the system are fine afterwards.
    let ok = exchange(&mut reader, b"{\"id\":9,\"request\":\"status\"}\n");
    assert!(ok.ok && ok.id == Some(9));
    // A peer that sends and hangs up leaves nothing behind.
    for _ in 0..5 {
        let mut s = UnixStream::connect(&sys.path).unwrap();
        s.write_all(b"{\"request\":\"status\"}\n").unwrap();
    }
    let mut client = Client::connect(&sys.path).unwrap();
    assert!(client.request(Request::Status, WAIT).unwrap().ok);
}

#[test]
fn the_socket_is_private_and_a_live_one_is_not_taken_over() {
    let sys = Running::start("mode", &[0, me()]);
    let meta = std::fs::metadata(&sys.path).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(meta.uid(), me());
    match Server::bind(&sys.path, &[0]) {
        Err(BindError::AlreadyRunning(p)) => assert_eq!(p, sys.path),
        other => panic!("{:?}", other.map(|s| s.path().to_path_buf())),
    }
    let file = sys.dir.join("plain");
    std::fs::write(&file, "x").unwrap();
    assert!(matches!(
        Server::bind(&file, &[0]),
        Err(BindError::NotASocket(_))
    ));
}

#[test]
fn clients_say_when_no_system_runs() {
    let dir = Dir::new("none");
    let missing = dir.join("gone.sock");
    let e = Client::connect(&missing).err().unwrap();
    assert!(matches!(e, ClientError::NotRunning(_)));
    assert!(
        e.to_string()
            .starts_with("no bulkhead system is running at"),
        "{e}"
    );
    // A socket nobody listens on (a system killed without cleaning up) ...
    let stale = dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(matches!(
        Client::connect(&stale),
        Err(ClientError::Stale(_))
    ));
    // ... is replaced by the next system, and removed when it stops.
    let server = Server::bind(&stale, &[me()]).unwrap();
    assert!(Client::connect(&stale).is_ok());
    drop(server);
    assert!(!stale.exists());
    let none = discover(&dir).unwrap_err();
    assert!(
        matches!(&none, DiscoverError::NoSocket(d) if d == &dir.0),
        "{none:?}"
    );
    assert!(none.to_string().contains("no socket in"));
    let missing = discover(&dir.join("nothing")).unwrap_err();
    assert!(
        matches!(missing, DiscoverError::NoDirectory(_)),
        "{missing:?}"
    );
    assert!(missing.to_string().contains("does not exist"));
    let _one = Server::bind(&dir.join("a.sock"), &[me()]).unwrap();
    assert_eq!(discover(&dir).unwrap(), dir.join("a.sock"));
    let _two = Server::bind(&dir.join("b.sock"), &[me()]).unwrap();
    let several = discover(&dir).unwrap_err();
    assert!(matches!(&several, DiscoverError::Several(s) if s.len() == 2));
    assert_eq!(
        several.to_string(),
        format!(
            "several systems are running ({}, {}): choose one with --control PATH",
            dir.join("a.sock").display(),
            dir.join("b.sock").display()
        )
    );
}

#[test]
fn default_paths_follow_the_description_name() {
    assert_eq!(
        default_path(Path::new("examples/modes.yaml")),
        Path::new("/run/bulkhead/modes.sock")
    );
    assert_eq!(
        default_path(Path::new("my car.yaml")),
        Path::new("/run/bulkhead/my_car.sock")
    );
}

/// What the forked child saw.
#[derive(Debug, PartialEq, Eq)]
enum ChildSaw {
    /// connect() failed with EACCES: the file mode kept it out.
    ConnectDenied,
    /// Connected and got a reply with the text looked for.
    Reply,
    Other(i32),
}

/// Forks a child that becomes `uid`, connects to `path`, asks for the status and
/// reports by its exit status what happened: whether the reply holds `needle`. Between
/// fork and exit the child makes only async-signal-safe system calls on memory
/// prepared before the fork.
fn as_other_user(path: &Path, uid: u32, needle: &[u8]) -> ChildSaw {
    // SAFETY: a zeroed sockaddr_un is a valid (empty) address.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_encoded_bytes();
    assert!(bytes.len() < addr.sun_path.len());
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let request = b"{\"request\":\"status\"}\n";
    let mut reply = [0u8; 512];
    // SAFETY: the child only calls setgid, setuid, socket, connect, write, read and
    // _exit, all async-signal-safe, on memory allocated before the fork; the parent
    // waits for it below.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: see above; every path ends in _exit.
        unsafe {
            if libc::setgid(uid) != 0 || libc::setuid(uid) != 0 {
                libc::_exit(10);
            }
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) != 0 {
                let denied = *libc::__errno_location() == libc::EACCES;
                libc::_exit(if denied { 1 } else { 11 });
            }
            libc::write(fd, request.as_ptr().cast(), request.len());
            let n = libc::read(fd, reply.as_mut_ptr().cast(), reply.len());
            let got = if n > 0 { n as usize } else { 0 };
            let found = reply[..got].windows(needle.len()).any(|w| w == needle);
            libc::_exit(if found { 0 } else { 12 });
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    match libc::WEXITSTATUS(status) {
        0 => ChildSaw::Reply,
        1 => ChildSaw::ConnectDenied,
        other => ChildSaw::Other(other),
    }
}

#[test]
#[ignore = "needs root: becoming another user"]
fn a_peer_of_another_user_is_refused_and_reported() {
    assert_eq!(me(), 0, "needs root: becoming another user");
    let nobody = 65534;
    let sys = Running::start("peer", &[0]);
    // Mode 0600 keeps it from connecting at all.
    assert_eq!(
        as_other_user(&sys.path, nobody, b"permission_denied"),
        ChildSaw::ConnectDenied
    );
    assert!(sys.refused.lock().unwrap().is_empty());
    // With the file opened up (as a careless administrator might), the peer check
    // still refuses it, and the refusal is reported for the log.
    std::fs::set_permissions(&sys.path, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(
        as_other_user(&sys.path, nobody, b"permission_denied"),
        ChildSaw::Reply
    );
    let refused = sys.refused.lock().unwrap().clone();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].uid, nobody);
    // Root still gets its answers.
    let mut client = Client::connect(&sys.path).unwrap();
    assert!(client.request(Request::Status, WAIT).unwrap().ok);
}

/// What the server sent on `stream` by now: Some(text) (empty at the end of the
/// connection), None when nothing is there.
fn sent_by_now(stream: &mut UnixStream) -> Option<String> {
    use std::io::Read;
    stream.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 512];
    let read = stream.read(&mut buf);
    stream.set_nonblocking(false).unwrap();
    read.ok()
        .map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// 32 connections that said nothing locked every other client out for ever. Now one
/// user holds at most MAX_PER_USER of them, another user is still answered, and a
/// connection without a request for `idle` (one that dribbles bytes without ending a
/// line too) is closed.
#[test]
fn idle_connections_are_closed_and_one_user_cannot_take_them_all() {
    let nobody = 65534;
    let idle = Duration::from_secs(2);
    let limits = Limits {
        idle,
        ..Limits::default()
    };
    let sys = Running::start_with("idle", &[0, me(), nobody], limits);
    std::fs::set_permissions(&sys.path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut silent: Vec<UnixStream> = (0..MAX_CONNECTIONS)
        .map(|_| UnixStream::connect(&sys.path).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let refusal = format!("uid {} has {MAX_PER_USER} connections open already", me());
    let mut refused = 0;
    for s in &mut silent {
        match sent_by_now(s) {
            Some(text) if text.contains(&refusal) => refused += 1,
            None => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(refused, MAX_CONNECTIONS - MAX_PER_USER);
    if me() == 0 {
        assert_eq!(
            as_other_user(&sys.path, nobody, b"\"ok\":true"),
            ChildSaw::Reply,
            "another user is answered"
        );
    }
    let mut busy = Client::connect(&sys.path).unwrap();
    let reply = busy.request(Request::Status, WAIT);
    let reply = reply.map_or_else(|e| e.to_string(), |r| r.to_line());
    assert!(reply.contains(&refusal), "{reply}");
    let dribbler = std::thread::spawn({
        let path = sys.path.clone();
        move || {
            let mut s = UnixStream::connect(&path).unwrap();
            let started = Instant::now();
            while started.elapsed() < 3 * idle && s.write_all(b" ").is_ok() {
                std::thread::sleep(Duration::from_millis(50));
            }
            started.elapsed()
        }
    });
    for s in &mut silent {
        s.set_read_timeout(Some(2 * idle)).unwrap();
        let mut rest = Vec::new();
        let read = std::io::Read::read_to_end(s, &mut rest);
        assert!(read.is_ok(), "closed when idle: {read:?}");
    }
    assert!(
        dribbler.join().unwrap() < 3 * idle,
        "a line never ended is idle"
    );
    let mut client = Client::connect(&sys.path).unwrap();
    assert!(client.request(Request::Status, WAIT).unwrap().ok);
}

/// A connection waiting for a reply given later is not idle, however long it waits.
#[test]
fn a_connection_waiting_for_its_reply_is_not_idle() {
    let limits = Limits {
        idle: SWITCH / 6,
        ..Limits::default()
    };
    let sys = Running::start_with("waiting", &[0, me()], limits);
    let mut client = Client::connect(&sys.path).unwrap();
    let slow = Request::Mode {
        name: "highway".into(),
    };
    let done = client.request(slow, WAIT).unwrap();
    assert!(done.ok, "{done:?}");
    assert!(client.request(Request::Status, WAIT).unwrap().ok);
}

/// A system that stops (a run whose processes all exited) with a request it has not
/// answered, from a client it accepted and from one still waiting to be accepted: each
/// client reads that the system stopped, where it got "Connection reset by peer" (the
/// waiting one) or a bare end of stream (the accepted one), as `bulkhead ctl status`
/// from the host did in the CLI's security test when the partition's own refused `ctl`
/// ended the run.
#[test]
fn a_system_that_stops_tells_the_clients_it_did_not_answer() {
    let dir = Dir::new("stops");
    let path = dir.join("vehicle.sock");
    let mut server = Server::bind(&path, &[0, me()]).unwrap();
    let mut fake = Fake {
        mode: "urban".into(),
        switching: None,
        refused: Arc::new(Mutex::new(Vec::new())),
    };
    let mut switching = Client::connect(&path).unwrap();
    let mode = Request::Mode {
        name: "highway".into(),
    };
    let switcher = std::thread::spawn(move || switching.request(mode, WAIT));
    let deadline = Instant::now() + WAIT;
    while fake.switching.is_none() && Instant::now() < deadline {
        server.poll_within(&mut fake, TICK).unwrap();
    }
    assert!(fake.switching.is_some(), "the switch was not requested");
    let mut waiting = Client::connect(&path).unwrap();
    let status = std::thread::spawn(move || waiting.request(Request::Status, WAIT));
    std::thread::sleep(Duration::from_millis(50));
    drop(server);
    for reply in [switcher.join().unwrap(), status.join().unwrap()] {
        let error = reply.expect("a reply, not a reset").error.unwrap();
        assert_eq!(error.code, ErrorCode::Refused);
        assert_eq!(error.message, STOPPED);
    }
}

/// A directory of this test process under the temporary directory, removed on drop,
/// so that a failing test leaves nothing behind either.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("bulkhead-control-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

impl std::ops::Deref for Dir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
