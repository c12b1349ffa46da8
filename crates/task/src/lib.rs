//! bulkhead-task: the library a real-time task of an `rt` partition links against, and the
//! supervisor's side of it.
//!
//! A task is a periodic service (DriveOS section 3.2, "Real-time Task as a Service": budget
//! C, period T). The supervisor hands each task two memfds, named by the environment
//! variable [`ENV`] (`BULKHEAD_TASK=<control fd>,<trace fd>`):
//!
//! * the **control block** ([`control`]): the task's parameters (C, T, D, name), the
//!   release epoch (CLOCK_MONOTONIC time of activation 0; the supervisor may move it, e.g.
//!   to stitch out suspended time) and the task's release offset (phased releases: its
//!   releases are `epoch + offset + k * T`), its restart count and a stop request, plus counters the
//!   task writes, among them up to 32 *named counters* ([`Task::counter`], C:
//!   `bulkhead_counter`) that the supervisor reads by name
//!   ([`link::TaskLink::named_counters`]) and exports to the trace;
//! * the **trace ring**: a `bulkhead-chan` fifo channel of [`Record`]s, one per completed
//!   activation, written with `try_write` (no system call: the fifo wakes its reader only
//!   when the reader sleeps, and the supervisor never does, it drains with `try_read`). A
//!   full ring drops the record and counts it; a task never blocks on its trace.
//!
//! The task calls [`Task::wait_next_period`] (C: `bulkhead_wait_next_period`), which
//! completes the current activation (if [`Task::complete`] did not already), sleeps until
//! the next release and returns the [`Activation`]: index, release time, absolute deadline
//! and flags ([`flags::OVERRUN`], [`flags::SKIPPED`], [`flags::RESTARTED`],
//! [`flags::RESUMED`]).
//!
//! Stop-start (docs/stop-start.md): [`Task::wait_next_period`] is the safe point where a
//! suspend request is acknowledged ([`Task::on_suspend`]); [`Task::system_time_ns`] leaves
//! out the time the system spent suspended; [`Task::run_restartable`] returns a task to its
//! checkpoint at each resume (C: `bulkhead_checkpoint`).
//!
//! Multi-mode systems: [`Task::current_mode`] is the index of the current mode in the
//! description's mode table; [`Task::wait_mode_change`] waits for the mode agent's
//! request and [`Task::ack_mode`] acknowledges it (C: `bulkhead_current_mode`,
//! `bulkhead_mode_wait`, `bulkhead_mode_ack`; the words are in [`control`]).
//!
//! The supervisor creates both with [`link::TaskLink`], passes them to the task's
//! process, and drains the ring into the schedule log and the trace.

pub mod capi;
pub mod clock;
pub mod control;
mod error;
pub mod link;
mod record;
mod task;

pub use control::{ModeChange, Timing};
pub use error::{Error, Result};
pub use record::{flags, Record, RECORD_SIZE};
pub use task::{
    Activation, Counter, Params, Resume, SuspendFn, Task, Wake, ACK_AT_ONCE, ARRIVAL_CHECK_NS,
};

/// The environment variable naming the task's control and trace file descriptors.
pub const ENV: &str = "BULKHEAD_TASK";
