//! Partitioned scheduling of one partition's tasks over its CPUs.

use crate::edf::qpa;
use crate::levels::{jobs_by, LevelFacts};
use crate::rta::{level, Load};
use crate::supply::PeriodicSupply;
use crate::task::{Task, Time};

/// Policy used on each CPU when assigning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuPolicy {
    /// Fixed priority; `rank[i]` is task i's priority position (0 = highest).
    FixedPriority,
    /// EDF (SCHED_DEADLINE), exact demand test (QPA).
    Edf,
}

/// Assigns tasks to `cpus` CPUs by first-fit decreasing utilization, admitting a task
/// on a CPU only if the exact test (RTA for fixed priority, QPA for EDF) still passes
/// for every task already there (Dhall & Liu, "On a Real-Time Scheduling Problem",
/// Operations Research 26(1), 1978: rate-monotonic first fit, here with an exact
/// admission test instead of a utilization bound). `rank` gives the fixed-priority order
/// (lower = higher priority) and is ignored under EDF.
///
/// Returns the CPU index of each task, `None` for tasks that fit nowhere.
pub fn first_fit_decreasing(
    tasks: &[Task],
    rank: &[usize],
    cpus: usize,
    policy: CpuPolicy,
) -> Vec<Option<usize>> {
    let mut by_util: Vec<usize> = (0..tasks.len()).collect();
    by_util.sort_by(|&a, &b| tasks[b].utilization().total_cmp(&tasks[a].utilization()));
    let mut bins: Vec<Bin> = (0..cpus).map(|_| Bin::default()).collect();
    let mut placed = vec![None; tasks.len()];
    for i in by_util {
        placed[i] = bins
            .iter_mut()
            .position(|bin| bin.try_add(tasks, rank, i, policy));
    }
    placed
}

/// The tasks first-fit has put on one CPU, in priority order, with the facts of each
/// fixed-priority level ([`LevelFacts`]), so that a task joins after the exact test of its
/// own level and of the levels below it that the facts leave open: `O(n)` per trial
/// instead of the `O(n²)` of a whole analysis.
#[derive(Default)]
struct Bin {
    members: Vec<usize>,
    facts: Vec<LevelFacts>,
}

impl Bin {
    /// Adds task `i` if every task of the CPU still meets its deadline under `policy`.
    fn try_add(&mut self, tasks: &[Task], rank: &[usize], i: usize, policy: CpuPolicy) -> bool {
        let pos = self.members.partition_point(|&m| rank[m] < rank[i]);
        let mut members = self.members.clone();
        members.insert(pos, i);
        let set: Vec<Task> = members.iter().map(|&m| tasks[m]).collect();
        let facts = match policy {
            CpuPolicy::Edf => qpa(&set).schedulable.then(Vec::new),
            CpuPolicy::FixedPriority => self.fp_facts(&set, pos),
        };
        let Some(facts) = facts else {
            return false;
        };
        self.members = members;
        self.facts = facts;
        true
    }

    /// The facts of the levels of `set` (the CPU's tasks with a new one at `pos`, in
    /// priority order) when all of them meet their deadlines, `None` when one does not. The
    /// levels above `pos` are unchanged (and met them); each one below is decided by its
    /// facts with the new task's jobs added, all of them before anything is analysed; the
    /// new level and those the facts leave open are analysed.
    fn fp_facts(&self, set: &[Task], pos: usize) -> Option<Vec<LevelFacts>> {
        let dedicated = PeriodicSupply::dedicated();
        let new = set[pos];
        let extra = |t: Time| Some(jobs_by(&new, t)? * new.wcet as u128);
        let mut loads = vec![Load::of(&set[..=pos])];
        let mut decided = vec![None];
        for (task, known) in set[pos + 1..].iter().zip(&self.facts[pos..]) {
            let load = loads[loads.len() - 1].add(task);
            match known.decide(extra, load.utilization(), &dedicated) {
                Some(false) => return None,
                Some(true) => decided.push(Some(known.joined(&new))),
                None => decided.push(None),
            }
            loads.push(load);
        }
        let mut facts = self.facts[..pos].to_vec();
        for (k, (known, load)) in decided.into_iter().zip(loads).enumerate() {
            let j = pos + k;
            if let Some(known) = known {
                facts.push(known);
                continue;
            }
            let start = if j > pos {
                self.facts[j - 1].start()
            } else {
                0
            };
            let r = level(&set[..j], &set[j], &dedicated, start, load);
            if r.wcrt.is_none_or(|w| w > set[j].deadline) {
                return None;
            }
            facts.push(LevelFacts::new(set, j, &r, load));
        }
        Some(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_what_does_not_fit_on_one_cpu() {
        let ts = [
            Task::new(6, 10, 10),
            Task::new(6, 10, 10),
            Task::new(2, 10, 10),
        ];
        let placed = first_fit_decreasing(&ts, &[0, 1, 2], 2, CpuPolicy::FixedPriority);
        assert_eq!(placed, vec![Some(0), Some(1), Some(0)]);
        let too_much = first_fit_decreasing(&ts, &[0, 1, 2], 1, CpuPolicy::Edf);
        assert_eq!(too_much.iter().filter(|p| p.is_none()).count(), 1);
    }
}
