//! The socketcand server observed from TCP clients speaking the protocol by hand (the
//! python-can test in crates/cli/tests/socketcand.rs uses the real client).

use bulkhead_can::socketcand::{Limits, Server, ServerHandle, MAX_CLIENTS, MAX_PER_PEER};
use bulkhead_can::vbus::{Bus, BusHandle, Node};
use bulkhead_can::{CanId, Frame};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn serve(tag: &str) -> (BusHandle, ServerHandle) {
    serve_with(tag, Limits::default())
}

fn serve_with(tag: &str, limits: Limits) -> (BusHandle, ServerHandle) {
    let name = format!("scd-{tag}-{}", std::process::id());
    let bus = Bus::bind(&name, 1_000_000).unwrap().spawn();
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), &name)
        .unwrap()
        .with_limits(limits)
        .spawn()
        .unwrap();
    (bus, server)
}

/// A client connection with a buffer of what the server sent.
struct Client {
    stream: TcpStream,
    got: String,
}

impl Client {
    fn connect(server: &ServerHandle) -> Client {
        let mut c = Client::greeted(server);
        assert_eq!(c.items(1), ["< hi >"]);
        c
    }

    /// A connection whose greeting (`< hi >` or a refusal) is still to be read.
    fn greeted(server: &ServerHandle) -> Client {
        let stream = TcpStream::connect(server.local_addr()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        Client {
            stream,
            got: String::new(),
        }
    }

    fn say(&mut self, text: &str) {
        self.stream.write_all(text.as_bytes()).unwrap();
    }

    /// The next `n` `< ... >` items the server sent (fewer if it closed the connection
    /// or 5 s passed).
    fn items(&mut self, n: usize) -> Vec<String> {
        self.items_within(n, Duration::from_secs(5))
    }

    /// Whether nothing more comes within 300 ms.
    fn quiet(&mut self) -> bool {
        self.items_within(1, Duration::from_millis(300)).is_empty()
    }

    fn items_within(&mut self, n: usize, wait: Duration) -> Vec<String> {
        let end = Instant::now() + wait;
        let mut out = Vec::new();
        while out.len() < n && Instant::now() < end {
            if let Some(stop) = self.got.find('>') {
                out.push(self.got[..=stop].trim().to_string());
                self.got.drain(..=stop);
                continue;
            }
            let mut buf = [0u8; 4096];
            match self.stream.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => self.got.push_str(&String::from_utf8_lossy(&buf[..k])),
                Err(_) => {}
            }
        }
        out
    }

    /// Whether the server closed the connection (reads end) within 5 s.
    fn closed(&mut self) -> bool {
        let end = Instant::now() + Duration::from_secs(5);
        let mut buf = [0u8; 256];
        while Instant::now() < end {
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => {}
            }
        }
        false
    }

    fn open_raw(&mut self, bus: &str) {
        self.say(&format!("< open {bus} >"));
        assert_eq!(self.items(1), ["< ok >"]);
        self.say("< rawmode >");
        assert_eq!(self.items(1), ["< ok >"]);
    }
}

#[test]
fn a_client_sends_and_receives_frames_on_the_bus() {
    let (bus, server) = serve("raw");
    let mut a = Client::connect(&server);
    a.open_raw(bus.name());
    let mut b = Client::connect(&server);
    b.open_raw(bus.name());
    let mut node = Node::attach(bus.name()).unwrap();
    // python-can's spelling (hex length, unpadded bytes) and socketcand's.
    a.say("< send 123 4 de ad be ef >< send 1AAAAAAA 2 1 f1 >< echo >");
    assert_eq!(a.items(1), ["< echo >"]);
    let got = |n: &mut Node| n.recv(Some(Duration::from_secs(5))).unwrap().unwrap();
    let first = got(&mut node);
    assert_eq!(
        first.frame,
        Frame::new(CanId::Standard(0x123), &[0xDE, 0xAD, 0xBE, 0xEF]).unwrap()
    );
    assert_eq!(
        got(&mut node).frame,
        Frame::new(CanId::Extended(0x1AAA_AAAA), &[0x01, 0xF1]).unwrap()
    );
    let secs = first.t_ns / 1_000_000_000;
    let micros = first.t_ns % 1_000_000_000 / 1_000;
    let b_got = b.items(2);
    assert_eq!(
        b_got[0],
        format!("< frame 123 {secs}.{micros:06} DEADBEEF >")
    );
    assert!(b_got[1].starts_with("< frame 1AAAAAAA ") && b_got[1].ends_with(" 01F1 >"));
    // A node's frames reach both clients, in the bus's order; a client does not get
    // its own frames back.
    for i in 0..20u8 {
        node.send(&Frame::new(CanId::Standard(0x7FF), &[i]).unwrap())
            .unwrap();
    }
    for client in [&mut a, &mut b] {
        let items = client.items(20);
        let bytes: Vec<String> = items
            .iter()
            .map(|l| l.rsplit(' ').nth(1).unwrap().to_string())
            .collect();
        let want: Vec<String> = (0..20).map(|i| format!("{i:02X}")).collect();
        assert_eq!(bytes, want);
    }
    assert!(a.quiet(), "nothing more: a's own frames are not echoed");
    // Back to BCM mode: no more frames.
    a.say("< bcmmode >");
    assert_eq!(a.items(1), ["< ok >"]);
    node.send(&Frame::new(CanId::Standard(1), &[]).unwrap())
        .unwrap();
    assert_eq!(b.items(1).len(), 1);
    assert!(a.quiet());
}

#[test]
fn unsupported_commands_get_an_error_and_the_connection_stays() {
    let (bus, server) = serve("unsupported");
    let mut c = Client::connect(&server);
    c.say(&format!("< open {} >", bus.name()));
    assert_eq!(c.items(1), ["< ok >"]);
    c.say("< add 1 0 123 8 11 22 33 44 55 66 77 88 >< subscribe 0 0 123 >< echo >");
    assert_eq!(
        c.items(3),
        [
            "< error add is not supported by bulkhead >",
            "< error subscribe is not supported by bulkhead >",
            "< echo >"
        ]
    );
}

#[test]
fn bad_clients_get_the_protocols_error_and_are_disconnected_without_disturbing_the_bus() {
    let (bus, server) = serve("bad");
    let mut watcher = Client::connect(&server);
    watcher.open_raw(bus.name());
    let sender = Node::attach(bus.name()).unwrap();
    let send = |i: u8| {
        sender
            .send(&Frame::new(CanId::Standard(0x100), &[i]).unwrap())
            .unwrap()
    };
    let open = format!("< open {} >", bus.name());
    for (setup, bad, error) in [
        (
            "",
            "< open nosuchbus >".to_string(),
            "< error could not open bus >",
        ),
        (
            "",
            "< send 123 0 >".into(),
            "< error open a bus first: < open NAME >",
        ),
        (open.as_str(), "hello".into(), "< error data outside < > >"),
        (
            open.as_str(),
            "< frobnicate >".into(),
            "< error unknown command >",
        ),
        (
            open.as_str(),
            "< send 123 9 1 2 3 4 5 6 7 8 9 >".into(),
            "< error malformed send command: the length is not 0..8 or not the number of bytes >",
        ),
        (
            open.as_str(),
            format!("<{}>", "x".repeat(1000)),
            "< error command too long >",
        ),
        (
            open.as_str(),
            "< \u{1b}[2J >".into(),
            "< error a command is printable ASCII >",
        ),
    ] {
        let mut c = Client::connect(&server);
        if !setup.is_empty() {
            c.say(setup);
            assert_eq!(c.items(1), ["< ok >"], "{bad}");
        }
        send(1);
        c.say(&bad);
        let reply = c.items(1);
        assert!(
            reply.len() == 1 && error.starts_with(reply[0].trim_end_matches('>').trim()),
            "{bad}: {reply:?}"
        );
        assert!(c.closed(), "{bad}: disconnected");
        send(2);
        let seen = watcher.items(2);
        assert_eq!(seen.len(), 2, "{bad}: the bus goes on: {seen:?}");
        assert!(
            seen[0].ends_with(" 01 >") && seen[1].ends_with(" 02 >"),
            "{seen:?}"
        );
    }
    assert_eq!(
        bus.stats()
            .malformed
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

/// Whether a child that becomes `uid` connects to `server` and is greeted `< hi >`.
/// Between fork and exit the child makes only async-signal-safe calls on memory
/// prepared before the fork.
fn greeted_as(server: &ServerHandle, uid: u32) -> bool {
    let std::net::SocketAddr::V4(addr) = server.local_addr() else {
        panic!("the test server listens on IPv4");
    };
    // SAFETY: a zeroed sockaddr_in is a valid address to fill in.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = addr.port().to_be();
    sa.sin_addr.s_addr = u32::from_ne_bytes(addr.ip().octets());
    let mut got = [0u8; 64];
    // SAFETY: the child calls only setgid, setuid, socket, connect, read and _exit on
    // memory allocated before the fork; the parent waits for it below.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: see above; every path ends in _exit.
        unsafe {
            if libc::setgid(uid) != 0 || libc::setuid(uid) != 0 {
                libc::_exit(10);
            }
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            if libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len) != 0 {
                libc::_exit(11);
            }
            let n = libc::read(fd, got.as_mut_ptr().cast(), got.len());
            libc::_exit(if n >= 6 && got[..6] == *b"< hi >" {
                0
            } else {
                12
            });
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// 32 silent clients locked every other client out for ever. One user's clients now
/// take at most MAX_PER_PEER places: another user is still greeted.
#[test]
fn one_users_silent_clients_leave_room_for_other_users() {
    let (_bus, server) = serve("peers");
    let mut clients: Vec<Client> = (0..MAX_CLIENTS).map(|_| Client::greeted(&server)).collect();
    let mut greeted = 0;
    let mut refused = 0;
    for c in &mut clients {
        match c.items(1).first().map(String::as_str) {
            Some("< hi >") => greeted += 1,
            Some("< error too many clients of this peer >") => refused += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        (greeted, refused),
        (MAX_PER_PEER, MAX_CLIENTS - MAX_PER_PEER)
    );
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 {
        assert!(greeted_as(&server, 65534), "another user is served");
    }
}

/// When the server is full, the client idle for longest (at least `idle_yield`) gives
/// up its place to a new one; a client that keeps talking keeps its place.
#[test]
fn an_idle_client_gives_up_its_place_when_the_server_is_full() {
    let limits = Limits {
        clients: 2,
        idle_yield: Duration::from_millis(300),
        ..Limits::default()
    };
    let (_bus, server) = serve_with("yield", limits);
    let mut silent = Client::connect(&server);
    let mut talking = Client::connect(&server);
    talking.say(&format!("< open scd-yield-{} >", std::process::id()));
    assert_eq!(talking.items(1), ["< ok >"]);
    let mut too_soon = Client::greeted(&server);
    assert_eq!(too_soon.items(1), ["< error too many clients >"]);
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(600) {
        talking.say("< echo >");
        assert_eq!(talking.items(1), ["< echo >"]);
        std::thread::sleep(Duration::from_millis(50));
    }
    let _new = Client::connect(&server);
    assert_eq!(
        silent.items(1),
        ["< error idle client closed for a new one >"]
    );
    assert!(silent.closed());
    talking.say("< echo >");
    assert_eq!(
        talking.items(1),
        ["< echo >"],
        "the talking client is served"
    );
}
