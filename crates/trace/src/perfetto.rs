//! Export to the Chrome trace-event JSON format, which Perfetto (ui.perfetto.dev)
//! and chrome://tracing open.
//!
//! Mapping (see also `docs/trace.md`):
//!
//! | event | Perfetto |
//! |---|---|
//! | `job_start` .. `job_preempt` / `job_complete` / `job_abort` | `"X"` slice `partition/task` on the track of its CPU |
//! | `run` .. `stop` | `"X"` slice `partition: cmd` on the track of each CPU of the grant |
//! | `job_release` | instant (`"i"`, thread scope) `release partition/task` on the CPU track |
//! | `deadline_miss` | instant `deadline miss partition/task` on the CPU track |
//! | `budget` | counter (`"C"`) `budget partition/task`, value `remaining_ns` |
//! | `cpu_frequency` | counter `CPU n frequency`, value `khz` |
//! | `counter` | counter `partition/task name` in the "Partitions" process, value `value` |
//! | `channel_write` .. `channel_read` | flow (`"s"` at the write, `"f"` at the read) named after the channel |
//! | `channel_loss` | instant on the `channels` track |
//! | `window_start` .. `window_end` | `"X"` slice `window i` on the `windows` track |
//! | `partition_thaw` .. `partition_freeze` | `"X"` slice `thawed (cpus)` on the partition's track |
//! | `mode_request` .. `mode_done` | `"X"` slice `from -> to (policy)` on the `modes` track, a global instant `mode m` at the end |
//! | `agent_request` .. `agent_ack` | `"X"` slice `mode agent -> m` on the partition's track |
//! | `interface_change` | instant `interface B/P ns` on the partition's track |
//! | `mode_request`, `interface_change` | counter `bandwidth <CPUs>` in the "Schedule" process, series `load_ppm`, `capacity_ppm` |
//! | `suspend`, `resume` | global instants |
//!
//! Tracks: process 1 "CPUs" has one thread per CPU (`tid` = CPU + 1); process 2
//! "Schedule" has the `windows`, `modes`, `system` and `channels` tracks; process 3
//! "Partitions" has one thread per partition. Slices on one track always nest:
//! a slice that would overlap another without nesting inside it (only possible if a
//! producer reports overlapping execution on one CPU) goes to an extra lane,
//! `CPU n (lane k)`. Slices still open at the end of the trace end at its last timestamp.
//!
//! [`Writer`] writes each slice when it ends and every other event when it happens, so
//! its memory is the open slices, not the trace: events are in the order they were
//! written (the format does not ask for time order; viewers sort), and the process and
//! thread names come last, when all CPUs, partitions and lanes are known.

use crate::{CpuSet, Event, EventKind, Name, Nanos};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::{self, Write};

const PID_CPUS: u32 = 1;
const PID_SCHEDULE: u32 = 2;
const PID_PARTITIONS: u32 = 3;
const TID_WINDOWS: u32 = 1;
const TID_MODES: u32 = 2;
const TID_SYSTEM: u32 = 3;
const TID_CHANNELS: u32 = 4;
/// Thread ids of extra lanes are `lane * LANE_STRIDE + tid`.
const LANE_STRIDE: u32 = 100_000;

/// The producer and its version (`otherData`, which viewers show as metadata), so a
/// reader can tell a trace of another bulkhead version from a damaged one.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
const HEADER: &str = concat!(
    "{\"otherData\":{\"producer\":\"bulkhead\",\"version\":\"",
    env!("CARGO_PKG_VERSION"),
    "\"},\"displayTimeUnit\":\"ns\",\"traceEvents\":["
);

/// A track before lane assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Track {
    pid: u32,
    tid: u32,
}

/// What identifies an open slice, so that its closing event finds it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum OpenKey {
    Job {
        cpu: u32,
        partition: Name,
        task: Name,
        job: u64,
    },
    Process {
        cpu: u32,
        partition: Name,
        cmd: Name,
    },
    Window(u32),
    Mode,
    Agent(Name),
}

struct Open {
    track: Track,
    start: Nanos,
    name: String,
    cat: &'static str,
    args: Value,
}

/// Writes the trace of a stream of events to `out` as the events come.
pub struct Writer<W: Write> {
    out: W,
    /// The first write error; later writes are skipped and [`Writer::finish`] returns it.
    error: Option<io::Error>,
    /// Whether an event has been written (a comma goes before the next).
    written: bool,
    open: BTreeMap<OpenKey, Open>,
    /// Per track and lane: the ended slices a still open slice may overlap without
    /// nesting (see [`Writer::lane`]).
    lanes: BTreeMap<Track, Vec<Vec<(Nanos, Nanos)>>>,
    /// The extra lanes (lane > 0) used, for their names.
    extra: std::collections::BTreeSet<(Track, u32)>,
    partitions: Vec<Name>,
    cpus: Vec<u32>,
    writes: BTreeMap<(Name, u64), (Nanos, u32)>,
    next_flow: u64,
    now: Nanos,
}

/// The Chrome trace-event JSON document for `events` (`{"traceEvents": [..], ..}`).
pub fn export(events: &[Event]) -> Value {
    let mut bytes = Vec::new();
    write(events, &mut bytes).expect("writing to memory");
    serde_json::from_slice(&bytes).expect("the writer writes JSON")
}

/// Writes the trace of `events` to `out`.
pub fn write(events: &[Event], out: impl Write) -> io::Result<()> {
    let mut writer = Writer::new(out)?;
    for event in events {
        writer.add(event);
    }
    writer.finish().map(drop)
}

fn cpu_track(cpu: u32) -> Track {
    Track {
        pid: PID_CPUS,
        tid: cpu + 1,
    }
}

/// The suffix of a sink task's counter track of its messages' end-to-end delays (one
/// point per [`EventKind::Message`], the value its `e2e_ns`).
pub const MESSAGE_TRACK: &str = " message e2e_ns";

fn job_name(partition: &str, task: &str) -> String {
    format!("{partition}/{task}")
}

impl<W: Write> Writer<W> {
    /// Starts the document on `out`.
    pub fn new(mut out: W) -> io::Result<Writer<W>> {
        out.write_all(HEADER.as_bytes())?;
        Ok(Writer {
            out,
            error: None,
            written: false,
            open: BTreeMap::new(),
            lanes: BTreeMap::new(),
            extra: Default::default(),
            partitions: Vec::new(),
            cpus: Vec::new(),
            writes: BTreeMap::new(),
            next_flow: 0,
            now: 0,
        })
    }

    /// Ends the open slices at the last timestamp, writes the names of the tracks and
    /// closes the document; the first write error, if any.
    pub fn finish(mut self) -> io::Result<W> {
        let keys: Vec<OpenKey> = self.open.keys().cloned().collect();
        for key in keys {
            self.end(self.now, &key);
        }
        for value in self.metadata() {
            self.emit(value);
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        self.out.write_all(b"]}")?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Writes one trace event (after the first, with a comma before it).
    fn emit(&mut self, value: Value) {
        if self.error.is_some() {
            return;
        }
        let comma = if self.written { &b","[..] } else { b"" };
        self.written = true;
        let result = self
            .out
            .write_all(comma)
            .and_then(|()| serde_json::to_writer(&mut self.out, &value).map_err(io::Error::other));
        self.error = result.err();
    }

    /// Writes the event at `t`.
    fn point(&mut self, t: Nanos, mut value: Value) {
        extend(&mut value, json!({"ts": micros(t)}));
        self.emit(value);
    }

    /// Adds `event` to the trace; a write error is kept for [`Writer::finish`].
    pub fn add(&mut self, event: &Event) {
        let t = event.t_ns;
        self.now = self.now.max(t);
        match &event.kind {
            EventKind::JobRelease { .. }
            | EventKind::JobStart { .. }
            | EventKind::JobPreempt { .. }
            | EventKind::JobAbort { .. }
            | EventKind::JobComplete { .. }
            | EventKind::DeadlineMiss { .. }
            | EventKind::Budget { .. } => self.add_job(t, &event.kind),
            EventKind::WindowStart { window, length_ns } => {
                self.window_start(t, *window, *length_ns);
            }
            EventKind::WindowEnd { window } => self.end(t, &OpenKey::Window(*window)),
            EventKind::Run {
                cpus,
                partition,
                cmd,
                budget_ns,
            } => self.run(t, cpus, partition, cmd, *budget_ns),
            EventKind::Stop {
                cpus,
                partition,
                cmd,
                ..
            } => self.stop(t, cpus, partition, cmd),
            EventKind::ChannelWrite {
                cpu, channel, msg, ..
            } => {
                self.writes.insert((channel.clone(), *msg), (t, *cpu));
                self.see_cpu(*cpu);
            }
            EventKind::ChannelRead {
                cpu, channel, msg, ..
            } => self.flow(t, *cpu, channel, *msg),
            EventKind::ChannelLoss { channel, msg } => {
                let track = Track {
                    pid: PID_SCHEDULE,
                    tid: TID_CHANNELS,
                };
                self.instant(t, track, format!("loss {channel}"), json!({"msg": msg}));
            }
            EventKind::ModeRequest { .. }
            | EventKind::InterfaceChange { .. }
            | EventKind::AgentRequest { .. }
            | EventKind::AgentAck { .. }
            | EventKind::ModeDone { .. } => self.add_mode(t, &event.kind),
            EventKind::CpuFrequency { cpu, khz } => {
                self.counter(t, format!("CPU {cpu} frequency"), json!({"khz": khz}))
            }
            EventKind::Suspend {} => self.global(t, "suspend".into(), json!({})),
            EventKind::Resume { suspended_ns } => {
                self.global(t, "resume".into(), json!({"suspended_ns": suspended_ns}))
            }
            EventKind::SuspendRequest { .. }
            | EventKind::PartitionSuspended { .. }
            | EventKind::SystemSuspended { .. }
            | EventKind::HealthAction { .. }
            | EventKind::PartitionRequest { .. }
            | EventKind::SignalSwitch { .. }
            | EventKind::ResumeRequest { .. }
            | EventKind::PartitionResumed { .. }
            | EventKind::SystemResumed { .. }
            | EventKind::FirstFreshFrame { .. } => self.as_recorded(t, &event.kind),
            EventKind::Message {
                partition,
                task,
                e2e_ns,
                ..
            } => {
                // The value alone: every argument of a counter event is a series of its
                // own, and the id (source << 48 | sequence) would dwarf the delays.
                let track = format!("{}{MESSAGE_TRACK}", job_name(partition, task));
                self.series(t, track, *e2e_ns);
            }
            EventKind::Counter {
                partition,
                task,
                name,
                value,
            } => self.series(t, format!("{} {name}", job_name(partition, task)), *value),
        }
    }

    /// The events of jobs: slices on their CPU's track, releases and misses as instants,
    /// budgets as counters.
    fn add_job(&mut self, t: Nanos, kind: &EventKind) {
        match kind {
            EventKind::JobRelease {
                cpu,
                partition,
                task,
                job,
                deadline_ns,
            } => self.job_instant(
                t,
                "release",
                *cpu,
                job_name(partition, task),
                *job,
                *deadline_ns,
            ),
            EventKind::JobStart {
                cpu,
                partition,
                task,
                job,
            } => self.job_start(t, *cpu, partition, task, *job),
            EventKind::JobPreempt {
                cpu,
                partition,
                task,
                job,
            }
            | EventKind::JobAbort {
                cpu,
                partition,
                task,
                job,
            }
            | EventKind::JobComplete {
                cpu,
                partition,
                task,
                job,
                ..
            } => {
                let (partition, task) = (partition.clone(), task.clone());
                let key = OpenKey::Job {
                    cpu: *cpu,
                    partition,
                    task,
                    job: *job,
                };
                self.end(t, &key);
            }
            EventKind::DeadlineMiss {
                cpu,
                partition,
                task,
                job,
                deadline_ns,
            } => {
                let name = job_name(partition, task);
                self.job_instant(t, "deadline miss", *cpu, name, *job, *deadline_ns);
            }
            EventKind::Budget {
                partition,
                task,
                remaining_ns,
                ..
            } => {
                let name = format!("budget {}", job_name(partition, task));
                self.counter(t, name, json!({"remaining_ns": remaining_ns}));
            }
            // The other events are `add`'s.
            _ => {}
        }
    }

    /// The events of mode switches (M2-Xen IV-B): the switch and each agent's request as
    /// slices, interface changes as instants, the shared CPUs' bandwidth as counters.
    fn add_mode(&mut self, t: Nanos, kind: &EventKind) {
        match kind {
            EventKind::ModeRequest {
                from,
                to,
                policy,
                load_ppm,
                capacity_ppm,
            } => {
                let track = Track {
                    pid: PID_SCHEDULE,
                    tid: TID_MODES,
                };
                let args = json!({"from": &**from, "to": &**to, "policy": &**policy});
                let name = format!("{from} -> {to} ({policy})");
                self.begin(t, OpenKey::Mode, track, name, "mode", args);
                self.bandwidth(t, "all shared CPUs", *load_ppm, *capacity_ppm);
            }
            EventKind::InterfaceChange {
                partition,
                cpus,
                budget_ns,
                period_ns,
                bandwidth_ppm,
                load_ppm,
                capacity_ppm,
            } => {
                let track = self.partition_track(partition);
                let args = json!({"cpus": cpus.to_string(), "budget_ns": budget_ns, "period_ns": period_ns, "bandwidth_ppm": bandwidth_ppm});
                self.instant(
                    t,
                    track,
                    format!("interface {budget_ns}/{period_ns} ns"),
                    args,
                );
                self.bandwidth(t, &format!("CPUs {cpus}"), *load_ppm, *capacity_ppm);
            }
            EventKind::AgentRequest {
                partition,
                mode,
                boost,
            } => {
                let track = self.partition_track(partition);
                let boosted = if *boost { " (boost)" } else { "" };
                let args = json!({"mode": &**mode, "boost": boost});
                let key = OpenKey::Agent(partition.clone());
                let name = format!("mode agent -> {mode}{boosted}");
                self.begin(t, key, track, name, "mode", args);
            }
            EventKind::AgentAck { partition, .. } => {
                self.end(t, &OpenKey::Agent(partition.clone()))
            }
            EventKind::ModeDone { mode, .. } => {
                self.end(t, &OpenKey::Mode);
                self.global(t, format!("mode {mode}"), json!({}));
            }
            // The other events are `add`'s.
            _ => {}
        }
    }

    /// An instant on `cpu`'s track about a job: `what` and the job's name.
    fn job_instant(
        &mut self,
        t: Nanos,
        what: &str,
        cpu: u32,
        name: String,
        job: u64,
        deadline_ns: Nanos,
    ) {
        let args = json!({"job": job, "deadline_ns": deadline_ns});
        self.instant(t, cpu_track(cpu), format!("{what} {name}"), args);
        self.see_cpu(cpu);
    }

    fn job_start(&mut self, t: Nanos, cpu: u32, partition: &Name, task: &Name, job: u64) {
        let key = OpenKey::Job {
            cpu,
            partition: partition.clone(),
            task: task.clone(),
            job,
        };
        let args = json!({"partition": &**partition, "task": &**task, "job": job});
        let name = job_name(partition, task);
        self.begin(t, key, cpu_track(cpu), name, "job", args);
        self.see_cpu(cpu);
    }

    fn window_start(&mut self, t: Nanos, window: u32, length_ns: Nanos) {
        let track = Track {
            pid: PID_SCHEDULE,
            tid: TID_WINDOWS,
        };
        let args = json!({"window": window, "length_ns": length_ns});
        let name = format!("window {window}");
        self.begin(t, OpenKey::Window(window), track, name, "window", args);
    }

    fn stop(&mut self, t: Nanos, cpus: &CpuSet, partition: &Name, cmd: &Name) {
        for cpu in cpus.iter() {
            let key = OpenKey::Process {
                cpu,
                partition: partition.clone(),
                cmd: cmd.clone(),
            };
            self.end(t, &key);
        }
    }

    /// A global instant named after the event, with its fields as recorded.
    fn as_recorded(&mut self, t: Nanos, kind: &EventKind) {
        let mut args = serde_json::to_value(kind).unwrap_or_default();
        let name = args["event"].as_str().unwrap_or_default().replace('_', " ");
        if let Some(o) = args.as_object_mut() {
            o.remove("event");
        }
        self.global(t, name, args);
    }

    /// One value of the counter series `track` of the partitions' process.
    fn series(&mut self, t: Nanos, track: String, value: impl serde::Serialize) {
        let value =
            json!({"ph": "C", "name": track, "pid": PID_PARTITIONS, "args": {"value": value}});
        self.point(t, value);
    }

    fn run(&mut self, t: Nanos, cpus: &CpuSet, partition: &Name, cmd: &Name, budget_ns: Nanos) {
        for cpu in cpus.iter() {
            let key = OpenKey::Process {
                cpu,
                partition: partition.clone(),
                cmd: cmd.clone(),
            };
            let args = json!({"partition": &**partition, "cmd": &**cmd, "budget_ns": budget_ns, "cpus": cpus.to_string()});
            self.begin(
                t,
                key,
                cpu_track(cpu),
                format!("{partition}: {cmd}"),
                "process",
                args,
            );
            self.see_cpu(cpu);
        }
    }

    fn see_cpu(&mut self, cpu: u32) {
        if let Err(i) = self.cpus.binary_search(&cpu) {
            self.cpus.insert(i, cpu);
        }
    }

    fn partition_track(&mut self, partition: &Name) -> Track {
        let index = match self.partitions.iter().position(|p| p == partition) {
            Some(i) => i,
            None => {
                self.partitions.push(partition.clone());
                self.partitions.len() - 1
            }
        };
        Track {
            pid: PID_PARTITIONS,
            tid: index as u32 + 1,
        }
    }

    /// Opens a slice; an open slice with the same key ends here first.
    fn begin(
        &mut self,
        t: Nanos,
        key: OpenKey,
        track: Track,
        name: String,
        cat: &'static str,
        args: Value,
    ) {
        self.end(t, &key);
        self.open.insert(
            key,
            Open {
                track,
                start: t,
                name,
                cat,
                args,
            },
        );
    }

    /// Closes the slice `key`, if open.
    fn end(&mut self, t: Nanos, key: &OpenKey) {
        if let Some(open) = self.open.remove(key) {
            let Open {
                track,
                start,
                name,
                cat,
                args,
            } = open;
            let end = t.max(start);
            let lane = self.lane(track, start, end);
            if lane > 0 {
                self.extra.insert((track, lane));
            }
            let tid = track.tid + lane * LANE_STRIDE;
            let value = json!({"ph": "X", "name": name, "cat": cat, "pid": track.pid, "tid": tid,
                "dur": micros(end - start), "args": args});
            self.point(start, value);
        }
    }

    /// The first lane of `track` where the slice [start, end], ending now, nests with
    /// every slice of that lane. Slices end in time order, so an earlier one [s, e]
    /// (e <= end) nests unless s < start < e < end, and only a slice still open when it
    /// ended, with its start inside it, can ever overlap it that way: only such ended
    /// slices are kept, until those open slices end.
    fn lane(&mut self, track: Track, start: Nanos, end: Nanos) -> u32 {
        let open: Vec<Nanos> = self
            .open
            .values()
            .filter(|o| o.track == track)
            .map(|o| o.start)
            .collect();
        let lanes = self.lanes.entry(track).or_default();
        let overlaps = |&(s, e): &(Nanos, Nanos)| s < start && start < e && e < end;
        let lane = match lanes.iter().position(|kept| !kept.iter().any(overlaps)) {
            Some(lane) => lane,
            None => {
                lanes.push(Vec::new());
                lanes.len() - 1
            }
        };
        lanes[lane].push((start, end));
        for kept in lanes.iter_mut() {
            kept.retain(|&(s, e)| open.iter().any(|&o| s < o && o < e));
        }
        while lanes.last().is_some_and(Vec::is_empty) && lanes.len() > 1 {
            lanes.pop();
        }
        lane as u32
    }

    fn instant(&mut self, t: Nanos, track: Track, name: String, args: Value) {
        let value = json!({"ph": "i", "s": "t", "name": name, "pid": track.pid, "tid": track.tid, "args": args});
        self.point(t, value);
    }

    fn global(&mut self, t: Nanos, name: String, args: Value) {
        let value = json!({"ph": "i", "s": "g", "name": name, "pid": PID_SCHEDULE, "tid": TID_SYSTEM, "args": args});
        self.point(t, value);
    }

    /// The counter `bandwidth <what>` in the "Schedule" process: load and capacity in ppm.
    fn bandwidth(&mut self, t: Nanos, what: &str, load_ppm: u64, capacity_ppm: u64) {
        let args = json!({"load_ppm": load_ppm, "capacity_ppm": capacity_ppm});
        self.point(
            t,
            json!({"ph": "C", "name": format!("bandwidth {what}"), "pid": PID_SCHEDULE, "args": args}),
        );
    }

    fn counter(&mut self, t: Nanos, name: String, args: Value) {
        self.point(
            t,
            json!({"ph": "C", "name": name, "pid": PID_CPUS, "args": args}),
        );
    }

    /// A flow arrow from the write of `channel`/`msg` to this read.
    fn flow(&mut self, t: Nanos, cpu: u32, channel: &Name, msg: u64) {
        self.see_cpu(cpu);
        let Some(&(written, writer_cpu)) = self.writes.get(&(channel.clone(), msg)) else {
            return;
        };
        let id = self.next_flow;
        self.next_flow += 1;
        let (from, to) = (cpu_track(writer_cpu), cpu_track(cpu));
        let common = json!({"name": &**channel, "cat": "channel", "id": id, "args": {"msg": msg}});
        let mut start = common.clone();
        extend(
            &mut start,
            json!({"ph": "s", "pid": from.pid, "tid": from.tid}),
        );
        let mut finish = common;
        extend(
            &mut finish,
            json!({"ph": "f", "bp": "e", "pid": to.pid, "tid": to.tid}),
        );
        self.point(written, start);
        self.point(t, finish);
    }

    /// Process and thread names, and a sort order that lists CPUs first and in order.
    fn metadata(&self) -> Vec<Value> {
        let mut events = vec![
            process_name(PID_CPUS, "CPUs"),
            process_name(PID_SCHEDULE, "Schedule"),
            process_name(PID_PARTITIONS, "Partitions"),
        ];
        for &cpu in &self.cpus {
            events.push(thread_name(PID_CPUS, cpu + 1, &format!("CPU {cpu}")));
        }
        for (tid, name) in [
            (TID_WINDOWS, "windows"),
            (TID_MODES, "modes"),
            (TID_SYSTEM, "system"),
            (TID_CHANNELS, "channels"),
        ] {
            events.push(thread_name(PID_SCHEDULE, tid, name));
        }
        for (i, partition) in self.partitions.iter().enumerate() {
            events.push(thread_name(PID_PARTITIONS, i as u32 + 1, partition));
        }
        for &(track, lane) in &self.extra {
            let base = match track.pid {
                PID_CPUS => format!("CPU {}", track.tid - 1),
                PID_PARTITIONS => self.partitions[track.tid as usize - 1].to_string(),
                _ => ["windows", "modes", "system", "channels"][track.tid as usize - 1].to_string(),
            };
            events.push(thread_name(
                track.pid,
                track.tid + lane * LANE_STRIDE,
                &format!("{base} (lane {lane})"),
            ));
        }
        events
    }
}

fn micros(ns: Nanos) -> Value {
    if ns % 1000 == 0 {
        json!(ns / 1000)
    } else {
        json!(ns as f64 / 1000.0)
    }
}

fn extend(value: &mut Value, more: Value) {
    if let (Value::Object(target), Value::Object(more)) = (value, more) {
        let more: Map<String, Value> = more;
        target.extend(more);
    }
}

fn process_name(pid: u32, name: &str) -> Value {
    json!({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
}

fn thread_name(pid: u32, tid: u32, name: &str) -> Value {
    json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
}
