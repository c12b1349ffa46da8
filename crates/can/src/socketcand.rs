//! The socketcand protocol on a virtual bus: `bulkhead can bus NAME --socketcand
//! ADDR:PORT` lets socketcand clients (python-can's `socketcand` interface, Kayak)
//! send and receive frames on the bus over TCP.
//!
//! The protocol is socketcand's (linux-can/socketcand, `doc/protocol.md` and
//! `src/state_*.c`): ASCII commands `< ... >`. The server greets with `< hi >`; `< open
//! NAME >` with the bus's name answers `< ok >` and enters BCM mode; `< rawmode >`
//! answers `< ok >`, after which every frame of the bus arrives as `< frame ID
//! SECS.USECS DATA >` (ID 3 hex digits, or 8 for a 29-bit id; DATA uppercase hex without
//! spaces; the time the bus's, of the end of the frame); `< bcmmode >` stops that. In
//! both modes `< send ID LEN B0 B1 ... >` sends a frame (an ID of 8 digits is a 29-bit
//! id; bytes in hex) and `< echo >` is answered with itself. Each client is a node of
//! the bus, so its frames take the bus's arbitration and timing, and like a SocketCAN
//! raw socket it does not receive its own frames. Remote frames are not forwarded, as
//! socketcand does not.
//!
//! Not served: BCM jobs and filters (`add`, `update`, `delete`, `filter`, `muxfilter`,
//! `subscribe`, `unsubscribe`), the control and ISO-TP modes and bit-timing settings:
//! they get `< error ... is not supported >` and the connection stays. Anything else
//! that is not a command of the protocol (bytes outside `< >`, a command longer than
//! [`MAX_COMMAND`], a malformed `send`, a bus that is not served) gets `< error ... >`
//! and the connection is closed; the bus and its other nodes do not notice.
//!
//! One wrinkle of the client: python-can reads the `< ok >` of `< rawmode >` with a
//! single `recv` and compares it whole, so a frame that arrives in the same read
//! breaks its handshake. The first frame after `< rawmode >` is therefore sent
//! [`RAW_START_DELAY`] after the `< ok >`; frames of the bus in between wait in the
//! node's receive queue, none is lost.

use crate::frame::{CanId, Frame, CLASSIC_MAX_LEN, MAX_EXTENDED_ID, MAX_STANDARD_ID};
use crate::vbus::{Node, Received};
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Longest command accepted, in bytes (`< send 1FFFFFFF 8 ff ff ff ff ff ff ff ff >`
/// is 45).
pub const MAX_COMMAND: usize = 256;
/// Clients served at once; more are refused with `< error too many clients >`.
pub const MAX_CLIENTS: usize = 32;
/// Pause between the `< ok >` of `< rawmode >` and the first frame sent.
pub const RAW_START_DELAY: Duration = Duration::from_millis(100);
/// Frames written to a client with one system call, at most.
const BATCH: usize = 64;
/// A client whose connection takes nothing for this long is disconnected (its frames
/// would otherwise pile up in the bus's receive queue for its node).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// A socketcand listener for one virtual bus.
pub struct Server {
    listener: TcpListener,
    bus: String,
}

impl Server {
    /// Listens on `addr` for clients of virtual bus `bus` (which must be served
    /// separately, e.g. by [`crate::vbus::Bus`] in the same process).
    pub fn bind(addr: SocketAddr, bus: &str) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        Ok(Server {
            listener,
            bus: bus.to_string(),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves clients on background threads until the handle is dropped.
    pub fn spawn(self) -> io::Result<ServerHandle> {
        self.listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let addr = self.listener.local_addr()?;
        let acceptor = {
            let stop = stop.clone();
            thread::spawn(move || accept(&self.listener, &self.bus, &stop))
        };
        Ok(ServerHandle {
            stop,
            addr,
            acceptor: Some(acceptor),
        })
    }
}

/// A running server; dropping it stops accepting clients and closes the connections.
pub struct ServerHandle {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    acceptor: Option<JoinHandle<()>>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.acceptor.take() {
            let _ = handle.join();
        }
    }
}

/// Accepts clients until `stop`, each served by its own thread; then closes their
/// connections and joins them.
fn accept(listener: &TcpListener, bus: &str, stop: &AtomicBool) {
    let mut clients: Vec<(TcpStream, JoinHandle<()>)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                clients.retain(|(_, t)| !t.is_finished());
                if clients.len() >= MAX_CLIENTS {
                    let _ = (&stream).write_all(b"< error too many clients >");
                    continue;
                }
                let Ok(handle) = stream.try_clone() else {
                    continue;
                };
                let bus = bus.to_string();
                let thread = thread::spawn(move || {
                    let _ = Session::serve(stream, &bus);
                });
                clients.push((handle, thread));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(5));
            }
            Err(_) => thread::sleep(Duration::from_millis(5)),
        }
    }
    for (stream, thread) in clients {
        let _ = stream.shutdown(Shutdown::Both);
        let _ = thread.join();
    }
}

/// A command of the protocol, as far as the server tells them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Command {
    Open(String),
    RawMode,
    BcmMode,
    Echo,
    Send(Frame),
    /// A command of the protocol this server does not serve.
    Unsupported(String),
}

/// Why a client is disconnected: the text of its `< error ... >`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fatal(String);

/// Parses the text between `<` and `>`.
fn parse_command(inner: &str) -> Result<Command, Fatal> {
    let words: Vec<&str> = inner.split_ascii_whitespace().collect();
    match words.as_slice() {
        ["open", name] => Ok(Command::Open(name.to_string())),
        ["rawmode"] => Ok(Command::RawMode),
        ["bcmmode"] => Ok(Command::BcmMode),
        ["echo"] => Ok(Command::Echo),
        ["send", rest @ ..] => parse_send(rest).map(Command::Send),
        [word, ..]
            if [
                "add",
                "update",
                "delete",
                "filter",
                "muxfilter",
                "subscribe",
                "unsubscribe",
                "controlmode",
                "isotpmode",
                "statistics",
            ]
            .contains(word) =>
        {
            Ok(Command::Unsupported(word.to_string()))
        }
        [_, "B" | "C", ..] => Ok(Command::Unsupported("bus configuration".into())),
        _ => Err(Fatal("unknown command".into())),
    }
}

/// `ID LEN [B0 ...]`: a hex id (8 digits: 29-bit), a length 0..8 and that many hex bytes.
fn parse_send(words: &[&str]) -> Result<Frame, Fatal> {
    let bad = |why: &str| Fatal(format!("malformed send command: {why}"));
    let (id_text, len_text, bytes) = match words {
        [id, len, bytes @ ..] => (*id, *len, bytes),
        _ => return Err(bad("want < send ID LEN BYTES... >")),
    };
    let value = u32::from_str_radix(id_text, 16).map_err(|_| bad("the id is not hex"))?;
    let id = match id_text.len() {
        8 if value <= MAX_EXTENDED_ID => CanId::Extended(value),
        1..=3 if value <= MAX_STANDARD_ID => CanId::Standard(value as u16),
        _ => {
            return Err(bad(
                "the id is not 1-3 hex digits up to 7FF or 8 up to 1FFFFFFF",
            ))
        }
    };
    let len: usize = len_text
        .parse()
        .map_err(|_| bad("the length is not a number"))?;
    if len > CLASSIC_MAX_LEN || bytes.len() != len {
        return Err(bad("the length is not 0..8 or not the number of bytes"));
    }
    let data = bytes
        .iter()
        .map(|b| match b.len() {
            1 | 2 => u8::from_str_radix(b, 16).map_err(|_| bad("a byte is not hex")),
            _ => Err(bad("a byte is not 1 or 2 hex digits")),
        })
        .collect::<Result<Vec<u8>, Fatal>>()?;
    Frame::new(id, &data).map_err(|e| bad(&e.to_string()))
}

/// `< frame ID SECS.USECS DATA >` of a received frame (socketcand's `state_raw.c`).
fn frame_line(received: &Received, out: &mut String) {
    let t = received.t_ns;
    let (secs, micros) = (t / 1_000_000_000, t % 1_000_000_000 / 1_000);
    let _ = write!(out, "< frame {} {secs}.{micros:06} ", received.frame.id());
    for b in received.frame.data() {
        let _ = write!(out, "{b:02X}");
    }
    out.push_str(" >");
}

/// Reads `< ... >` commands from a client.
struct Commands<R> {
    input: BufReader<R>,
}

impl<R: Read> Commands<R> {
    /// The next command's inner text; Ok(None) at the end of the connection.
    fn next(&mut self) -> io::Result<Option<Result<String, Fatal>>> {
        loop {
            let available = self.input.fill_buf()?;
            let Some(&first) = available.first() else {
                return Ok(None);
            };
            match first {
                b'<' => break,
                b if b.is_ascii_whitespace() => self.input.consume(1),
                _ => return Ok(Some(Err(Fatal("data outside < >".into())))),
            }
        }
        let mut raw = Vec::new();
        let limit = (MAX_COMMAND + 1) as u64;
        (&mut self.input).take(limit).read_until(b'>', &mut raw)?;
        if raw.last() != Some(&b'>') {
            return Ok(Some(Err(Fatal(match raw.len() as u64 {
                n if n >= limit => "command too long".into(),
                _ => "unterminated command".into(),
            }))));
        }
        let inner = &raw[1..raw.len() - 1];
        if !inner.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            return Ok(Some(Err(Fatal("a command is printable ASCII".into()))));
        }
        Ok(Some(Ok(String::from_utf8_lossy(inner).into_owned())))
    }
}

/// One client's connection.
struct Session {
    out: Arc<Mutex<TcpStream>>,
    /// The connection again, to shut it down without waiting for a writer.
    control: TcpStream,
    bus: String,
    node: Option<Node>,
    /// Raw mode: frames of the bus are forwarded.
    raw: Arc<AtomicBool>,
    /// Raw mode's first frame not before this (see [`RAW_START_DELAY`]).
    raw_from: Arc<Mutex<Instant>>,
    closed: Arc<AtomicBool>,
    forwarder: Option<JoinHandle<()>>,
}

impl Session {
    /// Greets, then serves commands until the client leaves or breaks the protocol,
    /// or the connection is shut down (by the server, or by the forwarder when the bus
    /// goes away).
    fn serve(stream: TcpStream, bus: &str) -> io::Result<()> {
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        let mut session = Session {
            out: Arc::new(Mutex::new(stream.try_clone()?)),
            control: stream.try_clone()?,
            bus: bus.to_string(),
            node: None,
            raw: Arc::new(AtomicBool::new(false)),
            raw_from: Arc::new(Mutex::new(Instant::now())),
            closed: Arc::new(AtomicBool::new(false)),
            forwarder: None,
        };
        session.reply("< hi >")?;
        let mut commands = Commands {
            input: BufReader::new(stream),
        };
        let result = session.run(&mut commands);
        session.close();
        result
    }

    fn run(&mut self, commands: &mut Commands<TcpStream>) -> io::Result<()> {
        while !self.closed.load(Ordering::Relaxed) {
            let command = match commands.next()? {
                None => return Ok(()),
                Some(Ok(inner)) => parse_command(&inner),
                Some(Err(fatal)) => Err(fatal),
            };
            if let Err(Fatal(why)) = command.and_then(|c| self.execute(c)) {
                return self.reply(&format!("< error {why} >"));
            }
        }
        Ok(())
    }

    /// Carries out one command; Err ends the connection with that error.
    fn execute(&mut self, command: Command) -> Result<(), Fatal> {
        let node = match (&command, &self.node) {
            (Command::Open(name), None) => return self.open(name),
            (_, None) => return Err(Fatal("open a bus first: < open NAME >".into())),
            (Command::Open(_), Some(_)) => return Err(Fatal("a bus is open already".into())),
            (_, Some(node)) => node,
        };
        let sent = match command {
            Command::Send(frame) => node.send(&frame),
            Command::Echo => self.reply("< echo >"),
            Command::RawMode => {
                let reply = self.reply("< ok >");
                *lock(&self.raw_from) = Instant::now() + RAW_START_DELAY;
                self.raw.store(true, Ordering::SeqCst);
                reply
            }
            Command::BcmMode => {
                self.raw.store(false, Ordering::SeqCst);
                self.reply("< ok >")
            }
            Command::Unsupported(what) => {
                self.reply(&format!("< error {what} is not supported by bulkhead >"))
            }
            Command::Open(_) => unreachable!("handled above"),
        };
        sent.map_err(|e| Fatal(format!("connection or bus failed: {e}")))
    }

    /// `< open NAME >`: attaches a node to the bus if NAME is the bus served here.
    fn open(&mut self, name: &str) -> Result<(), Fatal> {
        let fail = |why: &str| Fatal(why.to_string());
        if name != self.bus {
            return Err(fail("could not open bus"));
        }
        let node = Node::attach(&self.bus).map_err(|_| fail("could not open bus"))?;
        let mut rx = node.try_clone().map_err(|_| fail("could not open bus"))?;
        let control = self
            .control
            .try_clone()
            .map_err(|_| fail("connection failed"))?;
        let (out, raw, raw_from, closed) = (
            self.out.clone(),
            self.raw.clone(),
            self.raw_from.clone(),
            self.closed.clone(),
        );
        self.forwarder = Some(thread::spawn(move || {
            forward(&mut rx, &out, &raw, &raw_from, &closed);
            closed.store(true, Ordering::SeqCst);
            let _ = control.shutdown(Shutdown::Both);
        }));
        self.node = Some(node);
        self.reply("< ok >").map_err(|_| fail("connection failed"))
    }

    fn reply(&self, text: &str) -> io::Result<()> {
        lock(&self.out).write_all(text.as_bytes())
    }

    /// Ends the connection and the forwarder (dropping the node detaches it).
    fn close(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.control.shutdown(Shutdown::Both);
        if let Some(forwarder) = self.forwarder.take() {
            let _ = forwarder.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Forwards the bus's frames to the client while in raw mode (discarding them
/// otherwise), in batches, until the connection closes or the bus goes away.
fn forward(
    rx: &mut Node,
    out: &Mutex<TcpStream>,
    raw: &AtomicBool,
    raw_from: &Mutex<Instant>,
    closed: &AtomicBool,
) {
    let mut text = String::new();
    while !closed.load(Ordering::Relaxed) {
        let first = match rx.recv(Some(Duration::from_millis(100))) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(_) => return,
        };
        if !raw.load(Ordering::SeqCst) {
            continue;
        }
        let start = *lock(raw_from);
        let now = Instant::now();
        if start > now {
            thread::sleep(start - now);
        }
        text.clear();
        let mut next = Some(first);
        let mut n = 0;
        while let Some(received) = next {
            if !received.frame.is_remote() {
                frame_line(&received, &mut text);
            }
            n += 1;
            next = match n < BATCH {
                true => rx.try_recv().ok().flatten(),
                false => None,
            };
        }
        if lock(out).write_all(text.as_bytes()).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_as_socketcands() {
        let frame = |text| crate::candump::parse_frame(text).unwrap();
        assert_eq!(
            parse_command("open vcan0"),
            Ok(Command::Open("vcan0".into()))
        );
        assert_eq!(parse_command(" rawmode "), Ok(Command::RawMode));
        // python-can's spelling: unpadded lowercase bytes, the length in hex (0..8).
        assert_eq!(
            parse_command("send 123 4 de ad be ef"),
            Ok(Command::Send(frame("123#DEADBEEF")))
        );
        assert_eq!(
            parse_command("send 1AAAAAAA 2 1 f1"),
            Ok(Command::Send(frame("1AAAAAAA#01F1")))
        );
        assert_eq!(parse_command("send 7 0"), Ok(Command::Send(frame("007#"))));
        assert_eq!(
            parse_command("add 1 0 123 8 11 22 33 44 55 66 77 88"),
            Ok(Command::Unsupported("add".into()))
        );
        for bad in [
            "send 800 0",
            "send 1234 0",
            "send 20000000 0",
            "send 123 9 0 0 0 0 0 0 0 0 0",
            "send 123 2 11",
            "send 123 1 111",
            "send 123 1 xy",
            "send xyz 0",
            "send",
            "frobnicate",
            "",
        ] {
            assert!(parse_command(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn frames_are_written_as_socketcand_writes_them() {
        let mut text = String::new();
        let at = |t_ns, f| Received {
            t_ns,
            frame: crate::candump::parse_frame(f).unwrap(),
        };
        frame_line(&at(23_424_242_000, "123#1A220344"), &mut text);
        frame_line(&at(1_000_000_000, "1ABCDEF0#"), &mut text);
        assert_eq!(
            text,
            "< frame 123 23.424242 1A220344 >< frame 1ABCDEF0 1.000000  >"
        );
    }

    #[test]
    fn commands_are_framed_and_bounded() {
        let read = |input: &[u8]| {
            let mut c = Commands {
                input: BufReader::new(input),
            };
            let mut out = Vec::new();
            while let Some(item) = c.next().unwrap() {
                let stop = item.is_err();
                out.push(item);
                if stop {
                    break;
                }
            }
            out
        };
        assert_eq!(
            read(b"< hi >\n  < echo ><rawmode>"),
            [
                Ok(" hi ".to_string()),
                Ok(" echo ".into()),
                Ok("rawmode".into())
            ]
        );
        assert_eq!(read(b"garbage"), [Err(Fatal("data outside < >".into()))]);
        let long = [b"<".as_slice(), &[b'a'; 400], b">"].concat();
        assert_eq!(read(&long), [Err(Fatal("command too long".into()))]);
        assert_eq!(read(b"< echo"), [Err(Fatal("unterminated command".into()))]);
        assert_eq!(
            read(b"< \x1b[2J >"),
            [Err(Fatal("a command is printable ASCII".into()))]
        );
    }
}
