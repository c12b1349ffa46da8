//! `bulkhead-bridge publish|subscribe --channel NAME --key KEY [--mode peer|client]
//! [--listen ENDPOINT]... [--connect ENDPOINT]...`: the Zenoh bridge of one channel, run
//! by `bulkhead run` as an rt task of the bridge's partition (see the library's doc).
//! Exit 0 when the supervisor asks it to stop, 1 on a failure (the channel, the Zenoh
//! session, not attached), 2 on bad flags.

use bulkhead_bridge::{publisher_token, Args, Direction, USAGE};
use bulkhead_chan::{Channel, Receiver, RecvError, Sender};
use bulkhead_task::{Counter, Error, Task};
use std::process::ExitCode;
use zenoh::qos::CongestionControl;
use zenoh::sample::SampleKind;
use zenoh::Wait;

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bulkhead-bridge: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bulkhead-bridge: {}: {e}", args.key);
            ExitCode::from(1)
        }
    }
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

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
    let subscriber = session.declare_subscriber(args.key.clone()).wait()?;
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
