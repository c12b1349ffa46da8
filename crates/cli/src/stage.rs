//! `bulkhead stage`: the program `bulkhead run` starts for a pipeline stage that names
//! no `cmd` (Boomerang II-B, III-B: a tuned pipe). Once per activation it takes in its
//! messages (a source stage samples its input: one new message stamped with the job's
//! release; other stages read up to `--messages` over all their fifo inputs, one of
//! each in turn, as `sim` does, and the freshest message of each four-slot input),
//! spends `--work` of CPU time per message (counting its own costs since its last job
//! ended), and forwards each message, origin stamp and sequence number unchanged, to
//! every output. A full fifo output follows the channel's overflow rule (its header:
//! the writer waits, or the channel drops a message). A sink stage measures each
//! message's end-to-end delay (its completion minus the origin stamp) and the sequence
//! numbers it never saw (lost), and publishes them as the task's named counters, which
//! the supervisor writes to the schedule log and `run` sums per pipeline.
//!
//! A stage on a `can:BUS:IDS` endpoint exchanges frames with the CAN gateway through
//! the channel the supervisor handed it (`--can-input`, `--can-output`): a source on a
//! bus takes in the frames of its ids instead of sampling (the message's origin is the
//! frame's bus timestamp, so the delay counts the gateway's reader too), and a stage
//! with a bus output sends each message as a frame of its id (8 data bytes: the
//! sequence number, little-endian) for the gateway's writer to put on the bus.
//!
//! With `--baseline` the same stage runs without bulkhead (the experiment's comparison,
//! Boomerang IV-A): a plain process released by `clock_nanosleep`, exchanging messages
//! over named pipes (`--input`/`--output` are then paths of FIFOs), printing its
//! counters as one JSON line on SIGTERM.

use crate::out::outln;
use bulkhead_can::{gateway, CanId, Frame};
use bulkhead_chan::{Channel, Receiver, Sender};
use bulkhead_gateway_protocol::WIRE_SIZE;
use bulkhead_task::clock::{burn_cpu_until, now_ns, thread_cpu_ns};
use bulkhead_task::{Counter, Task};
use std::cell::{Cell, RefCell};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The most sources one message carries samples of: a stage merges the freshest message
/// of each four-slot input into one (Boomerang III-B, `RT_ASYNC`: a stage reads the
/// newest value of each input), as `sim` does; a pipeline has at most this many sources
/// ([`crate::run_pipes::runnable`]).
pub const MAX_ORIGINS: usize = 8;

/// Bytes of an origin: sequence number, origin stamp (CLOCK_MONOTONIC ns), source index
/// (`u32::MAX` in a slot without one), 4 bytes unused. A message is as many origins as its
/// channel's message size holds: a declared channel of 24 bytes carries one.
const ORIGIN_SIZE: usize = 24;

/// Bytes of a pipeline's messages: [`MAX_ORIGINS`] origins.
pub const MESSAGE_SIZE: usize = MAX_ORIGINS * ORIGIN_SIZE;

/// The `source` of an origin slot without one.
const NO_SOURCE: u32 = u32::MAX;

/// The counters a stage publishes (schedule log `counter` events, `run`'s summary); all
/// grow but `min_e2e_ns`, which falls when a faster message arrives. `lost` is counted
/// by every stage that is not a source: the sequence numbers its inputs never gave it,
/// so the stage where a pipeline's loss first shows is the buffer (or the source's
/// `skipped`) that lost it. `out` and the delays are a sink's; `skipped` is a source's:
/// the frames it took in but did not pass on (a four-slot source passes only the newest).
/// `max_job_cpu_ns` and `over_budget` are the stage's own view of its cost: the CPU time
/// of its thread from the end of one job's work to the end of the next's (the waking,
/// reading, work and writing in between), its maximum and how many jobs it exceeded
/// `--budget`.
pub const COUNTERS: [&str; 11] = [
    "in",
    "out",
    "lost",
    "min_e2e_ns",
    "max_e2e_ns",
    "sum_e2e_ns",
    "out_of_order",
    "full",
    "skipped",
    "max_job_cpu_ns",
    "over_budget",
];

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Pipeline name (for messages)
    #[arg(long)]
    pipeline: String,
    /// Stage name (for messages)
    #[arg(long)]
    stage: String,
    /// CPU time spent per message, ns, counting the job's own costs since the last job
    #[arg(long, value_name = "NS")]
    work: u64,
    /// Messages taken per activation (m), over all fifo inputs together
    #[arg(long, default_value_t = 1)]
    messages: u32,
    /// The stage's budget per period, ns: jobs whose own CPU time exceeds it are counted
    /// (`over_budget`)
    #[arg(long, value_name = "NS")]
    budget: Option<u64>,
    /// This stage is a source: each activation samples one new message (the index of
    /// the source in its pipeline goes into the message)
    #[arg(long, value_name = "INDEX")]
    source: Option<u32>,
    /// With --baseline: a source samples only from this long after its first release on,
    /// once every stage has started, ns (under bulkhead the stages' ready handshake
    /// starts it: --ready-from, --ready-to)
    #[arg(long, value_name = "NS", default_value_t = 0, requires = "baseline")]
    start_after: u64,
    /// A `.ready` channel from a consumer: this stage is ready once each has said so
    /// (Boomerang's Start-of-Task, from the sinks back to the sources)
    #[arg(long, value_name = "CHANNEL")]
    ready_from: Vec<String>,
    /// A `.ready` channel to a producer: said once this stage is ready
    #[arg(long, value_name = "CHANNEL")]
    ready_to: Vec<String>,
    /// This stage is a sink: it measures every message's end-to-end delay and loss
    #[arg(long)]
    sink: bool,
    /// Input channel (its `BULKHEAD_CHAN_` name; with --baseline a FIFO path)
    #[arg(long)]
    input: Vec<String>,
    /// Output channel (its `BULKHEAD_CHAN_` name; with --baseline a FIFO path)
    #[arg(long)]
    output: Vec<String>,
    /// The variable naming this stage's channel from the CAN gateway's reader (a
    /// `can:BUS:IDS` input; with --source, messages are its frames)
    #[arg(long, value_name = "VAR", requires = "can_input_ids")]
    can_input: Option<String>,
    /// The CAN ids taken in from --can-input (others are skipped)
    #[arg(long, value_name = "ID,...", value_delimiter = ',', value_parser = parse_can_id)]
    can_input_ids: Vec<CanId>,
    /// A four-slot pipeline's source: each activation takes every waiting frame of its
    /// ids and passes on only the newest (the others are numbered, so the sink counts
    /// them as lost), instead of up to --messages oldest first
    #[arg(long, requires = "can_input")]
    can_input_latest: bool,
    /// The variable naming this stage's channel to the CAN gateway's writer (a
    /// `can:BUS:IDS` output)
    #[arg(long, value_name = "VAR", requires = "can_output_id")]
    can_output: Option<String>,
    /// The CAN id of the frames sent to --can-output
    #[arg(long, value_name = "ID", value_parser = parse_can_id)]
    can_output_id: Option<CanId>,
    /// Run without bulkhead: released every PERIOD ns by clock_nanosleep, pipes for I/O
    #[arg(long, value_name = "PERIOD")]
    baseline: Option<u64>,
    /// With --baseline: take only the newest message waiting in each input pipe (the
    /// four-slot semantics over a pipe), dropping the older ones
    #[arg(long, requires = "baseline")]
    latest: bool,
}

type R<T> = Result<T, String>;

/// A CAN id, hex (`0x1A0`) or decimal.
fn parse_can_id(text: &str) -> R<CanId> {
    let n = match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => text.parse(),
    };
    n.ok()
        .and_then(CanId::from_raw)
        .ok_or_else(|| format!("`{text}` is not a CAN id"))
}

/// One source's sample a message carries: its sequence number at the source, the
/// release of the source's job that took it in, and the source's index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Origin {
    seq: u64,
    origin_ns: u64,
    source: u32,
}

/// A message as it travels: the samples of one source, or of several merged from
/// four-slot inputs (the newest per source).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Message {
    origins: [Origin; MAX_ORIGINS],
    /// How many of `origins` it carries; [`END_MARK`] for the end of a stream.
    len: u32,
}

/// The `len` of [`Message::END`].
const END_MARK: u32 = u32::MAX;

impl Message {
    /// The end of a stream (End-of-Task): the producer has stopped.
    const END: Message = Message {
        origins: [Origin {
            seq: 0,
            origin_ns: 0,
            source: 0,
        }; MAX_ORIGINS],
        len: END_MARK,
    };

    /// A message of one sample.
    fn of(origin: Origin) -> Message {
        let mut origins = [Origin::default(); MAX_ORIGINS];
        origins[0] = origin;
        Message { origins, len: 1 }
    }

    fn is_end(&self) -> bool {
        self.len == END_MARK
    }

    fn origins(&self) -> &[Origin] {
        match self.is_end() {
            true => &[],
            false => &self.origins[..self.len as usize],
        }
    }

    /// Adds `other`'s origins, keeping the newest sample per source (`sim`'s
    /// `merge_origins`). Precondition: at most [`MAX_ORIGINS`] sources in all.
    fn merge(&mut self, other: &Message) {
        for o in other.origins() {
            let n = self.len as usize;
            match self.origins[..n].iter_mut().find(|m| m.source == o.source) {
                Some(m) if m.seq < o.seq => *m = *o,
                Some(_) => {}
                None if n < MAX_ORIGINS => {
                    self.origins[n] = *o;
                    self.len += 1;
                }
                None => {}
            }
        }
    }

    /// The message in `size` bytes (a multiple of [`ORIGIN_SIZE`]): as many of its
    /// origins as fit, the other slots without a source; the end of a stream is a first
    /// origin of sequence number `u64::MAX`.
    fn encode(&self, size: usize) -> [u8; MESSAGE_SIZE] {
        let mut b = [0u8; MESSAGE_SIZE];
        for i in 0..size.min(MESSAGE_SIZE) / ORIGIN_SIZE {
            let o = match (self.is_end(), self.origins().get(i)) {
                (true, _) => Origin {
                    seq: u64::MAX,
                    ..Origin::default()
                },
                (false, Some(o)) => *o,
                (false, None) => Origin {
                    source: NO_SOURCE,
                    ..Origin::default()
                },
            };
            let at = i * ORIGIN_SIZE;
            b[at..at + 8].copy_from_slice(&o.seq.to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&o.origin_ns.to_le_bytes());
            b[at + 16..at + 20].copy_from_slice(&o.source.to_le_bytes());
        }
        b
    }

    /// The message of `b`, the bytes of one channel message.
    fn decode(b: &[u8]) -> Message {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        if b.len() >= ORIGIN_SIZE && u64_at(0) == u64::MAX {
            return Message::END;
        }
        let mut m = Message {
            origins: [Origin::default(); MAX_ORIGINS],
            len: 0,
        };
        for at in (0..b.len().min(MESSAGE_SIZE) / ORIGIN_SIZE).map(|i| i * ORIGIN_SIZE) {
            let o = Origin {
                seq: u64_at(at),
                origin_ns: u64_at(at + 8),
                source: u32_at(at + 16),
            };
            if o.source == NO_SOURCE {
                break;
            }
            m.origins[m.len as usize] = o;
            m.len += 1;
        }
        m
    }
}

enum Input {
    Chan {
        rx: Box<Receiver>,
        fifo: bool,
        /// The message read last (boxed: a message is 200 bytes).
        last: Box<Option<Message>>,
        /// The channel's message size.
        size: usize,
    },
    /// A named pipe; `latest`: only the newest message waiting is taken.
    Pipe { file: File, latest: bool },
}

enum Output {
    /// A channel and its message size.
    Chan(Box<Sender>, usize),
    Pipe(File),
    /// The channel to the CAN gateway's writer, and the id of the frames sent.
    Can(Box<Sender>, CanId),
}

/// A source's `can:` input: the gateway reader's channel to the stage, and its ids.
struct CanInput {
    rx: Receiver,
    ids: Vec<CanId>,
}

impl CanInput {
    /// The bus timestamps (CLOCK_MONOTONIC ns) of the waiting frames of the stage's
    /// ids, oldest first, at most `max`; the frames of other ids are skipped.
    fn take(&mut self, max: usize) -> Vec<u64> {
        let mut buf = [0u8; WIRE_SIZE];
        let mut out = Vec::new();
        // The gateway stamps frames with CLOCK_REALTIME.
        let realtime = bulkhead_os::clock::realtime_ns();
        let offset = realtime.saturating_sub(now_ns());
        while out.len() < max && self.rx.try_read(&mut buf).is_ok() {
            if let Ok((t_ns, _, frame)) = gateway::decode(&buf) {
                if self.ids.contains(&frame.id()) {
                    out.push(t_ns.saturating_sub(offset));
                }
            }
        }
        out
    }
}

/// Takes this job's messages from `inputs`: one merging the freshest message of each
/// four-slot input (and of each pipe with `--latest`) when one of them is new, as
/// `sim` merges its `latest` reads, and up to `m` over the fifo inputs, one of each in
/// turn. Marks in `ended` the inputs whose end marker came.
fn take_all(inputs: &mut [Input], ended: &mut [bool], m: u32, out: &mut Vec<Message>) {
    let mut taken = 0;
    let (mut merged, mut fresh) = (None::<Message>, false);
    for (input, done) in inputs.iter_mut().zip(ended.iter_mut()) {
        if input.is_fifo() {
            continue;
        }
        match input.newest() {
            Some((msg, _)) if msg.is_end() => *done = true,
            Some((msg, new)) => {
                fresh |= new;
                merged.get_or_insert(Message { len: 0, ..msg }).merge(&msg);
            }
            None => {}
        }
    }
    out.extend(merged.filter(|_| fresh));
    loop {
        let before = taken;
        for (input, done) in inputs.iter_mut().zip(ended.iter_mut()) {
            if taken < m && input.is_fifo() {
                let n = out.len();
                input.take(1, out);
                taken += (out.len() - n) as u32;
                *done |= out[n..].iter().any(Message::is_end);
            }
        }
        if taken == before || taken >= m {
            break;
        }
    }
}

impl Input {
    /// Whether messages queue in it (a fifo channel or a pipe without `--latest`).
    fn is_fifo(&self) -> bool {
        match self {
            Input::Chan { fifo, .. } => *fifo,
            Input::Pipe { latest, .. } => !*latest,
        }
    }

    /// Up to `m` messages of a fifo or pipe (nothing from a four-slot input).
    fn take(&mut self, m: u32, out: &mut Vec<Message>) {
        let mut buf = [0u8; MESSAGE_SIZE];
        for _ in 0..m {
            let read = match self {
                Input::Chan {
                    rx,
                    fifo: true,
                    size,
                    ..
                } => rx.try_read(&mut buf[..*size]).ok().map(|()| *size),
                Input::Pipe {
                    file,
                    latest: false,
                } => file.read_exact(&mut buf).ok().map(|()| MESSAGE_SIZE),
                _ => None,
            };
            let Some(size) = read else {
                break;
            };
            out.push(Message::decode(&buf[..size]));
        }
    }

    /// The freshest message of a four-slot input (or of a pipe with `--latest`, whose
    /// older ones are dropped) and whether it was not read before; `None` when there
    /// is none yet.
    fn newest(&mut self) -> Option<(Message, bool)> {
        let mut buf = [0u8; MESSAGE_SIZE];
        match self {
            Input::Chan { rx, last, size, .. } => {
                rx.try_read(&mut buf[..*size]).ok()?;
                let msg = Message::decode(&buf[..*size]);
                let new = **last != Some(msg);
                **last = Some(msg);
                Some((msg, new))
            }
            Input::Pipe { file, .. } => {
                let mut newest = None;
                while file.read_exact(&mut buf).is_ok() {
                    newest = Some((Message::decode(&buf), true));
                }
                newest
            }
        }
    }
}

impl Output {
    /// Whether the message went in. A fifo follows its overflow rule: with `block`
    /// (Boomerang's `RT_FIFO`) the writer waits while it is full, until there is room or
    /// `stop` is set; with a drop rule the channel drops a message and counts it; a
    /// four-slot buffer always takes it; a (non-blocking) pipe refuses it when full.
    fn put(&mut self, msg: &Message, stop: &AtomicBool) -> bool {
        let wait = std::time::Duration::from_millis(50);
        match self {
            Output::Chan(tx, size) => loop {
                match tx.write_timeout(&msg.encode(*size)[..*size], wait) {
                    Ok(()) => return true,
                    Err(bulkhead_chan::SendError::Timeout) if !stop.load(Relaxed) => continue,
                    Err(_) => return false,
                }
            },
            Output::Pipe(f) => f.write_all(&msg.encode(MESSAGE_SIZE)).is_ok(),
            Output::Can(tx, id) => msg
                .origins()
                .first()
                .and_then(|o| Frame::new(*id, &o.seq.to_le_bytes()).ok())
                .and_then(|frame| gateway::encode(0, 0, &frame))
                .is_some_and(|wire| tx.try_write(&wire).is_ok()),
        }
    }
}

/// What a stage counts, in [`COUNTERS`] order.
#[derive(Default)]
struct Counts {
    values: [u64; 11],
    /// Per source: the last sequence number seen at this sink.
    last_seq: Vec<Option<u64>>,
    /// Whether to keep each delivered message in `done` (a supervised sink).
    keep: bool,
    /// The messages delivered since they were last reported: (id, origin stamp,
    /// completion). Cleared, not reallocated, after each job.
    done: Vec<(u64, u64, u64)>,
}

/// A sample's id in the run's `message` events: the source stage's index in the top
/// 16 bits, its sequence number below.
fn message_id(msg: &Origin) -> u64 {
    (u64::from(msg.source) << 48) | (msg.seq & ((1 << 48) - 1))
}

impl Counts {
    /// Counts the sequence numbers of `msg`'s source this stage never saw before it
    /// (`lost`) or an old one arriving late (`out_of_order`, and false); false, not
    /// counted, for the last one seen again (a merged message carries the newest
    /// sample of each four-slot input, new or not).
    fn seen(&mut self, msg: &Origin) -> bool {
        let i = msg.source as usize;
        if self.last_seq.len() <= i {
            self.last_seq.resize(i + 1, None);
        }
        match self.last_seq[i] {
            Some(last) if msg.seq == last => return false,
            Some(last) if msg.seq < last => {
                self.values[6] += 1;
                return false;
            }
            Some(last) => self.values[2] += msg.seq - last - 1,
            None => self.values[2] += msg.seq,
        }
        self.last_seq[i] = Some(msg.seq);
        true
    }

    fn delivered(&mut self, msg: &Origin, now: u64) {
        if !self.seen(msg) {
            return;
        }
        if self.keep {
            self.done.push((message_id(msg), msg.origin_ns, now));
        }
        let e2e = now.saturating_sub(msg.origin_ns);
        let v = &mut self.values;
        v[1] += 1;
        v[3] = if v[1] == 1 { e2e } else { v[3].min(e2e) };
        v[4] = v[4].max(e2e);
        v[5] += e2e;
    }
}

pub fn run(args: Args) -> ExitCode {
    match stage(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "bulkhead stage: pipeline `{}`, stage `{}`: {e}",
                args.pipeline, args.stage
            );
            ExitCode::from(1)
        }
    }
}

fn stage(args: &Args) -> R<()> {
    let stop = bulkhead_can::service::stop_on_signals().map_err(|e| e.to_string())?;
    let (mut inputs, mut outputs) = open_ends(args)?;
    let can_input = RefCell::new(match &args.can_input {
        Some(var) => Some(CanInput {
            rx: can_receiver(var)?,
            ids: args.can_input_ids.clone(),
        }),
        None => None,
    });
    let mut ended = vec![false; inputs.len()];
    let rest_cpu = Cell::new(thread_cpu_ns());
    let job = |release_ns: u64, phase: Phase, counts: &mut Counts| -> bool {
        if phase == Phase::Closing {
            for o in outputs.iter_mut().filter(|o| !matches!(o, Output::Can(..))) {
                o.put(&Message::END, stop);
            }
            return true;
        }
        let mut msgs = Vec::new();
        let origins = match (&mut *can_input.borrow_mut(), args.source) {
            // Frames before the start are dropped: the pipeline was not running.
            (Some(bus), Some(_)) if phase == Phase::Waiting => {
                bus.take(usize::MAX);
                Vec::new()
            }
            (Some(bus), Some(_)) if phase == Phase::Running => match args.can_input_latest {
                true => bus.take(usize::MAX),
                false => bus.take(args.messages as usize),
            },
            (None, Some(_)) if phase == Phase::Running => vec![release_ns],
            _ => Vec::new(),
        };
        // Four-slot: only the newest frame goes on; the older ones are numbered too, so
        // that the sink counts them as lost.
        let passed = match args.can_input_latest {
            true => origins.len().min(1),
            false => origins.len(),
        };
        let skipped = origins.len() - passed;
        counts.values[8] += skipped as u64;
        for (k, origin_ns) in origins.into_iter().enumerate() {
            if k >= skipped {
                msgs.push(Message::of(Origin {
                    seq: counts.values[0],
                    origin_ns,
                    source: args.source.unwrap_or(0),
                }));
            }
            counts.values[0] += 1;
        }
        take_all(&mut inputs, &mut ended, args.messages, &mut msgs);
        msgs.retain(|m| !m.is_end());
        // The i-th message's work ends `(i + 1) * work` after the previous job ended: the
        // stage's own costs (waking, reading, writing, the task library) come out of its
        // work, so a job stays within the budget it was solved for (`wcet` per message).
        let since = rest_cpu.get();
        for (i, msg) in msgs.iter().enumerate() {
            burn_cpu_until(since + (i as u64 + 1) * args.work);
            for o in msg.origins() {
                if args.sink {
                    counts.delivered(o, now_ns());
                } else if args.source.is_none() {
                    counts.seen(o);
                }
            }
            for o in &mut outputs {
                if !o.put(msg, stop) {
                    counts.values[7] += 1;
                }
            }
        }
        let end = thread_cpu_ns();
        if phase != Phase::Waiting || !msgs.is_empty() {
            let used = end.saturating_sub(since);
            counts.values[9] = counts.values[9].max(used);
            counts.values[10] += u64::from(args.budget.is_some_and(|b| used > b));
        }
        rest_cpu.set(end);
        let drained = ended.iter().all(|&e| e);
        phase == Phase::Ending || (phase == Phase::Draining && drained)
    };
    match args.baseline {
        Some(period) => {
            baseline(args, period, stop, job);
            Ok(())
        }
        None => supervised(args, stop, &can_input, job),
    }
}

/// The stage's channels (or, for a baseline, its pipes), in and out; the CAN gateway's
/// channel as one more output if it has one.
fn open_ends(args: &Args) -> R<(Vec<Input>, Vec<Output>)> {
    let (inputs, mut outputs) = match args.baseline {
        Some(_) => (
            args.input
                .iter()
                .map(|p| pipe_in(p, args.latest))
                .collect::<R<Vec<_>>>()?,
            args.output
                .iter()
                .map(|p| pipe_out(p))
                .collect::<R<Vec<_>>>()?,
        ),
        None => (
            args.input
                .iter()
                .map(|n| chan_in(n))
                .collect::<R<Vec<_>>>()?,
            args.output
                .iter()
                .map(|n| chan_out(n))
                .collect::<R<Vec<_>>>()?,
        ),
    };
    if let (Some(var), Some(id)) = (&args.can_output, args.can_output_id) {
        outputs.push(Output::Can(Box::new(can_sender(var)?), id));
    }
    Ok((inputs, outputs))
}

/// Runs `job` every `period` on its own clock until `stop` (the baseline, outside
/// bulkhead), then prints the counters as one JSON line.
fn baseline(
    args: &Args,
    period: u64,
    stop: &AtomicBool,
    mut job: impl FnMut(u64, Phase, &mut Counts) -> bool,
) {
    let mut counts = Counts::default();
    let start = now_ns() + args.start_after;
    let mut next = now_ns() + period;
    while !stop.load(Relaxed) {
        sleep_until(next);
        let phase = match next >= start {
            true => Phase::Running,
            false => Phase::Waiting,
        };
        job(next, phase, &mut counts);
        next += period;
    }
    let fields: Vec<String> = COUNTERS
        .iter()
        .zip(counts.values)
        .map(|(n, v)| format!("\"{n}\":{v}"))
        .collect();
    outln!(
        "{{\"pipeline\":\"{}\",\"stage\":\"{}\",{}}}",
        args.pipeline,
        args.stage,
        fields.join(",")
    );
}

/// Runs `job` as an rt task under bulkhead, after the ready hand-shake with its
/// pipeline's neighbours.
fn supervised(
    args: &Args,
    stop: &AtomicBool,
    can_input: &RefCell<Option<CanInput>>,
    job: impl FnMut(u64, Phase, &mut Counts) -> bool,
) -> R<()> {
    let handshake = Handshake {
        from: args
            .ready_from
            .iter()
            .map(|n| ready_in(n))
            .collect::<R<_>>()?,
        to: args
            .ready_to
            .iter()
            .map(|n| ready_out(n))
            .collect::<R<_>>()?,
        unfed_since: None,
        fed: Box::new(|| {
            let input = can_input.borrow();
            input.as_ref().is_none_or(|c| c.rx.writer_attached())
        }),
        ready: false,
    };
    // One write per line: the stages share the supervisor's stderr, and
    // `eprintln!` writes a line in pieces that other stages' lines split.
    let say = |what: &str| {
        let line = format!(
            "bulkhead stage: pipeline `{}`, stage `{}`: {what}\n",
            args.pipeline, args.stage
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
    };
    periodic(stop, handshake, say, job)
}

/// Where a stage is in its pipeline's life (Boomerang's Start-of-Task and End-of-Task).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not every consumer is ready yet: a source takes nothing in.
    Waiting,
    Running,
    /// Stopping: forwarding what is left until every input has ended.
    Draining,
    /// Stopping now, whatever is left.
    Ending,
    /// Ended (and said so): the end marker goes to every output.
    Closing,
}

/// Start-of-Task from the sinks back to the sources: a stage is ready once it runs (it
/// attached and opened its channels), what feeds it from outside the pipeline is
/// attached (the CAN gateway's reader of a `can:` input, which attaches to the bus
/// before it opens its channels), and each of its consumers has said it is ready on
/// the edge's `.ready` channel; it then says so to each of its producers. A source
/// takes messages in only once ready, so no stage misses the first messages, and a
/// frame put on the bus after the source said it is ready reaches the source.
struct Handshake<'a> {
    from: Vec<Receiver>,
    to: Vec<Sender>,
    /// Whether the stage's outside feed is attached (true when it has none).
    fed: Box<dyn Fn() -> bool + 'a>,
    /// When the stage first found its feed not attached, until it has said so.
    unfed_since: Option<u64>,
    ready: bool,
}

/// How long a stage waits for its feed before it says that it waits.
const FEED_PATIENCE_NS: u64 = 1_000_000_000;

impl Handshake<'_> {
    /// Whether the stage is ready (checked once per job until it is).
    fn poll(&mut self) -> bool {
        if self.ready {
            return true;
        }
        if !(self.fed)() {
            self.unfed_since.get_or_insert_with(now_ns);
            return false;
        }
        self.unfed_since = None;
        let mut buf = [0u8; READY_SIZE];
        if !self.from.iter_mut().all(|rx| rx.try_read(&mut buf).is_ok()) {
            return false;
        }
        for tx in &mut self.to {
            let _ = tx.try_write(&[1u8; READY_SIZE]);
        }
        self.ready = true;
        true
    }

    /// True once, when the stage has waited [`FEED_PATIENCE_NS`] for its feed.
    fn feed_late(&mut self) -> bool {
        let late = self
            .unfed_since
            .is_some_and(|t| now_ns().saturating_sub(t) >= FEED_PATIENCE_NS);
        if late {
            // Said: a start in the far future is never late again.
            self.unfed_since = Some(u64::MAX);
        }
        late
    }
}

/// Bytes of a `.ready` message.
pub const READY_SIZE: usize = 8;

/// How long a stopping stage waits for the end of its inputs (the supervisor kills
/// what has not exited 1 s after asking it to stop).
const DRAIN_NS: u64 = 300_000_000;

/// Runs `job` once per activation of the supervisor's task until it asks to stop (or
/// SIGTERM), publishing the counts after each job; then End-of-Task: a source ends its
/// outputs at once, any other stage first forwards what its inputs still hold until
/// each has ended (at most [`DRAIN_NS`]), so the sources stop first and the messages in
/// flight drain through the pipeline. `say` reports `ready` and `ended`.
fn periodic(
    stop: &AtomicBool,
    mut handshake: Handshake,
    say: impl Fn(&str),
    mut job: impl FnMut(u64, Phase, &mut Counts) -> bool,
) -> R<()> {
    let mut task = Task::attach().map_err(|e| e.to_string())?;
    let slots = COUNTERS
        .iter()
        .map(|n| task.counter(n))
        .collect::<Result<Vec<Counter>, _>>()
        .map_err(|e| e.to_string())?;
    let mut counts = Counts {
        keep: true,
        ..Counts::default()
    };
    let publish = |task: &mut Task, counts: &mut Counts| {
        for (slot, v) in slots.iter().zip(counts.values) {
            task.set_counter(*slot, v);
        }
        for (id, origin_ns, done_ns) in counts.done.drain(..) {
            task.message_done(id, origin_ns, done_ns);
        }
    };
    while !stop.load(Relaxed) {
        let act = match task.wait_next_period() {
            Ok(act) => act,
            Err(bulkhead_task::Error::Stopped) => break,
            Err(e) => return Err(e.to_string()),
        };
        let phase = match (handshake.ready, handshake.poll()) {
            (false, true) => {
                say("ready");
                Phase::Running
            }
            (_, true) => Phase::Running,
            (_, false) => {
                if handshake.feed_late() {
                    say("waiting for the CAN gateway's reader to attach");
                }
                Phase::Waiting
            }
        };
        job(act.release_ns, phase, &mut counts);
        publish(&mut task, &mut counts);
    }
    let deadline = now_ns() + DRAIN_NS;
    while !job(now_ns(), Phase::Draining, &mut counts) {
        if now_ns() >= deadline {
            job(now_ns(), Phase::Ending, &mut counts);
            break;
        }
        sleep_until(now_ns() + 1_000_000);
    }
    publish(&mut task, &mut counts);
    // Said before the end goes out, so a consumer's `ended` always follows it.
    say(&format!("ended ({} messages out)", counts.values[1]));
    job(now_ns(), Phase::Closing, &mut counts);
    Ok(())
}

/// The receiving end of `.ready` channel `name`.
fn ready_in(name: &str) -> R<Receiver> {
    let c = Channel::open_env(name).map_err(|e| format!("ready {name}: {e}"))?;
    c.receiver().map_err(|e| format!("ready {name}: {e}"))
}

/// The sending end of `.ready` channel `name`.
fn ready_out(name: &str) -> R<Sender> {
    let c = Channel::open_env(name).map_err(|e| format!("ready {name}: {e}"))?;
    c.sender().map_err(|e| format!("ready {name}: {e}"))
}

fn chan_in(name: &str) -> R<Input> {
    let c = Channel::open_env(name).map_err(|e| format!("input {name}: {e}"))?;
    let fifo = c.meta().kind == bulkhead_chan::layout::Kind::Fifo;
    let size = message_size(&c).map_err(|e| format!("input {name}: {e}"))?;
    let mut rx = c.receiver().map_err(|e| format!("input {name}: {e}"))?;
    rx.set_spin(0);
    Ok(Input::Chan {
        rx: Box::new(rx),
        fifo,
        last: Box::new(None),
        size,
    })
}

/// The message size of `c`, if a message of origins fits it exactly: a multiple of
/// [`ORIGIN_SIZE`] up to [`MESSAGE_SIZE`].
fn message_size(c: &Channel) -> R<usize> {
    let size = c.meta().msg_size as usize;
    match size % ORIGIN_SIZE == 0 && (ORIGIN_SIZE..=MESSAGE_SIZE).contains(&size) {
        true => Ok(size),
        false => Err(format!(
            "message_size {size}: a stage's messages take a multiple of {ORIGIN_SIZE} bytes, at most {MESSAGE_SIZE}"
        )),
    }
}

fn chan_out(name: &str) -> R<Output> {
    let c = Channel::open_env(name).map_err(|e| format!("output {name}: {e}"))?;
    let size = message_size(&c).map_err(|e| format!("output {name}: {e}"))?;
    let mut tx = c.sender().map_err(|e| format!("output {name}: {e}"))?;
    tx.set_spin(0);
    Ok(Output::Chan(Box::new(tx), size))
}

/// The receiving end of the gateway channel named in `var`.
fn can_receiver(var: &str) -> R<Receiver> {
    let c = can_channel(var)?;
    let mut rx = c.receiver().map_err(|e| format!("CAN input {var}: {e}"))?;
    rx.set_spin(0);
    Ok(rx)
}

/// The sending end of the gateway channel named in `var`.
fn can_sender(var: &str) -> R<Sender> {
    let c = can_channel(var)?;
    c.sender().map_err(|e| format!("CAN output {var}: {e}"))
}

fn can_channel(var: &str) -> R<Channel> {
    let value = std::env::var(var).map_err(|_| format!("{var} is not set"))?;
    Channel::open_handed(&value).map_err(|e| format!("{var}: {e}"))
}

/// A FIFO opened for non-blocking reads.
fn pipe_in(path: &str, latest: bool) -> R<Input> {
    OpenOptions::new()
        .read(true)
        .custom_flags(bulkhead_os::fd::O_NONBLOCK)
        .open(path)
        .map(|file| Input::Pipe { file, latest })
        .map_err(|e| format!("input {path}: {e}"))
}

/// A FIFO opened read-write (so that opening does not wait for the reader), non-blocking.
fn pipe_out(path: &str) -> R<Output> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(bulkhead_os::fd::O_NONBLOCK)
        .open(path)
        .map(Output::Pipe)
        .map_err(|e| format!("output {path}: {e}"))
}

/// Sleeps until CLOCK_MONOTONIC reaches `t_ns` (or a signal arrives).
fn sleep_until(t_ns: u64) {
    let _ = bulkhead_os::clock::sleep_until_or_signal(t_ns);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let mut m = Message::of(Origin {
            seq: 7,
            origin_ns: 123_456_789,
            source: 2,
        });
        m.merge(&Message::of(Origin {
            seq: 3,
            origin_ns: 5,
            source: 0,
        }));
        assert_eq!(Message::decode(&m.encode(MESSAGE_SIZE)), m);
        assert_eq!(m.origins().len(), 2);
        let end = Message::END.encode(ORIGIN_SIZE);
        assert_eq!(Message::decode(&end[..ORIGIN_SIZE]), Message::END);
        // A 24-byte channel carries one origin, laid out as before merging.
        let one = m.encode(ORIGIN_SIZE);
        assert_eq!(one[0..8], 7u64.to_le_bytes());
        assert_eq!(
            Message::decode(&one[..ORIGIN_SIZE]).origins(),
            &m.origins()[..1]
        );
    }

    /// A join of two four-slot inputs (D of conformance's `pipes-four-slot-mimo`) takes
    /// one message carrying the newest sample of each source, as `sim` merges them, not
    /// two of which the four-slot output downstream keeps only the second.
    #[test]
    fn four_slot_inputs_merge_into_one_message_with_the_newest_per_source() {
        let chan = |n: &str| {
            let spec = bulkhead_chan::Spec::latest(n, MESSAGE_SIZE as u32);
            Channel::create(&spec).unwrap()
        };
        let (a, c) = (chan("merge-a"), chan("merge-c"));
        let mut inputs: Vec<Input> = [&a, &c]
            .iter()
            .map(|ch| Input::Chan {
                rx: Box::new(ch.receiver().unwrap()),
                fifo: false,
                last: Box::new(None),
                size: MESSAGE_SIZE,
            })
            .collect();
        let (mut to_a, mut to_c) = (a.sender().unwrap(), c.sender().unwrap());
        let sample = |source, seq| {
            Message::of(Origin {
                seq,
                origin_ns: seq * 10,
                source,
            })
            .encode(MESSAGE_SIZE)
        };
        to_a.try_write(&sample(0, 4)).unwrap();
        to_a.try_write(&sample(0, 5)).unwrap();
        to_c.try_write(&sample(1, 9)).unwrap();
        let (mut ended, mut got) = (vec![false; 2], Vec::new());
        take_all(&mut inputs, &mut ended, 1, &mut got);
        let mut want = Message::decode(&sample(0, 5));
        want.merge(&Message::decode(&sample(1, 9)));
        assert_eq!(got, [want], "one message, the newest of each source");
        got.clear();
        take_all(&mut inputs, &mut ended, 1, &mut got);
        assert!(got.is_empty(), "nothing new: nothing taken");
        to_c.try_write(&sample(1, 10)).unwrap();
        take_all(&mut inputs, &mut ended, 1, &mut got);
        let origins: Vec<(u32, u64)> = got[0].origins().iter().map(|o| (o.source, o.seq)).collect();
        assert_eq!(origins, [(0, 5), (1, 10)], "the old sample of A goes along");
    }

    #[test]
    fn a_sink_counts_gaps_as_lost_and_old_messages_as_out_of_order() {
        let mut c = Counts::default();
        let at = |seq, origin_ns| Origin {
            seq,
            origin_ns,
            source: 0,
        };
        c.delivered(&at(0, 100), 300);
        c.delivered(&at(3, 400), 450);
        c.delivered(&at(2, 350), 500);
        assert_eq!(c.values[1], 2, "out");
        assert_eq!(c.values[2], 2, "lost: 1 and 2 (2 came after 3)");
        assert_eq!(c.values[6], 1, "out of order");
        assert_eq!((c.values[3], c.values[4], c.values[5]), (50, 200, 250));
    }
}
