//! Whether this host's cgroup hierarchy can hold the description's best-effort
//! partitions, decided once before anything starts, the same way for `check` and `run`.
//!
//! A best-effort partition outside windows whose CPUs are all a non-exclusive rt
//! partition's runs below that partition's reservations: its cpuset is a child of the
//! rt CPUs' cpuset. The cgroup v1 cpuset hierarchy allows that; on cgroup v2 the rt
//! partition's CPUs are a cpuset partition whose tasks cannot share it with a child
//! cgroup, so such a description is refused on a v2 host, naming the partition's `cpus`.
//! The host's hierarchy is an input: the caller detects it (`bulkhead_os::cgroup`).

use bulkhead_model::{Cpus, Partition, PartitionKind, System};
use std::fmt;

/// The cgroup hierarchy a host's cpusets are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// A best-effort partition this host's cgroups cannot place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unplaceable {
    /// Its `cpus` key (`partitions[2].cpus`).
    pub key_path: String,
    pub partition: String,
    /// The non-exclusive rt partition whose CPUs it runs on.
    pub rt: String,
    pub cpus: String,
}

impl fmt::Display for Unplaceable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "partition `{}` runs on CPUs {} of the non-exclusive rt partition `{}`: that needs \
             the cgroup v1 cpuset hierarchy, and this host's cpusets are cgroup v2 (there the \
             rt partition's CPUs are a cpuset partition whose tasks cannot share it with a \
             child cgroup)",
            self.partition, self.cpus, self.rt
        )
    }
}

impl std::error::Error for Unplaceable {}

/// The best-effort partitions with processes that no window schedules, with their
/// index in `system`: they run for the whole run in cgroups of their own.
pub fn unwindowed(system: &System) -> Vec<(usize, &Partition)> {
    let windowed = system.windowed_partitions();
    let partitions = system.partitions.iter().enumerate();
    partitions
        .filter(|(_, p)| p.kind == PartitionKind::Be && !p.processes.is_empty())
        .filter(|(_, p)| !windowed.contains(p.name.as_str()))
        .collect()
}

/// Refuses, on a `version` 2 host, the first unwindowed best-effort partition of
/// `system` whose CPUs are all a non-exclusive rt partition's.
pub fn check(system: &System, version: CgroupVersion) -> Result<(), Box<Unplaceable>> {
    if version == CgroupVersion::V1 {
        return Ok(());
    }
    for (i, be) in unwindowed(system) {
        let Some(Cpus::Set(cpus)) = &be.cpus else {
            continue;
        };
        let below = |rt: &&Partition| {
            rt.kind == PartitionKind::Rt
                && !rt.exclusive
                && matches!(&rt.cpus, Some(Cpus::Set(set)) if cpus.is_subset(set))
        };
        if let Some(rt) = system.partitions.iter().find(below) {
            return Err(Box::new(Unplaceable {
                key_path: format!("partitions[{i}].cpus"),
                partition: be.name.clone(),
                rt: rt.name.clone(),
                cpus: cpus.to_string(),
            }));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tests::load;

    const SHARED: &str = "system: {cpus: 0-1}\npartitions:\n  - {name: r, kind: rt, cpus: 1, exclusive: false, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}\n  - {name: b, cpus: 1, processes: [{cmd: y}]}\n";

    /// A be partition below a non-exclusive rt partition: refused on v2 with its
    /// `cpus` key, taken on v1.
    #[test]
    fn a_be_partition_on_shared_rt_cpus_is_refused_on_v2_only() {
        let system = load(SHARED);
        let refusal = check(&system, CgroupVersion::V2).unwrap_err();
        assert_eq!(refusal.key_path, "partitions[1].cpus");
        assert_eq!(
            (refusal.partition.as_str(), refusal.rt.as_str()),
            ("b", "r")
        );
        let text = refusal.to_string();
        assert!(
            text.starts_with("partition `b` runs on CPUs 1 of the non-exclusive rt partition `r`: that needs the cgroup v1 cpuset hierarchy"),
            "{text}"
        );
        assert_eq!(check(&system, CgroupVersion::V1), Ok(()));
    }

    /// A be partition on CPUs of its own, or scheduled in a window, is placed on v2.
    #[test]
    fn be_partitions_apart_or_in_windows_are_placed_on_v2() {
        let apart = SHARED.replace("{name: b, cpus: 1", "{name: b, cpus: 0");
        assert_eq!(check(&load(&apart), CgroupVersion::V2), Ok(()));
        let windowed = SHARED.replace("{cmd: y}", "{cmd: y, budget: 5ms}");
        let windowed =
            format!("{windowed}windows:\n  - {{length: 10ms, cpu: 0, be_partition: b}}\n");
        assert_eq!(check(&load(&windowed), CgroupVersion::V2), Ok(()));
    }
}
