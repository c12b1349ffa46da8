//! DEmOS window schedules in the simulator: the `bulkhead-windows` state machine
//! (the one `bulkhead run` drives, so both write the same schedule log) driven in
//! simulated time, with a model of what each process does when it runs.

use crate::energy::{EnergyStats, Power, PowerSpec};
use crate::error::SimError;
use bulkhead_model::Nanos;
use bulkhead_trace::{CpuSet, EventKind, GrantEnd, Name};
use bulkhead_windows::drive::{finish_init, Progress};
pub use bulkhead_windows::Behaviour;
use bulkhead_windows::{Action, Config, Event, Machine, ProcessId, Schedule};
use serde::Serialize;

/// A window schedule to simulate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowsSpec {
    pub schedule: Schedule,
    /// Per process of `schedule.processes`.
    pub behaviours: Vec<Behaviour>,
    /// The power policy and model (the description's `power:` section), if any.
    pub power: Option<PowerSpec>,
}

impl WindowsSpec {
    /// Whether the power policy accepts the schedule and the power model.
    pub fn check(&self) -> Result<(), SimError> {
        match &self.power {
            Some(p) => Power::new(p, &self.schedule).map(|_| ()),
            None => Ok(()),
        }
    }
}

/// Counts from the DEmOS window schedule.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct WindowStats {
    /// Major frames started.
    pub frames: u64,
    /// Process run grants (`run` lines of the schedule log).
    pub grants: u64,
}

/// Runs the state machine: feeds it timer, completion and exit events at simulated
/// times and turns its actions into trace events.
pub(crate) struct Driver {
    machine: Machine,
    behaviours: Vec<Behaviour>,
    cmds: Vec<Name>,
    partitions: Vec<Name>,
    actions: Vec<Action>,
    /// Which processes run and the work (run time at the top frequency) they did.
    progress: Progress,
    /// Per process: the CPUs of its current (or last) grant.
    cpus: Vec<Option<CpuSet>>,
    power: Option<Power>,
    stats: WindowStats,
}

impl Driver {
    pub fn new(spec: &WindowsSpec, seed: u64, stop_at: Nanos) -> Driver {
        let schedule = &spec.schedule;
        let n = schedule.processes.len();
        Driver {
            cmds: schedule
                .processes
                .iter()
                .map(|p| Name::from(p.cmd.as_str()))
                .collect(),
            partitions: schedule
                .partitions
                .iter()
                .map(|p| Name::from(p.name.as_str()))
                .collect(),
            machine: Machine::new(
                schedule.clone(),
                Config {
                    seed,
                    stop_at: Some(stop_at),
                    ..Config::default()
                },
            ),
            behaviours: spec.behaviours.clone(),
            actions: Vec::new(),
            progress: Progress::new(n),
            cpus: vec![None; n],
            power: spec
                .power
                .as_ref()
                .map(|p| Power::new(p, schedule).expect("checked by WindowsSpec::check")),
            stats: WindowStats::default(),
        }
    }

    /// Starts the machine; the init phase (before schedule time 0) ends as the
    /// processes finish initializing, shortest first.
    pub fn start(&mut self, out: &mut Vec<(Nanos, EventKind)>) {
        self.machine.start(&mut self.actions);
        finish_init(&mut self.machine, &self.behaviours, &mut self.actions);
        self.translate(None, out);
    }

    /// The next time something happens: a planned timer, or a process yielding or exiting.
    pub fn next_time(&self) -> Option<Nanos> {
        let timer = self.machine.next_timer()?;
        Some(
            self.next_process_event()
                .map_or(timer, |(t, _)| t.min(timer)),
        )
    }

    /// The earliest completion or exit a running process brings about itself.
    fn next_process_event(&self) -> Option<(Nanos, Event)> {
        self.progress
            .next_event(&self.behaviours, |p| self.speed(p))
    }

    /// Handles what happens at `t` (which must be [`Driver::next_time`]).
    pub fn advance(&mut self, t: Nanos, out: &mut Vec<(Nanos, EventKind)>) {
        self.account(t);
        let timer = self.machine.next_timer();
        let event = match self.next_process_event() {
            // Timers win ties, as in DEmOS.
            Some((at, event)) if timer.is_none_or(|timer| at < timer) => event,
            _ => Event::Timer { t },
        };
        self.machine.handle(event, &mut self.actions);
        let cause = match event {
            Event::Completed { .. } => Some(GrantEnd::Yield),
            Event::Exited { .. } => Some(GrantEnd::Exit),
            _ => None,
        };
        self.translate(cause, out);
    }

    fn account(&mut self, t: Nanos) {
        let n = self.behaviours.len();
        let busy: Vec<u32> = (0..n)
            .filter(|&p| self.progress.is_running(p))
            .flat_map(|p| {
                self.cpus[p]
                    .iter()
                    .flat_map(|c| c.iter())
                    .collect::<Vec<_>>()
            })
            .collect();
        let speeds: Vec<(u64, u64)> = (0..n).map(|p| self.speed(p)).collect();
        let since = self.progress.accounted();
        self.progress.account(t, |p| speeds[p]);
        if let Some(power) = &mut self.power {
            power.account(t - since, &busy);
        }
    }

    /// How fast process `p`'s work progresses on its CPUs (1 without a power model).
    fn speed(&self, p: ProcessId) -> (u64, u64) {
        match (&self.power, &self.cpus[p]) {
            (Some(power), Some(cpus)) => power.speed(cpus),
            _ => (1, 1),
        }
    }

    /// How fast rt task `task`'s job progresses at the current frequencies, as a
    /// fraction of its speed at the top ones (1 without a power model).
    pub fn task_speed(&self, task: usize) -> (u64, u64) {
        self.power.as_ref().map_or((1, 1), |p| p.task_speed(task))
    }

    /// Energy per CPU so far (with a power model).
    pub fn energy(&self) -> Option<EnergyStats> {
        self.power
            .as_ref()
            .map(|p| p.stats(self.progress.accounted()))
    }

    /// Trace events for the actions the machine took; `cause` says why a process
    /// the driver reported on stopped.
    fn translate(&mut self, cause: Option<GrantEnd>, out: &mut Vec<(Nanos, EventKind)>) {
        let actions = std::mem::take(&mut self.actions);
        let window_ended = actions
            .iter()
            .any(|a| matches!(a, Action::WindowEnd { .. }));
        for action in &actions {
            match action {
                Action::FrameStart { .. } => self.stats.frames += 1,
                Action::WindowStart { t, window } => {
                    let length_ns = self.machine.schedule().windows[*window].length;
                    out.push((
                        *t,
                        EventKind::WindowStart {
                            window: *window as u32,
                            length_ns,
                        },
                    ));
                }
                Action::WindowEnd { t, window } => out.push((
                    *t,
                    EventKind::WindowEnd {
                        window: *window as u32,
                    },
                )),
                Action::Grant(g) => {
                    self.stats.grants += 1;
                    self.progress.grant(g.process, g.t);
                    self.cpus[g.process] = Some(g.cpus.clone());
                    // The very function `bulkhead run` uses: identical `run` lines.
                    let event = bulkhead_windows::run_event(self.machine.schedule(), g);
                    out.push((event.t_ns, event.kind));
                }
                Action::Freeze { process } => {
                    if self.progress.stop(*process) {
                        let reason = cause.unwrap_or(if window_ended {
                            GrantEnd::WindowEnd
                        } else {
                            GrantEnd::Budget
                        });
                        self.stop(*process, reason, out);
                    }
                }
                Action::Stop { t, .. } => {
                    for p in 0..self.behaviours.len() {
                        if self.progress.stop(p) {
                            self.stop_at(*t, p, GrantEnd::Exit, out);
                        }
                    }
                }
                Action::InitStart { .. }
                | Action::ScheduleStart
                | Action::BeStart { .. }
                | Action::SetCpus { .. }
                | Action::Thaw { .. } => {}
            }
            if let Some(power) = &mut self.power {
                out.extend(power.on_action(self.machine.schedule(), action));
            }
        }
        // A process that exited while running is not frozen: its grant ends now.
        if cause == Some(GrantEnd::Exit) {
            for p in 0..self.behaviours.len() {
                let exited = self.progress.has_exited(p, self.behaviours[p]);
                if exited && self.progress.stop(p) {
                    self.stop(p, GrantEnd::Exit, out);
                }
            }
        }
        self.actions = actions;
        self.actions.clear();
    }

    fn stop(&self, process: ProcessId, reason: GrantEnd, out: &mut Vec<(Nanos, EventKind)>) {
        self.stop_at(self.progress.accounted(), process, reason, out);
    }

    fn stop_at(
        &self,
        t: Nanos,
        process: ProcessId,
        reason: GrantEnd,
        out: &mut Vec<(Nanos, EventKind)>,
    ) {
        let partition = self.machine.schedule().processes[process].partition;
        let Some(cpus) = self.cpus[process].clone() else {
            return; // never granted: nothing to stop
        };
        let kind = EventKind::Stop {
            cpus,
            partition: self.partitions[partition].clone(),
            cmd: self.cmds[process].clone(),
            reason,
        };
        out.push((t, kind));
    }

    pub fn stats(&self) -> WindowStats {
        self.stats.clone()
    }
}
