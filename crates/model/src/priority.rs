//! The one fixed-priority order of a partition's tasks: what `analyze` analyses, `sim`
//! simulates and `run` gives the kernel (SCHED_FIFO levels), so that the three agree.
//!
//! Explicit priorities of the description come first (1 = highest); the other tasks
//! follow deadline-monotonic (Leung & Whitehead, "On the complexity of fixed-priority
//! scheduling of periodic, real-time tasks", Performance Evaluation 1982: the shorter the
//! relative deadline, the higher the priority), which is rate monotonic when D = T (Liu &
//! Layland, JACM 1973, section 4; DriveOS 4.1 and Boomerang II-A give Quest's Main VCPUs
//! RMS priorities). Ties go to the shorter period (rate monotonic), then to the task
//! declared first.

use crate::types::Task;

/// Rank of each task of `tasks` (0 = highest priority), in the order described above:
/// `(explicit priority, deadline, period, declaration index)`.
pub fn ranks(tasks: &[Task]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by_key(|&i| {
        let t = &tasks[i];
        (t.priority.unwrap_or(u32::MAX), t.deadline, t.period, i)
    });
    let mut rank = vec![0; tasks.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r;
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str, period_us: u64, deadline_us: u64, priority: Option<u32>) -> Task {
        let yaml = format!(
            "system: {{cpus: 0}}\npartitions:\n  - {{name: p, kind: rt, cpus: 0, tasks: [{{name: {name}, budget: 1us, period: {period_us}us, deadline: {deadline_us}us}}]}}\n"
        );
        let mut t = crate::load_bytes(yaml.as_bytes(), "t.yaml")
            .unwrap()
            .system
            .partitions[0]
            .tasks[0]
            .clone();
        t.priority = priority;
        t
    }

    /// DriveOS Table 3's eight tasks: every 1 ms task (A, B, G, H) outranks every 2 ms
    /// task (C-F); equal periods keep the table's order.
    #[test]
    fn driveos_table3_is_rate_monotonic() {
        let periods = [1000, 1000, 2000, 2000, 2000, 2000, 1000, 1000];
        let tasks: Vec<Task> = periods
            .iter()
            .enumerate()
            .map(|(i, &t)| task(&format!("t{i}"), t, t, None))
            .collect();
        assert_eq!(ranks(&tasks), [0, 1, 4, 5, 6, 7, 2, 3]);
    }

    #[test]
    fn explicit_priorities_then_deadline_then_period_then_declaration() {
        let tasks = [
            task("a", 10, 10, None),
            task("b", 20, 20, None),
            task("c", 30, 5, None),
        ];
        assert_eq!(ranks(&tasks), [1, 2, 0]);
        let mut explicit = tasks.clone();
        explicit[1].priority = Some(1);
        assert_eq!(ranks(&explicit), [2, 0, 1]);
        // Equal deadlines: the shorter period first, whatever the declaration order.
        let tied = [
            task("long", 8000, 4000, None),
            task("short", 4000, 4000, None),
        ];
        assert_eq!(ranks(&tied), [1, 0]);
        let same = [task("x", 4000, 4000, None), task("y", 4000, 4000, None)];
        assert_eq!(ranks(&same), [0, 1]);
    }
}
