//! The health monitor of a run (docs/health.md): the pure machine of
//! `bulkhead_model::health::monitor` fed by the threads that see the evidence (the
//! free keeper reaps exits, the rt drain thread sees deadline misses), with the
//! actions those threads cannot take themselves (a mode switch, the run's stop) queued
//! for the supervisor's loop. Each action taken is a warning line on stderr and a
//! `health_action` event.
//!
//! Concurrency: one [`SharedHealth`] mutex; holders never block inside it (no system
//! call but the clock read).

use crate::modes::ModeManager;
use crate::RunError;
use bulkhead_model::health::monitor::{Decision, Evidence, Monitor};
use bulkhead_model::health::{Action, Member};
use bulkhead_model::{PartitionKind, System};
use bulkhead_os::clock::now_ns;
use bulkhead_trace::{Event, EventKind};
use std::sync::{Arc, Mutex};

/// The run's health monitor, shared by the threads that feed it.
pub type SharedHealth = Arc<Mutex<Health>>;

pub struct Health {
    monitor: Monitor,
    /// Mode switches and stops for the supervisor's loop, in order.
    requests: Vec<Decision>,
    /// Watchdog restarts of best-effort processes, for the free keeper.
    restarts: Vec<Decision>,
    /// Events for the schedule log, times since `epoch_ns`.
    events: Vec<Event>,
    epoch_ns: u64,
    /// Set by a `stop` action: why the run stops (an error of the run).
    stop: Option<String>,
}

/// Fires the expired watchdogs (a process's restart goes to the free keeper) and
/// carries out the queued mode switches and stops with `modes` (the mode manager, where
/// the system has modes); true when the run must stop.
pub fn serve(health: &SharedHealth, mut modes: Option<&mut ModeManager>) -> bool {
    let mut h = lock(health);
    let expired = h.monitor.tick(now_ns());
    let mut decisions = h.take_requests();
    for d in expired {
        match d.action {
            Action::Restart => h.restarts.push(d),
            Action::Stop => {
                let (partition, member) = h.monitor.member(d.member);
                let why = format!(
                    "{} of partition `{partition}` fell silent (no heartbeat within its watchdog's timeout); health action: stop",
                    who(member)
                );
                h.stop(why);
                decisions.push(d);
            }
            _ => decisions.push(d),
        }
    }
    for d in decisions {
        let result = match (&d.action, modes.as_deref_mut()) {
            (Action::Mode(name), Some(m)) => match m.request(name, None) {
                Some(r) if r.error.is_some() => Err(r.error.map(|e| e.message).unwrap_or_default()),
                _ => Ok(()),
            },
            (Action::Mode(_), None) => Err("the system has no mode manager".to_string()),
            _ => Ok(()),
        };
        h.done(&d, result);
    }
    h.stopped().is_some()
}

/// Feeds a job event of the rt drain to the monitor: a deadline miss of a supervised
/// task, or a completed job (a heartbeat of its watchdog); a decision is logged at once
/// (`log`) or queued for the supervisor's loop.
pub fn job_event(health: &SharedHealth, event: &Event) {
    let (partition, task, evidence) = match &event.kind {
        EventKind::DeadlineMiss {
            partition, task, ..
        } => (partition, task, Evidence::Miss),
        EventKind::JobComplete {
            partition, task, ..
        } => (partition, task, Evidence::Heartbeat),
        _ => return,
    };
    let mut h = lock(health);
    let Some(i) = h.find(partition, &Member::Task(task.to_string())) else {
        return;
    };
    let Some(d) = h.observe(i, evidence) else {
        return;
    };
    match d.action {
        Action::Log => h.done(&d, Ok(())),
        Action::Stop => {
            h.stop(format!(
                "task `{task}` of partition `{partition}` missed its deadline; health action: stop"
            ));
            h.request(d);
        }
        _ => h.request(d),
    }
}

/// `task `T`` or `process K`, as messages name a supervised member.
fn who(member: &Member) -> String {
    match member {
        Member::Task(t) => format!("task `{t}`"),
        Member::Process(k) => format!("process {k}"),
    }
}

/// Locks `h`, whatever a panicking holder left (the monitor stays consistent: each
/// update is a few assignments).
pub fn lock(h: &SharedHealth) -> std::sync::MutexGuard<'_, Health> {
    h.lock().unwrap_or_else(|e| e.into_inner())
}

impl Health {
    /// The monitor of `system`'s `health:` keys; `None` when it has none. Refuses the
    /// supervisions and actions `run` does not carry out, naming them.
    pub fn start(system: &System) -> Result<Option<SharedHealth>, RunError> {
        if system.health.is_empty() {
            return Ok(None);
        }
        check(system)?;
        let now = now_ns();
        Ok(Some(Arc::new(Mutex::new(Health {
            monitor: Monitor::new(&system.health, now),
            requests: Vec::new(),
            restarts: Vec::new(),
            events: Vec::new(),
            epoch_ns: now,
            stop: None,
        }))))
    }

    /// Event times count from `epoch_ns` (the rt tasks' release 0).
    pub fn set_epoch(&mut self, epoch_ns: u64) {
        self.epoch_ns = epoch_ns;
    }

    /// The monitor's index of `member` of `partition`, if supervised.
    pub fn find(&self, partition: &str, member: &Member) -> Option<usize> {
        self.monitor.find(partition, member)
    }

    /// Feeds `evidence` about member `i`, seen now; the decision if a supervision fired.
    pub fn observe(&mut self, i: usize, evidence: Evidence) -> Option<Decision> {
        self.monitor.observe(i, evidence, now_ns())
    }

    /// Queues `d` for the supervisor's loop (a mode switch or a stop).
    pub fn request(&mut self, d: Decision) {
        self.requests.push(d);
    }

    /// The queued mode switches and stops, emptied.
    pub fn take_requests(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.requests)
    }

    /// The watchdog restarts of processes decided so far, emptied.
    pub fn take_restarts(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.restarts)
    }

    /// The run must stop: why.
    pub fn stop(&mut self, why: String) {
        self.stop.get_or_insert(why);
    }

    /// Why a `stop` action stopped the run, if one did.
    pub fn stopped(&self) -> Option<&str> {
        self.stop.as_deref()
    }

    /// Records that `d` was carried out now (`result`: its failure), as a stderr line
    /// and a `health_action` event.
    pub fn done(&mut self, d: &Decision, result: Result<(), String>) {
        let end = now_ns();
        let (partition, member) = self.monitor.member(d.member);
        let who = who(member);
        let outcome = match &result {
            Ok(()) => String::new(),
            Err(e) => format!(" failed: {e}"),
        };
        eprintln!(
            "bulkhead: health: {who} of partition `{partition}`: {}: {}{outcome}",
            d.cause.name(),
            d.action.text()
        );
        let (task, process) = match member {
            Member::Task(t) => (Some(t.as_str().into()), None),
            Member::Process(k) => (None, Some(*k as u32)),
        };
        let kind = EventKind::HealthAction {
            partition: partition.into(),
            task,
            process,
            cause: d.cause.name().into(),
            action: d.action.text().into(),
            latency_ns: end.saturating_sub(d.evidence_ns),
            failed: result.err().map(|e| e.as_str().into()),
        };
        self.events
            .push(Event::new(end.saturating_sub(self.epoch_ns), kind));
    }

    /// The events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}

/// What `run` carries out: exits of best-effort processes, deadline misses of rt
/// tasks and watchdogs of both, in a system without windows, with every action but
/// `restart_partition` and `suspend` (`restart` of best-effort processes only). The
/// rest is refused before anything starts.
fn check(system: &System) -> Result<(), RunError> {
    if !system.windows.is_empty() {
        return Err(RunError::invalid(
            "health: not carried out by `run` yet in a system with a window schedule",
        ));
    }
    for s in &system.health {
        let rt = system
            .partition(&s.partition)
            .is_some_and(|p| p.kind == PartitionKind::Rt);
        let who = who(&s.member);
        let h = &s.health;
        let unsupported = [
            ("on_overrun", h.on_overrun.is_some()),
            ("on_exit", rt && h.on_exit.is_some()),
        ];
        if let Some((key, _)) = unsupported.iter().find(|(_, given)| *given) {
            return Err(RunError::invalid(format!(
                "partition `{}`, {who}: health.{key}: not carried out by `run` yet (check, analyze and sim accept it)",
                s.partition
            )));
        }
        for (key, escalation) in h.escalations() {
            for step in &escalation.steps {
                let carried = match step.action {
                    Action::Log | Action::Mode(_) | Action::Stop => true,
                    Action::Restart => !rt,
                    Action::RestartPartition | Action::Suspend => false,
                };
                if !carried {
                    return Err(RunError::invalid(format!(
                        "partition `{}`, {who}: health.{key}: the action `{}` is not carried out by `run` yet",
                        s.partition,
                        step.action.text()
                    )));
                }
            }
        }
    }
    Ok(())
}
