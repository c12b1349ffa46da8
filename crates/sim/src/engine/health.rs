//! The health monitor in simulated time (issue 38 item 4, docs/health.md): the pure
//! machine `bulkhead_model::health::monitor` that `bulkhead run` feeds, fed here with
//! the simulated evidence (deadline misses, completed jobs as heartbeats, exits) and
//! faults injected on purpose (`--inject-miss`, `--inject-exit`); its decisions are
//! carried out on the simulated tasks, each logged as a `health_action` event as
//! `run` logs it.
//!
//! Only rt tasks are simulated: the supervisions of best-effort processes are left out.

use super::{Ev, Sim};
use crate::error::SimError;
use crate::spec::*;
use bulkhead_model::health::monitor::{Decision, Evidence, Monitor};
use bulkhead_model::health::{Action, Member, Supervised};
use bulkhead_model::Resume;
use bulkhead_trace::EventKind;

/// A fault injected into a simulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The task: `NAME`, or `PARTITION/NAME` when several partitions have one of that name.
    pub task: String,
    /// System time of the fault.
    pub at: Nanos,
    pub kind: FaultKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The next `count` jobs released from the fault on overrun past their deadlines:
    /// each runs its relative deadline longer than drawn.
    Miss { count: u32 },
    /// The task exits: its queued jobs are aborted and it releases no more jobs until
    /// a health action restarts it.
    Exit,
}

impl Fault {
    /// `TASK:AT:COUNT` (`--inject-miss`).
    pub fn parse_miss(text: &str) -> Result<Fault, BadFault> {
        let bad = |problem| BadFault {
            text: text.to_string(),
            problem,
        };
        let mut parts = text.splitn(3, ':');
        let (task, at, count) = match (parts.next(), parts.next(), parts.next()) {
            (Some(task), Some(at), Some(count)) if !task.is_empty() => (task, at, count),
            _ => return Err(bad(FaultProblem::MissForm)),
        };
        let count = count
            .parse()
            .ok()
            .filter(|&c| c > 0)
            .ok_or_else(|| bad(FaultProblem::Count))?;
        Ok(Fault {
            task: task.to_string(),
            at: at_of(at).map_err(|e| bad(FaultProblem::At(e)))?,
            kind: FaultKind::Miss { count },
        })
    }

    /// `TASK:AT` (`--inject-exit`).
    pub fn parse_exit(text: &str) -> Result<Fault, BadFault> {
        let bad = |problem| BadFault {
            text: text.to_string(),
            problem,
        };
        match text.split_once(':') {
            Some((task, at)) if !task.is_empty() => Ok(Fault {
                task: task.to_string(),
                at: at_of(at).map_err(|e| bad(FaultProblem::At(e)))?,
                kind: FaultKind::Exit,
            }),
            _ => Err(bad(FaultProblem::ExitForm)),
        }
    }
}

/// A fault flag that does not parse ([`Fault::parse_miss`], [`Fault::parse_exit`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}`: {problem}")]
pub struct BadFault {
    pub text: String,
    pub problem: FaultProblem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultProblem {
    #[error("expected TASK:AT:COUNT, e.g. ctl:1s:3")]
    MissForm,
    #[error("expected TASK:AT, e.g. ctl:1s")]
    ExitForm,
    #[error("COUNT must be a whole number above 0")]
    Count,
    #[error("{0}")]
    At(bulkhead_model::units::UnitError),
}

fn at_of(text: &str) -> Result<Nanos, bulkhead_model::units::UnitError> {
    bulkhead_model::units::parse_duration(text, None)
}

/// The monitor and what it watches, by simulated task.
pub(super) struct HealthState {
    monitor: Monitor,
    /// Per monitor member: its task.
    tasks: Vec<usize>,
    /// Per task: its monitor member, if supervised.
    member_of: Vec<Option<usize>>,
    /// Per fault: its task.
    fault_tasks: Vec<usize>,
    /// Per task: injected misses still to come.
    overruns: Vec<u32>,
    /// Per task: exited, and not restarted since.
    exited: Vec<bool>,
    tick_gen: u64,
    /// Set by a `stop` or `suspend` action: why the simulation ended there.
    pub(super) ended: Option<String>,
}

impl HealthState {
    /// The monitor of the supervised tasks of `spec` among `supervised`, and the tasks
    /// of `faults`; `None` when there is neither.
    pub(super) fn new(
        spec: &Spec,
        supervised: &[Supervised],
        faults: &[Fault],
    ) -> Result<Option<HealthState>, SimError> {
        let find = |partition: &str, name: &str| {
            spec.tasks
                .iter()
                .position(|t| *t.partition == *partition && *t.name == *name)
        };
        let mut tasks = Vec::new();
        let mut watched = Vec::new();
        for s in supervised {
            if let Member::Task(name) = &s.member {
                if let Some(task) = find(&s.partition, name) {
                    tasks.push(task);
                    watched.push(s.clone());
                }
            }
        }
        let fault_tasks = faults
            .iter()
            .map(|f| task_named(spec, &f.task))
            .collect::<Result<Vec<_>, _>>()?;
        if watched.is_empty() && faults.is_empty() {
            return Ok(None);
        }
        let mut member_of = vec![None; spec.tasks.len()];
        for (i, &task) in tasks.iter().enumerate() {
            member_of[task] = Some(i);
        }
        Ok(Some(HealthState {
            monitor: Monitor::new(&watched, 0),
            tasks,
            member_of,
            fault_tasks,
            overruns: vec![0; spec.tasks.len()],
            exited: vec![false; spec.tasks.len()],
            tick_gen: 0,
            ended: None,
        }))
    }

    /// Whether deadline checks of `task` feed the monitor.
    pub(super) fn watches_misses(&self, task: usize) -> bool {
        self.member_of[task].is_some_and(|i| self.monitor.watches(i, Evidence::Miss))
    }

    /// The extra execution of a job of `task` released now: its relative deadline when
    /// an injected miss is due, else 0.
    pub(super) fn take_overrun(&mut self, task: usize, deadline: Nanos) -> Nanos {
        match &mut self.overruns[task] {
            0 => 0,
            left => {
                *left -= 1;
                deadline
            }
        }
    }
}

/// The task `text` names: `PARTITION/NAME`, or a `NAME` only one partition has.
fn task_named(spec: &Spec, text: &str) -> Result<usize, SimError> {
    let matches: Vec<usize> = (0..spec.tasks.len())
        .filter(|&i| {
            let t = &spec.tasks[i];
            match text.split_once('/') {
                Some((p, n)) => *t.partition == *p && *t.name == *n,
                None => *t.name == *text,
            }
        })
        .collect();
    match matches[..] {
        [task] => Ok(task),
        [] => Err(SimError::NoTask(text.to_string())),
        _ => Err(SimError::AmbiguousTask(text.to_string())),
    }
}

impl Sim<'_> {
    /// Queues the injected faults and the first watchdog expiry.
    pub(super) fn init_health(&mut self) {
        for (i, f) in self.opts.faults.iter().enumerate() {
            self.heap.push(f.at, Ev::Fault(i as u32), 0);
        }
        self.arm_health_tick();
    }

    /// Fault `i` happens at `t`.
    pub(super) fn fault(&mut self, i: usize, t: Nanos) {
        let h = self
            .health
            .as_mut()
            .expect("faults come with a health state");
        let task = h.fault_tasks[i];
        match self.opts.faults[i].kind {
            FaultKind::Miss { count } => h.overruns[task] += count,
            FaultKind::Exit => {
                if h.exited[task] || !self.tasks[task].active {
                    return;
                }
                h.exited[task] = true;
                self.touch_task(task, t);
                self.deactivate(task, t);
                self.evidence(task, Evidence::Exit, t);
            }
        }
    }

    /// Feeds `evidence` about `task` to the monitor and carries out its decision.
    pub(super) fn evidence(&mut self, task: usize, evidence: Evidence, t: Nanos) {
        let Some(h) = self.health.as_mut() else {
            return;
        };
        let Some(i) = h.member_of[task] else { return };
        if let Some(d) = h.monitor.observe(i, evidence, t) {
            self.act(d, t);
        }
        self.arm_health_tick();
    }

    /// The watchdogs expire at `t` (if `gen` is still the tick's).
    pub(super) fn health_tick(&mut self, gen: u32, t: Nanos) {
        let Some(h) = self.health.as_mut() else {
            return;
        };
        if h.tick_gen as u32 != gen {
            return;
        }
        for d in h.monitor.tick(t) {
            self.act(d, t);
        }
        self.arm_health_tick();
    }

    fn arm_health_tick(&mut self) {
        let Some(h) = self.health.as_mut() else {
            return;
        };
        h.tick_gen += 1;
        if let Some(at) = h.monitor.next_expiry() {
            self.heap.push(at.max(self.now), Ev::HealthTick, h.tick_gen);
        }
    }

    /// Carries out decision `d` at `t`, as `run` does, and logs it.
    fn act(&mut self, d: Decision, t: Nanos) {
        let h = self.health.as_ref().expect("health state");
        let task = h.tasks[d.member];
        let failed = match &d.action {
            Action::Log => None,
            Action::Restart => {
                self.restart_after_fault(task, t);
                None
            }
            Action::RestartPartition => {
                let partition = &self.spec.tasks[task].partition;
                let members: Vec<usize> = (0..self.spec.tasks.len())
                    .filter(|&k| self.spec.tasks[k].partition == *partition)
                    .collect();
                for k in members {
                    self.restart_after_fault(k, t);
                }
                None
            }
            Action::Mode(name) => self.request_mode(name, t).err().map(|e| e.to_string()),
            Action::Suspend | Action::Stop => {
                let spec = &self.spec.tasks[task];
                let why = format!(
                    "task `{}` of partition `{}`: {}; health action: {}",
                    spec.name,
                    spec.partition,
                    d.cause.name(),
                    d.action.text()
                );
                self.health.as_mut().expect("health state").ended = Some(why);
                None
            }
        };
        let spec = &self.spec.tasks[task];
        let kind = EventKind::HealthAction {
            partition: spec.partition.clone(),
            task: Some(spec.name.clone()),
            process: None,
            cause: d.cause.name().into(),
            action: d.action.text().into(),
            latency_ns: t.saturating_sub(d.evidence_ns),
            failed: failed.map(|e| e.as_str().into()),
        };
        self.emit(t, kind);
    }

    /// Starts `task` again as its `resume` declares: a continuable task at the next
    /// point of its release grid, a restartable one on a new grid from `t`. A task
    /// still running is stopped first (its queued jobs are aborted).
    fn restart_after_fault(&mut self, task: usize, t: Nanos) {
        let h = self.health.as_mut().expect("health state");
        if !self.tasks[task].active && !h.exited[task] {
            // Not a task of the current mode.
            return;
        }
        let was_exited = std::mem::replace(&mut h.exited[task], false);
        self.touch_task(task, t);
        let nominal = self.tasks[task].next_nominal;
        if !was_exited {
            self.deactivate(task, t);
        }
        self.tasks[task].active = true;
        let next = match (self.spec.tasks[task].resume, &self.spec.tasks[task].release) {
            (Resume::Continuable, Release::Periodic { .. }) => {
                let period = self.tasks[task]
                    .params
                    .map_or_else(|| self.task_period(task), |p| p.period);
                next_on_grid(nominal, period, t)
            }
            _ => t,
        };
        self.schedule_release(task, next);
        self.evidence(task, Evidence::Heartbeat, t);
    }

    fn task_period(&self, task: usize) -> Nanos {
        match self.spec.tasks[task].release {
            Release::Periodic { period, .. } => period,
            _ => 0,
        }
    }

    /// Marks the domain of `task` as changed at `t` (synchronized before it changes).
    fn touch_task(&mut self, task: usize, t: Nanos) {
        let domain = self.spec.servers[self.spec.tasks[task].server].domain;
        self.touch(domain, t);
    }
}

/// The first point of the grid through `nominal` with `period` at or after `t`.
fn next_on_grid(nominal: Nanos, period: Nanos, t: Nanos) -> Nanos {
    if nominal >= t || period == 0 {
        return nominal.max(t);
    }
    nominal + (t - nominal).div_ceil(period) * period
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_grid_point_is_at_or_after_the_restart() {
        assert_eq!(next_on_grid(0, 10, 25), 30);
        assert_eq!(next_on_grid(0, 10, 30), 30);
        assert_eq!(next_on_grid(40, 10, 25), 40);
    }

    #[test]
    fn fault_flags_parse_and_bad_ones_say_what_is_expected() {
        let f = Fault::parse_miss("ctl/loop:1s:3").unwrap();
        assert_eq!((f.task.as_str(), f.at), ("ctl/loop", 1_000_000_000));
        assert_eq!(f.kind, FaultKind::Miss { count: 3 });
        let f = Fault::parse_exit("loop:20ms").unwrap();
        assert_eq!(
            (f.task.as_str(), f.at, f.kind),
            ("loop", 20_000_000, FaultKind::Exit)
        );
        let error = |e: BadFault| e.to_string();
        assert_eq!(
            error(Fault::parse_miss("loop:1s").unwrap_err()),
            "`loop:1s`: expected TASK:AT:COUNT, e.g. ctl:1s:3"
        );
        assert_eq!(
            error(Fault::parse_miss("loop:1s:0").unwrap_err()),
            "`loop:1s:0`: COUNT must be a whole number above 0"
        );
        assert_eq!(
            error(Fault::parse_exit("loop").unwrap_err()),
            "`loop`: expected TASK:AT, e.g. ctl:1s"
        );
        assert!(Fault::parse_exit("loop:soon").is_err());
    }
}
