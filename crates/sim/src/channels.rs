//! Channels between tasks carrying message ids, and the end-to-end statistics of
//! the chains they form (Boomerang Sec. III-E: delay, throughput, loss).
//!
//! Every message carries its *origins*: for each source task upstream (a task that
//! reads no channel some simulated task writes), which job of that source produced the data and when that job
//! was released (when the data was sampled). A stage's output inherits the origins
//! of everything its job read. When a sink (a task that writes no channel) completes
//! a job, each origin it sees for the first time is delivered: its end-to-end delay
//! is the completion time minus the origin's release.

use crate::spec::ChannelSpec;
use bulkhead_model::Nanos;
use bulkhead_model::{ChannelKind, Overflow};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

/// Where the data of a message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// The source task.
    pub source: u32,
    /// Job index of the source task.
    pub seq: u64,
    /// Release time of that job.
    pub t: Nanos,
}

#[derive(Debug, Clone)]
pub struct Message {
    /// Per-channel sequence number (0 = first written), the message id in traces.
    pub id: u64,
    pub origins: Rc<[Origin]>,
}

struct Reader {
    task: u32,
    /// fifo: position (count of stored messages before it) of the next message to read.
    next: u64,
    /// latest: the first message id the reader may get (a restartable task after a
    /// resume reads no message written before it).
    fresh_from: u64,
}

struct ChannelState {
    spec: ChannelSpec,
    /// fifo: unread messages (by the slowest reader), oldest first; latest: at most one.
    buffer: VecDeque<Message>,
    /// fifo: position of the first message of `buffer` (messages stored before it).
    first: u64,
    /// fifo: messages stored so far (written and not rejected).
    stored: u64,
    readers: Vec<Reader>,
    written: u64,
    reads: u64,
    lost: u64,
    /// latest: whether any reader read the current message.
    latest_read: bool,
    /// Messages written before a resume and dropped unread for a restartable reader.
    stale: u64,
}

/// Outcome of a write.
pub enum Write {
    Stored(u64),
    /// The message (id) was rejected by a full fifo (`overflow: drop_newest`).
    Rejected(u64),
    /// Stored (first id), overwriting the unread message (second id) of a latest
    /// channel, or dropping the oldest unread one of a full fifo (`drop_oldest`).
    Overwrote(u64, u64),
    /// A full fifo with `overflow: block`: nothing written, the writer waits.
    Full,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ChannelStats {
    pub name: String,
    pub kind: String,
    pub written: u64,
    pub read: u64,
    /// Messages no simulated reader could get (a fifo write to a full ring, a latest
    /// message overwritten unread); 0 when no reader is simulated (`readers` = 0): what
    /// an unsimulated reader would have read is unknown, for either kind.
    pub lost: u64,
    /// Messages written before a resume that a restartable reader never got (the
    /// stale/fresh rule); not losses.
    #[serde(skip_serializing_if = "is_zero")]
    pub stale: u64,
    /// Readers the simulation runs (tasks reading the channel).
    pub readers: usize,
}

/// End-to-end statistics of the data flowing from one source task to one sink task.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ChainStats {
    /// `source -> sink`, each as `partition/task`.
    pub name: String,
    pub source: String,
    pub sink: String,
    /// Source jobs whose data entered a channel.
    pub produced: u64,
    /// Source jobs whose data reached the sink.
    pub delivered: u64,
    /// Source jobs older than the newest delivered one that never reached the sink.
    pub lost: u64,
    pub min_delay_ns: Option<Nanos>,
    pub max_delay_ns: Option<Nanos>,
    pub mean_delay_ns: Option<f64>,
    /// Delivered messages per second of simulated time.
    pub throughput_per_s: f64,
}

#[derive(Default)]
struct Chain {
    delivered: u64,
    lost: u64,
    last_seq: Option<u64>,
    min: Option<Nanos>,
    max: Option<Nanos>,
    sum: u128,
}

impl ChannelState {
    /// The position of the oldest message a reader has not read (with no reader, the
    /// next one to be stored).
    fn oldest_unread(&self) -> u64 {
        let next = self.readers.iter().map(|r| r.next);
        next.min().unwrap_or(self.stored)
    }

    /// Forgets the messages every reader has read.
    fn drop_read(&mut self) {
        let oldest = self.oldest_unread();
        while self.first < oldest {
            self.buffer.pop_front();
            self.first += 1;
        }
    }

    /// A fifo holding `depth` messages its slowest reader has not read.
    fn is_full(&self) -> bool {
        self.stored - self.oldest_unread() >= self.spec.depth as u64
    }

    /// Drops the oldest message the slowest readers have not read (`drop_oldest`): they
    /// skip it. Returns its id.
    fn evict_oldest(&mut self) -> u64 {
        let oldest = self.oldest_unread();
        let id = self.buffer[(oldest - self.first) as usize].id;
        for r in self.readers.iter_mut().filter(|r| r.next == oldest) {
            r.next += 1;
        }
        self.drop_read();
        id
    }
}

/// All channels and chain bookkeeping.
pub struct Channels {
    channels: Vec<ChannelState>,
    chains: BTreeMap<(u32, u32), Chain>,
    produced: BTreeMap<u32, u64>,
}

impl Channels {
    /// `readers[c]`: the tasks that read channel `c`.
    pub fn new(specs: &[ChannelSpec], readers: Vec<Vec<u32>>) -> Channels {
        let channels = specs
            .iter()
            .zip(readers)
            .map(|(spec, readers)| ChannelState {
                spec: spec.clone(),
                buffer: VecDeque::new(),
                first: 0,
                stored: 0,
                readers: readers
                    .into_iter()
                    .map(|task| Reader {
                        task,
                        next: 0,
                        fresh_from: 0,
                    })
                    .collect(),
                written: 0,
                reads: 0,
                lost: 0,
                latest_read: false,
                stale: 0,
            })
            .collect();
        Channels {
            channels,
            chains: BTreeMap::new(),
            produced: BTreeMap::new(),
        }
    }

    pub fn name(&self, channel: usize) -> &bulkhead_trace::Name {
        &self.channels[channel].spec.name
    }

    /// `task` reads `channel`: the next fifo message, or the newest latest message
    /// (possibly one it read before). `None` when there is nothing to read.
    pub fn read(&mut self, channel: usize, task: u32) -> Option<Message> {
        let ch = &mut self.channels[channel];
        let r = ch.readers.iter().position(|r| r.task == task)?;
        let message = match ch.spec.kind {
            ChannelKind::Fifo => {
                let next = ch.readers[r].next;
                let message = ch.buffer.get((next - ch.first) as usize)?.clone();
                ch.readers[r].next = next + 1;
                ch.drop_read();
                message
            }
            ChannelKind::Latest => {
                let message = ch.buffer.back()?.clone();
                if message.id < ch.readers[r].fresh_from {
                    return None;
                }
                ch.latest_read = true;
                message
            }
        };
        ch.reads += 1;
        Some(message)
    }

    /// The stale/fresh rule at a resume: `task` (restartable) never gets a message of
    /// `channel` written before now; the unread ones are dropped for it and counted.
    pub fn drop_stale(&mut self, channel: usize, task: u32) {
        let ch = &mut self.channels[channel];
        let Some(r) = ch.readers.iter().position(|r| r.task == task) else {
            return;
        };
        match ch.spec.kind {
            ChannelKind::Fifo => {
                ch.stale += ch.stored - ch.readers[r].next;
                ch.readers[r].next = ch.stored;
                ch.drop_read();
            }
            ChannelKind::Latest => {
                ch.stale += !ch.buffer.is_empty() as u64;
                ch.readers[r].fresh_from = ch.written;
            }
        }
    }

    /// Writes a message with `origins` to `channel`; a full fifo applies the channel's
    /// overflow rule (the one `run` applies: `bulkhead_chan`'s fifo).
    pub fn write(&mut self, channel: usize, origins: Rc<[Origin]>) -> Write {
        let ch = &mut self.channels[channel];
        let full = ch.spec.kind == ChannelKind::Fifo && ch.is_full();
        if full && ch.spec.overflow == Overflow::Block {
            return Write::Full;
        }
        let id = ch.written;
        ch.written += 1;
        match ch.spec.kind {
            ChannelKind::Fifo => {
                let mut evicted = None;
                if full {
                    ch.lost += 1;
                    match ch.spec.overflow {
                        Overflow::DropOldest => evicted = Some(ch.evict_oldest()),
                        _ => return Write::Rejected(id),
                    }
                }
                ch.stored += 1;
                if ch.readers.is_empty() {
                    ch.first = ch.stored;
                    return Write::Stored(id);
                }
                ch.buffer.push_back(Message { id, origins });
                match evicted {
                    Some(old) => Write::Overwrote(id, old),
                    None => Write::Stored(id),
                }
            }
            ChannelKind::Latest => {
                let previous = ch.buffer.pop_back();
                ch.buffer.push_back(Message { id, origins });
                let unread = !std::mem::replace(&mut ch.latest_read, false);
                match previous {
                    Some(p) if unread && !ch.readers.is_empty() => {
                        ch.lost += 1;
                        Write::Overwrote(id, p.id)
                    }
                    _ => Write::Stored(id),
                }
            }
        }
    }

    /// Messages `channel` takes before a writer must wait: the free slots of a fifo
    /// with `overflow: block` and a simulated reader; unlimited otherwise.
    pub fn room(&self, channel: usize) -> u64 {
        let ch = &self.channels[channel];
        if ch.spec.kind != ChannelKind::Fifo
            || ch.spec.overflow != Overflow::Block
            || ch.readers.is_empty()
        {
            return u64::MAX;
        }
        (ch.spec.depth as u64).saturating_sub(ch.stored - ch.oldest_unread())
    }

    /// A source task's job produced data that entered a channel.
    pub fn produced(&mut self, source: u32) {
        *self.produced.entry(source).or_default() += 1;
    }

    /// A sink task completed a job at `t` that read data of `origins`; returns the
    /// origins it delivered for the first time with their end-to-end delays.
    pub fn deliver(&mut self, sink: u32, origins: &[Origin], t: Nanos) -> Vec<(Origin, Nanos)> {
        let mut fresh = Vec::new();
        for o in origins {
            let chain = self.chains.entry((o.source, sink)).or_default();
            if chain.last_seq.is_some_and(|last| o.seq <= last) {
                continue;
            }
            chain.lost += o.seq - chain.last_seq.map_or(0, |l| l + 1);
            chain.last_seq = Some(o.seq);
            let delay = t - o.t;
            chain.delivered += 1;
            chain.min = Some(chain.min.map_or(delay, |m| m.min(delay)));
            chain.max = Some(chain.max.map_or(delay, |m| m.max(delay)));
            chain.sum += delay as u128;
            fresh.push((*o, delay));
        }
        fresh
    }

    pub fn channel_stats(&self) -> Vec<ChannelStats> {
        self.channels
            .iter()
            .map(|c| ChannelStats {
                name: c.spec.name.to_string(),
                kind: match c.spec.kind {
                    ChannelKind::Fifo => "fifo".into(),
                    ChannelKind::Latest => "latest".into(),
                },
                written: c.written,
                read: c.reads,
                lost: c.lost,
                stale: c.stale,
                readers: c.readers.len(),
            })
            .collect()
    }

    /// Chain statistics; `name(task)` renders a task as `partition/task`.
    pub fn chain_stats(&self, duration: Nanos, name: impl Fn(u32) -> String) -> Vec<ChainStats> {
        self.chains
            .iter()
            .map(|(&(source, sink), c)| {
                let produced = self.produced.get(&source).copied().unwrap_or(0);
                let (source, sink) = (name(source), name(sink));
                ChainStats {
                    name: format!("{source} -> {sink}"),
                    produced,
                    source,
                    sink,
                    delivered: c.delivered,
                    lost: c.lost,
                    min_delay_ns: c.min,
                    max_delay_ns: c.max,
                    mean_delay_ns: (c.delivered > 0).then(|| c.sum as f64 / c.delivered as f64),
                    throughput_per_s: if duration == 0 {
                        0.0
                    } else {
                        c.delivered as f64 * 1e9 / duration as f64
                    },
                }
            })
            .collect()
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
