//! Fixed priorities for SCHED_FIFO reservations.
//!
//! Rate-monotonic priorities (Liu & Layland, "Scheduling Algorithms for Multiprogramming
//! in a Hard-Real-Time Environment", JACM 1973, section 4: the shorter the period, the
//! higher the priority) are what Quest uses for its Main VCPUs (DriveOS section 4.1:
//! "Using the RMS policy, Quest assigns the highest priority level to the task with the
//! smallest period"; Boomerang II-A). With deadlines shorter than periods bulkhead uses
//! deadline-monotonic priorities (Leung & Whitehead, "On the complexity of fixed-priority
//! scheduling of periodic, real-time tasks", Performance Evaluation 1982), which reduce to
//! rate monotonic when D = T. Explicit priorities of the description (1 = highest) come
//! first. The order is [`bulkhead_model::priority::ranks`], the one `bulkhead-analysis`
//! analyses and `sim` simulates, so the response-time analysis holds for the priorities
//! the kernel is given.
//!
//! Each task gets its own SCHED_FIFO level, from [`TOP`] downwards: equal levels would run
//! first-in first-out, which the response-time analysis of a total order does not model.

use bulkhead_os::{Error, Result};
use std::collections::BTreeMap;

/// The highest SCHED_FIFO priority given to a task. 99 is kept for the budget enforcer
/// ([`crate::enforce`]), which must preempt the tasks it polices.
pub const TOP: u32 = 98;
/// The lowest SCHED_FIFO priority.
pub const BOTTOM: u32 = 1;

/// SCHED_FIFO priority for each rank: rank 0 gets `top`, rank 1 `top - 1`, and so on.
/// Fails when there are more ranks than levels in `BOTTOM..=top`.
pub fn fifo_priorities(ranks: &[usize], top: u32) -> Result<Vec<u32>> {
    let levels = top.saturating_sub(BOTTOM) as usize + 1;
    if !(BOTTOM..=99).contains(&top) {
        return Err(Error::Invalid(format!(
            "top SCHED_FIFO priority {top} is outside 1..=99"
        )));
    }
    ranks
        .iter()
        .map(|&r| {
            if r >= levels {
                Err(Error::Invalid(format!(
                    "{} tasks need distinct SCHED_FIFO priorities but only {levels} levels ({BOTTOM}..={top}) exist",
                    ranks.len()
                )))
            } else {
                Ok(top - r as u32)
            }
        })
        .collect()
}

/// The SCHED_FIFO priority of each task placed as `(cpu, rank)`, `rank` its position on
/// that CPU (0 = highest): the tasks of one CPU get distinct levels from `top` down
/// ([`fifo_priorities`]); tasks on different CPUs may share a level. Fails, naming the CPU
/// and counting its tasks, when a CPU has more tasks than levels.
pub fn fifo_priorities_per_cpu(placed: &[(&str, usize)], top: u32) -> Result<Vec<u32>> {
    let mut by_cpu: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (cpu, _)) in placed.iter().enumerate() {
        by_cpu.entry(cpu).or_default().push(i);
    }
    let mut out = vec![0; placed.len()];
    for (cpu, members) in by_cpu {
        let ranks: Vec<usize> = members.iter().map(|&i| placed[i].1).collect();
        let levels =
            fifo_priorities(&ranks, top).map_err(|e| Error::Invalid(format!("CPU {cpu}: {e}")))?;
        for (i, level) in members.into_iter().zip(levels) {
            out[i] = level;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkhead_model::Task;

    fn task(name: &str, budget_us: u64, period_us: u64) -> Task {
        Task::periodic(name, budget_us * 1000, period_us * 1000)
    }

    /// DriveOS Table 3, the Quest tasks A-H (budget, period in ms).
    fn driveos_table3() -> Vec<Task> {
        vec![
            task("A usb-bh", 100, 1000),
            task("B mhydra_rx", 200, 1000),
            task("C ic-read", 100, 2000),
            task("D ic-write", 100, 2000),
            task("E adas-read", 100, 2000),
            task("F adas-write", 100, 2000),
            task("G controller", 50, 1000),
            task("H mhydra_tx", 200, 1000),
        ]
    }

    #[test]
    fn driveos_table3_is_rate_monotonic() {
        let tasks = driveos_table3();
        let prio = fifo_priorities(&bulkhead_model::priority::ranks(&tasks), TOP).unwrap();
        // Every 1 ms task (A, B, G, H) outranks every 2 ms task (C-F); ties keep table order.
        assert_eq!(prio, vec![98, 97, 94, 93, 92, 91, 96, 95]);
    }

    /// 100 tasks on one CPU need 100 levels of the 98: the error counts all 100 (it said
    /// "1 tasks" when each task's level was asked for alone); 60 on each of two CPUs
    /// share the levels and fit.
    #[test]
    fn the_tasks_of_one_cpu_are_counted_together() {
        let one: Vec<(&str, usize)> = (0..100).map(|r| ("0", r)).collect();
        let e = fifo_priorities_per_cpu(&one, TOP).unwrap_err().to_string();
        assert_eq!(
            e,
            "CPU 0: 100 tasks need distinct SCHED_FIFO priorities but only 98 levels (1..=98) exist"
        );
        let two: Vec<(&str, usize)> = (0..120).map(|i| (["0", "1"][i % 2], i / 2)).collect();
        let levels = fifo_priorities_per_cpu(&two, TOP).unwrap();
        assert_eq!(&levels[..4], [98, 98, 97, 97]);
        assert_eq!(levels[119], 98 - 59);
    }

    #[test]
    fn too_many_tasks_for_the_levels() {
        let ranks: Vec<usize> = (0..4).collect();
        assert_eq!(fifo_priorities(&ranks, 4).unwrap(), vec![4, 3, 2, 1]);
        let e = fifo_priorities(&ranks, 3).unwrap_err().to_string();
        assert!(e.contains("only 3 levels"), "{e}");
        assert!(fifo_priorities(&ranks, 100).is_err());
    }
}
