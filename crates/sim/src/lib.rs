//! `bulkhead-sim`: a deterministic, integer-nanosecond discrete-event simulation of a
//! bulkhead system, the reference `bulkhead run` is tested against.
//!
//! - rt partitions: fixed-priority (RM/DM/explicit) or EDF scheduling of their tasks
//!   on their CPUs, periodic or sporadic releases, fixed or seeded random execution
//!   times, each task optionally under a server ([`ServerKind`]: sporadic,
//!   deferrable, CBS, I/O);
//! - channels (fifo, latest) between tasks carrying message ids, with per-chain
//!   end-to-end delay, throughput and loss;
//! - JuMP2start suspend/resume with restartable and continuable tasks, and the stop
//!   protocol around it ([`stop`]: suspend order, acknowledgements, stale/fresh rule);
//! - DEmOS window schedules, driven through the `bulkhead-windows` state machine
//!   that `bulkhead run` drives too.
//!
//! Output: `bulkhead-trace` events (schedule log, Perfetto trace) and a [`Report`].

pub mod background;
mod build;
mod channels;
mod energy;
mod engine;
mod error;
pub mod modes;
pub mod pipes;
mod pools;
#[cfg(feature = "progress")]
pub mod progress;
pub mod report;
pub mod spec;
pub mod stop;
mod windows;

pub use build::{
    hyperperiod, link_warnings, priority_ranks, Arrivals, BuildOptions, ExecModel, Link,
    LinkSyntax, ServerChoice,
};
pub use channels::{ChainStats, ChannelStats};
pub use energy::{CpuEnergy, EnergyStats, PowerSpec};
pub use engine::{random_stalls, Fault, FaultKind, Options, Sim, Stall, Suspension, MAX_BACKLOG};
pub use error::{BuildError, SimError, SpecError};
pub use modes::{ModeSwitch, ModeSwitchError, ModesSpec};
pub use report::{Report, SwitchStats, TaskStats};
pub use spec::*;
pub use windows::{Behaviour, WindowStats, WindowsSpec};

/// The trace vocabulary and writers, re-exported for the CLI.
pub use bulkhead_trace as trace;

use bulkhead_trace::Sink;

/// Builds the simulation of the rt partitions of `system`: one domain per rt partition,
/// one server per task; partitions scheduled as servers share one domain per pool of
/// CPUs ([`crate::pools`]). A system with modes starts in its initial mode, every task
/// of every mode present ([`crate::modes`]). Channels connect the tasks named by
/// `options.links`; a channel without a link connects the first task of its writer
/// partition to the first task of each reader partition (partitions without tasks are
/// outside the task simulation).
pub fn from_system(
    system: &bulkhead_model::System,
    options: &BuildOptions,
) -> Result<Spec, BuildError> {
    if system.modes.is_some() {
        return modes::from_modal_system(system, options);
    }
    let placements = placements(system);
    let interface = |p: &bulkhead_model::Partition, n| {
        let r = bulkhead_analysis::servers::resolve(p, n);
        (r.budget.unwrap_or(r.period), r.period)
    };
    build::build(system, options, &interface, &|p, t| placements.get(p, t))
}

/// Where `system`'s rt tasks run: as the analysis that admits it places them, which is
/// where `run` reserves them ([`bulkhead_plan::Placements`]).
pub(crate) fn placements(system: &bulkhead_model::System) -> bulkhead_plan::Placements {
    let report = bulkhead_analysis::system::analyze_system(system);
    bulkhead_plan::Placements::of(&report)
}

/// Simulates `spec` to the end of `options`, sending events to `sink` (none are
/// recorded when `sink.enabled()` is false).
pub fn simulate(spec: &Spec, options: Options, sink: &mut dyn Sink) -> Result<Report, SimError> {
    let tracing = sink.enabled();
    Ok(Sim::new(spec, options, tracing)?.run(sink))
}

/// Whether an event belongs in the schedule log (`--schedule-log`): the process run
/// grants (`run`, the lines `bulkhead run` writes too, so that DEmOS schedules compare
/// byte for byte), the rt jobs' releases, starts, preemptions, completions, aborts and
/// deadline misses, suspensions, the steps of mode switches, and the power policy's
/// frequency changes (`cpu_frequency`, as `bulkhead run` logs them), and the messages
/// pipeline sinks finish (`message`, as a run logs them). Budgets, windows,
/// channels and the rest are in the Perfetto trace only.
pub fn in_schedule_log(kind: &bulkhead_trace::EventKind) -> bool {
    use bulkhead_trace::EventKind as K;
    matches!(
        kind,
        K::Run { .. }
            | K::JobRelease { .. }
            | K::JobStart { .. }
            | K::JobPreempt { .. }
            | K::JobComplete { .. }
            | K::JobAbort { .. }
            | K::DeadlineMiss { .. }
            | K::Suspend {}
            | K::Resume { .. }
            | K::ModeRequest { .. }
            | K::InterfaceChange { .. }
            | K::AgentRequest { .. }
            | K::AgentAck { .. }
            | K::ModeDone { .. }
            | K::CpuFrequency { .. }
            | K::Message { .. }
            | K::HealthAction { .. }
    )
}
