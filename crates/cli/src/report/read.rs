//! Reading a run's or a sim's output: the schedule log (JSON lines of
//! `bulkhead_trace::Event`) or the Chrome/Perfetto trace of `--trace`, told apart by
//! the first key of the first object. Both feed a [`Builder`].

use super::model::{Builder, RowKind};
use bulkhead_trace::perfetto::MESSAGE_TRACK;
use bulkhead_trace::{Event, EventKind};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;

/// Which output a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    ScheduleLog,
    Perfetto,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::ScheduleLog => "schedule-log",
            Format::Perfetto => "perfetto",
        }
    }
}

/// The format of `bytes`, or why it is neither (with its line and column).
pub fn detect(bytes: &[u8]) -> Result<Format, String> {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace());
    let Some(start) = start else {
        return Err("1:1: empty file: neither a schedule log nor a trace".into());
    };
    let (line, column) = position(bytes, start);
    let not_ours = || {
        format!(
            "{line}:{column}: not a bulkhead schedule log or trace \
             (expected a JSON object with `t_ns` or `traceEvents`)"
        )
    };
    if bytes[start] != b'{' {
        return Err(not_ours());
    }
    let rest = &bytes[start + 1..];
    let key_start = rest.iter().position(|b| !b.is_ascii_whitespace());
    let key = key_start
        .map(|i| &rest[i..])
        .and_then(|r| r.strip_prefix(b"\""))
        .and_then(|r| r.split(|&b| b == b'"').next());
    match key {
        Some(b"t_ns") => Ok(Format::ScheduleLog),
        Some(b"otherData" | b"displayTimeUnit" | b"traceEvents") => Ok(Format::Perfetto),
        None if rest.iter().all(u8::is_ascii_whitespace) => Err(format!(
            "{line}:{column}: truncated: the file ends after its first `{{`"
        )),
        _ => Err(not_ours()),
    }
}

/// 1-based line and column of byte `offset`.
fn position(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = offset
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1)
        + 1;
    (line, column)
}

/// Reads a schedule log into `builder`; an error is `LINE: message`.
pub fn schedule_log(bytes: &[u8], builder: &mut Builder) -> Result<(), String> {
    let mut log = LogState::default();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let event: Event = serde_json::from_slice(line).map_err(|e| log_error(i + 1, &e))?;
        log.add(event, builder);
    }
    log.finish(builder);
    Ok(())
}

fn log_error(line: usize, e: &serde_json::Error) -> String {
    let text = message(e);
    let column = e.column();
    match e.classify() {
        serde_json::error::Category::Eof => {
            format!("{line}:{column}: truncated: the line ends inside an event ({text})")
        }
        serde_json::error::Category::Data => format!(
            "{line}:{column}: not an event of bulkhead {} (a log of another version?): {text}",
            bulkhead_trace::perfetto::VERSION
        ),
        _ => format!("{line}:{column}: {text}"),
    }
}

/// serde_json's message without its ` at line L column C` suffix.
fn message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// What the schedule log reader remembers between lines.
#[derive(Default)]
struct LogState {
    /// Executing jobs: (row, job) -> start.
    running: HashMap<(usize, u64), u64>,
    /// Process grants without their `stop` yet: row -> (start, granted end).
    granted: HashMap<usize, (u64, u64)>,
    /// Open windows: window -> start.
    windows: HashMap<u32, u64>,
    writes: HashMap<(String, u64), u64>,
}

impl LogState {
    fn add(&mut self, event: Event, b: &mut Builder) {
        let t = event.t_ns;
        b.saw(t);
        match event.kind {
            kind @ (EventKind::JobRelease { .. }
            | EventKind::JobStart { .. }
            | EventKind::JobPreempt { .. }
            | EventKind::JobAbort { .. }
            | EventKind::JobComplete { .. }
            | EventKind::DeadlineMiss { .. }) => self.add_job(t, kind, b),
            EventKind::WindowStart { window, .. } => {
                self.windows.insert(window, t);
            }
            EventKind::WindowEnd { window } => {
                if let Some(start) = self.windows.remove(&window) {
                    b.window(start, t, &format!("window {window}"));
                }
            }
            EventKind::Run {
                partition,
                cmd,
                budget_ns,
                ..
            } => {
                let row = b.row(&partition, &cmd, RowKind::Process);
                if let Some((start, end)) =
                    self.granted.insert(row, (t, t.saturating_add(budget_ns)))
                {
                    b.slice(row, start, end.min(t));
                }
            }
            EventKind::Stop { partition, cmd, .. } => {
                let row = b.row(&partition, &cmd, RowKind::Process);
                if let Some((start, _)) = self.granted.remove(&row) {
                    b.slice(row, start, t);
                }
            }
            EventKind::ChannelWrite { channel, msg, .. } => {
                self.writes.insert((channel.to_string(), msg), t);
            }
            EventKind::ChannelRead { channel, msg, .. } => {
                let written = self.writes.get(&(channel.to_string(), msg)).copied();
                b.channel_read(&channel, written.map(|w| t.saturating_sub(w)));
            }
            EventKind::ChannelLoss { channel, .. } => b.channel_loss(&channel),
            EventKind::Counter {
                partition,
                task,
                name,
                value,
            } => b.counter(&format!("{partition}/{task} {name}"), t, value),
            EventKind::Message {
                partition,
                task,
                e2e_ns,
                ..
            } => b.message(&partition, &task, e2e_ns),
            _ => {}
        }
    }

    /// A job's event at `t`: its release, executions, completion and misses.
    fn add_job(&mut self, t: u64, kind: EventKind, b: &mut Builder) {
        match kind {
            EventKind::JobRelease {
                partition,
                task,
                job,
                deadline_ns,
                ..
            } => {
                let row = b.row(&partition, &task, RowKind::Task);
                b.release(row, job, t, deadline_ns);
            }
            EventKind::JobStart {
                partition,
                task,
                job,
                ..
            } => {
                let row = b.row(&partition, &task, RowKind::Task);
                self.running.insert((row, job), t);
            }
            EventKind::JobPreempt {
                partition,
                task,
                job,
                ..
            }
            | EventKind::JobAbort {
                partition,
                task,
                job,
                ..
            } => {
                let row = b.row(&partition, &task, RowKind::Task);
                if let Some(start) = self.running.remove(&(row, job)) {
                    b.slice(row, start, t);
                }
            }
            EventKind::JobComplete {
                partition,
                task,
                job,
                response_ns,
                ..
            } => {
                let row = b.row(&partition, &task, RowKind::Task);
                if let Some(start) = self.running.remove(&(row, job)) {
                    b.slice(row, start, t);
                }
                b.complete(row, job, response_ns);
            }
            EventKind::DeadlineMiss {
                partition, task, ..
            } => {
                let row = b.row(&partition, &task, RowKind::Task);
                b.miss(row, t);
            }
            // The other events are `add`'s.
            _ => {}
        }
    }

    /// Ends what is still executing or granted at the last timestamp (or the grant's end).
    fn finish(self, b: &mut Builder) {
        let end = b.end_ns();
        for ((row, _), start) in self.running {
            b.slice(row, start, end);
        }
        for (row, (start, until)) in self.granted {
            b.slice(row, start, until.min(end.max(start)));
        }
        for (window, start) in self.windows {
            b.window(start, end, &format!("window {window}"));
        }
    }
}

/// Reads a Perfetto trace into `builder`, streaming its events; an error is
/// `LINE:COLUMN: message`.
pub fn perfetto(bytes: &[u8], builder: &mut Builder) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut state = TraceState::default();
    let result = Document {
        builder,
        state: &mut state,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    result.map_err(|e| trace_error(&e))?;
    state.finish(builder);
    Ok(())
}

fn trace_error(e: &serde_json::Error) -> String {
    let (line, column, text) = (e.line(), e.column(), message(e));
    match e.classify() {
        serde_json::error::Category::Eof => format!(
            "{line}:{column}: truncated: the trace ends before its closing `]}}` \
             (was its writer stopped?): {text}"
        ),
        _ => format!("{line}:{column}: {text}"),
    }
}

/// The top-level object `{"otherData": .., "displayTimeUnit": .., "traceEvents": [..]}`.
struct Document<'b> {
    builder: &'b mut Builder,
    state: &'b mut TraceState,
}

#[derive(Deserialize)]
struct OtherData {
    producer: Option<String>,
    version: Option<String>,
}

impl<'de> DeserializeSeed<'de> for Document<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Document<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Chrome trace-event JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut stamped = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "otherData" => {
                    let other: OtherData = map.next_value()?;
                    check_version(&other).map_err(de::Error::custom)?;
                    stamped = true;
                }
                "traceEvents" => map.next_value_seed(Events {
                    builder: self.builder,
                    state: self.state,
                })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !stamped {
            return Err(de::Error::custom(format!(
                "no `otherData.version`: not a trace of bulkhead {} \
                 (traces of older versions lack it; write it again with this one)",
                bulkhead_trace::perfetto::VERSION
            )));
        }
        Ok(())
    }
}

fn check_version(other: &OtherData) -> Result<(), String> {
    let ours = bulkhead_trace::perfetto::VERSION;
    match (other.producer.as_deref(), other.version.as_deref()) {
        (Some("bulkhead"), Some(v)) if v == ours => Ok(()),
        (Some("bulkhead"), Some(v)) => Err(format!(
            "a trace of bulkhead {v}; this is bulkhead {ours}: write it again with this version"
        )),
        _ => Err("`otherData` does not name bulkhead as the producer".into()),
    }
}

struct Events<'b> {
    builder: &'b mut Builder,
    state: &'b mut TraceState,
}

impl<'de> DeserializeSeed<'de> for Events<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Events<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of trace events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(raw) = seq.next_element::<Raw>()? {
            self.state.add(raw, self.builder);
        }
        Ok(())
    }
}

/// The fields of a trace event the report uses.
#[derive(Deserialize)]
struct Raw {
    ph: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    cat: Option<String>,
    #[serde(default)]
    ts: Option<f64>,
    #[serde(default)]
    dur: Option<f64>,
    #[serde(default)]
    pid: Option<u32>,
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    args: Args,
}

#[derive(Deserialize, Default)]
struct Args {
    partition: Option<String>,
    task: Option<String>,
    cmd: Option<String>,
    job: Option<u64>,
    deadline_ns: Option<u64>,
    value: Option<u64>,
}

/// Microseconds (fractional) to nanoseconds.
fn nanos(us: Option<f64>) -> u64 {
    (us.unwrap_or(0.0) * 1000.0).round().max(0.0) as u64
}

/// What the trace reader remembers between events.
#[derive(Default)]
struct TraceState {
    /// Per (row, job): the end of its last slice so far (its completion once all are in).
    job_end: HashMap<(usize, u64), u64>,
    /// Flow starts (channel writes) by id.
    flows: HashMap<u64, u64>,
}

/// The pid of the "Partitions" process (named counters); see `bulkhead_trace::perfetto`.
const PID_PARTITIONS: u32 = 3;

impl TraceState {
    fn add(&mut self, raw: Raw, b: &mut Builder) {
        let t = nanos(raw.ts);
        b.saw(t);
        match raw.ph.as_str() {
            "X" => self.slice(raw, t, b),
            "i" => {
                if let Some(what) = raw.name.strip_prefix("release ") {
                    if let (Some((p, task)), Some(job)) = (what.split_once('/'), raw.args.job) {
                        let row = b.row(p, task, RowKind::Task);
                        b.release(row, job, t, raw.args.deadline_ns.unwrap_or(t));
                    }
                } else if let Some(what) = raw.name.strip_prefix("deadline miss ") {
                    if let Some((p, task)) = what.split_once('/') {
                        let row = b.row(p, task, RowKind::Task);
                        b.miss(row, t);
                    }
                } else if let Some(channel) = raw.name.strip_prefix("loss ") {
                    b.channel_loss(channel);
                }
            }
            "C" if raw.pid == Some(PID_PARTITIONS) => {
                let message = raw.name.strip_suffix(MESSAGE_TRACK);
                match (raw.args.value, message.and_then(|m| m.split_once('/'))) {
                    (Some(e2e), Some((p, task))) => b.message(p, task, e2e),
                    (Some(value), None) => b.counter(&raw.name, t, value),
                    (None, _) => {}
                }
            }
            "s" => {
                if let Some(id) = raw.id {
                    self.flows.insert(id, t);
                }
            }
            "f" => {
                let written = raw.id.and_then(|id| self.flows.remove(&id));
                b.channel_read(&raw.name, written.map(|w| t.saturating_sub(w)));
            }
            _ => {}
        }
    }

    fn slice(&mut self, raw: Raw, start: u64, b: &mut Builder) {
        let end = start.saturating_add(nanos(raw.dur));
        b.saw(end);
        let a = &raw.args;
        match raw.cat.as_deref() {
            Some("job") => {
                let (Some(p), Some(task), Some(job)) = (&a.partition, &a.task, a.job) else {
                    return;
                };
                let row = b.row(p, task, RowKind::Task);
                b.slice(row, start, end);
                let last = self.job_end.entry((row, job)).or_insert(end);
                *last = (*last).max(end);
            }
            Some("process") => {
                if let (Some(p), Some(cmd)) = (&a.partition, &a.cmd) {
                    let row = b.row(p, cmd, RowKind::Process);
                    b.grant_slice(row, start, end);
                }
            }
            Some("window") => b.window(start, end, &raw.name),
            _ => {}
        }
    }

    /// A job's response is the end of its last slice minus its release.
    fn finish(self, b: &mut Builder) {
        let mut ends: Vec<_> = self.job_end.into_iter().collect();
        ends.sort_unstable();
        for ((row, job), end) in ends {
            b.complete_at(row, job, end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_formats_and_says_why_not() {
        assert_eq!(detect(b"{\"t_ns\":0}"), Ok(Format::ScheduleLog));
        assert_eq!(
            detect(b" {\"otherData\":{}, \"traceEvents\":[]}"),
            Ok(Format::Perfetto)
        );
        assert!(detect(b"\n  \n")
            .unwrap_err()
            .starts_with("1:1: empty file"));
        assert!(detect(b"\n\nsystem: x")
            .unwrap_err()
            .starts_with("3:1: not a bulkhead"));
        assert!(detect(b"{").unwrap_err().contains("truncated"));
    }
}
