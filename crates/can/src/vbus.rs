//! A virtual CAN bus for machines without CAN: one process serves the bus, nodes
//! attach to it by name.
//!
//! The bus listens on the abstract Unix socket `@bulkhead-can-bus/NAME` (abstract:
//! nothing to clean up in the file system; it vanishes with the process). Once it has
//! registered a new node it sends it one byte, [`ATTACHED`]; [`Node::attach`] returns
//! after that byte, so a node receives every frame whose transmission ends after
//! `attach` returned. A node sends frames as Linux `struct can_frame` records (16 bytes) over a stream
//! connection and receives every frame the *other* nodes sent as 24-byte records:
//! the timestamp (u64 nanoseconds of the Unix epoch, little-endian) then the
//! `struct can_frame`.
//!
//! The bus behaves like a classic CAN bus: when it is idle, the pending frame with
//! the lowest arbitration key wins ([`timing::arbitration_key`]); it occupies the bus
//! for its worst-case transmission time at the bit rate ([`timing::frame_bits`],
//! Davis et al. 2007, Eq. 1) and is delivered, timestamped with the end of its
//! transmission, to every other node. Frames that arrive while the bus is busy wait
//! for the next arbitration. Each node may have [`MAX_PENDING_PER_NODE`] frames
//! waiting (like a controller's transmit queue); beyond that its sends block. Each
//! node's receive backlog holds [`RX_BACKLOG`] frames; a node that reads slower than
//! that loses frames, which are counted ([`BusStats::rx_overflows`]).

use crate::frame::{Frame, CAN_FRAME_SIZE};
use crate::timing;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Bytes of a record from a node to the bus: one `struct can_frame`.
pub const TO_BUS_RECORD: usize = CAN_FRAME_SIZE;
/// Bytes of a record from the bus to a node: timestamp then `struct can_frame`.
pub const FROM_BUS_RECORD: usize = 8 + CAN_FRAME_SIZE;
/// Frames one node may have waiting for arbitration before its sends block.
pub const MAX_PENDING_PER_NODE: usize = 64;
/// Frames the bus buffers for one receiving node before dropping.
pub const RX_BACKLOG: usize = 8192;
/// The byte the bus sends a node once the node receives the bus's frames.
pub const ATTACHED: u8 = 0xA5;
/// How long [`Node::attach`] waits for [`ATTACHED`].
const ATTACH_TIMEOUT: Duration = Duration::from_secs(10);
/// Highest classic CAN bit rate.
pub const MAX_BITRATE: u64 = 1_000_000;

/// The abstract socket name of bus `name` (without the leading NUL).
pub fn socket_name(name: &str) -> String {
    format!("bulkhead-can-bus/{name}")
}

/// Checks a bus name: 1..=64 characters of `[A-Za-z0-9_.-]`.
pub fn check_name(name: &str) -> Result<(), BusError> {
    if bulkhead_gateway_protocol::is_bus_name(name) {
        Ok(())
    } else {
        Err(BusError::BadName(name.to_string()))
    }
}

/// Errors of binding, attaching to and using a virtual bus.
#[derive(Debug)]
pub enum BusError {
    BadName(String),
    BadBitrate(u64),
    /// Another process already serves this bus.
    InUse(String),
    /// Nobody serves this bus.
    NoBus(String),
    Io(io::Error),
}

impl fmt::Display for BusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BusError::BadName(n) => write!(
                f,
                "bad bus name {n:?}: use 1 to 64 characters of A-Z a-z 0-9 _ . -"
            ),
            BusError::BadBitrate(b) => {
                write!(
                    f,
                    "bad bit rate {b}: classic CAN runs at 1..={MAX_BITRATE} bit/s"
                )
            }
            BusError::InUse(n) => write!(f, "virtual CAN bus {n:?} is already being served"),
            BusError::NoBus(n) => write!(
                f,
                "no virtual CAN bus {n:?} (start one with `bulkhead can bus {n}`)"
            ),
            BusError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BusError {}

impl From<io::Error> for BusError {
    fn from(e: io::Error) -> BusError {
        BusError::Io(e)
    }
}

/// Counters of a running bus.
#[derive(Debug, Default)]
pub struct BusStats {
    /// Frames that won arbitration and were transmitted.
    pub transmitted: AtomicU64,
    /// Bits on the wire (worst case with stuffing) of the transmitted frames.
    pub bits: AtomicU64,
    /// Frame copies dropped because a receiving node's backlog was full.
    pub rx_overflows: AtomicU64,
    /// Records from nodes that were not valid classic CAN frames.
    pub malformed: AtomicU64,
}

/// A frame waiting for arbitration.
#[derive(Clone, Copy)]
struct Contender {
    key: u32,
    seq: u64,
    node: u64,
    arrival: Instant,
    bytes: [u8; CAN_FRAME_SIZE],
}

struct Pending {
    entries: Vec<Contender>,
    per_node: HashMap<u64, usize>,
    seq: u64,
}

struct Shared {
    name: String,
    bitrate: u64,
    stop: AtomicBool,
    pending: Mutex<Pending>,
    /// Signalled when a frame is queued (the arbiter waits on it).
    queued: Condvar,
    /// Signalled when a frame leaves the queue (blocked node readers wait on it).
    space: Condvar,
    nodes: Mutex<Vec<NodeLink>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    stats: BusStats,
    epoch: Instant,
    epoch_unix_ns: u64,
}

struct NodeLink {
    id: u64,
    stream: UnixStream,
    out: SyncSender<[u8; FROM_BUS_RECORD]>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking bus thread leaves consistent data (every update is one statement).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A bound, not yet running virtual bus.
pub struct Bus {
    listener: UnixListener,
    shared: Arc<Shared>,
}

impl Bus {
    /// Claims the name `name` for a bus at `bitrate` bit/s.
    pub fn bind(name: &str, bitrate: u64) -> Result<Bus, BusError> {
        check_name(name)?;
        if bitrate == 0 || bitrate > MAX_BITRATE {
            return Err(BusError::BadBitrate(bitrate));
        }
        let addr = SocketAddr::from_abstract_name(socket_name(name))?;
        let listener = UnixListener::bind_addr(&addr).map_err(|e| match e.kind() {
            io::ErrorKind::AddrInUse => BusError::InUse(name.to_string()),
            _ => BusError::Io(e),
        })?;
        listener.set_nonblocking(true)?;
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let shared = Arc::new(Shared {
            name: name.to_string(),
            bitrate,
            stop: AtomicBool::new(false),
            pending: Mutex::new(Pending {
                entries: Vec::new(),
                per_node: HashMap::new(),
                seq: 0,
            }),
            queued: Condvar::new(),
            space: Condvar::new(),
            nodes: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
            stats: BusStats::default(),
            epoch: Instant::now(),
            epoch_unix_ns: unix_ns,
        });
        Ok(Bus { listener, shared })
    }

    /// Serves the bus on background threads until the handle is dropped.
    pub fn spawn(self) -> BusHandle {
        let shared = self.shared.clone();
        let arbiter = {
            let shared = shared.clone();
            thread::spawn(move || arbitrate(&shared))
        };
        let acceptor = {
            let shared = shared.clone();
            thread::spawn(move || accept_nodes(&self.listener, &shared))
        };
        BusHandle {
            shared,
            main: vec![arbiter, acceptor],
        }
    }

    /// Serves the bus for ever (until the process is ended).
    pub fn run(self) -> ! {
        let _handle = self.spawn();
        loop {
            thread::park();
        }
    }
}

/// A running bus; dropping it stops the bus, disconnects its nodes and joins its threads.
pub struct BusHandle {
    shared: Arc<Shared>,
    main: Vec<JoinHandle<()>>,
}

impl BusHandle {
    pub fn stats(&self) -> &BusStats {
        &self.shared.stats
    }
    pub fn name(&self) -> &str {
        &self.shared.name
    }
}

impl Drop for BusHandle {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.queued.notify_all();
        self.shared.space.notify_all();
        for handle in self.main.drain(..) {
            let _ = handle.join();
        }
        for node in lock(&self.shared.nodes).drain(..) {
            let _ = node.stream.shutdown(std::net::Shutdown::Both);
        }
        let threads: Vec<_> = lock(&self.shared.threads).drain(..).collect();
        for handle in threads {
            let _ = handle.join();
        }
    }
}

fn accept_nodes(listener: &UnixListener, shared: &Arc<Shared>) {
    let mut next_id = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                // A node that failed to attach took its id with it.
                let _ = add_node(shared, stream, next_id);
                next_id += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(5))
            }
            Err(_) => thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Registers a connected node and starts its reader and writer threads.
fn add_node(shared: &Arc<Shared>, stream: UnixStream, id: u64) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    let (out, rx) = mpsc::sync_channel::<[u8; FROM_BUS_RECORD]>(RX_BACKLOG);
    let mut writer = stream.try_clone()?;
    let reader = stream.try_clone()?;
    lock(&shared.nodes).push(NodeLink { id, stream, out });
    // Registered first, then told (before the writer thread starts, so this is the
    // first byte the node reads): no frame delivered after `attach` returns is missed.
    if let Err(e) = writer.write_all(&[ATTACHED]) {
        lock(&shared.nodes).retain(|n| n.id != id);
        return Err(e);
    }
    lock(&shared.threads).retain(|t| !t.is_finished());
    let w = thread::spawn(move || {
        for record in rx {
            if writer.write_all(&record).is_err() {
                break;
            }
        }
    });
    let shared2 = shared.clone();
    let r = thread::spawn(move || read_node(&shared2, reader, id));
    lock(&shared.threads).extend([w, r]);
    Ok(())
}

/// Reads a node's frames into the arbitration queue until it disconnects.
fn read_node(shared: &Shared, mut stream: UnixStream, id: u64) {
    let mut buf = [0u8; TO_BUS_RECORD];
    while stream.read_exact(&mut buf).is_ok() {
        let Ok(frame) = Frame::from_can_frame_bytes(&buf) else {
            shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let mut pending = lock(&shared.pending);
        while pending.per_node.get(&id).copied().unwrap_or(0) >= MAX_PENDING_PER_NODE {
            if shared.stop.load(Ordering::Relaxed) {
                return;
            }
            pending = shared
                .space
                .wait_timeout(pending, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let seq = pending.seq;
        pending.seq += 1;
        *pending.per_node.entry(id).or_default() += 1;
        pending.entries.push(Contender {
            key: timing::arbitration_key(&frame),
            seq,
            node: id,
            arrival: Instant::now(),
            bytes: buf,
        });
        drop(pending);
        shared.queued.notify_one();
    }
    lock(&shared.nodes).retain(|n| n.id != id);
}

/// Sleeps until `deadline`: coarse sleep, then a short spin for precision.
fn sleep_until(deadline: Instant) {
    const SPIN: Duration = Duration::from_micros(60);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN {
            thread::sleep(left - SPIN);
        } else {
            thread::yield_now();
        }
    }
}

/// The arbitration and transmission loop.
///
/// A frame that arrives at an idle bus starts transmitting at its arrival; frames
/// that arrive while the bus is busy compete when it frees. Times are those of the
/// ideal bus, so a late-waking arbiter delays delivery but not timestamps.
fn arbitrate(shared: &Shared) {
    let mut free_at = shared.epoch;
    loop {
        let Some(first_arrival) = wait_for_frame(shared) else {
            return;
        };
        let start = free_at.max(first_arrival);
        sleep_until(start);
        let Some(winner) = take_winner(shared, start) else {
            continue;
        };
        let Ok(frame) = Frame::from_can_frame_bytes(&winner.bytes) else {
            continue;
        };
        let bits = timing::bits_of(&frame);
        let end = start + Duration::from_nanos(timing::bits_to_ns(bits, shared.bitrate));
        sleep_until(end);
        free_at = end;
        shared.stats.transmitted.fetch_add(1, Ordering::Relaxed);
        shared.stats.bits.fetch_add(bits, Ordering::Relaxed);
        let t_ns = shared.epoch_unix_ns + (end - shared.epoch).as_nanos() as u64;
        deliver(shared, winner.node, t_ns, &winner.bytes);
    }
}

/// Waits until a frame is pending and returns the earliest arrival among the
/// pending frames; None when the bus stops.
fn wait_for_frame(shared: &Shared) -> Option<Instant> {
    let mut pending = lock(&shared.pending);
    while pending.entries.is_empty() {
        if shared.stop.load(Ordering::Relaxed) {
            return None;
        }
        pending = shared
            .queued
            .wait_timeout(pending, Duration::from_millis(50))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    if shared.stop.load(Ordering::Relaxed) {
        return None;
    }
    pending.entries.iter().map(|c| c.arrival).min()
}

/// Removes the frame that wins arbitration at `start`: the lowest arbitration key
/// (then the earliest sent) among the frames that had arrived by then.
fn take_winner(shared: &Shared, start: Instant) -> Option<Contender> {
    let mut pending = lock(&shared.pending);
    let index = pending
        .entries
        .iter()
        .enumerate()
        .filter(|(_, c)| c.arrival <= start)
        .min_by_key(|(_, c)| (c.key, c.seq))?
        .0;
    let winner = pending.entries.swap_remove(index);
    if let Some(n) = pending.per_node.get_mut(&winner.node) {
        *n -= 1;
    }
    drop(pending);
    shared.space.notify_all();
    Some(winner)
}

fn deliver(shared: &Shared, sender: u64, t_ns: u64, bytes: &[u8; CAN_FRAME_SIZE]) {
    let mut record = [0u8; FROM_BUS_RECORD];
    record[..8].copy_from_slice(&t_ns.to_le_bytes());
    record[8..].copy_from_slice(bytes);
    for node in lock(&shared.nodes).iter().filter(|n| n.id != sender) {
        if let Err(TrySendError::Full(_)) = node.out.try_send(record) {
            shared.stats.rx_overflows.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A frame received from a bus, with its timestamp (ns of the Unix epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub t_ns: u64,
    pub frame: Frame,
}

/// A connection to a bus that has not acknowledged it yet ([`Node::begin_attach`]).
pub struct Attaching {
    /// Non-blocking until the acknowledgement is read.
    stream: UnixStream,
    bus: String,
}

impl Attaching {
    /// The node once the bus has acknowledged the connection, `None` while it has not;
    /// never waits. The node then receives every frame whose transmission ends after
    /// this returned it, as after [`Node::attach`]. An error when the bus went away or
    /// answered something else: start again with [`Node::begin_attach`].
    pub fn try_finish(&mut self) -> Result<Option<Node>, BusError> {
        let mut byte = [0u8];
        loop {
            match rustix::net::recv(&self.stream, &mut byte, RecvFlags::DONTWAIT) {
                Ok((0, _)) => return Err(BusError::NoBus(self.bus.clone())),
                Ok(_) => break,
                Err(Errno::AGAIN) => return Ok(None),
                Err(Errno::INTR) => {}
                Err(e) => return Err(BusError::Io(e.into())),
            }
        }
        let stream = self.stream.try_clone()?;
        stream.set_nonblocking(false)?;
        Node::acknowledged(stream, &self.bus, byte[0]).map(Some)
    }
}

/// A node attached to a virtual bus.
///
/// `send` may be called from any thread (`&self`); `recv` needs `&mut self`, so one
/// thread receives. [`Node::try_clone`] gives a second handle on the same connection
/// (e.g. for a writer thread); frames are received by whichever handle reads them.
pub struct Node {
    stream: UnixStream,
    bus: String,
    /// Received bytes: `buf[start..filled]` are not yet returned.
    buf: Box<[u8; RECV_BUF]>,
    start: usize,
    filled: usize,
}

/// Records one `recv` system call may fetch: a reader that polls once per period
/// takes a period's frames with one or two calls instead of one per frame.
const RECV_RECORDS: usize = 64;
const RECV_BUF: usize = RECV_RECORDS * FROM_BUS_RECORD;

impl Node {
    /// Attaches to the bus named `bus`.
    pub fn attach(bus: &str) -> Result<Node, BusError> {
        check_name(bus)?;
        let addr = SocketAddr::from_abstract_name(socket_name(bus))?;
        let stream = UnixStream::connect_addr(&addr).map_err(|e| match e.kind() {
            io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound => {
                BusError::NoBus(bus.to_string())
            }
            _ => BusError::Io(e),
        })?;
        stream.set_read_timeout(Some(ATTACH_TIMEOUT))?;
        let mut byte = [0u8];
        (&stream).read_exact(&mut byte)?;
        stream.set_read_timeout(None)?;
        Node::acknowledged(stream, bus, byte[0])
    }

    /// Starts attaching to the bus named `bus` without waiting for anything: neither for
    /// room in the bus's queue of connections nor for its acknowledgement, which
    /// [`Attaching::try_finish`] takes once it is there. For a periodic real-time task,
    /// whose job must not wait on the process that serves the bus (a best-effort one may
    /// be starved for a long time). An error when nobody serves the bus or its queue of
    /// connections is full (`WouldBlock`): try again at a later job.
    pub fn begin_attach(bus: &str) -> Result<Attaching, BusError> {
        check_name(bus)?;
        let addr = rustix::net::SocketAddrUnix::new_abstract_name(socket_name(bus).as_bytes())
            .map_err(io::Error::from)?;
        let flags = SocketFlags::CLOEXEC | SocketFlags::NONBLOCK;
        let fd = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, flags, None)
            .map_err(io::Error::from)?;
        rustix::net::connect(&fd, &addr).map_err(|e| match e {
            Errno::CONNREFUSED | Errno::NOENT => BusError::NoBus(bus.to_string()),
            e => BusError::Io(e.into()),
        })?;
        Ok(Attaching {
            stream: UnixStream::from(fd),
            bus: bus.to_string(),
        })
    }

    /// The node on `stream` once the bus sent `byte`, which must be [`ATTACHED`].
    fn acknowledged(stream: UnixStream, bus: &str, byte: u8) -> Result<Node, BusError> {
        if byte != ATTACHED {
            return Err(BusError::Io(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("virtual CAN bus {bus:?} did not acknowledge the node"),
            )));
        }
        Ok(Node {
            stream,
            bus: bus.to_string(),
            buf: Box::new([0; RECV_BUF]),
            start: 0,
            filled: 0,
        })
    }

    pub fn bus(&self) -> &str {
        &self.bus
    }

    /// Another handle on this connection.
    pub fn try_clone(&self) -> io::Result<Node> {
        Ok(Node {
            stream: self.stream.try_clone()?,
            bus: self.bus.clone(),
            buf: Box::new([0; RECV_BUF]),
            start: 0,
            filled: 0,
        })
    }

    /// Queues `frame` for transmission; blocks while this node has
    /// [`MAX_PENDING_PER_NODE`] frames waiting. Only classic frames travel on the bus.
    pub fn send(&self, frame: &Frame) -> io::Result<()> {
        let bytes = frame
            .to_can_frame_bytes()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        (&self.stream).write_all(&bytes)
    }

    /// Queues `frame` for transmission if that does not wait: `Ok(false)` when this node
    /// already has [`MAX_PENDING_PER_NODE`] frames waiting and its socket is full.
    pub fn try_send(&self, frame: &Frame) -> io::Result<bool> {
        let bytes = frame
            .to_can_frame_bytes()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        loop {
            match rustix::net::send(&self.stream, &bytes, SendFlags::DONTWAIT) {
                Ok(n) if n == bytes.len() => return Ok(true),
                // A stream socket takes a 16-byte record whole or not at all (one buffer
                // of its size, or EAGAIN); should it take part of one, the rest follows at
                // once so that the bus never reads half a record.
                Ok(n) => return (&self.stream).write_all(&bytes[n..]).map(|()| true),
                Err(Errno::AGAIN) => return Ok(false),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Shrinks this node's socket send buffer to the kernel's least, a few records: a
    /// sender using [`Node::try_send`] then finds the bus full after the bus's own
    /// [`MAX_PENDING_PER_NODE`] frames (which it arbitrates by id) and a few more, rather
    /// than after hundreds queued in arrival order in the socket.
    pub fn hold_few_frames(&self) -> io::Result<()> {
        rustix::net::sockopt::set_socket_send_buffer_size(&self.stream, 1)?;
        Ok(())
    }

    /// Receives the next frame another node sent, waiting at most `timeout`
    /// (for ever if None; a zero timeout never blocks). Ok(None) on timeout; an
    /// error once the bus is gone.
    pub fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Received>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        while self.filled - self.start < FROM_BUS_RECORD {
            if self.start > 0 {
                // Keep a partial record at the front, then fill the rest.
                self.buf.copy_within(self.start..self.filled, 0);
                self.filled -= self.start;
                self.start = 0;
            }
            let flags = RecvFlags::DONTWAIT;
            match rustix::net::recv(&self.stream, &mut self.buf[self.filled..], flags) {
                Ok((0, _)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("virtual CAN bus {:?} went away", self.bus),
                    ))
                }
                Ok((n, _)) => self.filled += n,
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => {
                    if !self.wait_readable(deadline)? {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        let record = &self.buf[self.start..self.start + FROM_BUS_RECORD];
        self.start += FROM_BUS_RECORD;
        let t_ns = u64::from_le_bytes(record[..8].try_into().expect("8 bytes"));
        let raw: &[u8; CAN_FRAME_SIZE] = record[8..].try_into().expect("16 bytes");
        let frame = Frame::from_can_frame_bytes(raw)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(Some(Received { t_ns, frame }))
    }

    /// Waits until the connection is readable or `deadline` passes (false).
    fn wait_readable(&self, deadline: Option<Instant>) -> io::Result<bool> {
        loop {
            let left = match deadline {
                None => None,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok(false),
                },
            };
            let timeout = left.map(|l| Timespec {
                tv_sec: l.as_secs() as _,
                tv_nsec: l.subsec_nanos() as _,
            });
            let mut fds = [PollFd::new(&self.stream, PollFlags::IN)];
            match poll(&mut fds, timeout.as_ref()) {
                Ok(0) => {}
                Ok(_) => return Ok(true),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Receives a frame if one is already there.
    pub fn try_recv(&mut self) -> io::Result<Option<Received>> {
        self.recv(Some(Duration::ZERO))
    }
}
