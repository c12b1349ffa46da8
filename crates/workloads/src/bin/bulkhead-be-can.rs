//! A best-effort CAN client that follows stop-start (docs/stop-start.md#best-effort-programs):
//! it takes the frames of its partition's channel from the gateway of bus BUS
//! (`BULKHEAD_CAN_<BUS>`) as they arrive and uses those the client library's stale/fresh
//! rule lets through ([`StopStart::fresh_can`]). After each resume it appends one line
//! to the file OUT when it uses its first frame received after it:
//!
//! `first_fresh resumed_at_ns=R used_ns=U age_ns=A stale_dropped=S seq=Q lost=L`
//!
//! R the resume instant, U the instant the frame was used (both CLOCK_MONOTONIC), A the
//! frame's age then (from its reception on the bus), S the stale frames dropped so far, Q
//! the gateway's sequence number of the frame and L the frames missing (gaps in the
//! sequence numbers) between the resume and it. Exit 2 on bad arguments or when not run
//! by `bulkhead run` with stop-start and a bus, 1 when OUT cannot be written.

use bulkhead_chan::Receiver;
use bulkhead_client::stop_start::{monotonic_ns, Event, StopStart};
use bulkhead_gateway_protocol::{client_receiver, split, WIRE_SIZE};
use bulkhead_task::clock;
use bulkhead_workloads::EndError;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// How long a read waits before the program looks at the stop-start page again.
const POLL: Duration = Duration::from_millis(1);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bus, out] = args.as_slice() else {
        eprintln!("usage: bulkhead-be-can BUS OUT");
        return ExitCode::from(2);
    };
    let (ss, rx) = match open(bus) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("bulkhead-be-can: {e}");
            return ExitCode::from(2);
        }
    };
    match follow(&ss, rx, out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bulkhead-be-can: {out}: {e}");
            ExitCode::from(1)
        }
    }
}

fn open(bus: &str) -> Result<(StopStart, Receiver), EndError> {
    Ok((StopStart::open()?, client_receiver(bus)?))
}

/// Takes frames until the channel's writer is gone; after each resume, reports the first
/// frame used.
fn follow(ss: &StopStart, mut rx: Receiver, out: &str) -> std::io::Result<()> {
    let mut msg = [0u8; WIRE_SIZE];
    let mut awaiting: Option<u64> = None;
    let mut last_seq: Option<u64> = None;
    loop {
        if let Some(Event::Resumed { resumed_at_ns, .. }) = ss.event() {
            awaiting = Some(resumed_at_ns);
        }
        match rx.read_timeout(&mut msg, POLL) {
            Ok(()) => {}
            Err(bulkhead_chan::RecvError::Timeout) => continue,
            Err(_) => return Ok(()),
        }
        let (stamp, seq, _) = split(&msg);
        let gap = last_seq.map_or(0, |l| seq.saturating_sub(l + 1));
        last_seq = Some(seq);
        if !ss.fresh_can(stamp) {
            continue;
        }
        let Some(resumed_at) = awaiting.take() else {
            continue;
        };
        let used = monotonic_ns();
        let age = clock::realtime_ns().saturating_sub(stamp);
        let line = format!(
            "first_fresh resumed_at_ns={resumed_at} used_ns={used} age_ns={age} stale_dropped={} seq={seq} lost={}\n",
            ss.stale_dropped(),
            gap
        );
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(out)?
            .write_all(line.as_bytes())?;
    }
}
