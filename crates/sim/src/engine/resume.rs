//! System suspend and resume with JuMP2start's task model (West et al., Sec. 2.2,
//! "An Example Schedule", Fig. 5): restartable tasks restart from their checkpoint
//! with a full budget, continuable tasks keep their budget and shift their times.

use super::{Ev, Job, Sim};
use crate::spec::*;
use crate::stop::{protocol, suspend_order, PartitionAtRequest, StopEvent};
use bulkhead_model::Resume;
use bulkhead_trace::EventKind;

impl<'a> Sim<'a> {
    /// Suspends the whole system at system time `t` and resumes it at the same system
    /// time (time is stitched: the suspension does not exist for the schedule).
    pub(super) fn suspend(&mut self, i: usize, t: Nanos) {
        let partitions = self.at_request();
        let duration = self.opts.suspensions[i].duration;
        let (events, took) = protocol(
            &self.opts.stop,
            &partitions,
            t,
            t + self.wall_offset,
            duration,
        );
        self.stop_events.extend(events);
        self.wall_offset += took;
        for d in 0..self.domains.len() {
            self.touch(d, t);
            for k in 0..self.domains[d].slots.len() {
                self.stop(d, k, t, true);
            }
        }
        self.emit(t, EventKind::Suspend {});
        self.emit(
            t,
            EventKind::Resume {
                suspended_ns: duration,
            },
        );
        let mut shifted_servers = vec![false; self.servers.len()];
        // Tasks that do not run in the current mode (and mode agents) stay as they are.
        for task in 0..self.tasks.len() {
            if !self.tasks[task].active {
                continue;
            }
            let partition = &self.spec.tasks[task].partition;
            let awake = self.opts.stop.awake.iter().any(|a| **a == **partition);
            match self.spec.tasks[task].resume {
                _ if awake => self.continue_task(task, t, &mut shifted_servers),
                Resume::Restartable => {
                    self.drop_stale(task);
                    self.restart(task, t);
                }
                Resume::Continuable => self.continue_task(task, t, &mut shifted_servers),
            }
        }
    }

    /// The partitions in suspend order with their active tasks, each with whether it is
    /// at its safe point (no job started and unfinished), at a suspend request.
    fn at_request(&self) -> Vec<PartitionAtRequest> {
        let spec = self.spec;
        let names = spec.tasks.iter().map(|t| t.partition.as_ref());
        suspend_order(&self.opts.stop, names)
            .into_iter()
            .map(|name| PartitionAtRequest {
                tasks: (0..spec.tasks.len())
                    .filter(|&k| self.tasks[k].active && *spec.tasks[k].partition == *name)
                    .map(|k| {
                        let safe = self.tasks[k].jobs.front().is_none_or(|j| !j.started);
                        (spec.tasks[k].name.to_string(), safe)
                    })
                    .collect(),
                name,
            })
            .collect()
    }

    /// The stale/fresh rule for restartable `task` at a resume: no message written
    /// before it reaches the task; its first job that completes on fresh input reports
    /// `first_fresh_frame`.
    fn drop_stale(&mut self, task: usize) {
        for &c in &self.spec.tasks[task].inputs {
            self.channels.drop_stale(c, task as u32);
        }
        self.tasks[task].fresh_pending = true;
    }

    /// `task` completed a job at `t`: its first one on fresh input after a resume is
    /// its `first_fresh_frame` (a source task's input, from outside the simulation, is
    /// fresh from the resume on).
    pub(super) fn fresh_frame(&mut self, task: usize, t: Nanos) {
        let state = &self.tasks[task];
        let read = !state.inputs.is_empty() || !state.fifo_inputs.is_empty();
        if !state.fresh_pending || (!self.sources[task] && !read) {
            return;
        }
        self.tasks[task].fresh_pending = false;
        let spec = &self.spec.tasks[task];
        self.stop_events.push(StopEvent {
            partition: Some(spec.partition.to_string()),
            task: Some(spec.name.to_string()),
            ..StopEvent::new("first_fresh_frame", t, t + self.wall_offset)
        });
    }

    /// Restartable task: the replenishment list is purged, the current work
    /// discarded, and a fresh job with a full budget is released at `t`.
    pub(super) fn restart(&mut self, task: usize, t: Nanos) {
        let spec = self.task_spec(task);
        let s = spec.server;
        let dropped: Vec<Job> = self.tasks[task].jobs.drain(..).collect();
        if self.tasks[task].blocked.take().is_some() {
            self.blocked_writers -= 1;
        }
        self.tasks[task].stats.aborted += dropped.len() as u64;
        if self.tracing {
            for job in &dropped {
                let kind = EventKind::JobAbort {
                    cpu: self.task_cpu(task),
                    partition: spec.partition.clone(),
                    task: spec.name.clone(),
                    job: job.index,
                };
                self.emit(t, kind);
            }
        }
        self.servers[s].pending -= dropped.len() as u32;
        let server_spec = self.server_params(s);
        let server = &mut self.servers[s];
        server.repl.clear();
        server.used = 0;
        server.active_since = None;
        server.budget = if server_spec.kind == ServerKind::Unlimited {
            Nanos::MAX
        } else {
            server_spec.budget
        };
        server.period_end = t + server_spec.period;
        server.deadline = t;
        server.throttled = false;
        server.eligible_at = t;
        server.gen += 1;
        if self.tasks[task].last_release.is_none() {
            return;
        }
        // The fresh job's period starts at `t`; an explicit arrival list goes on as it was.
        let state = &mut self.tasks[task];
        match spec.release {
            Release::Periodic { .. } => state.next_nominal = t,
            Release::At(_) => state.next_at -= 1,
            Release::Sporadic { .. } => {}
        }
        state.pending_release = None;
        state.gen += 1;
        self.release(task, t);
    }

    /// Continuable task: keeps its job and budget; its period restarts at the resume
    /// time, so releases, deadlines and replenishment times move by `t - r`, where
    /// `r` is the release of its latest job.
    pub(super) fn continue_task(&mut self, task: usize, t: Nanos, shifted_servers: &mut [bool]) {
        let Some(last) = self.tasks[task].last_release else {
            return;
        };
        let delta = t - last;
        if delta == 0 {
            return;
        }
        let state = &mut self.tasks[task];
        for job in state.jobs.iter_mut() {
            job.deadline = job.deadline.saturating_add(delta);
            if self.tracing {
                let check = Ev::Check {
                    task: task as u32,
                    job: job.index as u32,
                };
                self.heap.push(job.deadline, check, 0);
            }
        }
        if let Some(at) = state.pending_release {
            state.next_nominal = state.next_nominal.saturating_add(delta);
            state.pending_release = Some(at.saturating_add(delta));
            state.gen += 1;
            self.heap.push(
                at.saturating_add(delta),
                Ev::Release(task as u32),
                state.gen,
            );
        }
        let s = self.spec.tasks[task].server;
        if std::mem::replace(&mut shifted_servers[s], true) {
            return;
        }
        let server = &mut self.servers[s];
        for entry in server.repl.iter_mut() {
            entry.1 += delta;
        }
        server.active_since = server.active_since.map(|a| a.saturating_add(delta));
        server.period_end = server.period_end.saturating_add(delta);
        server.deadline = server.deadline.saturating_add(delta);
        server.eligible_at = server.eligible_at.saturating_add(delta);
        let next = server
            .repl
            .front()
            .map(|e| e.1)
            .or(server.throttled.then_some(server.deadline))
            .or((server.eligible_at > t).then_some(server.eligible_at));
        if let Some(at) = next {
            self.wake(s, at);
        } else {
            self.servers[s].gen += 1;
        }
    }
}
