//! The trace-event vocabulary that `bulkhead sim` and `bulkhead run` both emit, the
//! schedule-log line format they share, and an exporter to Chrome/Perfetto
//! trace-event JSON.
//!
//! A low layer: partitions, tasks, channels and modes are named by string, so this
//! crate does not depend on the system model. Time is integer nanoseconds of
//! *system time* (monotonic time minus time spent suspended, JuMP2start 2.2).
//!
//! ```
//! use bulkhead_trace::{Event, EventKind, perfetto};
//! let events = vec![
//!     Event::new(0, EventKind::JobStart { cpu: 0, partition: "ctl".into(), task: "t1".into(), job: 0 }),
//!     Event::new(1_000, EventKind::JobComplete { cpu: 0, partition: "ctl".into(), task: "t1".into(), job: 0, response_ns: 1_000 }),
//! ];
//! let json = perfetto::export(&events);
//! assert!(json.to_string().contains("\"ph\":\"X\""));
//! ```
//!
//! The mapping of events onto Perfetto tracks is documented in `docs/trace.md` and
//! in [`perfetto`].

pub mod perfetto;
pub mod schedule_log;

pub use bulkhead_model::{CpuSet, Nanos};
pub use schedule_log::{read_schedule_log, LogError, ScheduleLogWriter};

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A name (partition, task, channel, mode, command): shared, cheap to clone.
pub type Name = Arc<str>;

/// One trace event: a timestamp and what happened.
///
/// Serializes as one flat JSON object, `{"t_ns": .., "event": "<kind>", <fields>}`;
/// this is also the schedule-log line (see [`schedule_log`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// System time in nanoseconds.
    pub t_ns: Nanos,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    pub fn new(t_ns: Nanos, kind: EventKind) -> Event {
        Event { t_ns, kind }
    }
}

/// Why a process stopped running (the end of a [`EventKind::Run`] grant).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantEnd {
    /// It used up the budget of its grant.
    Budget,
    /// It signalled completion for this window (DEmOS `yield`).
    Yield,
    /// The window ended first.
    WindowEnd,
    /// The process exited.
    Exit,
}

/// What happened. Job events identify a job by partition, task and job index
/// (0 = the first job of the task); `cpu` is the CPU it executes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// A job becomes ready; `deadline_ns` is its absolute deadline.
    JobRelease {
        cpu: u32,
        partition: Name,
        task: Name,
        job: u64,
        deadline_ns: Nanos,
    },
    /// A job starts, or resumes after a preemption, executing on `cpu`.
    JobStart {
        cpu: u32,
        partition: Name,
        task: Name,
        job: u64,
    },
    /// A running job stops executing without completing (preempted, or out of budget).
    JobPreempt {
        cpu: u32,
        partition: Name,
        task: Name,
        job: u64,
    },
    /// A job completes; `response_ns` is completion minus release.
    JobComplete {
        cpu: u32,
        partition: Name,
        task: Name,
        job: u64,
        response_ns: Nanos,
    },
    /// A job is discarded unfinished: a restartable task resumes from its checkpoint
    /// after a suspension (JuMP2start 2.2).
    JobAbort {
        cpu: u32,
        partition: Name,
        task: Name,
        job: u64,
    },
    /// A job passes its absolute deadline `deadline_ns` without having completed.
    DeadlineMiss {
        cpu: u32,
        partition: Name,
        task: Name,
        job: u64,
        deadline_ns: Nanos,
    },
    /// The remaining budget of a task's reservation (server) changed.
    Budget {
        cpu: u32,
        partition: Name,
        task: Name,
        remaining_ns: Nanos,
    },
    /// Window `window` (index in the major frame) of the static schedule starts.
    WindowStart { window: u32, length_ns: Nanos },
    /// Window `window` ends.
    WindowEnd { window: u32 },
    /// A process of a windowed partition is granted `cpus` for at most `budget_ns`
    /// (the schedule-log `run` line).
    Run {
        cpus: CpuSet,
        partition: Name,
        cmd: Name,
        budget_ns: Nanos,
    },
    /// The process of the last `run` grant of `partition`/`cmd` stops running.
    Stop {
        cpus: CpuSet,
        partition: Name,
        cmd: Name,
        reason: GrantEnd,
    },
    /// A task running on `cpu` writes message `msg` (a per-channel sequence number) to `channel`.
    ChannelWrite {
        cpu: u32,
        channel: Name,
        partition: Name,
        task: Name,
        msg: u64,
    },
    /// A task running on `cpu` reads message `msg` from `channel`.
    ChannelRead {
        cpu: u32,
        channel: Name,
        partition: Name,
        task: Name,
        msg: u64,
    },
    /// Message `msg` of `channel` is lost: overwritten before any read (latest),
    /// or rejected because the ring is full (fifo).
    ChannelLoss { channel: Name, msg: u64 },
    /// The mode manager accepts a switch from mode `from` to mode `to` and starts it
    /// under `policy` (`sequential`, `batch`, `greedy` or `boost`; M2-Xen IV-B, V).
    /// Bandwidths are in parts per million of one CPU: `load_ppm` is what the resource
    /// interfaces of the partitions on shared CPUs (and the boost reserve) take now,
    /// `capacity_ppm` what those CPUs offer.
    ModeRequest {
        from: Name,
        to: Name,
        policy: Name,
        load_ppm: u64,
        capacity_ppm: u64,
    },
    /// The resource interface of `partition` is now `budget_ns` every `period_ns` on each
    /// of `cpus` (`bandwidth_ppm` in all); `load_ppm` is the bandwidth in use on `cpus`
    /// afterwards, `capacity_ppm` what they offer.
    InterfaceChange {
        partition: Name,
        cpus: CpuSet,
        budget_ns: Nanos,
        period_ns: Nanos,
        bandwidth_ppm: u64,
        load_ppm: u64,
        capacity_ppm: u64,
    },
    /// The mode manager asks the mode agent of `partition` to switch to the task set of
    /// `mode`; with `boost` the agent runs at the reserved boost priority until it
    /// acknowledges (M2-Xen V-B).
    AgentRequest {
        partition: Name,
        mode: Name,
        boost: bool,
    },
    /// The mode agent of `partition` acknowledges: its new task set runs. `demand_ppm` is
    /// the utilization of that task set (with the agent), `interface_ppm` the bandwidth
    /// of the interface it runs in (`null` for a partition that owns its CPUs).
    AgentAck {
        partition: Name,
        demand_ppm: u64,
        interface_ppm: Option<u64>,
    },
    /// The switch is over: the system is in `mode`, `latency_ns` after the request.
    ModeDone {
        mode: Name,
        latency_ns: Nanos,
        load_ppm: u64,
        capacity_ppm: u64,
    },
    /// The clock frequency of `cpu` is now `khz` (power policies).
    CpuFrequency { cpu: u32, khz: u64 },
    /// The system suspends (stop-start). System time stops while suspended.
    Suspend {},
    /// The system resumes after `suspended_ns` of wall-clock time; `t_ns` equals that of
    /// the matching [`EventKind::Suspend`] because system time excludes the suspension.
    Resume { suspended_ns: Nanos },
    /// `bulkhead run`'s stop-start (JuMP2start Fig. 2): suspend request `seq` arrives
    /// (from `bulkhead ctl suspend` or the `suspend_when` trigger, `by`).
    SuspendRequest { seq: u64, by: Name },
    /// Every program of `partition` was asked to suspend and its cgroup is frozen,
    /// `latency_ns` after the request; `unacknowledged` names the programs that did not
    /// acknowledge by the deadline (frozen anyway).
    PartitionSuspended {
        partition: Name,
        latency_ns: Nanos,
        unacknowledged: Vec<Name>,
    },
    /// Every partition in the suspend order is frozen, `latency_ns` after the request.
    SystemSuspended { seq: u64, latency_ns: Nanos },
    /// Resume request `seq` arrives.
    ResumeRequest { seq: u64, by: Name },
    /// `partition` is thawed (its tasks told the resume first), `latency_ns` after the
    /// request.
    PartitionResumed { partition: Name, latency_ns: Nanos },
    /// Every partition runs again, `latency_ns` after the request, after `suspended_ns`
    /// suspended (from the last freeze to the first thaw).
    SystemResumed {
        seq: u64,
        latency_ns: Nanos,
        suspended_ns: Nanos,
    },
    /// Restartable task `task` of `partition` processed its first frame received after the
    /// resume (reported by the task through its `ss.first_fresh_ns` counter),
    /// `latency_ns` after the resume request.
    FirstFreshFrame {
        partition: Name,
        task: Name,
        latency_ns: Nanos,
    },
    /// A named counter that task `task` of `partition` publishes (e.g. the CAN
    /// gateway's `ctl.rx_forwarded`) now has `value`. Producers emit it when the
    /// value changed; counters only grow unless a producer documents otherwise.
    Counter {
        partition: Name,
        task: Name,
        name: Name,
        value: u64,
    },
    /// The health monitor took `action` (as written: `restart`, `mode: safe`...) for
    /// task `task` or process `process` (its index) of `partition`, because of `cause`
    /// (`miss`, `overrun`, `exit`, `silence`), `latency_ns` after the evidence; `failed`
    /// says why the action could not be carried out (docs/health.md).
    HealthAction {
        partition: Name,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<Name>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        process: Option<u32>,
        cause: Name,
        action: Name,
        latency_ns: Nanos,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<Name>,
    },
    /// The gateway reader of `bus` saw `modes.switch_when[index]` met (`signal`): the
    /// switch to `to` was handed to the mode manager; `verdict` is `granted` (it took
    /// it) or `failed` (`reason` says why) (docs/modes.md, "Switches from a signal").
    SignalSwitch {
        index: u32,
        bus: Name,
        signal: Name,
        to: Name,
        verdict: Name,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<Name>,
    },
    /// Process `process` (its index) of `partition` requested from inside a switch to
    /// `mode` or, without one, a suspend; `verdict` is `granted` (the manager took it),
    /// `refused` (the description does not allow it: the caller got EPERM) or `failed`
    /// (the manager did not take it, `reason` says why) (docs/modes.md).
    PartitionRequest {
        partition: Name,
        process: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<Name>,
        verdict: Name,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<Name>,
    },
    /// Task `task` of `partition` (a pipeline's sink) finished message `id` at `t_ns`,
    /// `e2e_ns` after the message's origin stamp (its end-to-end delay).
    Message {
        partition: Name,
        task: Name,
        id: u64,
        e2e_ns: Nanos,
    },
}

/// Where producers put events.
pub trait Sink {
    /// Whether events are wanted at all; producers may skip building them when false.
    fn enabled(&self) -> bool {
        true
    }
    fn emit(&mut self, event: Event);
}

impl Sink for Vec<Event> {
    fn emit(&mut self, event: Event) {
        self.push(event);
    }
}

/// A sink that wants nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Discard;

impl Sink for Discard {
    fn enabled(&self) -> bool {
        false
    }
    fn emit(&mut self, _event: Event) {}
}
