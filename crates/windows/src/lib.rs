//! DEmOS window-schedule semantics as a pure, deterministic state machine.
//!
//! `bulkhead run` (crate `bulkhead-runtime`, real cgroups and timers) and
//! `bulkhead sim` (crate `bulkhead-sim`, simulated time) both drive this one
//! [`Machine`], so for the same description, seed and process behaviour they
//! produce the same schedule log. It does no I/O and reads no clock: the driver
//! feeds it [`Event`]s with schedule times and carries out the [`Action`]s it returns.
//!
//! # Semantics (DEmOS thesis, sections 3.2 and 3.5; DEmOS `Slice`, `Partition`, `Window`)
//!
//! - Time is divided into windows of fixed length, repeated as a major frame. Each
//!   window has slices: a CPU set with at most one safety-critical (SC) and one
//!   best-effort (BE) partition.
//! - At each window start every slice starts its SC partition from its first
//!   process. Processes run one at a time per partition, in order, each until its
//!   budget is used up, it signals completion ([`Event::Completed`]) or it exits.
//! - When the SC partitions of *all* slices of the window are done (a slice without
//!   one counts as done at once), every slice starts its BE partition. BE partitions
//!   go round-robin: they continue with the process where they stopped, and a BE
//!   process cut by the window end keeps its remaining budget for its next run.
//!   Within one window each process runs at most once; a partition with nothing
//!   left leaves its CPUs idle until the window ends.
//! - The window end stops whatever runs. A run whose budget ends exactly at the
//!   window end is complete. An SC process cut by the window end starts over (fresh
//!   budget) in the next window.
//! - A fresh budget is drawn in `budget ± jitter/2` (see [`jitter`]: bulkhead's
//!   portable draws, or DEmOS's own for `demos-sched`); a draw of 0
//!   skips the process for this run. BE leftovers are not redrawn.
//! - `init: true` processes first run all together, each on its partition's widest
//!   CPU set, until each signals initialization completed or exits; then the
//!   schedule starts at schedule time 0.
//! - The machine stops when every process has exited, on [`Event::Stop`], or at
//!   [`Config::stop_at`] (after handling everything planned at that very time).
//!
//! Differences from DEmOS (deliberate): an exiting process frees its slice at
//! once (DEmOS waits for its budget timer); a completion that arrives after the
//! process was already stopped is ignored instead of ending its next run early
//! (the race DEmOS notes in `slice.cpp`); budgets are integer nanoseconds.
//!
//! # Driving it
//!
//! ```
//! use bulkhead_windows::{Action, Config, Event, Machine, Schedule};
//! # let system = bulkhead_model::load_str(
//! #     "windows: [{length: 10, cpu: 0, sc_partition: [{cmd: work, budget: 4}]}]", "doc.yaml").unwrap().system;
//! let schedule = Schedule::from_system(&system, &bulkhead_model::CpuSet::parse("0").unwrap()).unwrap();
//! let mut machine = Machine::new(schedule, Config { seed: 1, stop_at: Some(20_000_000), ..Config::default() });
//! let mut actions = Vec::new();
//! machine.start(&mut actions);
//! while let Some(t) = machine.next_timer() {
//!     // a real driver sleeps until `t` and reports completions/exits as they happen
//!     machine.handle(Event::Timer { t }, &mut actions);
//! }
//! let grants: Vec<_> = actions.iter().filter_map(|a| match a { Action::Grant(g) => Some(g.t), _ => None }).collect();
//! assert_eq!(grants, [0, 10_000_000, 20_000_000]);
//! ```

pub mod corpus;
pub mod drive;
pub mod jitter;
mod machine;
mod schedule;

/// The schedule-log event of a grant (what `--schedule-log` writes for it):
/// `{"t_ns":..,"event":"run","cpus":"<cpulist>","partition":"<name>","cmd":"<command as configured>","budget_ns":..}`.
/// Both executions (`run`, `sim`) write exactly these events for their grants.
pub fn run_event(schedule: &Schedule, grant: &Grant) -> bulkhead_trace::Event {
    let kind = bulkhead_trace::EventKind::Run {
        cpus: grant.cpus.clone(),
        partition: schedule.partitions[grant.partition].name.as_str().into(),
        cmd: schedule.processes[grant.process].cmd.as_str().into(),
        budget_ns: grant.budget,
    };
    bulkhead_trace::Event::new(grant.t, kind)
}

pub use drive::Behaviour;
pub use jitter::Jitter;
pub use machine::{Action, Config, Event, Grant, Machine, Phase, StopReason};
pub use schedule::{
    PartitionId, PartitionSpec, ProcessId, ProcessSpec, Schedule, ScheduleError, SliceSpec,
    WindowSpec,
};
