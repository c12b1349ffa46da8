//! Replaying a candump log onto a bus in real time, and dumping a bus as a log.

use crate::bus::CanBus;
use crate::candump::{ReadError, Record};
use std::io::{self, Write};
use std::time::{Duration, Instant};

/// What a replay did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ReplayStats {
    pub sent: u64,
    /// Records of other interfaces (when filtering by interface).
    pub skipped: u64,
    /// Lines that were not candump records.
    pub malformed: u64,
    /// Largest delay of a send behind its scheduled time.
    pub max_late: Duration,
}

/// Sends each record of `records` (whose interface is `iface`, if given) to `bus`
/// at its log time relative to the first sent record, divided by `speed`.
/// Malformed lines are counted and skipped; I/O errors end the replay.
pub fn replay(
    records: impl Iterator<Item = Result<Record, ReadError>>,
    bus: &mut dyn CanBus,
    iface: Option<&str>,
    speed: f64,
) -> io::Result<ReplayStats> {
    let mut stats = ReplayStats::default();
    let mut origin: Option<(u64, Instant)> = None;
    for item in records {
        let record = match item {
            Ok(r) => r,
            Err(ReadError::Io(e)) => return Err(e),
            Err(ReadError::Parse(_)) => {
                stats.malformed += 1;
                continue;
            }
        };
        if iface.is_some_and(|i| i != record.iface) {
            stats.skipped += 1;
            continue;
        }
        let (t0, start) = *origin.get_or_insert((record.t_ns, Instant::now()));
        let offset = record.t_ns.saturating_sub(t0) as f64 / speed;
        let due = start + Duration::from_nanos(offset as u64);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        } else {
            stats.max_late = stats.max_late.max(now - due);
        }
        bus.send(&record.frame)?;
        stats.sent += 1;
    }
    Ok(stats)
}

/// Writes frames received from `bus` as candump log lines with interface name
/// `iface`, until `count` frames (if given) or until `timeout` (if given) has passed.
/// Returns the number of frames written. Each line is flushed.
pub fn dump(
    bus: &mut dyn CanBus,
    iface: &str,
    count: Option<u64>,
    timeout: Option<Duration>,
    out: &mut impl Write,
) -> io::Result<u64> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut written = 0;
    while count.is_none_or(|n| written < n) {
        let wait = match deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => break,
            },
            None => None,
        };
        let Some(received) = bus.recv(wait)? else {
            continue;
        };
        let record = Record {
            t_ns: received.t_ns,
            iface: iface.to_string(),
            frame: received.frame,
        };
        writeln!(out, "{record}")?;
        out.flush()?;
        written += 1;
    }
    Ok(written)
}
