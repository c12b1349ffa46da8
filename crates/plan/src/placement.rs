//! Where every rt task runs, decided once by the analysis that admits the system
//! ([`bulkhead_analysis::system::analyze_system_with`]) and read from here by `sim` (its
//! scheduling domains) and `run` (its exclusive cpusets): partitioned fixed priority on
//! several CPUs is first-fit decreasing (DriveOS 3.2 maps each task to a VCPU of its
//! own core), `edf` on several CPUs global EDF (Linux's SCHED_DEADLINE over one root
//! domain), one CPU its own. A task that appears only in a mode other than the initial
//! one is placed as that mode's analysis places it (the first mode that runs it).

use bulkhead_analysis::system::{Placement, Report};
use std::collections::BTreeMap;

/// The placement of every rt task of a system, by partition and task name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placements(BTreeMap<(String, String), Placement>);

impl Placements {
    /// The placements of `report`: of its tasks (the initial mode), then of each mode's
    /// (a task keeps the first placement found).
    pub fn of(report: &Report) -> Placements {
        let modes = report.modes.iter().flat_map(|m| &m.modes);
        let verdicts = std::iter::once(&report.tasks)
            .chain(modes.map(|m| &m.report.tasks))
            .flatten();
        let mut out = BTreeMap::new();
        for v in verdicts {
            let key = (v.partition.clone(), v.name.clone());
            out.entry(key).or_insert_with(|| v.placement.clone());
        }
        Placements(out)
    }

    /// Where task `task` of partition `partition` runs; [`Placement::Unplaced`] for one
    /// the analysis does not report.
    pub fn get(&self, partition: &str, task: &str) -> Placement {
        let key = (partition.to_string(), task.to_string());
        self.0.get(&key).cloned().unwrap_or(Placement::Unplaced)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkhead_analysis::system::analyze_system;

    use crate::tests::load;

    /// Fixed priority on two CPUs is partitioned (first-fit decreasing puts the two
    /// 60% tasks on different CPUs); EDF on two CPUs is global over both.
    #[test]
    fn fixed_priority_is_partitioned_and_edf_global_on_two_cpus() {
        let fp = load(
            "system: {cpus: 0-1}\npartitions:\n  - {name: p, kind: rt, cpus: 0-1, tasks: [{name: a, budget: 6ms, period: 10ms}, {name: b, budget: 6ms, period: 10ms}]}\n",
        );
        let placements = Placements::of(&analyze_system(&fp));
        assert_eq!(placements.get("p", "a"), Placement::Cpu(0));
        assert_eq!(placements.get("p", "b"), Placement::Cpu(1));
        let edf = load(
            "system: {cpus: 0-1}\npartitions:\n  - {name: p, kind: rt, cpus: 0-1, scheduler: edf, tasks: [{name: a, budget: 6ms, period: 10ms}, {name: b, budget: 6ms, period: 10ms}]}\n",
        );
        let placements = Placements::of(&analyze_system(&edf));
        assert_eq!(placements.get("p", "a"), Placement::Global(vec![0, 1]));
        assert_eq!(placements.get("p", "x"), Placement::Unplaced);
    }
}
