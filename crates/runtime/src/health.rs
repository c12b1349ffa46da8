//! The health monitor of a run (docs/health.md): the pure machine of
//! `bulkhead_model::health::monitor` fed by the threads that see the evidence (the
//! unwindowed keeper reaps exits, the rt drain thread sees deadline misses), with the
//! actions those threads cannot take themselves (a mode switch, the run's stop) queued
//! for the supervisor's loop. Each action taken is a warning line on stderr and a
//! `health_action` event.
//!
//! Concurrency: one [`SharedHealth`] mutex; holders never block inside it (no system
//! call but the clock read).

use crate::modes::ModeManager;
use crate::stop_start::StopStartManager;
use crate::tasks::RtPartitions;
use crate::wake::Wakers;
use crate::RunError;
use bulkhead_control::SupervisionStatus;
use bulkhead_model::health::monitor::{Decision, Evidence, Monitor, SupervisionState};
use bulkhead_model::health::{Action, Member};
use bulkhead_model::System;
use bulkhead_os::clock::now_ns;
use bulkhead_trace::{Event, EventKind};
use std::sync::{Arc, Mutex};

/// The run's health monitor, shared by the threads that feed it.
pub type SharedHealth = Arc<Mutex<Health>>;

pub struct Health {
    monitor: Monitor,
    /// Mode switches and stops for the supervisor's loop, in order.
    requests: Vec<Decision>,
    /// Restarts of best-effort processes (`restart`, `restart_partition`), for the unwindowed
    /// keeper.
    be_restarts: Vec<Decision>,
    /// Restarts of rt tasks, for the rt drain thread.
    rt_restarts: Vec<Decision>,
    /// Events for the schedule log, times since `epoch_ns`.
    events: Vec<Event>,
    epoch_ns: u64,
    /// Set by a `stop` action: why the run stops (an error of the run).
    stop: Option<String>,
    /// Wake the thread a decision is routed to.
    wakers: Wakers,
}

/// What the supervisor's loop carries out health actions with: the mode manager (a
/// system with modes) and the stop-start manager (a run with a control socket), the
/// managers `ctl mode` and `ctl suspend` reach.
#[derive(Default)]
pub struct Managers<'a> {
    pub modes: Option<&'a mut ModeManager>,
    pub stop_start: Option<&'a mut StopStartManager>,
}

/// Fires the expired watchdogs (restarts go to the keeper of their member) and carries
/// out the queued mode switches, suspends and stops with `managers`; true when the run
/// must stop.
pub fn serve(health: &SharedHealth, managers: Managers<'_>) -> bool {
    let Managers {
        mut modes,
        mut stop_start,
    } = managers;
    let mut h = lock(health);
    for d in h.monitor.tick(now_ns()) {
        let (partition, member) = h.monitor.member(d.member);
        let why = format!(
            "{} of partition `{partition}` fell silent (no heartbeat within its watchdog's timeout); health action: stop",
            who(member)
        );
        h.route(d, why);
    }
    for d in h.take_requests() {
        let result = match &d.action {
            Action::Mode(name) => match modes.as_deref_mut() {
                Some(m) => match m.request(name, None) {
                    Some(r) if r.error.is_some() => {
                        Err(r.error.map(|e| e.message).unwrap_or_default())
                    }
                    _ => Ok(()),
                },
                None => Err("the system has no mode manager".to_string()),
            },
            Action::Suspend => match stop_start.as_deref_mut() {
                Some(s) => s.request_by(true, None, "health").map_or(Ok(()), |r| {
                    Err(r.error.map(|e| e.message).unwrap_or_default())
                }),
                None => Err("the run has no stop-start manager".to_string()),
            },
            _ => Ok(()),
        };
        h.done(&d, result);
    }
    h.stopped().is_some()
}

/// Feeds a job event of the rt drain to the monitor: a deadline miss of a supervised
/// task, or a completed job (a heartbeat of its watchdog); a decision is routed
/// ([`Health::route`]).
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
    if let Some(d) = h.observe(i, evidence) {
        let why = format!(
            "task `{task}` of partition `{partition}` missed its deadline; health action: stop"
        );
        h.route(d, why);
    }
}

/// Feeds the exits of rt tasks the drain thread reaped since its last call and the jobs
/// drained over their budget (`on_overrun`), and carries out the restarts decided for
/// tasks (`restart`, `restart_partition` of an rt
/// partition): each in `rt`, its `health_action` ending at the new process's start.
pub fn serve_rt(health: &SharedHealth, rt: &mut RtPartitions) {
    let mut h = lock(health);
    for (partition, task, status) in rt.take_exits() {
        let Some(i) = h.find(&partition, &Member::Task(task.clone())) else {
            continue;
        };
        if let Some(d) = h.observe(i, Evidence::Exit) {
            let why = format!(
                "task `{task}` of partition `{partition}` exited: {status}; health action: stop"
            );
            h.route(d, why);
        }
    }
    for (partition, task, jobs) in rt.take_overruns() {
        let Some(i) = h.find(&partition, &Member::Task(task.clone())) else {
            continue;
        };
        for _ in 0..jobs {
            if let Some(d) = h.observe(i, Evidence::Overrun) {
                let why = format!(
                    "task `{task}` of partition `{partition}` overran its budget; health action: stop"
                );
                h.route(d, why);
            }
        }
    }
    for d in std::mem::take(&mut h.rt_restarts) {
        let (partition, member) = h.monitor.member(d.member);
        let partition = partition.to_string();
        let restarted = match (&d.action, member) {
            (Action::Restart, Member::Task(task)) => rt.restart(&partition, &[task.as_str()]),
            _ => rt.restart(&partition, &[]),
        };
        for task in restarted.as_deref().unwrap_or_default() {
            if let Some(i) = h.find(&partition, &Member::Task(task.clone())) {
                h.observe(i, Evidence::Heartbeat);
            }
        }
        h.done(&d, restarted.map(drop));
    }
}

/// Each supervision's state now, for `ctl status`.
pub fn statuses(health: &SharedHealth) -> Vec<SupervisionStatus> {
    let h = lock(health);
    let states = h.monitor.states(now_ns()).into_iter();
    let status = |s: SupervisionState| {
        let (partition, member) = h.monitor.member(s.member);
        let (task, process) = match member {
            Member::Task(t) => (Some(t.clone()), None),
            Member::Process(k) => (None, Some(*k as u32)),
        };
        SupervisionStatus {
            partition: partition.to_string(),
            task,
            process,
            supervision: s.supervision.to_string(),
            fired: s.fired,
            next_action: s.next_action.text(),
            misses: s.misses,
            silent_ns: s.silent_ns,
        }
    };
    states.map(status).collect()
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
    /// supervisions and actions `run` does not carry out, naming them (`control`: the
    /// run has a control socket).
    pub fn start(
        system: &System,
        control: bool,
        wakers: &Wakers,
    ) -> Result<Option<SharedHealth>, RunError> {
        if system.health.is_empty() {
            return Ok(None);
        }
        check(system, control)?;
        let now = now_ns();
        Ok(Some(Arc::new(Mutex::new(Health {
            monitor: Monitor::new(&system.health, now),
            requests: Vec::new(),
            be_restarts: Vec::new(),
            rt_restarts: Vec::new(),
            events: Vec::new(),
            epoch_ns: now,
            stop: None,
            wakers: wakers.clone(),
        }))))
    }

    /// Event times count from `epoch_ns` (the rt tasks' release 0).
    pub fn set_epoch(&mut self, epoch_ns: u64) {
        self.epoch_ns = epoch_ns;
    }

    /// When the next watchdog expires (CLOCK_MONOTONIC), if any member has one.
    pub fn next_expiry(&self) -> Option<u64> {
        self.monitor.next_expiry()
    }

    /// The monitor's index of `member` of `partition`, if supervised.
    pub fn find(&self, partition: &str, member: &Member) -> Option<usize> {
        self.monitor.find(partition, member)
    }

    /// Feeds `evidence` about member `i`, seen now; the decision if a supervision fired.
    pub fn observe(&mut self, i: usize, evidence: Evidence) -> Option<Decision> {
        self.monitor.observe(i, evidence, now_ns())
    }

    /// Sends `d` where it is carried out: a `log` is done at once; a restart goes to
    /// the keeper of its member (the unwindowed keeper for a process, the rt drain thread for
    /// a task); a mode switch, a suspend and a stop (which stops the run, `why`) to the
    /// supervisor's loop; the thread it goes to is woken at once.
    pub fn route(&mut self, d: Decision, why: String) {
        match (&d.action, self.monitor.member(d.member).1) {
            (Action::Log, _) => self.done(&d, Ok(())),
            (Action::Restart | Action::RestartPartition, Member::Process(_)) => {
                self.be_restarts.push(d);
                self.wakers.keeper.notify();
            }
            (Action::Restart | Action::RestartPartition, Member::Task(_)) => {
                self.rt_restarts.push(d);
                self.wakers.drain.notify();
            }
            (Action::Stop, _) => {
                self.stop(why);
                self.requests.push(d);
                self.wakers.services.notify();
            }
            (Action::Mode(_) | Action::Suspend, _) => {
                self.requests.push(d);
                self.wakers.services.notify();
            }
        }
    }

    /// The queued mode switches, suspends and stops, emptied.
    fn take_requests(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.requests)
    }

    /// The restarts of processes decided so far, emptied.
    pub fn take_be_restarts(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.be_restarts)
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

/// What `run` carries out (in a system without windows, [`bulkhead_plan::scope`]):
/// every supervision, with every action, where its manager exists: `suspend` needs the
/// control socket's stop-start manager (`control`: the run has one). The rest is refused
/// before anything starts.
fn check(system: &System, control: bool) -> Result<(), RunError> {
    for s in &system.health {
        let who = who(&s.member);
        let h = &s.health;
        for (key, escalation) in h.escalations() {
            if control
                || !escalation
                    .steps
                    .iter()
                    .any(|s| matches!(s.action, Action::Suspend))
            {
                continue;
            }
            return Err(RunError::invalid(format!(
                "partition `{}`, {who}: health.{key}: the action `suspend` needs the stop-start manager of a run with a control socket (--control)",
                s.partition
            )));
        }
    }
    Ok(())
}
