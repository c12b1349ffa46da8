//! `bulkhead stage`: the program `bulkhead run` starts for a pipeline stage that names
//! no `cmd` (Boomerang II-B, III-B: a tuned pipe). Once per activation it takes in its
//! messages (a source stage samples its input: one new message stamped with the job's
//! release; other stages read up to `--messages` from each fifo input, or the freshest
//! message of a four-slot input), spends `--work` of CPU time per message, and forwards
//! each message, origin stamp and sequence number unchanged, to every output. A sink
//! stage measures each message's end-to-end delay (its completion minus the origin
//! stamp) and the sequence numbers it never saw (lost), and publishes them as the
//! task's named counters, which the supervisor writes to the schedule log and `run`
//! sums per pipeline.
//!
//! With `--baseline` the same stage runs without bulkhead (the experiment's comparison,
//! Boomerang IV-A): a plain process released by `clock_nanosleep`, exchanging messages
//! over named pipes (`--input`/`--output` are then paths of FIFOs), printing its
//! counters as one JSON line on SIGTERM.

use bulkhead_chan::{Channel, Receiver, Sender};
use bulkhead_task::clock::{burn_cpu, now_ns};
use bulkhead_task::{Counter, Task};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Bytes of a message: sequence number, origin stamp (CLOCK_MONOTONIC ns), source index.
pub const MESSAGE_SIZE: usize = 24;

/// The counters a stage publishes (schedule log `counter` events, `run`'s summary); all
/// grow but `min_e2e_ns`, which falls when a faster message arrives.
pub const COUNTERS: [&str; 8] = [
    "in",
    "out",
    "lost",
    "min_e2e_ns",
    "max_e2e_ns",
    "sum_e2e_ns",
    "out_of_order",
    "full",
];

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Pipeline name (for messages)
    #[arg(long)]
    pipeline: String,
    /// Stage name (for messages)
    #[arg(long)]
    stage: String,
    /// CPU time spent per message, ns
    #[arg(long, value_name = "NS")]
    work: u64,
    /// Messages taken from each fifo input per activation (m)
    #[arg(long, default_value_t = 1)]
    messages: u32,
    /// This stage is a source: each activation samples one new message (the index of
    /// the source in its pipeline goes into the message)
    #[arg(long, value_name = "INDEX")]
    source: Option<u32>,
    /// A source samples only from this long after its first activation on, once every
    /// stage of the pipeline has started (Boomerang's Start-of-Task), ns
    #[arg(long, value_name = "NS", default_value_t = 0)]
    start_after: u64,
    /// This stage is a sink: it measures every message's end-to-end delay and loss
    #[arg(long)]
    sink: bool,
    /// Input channel (its `BULKHEAD_CHAN_` name; with --baseline a FIFO path)
    #[arg(long)]
    input: Vec<String>,
    /// Output channel (its `BULKHEAD_CHAN_` name; with --baseline a FIFO path)
    #[arg(long)]
    output: Vec<String>,
    /// Run without bulkhead: released every PERIOD ns by clock_nanosleep, pipes for I/O
    #[arg(long, value_name = "PERIOD")]
    baseline: Option<u64>,
    /// With --baseline: take only the newest message waiting in each input pipe (the
    /// four-slot semantics over a pipe), dropping the older ones
    #[arg(long, requires = "baseline")]
    latest: bool,
}

type R<T> = Result<T, String>;

/// A message as it travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Message {
    seq: u64,
    origin_ns: u64,
    source: u32,
}

impl Message {
    fn encode(&self) -> [u8; MESSAGE_SIZE] {
        let mut b = [0u8; MESSAGE_SIZE];
        b[0..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.origin_ns.to_le_bytes());
        b[16..20].copy_from_slice(&self.source.to_le_bytes());
        b
    }

    fn decode(b: &[u8; MESSAGE_SIZE]) -> Message {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Message {
            seq: u64_at(0),
            origin_ns: u64_at(8),
            source: u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")),
        }
    }
}

enum Input {
    Chan {
        rx: Box<Receiver>,
        fifo: bool,
        last: Option<Message>,
    },
    /// A named pipe; `latest`: only the newest message waiting is taken.
    Pipe { file: File, latest: bool },
}

enum Output {
    Chan(Sender),
    Pipe(File),
}

impl Input {
    /// Up to `m` messages (fifo, pipe) or the freshest one not read before (four-slot).
    fn take(&mut self, m: u32, out: &mut Vec<Message>) {
        let mut buf = [0u8; MESSAGE_SIZE];
        match self {
            Input::Chan { rx, fifo: true, .. } => {
                for _ in 0..m {
                    if rx.try_read(&mut buf).is_err() {
                        break;
                    }
                    out.push(Message::decode(&buf));
                }
            }
            Input::Chan { rx, last, .. } => {
                if rx.try_read(&mut buf).is_ok() {
                    let msg = Message::decode(&buf);
                    if *last != Some(msg) {
                        *last = Some(msg);
                        out.push(msg);
                    }
                }
            }
            Input::Pipe {
                file,
                latest: false,
            } => {
                for _ in 0..m {
                    if file.read_exact(&mut buf).is_err() {
                        break;
                    }
                    out.push(Message::decode(&buf));
                }
            }
            Input::Pipe { file, latest: true } => {
                let mut newest = None;
                while file.read_exact(&mut buf).is_ok() {
                    newest = Some(Message::decode(&buf));
                }
                out.extend(newest);
            }
        }
    }
}

impl Output {
    /// Whether the message went in. A fifo is lossless (Boomerang's `RT_FIFO`): the
    /// writer waits while it is full, until there is room or `stop` is set; a four-slot
    /// buffer always takes it; a (non-blocking) pipe refuses it when full.
    fn put(&mut self, msg: &Message, stop: &AtomicBool) -> bool {
        let wait = std::time::Duration::from_millis(50);
        match self {
            Output::Chan(tx) => loop {
                match tx.write_timeout(&msg.encode(), wait) {
                    Ok(()) => return true,
                    Err(bulkhead_chan::Error::Timeout) if !stop.load(Relaxed) => continue,
                    Err(_) => return false,
                }
            },
            Output::Pipe(f) => f.write_all(&msg.encode()).is_ok(),
        }
    }
}

/// What a stage counts, in [`COUNTERS`] order.
#[derive(Default)]
struct Counts {
    values: [u64; 8],
    /// Per source: the last sequence number seen at this sink.
    last_seq: Vec<Option<u64>>,
}

impl Counts {
    fn delivered(&mut self, msg: &Message, now: u64) {
        let i = msg.source as usize;
        if self.last_seq.len() <= i {
            self.last_seq.resize(i + 1, None);
        }
        match self.last_seq[i] {
            Some(last) if msg.seq <= last => {
                self.values[6] += 1;
                return;
            }
            Some(last) => self.values[2] += msg.seq - last - 1,
            None => self.values[2] += msg.seq,
        }
        self.last_seq[i] = Some(msg.seq);
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
    let (mut inputs, mut outputs) = match args.baseline {
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
    let mut counts = Counts::default();
    let mut first = None;
    let mut job = |release_ns: u64, counts: &mut Counts| {
        let mut msgs = Vec::new();
        let start = *first.get_or_insert(release_ns) + args.start_after;
        if let Some(source) = args.source.filter(|_| release_ns >= start) {
            msgs.push(Message {
                seq: counts.values[0],
                origin_ns: release_ns,
                source,
            });
            counts.values[0] += 1;
        }
        for i in &mut inputs {
            i.take(args.messages, &mut msgs);
        }
        for msg in &msgs {
            burn_cpu(args.work);
            if args.sink {
                counts.delivered(msg, now_ns());
            }
            for o in &mut outputs {
                if !o.put(msg, stop) {
                    counts.values[7] += 1;
                }
            }
        }
    };
    match args.baseline {
        Some(period) => {
            let mut next = now_ns() + period;
            while !stop.load(Relaxed) {
                sleep_until(next);
                job(next, &mut counts);
                next += period;
            }
            let fields: Vec<String> = COUNTERS
                .iter()
                .zip(counts.values)
                .map(|(n, v)| format!("\"{n}\":{v}"))
                .collect();
            println!(
                "{{\"pipeline\":\"{}\",\"stage\":\"{}\",{}}}",
                args.pipeline,
                args.stage,
                fields.join(",")
            );
            Ok(())
        }
        None => periodic(stop, job),
    }
}

/// Runs `job` once per activation of the supervisor's task until it asks to stop (or
/// SIGTERM), publishing the counts after each job.
fn periodic(stop: &AtomicBool, mut job: impl FnMut(u64, &mut Counts)) -> R<()> {
    let mut task = Task::attach().map_err(|e| e.to_string())?;
    let slots = COUNTERS
        .iter()
        .map(|n| task.counter(n))
        .collect::<Result<Vec<Counter>, _>>()
        .map_err(|e| e.to_string())?;
    let mut counts = Counts::default();
    while !stop.load(Relaxed) {
        let act = match task.wait_next_period() {
            Ok(act) => act,
            Err(bulkhead_task::Error::Stopped) => break,
            Err(e) => return Err(e.to_string()),
        };
        job(act.release_ns, &mut counts);
        for (slot, v) in slots.iter().zip(counts.values) {
            task.set_counter(*slot, v);
        }
    }
    Ok(())
}

fn chan_in(name: &str) -> R<Input> {
    let c = Channel::open_env(name).map_err(|e| format!("input {name}: {e}"))?;
    let fifo = c.meta().kind == bulkhead_chan::layout::Kind::Fifo;
    let mut rx = c.receiver().map_err(|e| format!("input {name}: {e}"))?;
    rx.set_spin(0);
    Ok(Input::Chan {
        rx: Box::new(rx),
        fifo,
        last: None,
    })
}

fn chan_out(name: &str) -> R<Output> {
    let c = Channel::open_env(name).map_err(|e| format!("output {name}: {e}"))?;
    let mut tx = c.sender().map_err(|e| format!("output {name}: {e}"))?;
    tx.set_spin(0);
    Ok(Output::Chan(tx))
}

/// A FIFO opened for non-blocking reads.
fn pipe_in(path: &str, latest: bool) -> R<Input> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map(|file| Input::Pipe { file, latest })
        .map_err(|e| format!("input {path}: {e}"))
}

/// A FIFO opened read-write (so that opening does not wait for the reader), non-blocking.
fn pipe_out(path: &str) -> R<Output> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map(Output::Pipe)
        .map_err(|e| format!("output {path}: {e}"))
}

/// Sleeps until CLOCK_MONOTONIC reaches `t_ns` (or a signal arrives).
fn sleep_until(t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec for the duration of the call; the remaining-time
    // pointer may be null with TIMER_ABSTIME.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let m = Message {
            seq: 7,
            origin_ns: 123_456_789,
            source: 2,
        };
        assert_eq!(Message::decode(&m.encode()), m);
    }

    #[test]
    fn a_sink_counts_gaps_as_lost_and_old_messages_as_out_of_order() {
        let mut c = Counts::default();
        let at = |seq, origin_ns| Message {
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
