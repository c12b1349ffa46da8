//! Partitioned scheduling of one partition's tasks over its CPUs.

use crate::edf::qpa;
use crate::rta::response_times;
use crate::supply::PeriodicSupply;
use crate::task::Task;

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
    let mut bins: Vec<Vec<usize>> = vec![Vec::new(); cpus];
    let mut placed = vec![None; tasks.len()];
    for i in by_util {
        for (cpu, bin) in bins.iter_mut().enumerate() {
            bin.push(i);
            if fits(tasks, rank, bin, policy) {
                placed[i] = Some(cpu);
                break;
            }
            bin.pop();
        }
    }
    placed
}

fn fits(tasks: &[Task], rank: &[usize], bin: &[usize], policy: CpuPolicy) -> bool {
    let set: Vec<Task> = bin.iter().map(|&i| tasks[i]).collect();
    match policy {
        CpuPolicy::Edf => qpa(&set).schedulable,
        CpuPolicy::FixedPriority => {
            let mut order: Vec<usize> = (0..set.len()).collect();
            order.sort_by_key(|&k| rank[bin[k]]);
            response_times(&set, &order, &PeriodicSupply::dedicated())
                .iter()
                .zip(&set)
                .all(|(r, t)| r.wcrt.is_some_and(|w| w <= t.deadline))
        }
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
