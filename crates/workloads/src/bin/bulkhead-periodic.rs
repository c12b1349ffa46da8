//! A periodic real-time task for experiments: each activation burns a configurable
//! amount of CPU time, through the bulkhead task library.
//!
//! `bulkhead-periodic [--exec-us N] [--activations N [--kill-self]] [--can BUS
//! [--on-arrival]] [--restartable] [--write CHANNEL] [--read CHANNEL]`: N µs
//! of CPU time per activation (default: the task's budget minus 10%); stop after N
//! activations (default: when the supervisor asks); `--kill-self`: instead of stopping
//! there, the task kills itself with SIGKILL after its last job's work, before it
//! reports the job complete (a crash from inside, for the health monitor). It runs the same code in every mode:
//! a mode request (docs/modes.md) is acknowledged as soon as it arrives, also while the
//! task waits for its next release. Exit 0 when done or asked to stop, 1 if not
//! attached, 2 on bad flags.
//!
//! `--can BUS`: each job first takes every frame waiting on the partition's channel from
//! the gateway of bus BUS (`BULKHEAD_CAN_<BUS>`) and uses those the stale/fresh rule lets
//! through ([`Task::fresh_can`]); `--restartable` runs it as a restartable task
//! ([`Task::run_restartable`], docs/stop-start.md). `--on-arrival` makes it sporadic:
//! each job is released when a frame arrives on that channel ([`Task::wait_arrival`]),
//! not every period. `--write CHANNEL`: each job writes one 16-byte message to the
//! description's channel CHANNEL (`BULKHEAD_CHAN_<CHANNEL>`, of message size 16): the
//! job's index and its release time (CLOCK_MONOTONIC ns), little-endian u64 each
//! ([`job_message`]), so experiments and tests drive a channel, or a Zenoh bridge
//! (docs/zenoh.md), without a program of their own; at its end the task prints
//! `wrote N messages, releases skipped: S` on stderr, S being the releases it skipped
//! when it ran late (the indexes no message carries). `--read CHANNEL`: each job takes
//! every message waiting in such a channel and checks that each index is above the last
//! (a writer's skipped release leaves a gap, not a disorder); at its end the task prints `read N messages, indexes A..B, G gaps, D out of order,
//! max delay U us of M released after the first arrived (median V us, p99 W us)` on
//! stderr (`-` for V and W when M is 0): the delay is the
//! read instant minus the message's release (CLOCK_MONOTONIC, so writer and reader share
//! one machine's clock), over the messages released after the first one was read (those
//! released earlier may have waited for a late subscriber). What it saw goes to named counters
//! (the stop-start benchmark reads them from the schedule log):
//! `can.frames` frames used, `can.fresh_lost` frames missing (gaps in the gateway's
//! sequence numbers) just before a frame it used, `can.stale_used` frames it used that
//! were stamped before the latest resume or come before a frame it dropped as stale,
//! `can.first_frame_ns` the CLOCK_MONOTONIC instant it used its first frame, and
//! `ss.steady_ns` the time from each resume to the first job whose newest frame was at
//! most [`STEADY_AGE_NS`] old (back to steady-state throughput).

use bulkhead_chan::{Channel, Receiver, RecvError, Sender};
use bulkhead_gateway_protocol::{client_receiver, split, WIRE_SIZE};
use bulkhead_task::{clock, flags, Activation, Counter, Error, Task, Wake};
use bulkhead_workloads::EndError;
use std::cell::RefCell;
use std::ops::ControlFlow;
use std::process::ExitCode;

/// The age of a job's newest frame at which the task counts as back to steady state
/// after a resume: one gateway period and one task period of 1 ms.
const STEADY_AGE_NS: u64 = 2_000_000;

struct Args {
    exec_us: Option<u64>,
    activations: Option<u64>,
    can: Option<String>,
    restartable: bool,
    on_arrival: bool,
    kill_self: bool,
    write: Option<String>,
    read: Option<String>,
}

/// What is wrong with the command line (`Help`: it asks for the usage).
#[derive(Debug)]
enum ArgError {
    Help,
    NeedsValue(String),
    NotNumber { flag: String, value: String },
    Unknown(String),
    OnArrivalWithoutCan,
    KillSelfWithoutActivations,
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgError::Help => Ok(()),
            ArgError::NeedsValue(flag) => write!(f, "{flag} needs a value"),
            ArgError::NotNumber { flag, value } => {
                write!(f, "{flag}: `{value}` is not a non-negative integer")
            }
            ArgError::Unknown(arg) => write!(f, "unknown argument `{arg}`"),
            ArgError::OnArrivalWithoutCan => f.write_str(
                "--on-arrival needs --can BUS (the input whose arrivals release the jobs)",
            ),
            ArgError::KillSelfWithoutActivations => {
                f.write_str("--kill-self needs --activations N (the job after which it dies)")
            }
        }
    }
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, ArgError> {
    let mut out = Args {
        exec_us: None,
        activations: None,
        can: None,
        restartable: false,
        on_arrival: false,
        kill_self: false,
        write: None,
        read: None,
    };
    while let Some(flag) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| ArgError::NeedsValue(name.to_string()))
        };
        let number = |name: &str, value: String| {
            value.parse().map_err(|_| ArgError::NotNumber {
                flag: name.to_string(),
                value,
            })
        };
        match flag.as_str() {
            "--exec-us" => out.exec_us = Some(number("--exec-us", value("--exec-us")?)?),
            "--activations" => {
                out.activations = Some(number("--activations", value("--activations")?)?)
            }
            "--can" => out.can = Some(value("--can")?),
            "--write" => out.write = Some(value("--write")?),
            "--read" => out.read = Some(value("--read")?),
            "--restartable" => out.restartable = true,
            "--on-arrival" => out.on_arrival = true,
            "--kill-self" => out.kill_self = true,
            "-h" | "--help" => return Err(ArgError::Help),
            other => return Err(ArgError::Unknown(other.to_string())),
        }
    }
    if out.on_arrival && out.can.is_none() {
        return Err(ArgError::OnArrivalWithoutCan);
    }
    if out.kill_self && out.activations.is_none() {
        return Err(ArgError::KillSelfWithoutActivations);
    }
    Ok(out)
}

/// The task's input from a CAN gateway channel, and what the benchmark learns of it.
/// The sequence bookkeeping is measurement, not task state: it survives a restart.
struct CanInput {
    rx: Receiver,
    /// A frame taken by [`CanInput::wait`], used first by the next [`CanInput::take`].
    pending: Option<[u8; WIRE_SIZE]>,
    last_seq: Option<u64>,
    /// The highest sequence number dropped as stale since the latest resume.
    stale_max: Option<u64>,
    /// The resume instant whose return to steady state is still to be reported.
    awaiting_steady: Option<u64>,
    first_used: bool,
    restartable: bool,
    frames: Counter,
    fresh_lost: Counter,
    stale_used: Counter,
    first_frame: Counter,
    steady: Counter,
}

impl CanInput {
    fn open(bus: &str, restartable: bool, task: &mut Task) -> Result<CanInput, EndError> {
        let rx = client_receiver(bus)?;
        let mut counter = |name: &str| task.counter(name);
        Ok(CanInput {
            rx,
            pending: None,
            last_seq: None,
            stale_max: None,
            awaiting_steady: None,
            first_used: false,
            restartable,
            frames: counter("can.frames")?,
            fresh_lost: counter("can.fresh_lost")?,
            stale_used: counter("can.stale_used")?,
            first_frame: counter("can.first_frame_ns")?,
            steady: counter("ss.steady_ns")?,
        })
    }

    /// Blocks up to `wake.slice` for a frame, or until the supervisor's next request
    /// (`wake.word`); `Some(now)` when a frame arrived (it is kept for the next
    /// [`CanInput::take`]), `None` when none did.
    fn wait(&mut self, wake: Wake<'_>) -> std::io::Result<Option<u64>> {
        if self.pending.is_some() {
            return Ok(Some(clock::now_ns()));
        }
        let mut msg = [0u8; WIRE_SIZE];
        match self
            .rx
            .read_timeout_or(&mut msg, wake.slice, wake.word, wake.seen)
        {
            Ok(()) => {
                self.pending = Some(msg);
                Ok(Some(clock::now_ns()))
            }
            Err(RecvError::Timeout | RecvError::Interrupted) => Ok(None),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        }
    }

    /// The next frame: the one [`CanInput::wait`] kept, then those waiting in the channel.
    fn next<'a>(&mut self, buf: &'a mut [u8; WIRE_SIZE]) -> Option<&'a [u8; WIRE_SIZE]> {
        match self.pending.take() {
            Some(msg) => *buf = msg,
            None => self.rx.try_read(buf).ok()?,
        }
        Some(buf)
    }

    /// One job's input: every frame waiting, through the stale/fresh rule.
    fn take(&mut self, task: &mut Task, flags_now: u32) {
        let resumed_at = task.resumed_at_ns();
        if flags_now & flags::RESUMED != 0 {
            self.stale_max = None;
            self.awaiting_steady = Some(resumed_at);
        }
        let mut buf = [0u8; WIRE_SIZE];
        let mut newest = None;
        while let Some(msg) = self.next(&mut buf) {
            let (stamp, seq, _) = split(msg);
            let gap = self.last_seq.map_or(0, |l| seq.saturating_sub(l + 1));
            self.last_seq = Some(seq);
            if !task.fresh_can(stamp) {
                self.stale_max = self.stale_max.max(Some(seq));
                continue;
            }
            task.add_counter(self.frames, 1);
            task.add_counter(self.fresh_lost, gap);
            let before_resume = clock::realtime_to_monotonic(stamp) < resumed_at;
            let behind_stale = self.stale_max.is_some_and(|m| seq <= m);
            if self.restartable && (before_resume || behind_stale) {
                task.add_counter(self.stale_used, 1);
            }
            if !self.first_used {
                self.first_used = true;
                task.set_counter(self.first_frame, clock::now_ns());
            }
            newest = Some(stamp);
        }
        let (Some(at), Some(stamp)) = (self.awaiting_steady, newest) else {
            return;
        };
        if clock::realtime_ns().saturating_sub(stamp) <= STEADY_AGE_NS {
            task.set_counter(self.steady, clock::now_ns().saturating_sub(at));
            self.awaiting_steady = None;
        }
    }
}

/// The size of a `--write` message.
const MESSAGE_SIZE: usize = 16;

/// The `--write` message of job `act`: its index and release time, little-endian.
fn job_message(act: &Activation) -> [u8; MESSAGE_SIZE] {
    let mut msg = [0u8; MESSAGE_SIZE];
    msg[..8].copy_from_slice(&act.index.to_le_bytes());
    msg[8..].copy_from_slice(&act.release_ns.to_le_bytes());
    msg
}

/// The description's channel `name`, whose messages must be [`MESSAGE_SIZE`] bytes.
fn open_jobs_channel(name: &str) -> Result<Channel, EndError> {
    let channel = Channel::open_env(name)?;
    let size = channel.meta().msg_size;
    if size as usize != MESSAGE_SIZE {
        let want = MESSAGE_SIZE;
        return Err(EndError::MessageSize { size, want });
    }
    Ok(channel)
}

/// The writing end of `--write`'s channel.
fn open_output(name: &str) -> Result<Sender, EndError> {
    Ok(open_jobs_channel(name)?.sender()?)
}

/// A channel end a flag names that could not be opened.
#[derive(Debug)]
struct FlagError {
    flag: &'static str,
    channel: String,
    source: EndError,
}

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.flag, self.channel, self.source)
    }
}

/// The ends `--write` and `--read` name; an error names the flag and the channel.
fn job_channels(args: &Args) -> Result<(Option<Sender>, Option<JobCheck>), FlagError> {
    let flagged = |flag, name: &String| {
        let channel = name.clone();
        move |source| FlagError {
            flag,
            channel,
            source,
        }
    };
    let output = match &args.write {
        Some(name) => Some(open_output(name).map_err(flagged("--write", name))?),
        None => None,
    };
    let check = match &args.read {
        Some(name) => Some(JobCheck::open(name).map_err(flagged("--read", name))?),
        None => None,
    };
    Ok((output, check))
}

/// `--read`: the job messages read, and whether their indexes grew.
struct JobCheck {
    rx: Receiver,
    count: u64,
    first: Option<u64>,
    last: Option<u64>,
    gaps: u64,
    out_of_order: u64,
    /// CLOCK_MONOTONIC instant the first message was read.
    first_at: Option<u64>,
    /// The delays of the messages released after `first_at` (read instant minus
    /// release, ns; writer and reader on one machine's clock).
    delays: Vec<u64>,
}

impl JobCheck {
    fn open(name: &str) -> Result<JobCheck, EndError> {
        Ok(JobCheck {
            rx: open_jobs_channel(name)?.receiver()?,
            count: 0,
            first: None,
            last: None,
            gaps: 0,
            out_of_order: 0,
            first_at: None,
            delays: Vec::new(),
        })
    }

    /// Takes every message waiting.
    fn take(&mut self) {
        let mut msg = [0u8; MESSAGE_SIZE];
        while self.rx.try_read(&mut msg).is_ok() {
            let now = clock::now_ns();
            let index = u64::from_le_bytes(msg[..8].try_into().expect("8 bytes"));
            let release = u64::from_le_bytes(msg[8..].try_into().expect("8 bytes"));
            let first_at = *self.first_at.get_or_insert(now);
            if release >= first_at {
                self.delays.push(now.saturating_sub(release));
            }
            match self.last {
                Some(l) if index <= l => self.out_of_order += 1,
                Some(l) if index > l + 1 => self.gaps += 1,
                _ => {}
            }
            self.first = self.first.or(Some(index));
            self.last = Some(index);
            self.count += 1;
        }
    }

    fn summary(&self) -> String {
        let index = |i: Option<u64>| i.map_or("-".into(), |i| i.to_string());
        let mut delays = self.delays.clone();
        delays.sort_unstable();
        let us = |q: f64| {
            let at = ((delays.len() as f64 * q) as usize).min(delays.len().saturating_sub(1));
            delays
                .get(at)
                .map_or("-".into(), |d| (d / 1000).to_string())
        };
        format!(
            "read {} messages, indexes {}..{}, {} gaps, {} out of order, \
             max delay {} us of {} released after the first arrived \
             (median {} us, p99 {} us)",
            self.count,
            index(self.first),
            index(self.last),
            self.gaps,
            self.out_of_order,
            delays.last().map_or(0, |d| d / 1000),
            delays.len(),
            us(0.5),
            us(0.99)
        )
    }
}

/// Ends the process by SIGKILL, as a crash or an outside kill would.
fn kill_self() -> ! {
    // SAFETY: kill(2) with this process's own pid and a valid signal number; it touches
    // no memory of ours.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    unreachable!("SIGKILL cannot be caught or ignored")
}

/// The command line, or the exit code after printing the usage (0 for `--help`, 2 for a
/// bad argument, named).
fn args() -> Result<Args, ExitCode> {
    parse(std::env::args().skip(1)).map_err(|e| {
        let help = matches!(e, ArgError::Help);
        if !help {
            eprintln!("bulkhead-periodic: {e}");
        }
        eprintln!(
            "usage: bulkhead-periodic [--exec-us N] [--activations N [--kill-self]] [--can BUS [--on-arrival]] [--restartable] [--write CHANNEL] [--read CHANNEL]"
        );
        ExitCode::from(if help { 0 } else { 2 })
    })
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let mut task = match Task::attach() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bulkhead-periodic: {e}");
            return ExitCode::from(1);
        }
    };
    task.ack_modes_at_once();
    let exec_ns = args
        .exec_us
        .map_or(task.params().budget_ns / 10 * 9, |us| us * 1000);
    let input = match &args.can {
        Some(bus) => match CanInput::open(bus, args.restartable, &mut task) {
            Ok(i) => Some(i),
            Err(e) => {
                eprintln!("bulkhead-periodic: --can {bus}: {e}");
                return ExitCode::from(1);
            }
        },
        None => None,
    };
    let (mut output, mut check) = match job_channels(&args) {
        Ok(ends) => ends,
        Err(e) => {
            eprintln!("bulkhead-periodic: {e}");
            return ExitCode::from(1);
        }
    };
    // The arrival wait and the job both use the input, one after the other.
    let input = RefCell::new(input);
    let arrival = |wake: Wake<'_>| match input.borrow_mut().as_mut() {
        Some(i) => i.wait(wake),
        None => Ok(None),
    };
    let mut done = 0u64;
    let mut skipped = 0u64;
    let mut job = |task: &mut Task, act: &Activation| {
        if let Some(input) = input.borrow_mut().as_mut() {
            input.take(task, act.flags);
        }
        clock::burn_cpu(exec_ns);
        if let Some(check) = check.as_mut() {
            check.take();
        }
        if let Some(tx) = output.as_mut() {
            if let Err(e) = tx.write(&job_message(act)) {
                eprintln!("bulkhead-periodic: --write: {e}");
                return ControlFlow::Break(());
            }
            skipped += u64::from(act.skipped);
        }
        done += 1;
        match args.activations.is_none_or(|n| done < n) {
            true => ControlFlow::Continue(()),
            false if args.kill_self => kill_self(),
            false => ControlFlow::Break(()),
        }
    };
    let ended = match (args.restartable, args.on_arrival) {
        (true, false) => task.run_restartable(|_| Ok(()), |_, t, act| job(t, &act)),
        (true, true) => {
            task.run_restartable_on_arrival(|_| Ok(()), arrival, |_, t, act| job(t, &act))
        }
        (false, on_arrival) => {
            let mut arrival = arrival;
            loop {
                let act = match on_arrival {
                    true => task.wait_arrival(&mut arrival),
                    false => task.wait_next_period(),
                };
                match act {
                    Ok(act) => {
                        if job(&mut task, &act).is_break() {
                            break Ok(());
                        }
                    }
                    Err(Error::Stopped) => break Ok(()),
                    Err(e) => break Err(e),
                }
            }
        }
    };
    if let Some(check) = &check {
        eprintln!("bulkhead-periodic: {}", check.summary());
    }
    if output.is_some() {
        eprintln!("bulkhead-periodic: wrote {done} messages, releases skipped: {skipped}");
    }
    if let Err(e) = ended {
        eprintln!("bulkhead-periodic: {e}");
        return ExitCode::from(1);
    }
    task.complete();
    ExitCode::SUCCESS
}
