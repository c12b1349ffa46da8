//! `bulkhead-sim`: a deterministic, integer-nanosecond discrete-event simulation of a
//! bulkhead system, the reference `bulkhead run` is tested against.
//!
//! - rt partitions: fixed-priority (RM/DM/explicit) or EDF scheduling of their tasks
//!   on their CPUs, periodic or sporadic releases, fixed or seeded random execution
//!   times, each task optionally under a server ([`ServerKind`]: sporadic,
//!   deferrable, CBS, I/O);
//! - channels (fifo, latest) between tasks carrying message ids, with per-chain
//!   end-to-end delay, throughput and loss;
//! - JuMP2start suspend/resume with restartable and continuable tasks;
//! - DEmOS window schedules, driven through the `bulkhead-windows` state machine
//!   that `bulkhead run` drives too.
//!
//! Output: `bulkhead-trace` events (schedule log, Perfetto trace) and a [`Report`].

mod build;
mod channels;
mod engine;
pub mod report;
pub mod spec;

pub use build::{from_system, priority_ranks, Arrivals, BuildOptions, ExecModel, Link};
pub use channels::{ChainStats, ChannelStats};
pub use engine::{Options, Sim, Suspension};
pub use report::{Report, TaskStats, WindowStats};
pub use spec::*;

use bulkhead_trace::Sink;

/// Simulates `spec` to the end of `options`, sending events to `sink` (none are
/// recorded when `sink.enabled()` is false).
pub fn simulate(spec: &Spec, options: Options, sink: &mut dyn Sink) -> Result<Report, String> {
    let tracing = sink.enabled();
    Ok(Sim::new(spec, options, tracing)?.run(sink))
}
