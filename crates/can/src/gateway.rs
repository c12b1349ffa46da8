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
//! Messages on the channels are [`WIRE_SIZE`] bytes ([`encode`], [`decode`]): the
//! reception timestamp (u64 ns, little-endian), a per-bus sequence number (u64,
//! little-endian; gaps reveal drops) and the Linux `struct can_frame`; the
//! timestamp and sequence number of partition-to-gateway messages are ignored. The
//! layout, like the gateway's command line and [`Role`], is `bulkhead-canwire`'s,
//! which the supervisor uses without this crate.

use crate::bus::{CanBus, Received};
use crate::frame::{CanId, Frame, RawFrameError};
pub use bulkhead_canwire::{Role, WIRE_SIZE};
use bulkhead_chan::{Receiver, RecvError, Sender};
use bulkhead_trace::{Event, EventKind, Sink};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// A gateway channel message: timestamp, sequence number, frame.
pub fn encode(t_ns: u64, seq: u64, frame: &Frame) -> Option<[u8; WIRE_SIZE]> {
    let raw = frame.to_can_frame_bytes().ok()?;
    Some(bulkhead_canwire::join(t_ns, seq, &raw))
}

/// The timestamp, sequence number and frame of a gateway channel message.
pub fn decode(msg: &[u8; WIRE_SIZE]) -> Result<(u64, u64, Frame), RawFrameError> {
    let (t_ns, seq, raw) = bulkhead_canwire::split(msg);
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
    /// `tx_denied`, `tx_malformed` (writer).
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
                Role::Writer => [&c.tx_sent, &c.tx_denied, &c.tx_malformed][..]
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
            from.push((link.from_partition, link.allow, c));
        }
        let reader = BusReader {
            bus: rx_bus,
            links: to,
            seq: 0,
            bus_name: self.bus.clone(),
            triggers: None,
            pending: None,
        };
        let writer = BusWriter {
            bus: tx_bus,
            links: from,
        };
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

/// Partitions to CAN (DriveOS Program 5 plus the allowlist, one job per call).
pub struct BusWriter {
    bus: Box<dyn CanBus>,
    links: Vec<(Receiver, HashSet<CanId>, Arc<LinkCounters>)>,
}

impl BusWriter {
    /// A writer alone: sends to `bus` (called `bus_name`) the frames each partition
    /// writes to its channel whose ids are on its allowlist, `(partition, receiver,
    /// allowlist)`.
    pub fn new(
        bus_name: &str,
        bus: Box<dyn CanBus>,
        links: Vec<(String, Receiver, HashSet<CanId>)>,
    ) -> Result<(BusWriter, Counters), LinkError> {
        check_unique(links.iter().map(|l| l.0.as_str()))?;
        let mut from = Vec::new();
        let mut counters = Vec::new();
        for (partition, rx, allow) in links {
            check_channel(&partition, "from_partition", rx.meta().msg_size)?;
            let c = Arc::new(LinkCounters::default());
            counters.push((partition, c.clone()));
            from.push((rx, allow, c));
        }
        let writer = BusWriter { bus, links: from };
        let counters = Counters {
            bus: bus_name.to_string(),
            links: counters,
        };
        Ok((writer, counters))
    }

    /// Takes at most `max_frames` messages in total from the partitions' channels
    /// (round robin, so no partition starves another), sends those whose id is on
    /// the sender's allowlist and drops (and counts) the others. Returns the number
    /// of messages taken.
    pub fn step(&mut self, max_frames: usize) -> io::Result<usize> {
        let mut taken = 0;
        let mut idle = 0;
        let mut buf = [0u8; WIRE_SIZE];
        let n = self.links.len();
        let mut i = 0;
        while taken < max_frames && idle < n {
            let (rx, allow, counters) = &mut self.links[i % n];
            i += 1;
            match rx.try_read(&mut buf) {
                Ok(()) => idle = 0,
                Err(RecvError::Empty) | Err(RecvError::Closed) => {
                    idle += 1;
                    continue;
                }
                // The partition corrupted the channel it writes: its frames are
                // lost until it repairs it; the bus and the others go on.
                Err(_) => {
                    counters.tx_malformed.fetch_add(1, Relaxed);
                    idle += 1;
                    continue;
                }
            }
            taken += 1;
            match decode(&buf) {
                Ok((_, _, frame)) if allow.contains(&frame.id()) => {
                    self.bus.send(&frame)?;
                    counters.tx_sent.fetch_add(1, Relaxed);
                }
                Ok(_) => {
                    counters.tx_denied.fetch_add(1, Relaxed);
                }
                Err(_) => {
                    counters.tx_malformed.fetch_add(1, Relaxed);
                }
            }
        }
        Ok(taken)
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
        let twice = vec![
            ("ivi".into(), good.receiver().unwrap(), HashSet::new()),
            ("ivi".into(), other.receiver().unwrap(), HashSet::new()),
        ];
        let err = BusWriter::new("b", node(), twice).err().unwrap();
        assert_eq!(err, LinkError::Duplicate("ivi".into()));
        assert_eq!(err.to_string(), "partition ivi is already connected");
    }
}
