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
//! How many clients are served ([`Limits`]): at most 32 at once and 8 of one peer (the
//! user, by uid, of a client on this machine, found as `identd` finds it in
//! `/proc/net/tcp`; the address of another host's). When the server is full, the
//! client that has sent no command and been forwarded no frame for longest gives up its
//! place to a new one, if that is 10 s or more. So clients that connect and stay silent
//! hold no place that someone else asks for, and one user's clients leave room for the
//! others', while a listener on a quiet bus keeps its connection as long as nobody
//! needs it.
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
use std::net::IpAddr;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Longest command accepted, in bytes (`< send 1FFFFFFF 8 ff ff ff ff ff ff ff ff >`
/// is 45).
pub const MAX_COMMAND: usize = 256;
/// Clients served at once; more are refused with `< error too many clients >`.
pub const MAX_CLIENTS: usize = 32;
/// Clients of one peer (user or host) served at once.
pub const MAX_PER_PEER: usize = 8;
/// How long a client must have been idle to give up its place to a new one.
pub const IDLE_YIELD: Duration = Duration::from_secs(10);

/// What a server admits: see the module's documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Clients at once ([`MAX_CLIENTS`]).
    pub clients: usize,
    /// Clients of one peer at once ([`MAX_PER_PEER`]).
    pub per_peer: usize,
    /// A client idle this long gives up its place when the server is full
    /// ([`IDLE_YIELD`]).
    pub idle_yield: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            clients: MAX_CLIENTS,
            per_peer: MAX_PER_PEER,
            idle_yield: IDLE_YIELD,
        }
    }
}
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
    limits: Limits,
}

impl Server {
    /// Listens on `addr` for clients of virtual bus `bus` (which must be served
    /// separately, e.g. by [`crate::vbus::Bus`] in the same process).
    pub fn bind(addr: SocketAddr, bus: &str) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        Ok(Server {
            listener,
            bus: bus.to_string(),
            limits: Limits::default(),
        })
    }

    /// Admits clients within `limits` (the defaults otherwise).
    pub fn with_limits(self, limits: Limits) -> Server {
        Server { limits, ..self }
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
            thread::spawn(move || accept(&self.listener, &self.bus, self.limits, &stop))
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

/// Who a client is, for [`Limits::per_peer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    /// A client on this machine, by the uid owning its socket.
    User(u32),
    /// A client of another host (or whose owner could not be found).
    Host(IpAddr),
}

/// A client being served.
struct Client {
    /// The connection again, to close it.
    stream: TcpStream,
    thread: JoinHandle<()>,
    peer: Peer,
    /// When it last sent a command or was forwarded a frame.
    active: Arc<Activity>,
}

/// The instant of a client's last activity, shared between its session's threads and
/// the acceptor.
struct Activity {
    since: Instant,
    /// Nanoseconds from `since`.
    at: AtomicU64,
}

impl Activity {
    fn new() -> Arc<Activity> {
        Arc::new(Activity {
            since: Instant::now(),
            at: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        let now = self.since.elapsed().as_nanos() as u64;
        self.at.store(now, Ordering::Relaxed);
    }

    fn idle(&self) -> Duration {
        let at = Duration::from_nanos(self.at.load(Ordering::Relaxed));
        self.since.elapsed().saturating_sub(at)
    }
}

/// Accepts clients until `stop`, each served by its own thread; then closes their
/// connections and joins them.
fn accept(listener: &TcpListener, bus: &str, limits: Limits, stop: &AtomicBool) {
    let mut clients: Vec<Client> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                clients.retain(|c| !c.thread.is_finished());
                let peer = peer_of(&stream);
                if let Err(why) = make_room(&mut clients, peer, &limits) {
                    let _ = (&stream).write_all(format!("< error {why} >").as_bytes());
                    continue;
                }
                let Ok(handle) = stream.try_clone() else {
                    continue;
                };
                let bus = bus.to_string();
                let active = Activity::new();
                let session_active = active.clone();
                let thread = thread::spawn(move || {
                    let _ = Session::serve(stream, &bus, session_active);
                });
                clients.push(Client {
                    stream: handle,
                    thread,
                    peer,
                    active,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(5));
            }
            Err(_) => thread::sleep(Duration::from_millis(5)),
        }
    }
    for c in clients {
        let _ = c.stream.shutdown(Shutdown::Both);
        let _ = c.thread.join();
    }
}

/// Makes a place for a client of `peer`, closing the longest idle client if the server
/// is full; Err is why there is none (the text of the `< error ... >`).
fn make_room(clients: &mut Vec<Client>, peer: Peer, limits: &Limits) -> Result<(), &'static str> {
    if clients.iter().filter(|c| c.peer == peer).count() >= limits.per_peer {
        return Err("too many clients of this peer");
    }
    if clients.len() < limits.clients {
        return Ok(());
    }
    let idlest = (0..clients.len())
        .map(|i| (clients[i].active.idle(), i))
        .max()
        .filter(|&(idle, _)| idle >= limits.idle_yield);
    let Some((_, i)) = idlest else {
        return Err("too many clients");
    };
    let gone = clients.swap_remove(i);
    let _ = (&gone.stream).write_all(b"< error idle client closed for a new one >");
    let _ = gone.stream.shutdown(Shutdown::Both);
    let _ = gone.thread.join();
    Ok(())
}

/// Who the client at the other end of `stream` is: the owner of its socket when it is
/// on this machine (its socket is then in `/proc/net/tcp` or `tcp6` of this network
/// namespace, where `identd` finds it too), else its address.
fn peer_of(stream: &TcpStream) -> Peer {
    let (Ok(remote), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else {
        return Peer::Host(IpAddr::from([0, 0, 0, 0]));
    };
    let table = match remote {
        SocketAddr::V4(_) => "/proc/net/tcp",
        SocketAddr::V6(_) => "/proc/net/tcp6",
    };
    // The client's socket: its local address is our remote one and the other way round.
    let (client, server) = (proc_address(&remote), proc_address(&local));
    let uid = std::fs::read_to_string(table).ok().and_then(|text| {
        text.lines().skip(1).find_map(|line| {
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            let matches =
                fields.get(1) == Some(&client.as_str()) && fields.get(2) == Some(&server.as_str());
            matches.then(|| fields.get(7)?.parse().ok()).flatten()
        })
    });
    uid.map_or(Peer::Host(remote.ip()), Peer::User)
}

/// `addr` as `/proc/net/tcp` writes it: the address as 32-bit words in the machine's
/// byte order, in hex, then `:` and the port in hex.
fn proc_address(addr: &SocketAddr) -> String {
    let octets = match addr.ip() {
        IpAddr::V4(ip) => ip.octets().to_vec(),
        IpAddr::V6(ip) => ip.octets().to_vec(),
    };
    let mut text = String::new();
    for word in octets.chunks(4) {
        let word = u32::from_ne_bytes([word[0], word[1], word[2], word[3]]);
        let _ = write!(text, "{word:08X}");
    }
    let _ = write!(text, ":{:04X}", addr.port());
    text
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

/// A client's bytes as the server reads them, without a connection: each command the
/// reader frames is parsed, until the end or the first error that would close the
/// connection; a `send` parsed is written back as `< send ... >` and must parse to the
/// same frame. Returns the commands read. For the fuzz target (`fuzz/`), which
/// cargo-fuzz builds with `--cfg fuzzing`.
#[cfg(fuzzing)]
pub fn fuzz_commands(bytes: &[u8]) -> usize {
    let mut commands = Commands {
        input: BufReader::new(bytes),
    };
    let mut n = 0;
    while let Ok(Some(Ok(inner))) = commands.next() {
        n += 1;
        match parse_command(&inner) {
            Ok(Command::Send(frame)) => {
                let mut again = format!("send {} {}", frame.id(), frame.data().len());
                for b in frame.data() {
                    let _ = write!(again, " {b:02x}");
                }
                assert_eq!(parse_command(&again), Ok(Command::Send(frame)), "{inner}");
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    n
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
    /// Touched at each command and each batch of frames forwarded.
    active: Arc<Activity>,
}

impl Session {
    /// Greets, then serves commands until the client leaves or breaks the protocol,
    /// or the connection is shut down (by the server, or by the forwarder when the bus
    /// goes away).
    fn serve(stream: TcpStream, bus: &str, active: Arc<Activity>) -> io::Result<()> {
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
            active,
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
            self.active.touch();
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
        let (out, raw, raw_from, closed, active) = (
            self.out.clone(),
            self.raw.clone(),
            self.raw_from.clone(),
            self.closed.clone(),
            self.active.clone(),
        );
        self.forwarder = Some(thread::spawn(move || {
            let to = Forwarding {
                out: &out,
                raw: &raw,
                raw_from: &raw_from,
                closed: &closed,
                active: &active,
            };
            forward(&mut rx, &to);
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
/// What the forwarder of a session shares with it.
struct Forwarding<'a> {
    out: &'a Mutex<TcpStream>,
    /// Raw mode: frames are forwarded, else discarded.
    raw: &'a AtomicBool,
    raw_from: &'a Mutex<Instant>,
    closed: &'a AtomicBool,
    active: &'a Activity,
}

fn forward(rx: &mut Node, to: &Forwarding) {
    let mut text = String::new();
    while !to.closed.load(Ordering::Relaxed) {
        let first = match rx.recv(Some(Duration::from_millis(100))) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(_) => return,
        };
        if !to.raw.load(Ordering::SeqCst) {
            continue;
        }
        let start = *lock(to.raw_from);
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
        if lock(to.out).write_all(text.as_bytes()).is_err() {
            return;
        }
        to.active.touch();
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
