//! Driving the [`Machine`] with a model of what each process does when it runs
//! ([`Behaviour`]), for the two executions without real processes: the pure
//! [`drive`] (the scenario corpus's first suite) and the simulator (`bulkhead-sim`,
//! which adds CPU speeds from its power model). One rule for both ([`Progress`]): a
//! process yields after running [`Behaviour::YieldAfter`] in *one grant* and exits
//! after running [`Behaviour::ExitAfter`] in *total*, work counted from its grant
//! start or the last time accounted, whichever is later.

use crate::machine::{Action, Config, Event, Machine};
use crate::schedule::{ProcessId, Schedule};
use bulkhead_model::Nanos;

/// What a modelled process does when it runs (a real one runs its command).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Behaviour {
    /// Uses all the CPU time it is granted.
    #[default]
    Busy,
    /// Signals completion (DEmOS `completed()`) after running this long in a grant.
    YieldAfter(Nanos),
    /// Exits after running this long in total.
    ExitAfter(Nanos),
    /// Initializes for this long (an `init: true` process), then is busy.
    InitFor(Nanos),
}

impl Behaviour {
    /// Parses `busy`, `yield:DUR`, `exit:DUR` or `init:DUR` (DUR with a unit, e.g. `2ms`).
    pub fn parse(text: &str) -> Result<Behaviour, BadBehaviour> {
        let duration = |d: &str| {
            bulkhead_model::units::parse_duration(d, None).map_err(|e| BadBehaviour::Duration {
                text: text.to_string(),
                source: e,
            })
        };
        match text.split_once(':') {
            None if text == "busy" => Ok(Behaviour::Busy),
            Some(("yield", d)) => Ok(Behaviour::YieldAfter(duration(d)?)),
            Some(("exit", d)) => Ok(Behaviour::ExitAfter(duration(d)?)),
            Some(("init", d)) => Ok(Behaviour::InitFor(duration(d)?)),
            _ => Err(BadBehaviour::Kind {
                text: text.to_string(),
            }),
        }
    }
}

/// Why a behaviour could not be parsed ([`Behaviour::parse`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadBehaviour {
    #[error("`{text}`: expected busy, yield:DURATION, exit:DURATION or init:DURATION")]
    Kind { text: String },
    #[error("`{text}`: {source}")]
    Duration {
        text: String,
        source: bulkhead_model::units::UnitError,
    },
}

/// How fast a process's work progresses: `num/den` ns of work per ns of run time.
pub type Speed = (u64, u64);

/// Work done in `dt` ns at `speed`, rounded up.
pub fn work(dt: Nanos, (num, den): Speed) -> Nanos {
    (dt as u128 * num as u128).div_ceil(den as u128) as Nanos
}

/// Time needed for `work` ns of work at `speed`, rounded up.
pub fn time_for(work: Nanos, (num, den): Speed) -> Nanos {
    (work as u128 * den as u128).div_ceil(num as u128) as Nanos
}

/// Per process: whether and since when it runs, and the work it did in its current
/// grant and in total, accounted up to one time.
#[derive(Debug, Clone)]
pub struct Progress {
    granted_at: Vec<Option<Nanos>>,
    used: Vec<Nanos>,
    grant_work: Vec<Nanos>,
    accounted: Nanos,
}

impl Progress {
    /// `n` processes, none running.
    pub fn new(n: usize) -> Progress {
        Progress {
            granted_at: vec![None; n],
            used: vec![0; n],
            grant_work: vec![0; n],
            accounted: 0,
        }
    }

    /// Process `p` runs from `t` in a new grant.
    pub fn grant(&mut self, p: ProcessId, t: Nanos) {
        self.granted_at[p] = Some(t);
        self.grant_work[p] = 0;
    }

    /// Process `p` stops; whether it ran.
    pub fn stop(&mut self, p: ProcessId) -> bool {
        self.granted_at[p].take().is_some()
    }

    pub fn is_running(&self, p: ProcessId) -> bool {
        self.granted_at[p].is_some()
    }

    /// The time up to which work is accounted.
    pub fn accounted(&self) -> Nanos {
        self.accounted
    }

    /// Whether `p`, behaving as `behaviour`, has done all its work and exited.
    pub fn has_exited(&self, p: ProcessId, behaviour: Behaviour) -> bool {
        matches!(behaviour, Behaviour::ExitAfter(d) if self.used[p] >= d)
    }

    /// Accounts the work of the running processes up to `t` (`t >= accounted`).
    pub fn account(&mut self, t: Nanos, speed: impl Fn(ProcessId) -> Speed) {
        for p in 0..self.used.len() {
            if let Some(since) = self.granted_at[p] {
                let done = work(t - self.accounted.max(since), speed(p));
                self.used[p] += done;
                self.grant_work[p] += done;
            }
        }
        self.accounted = t;
    }

    /// The earliest completion or exit a running process brings about itself (the
    /// lowest process first at equal times).
    pub fn next_event(
        &self,
        behaviours: &[Behaviour],
        speed: impl Fn(ProcessId) -> Speed,
    ) -> Option<(Nanos, Event)> {
        (0..behaviours.len())
            .filter_map(|p| {
                let from = self.accounted.max(self.granted_at[p]?);
                match behaviours[p] {
                    Behaviour::YieldAfter(d) => {
                        let t = from + time_for(d.saturating_sub(self.grant_work[p]), speed(p));
                        Some((t, Event::Completed { process: p, t }))
                    }
                    Behaviour::ExitAfter(d) => {
                        let t = from + time_for(d.saturating_sub(self.used[p]), speed(p));
                        Some((t, Event::Exited { process: p, t }))
                    }
                    _ => None,
                }
            })
            .min_by_key(|&(t, e)| (t, process_of(e)))
    }
}

fn process_of(event: Event) -> ProcessId {
    match event {
        Event::Completed { process, .. } | Event::Exited { process, .. } => process,
        _ => usize::MAX,
    }
}

/// Ends the init phase the machine started (if it did): the `init` processes signal
/// initialization completed in the order of their init times, shortest first.
pub fn finish_init(machine: &mut Machine, behaviours: &[Behaviour], actions: &mut Vec<Action>) {
    let Some(Action::InitStart { processes }) = actions.first().cloned() else {
        return;
    };
    let mut order: Vec<(Nanos, ProcessId)> = processes
        .iter()
        .map(|&p| match behaviours[p] {
            Behaviour::InitFor(d) => (d, p),
            _ => (0, p),
        })
        .collect();
    order.sort();
    for (_, process) in order {
        machine.handle(Event::Completed { process, t: 0 }, actions);
    }
}

/// Runs `schedule` to its stop with processes behaving as `behaviours` (one per
/// process of the schedule), at full speed; returns every action of the machine.
/// Timers win ties with processes' own events, as in DEmOS.
pub fn drive(schedule: &Schedule, config: Config, behaviours: &[Behaviour]) -> Vec<Action> {
    let mut machine = Machine::new(schedule.clone(), config);
    let mut actions = Vec::new();
    machine.start(&mut actions);
    finish_init(&mut machine, behaviours, &mut actions);
    let mut progress = Progress::new(behaviours.len());
    let full = |_| (1, 1);
    let mut seen = 0;
    while let Some(timer) = machine.next_timer() {
        for a in &actions[seen..] {
            match a {
                Action::Grant(g) => progress.grant(g.process, g.t),
                Action::Freeze { process } => {
                    progress.stop(*process);
                }
                _ => {}
            }
        }
        seen = actions.len();
        let (t, event) = match progress.next_event(behaviours, full) {
            Some((t, event)) if t < timer => (t, event),
            _ => (timer, Event::Timer { t: timer }),
        };
        progress.account(t, full);
        if let Event::Exited { process, .. } = event {
            progress.stop(process);
        }
        machine.handle(event, &mut actions);
    }
    actions
}

/// The schedule-log `run` event of every grant among `actions`.
pub fn run_events(schedule: &Schedule, actions: &[Action]) -> Vec<bulkhead_trace::Event> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Grant(g) => Some(crate::run_event(schedule, g)),
            _ => None,
        })
        .collect()
}

/// A `run` event in DEmOS's test notation (`test/0300-schedule.t`):
/// `<ms>: cpus=<cpulist> cmd='<cmd>' budget=<ms>`, times right-aligned in 6 columns.
/// Other events have no line.
pub fn demos_line(event: &bulkhead_trace::Event) -> Option<String> {
    match &event.kind {
        bulkhead_trace::EventKind::Run {
            cpus,
            cmd,
            budget_ns,
            ..
        } => Some(format!(
            "{:>6}: cpus={cpus} cmd='{cmd}' budget={}",
            ms(event.t_ns),
            ms(*budget_ns)
        )),
        _ => None,
    }
}

/// Nanoseconds as milliseconds: an integer when whole, else a decimal.
pub fn ms(t: Nanos) -> String {
    const MS: Nanos = 1_000_000;
    if t % MS == 0 {
        (t / MS).to_string()
    } else {
        format!("{}", t as f64 / MS as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaviours_parse_with_units() {
        assert_eq!(Behaviour::parse("busy"), Ok(Behaviour::Busy));
        assert_eq!(
            Behaviour::parse("yield:1ms"),
            Ok(Behaviour::YieldAfter(1_000_000))
        );
        assert!(Behaviour::parse("sleep:1ms").is_err());
    }

    #[test]
    fn a_yield_counts_the_work_of_its_grant_across_other_events() {
        // Granted at 0, accounted at 0.4 ms (another CPU's event): it still yields
        // after 1 ms of its grant, at 1 ms, not 1.4 ms.
        let mut progress = Progress::new(1);
        progress.grant(0, 0);
        progress.account(400_000, |_| (1, 1));
        let next = progress.next_event(&[Behaviour::YieldAfter(1_000_000)], |_| (1, 1));
        assert_eq!(next.map(|(t, _)| t), Some(1_000_000));
    }
}
