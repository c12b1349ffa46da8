//! The simulator against the analysis engine: for random fixed-priority task sets
//! (deadline monotonic, deadlines up to twice the period, synchronous release), the
//! largest response simulated over one hyperperiod equals the exact worst-case
//! response time of `bulkhead_analysis::rta` (Lehoczky 1990 busy periods).

mod common;

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
