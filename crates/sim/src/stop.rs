//! The stop protocol around a suspension, as `bulkhead run`'s supervisor runs it
//! (JuMP2start 2.1-2.2, Fig. 2): the request goes to every task at once with one
//! acknowledgement deadline; the partitions are frozen in the suspend order, each once
//! its tasks have acknowledged or the deadline has passed (frozen anyway, named); at the
//! resume they are thawed in reverse order; each restartable task then reports its first
//! fresh frame. The events carry the supervisor's log names.
//!
//! The simulated schedule stops at the request's system time (JuMP2start Fig. 5: the
//! suspension is an instant of system time): no job runs after the request, so a task
//! acknowledges at once when it is at its safe point (no job started and unfinished:
//! the task library acknowledges in `wait_next_period`) and not at all when it is in the
//! middle of a job. The waits of the protocol (the acknowledgement deadline) and the
//! suspension itself are wall-clock time, which system time leaves out: each event has
//! both times.

use bulkhead_model::Nanos;
use serde::Serialize;

/// How a stop runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopSpec {
    /// Partitions in suspend order (resume: reversed); partitions not named follow in
    /// the order their first task appears in the spec.
    pub order: Vec<String>,
    /// How long the tasks have to acknowledge a suspend request.
    pub ack_deadline: Nanos,
    /// Partitions that stay awake through a suspension, as `run` keeps them: the
    /// gateways of the buses a stop-start trigger watches (`StopStart::awake`). The
    /// protocol neither asks nor freezes them, and their tasks go on as they were
    /// (continuable, whatever they declare: they are never suspended).
    pub awake: Vec<String>,
}

/// The supervisor's default acknowledgement deadline (5 ms).
pub const DEFAULT_ACK_DEADLINE: Nanos = 5_000_000;

impl Default for StopSpec {
    fn default() -> StopSpec {
        StopSpec {
            order: Vec::new(),
            ack_deadline: DEFAULT_ACK_DEADLINE,
            awake: Vec::new(),
        }
    }
}

impl StopSpec {
    /// How `system`'s stops run, as `bulkhead run`'s supervisor runs them: its
    /// `stop_start:` order and acknowledgement deadline (or their defaults), and the
    /// gateways of the buses its triggers watch kept awake.
    pub fn of(system: &bulkhead_model::System) -> StopSpec {
        let stop_start = system.stop_start();
        let awake = stop_start.awake(system).into_iter().map(String::from);
        StopSpec {
            order: stop_start.order.clone(),
            ack_deadline: stop_start.ack_deadline,
            awake: awake.collect(),
        }
    }
}

/// One event of a stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StopEvent {
    /// `suspend_request`, `partition_suspended`, `system_suspended`, `resume_request`,
    /// `partition_resumed`, `system_resumed` or `first_fresh_frame`.
    pub event: &'static str,
    /// System time (the suspension and the protocol's waits left out).
    pub system_ns: Nanos,
    /// Wall-clock time since the start of the simulation.
    pub wall_ns: Nanos,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// `partition_suspended`: its tasks that had not acknowledged by the deadline and
    /// were frozen anyway.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_acked: Vec<String>,
}

impl StopEvent {
    pub(crate) fn new(event: &'static str, system_ns: Nanos, wall_ns: Nanos) -> StopEvent {
        StopEvent {
            event,
            system_ns,
            wall_ns,
            partition: None,
            task: None,
            not_acked: Vec::new(),
        }
    }
}

/// A partition as the protocol sees it at the request: its name and its tasks (name,
/// whether the task is at its safe point).
pub(crate) struct PartitionAtRequest {
    pub name: String,
    pub tasks: Vec<(String, bool)>,
}

/// The events of one stop from the request (system time `at`, wall time `wall`) to the
/// system resumed, for a suspension of `duration` wall-clock time after the last freeze;
/// returns them and the wall-clock time the stop took (request to resume).
pub(crate) fn protocol(
    spec: &StopSpec,
    partitions: &[PartitionAtRequest],
    at: Nanos,
    wall: Nanos,
    duration: Nanos,
) -> (Vec<StopEvent>, Nanos) {
    let mut events = vec![StopEvent::new("suspend_request", at, wall)];
    let mut frozen_at = wall;
    for p in partitions {
        let not_acked: Vec<String> = p
            .tasks
            .iter()
            .filter(|(_, safe)| !safe)
            .map(|(name, _)| name.clone())
            .collect();
        if !not_acked.is_empty() {
            frozen_at = frozen_at.max(wall + spec.ack_deadline);
        }
        events.push(StopEvent {
            partition: Some(p.name.clone()),
            not_acked,
            ..StopEvent::new("partition_suspended", at, frozen_at)
        });
    }
    events.push(StopEvent::new("system_suspended", at, frozen_at));
    let resumed = frozen_at + duration;
    events.push(StopEvent::new("resume_request", at, resumed));
    for p in partitions.iter().rev() {
        events.push(StopEvent {
            partition: Some(p.name.clone()),
            ..StopEvent::new("partition_resumed", at, resumed)
        });
    }
    events.push(StopEvent::new("system_resumed", at, resumed));
    (events, resumed - wall)
}

/// Partition names in suspend order: `spec.order` first, then the others as they
/// appear, without the partitions that stay awake.
pub(crate) fn suspend_order<'n>(
    spec: &StopSpec,
    appearing: impl Iterator<Item = &'n str>,
) -> Vec<String> {
    let mut out: Vec<String> = spec.order.to_vec();
    for name in appearing {
        if !out.iter().any(|o| o == name) {
            out.push(name.to_string());
        }
    }
    out.retain(|name| !spec.awake.contains(name));
    out
}
