//! What the machine allows, compared with a description: the kernel's bounds on a
//! SCHED_DEADLINE period and the CPUs the machine has online. `run` would otherwise
//! fail on them with a bare errno (EINVAL from `sched_setattr`, from a cpuset write).
//!
//! The model stays free of Linux specifics: the caller reads the machine (the CLI from
//! `/proc/sys/kernel` and `/sys/devices/system/cpu`) into a [`Host`], and this module only
//! compares it with the description, naming the key path of what does not fit.

use crate::cpuset::CpuSet;
use crate::units::format_duration;
use crate::{Cpus, Nanos, PartitionKind, Places, Scheduler, System};

/// The machine's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The shortest SCHED_DEADLINE period the kernel takes
    /// (`kernel.sched_deadline_period_min_us`; Linux's default 100 us).
    pub deadline_period_min: Nanos,
    /// The longest (`kernel.sched_deadline_period_max_us`; Linux's default 4194304 us).
    pub deadline_period_max: Nanos,
    /// The CPUs that exist (`/sys/devices/system/cpu/present`), when known.
    pub present: Option<CpuSet>,
    /// The CPUs online (`/sys/devices/system/cpu/online`), when known.
    pub online: Option<CpuSet>,
}

/// Linux's default `sched_deadline_period_min_us`, in ns.
pub const DEFAULT_DEADLINE_PERIOD_MIN: Nanos = 100_000;
/// Linux's default `sched_deadline_period_max_us` (2^22 us), in ns.
pub const DEFAULT_DEADLINE_PERIOD_MAX: Nanos = 4_194_304_000;

impl Default for Host {
    /// Linux's default bounds, CPUs unknown.
    fn default() -> Host {
        Host {
            deadline_period_min: DEFAULT_DEADLINE_PERIOD_MIN,
            deadline_period_max: DEFAULT_DEADLINE_PERIOD_MAX,
            present: None,
            online: None,
        }
    }
}

type Problem = (String, String);

impl Host {
    /// The first part of `system` this machine cannot run: a CPU it does not have, or a
    /// task period SCHED_DEADLINE does not take (the tasks of `edf` partitions and of
    /// partitions in the mode table, which run under SCHED_DEADLINE), as a key path and
    /// a message.
    pub fn check(&self, system: &System, places: &Places) -> Result<(), Problem> {
        self.check_cpus(system, places)?;
        self.check_periods(system, places)
    }

    fn check_cpus(&self, system: &System, places: &Places) -> Result<(), Problem> {
        let partitions = system.partitions.iter().enumerate().filter_map(|(i, p)| {
            let Some(Cpus::Set(set)) = &p.cpus else {
                return None;
            };
            Some((set, format!("{}.cpus", places.partition(i))))
        });
        let slices = system.windows.iter().enumerate().flat_map(|(w, window)| {
            window
                .slices
                .iter()
                .enumerate()
                .filter_map(move |(s, slice)| match &slice.cpus {
                    Cpus::Set(set) => Some((set, format!("{}.cpu", places.slice(w, s)))),
                    Cpus::All => None,
                })
        });
        let system_cpus = [
            (system.cpus.as_ref(), "system.cpus"),
            (system.supervisor_cpus.as_ref(), "demos_cpu"),
        ];
        let system_cpus = system_cpus
            .into_iter()
            .filter_map(|(set, path)| Some((set?, path.to_string())));
        for (set, path) in system_cpus.chain(partitions).chain(slices) {
            if let Some(why) = self.lacks(set) {
                return Err((path, why));
            }
        }
        Ok(())
    }

    /// Why this machine cannot give `set`, if it cannot.
    fn lacks(&self, set: &CpuSet) -> Option<String> {
        if let Some(present) = &self.present {
            if let Some(cpu) = set.iter().find(|&c| !present.contains(c)) {
                return Some(format!(
                    "this machine has no CPU {cpu} (its CPUs: {present})"
                ));
            }
        }
        let online = self.online.as_ref()?;
        let cpu = set.iter().find(|&c| !online.contains(c))?;
        Some(format!(
            "CPU {cpu} of this machine is offline (online: {online})"
        ))
    }

    fn check_periods(&self, system: &System, places: &Places) -> Result<(), Problem> {
        let modal: std::collections::HashSet<&str> = system
            .modes
            .iter()
            .flat_map(|m| &m.table)
            .flat_map(|mode| &mode.partitions)
            .map(|local| local.partition.as_str())
            .collect();
        for (i, p) in system.partitions.iter().enumerate() {
            let deadline = p.kind == PartitionKind::Rt
                && (modal.contains(p.name.as_str()) || p.scheduler == Scheduler::Edf);
            if !deadline {
                continue;
            }
            for (t, task) in p.tasks.iter().enumerate() {
                let path = format!("{}.tasks[{t}].period", places.partition(i));
                self.check_period(task.period, path)?;
            }
        }
        let Some(modes) = &system.modes else {
            return Ok(());
        };
        for (m, mode) in modes.table.iter().enumerate() {
            for local in &mode.partitions {
                for (t, task) in local.tasks.iter().enumerate() {
                    let Some(period) = task.period else { continue };
                    let path = format!(
                        "modes.table[{m}].partitions.{}.tasks[{t}].period",
                        local.partition
                    );
                    self.check_period(period, path)?;
                }
            }
        }
        Ok(())
    }

    fn check_period(&self, period: Nanos, path: String) -> Result<(), Problem> {
        let (min, max) = (self.deadline_period_min, self.deadline_period_max);
        if (min..=max).contains(&period) {
            return Ok(());
        }
        Err((
            path,
            format!(
                "{} is outside the SCHED_DEADLINE periods this kernel takes, {} to {} \
                 (kernel.sched_deadline_period_min_us and _max_us)",
                format_duration(period),
                format_duration(min),
                format_duration(max)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(yaml: &str, host: &Host) -> Option<String> {
        let check = |s: &System, places: &Places| host.check(s, places);
        crate::load_str_with(yaml, "h.yaml", &check)
            .err()
            .map(|e| e.to_string())
    }

    /// A made-up machine: CPUs 0-3, of which 2 and 3 are offline, periods 1 ms to 1 s.
    fn machine() -> Host {
        Host {
            deadline_period_min: 1_000_000,
            deadline_period_max: 1_000_000_000,
            present: CpuSet::parse("0-3").ok(),
            online: CpuSet::parse("0-1").ok(),
        }
    }

    #[test]
    fn cpus_are_compared_where_they_are_written() {
        let window = "partitions:\n  - {name: a, processes: [{cmd: x, budget: 10}]}\n\
                      windows:\n  - {length: 100, cpu: 3, be_partition: a}\n";
        let e = error(window, &machine()).unwrap();
        assert!(
            e.starts_with(
                "h.yaml:4:24: windows[0].cpu: CPU 3 of this machine is offline (online: 0-1)"
            ),
            "{e}"
        );
        let partition = "partitions:\n  - {name: a, kind: rt, cpus: 5, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}\n";
        let e = error(partition, &machine()).unwrap();
        assert!(
            e.contains("partitions[0].cpus: this machine has no CPU 5 (its CPUs: 0-3)"),
            "{e}"
        );
        assert_eq!(error(partition, &Host::default()), None, "CPUs unknown");
    }

    #[test]
    fn periods_are_bounded_under_sched_deadline_only() {
        let task = |scheduler: &str, period: &str| {
            format!(
                "partitions:\n  - {{name: a, kind: rt, cpus: 1, scheduler: {scheduler}, \
                 tasks: [{{name: t, cmd: x, budget: 100us, period: {period}}}]}}\n"
            )
        };
        let host = machine();
        for (scheduler, period, refused) in [
            ("edf", "2s", true),
            ("edf", "500us", true),
            ("edf", "1s", false),
            ("fixed-priority", "2s", false),
        ] {
            let e = error(&task(scheduler, period), &host);
            assert_eq!(e.is_some(), refused, "{scheduler} {period}: {e:?}");
            if let Some(e) = e {
                assert!(e.contains("partitions[0].tasks[0].period: "), "{e}");
                assert!(
                    e.contains("SCHED_DEADLINE periods this kernel takes, 1ms to 1s"),
                    "{e}"
                );
            }
        }
    }
}
