//! `bulkhead-bridge publish|subscribe --channel NAME --key KEY [--mode peer|client]
//! [--listen ENDPOINT]... [--connect ENDPOINT]...`: the Zenoh bridge of one channel, run
//! by `bulkhead run` as an rt task of the bridge's partition (see the library's doc).
//! Exit 0 when the supervisor asks it to stop, 1 on a failure (the channel, the Zenoh
//! session, not attached), 2 on bad flags.
//!
//! `bulkhead-bridge probe --connect ENDPOINT [--count N]` (what `bulkhead probe --zenoh`
//! runs): the round trip of a Zenoh query to the echo of the bridges at a peer, which
//! every bridge answers; it prints min, median and max. Exit 1 when no bridge answers
//! within 5 s.

use bulkhead_bridge::{
    declare_echo, publisher_token, subscriber_queue, summary, Args, Direction, ProbeArgs,
    UsageError, ECHOES, PROBE_USAGE, USAGE,
};
use bulkhead_chan::{Channel, Receiver, RecvError, Sender};
use bulkhead_task::{Counter, Error, Task};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use zenoh::handlers::FifoChannel;
use zenoh::qos::CongestionControl;
use zenoh::query::QueryTarget;
use zenoh::sample::SampleKind;
use zenoh::Wait;

/// How long a probe waits for the first answer of a bridge at the peer.
const PROBE_WAIT: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let mut words = std::env::args().skip(1).peekable();
    if words.peek().map(String::as_str) == Some("probe") {
        let args = ProbeArgs::parse(words.skip(1));
        return exit(args, PROBE_USAGE, |a| format!("probe {}", a.connect), probe);
    }
    exit(Args::parse(words), USAGE, |a| a.key.clone(), run)
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Runs `job` on the parsed command line: exit 0 when it ends well, 1 when it fails
/// (said, after what `name` names), 2 on a usage error (said, with `usage`).
fn exit<A>(
    args: Result<A, UsageError>,
    usage: &str,
    name: impl Fn(&A) -> String,
    job: impl Fn(&A) -> Result<(), Failure>,
) -> ExitCode {
    let args = match args {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bulkhead-bridge: {e}\n{usage}");
            return ExitCode::from(2);
        }
    };
    match job(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bulkhead-bridge: {}: {e}", name(&args));
            ExitCode::from(1)
        }
    }
}

/// Times `args.count` round trips of a query to the bridges' echo at the peer, after a
/// first answer (the peer connected and its echo declared) within [`PROBE_WAIT`].
fn probe(args: &ProbeArgs) -> Result<(), Failure> {
    let session = zenoh::open(args.zenoh_config()?).wait()?;
    let deadline = Instant::now() + PROBE_WAIT;
    while round_trip(&session)?.is_none() {
        if Instant::now() >= deadline {
            session.close().wait()?;
            return Err(format!(
                "no bridge answered within {} s (is a bridge of a run listening there?)",
                PROBE_WAIT.as_secs()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut rtts = Vec::new();
    for _ in 0..args.count {
        let rtt = round_trip(&session)?.ok_or("the peer's bridges stopped answering")?;
        rtts.push(rtt);
    }
    session.close().wait()?;
    let (min, median, max) = summary(rtts).ok_or("no round trip")?;
    let us = |ns: u64| ns as f64 / 1e3;
    println!(
        "zenoh round trip to {}: min {:.0} us, median {:.0} us, max {:.0} us over {} queries; a bridge's `latency:` of at least {:.0} us (half the max)",
        args.connect, us(min), us(median), us(max), args.count, us(max.div_ceil(2))
    );
    Ok(())
}

/// The time to the first answer of a query to the bridges' echo; `None` when none
/// answered (the query's end came first).
fn round_trip(session: &zenoh::Session) -> Result<Option<u64>, Failure> {
    let start = Instant::now();
    let replies = session
        .get(ECHOES)
        .target(QueryTarget::BestMatching)
        .timeout(Duration::from_secs(1))
        .wait()?;
    let answered = matches!(replies.recv(), Ok(reply) if reply.result().is_ok());
    let elapsed = start.elapsed().as_nanos() as u64;
    while replies.recv().is_ok() {}
    Ok(answered.then_some(elapsed))
}

/// The task's counters (the library's doc names them).
struct Counters {
    messages: Counter,
    peers: Counter,
    lost: Counter,
    refused: Counter,
}

impl Counters {
    fn new(task: &mut Task) -> Result<Counters, Error> {
        Ok(Counters {
            messages: task.counter("bridge.messages")?,
            peers: task.counter("bridge.peers")?,
            lost: task.counter("bridge.lost")?,
            refused: task.counter("bridge.refused")?,
        })
    }

    /// Records whether a peer is present now, `was` before; reports a loss.
    fn peer(&self, task: &Task, key: &str, was: bool, now: bool) {
        task.set_counter(self.peers, u64::from(now));
        match (was, now) {
            (false, true) => eprintln!("bulkhead-bridge: {key}: peer present"),
            (true, false) => {
                eprintln!("bulkhead-bridge: {key}: peer lost");
                task.add_counter(self.lost, 1);
            }
            _ => {}
        }
    }
}

fn run(args: &Args) -> Result<(), Failure> {
    let channel = Channel::open_env(&args.channel)?;
    let mut task = Task::attach()?;
    let counters = Counters::new(&mut task)?;
    let session = zenoh::open(args.zenoh_config()?).wait()?;
    let _echo = declare_echo(&session, &args.key)?;
    let ended = match args.direction {
        Direction::Publish => publish(args, channel.receiver()?, &session, &mut task, &counters),
        Direction::Subscribe => subscribe(args, channel.sender()?, &session, &mut task, &counters),
    };
    session.close().wait()?;
    if ended.is_ok() {
        task.complete();
    }
    ended
}

/// Waits for the next job; `false` when the supervisor asks the task to stop.
fn next_job(task: &mut Task) -> Result<bool, Failure> {
    match task.wait_next_period() {
        Ok(_) => Ok(true),
        Err(Error::Stopped) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Channel to key: each job puts every waiting message, while a subscriber is matched.
fn publish(
    args: &Args,
    mut rx: Receiver,
    session: &zenoh::Session,
    task: &mut Task,
    counters: &Counters,
) -> Result<(), Failure> {
    let publisher = session
        .declare_publisher(args.key.clone())
        .congestion_control(CongestionControl::Block)
        .wait()?;
    let _token = session
        .liveliness()
        .declare_token(publisher_token(&args.key))
        .wait()?;
    let mut msg = vec![0u8; rx.meta().msg_size as usize];
    let mut matched = false;
    while next_job(task)? {
        let now = publisher.matching_status().wait()?.matching();
        counters.peer(task, &args.key, matched, now);
        matched = now;
        if matched {
            forward(&mut rx, &mut msg, &publisher, task, counters)?;
        }
    }
    Ok(())
}

/// Puts every message waiting in the channel, through `msg`.
fn forward(
    rx: &mut Receiver,
    msg: &mut [u8],
    publisher: &zenoh::pubsub::Publisher<'_>,
    task: &Task,
    counters: &Counters,
) -> Result<(), Failure> {
    loop {
        match rx.try_read(msg) {
            Ok(()) => {}
            // A writer that ended has nothing more to send; the bridge runs on.
            Err(RecvError::Empty | RecvError::Closed) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        publisher.put(&*msg).wait()?;
        task.add_counter(counters.messages, 1);
    }
}

/// Key to channel: each job writes every sample received since the last one.
fn subscribe(
    args: &Args,
    mut tx: Sender,
    session: &zenoh::Session,
    task: &mut Task,
    counters: &Counters,
) -> Result<(), Failure> {
    let size = tx.meta().msg_size as usize;
    let queue = subscriber_queue(tx.meta().depth);
    let subscriber = session
        .declare_subscriber(args.key.clone())
        .with(FifoChannel::new(queue))
        .wait()?;
    let publishers = session
        .liveliness()
        .declare_subscriber(publisher_token(&args.key))
        .history(true)
        .wait()?;
    let mut present = 0usize;
    while next_job(task)? {
        while let Some(token) = publishers.try_recv()? {
            let was = present > 0;
            match token.kind() {
                SampleKind::Put => present += 1,
                SampleKind::Delete => present = present.saturating_sub(1),
            }
            counters.peer(task, &args.key, was, present > 0);
        }
        while let Some(sample) = subscriber.try_recv()? {
            let payload = sample.payload().to_bytes();
            if payload.len() != size {
                task.add_counter(counters.refused, 1);
                continue;
            }
            tx.write(&payload)?;
            task.add_counter(counters.messages, 1);
        }
    }
    Ok(())
}
