//! Replaying a candump log onto buses in real time, with can-utils' `canplayer`
//! options: interface assignments (`BUS=LOGIFACE`), a loop count, skipping long gaps
//! (`-s`), ignoring timestamps with a fixed gap (`-t`, `-g`) and a frame count (`-n`).
//!
//! Timing: each record is due at its log time relative to the first record of the
//! loop, divided by the speed. Two things in real logs would break that, so each one
//! starts a new time base at the record (sent at once, later records keep their
//! spacing relative to it) and is counted: a gap longer than `max_gap` (a logger
//! restarted after hours; canplayer `-s`) and a timestamp earlier than the previous
//! record's (concatenated logs), which would otherwise make every following record
//! overdue and go out back to back.
//!
//! CAN FD records: bulkhead's buses (the virtual bus and its SocketCAN backend) carry
//! classic CAN, so FD records are skipped and counted, never sent cut short.

use crate::bus::CanBus;
use crate::candump::{ReadError, Reader, Record};
use crate::frame::Kind;
use std::fmt;
use std::io::{self, BufRead};
use std::time::{Duration, Instant};

/// The slowest speed: a thousandth of real time (a gap of an hour in the log takes
/// 42 days). Slower ones would put due times beyond what a clock can hold.
pub const MIN_SPEED: f64 = 1e-3;
/// The fastest speed: a million times real time (every record at once, in effect).
pub const MAX_SPEED: f64 = 1e6;

/// How records are timed and how often the log is played.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Time scale: 2.0 plays twice as fast; [`MIN_SPEED`] to [`MAX_SPEED`] (a speed
    /// outside is taken as the nearer bound, NaN as the slowest).
    pub speed: f64,
    /// Gaps in log time longer than this are skipped (canplayer `-s`).
    pub max_gap: Duration,
    /// Ignore timestamps and send records this far apart (canplayer `-t` with `-g`).
    pub fixed_gap: Option<Duration>,
    /// Times the log is played; None = for ever (canplayer `-l i`).
    pub loops: Option<u64>,
    /// Stop after this many frames sent (canplayer `-n`).
    pub count: Option<u64>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            speed: 1.0,
            max_gap: Duration::from_secs(10),
            fixed_gap: None,
            loops: Some(1),
            count: None,
        }
    }
}

/// Where the records of a log interface go: `(log interface or None for all, index of
/// the bus)`.
pub type Route = (Option<String>, usize);
/// Routes, the first match wins.
pub type Routes = [Route];

/// What a replay did. Line numbers are those of the last loop that saw the event.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ReplayStats {
    pub sent: u64,
    /// Records of interfaces that no route takes.
    pub skipped: u64,
    /// CAN FD records, which the buses do not carry.
    pub fd_skipped: u64,
    /// Lines that were not candump records, and the first of them.
    pub malformed: u64,
    pub first_malformed: Option<String>,
    /// Gaps longer than the maximum, skipped, and the line after the first of them.
    pub gaps_skipped: u64,
    pub first_gap_line: Option<usize>,
    /// Records whose timestamp is earlier than the previous one's, and the first.
    pub backwards: u64,
    pub first_backwards_line: Option<usize>,
    /// Largest delay of a send behind its scheduled time.
    pub max_late: Duration,
    /// Loops completed.
    pub loops: u64,
}

/// Why a replay stopped early: reading the log, or sending the record of a line.
#[derive(Debug)]
pub enum ReplayError {
    Read(io::Error),
    Send {
        line: usize,
        bus: usize,
        error: io::Error,
    },
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Read(e) => e.fmt(f),
            ReplayError::Send { line, error, .. } => write!(f, "line {line}: sending: {error}"),
        }
    }
}

impl std::error::Error for ReplayError {}

/// The time base: log time `t0` is sent at `start`.
#[derive(Clone, Copy)]
struct Base {
    t0: u64,
    start: Instant,
}

/// Plays the log that `open` opens, `options.loops` times (opened anew each loop),
/// onto `buses` along `routes`. Malformed lines are counted and skipped; reading or
/// sending errors end the replay, naming the line.
pub fn replay(
    open: &mut dyn FnMut() -> io::Result<Box<dyn BufRead>>,
    buses: &mut [Box<dyn CanBus>],
    routes: &Routes,
    options: &Options,
) -> Result<ReplayStats, ReplayError> {
    let mut stats = ReplayStats::default();
    while options.loops.is_none_or(|n| stats.loops < n) {
        let input = open().map_err(ReplayError::Read)?;
        if !play_once(Reader::new(input), buses, routes, options, &mut stats)? {
            break;
        }
        stats.loops += 1;
    }
    Ok(stats)
}

/// One pass over the log; false when the frame count was reached.
fn play_once<R: BufRead>(
    mut records: Reader<R>,
    buses: &mut [Box<dyn CanBus>],
    routes: &Routes,
    options: &Options,
    stats: &mut ReplayStats,
) -> Result<bool, ReplayError> {
    let mut base: Option<Base> = None;
    let mut previous: Option<(u64, Instant)> = None;
    while let Some(item) = records.next() {
        if options.count.is_some_and(|n| stats.sent >= n) {
            return Ok(false);
        }
        let record = match item {
            Ok(r) => r,
            Err(ReadError::Io(e)) => return Err(ReplayError::Read(e)),
            Err(ReadError::Parse(e)) => {
                stats.malformed += 1;
                stats.first_malformed.get_or_insert_with(|| e.to_string());
                continue;
            }
        };
        let Some(bus) = route(routes, &record) else {
            stats.skipped += 1;
            continue;
        };
        if record.frame.kind() != Kind::Classic {
            stats.fd_skipped += 1;
            continue;
        }
        let line = records.line();
        let due = due_time(&record, line, &mut base, previous, options, stats);
        wait_until(due, stats);
        buses[bus]
            .send(&record.frame)
            .map_err(|error| ReplayError::Send { line, bus, error })?;
        previous = Some((record.t_ns, Instant::now()));
        stats.sent += 1;
    }
    Ok(options.count.is_none_or(|n| stats.sent < n))
}

fn route(routes: &Routes, record: &Record) -> Option<usize> {
    routes
        .iter()
        .find(|(iface, _)| iface.as_ref().is_none_or(|i| *i == record.iface))
        .map(|&(_, bus)| bus)
}

/// When `record` (of line `line`) is due; starts a new time base on a long gap or a
/// backward step.
fn due_time(
    record: &Record,
    line: usize,
    base: &mut Option<Base>,
    previous: Option<(u64, Instant)>,
    options: &Options,
    stats: &mut ReplayStats,
) -> Instant {
    let now = Instant::now();
    if let Some(gap) = options.fixed_gap {
        return previous.map_or(now, |(_, sent)| sent + gap);
    }
    let t = record.t_ns;
    let restart = match (*base, previous) {
        (None, _) | (_, None) => true,
        (Some(_), Some((prev, _))) if t < prev => {
            stats.backwards += 1;
            stats.first_backwards_line.get_or_insert(line);
            true
        }
        (Some(_), Some((prev, _))) if Duration::from_nanos(t - prev) > options.max_gap => {
            stats.gaps_skipped += 1;
            stats.first_gap_line.get_or_insert(line);
            true
        }
        _ => false,
    };
    if restart {
        *base = Some(Base { t0: t, start: now });
    }
    let b = base.expect("set above");
    // `>=` is false for NaN, which so becomes the slowest speed.
    let speed = match options.speed >= MIN_SPEED {
        true => options.speed.min(MAX_SPEED),
        false => MIN_SPEED,
    };
    let offset = (t - b.t0) as f64 / speed;
    b.start + Duration::from_secs_f64(offset / 1e9)
}

fn wait_until(due: Instant, stats: &mut ReplayStats) {
    let now = Instant::now();
    if due > now {
        std::thread::sleep(due - now);
    } else {
        stats.max_late = stats.max_late.max(now - due);
    }
}
