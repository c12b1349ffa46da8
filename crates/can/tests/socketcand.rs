//! The socketcand server observed from TCP clients speaking the protocol by hand (the
//! python-can test in crates/cli/tests/socketcand.rs uses the real client).

use bulkhead_can::socketcand::{Server, ServerHandle};
use bulkhead_can::vbus::{Bus, BusHandle, Node};
use bulkhead_can::{CanId, Frame};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn serve(tag: &str) -> (BusHandle, ServerHandle) {
    let name = format!("scd-{tag}-{}", std::process::id());
    let bus = Bus::bind(&name, 1_000_000).unwrap().spawn();
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), &name)
        .unwrap()
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
        let stream = TcpStream::connect(server.local_addr()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut c = Client {
            stream,
            got: String::new(),
        };
        assert_eq!(c.items(1), ["< hi >"]);
        c
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
