//! The schedule log: one JSON object per line, written identically by `bulkhead sim`
//! and `bulkhead run` so that their logs can be compared byte for byte.
//!
//! A line is a serialized [`Event`]: `t_ns` first, then `event`, then the event's
//! fields in declaration order, no spaces. A process run grant is
//! `{"t_ns":0,"event":"run","cpus":"0-1","partition":"sc1","cmd":"./a","budget_ns":600000}`.
//! Which events a producer puts into its schedule log is its choice; it must make the
//! same choice in both executions.

use crate::Event;
use std::io::{self, BufRead, Write};

/// Writes events as schedule-log lines.
pub struct ScheduleLogWriter<W: Write> {
    out: W,
}

impl<W: Write> ScheduleLogWriter<W> {
    pub fn new(out: W) -> Self {
        ScheduleLogWriter { out }
    }

    /// Writes `event` as one line.
    pub fn write(&mut self, event: &Event) -> io::Result<()> {
        self.out.write_all(line(event).as_bytes())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// `event` as a schedule-log line, with its terminating newline.
pub fn line(event: &Event) -> String {
    let mut text = serde_json::to_string(event).expect("an Event always serializes");
    text.push('\n');
    text
}

/// A schedule log that cannot be read back: its 1-based line, and why.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {source}")]
pub struct LogError {
    pub line: usize,
    pub source: LineError,
}

/// Why a schedule-log line cannot be read: the input failed, or it is not an event.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// The message, for the layers that report in text (the conformance suite).
impl From<LogError> for String {
    fn from(e: LogError) -> String {
        e.to_string()
    }
}

/// Reads a schedule log back; errors name the 1-based line.
pub fn read_schedule_log(input: impl BufRead) -> Result<Vec<Event>, LogError> {
    let mut events = Vec::new();
    for (i, text) in input.lines().enumerate() {
        let at = |e: LineError| LogError {
            line: i + 1,
            source: e,
        };
        let text = text.map_err(|e| at(e.into()))?;
        if text.trim().is_empty() {
            continue;
        }
        events.push(serde_json::from_str(&text).map_err(|e| at(e.into()))?);
    }
    Ok(events)
}
