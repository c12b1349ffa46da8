//! What `run` carries out of a valid description, decided once: `run` refuses the rest
//! before anything starts, and `check` refuses it too, at its key. Today `run` does not
//! carry out a `health:` key in a system with a window schedule (docs/health.md), requests
//! from inside (`modes.requesters`) of a partition other than a best-effort one in no
//! window, nor `modes.switch_when` in a system with a window schedule (docs/modes.md).

use crate::cgroups::unwindowed;
use bulkhead_model::health::Member;
use bulkhead_model::System;
use std::fmt;

/// A key of the description that `run` does not carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotCarriedOut {
    /// Its key (`partitions[1].processes[0].health`, `modes.requesters[0]`).
    pub key_path: String,
    pub why: String,
}

impl fmt::Display for NotCarriedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key_path, self.why)
    }
}

impl std::error::Error for NotCarriedOut {}

/// Refuses the first key of `system` that `run` does not carry out.
pub fn check(system: &System) -> Result<(), Box<NotCarriedOut>> {
    let refusal = health(system)
        .or_else(|| requesters(system))
        .or_else(|| switch_when(system));
    refusal.map_or(Ok(()), |r| Err(Box::new(r)))
}

/// The first `health:` key, in a system with a window schedule.
fn health(system: &System) -> Option<NotCarriedOut> {
    if system.windows.is_empty() {
        return None;
    }
    let s = system.health.first()?;
    let i = system
        .partitions
        .iter()
        .position(|p| p.name == s.partition)?;
    let member = match &s.member {
        Member::Task(name) => {
            let tasks = &system.partitions[i].tasks;
            format!("tasks[{}]", tasks.iter().position(|t| &t.name == name)?)
        }
        Member::Process(k) => format!("processes[{k}]"),
    };
    Some(NotCarriedOut {
        key_path: format!("partitions[{i}].{member}.health"),
        why: "`health:` is not carried out by `run` yet in a system with a window schedule".into(),
    })
}

/// The first requester whose programs `run` reads no request from: any in a system with
/// a window schedule, else one of an rt partition (or of no best-effort partition in no
/// window).
fn requesters(system: &System) -> Option<NotCarriedOut> {
    let requesters = &system.modes.as_ref()?.requesters;
    if !system.windows.is_empty() && !requesters.is_empty() {
        return Some(NotCarriedOut {
            key_path: "modes.requesters".into(),
            why: "requests from inside are not served in a system with a window schedule yet"
                .into(),
        });
    }
    let unwindowed = unwindowed(system);
    let served = |name: &str| unwindowed.iter().any(|(_, p)| p.name == name);
    let (i, r) = requesters
        .iter()
        .enumerate()
        .find(|(_, r)| !served(&r.partition))?;
    Some(NotCarriedOut {
        key_path: format!("modes.requesters[{i}]"),
        why: format!(
            "partition `{}`: requests from inside are read from the processes of best-effort partitions in no window only (not yet from rt tasks or windows)",
            r.partition
        ),
    })
}

/// `modes.switch_when` in a system with a window schedule, where no stop-start worker
/// watches the gateway readers' counters.
fn switch_when(system: &System) -> Option<NotCarriedOut> {
    let switches = &system.modes.as_ref()?.switch_when;
    (!switches.is_empty() && !system.windows.is_empty()).then(|| NotCarriedOut {
        key_path: "modes.switch_when".into(),
        why: "switches from a signal are not carried out in a system with a window schedule (stop-start does not run there): the stop-start worker watches the gateway readers' counters".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::load;

    const WINDOWED: &str = "windows: [{length: 10ms, cpu: 0, be_partition: b}]\npartitions:\n  - {name: b, processes: [{cmd: x, budget: 5ms}, {cmd: y, budget: 5ms, health: {on_exit: {action: log}}}]}\n";

    /// A `health:` key in a windowed system is refused at its position; without the
    /// window schedule it is carried out.
    #[test]
    fn health_in_a_windowed_system_is_refused_at_its_key() {
        let refusal = check(&load(WINDOWED)).unwrap_err();
        assert_eq!(refusal.key_path, "partitions[0].processes[1].health");
        assert!(refusal.why.contains("window schedule"), "{refusal}");
        let unwindowed = "partitions:\n  - {name: b, processes: [{cmd: x}, {cmd: y, health: {on_exit: {action: log}}}]}\n";
        assert_eq!(check(&load(unwindowed)), Ok(()));
    }

    /// A requester that is an rt partition is refused at its index; a best-effort
    /// partition in no window is served.
    #[test]
    fn requests_are_served_from_unwindowed_best_effort_partitions_only() {
        let system = |requester: &str| {
            load(&format!(
                "partitions:\n  - {{name: r, kind: rt, cpus: 1, tasks: [{{name: t, cmd: x, budget: 1ms, period: 10ms}}]}}\n  - {{name: b, cpus: 0, processes: [{{cmd: y}}]}}\n  - {{name: e, cpus: 0, processes: [{{cmd: z}}]}}\nmodes:\n  initial: a\n  transitions: [{{from: a, to: c}}]\n  requesters: [{{partition: b, modes: [c]}}, {{partition: {requester}, modes: [c]}}]\n  table:\n    - {{name: a, partitions: {{r: {{tasks: [t]}}}}}}\n    - {{name: c, partitions: {{r: {{tasks: [t]}}}}}}\n"
            ))
        };
        let refusal = check(&system("r")).unwrap_err();
        assert_eq!(refusal.key_path, "modes.requesters[1]");
        assert!(refusal.why.starts_with("partition `r`: "), "{refusal}");
        assert_eq!(check(&system("e")), Ok(()));
    }
}
