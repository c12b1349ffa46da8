//! The two ends of bench/zenoh (docs/zenoh.md#benchmark): 32-byte messages, each holding
//! its index (little-endian u64) and padding, through bulkhead channels and their Zenoh
//! bridges, or through plain Zenoh pub/sub configured as the bridges are.
//!
//! Under `bulkhead run` (the channels handed over as `BULKHEAD_CHAN_<NAME>`):
//! * `chan-ping OUT IN COUNT SECONDS RESULT`: writes a message to OUT and waits for it on
//!   IN, COUNT times or until SECONDS passed (after a first round trip that waits up to
//!   SECONDS for the path); writes the round trips' summary as JSON to RESULT.
//! * `chan-echo IN OUT`: writes every message read on IN to OUT.
//! * `chan-source OUT`: writes messages to OUT as fast as the channel takes them.
//! * `chan-sink IN SECONDS RESULT`: counts the messages read on IN for SECONDS after the
//!   first; writes their rate, gaps and disorder as JSON to RESULT.
//!
//! Plain Zenoh (keys `bench/ping`, `bench/pong`, `bench/flood`; ENDPOINT `listen:tcp/..`
//! or `connect:tcp/..`): `zenoh-ping ENDPOINT COUNT SECONDS`, `zenoh-pong ENDPOINT`,
//! `zenoh-source ENDPOINT`, `zenoh-sink ENDPOINT SECONDS`, the same ends printing the
//! same JSON on stdout. Exit 1 on a failure (said), 2 on bad arguments.

use bulkhead_chan::{Channel, Receiver, RecvError, Sender};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use zenoh::qos::CongestionControl;
use zenoh::Wait;

/// The size of every message.
const SIZE: usize = 32;

type Failure = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match run(&words) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("usage: see the doc of bench/crates/zenoh/src/main.rs");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("bulkhead-bench-zenoh {}: {e}", words.join(" "));
            ExitCode::from(1)
        }
    }
}

/// Runs the end `words` name; `false` when they name none.
fn run(words: &[&str]) -> Result<bool, Failure> {
    match words {
        ["chan-ping", out, input, count, secs, result] => {
            save(result, &chan_ping(out, input, num(count)?, num(secs)?)?)?
        }
        ["chan-echo", input, out] => chan_echo(input, out)?,
        ["chan-source", out] => chan_source(out)?,
        ["chan-sink", input, secs, result] => save(result, &chan_sink(input, num(secs)?)?)?,
        ["zenoh-ping", end, count, secs] => {
            println!("{}", zenoh_ping(end, num(count)?, num(secs)?)?)
        }
        ["zenoh-pong", end] => zenoh_pong(end)?,
        ["zenoh-source", end] => zenoh_source(end)?,
        ["zenoh-sink", end, secs] => println!("{}", zenoh_sink(end, num(secs)?)?),
        _ => return Ok(false),
    }
    Ok(true)
}

fn num(text: &str) -> Result<u64, Failure> {
    text.parse()
        .map_err(|_| format!("`{text}` is not a number").into())
}

fn save(path: &str, json: &str) -> Result<(), Failure> {
    Ok(std::fs::write(path, format!("{json}\n"))?)
}

/// Message `index`: its index, little-endian, then zeroes.
fn message(index: u64) -> [u8; SIZE] {
    let mut m = [0u8; SIZE];
    m[..8].copy_from_slice(&index.to_le_bytes());
    m
}

fn index_of(m: &[u8]) -> u64 {
    u64::from_le_bytes(m[..8].try_into().expect("a message is at least 8 bytes"))
}

/// The round trips' count, min, median, p99 and max, µs, as JSON.
fn rtt_json(mut ns: Vec<u64>) -> String {
    ns.sort_unstable();
    let at = |q: f64| ns.get(((ns.len() as f64 * q) as usize).min(ns.len().saturating_sub(1)));
    let us = |v: Option<&u64>| v.map_or("null".into(), |v| format!("{:.1}", *v as f64 / 1e3));
    format!(
        r#"{{"round_trips": {}, "min_us": {}, "median_us": {}, "p99_us": {}, "max_us": {}}}"#,
        ns.len(),
        us(ns.first()),
        us(at(0.5)),
        us(at(0.99)),
        us(ns.last())
    )
}

/// What a sink saw: messages, their rate, and indexes that skipped or went back.
struct Count {
    first: Option<Instant>,
    messages: u64,
    next: u64,
    gaps: u64,
    disorder: u64,
}

impl Count {
    fn new() -> Count {
        Count {
            first: None,
            messages: 0,
            next: 0,
            gaps: 0,
            disorder: 0,
        }
    }

    /// Counts message `m`; `false` once `secs` passed since the first.
    fn add(&mut self, m: &[u8], secs: u64) -> bool {
        let i = index_of(m);
        let first = *self.first.get_or_insert_with(Instant::now);
        if self.messages > 0 {
            self.gaps += u64::from(i > self.next);
            self.disorder += u64::from(i < self.next);
        }
        self.next = i + 1;
        self.messages += 1;
        first.elapsed() < Duration::from_secs(secs)
    }

    fn json(&self) -> String {
        let secs = self.first.map_or(0.0, |f| f.elapsed().as_secs_f64());
        format!(
            r#"{{"messages": {}, "seconds": {secs:.3}, "msgs_per_s": {:.0}, "gaps": {}, "out_of_order": {}}}"#,
            self.messages,
            self.messages as f64 / secs.max(1e-9),
            self.gaps,
            self.disorder
        )
    }
}

fn sender(name: &str) -> Result<Sender, Failure> {
    Ok(Channel::open_env(name)?.sender()?)
}

fn receiver(name: &str) -> Result<Receiver, Failure> {
    Ok(Channel::open_env(name)?.receiver()?)
}

/// One round trip of message `i` through the channels; `None` when it did not come
/// back within `wait`.
fn chan_round_trip(
    tx: &mut Sender,
    rx: &mut Receiver,
    i: u64,
    wait: Duration,
) -> Result<Option<u64>, Failure> {
    let start = Instant::now();
    tx.write(&message(i))?;
    let mut m = [0u8; SIZE];
    loop {
        let left = wait.saturating_sub(start.elapsed());
        match rx.read_timeout(&mut m, left) {
            Ok(()) if index_of(&m) == i => return Ok(Some(start.elapsed().as_nanos() as u64)),
            Ok(()) => {}
            Err(RecvError::Timeout) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
}

fn chan_ping(out: &str, input: &str, count: u64, secs: u64) -> Result<String, Failure> {
    let (mut tx, mut rx) = (sender(out)?, receiver(input)?);
    let limit = Duration::from_secs(secs);
    chan_round_trip(&mut tx, &mut rx, 0, limit)?.ok_or("no first round trip")?;
    let start = Instant::now();
    let mut rtts = Vec::new();
    for i in 1..=count {
        if start.elapsed() >= limit {
            break;
        }
        match chan_round_trip(&mut tx, &mut rx, i, Duration::from_secs(1))? {
            Some(ns) => rtts.push(ns),
            None => return Err(format!("message {i} did not come back within 1 s").into()),
        }
    }
    Ok(rtt_json(rtts))
}

fn chan_echo(input: &str, out: &str) -> Result<(), Failure> {
    let (mut rx, mut tx) = (receiver(input)?, sender(out)?);
    let mut m = [0u8; SIZE];
    loop {
        rx.read(&mut m)?;
        tx.write(&m)?;
    }
}

fn chan_source(out: &str) -> Result<(), Failure> {
    let mut tx = sender(out)?;
    for i in 0.. {
        tx.write(&message(i))?;
    }
    Ok(())
}

fn chan_sink(input: &str, secs: u64) -> Result<String, Failure> {
    let mut rx = receiver(input)?;
    let (mut m, mut count) = ([0u8; SIZE], Count::new());
    loop {
        rx.read(&mut m)?;
        if !count.add(&m, secs) {
            return Ok(count.json());
        }
    }
}

/// A plain Zenoh session as a bridge's: `listen:ENDPOINT` or `connect:ENDPOINT`.
fn session(end: &str) -> Result<zenoh::Session, Failure> {
    let (how, endpoint) = end.split_once(':').ok_or("want listen:E or connect:E")?;
    let endpoints = vec![endpoint.to_string()];
    let args = bulkhead_bridge::Args {
        direction: bulkhead_bridge::Direction::Publish,
        channel: String::new(),
        key: String::new(),
        mode: "peer".into(),
        listen: if how == "listen" {
            endpoints.clone()
        } else {
            Vec::new()
        },
        connect: if how == "connect" {
            endpoints
        } else {
            Vec::new()
        },
    };
    zenoh::open(args.zenoh_config()?).wait()
}

/// A publisher as a bridge's (reliable, blocking congestion control), once it matches
/// a subscriber (within 10 s).
fn publisher<'a>(
    s: &'a zenoh::Session,
    key: &'a str,
) -> Result<zenoh::pubsub::Publisher<'a>, Failure> {
    let p = s
        .declare_publisher(key)
        .congestion_control(CongestionControl::Block)
        .wait()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !p.matching_status().wait()?.matching() {
        if Instant::now() >= deadline {
            return Err(format!("no subscriber of {key} within 10 s").into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(p)
}

fn zenoh_ping(end: &str, count: u64, secs: u64) -> Result<String, Failure> {
    let s = session(end)?;
    let pongs = s.declare_subscriber("bench/pong").wait()?;
    let p = publisher(&s, "bench/ping")?;
    let limit = Duration::from_secs(secs);
    let start = Instant::now();
    let mut rtts = Vec::new();
    for i in 0..=count {
        if start.elapsed() >= limit {
            break;
        }
        let sent = Instant::now();
        p.put(message(i).as_slice()).wait()?;
        loop {
            let sample = pongs
                .recv_timeout(Duration::from_secs(1))?
                .ok_or_else(|| format!("message {i} did not come back within 1 s"))?;
            if index_of(&sample.payload().to_bytes()) == i {
                break;
            }
        }
        // The first round trip warms the path up, as chan-ping's.
        if i > 0 {
            rtts.push(sent.elapsed().as_nanos() as u64);
        }
    }
    drop(p);
    s.close().wait()?;
    Ok(rtt_json(rtts))
}

fn zenoh_pong(end: &str) -> Result<(), Failure> {
    let s = session(end)?;
    let pings = s.declare_subscriber("bench/ping").wait()?;
    let p = publisher(&s, "bench/pong")?;
    loop {
        let sample = pings.recv()?;
        p.put(sample.payload().to_bytes().as_ref()).wait()?;
    }
}

fn zenoh_source(end: &str) -> Result<(), Failure> {
    let s = session(end)?;
    let p = publisher(&s, "bench/flood")?;
    for i in 0.. {
        p.put(message(i).as_slice()).wait()?;
    }
    Ok(())
}

fn zenoh_sink(end: &str, secs: u64) -> Result<String, Failure> {
    let s = session(end)?;
    let samples = s.declare_subscriber("bench/flood").wait()?;
    let mut count = Count::new();
    loop {
        let sample = samples.recv()?;
        if !count.add(&sample.payload().to_bytes(), secs) {
            break;
        }
    }
    let json = count.json();
    drop(samples);
    s.close().wait()?;
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sink_counts_gaps_and_disorder_of_the_indexes() {
        let mut count = Count::new();
        for i in [0, 1, 2, 5, 6, 4, 5] {
            assert!(count.add(&message(i), 60));
        }
        assert_eq!((count.messages, count.gaps, count.disorder), (7, 1, 1));
        assert!(count.json().contains(r#""gaps": 1, "out_of_order": 1"#));
    }

    #[test]
    fn a_sink_starts_at_any_index_and_stops_after_its_time() {
        let mut count = Count::new();
        assert!(count.add(&message(40), 60));
        assert!(count.add(&message(41), 60));
        assert!(!count.add(&message(42), 0));
        assert_eq!((count.messages, count.gaps, count.disorder), (3, 0, 0));
    }

    #[test]
    fn round_trips_are_summarised_in_microseconds() {
        let ns: Vec<u64> = (1..=100).rev().map(|i| i * 1000).collect();
        assert_eq!(
            rtt_json(ns),
            r#"{"round_trips": 100, "min_us": 1.0, "median_us": 51.0, "p99_us": 100.0, "max_us": 100.0}"#
        );
        assert!(rtt_json(Vec::new()).contains(r#""median_us": null"#));
    }
}
