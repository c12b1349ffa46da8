//! The simulator against the analysis engine, on random task sets from synchronous
//! release: under fixed priority (deadline monotonic, deadlines up to twice the
//! period) the largest response simulated over one hyperperiod equals the exact
//! worst-case response time of `bulkhead_analysis::rta` (Lehoczky 1990 busy periods);
//! under EDF (constrained deadlines) the simulation misses a deadline exactly when
//! QPA (Zhang & Burns 2009) says the set is unschedulable.

mod common;

use bulkhead_analysis::edf::qpa;
use bulkhead_analysis::rta::response_times;
use bulkhead_analysis::supply::PeriodicSupply;
use bulkhead_analysis::task::{hyperperiod, priority_order, PriorityRule, Task};
use bulkhead_sim::*;
use common::*;
use proptest::prelude::*;

const PERIODS: [u64; 6] = [10, 20, 25, 40, 50, 100];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn simulated_worst_response_equals_rta(
        raw in proptest::collection::vec((0usize..6, 1u64..100, 50u64..200), 2..7),
    ) {
        let tasks: Vec<Task> = raw
            .iter()
            .map(|&(p, c_pct, d_pct)| {
                let t = PERIODS[p] * MS;
                let c = (t * c_pct / 100 / raw.len() as u64).max(1);
                Task::new(c, t, (t * d_pct / 100).max(c))
            })
            .collect();
        prop_assume!(bulkhead_analysis::task::utilization(&tasks) < 1.0);
        let order = priority_order(&tasks, PriorityRule::DeadlineMonotonic);
        let analysis = response_times(&tasks, &order, &PeriodicSupply::dedicated());
        let mut spec = one_cpu(Policy::FixedPriority);
        for (i, task) in tasks.iter().enumerate() {
            let rank = order.iter().position(|&k| k == i).unwrap() as u32 + 1;
            let t = add_task(&mut spec, &format!("t{i}"), ServerKind::Unlimited, task.wcet, task.period, rank);
            spec.tasks[t].deadline = task.deadline;
        }
        let h = hyperperiod(&tasks).unwrap();
        let report = simulate(&spec, Options { drain: true, ..Options::until(h) }, &mut bulkhead_trace::Discard).unwrap();
        for (i, r) in analysis.iter().enumerate() {
            prop_assert_eq!(Some(report.tasks[i].max_response_ns), r.wcrt, "task {} of {:?}", i, tasks);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn edf_misses_exactly_when_qpa_says_unschedulable(
        raw in proptest::collection::vec((0usize..6, 1u64..100, 30u64..=100), 2..6),
        load in 60u64..140,
    ) {
        let n = raw.len() as u64;
        let tasks: Vec<Task> = raw
            .iter()
            .map(|&(p, c_pct, d_pct)| {
                let t = PERIODS[p] * MS;
                let c = (t * c_pct * load / 100 / 100 / n).max(1);
                Task::new(c, t, (t * d_pct / 100).max(c))
            })
            .collect();
        let verdict = qpa(&tasks);
        prop_assume!(!verdict.inconclusive);
        let mut spec = one_cpu(Policy::Edf);
        for (i, task) in tasks.iter().enumerate() {
            let t = add_task(&mut spec, &format!("t{i}"), ServerKind::Unlimited, task.wcet, task.period, 1);
            spec.tasks[t].deadline = task.deadline;
        }
        // For constrained deadlines, a miss from synchronous release shows within one
        // hyperperiod plus the largest deadline (Baruah, Rosier, Howell 1990).
        let h = hyperperiod(&tasks).unwrap() + tasks.iter().map(|t| t.deadline).max().unwrap();
        let report = simulate(&spec, Options::until(h), &mut bulkhead_trace::Discard).unwrap();
        let misses: u64 = report.tasks.iter().map(|t| t.misses).sum();
        prop_assert_eq!(misses == 0, verdict.schedulable, "{:?}", tasks);
    }
}
