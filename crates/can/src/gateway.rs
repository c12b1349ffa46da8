//! The CAN gateway core: the only holder of a bus, it connects each partition to
//! it through a pair of `bulkhead-chan` channels, as DriveOS's CAN Gateway Service
//! does with shmcomm channels (DriveOS section 6.4.1, Programs 3-5).
//!
//! Per bus channel there is a reader (CAN to channels, Program 4) and a writer
//! (channels to CAN, Program 5), each a *step function*: one call does one job's
//! work (at most `max_frames` frames) without blocking, so a reserved periodic task
//! (budget C, period T; DriveOS uses 100 µs every 2 ms) can call it once per period.
//! Unlike Program 4, which blocks in `shmcomm_write` when a partition's ring is full,
//! the reader never waits for a partition: a frame for a full ring is dropped and
//! counted, so one slow partition cannot stall the others, and a partition that
//! corrupts its end of a channel loses only its own frames. The writer sends a
//! partition's frame only if its id is on that partition's allowlist; others are
//! dropped and counted (DriveOS 3.3.2: no malicious frame reaches the bus).
//!
//! Nor does the writer wait for the bus, or let one partition take it: each partition
//! may send at its [`Limit`] (a rate, and a queue of frames waiting for the bus), frames
//! beyond are dropped and counted; the frames of all partitions wait in one queue in
//! the order the bus itself would take them, lowest arbitration field first (the
//! identifier: Davis et al. 2007, Section 2; DriveOS 6.4.1's Program 5 writes each
//! partition's frames in turn), and are handed to the bus only as fast as it takes them
//! ([`CanBus::try_send`]). A writer job reads the partitions' channels one message each
//! in turn, at most the frames its budget covers ([`frames_per_job`]), so a partition
//! that floods its channel neither makes the job overrun nor keeps the others waiting.
//!
//! Messages on the channels are [`WIRE_SIZE`] bytes ([`encode`], [`decode`]): the
//! reception timestamp (u64 ns, little-endian), a per-bus sequence number (u64,
//! little-endian; gaps reveal drops) and the Linux `struct can_frame`; the
//! timestamp and sequence number of partition-to-gateway messages are ignored. The
//! layout, like the gateway's command line and [`Role`], is `bulkhead-gateway-protocol`'s,
//! which the supervisor uses without this crate.

use crate::bus::{CanBus, Received};
use crate::frame::{CanId, Frame, RawFrameError};
use bulkhead_chan::{Receiver, RecvError, Sender};
pub use bulkhead_gateway_protocol::{Role, WIRE_SIZE};
use bulkhead_trace::{Event, EventKind, Sink};
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// A gateway channel message: timestamp, sequence number, frame.
pub fn encode(t_ns: u64, seq: u64, frame: &Frame) -> Option<[u8; WIRE_SIZE]> {
    let raw = frame.to_can_frame_bytes().ok()?;
    Some(bulkhead_gateway_protocol::join(t_ns, seq, &raw))
}

/// The timestamp, sequence number and frame of a gateway channel message.
pub fn decode(msg: &[u8; WIRE_SIZE]) -> Result<(u64, u64, Frame), RawFrameError> {
    let (t_ns, seq, raw) = bulkhead_gateway_protocol::split(msg);
    Ok((t_ns, seq, Frame::from_can_frame_bytes(&raw)?))
}

/// Counters of one partition's link to one bus. Updated by the gateway's steps,
/// readable at any time (relaxed atomics: each counter is exact, a snapshot of
/// several is not atomic).
#[derive(Debug, Default)]
pub struct LinkCounters {
    /// Frames from the bus written to the partition's channel.
    pub rx_forwarded: AtomicU64,
    /// Frames from the bus dropped because the partition's channel was full.
    pub rx_dropped: AtomicU64,
    /// Frames from the partition sent to the bus.
    pub tx_sent: AtomicU64,
    /// Frames from the partition dropped because their id is not on its allowlist.
    pub tx_denied: AtomicU64,
    /// Messages from the partition that were not valid classic CAN frames.
    pub tx_malformed: AtomicU64,
    /// Allowed frames from the partition dropped because they exceeded its [`Limit`].
    pub tx_dropped: AtomicU64,
}

/// One partition's connection to a bus.
pub struct PartitionLink {
    /// Partition name.
    pub partition: String,
    /// Channel from the gateway to the partition (CAN to partition).
    pub to_partition: Sender,
    /// Channel from the partition to the gateway (partition to CAN).
    pub from_partition: Receiver,
    /// Ids the partition may send.
    pub allow: HashSet<CanId>,
    /// How much it may send.
    pub limit: Limit,
}

/// What one partition may send through the writer: `rate` frames per second on average,
/// in bursts of up to `queue` frames (a token bucket of `queue` tokens refilled at `rate`
/// per second), with at most `queue` of its frames waiting in the writer for the bus.
/// Its frames beyond either are dropped and counted (`tx_dropped`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub rate: u32,
    pub queue: u32,
}

impl Limit {
    /// Frames per second of an allowed id whose cycle time is not known: one per ms.
    pub const ID_RATE: u32 = 1000;
    /// Frames per allowed id that may wait for the bus (and its burst).
    pub const ID_QUEUE: u32 = 4;

    /// The limit of a partition allowed `ids` when its description sets none: each id
    /// may be sent as often as its cycle time says (`cycle_ms`, e.g. its DBC message's
    /// `GenMsgCycleTime`), else [`Limit::ID_RATE`] times a second, and [`Limit::ID_QUEUE`]
    /// frames of each may wait. No ids: nothing.
    pub fn of_ids(ids: &HashSet<CanId>, cycle_ms: impl Fn(CanId) -> Option<f64>) -> Limit {
        let rate: u64 = ids
            .iter()
            .map(|&id| match cycle_ms(id) {
                Some(ms) => (1000.0 / ms).ceil().max(1.0) as u64,
                None => u64::from(Limit::ID_RATE),
            })
            .sum();
        let n = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        Limit {
            rate: u32::try_from(rate).unwrap_or(u32::MAX),
            queue: n.saturating_mul(Limit::ID_QUEUE),
        }
    }
}

/// A snapshot of one link's counters, named for traces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterSnapshot {
    pub bus: String,
    pub partition: String,
    pub rx_forwarded: u64,
    pub rx_dropped: u64,
    pub tx_sent: u64,
    pub tx_denied: u64,
    pub tx_malformed: u64,
    pub tx_dropped: u64,
}

/// Read access to the counters of every link of a gateway bus.
#[derive(Clone)]
pub struct Counters {
    bus: String,
    links: Vec<(String, Arc<LinkCounters>)>,
}

impl Counters {
    /// The counters `role` updates, named `<partition>.<counter>` as the gateway
    /// service publishes them: `rx_forwarded`, `rx_dropped` (reader); `tx_sent`,
    /// `tx_denied`, `tx_malformed`, `tx_dropped` (writer).
    pub fn named(&self, role: Role) -> Vec<(String, u64)> {
        let mut names = Vec::new();
        for (partition, _) in &self.links {
            for name in role.counter_names() {
                names.push(format!("{partition}.{name}"));
            }
        }
        let mut values = Vec::new();
        self.for_each_value(role, |v| values.push(v));
        names.into_iter().zip(values).collect()
    }

    /// Calls `f` with the value of each counter of [`Counters::named`], in its order,
    /// without allocating (for a periodic task publishing them every job).
    pub fn for_each_value(&self, role: Role, mut f: impl FnMut(u64)) {
        for (_, c) in &self.links {
            match role {
                Role::Reader => [&c.rx_forwarded, &c.rx_dropped][..]
                    .iter()
                    .for_each(|v| f(v.load(Relaxed))),
                Role::Writer => [&c.tx_sent, &c.tx_denied, &c.tx_malformed, &c.tx_dropped][..]
                    .iter()
                    .for_each(|v| f(v.load(Relaxed))),
            }
        }
    }

    pub fn snapshot(&self) -> Vec<CounterSnapshot> {
        self.links
            .iter()
            .map(|(partition, c)| CounterSnapshot {
                bus: self.bus.clone(),
                partition: partition.clone(),
                rx_forwarded: c.rx_forwarded.load(Relaxed),
                rx_dropped: c.rx_dropped.load(Relaxed),
                tx_sent: c.tx_sent.load(Relaxed),
                tx_denied: c.tx_denied.load(Relaxed),
                tx_malformed: c.tx_malformed.load(Relaxed),
                tx_dropped: c.tx_dropped.load(Relaxed),
            })
            .collect()
    }

    /// The counters as Chrome/Perfetto trace-event counters (`"ph": "C"`) at time
    /// `t_ns`, one track `can gateway BUS/PARTITION` per link, on the "Schedule"
    /// process (pid 2) of `bulkhead_trace::perfetto`'s layout. Append them to the
    /// `traceEvents` of an exported trace.
    pub fn perfetto_counters(&self, t_ns: u64) -> Vec<Value> {
        self.snapshot()
            .into_iter()
            .map(|s| {
                json!({
                    "ph": "C",
                    "name": format!("can gateway {}/{}", s.bus, s.partition),
                    "pid": 2,
                    "ts": t_ns as f64 / 1e3,
                    "args": {
                        "rx_forwarded": s.rx_forwarded,
                        "rx_dropped": s.rx_dropped,
                        "tx_sent": s.tx_sent,
                        "tx_denied": s.tx_denied,
                        "tx_dropped": s.tx_dropped,
                    }
                })
            })
            .collect()
    }
}

/// Builds the reader and writer of one bus.
pub struct Gateway {
    bus: String,
    links: Vec<PartitionLink>,
}

impl Gateway {
    /// A gateway for the bus called `bus` (used in counters and traces).
    pub fn new(bus: &str) -> Gateway {
        Gateway {
            bus: bus.to_string(),
            links: Vec::new(),
        }
    }

    /// Connects a partition. Its channels must carry [`WIRE_SIZE`]-byte messages.
    pub fn add_partition(&mut self, link: PartitionLink) -> Result<(), LinkError> {
        check_channel(
            &link.partition,
            "to_partition",
            link.to_partition.meta().msg_size,
        )?;
        check_channel(
            &link.partition,
            "from_partition",
            link.from_partition.meta().msg_size,
        )?;
        let names = self.links.iter().map(|l| l.partition.as_str());
        check_unique(names.chain([link.partition.as_str()]))?;
        self.links.push(link);
        Ok(())
    }

    /// Splits into the reader (owning `rx_bus`), the writer (owning `tx_bus`) and
    /// the counters. `rx_bus` and `tx_bus` are two handles on the same bus
    /// ([`crate::bus::open_pair`]).
    pub fn split(
        self,
        rx_bus: Box<dyn CanBus>,
        tx_bus: Box<dyn CanBus>,
    ) -> (BusReader, BusWriter, Counters) {
        let mut to = Vec::new();
        let mut from = Vec::new();
        let mut counters = Vec::new();
        for link in self.links {
            let c = Arc::new(LinkCounters::default());
            counters.push((link.partition.clone(), c.clone()));
            to.push(ReaderLink {
                partition: link.partition.clone(),
                tx: link.to_partition,
                counters: c.clone(),
                only: None,
            });
            from.push(Sending::new(link.from_partition, link.allow, link.limit, c));
        }
        let reader = BusReader {
            bus: rx_bus,
            links: to,
            seq: 0,
            bus_name: self.bus.clone(),
            triggers: None,
            pending: None,
        };
        let writer = BusWriter::over(tx_bus, from);
        let counters = Counters {
            bus: self.bus,
            links: counters,
        };
        (reader, writer, counters)
    }
}

/// Why a partition cannot be connected to the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkError {
    /// The partition's channel `end` (`to_partition` or `from_partition`) carries
    /// messages of `msg_size` bytes, not [`WIRE_SIZE`].
    MessageSize {
        partition: String,
        end: &'static str,
        msg_size: u32,
    },
    /// The partition is connected twice.
    Duplicate(String),
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::MessageSize {
                partition,
                end,
                msg_size,
            } => write!(
                f,
                "partition {partition}: channel {end} carries {msg_size}-byte messages, the gateway needs {WIRE_SIZE}"
            ),
            LinkError::Duplicate(name) => write!(f, "partition {name} is already connected"),
        }
    }
}

impl std::error::Error for LinkError {}

/// Checks that a channel of `partition`'s end `end` carries gateway messages.
fn check_channel(partition: &str, end: &'static str, msg_size: u32) -> Result<(), LinkError> {
    if msg_size as usize != WIRE_SIZE {
        return Err(LinkError::MessageSize {
            partition: partition.to_string(),
            end,
            msg_size,
        });
    }
    Ok(())
}

/// Refuses a partition named twice.
fn check_unique<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), LinkError> {
    let mut seen = HashSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(LinkError::Duplicate(name.to_string()));
        }
    }
    Ok(())
}

/// One partition's channel from the reader.
struct ReaderLink {
    partition: String,
    tx: Sender,
    counters: Arc<LinkCounters>,
    /// The only ids forwarded (a pipeline stage's declared ids); `None`: every frame.
    only: Option<HashSet<CanId>>,
}

/// CAN to partitions (DriveOS Program 4, one job per call).
pub struct BusReader {
    bus: Box<dyn CanBus>,
    links: Vec<ReaderLink>,
    seq: u64,
    bus_name: String,
    triggers: Option<crate::trigger::Triggers>,
    /// A frame [`BusReader::wait`] received and the next step forwards first.
    pending: Option<Received>,
}

impl BusReader {
    /// A reader alone (the gateway service runs reader and writer as separate
    /// tasks): forwards frames of `bus` (called `bus_name`) to each partition's
    /// channel, `(partition, sender)`.
    pub fn new(
        bus_name: &str,
        bus: Box<dyn CanBus>,
        links: Vec<(String, Sender)>,
    ) -> Result<(BusReader, Counters), LinkError> {
        check_unique(links.iter().map(|l| l.0.as_str()))?;
        let mut to = Vec::new();
        let mut counters = Vec::new();
        for (partition, tx) in links {
            check_channel(&partition, "to_partition", tx.meta().msg_size)?;
            let c = Arc::new(LinkCounters::default());
            counters.push((partition.clone(), c.clone()));
            to.push(ReaderLink {
                partition,
                tx,
                counters: c,
                only: None,
            });
        }
        let reader = BusReader {
            bus,
            links: to,
            seq: 0,
            bus_name: bus_name.to_string(),
            triggers: None,
            pending: None,
        };
        let counters = Counters {
            bus: bus_name.to_string(),
            links: counters,
        };
        Ok((reader, counters))
    }

    /// Forwards at most `max_frames` frames already received from the bus (the one
    /// [`BusReader::wait`] kept first) to every partition, without waiting for the bus
    /// or for a partition. A frame for a
    /// partition whose channel is full is dropped, counted and reported to `sink`
    /// as a `channel_loss` of that channel. Returns the number of frames taken from
    /// the bus.
    pub fn step(&mut self, max_frames: usize, sink: &mut dyn Sink) -> io::Result<usize> {
        let mut taken = 0;
        while taken < max_frames {
            let next = match self.pending.take() {
                Some(received) => received,
                None => match self.bus.recv(Some(Duration::ZERO))? {
                    Some(received) => received,
                    None => break,
                },
            };
            taken += 1;
            self.forward(&next, sink);
        }
        Ok(taken)
    }

    /// Waits at most `timeout` for a frame from the bus (a reader that forwards on
    /// reception blocks here between its jobs). Returns the frame's reception time on the
    /// bus (CLOCK_REALTIME ns, as the channels carry it) and keeps the frame for the next
    /// [`BusReader::step`], which forwards it first; `None` when no frame came. A frame
    /// already kept returns at once.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<Option<u64>> {
        if self.pending.is_none() {
            self.pending = self.bus.recv(Some(timeout))?;
        }
        Ok(self.pending.as_ref().map(|r| r.t_ns))
    }

    /// Forwards one received frame to every partition it is for.
    fn forward(&mut self, received: &Received, sink: &mut dyn Sink) {
        if let Some(triggers) = &mut self.triggers {
            triggers.observe(received.t_ns, &received.frame);
        }
        let seq = self.seq;
        self.seq += 1;
        let Some(msg) = encode(received.t_ns, seq, &received.frame) else {
            return;
        };
        let id = received.frame.id();
        for link in &mut self.links {
            if link.only.as_ref().is_some_and(|ids| !ids.contains(&id)) {
                continue;
            }
            let (tx, counters) = (&mut link.tx, &link.counters);
            match tx.try_write(&msg) {
                Ok(()) => {
                    counters.rx_forwarded.fetch_add(1, Relaxed);
                }
                // Full, closed, or a partition that corrupted its own read
                // index: that partition loses the frame, the others do not.
                Err(_) => {
                    counters.rx_dropped.fetch_add(1, Relaxed);
                    if sink.enabled() {
                        let channel = tx.meta().name.as_str().into();
                        sink.emit(Event::new(
                            received.t_ns,
                            EventKind::ChannelLoss { channel, msg: seq },
                        ));
                    }
                }
            }
        }
    }

    pub fn bus_name(&self) -> &str {
        &self.bus_name
    }

    /// From now on forwards to `partition` only the frames of `ids` (a pipeline stage's
    /// declared ids, Boomerang's device path: a stage's link then carries its own frames
    /// only, instead of every frame on the bus for it to skip). The other frames are
    /// neither forwarded nor counted for it. An unknown partition is ignored.
    pub fn forward_only(&mut self, partition: &str, ids: HashSet<CanId>) {
        for link in self.links.iter_mut().filter(|l| l.partition == partition) {
            link.only = Some(ids.clone());
        }
    }

    /// Watches stop-start triggers on every frame taken from the bus from now on.
    pub fn set_triggers(&mut self, triggers: crate::trigger::Triggers) {
        self.triggers = Some(triggers);
    }

    /// The triggers watched, if any.
    pub fn triggers(&self) -> Option<&crate::trigger::Triggers> {
        self.triggers.as_ref()
    }
}

/// One partition's connection to the writer, for [`BusWriter::new`].
pub struct WriterLink {
    pub partition: String,
    /// Channel from the partition to the gateway.
    pub from_partition: Receiver,
    /// Ids the partition may send.
    pub allow: HashSet<CanId>,
    pub limit: Limit,
}

/// Partitions to CAN (DriveOS Program 5 plus the allowlist and the limits, one job per
/// call).
pub struct BusWriter {
    bus: Box<dyn CanBus>,
    links: Vec<Sending>,
    /// The frames admitted and not sent yet, of every partition: the lowest arbitration
    /// field first, then in the order they were admitted.
    waiting: BinaryHeap<Reverse<Waiting>>,
    admitted: u64,
    /// The time of the last step (CLOCK_MONOTONIC ns), from which the buckets refill.
    last_ns: Option<u64>,
    /// The partition whose channel the next job reads first.
    next: usize,
}

/// What one frame may cost a writer job at most, ns: taking its message from a
/// partition's channel (read, decode, allowlist, bucket) and handing it to the bus (one
/// non-blocking send, a system call that wakes the bus). Measured in thread CPU time on
/// the shared 2-vCPU development VM (load average about 12; `BusWriter::step` over a
/// virtual bus): taking a message 0.04 µs in a release build and 0.45 µs in a debug one;
/// taking and sending a frame 3.3 µs (release) and 7.2 µs (debug) on average, 5.8 and
/// 12.6 µs in the worst job of 8 frames. 20 µs is about 1.6 times the debug worst.
pub const FRAME_COST_NS: u64 = 20_000;

/// What a writer job costs besides its frames, ns: refilling the buckets, publishing
/// the counters and waiting for the next period (the task library's system calls).
/// Declared as one frame's cost.
pub const JOB_COST_NS: u64 = FRAME_COST_NS;

/// The frames a writer job with budget `budget_ns` handles at most (the `max_frames` of
/// [`BusWriter::step`]): what the budget leaves after the job's own cost
/// ([`JOB_COST_NS`]), at [`FRAME_COST_NS`] a frame, and at least 1 so that a budget too
/// small for one frame still moves the bus. A job then takes at most that many messages
/// from the channels and sends at most that many frames, within its budget: 9 for
/// 200 µs, 4 for DriveOS's 100 µs (DriveOS section 6.4.1, Table 3).
pub fn frames_per_job(budget_ns: u64) -> usize {
    let frames = budget_ns.saturating_sub(JOB_COST_NS) / FRAME_COST_NS;
    usize::try_from(frames).unwrap_or(usize::MAX).max(1)
}

/// A token is this many units: one frame, with rate x elapsed ns added per step.
const TOKEN: u128 = 1_000_000_000;

/// One partition's link in the writer, with what it may still send.
struct Sending {
    rx: Receiver,
    allow: HashSet<CanId>,
    limit: Limit,
    counters: Arc<LinkCounters>,
    /// Its token bucket, in [`TOKEN`] units per frame.
    tokens: u128,
    /// Its frames in [`BusWriter::waiting`].
    waiting: u32,
    /// Whether the job in progress found its channel empty (or corrupted): not read
    /// again until the next job.
    dry: bool,
}

impl Sending {
    fn new(rx: Receiver, allow: HashSet<CanId>, limit: Limit, counters: Arc<LinkCounters>) -> Self {
        Sending {
            rx,
            allow,
            limit,
            counters,
            tokens: u128::from(limit.queue) * TOKEN,
            waiting: 0,
            dry: false,
        }
    }

    /// Whether one more frame fits its rate and its queue (and takes its token).
    fn admits(&mut self) -> bool {
        let fits = self.tokens >= TOKEN && self.waiting < self.limit.queue;
        if fits {
            self.tokens -= TOKEN;
            self.waiting += 1;
        }
        fits
    }
}

/// A frame waiting for the bus, ordered as arbitration orders it, then by admission.
struct Waiting {
    key: u32,
    admitted: u64,
    link: usize,
    frame: Frame,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        (self.key, self.admitted) == (other.key, other.admitted)
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.key, self.admitted).cmp(&(other.key, other.admitted))
    }
}

impl BusWriter {
    /// A writer alone: sends to `bus` (called `bus_name`) the frames each partition
    /// writes to its channel whose ids are on its allowlist, within its limit.
    pub fn new(
        bus_name: &str,
        bus: Box<dyn CanBus>,
        links: Vec<WriterLink>,
    ) -> Result<(BusWriter, Counters), LinkError> {
        check_unique(links.iter().map(|l| l.partition.as_str()))?;
        let mut from = Vec::new();
        let mut counters = Vec::new();
        for link in links {
            let end = "from_partition";
            check_channel(&link.partition, end, link.from_partition.meta().msg_size)?;
            let c = Arc::new(LinkCounters::default());
            counters.push((link.partition, c.clone()));
            from.push(Sending::new(link.from_partition, link.allow, link.limit, c));
        }
        let counters = Counters {
            bus: bus_name.to_string(),
            links: counters,
        };
        Ok((BusWriter::over(bus, from), counters))
    }

    fn over(bus: Box<dyn CanBus>, links: Vec<Sending>) -> BusWriter {
        BusWriter {
            bus,
            links,
            waiting: BinaryHeap::new(),
            admitted: 0,
            last_ns: None,
            next: 0,
        }
    }

    /// One job at `now_ns` (CLOCK_MONOTONIC) of at most `max_frames` frames (see
    /// [`frames_per_job`]): refills each partition's bucket for the time since the last
    /// job; takes at most `max_frames` messages from the partitions' channels, one
    /// partition after the other, a message each in turn (round-robin, starting each job
    /// after the partition the last one ended with), so that a partition that keeps
    /// writing gets its share of the job and no more, and every partition with a message
    /// gets one read per job while `max_frames` is at least the number of partitions;
    /// drops and counts the frames whose id is not on the partition's allowlist
    /// (`tx_denied`), that are not classic CAN frames (`tx_malformed`) or that exceed its
    /// limit (`tx_dropped`); then hands the waiting frames of all partitions to the bus,
    /// lowest arbitration field first, at most `max_frames`, and only while the bus
    /// takes them without waiting. What is left (messages in the channels, frames
    /// waiting) waits for the next job. Returns the number of messages taken.
    pub fn step(&mut self, max_frames: usize, now_ns: u64) -> io::Result<usize> {
        self.refill(now_ns);
        let taken = self.take_in_turn(max_frames);
        self.send(max_frames)?;
        Ok(taken)
    }

    /// Takes at most `max_frames` messages, one per partition in turn from
    /// [`BusWriter::next`], skipping the partitions whose channel this job found empty,
    /// until every channel has been. Each poll takes a message or finds a channel
    /// empty: at most `max_frames + partitions` polls.
    fn take_in_turn(&mut self, max_frames: usize) -> usize {
        let n = self.links.len();
        let (mut taken, mut open) = (0, n);
        let mut i = self.next;
        while taken < max_frames && open > 0 {
            if !self.links[i].dry {
                if self.take(i) {
                    taken += 1;
                } else {
                    self.links[i].dry = true;
                    open -= 1;
                }
            }
            i = (i + 1) % n;
        }
        self.next = i;
        taken
    }

    /// Adds `rate` tokens per second elapsed to every bucket, up to `queue`, and opens
    /// every channel to the job starting.
    fn refill(&mut self, now_ns: u64) {
        let elapsed = match self.last_ns {
            Some(last) => u128::from(now_ns.saturating_sub(last)),
            None => 0,
        };
        self.last_ns = Some(now_ns);
        for link in &mut self.links {
            let full = u128::from(link.limit.queue) * TOKEN;
            let added = elapsed.saturating_mul(u128::from(link.limit.rate));
            link.tokens = link.tokens.saturating_add(added).min(full);
            link.dry = false;
        }
    }

    /// Takes one message of partition `i`'s channel, if it holds one: queues its frame
    /// or drops and counts it. False when the channel is empty, closed or corrupted.
    fn take(&mut self, i: usize) -> bool {
        let mut buf = [0u8; WIRE_SIZE];
        let link = &mut self.links[i];
        match link.rx.try_read(&mut buf) {
            Ok(()) => {}
            Err(RecvError::Empty) | Err(RecvError::Closed) => return false,
            // The partition corrupted the channel it writes: its frames are lost
            // until it repairs it; the bus and the others go on.
            Err(_) => {
                link.counters.tx_malformed.fetch_add(1, Relaxed);
                return false;
            }
        }
        let counter = match decode(&buf) {
            Ok((_, _, frame)) if link.allow.contains(&frame.id()) => {
                if !link.admits() {
                    link.counters.tx_dropped.fetch_add(1, Relaxed);
                    return true;
                }
                self.waiting.push(Reverse(Waiting {
                    key: crate::timing::arbitration_key(&frame),
                    admitted: self.admitted,
                    link: i,
                    frame,
                }));
                self.admitted += 1;
                return true;
            }
            Ok(_) => &link.counters.tx_denied,
            Err(_) => &link.counters.tx_malformed,
        };
        counter.fetch_add(1, Relaxed);
        true
    }

    /// Hands the waiting frames to the bus in arbitration order while it takes them,
    /// at most `max_frames`.
    fn send(&mut self, max_frames: usize) -> io::Result<()> {
        for _ in 0..max_frames {
            let Some(Reverse(next)) = self.waiting.peek() else {
                break;
            };
            if !self.bus.try_send(&next.frame)? {
                break;
            }
            let link = &mut self.links[next.link];
            link.waiting -= 1;
            link.counters.tx_sent.fetch_add(1, Relaxed);
            self.waiting.pop();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_messages_round_trip() {
        let frame = Frame::new(CanId::Extended(0x1ABC), &[9, 8, 7]).unwrap();
        let msg = encode(123, 7, &frame).unwrap();
        assert_eq!(decode(&msg), Ok((123, 7, frame)));
        let fd = Frame::fd(CanId::Standard(1), true, &[0; 16]).unwrap();
        assert!(encode(0, 0, &fd).is_none());
    }

    /// A link restricted to a stage's ids gets those frames only, counted; an
    /// unrestricted link on the same reader still gets every frame.
    #[test]
    fn a_link_restricted_to_ids_gets_only_their_frames() {
        use bulkhead_chan::{Channel, Spec};
        let name = format!("gateway-only-{}", std::process::id());
        let _serving = crate::vbus::Bus::bind(&name, 500_000).unwrap().spawn();
        let node = || Box::new(crate::vbus::Node::attach(&name).unwrap());
        let stage = Channel::create(&Spec::fifo("only-stage", WIRE_SIZE as u32, 8)).unwrap();
        let client = Channel::create(&Spec::fifo("only-client", WIRE_SIZE as u32, 8)).unwrap();
        let links = vec![
            ("q/p1.CanRead".into(), stage.sender().unwrap()),
            ("ivi".into(), client.sender().unwrap()),
        ];
        let (mut reader, counters) = BusReader::new("b", node(), links).unwrap();
        reader.forward_only("q/p1.CanRead", [CanId::Standard(0x101)].into());
        let sender = node();
        for id in [0x101, 0x124, 0x101] {
            let frame = Frame::new(CanId::Standard(id), &[1]).unwrap();
            sender.send(&frame).unwrap();
        }
        let (mut taken, deadline) = (0, std::time::Instant::now() + Duration::from_secs(5));
        while taken < 3 && std::time::Instant::now() < deadline {
            taken += reader.step(8, &mut bulkhead_trace::Discard).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(taken, 3);
        let ids = |c: &Channel| {
            let mut rx = c.receiver().unwrap();
            let mut buf = [0u8; WIRE_SIZE];
            let mut ids = Vec::new();
            while rx.try_read(&mut buf).is_ok() {
                ids.push(decode(&buf).unwrap().2.id().raw());
            }
            ids
        };
        assert_eq!(ids(&stage), [0x101, 0x101]);
        // In the bus's order, which arbitration decides (the lower id first).
        let mut all = ids(&client);
        all.sort();
        assert_eq!(all, [0x101, 0x101, 0x124]);
        assert_eq!(
            counters.named(Role::Reader),
            vec![
                ("q/p1.CanRead.rx_forwarded".into(), 2),
                ("q/p1.CanRead.rx_dropped".into(), 0),
                ("ivi.rx_forwarded".into(), 3),
                ("ivi.rx_dropped".into(), 0)
            ]
        );
    }

    /// A bus that takes `room` frames, then is full until given more.
    #[derive(Clone, Default)]
    struct Wire {
        room: Arc<std::sync::atomic::AtomicUsize>,
        sent: Arc<std::sync::Mutex<Vec<u32>>>,
    }

    impl CanBus for Wire {
        fn send(&mut self, _: &Frame) -> io::Result<()> {
            unreachable!("the writer never waits for the bus")
        }
        fn try_send(&mut self, frame: &Frame) -> io::Result<bool> {
            let took = self
                .room
                .fetch_update(Relaxed, Relaxed, |r| r.checked_sub(1))
                .is_ok();
            if took {
                self.sent.lock().unwrap().push(frame.id().raw());
            }
            Ok(took)
        }
        fn recv(&mut self, _: Option<Duration>) -> io::Result<Option<Received>> {
            Ok(None)
        }
    }

    impl Wire {
        fn give(&self, frames: usize) {
            self.room.fetch_add(frames, Relaxed);
        }
        fn sent(&self) -> Vec<u32> {
            std::mem::take(&mut self.sent.lock().unwrap())
        }
    }

    /// A writer over `wire` with partitions `(name, allowed id, limit)`, and the senders of
    /// their channels (depth 16), which `tag` keeps apart from other tests'.
    fn writer(
        tag: &str,
        wire: &Wire,
        partitions: &[(&str, u32, Limit)],
    ) -> (BusWriter, Counters, Vec<(Sender, bulkhead_chan::Channel)>) {
        use bulkhead_chan::{Channel, Spec};
        let mut links = Vec::new();
        let mut senders = Vec::new();
        for (name, id, limit) in partitions {
            let chan = format!("w-{tag}-{name}-{}", std::process::id());
            let c = Channel::create(&Spec::fifo(&chan, WIRE_SIZE as u32, 16)).unwrap();
            links.push(WriterLink {
                partition: name.to_string(),
                from_partition: c.receiver().unwrap(),
                allow: [CanId::Standard(*id as u16)].into(),
                limit: *limit,
            });
            senders.push((c.sender().unwrap(), c));
        }
        let (w, counters) = BusWriter::new("b", Box::new(wire.clone()), links).unwrap();
        (w, counters, senders)
    }

    fn put(tx: &mut Sender, id: u32, n: usize) {
        let msg = encode(0, 0, &Frame::new(CanId::Standard(id as u16), &[1]).unwrap()).unwrap();
        for _ in 0..n {
            tx.try_write(&msg).unwrap();
        }
    }

    /// Frames of several partitions go to the bus lowest id first, as arbitration would
    /// take them, however the partitions wrote them; a full bus leaves them waiting (the
    /// writer does not wait), in the same order at the next job.
    #[test]
    fn the_lowest_id_goes_first_and_a_full_bus_is_not_waited_for() {
        let wire = Wire::default();
        let wide = Limit {
            rate: 1000,
            queue: 8,
        };
        let (mut w, counters, mut tx) = writer(
            "order",
            &wire,
            &[("low", 0x300, wide), ("high", 0x100, wide)],
        );
        put(&mut tx[0].0, 0x300, 3);
        put(&mut tx[1].0, 0x100, 2);
        wire.give(3);
        assert_eq!(w.step(64, 0).unwrap(), 5);
        assert_eq!(wire.sent(), [0x100, 0x100, 0x300]);
        put(&mut tx[1].0, 0x100, 1);
        assert_eq!(w.step(64, 1_000_000).unwrap(), 1);
        assert_eq!(wire.sent(), Vec::<u32>::new());
        wire.give(10);
        w.step(64, 2_000_000).unwrap();
        assert_eq!(wire.sent(), [0x100, 0x300, 0x300]);
        let sent: Vec<_> = counters.snapshot().iter().map(|s| s.tx_sent).collect();
        assert_eq!(sent, [3, 3]);
    }

    /// A partition beyond its limit loses its own frames, counted: at rate 100/s with a
    /// queue of 2 it gets its 2 tokens at once, then one per 10 ms; while the bus is full
    /// no more than 2 of its frames wait. The other partition is not touched.
    #[test]
    fn a_partition_beyond_its_limit_loses_its_own_frames_counted() {
        let wire = Wire::default();
        let (mut w, counters, mut tx) = writer(
            "limit",
            &wire,
            &[
                (
                    "flood",
                    0x100,
                    Limit {
                        rate: 100,
                        queue: 2,
                    },
                ),
                (
                    "calm",
                    0x200,
                    Limit {
                        rate: 100,
                        queue: 2,
                    },
                ),
            ],
        );
        wire.give(100);
        put(&mut tx[0].0, 0x100, 10);
        put(&mut tx[1].0, 0x200, 1);
        w.step(64, 0).unwrap();
        assert_eq!(wire.sent(), [0x100, 0x100, 0x200]);
        put(&mut tx[0].0, 0x100, 10);
        w.step(64, 10_000_000).unwrap();
        assert_eq!(wire.sent(), [0x100], "one token in 10 ms");
        // A full bus: the tokens of 1 s, but only 2 frames may wait.
        wire.room.store(0, Relaxed);
        put(&mut tx[0].0, 0x100, 10);
        w.step(64, 1_010_000_000).unwrap();
        wire.give(100);
        w.step(64, 1_010_000_001).unwrap();
        assert_eq!(wire.sent(), [0x100, 0x100]);
        let flood = &counters.snapshot()[0];
        assert_eq!((flood.tx_sent, flood.tx_dropped), (5, 25));
        let calm = &counters.snapshot()[1];
        assert_eq!((calm.tx_sent, calm.tx_dropped), (1, 0));
        assert_eq!(
            counters.named(Role::Writer)[..4],
            [
                ("flood.tx_sent".to_string(), 5),
                ("flood.tx_denied".to_string(), 0),
                ("flood.tx_malformed".to_string(), 0),
                ("flood.tx_dropped".to_string(), 25)
            ]
        );
    }

    /// A job takes at most its frames, one partition after the other, and leaves the
    /// rest in the channels: a flood beyond its limit costs the job its share of reads,
    /// not the channel's depth, and the calm partition's frames are taken in the same job
    /// (the flood's first partition notwithstanding), none dropped.
    #[test]
    fn a_job_takes_at_most_its_frames_in_turn_and_leaves_the_rest() {
        let wire = Wire::default();
        let (none, calm) = (
            Limit { rate: 0, queue: 0 },
            Limit {
                rate: 1000,
                queue: 4,
            },
        );
        let partitions = [("flood", 0x100, none), ("calm", 0x200, calm)];
        let (mut w, counters, mut tx) = writer("turn", &wire, &partitions);
        wire.give(100);
        put(&mut tx[0].0, 0x100, 16);
        put(&mut tx[1].0, 0x200, 2);
        assert_eq!(w.step(4, 0).unwrap(), 4);
        assert_eq!(wire.sent(), [0x200, 0x200]);
        let dropped = |c: &Counters| {
            c.snapshot()
                .iter()
                .map(|s| s.tx_dropped)
                .collect::<Vec<_>>()
        };
        assert_eq!(dropped(&counters), [2, 0]);
        // The flood's other 14 messages wait in its channel, 4 a job.
        let taken: Vec<usize> = (1..=4).map(|k| w.step(4, k).unwrap()).collect();
        assert_eq!(taken, [4, 4, 4, 2]);
        assert_eq!(dropped(&counters), [16, 0]);
    }

    /// Jobs of one frame serve the partitions in turn, each job starting after the
    /// partition the last one ended with, whatever their ids and however much they wrote.
    #[test]
    fn jobs_of_one_frame_serve_the_partitions_in_turn() {
        let wire = Wire::default();
        let wide = Limit {
            rate: 1000,
            queue: 8,
        };
        let (mut w, _, mut tx) = writer("rr", &wire, &[("a", 0x100, wide), ("b", 0x200, wide)]);
        wire.give(100);
        put(&mut tx[0].0, 0x100, 3);
        put(&mut tx[1].0, 0x200, 2);
        let sent: Vec<Vec<u32>> = (0..5)
            .map(|k| {
                w.step(1, k).unwrap();
                wire.sent()
            })
            .collect();
        assert_eq!(sent, [[0x100], [0x200], [0x100], [0x200], [0x100]]);
    }

    /// A writer job's frames from its budget: one frame's cost for the job itself, then
    /// one frame per [`FRAME_COST_NS`]; at least one.
    #[test]
    fn a_writer_job_handles_the_frames_its_budget_covers() {
        assert_eq!(frames_per_job(200_000), 9);
        assert_eq!(frames_per_job(100_000), 4);
        assert_eq!(frames_per_job(JOB_COST_NS + FRAME_COST_NS - 1), 1);
        assert_eq!(frames_per_job(0), 1);
        assert_eq!(frames_per_job(2_000_000), 99);
    }

    /// The default limit of an allowlist: each id's cycle time (10 ms: 100/s), else
    /// 1000/s; 4 frames per id.
    #[test]
    fn the_default_limit_comes_from_the_ids_cycle_times() {
        let ids: HashSet<CanId> = [CanId::Standard(0x10), CanId::Standard(0x20)].into();
        let cycle = |id: CanId| (id.raw() == 0x10).then_some(10.0);
        assert_eq!(
            Limit::of_ids(&ids, cycle),
            Limit {
                rate: 1100,
                queue: 8
            }
        );
        assert_eq!(
            Limit::of_ids(&HashSet::new(), cycle),
            Limit { rate: 0, queue: 0 }
        );
    }

    #[test]
    fn a_lone_reader_or_writer_checks_its_channels_and_names_its_counters() {
        use bulkhead_chan::{Channel, Spec};
        let name = format!("gateway-unit-{}", std::process::id());
        let _serving = crate::vbus::Bus::bind(&name, 500_000).unwrap().spawn();
        let node = || -> Box<dyn CanBus> { Box::new(crate::vbus::Node::attach(&name).unwrap()) };
        let good = Channel::create(&Spec::fifo("lone-a", WIRE_SIZE as u32, 4)).unwrap();
        let small = Channel::create(&Spec::fifo("lone-b", 8, 4)).unwrap();
        let err = BusReader::new("b", node(), vec![("ivi".into(), small.sender().unwrap())])
            .err()
            .unwrap();
        assert!(
            matches!(&err, LinkError::MessageSize { partition, end: "to_partition", msg_size: 8 } if partition == "ivi"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("partition ivi: channel to_partition carries 8-byte"),
            "{err}"
        );
        let (_, counters) =
            BusReader::new("b", node(), vec![("ivi".into(), good.sender().unwrap())]).unwrap();
        assert_eq!(
            counters.named(Role::Reader),
            vec![("ivi.rx_forwarded".into(), 0), ("ivi.rx_dropped".into(), 0)]
        );
        let other = Channel::create(&Spec::fifo("lone-c", WIRE_SIZE as u32, 4)).unwrap();
        let link = |rx| WriterLink {
            partition: "ivi".into(),
            from_partition: rx,
            allow: HashSet::new(),
            limit: Limit { rate: 1, queue: 1 },
        };
        let twice = vec![
            link(good.receiver().unwrap()),
            link(other.receiver().unwrap()),
        ];
        let err = BusWriter::new("b", node(), twice).err().unwrap();
        assert_eq!(err, LinkError::Duplicate("ivi".into()));
        assert_eq!(err.to_string(), "partition ivi is already connected");
    }
}
