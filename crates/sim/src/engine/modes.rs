//! The mode manager in simulated time: requests, the steps of the
//! [`bulkhead_modes::Switch`], the agents' jobs and their acknowledgements, task sets
//! that change, interfaces that change, and boosted VCPUs.

use super::{Ev, Sim};
use crate::error::SimError;
use crate::modes::{ModeSwitch, TaskParams};
use crate::report::SwitchStats;
use crate::spec::*;
use bulkhead_modes::{Interface, Step, Switch};
use bulkhead_trace::EventKind;

/// Why a mode requested from inside the simulation (a health action) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refused {
    #[error("the system has no mode manager")]
    NoModeManager,
    #[error("no mode `{0}`")]
    NoMode(String),
    /// The mode manager refused the switch (its reason, as the switch statistics say).
    #[error("{0}")]
    Switch(String),
}

/// The mode manager's state.
pub(super) struct ModeState {
    pub(super) current: usize,
    /// The requests (`--mode-switch`): time and mode index.
    requests: Vec<(Nanos, usize)>,
    last_request: Option<Nanos>,
    running: Option<Running>,
    pub(super) stats: Vec<SwitchStats>,
}

struct Running {
    switch: Switch,
    from: usize,
    to: usize,
    since: Nanos,
}

impl ModeState {
    /// The mode manager of `spec`, with `requests` checked against its modes.
    pub(super) fn new(spec: &Spec, requests: &[ModeSwitch]) -> Result<Option<ModeState>, SimError> {
        let Some(modes) = &spec.modes else {
            return match requests.first() {
                Some(r) => Err(SimError::NoModes(r.mode.clone())),
                None => Ok(None),
            };
        };
        let requests = requests
            .iter()
            .map(|r| match modes.table.mode(&r.mode) {
                Some(m) => Ok((r.at, m)),
                None => Err(SimError::NoMode(r.mode.clone())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(ModeState {
            current: modes.initial,
            requests,
            last_request: None,
            running: None,
            stats: Vec::new(),
        }))
    }
}

impl Sim<'_> {
    /// Queues the mode requests.
    pub(super) fn init_modes(&mut self) {
        let Some(state) = &self.modes else { return };
        let times: Vec<Nanos> = state.requests.iter().map(|r| r.0).collect();
        for (i, at) in times.into_iter().enumerate() {
            self.heap.push(at, Ev::Mode(i as u32), 0);
        }
    }

    /// Request `i` arrives: the switch starts, or is refused (one at a time, no sooner
    /// than the agent period after the previous request, only as allowed).
    pub(super) fn mode_request(&mut self, i: usize, t: Nanos) {
        let modes = self.spec_ref().modes.as_ref().expect("modes");
        let state = self.modes.as_mut().expect("mode state");
        let (from, to) = (state.current, state.requests[i].1);
        let name = |m: usize| modes.table.modes[m].name.clone();
        let mut stats = SwitchStats {
            from: name(from),
            to: name(to),
            policy: None,
            requested_ns: t,
            latency_ns: None,
            refused: None,
        };
        let policy = modes.policy(from, to);
        stats.refused = if state.running.is_some() {
            Some("a switch is in progress".to_string())
        } else if state
            .last_request
            .is_some_and(|last| t - last < modes.min_interval)
        {
            Some(format!(
                "less than the agent period ({} ns) after the previous request",
                modes.min_interval
            ))
        } else if policy.is_none() {
            Some(format!(
                "no switch {} -> {} is allowed",
                stats.from, stats.to
            ))
        } else {
            None
        };
        let Some(policy) = policy.filter(|_| stats.refused.is_none()) else {
            state.stats.push(stats);
            return;
        };
        stats.policy = Some(policy.name().to_string());
        let mut switch = Switch::new(&modes.table, from, to, policy);
        let request = switch.request_event();
        let steps = switch.start();
        let steps = match steps {
            Ok(steps) => steps,
            Err(e) => {
                stats.refused = Some(e.to_string());
                state.stats.push(stats);
                return;
            }
        };
        state.last_request = Some(t);
        state.stats.push(stats);
        self.emit(t, request);
        self.modes.as_mut().expect("mode state").running = Some(Running {
            switch,
            from,
            to,
            since: t,
        });
        self.perform(steps, t);
    }

    /// The agent of `member` completed its job: the partition's task set changes and
    /// the switch goes on.
    pub(super) fn agent_done(&mut self, member: usize, t: Nanos) {
        let Some(state) = self.modes.as_mut() else {
            return;
        };
        let Some(run) = state.running.as_mut() else {
            return;
        };
        if !run.switch.awaiting().contains(&member) {
            return;
        }
        let (from, to) = (run.from, run.to);
        let steps = run.switch.ack(member);
        self.unboost(member, t);
        self.switch_tasks(member, from, to, t);
        match steps {
            Ok(steps) => self.perform(steps, t),
            Err(e) => self.abandon(e.to_string()),
        }
    }

    /// A request for mode `name` at `t` from inside the simulation (a health action):
    /// handled as a `--mode-switch` request; its refusal as the error.
    pub(super) fn request_mode(&mut self, name: &str, t: Nanos) -> Result<(), Refused> {
        let Some(modes) = self.spec_ref().modes.as_ref() else {
            return Err(Refused::NoModeManager);
        };
        let Some(mode) = modes.table.mode(name) else {
            return Err(Refused::NoMode(name.to_string()));
        };
        let state = self.modes.as_mut().expect("mode state");
        state.requests.push((t, mode));
        let i = state.requests.len() - 1;
        self.mode_request(i, t);
        let state = self.modes.as_ref().expect("mode state");
        match state.stats.last().and_then(|s| s.refused.clone()) {
            Some(why) => Err(Refused::Switch(why)),
            None => Ok(()),
        }
    }

    /// Carries out `steps` and records them.
    fn perform(&mut self, steps: Vec<Step>, t: Nanos) {
        for step in steps {
            let run = self
                .modes
                .as_ref()
                .and_then(|m| m.running.as_ref())
                .expect("a switch in progress");
            let event = run.switch.event(&step, t - run.since);
            self.emit(t, event);
            match step {
                Step::Interface {
                    member, interface, ..
                } => self.set_interface(member, interface, t),
                Step::Request { member, boost } => self.request_agent(member, boost, t),
                Step::Ack { .. } => {}
                Step::Done => self.finish_switch(t),
            }
        }
    }

    fn finish_switch(&mut self, t: Nanos) {
        let state = self.modes.as_mut().expect("mode state");
        let run = state.running.take().expect("a switch in progress");
        state.current = run.to;
        if let Some(stats) = state.stats.last_mut() {
            stats.latency_ns = Some(t - run.since);
        }
    }

    /// The switch cannot go on (the machine refused a step): it stops where it is.
    fn abandon(&mut self, why: String) {
        let state = self.modes.as_mut().expect("mode state");
        state.running = None;
        if let Some(stats) = state.stats.last_mut() {
            stats.refused = Some(why);
        }
    }

    /// Releases a job of `member`'s agent; boosted, its server runs at once.
    fn request_agent(&mut self, member: usize, boost: bool, t: Nanos) {
        let modes = self.spec_ref().modes.as_ref().expect("modes");
        let Some(agent) = modes.members[member].agent else {
            return;
        };
        let s = self.spec.tasks[agent].server;
        self.touch(self.spec.servers[s].domain, t);
        if boost {
            self.servers[s].boost = Some(agent as u32);
            self.boosted += 1;
        }
        self.release(agent, t);
    }

    fn unboost(&mut self, member: usize, t: Nanos) {
        let modes = self.spec_ref().modes.as_ref().expect("modes");
        let Some(agent) = modes.members[member].agent else {
            return;
        };
        let s = self.spec.tasks[agent].server;
        if self.servers[s].boost.take().is_none() {
            return;
        }
        self.boosted -= 1;
        self.touch(self.spec.servers[s].domain, t);
        if self.servers[s].budget == 0 && self.servers[s].pending > 0 {
            self.exhausted(s, t);
        }
    }

    /// `member`'s VCPUs get `interface`; budget already used this period stays used.
    fn set_interface(&mut self, member: usize, interface: Interface, t: Nanos) {
        let modes = self.spec_ref().modes.as_ref().expect("modes");
        for &s in &modes.members[member].vcpus {
            self.touch(self.spec.servers[s].domain, t);
            let old = self.server_params(s).budget;
            let server = &mut self.servers[s];
            server.params = Some((interface.budget, interface.period));
            server.budget = if interface.budget >= old {
                server.budget + (interface.budget - old)
            } else {
                server.budget.min(interface.budget)
            };
            self.trace_budget(s, t);
        }
    }

    /// At `member`'s acknowledgement: its tasks leave, join or change as mode `to` says.
    fn switch_tasks(&mut self, member: usize, from: usize, to: usize, t: Nanos) {
        let modes = self.spec_ref().modes.as_ref().expect("modes");
        for &task in &modes.members[member].tasks {
            let (old, new) = (&modes.params[from][task], &modes.params[to][task]);
            match (old, new) {
                (Some(_), None) => self.deactivate(task, t),
                (None, Some(p)) => self.start_task(task, *p, t),
                (Some(a), Some(b)) if a != b => self.set_task_params(task, *b),
                _ => {}
            }
        }
    }

    /// The task stops: no more releases, its queued jobs are aborted.
    pub(super) fn deactivate(&mut self, task: usize, t: Nanos) {
        let s = self.spec.tasks[task].server;
        let domain = self.spec.servers[s].domain;
        self.touch(domain, t);
        for k in 0..self.domains[domain].slots.len() {
            if self.domains[domain].slots[k]
                .running
                .is_some_and(|r| r.task as usize == task)
            {
                self.stop(domain, k, t, true);
            }
        }
        let state = &mut self.tasks[task];
        state.active = false;
        state.pending_release = None;
        state.gen += 1;
        let dropped: Vec<u64> = state.jobs.drain(..).map(|j| j.index).collect();
        state.stats.aborted += dropped.len() as u64;
        let spec = &self.spec.tasks[task];
        for job in &dropped {
            let kind = EventKind::JobAbort {
                cpu: self.task_cpu(task),
                partition: spec.partition.clone(),
                task: spec.name.clone(),
                job: *job,
            };
            self.emit(t, kind);
        }
        if !dropped.is_empty() {
            self.servers[s].pending -= dropped.len() as u32;
            if self.servers[s].pending == 0 {
                self.idle(s, t);
            }
        }
    }

    /// The task joins with `params`: its first job is released now.
    fn start_task(&mut self, task: usize, params: TaskParams, t: Nanos) {
        self.set_task_params(task, params);
        self.tasks[task].active = true;
        self.schedule_release(task, t);
    }

    /// The task's parameters from its next release on (and its own server's).
    fn set_task_params(&mut self, task: usize, params: TaskParams) {
        self.tasks[task].params = Some(params);
        let s = self.spec.tasks[task].server;
        if self.spec.inner.get(s).copied().flatten().is_none() {
            self.servers[s].params = Some((params.budget, params.period));
        }
    }

    /// The mode-switch statistics so far.
    pub(super) fn switch_stats(&self) -> Vec<SwitchStats> {
        self.modes.as_ref().map_or(Vec::new(), |m| m.stats.clone())
    }
}
