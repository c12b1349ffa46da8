//! Sensitivity: how far a task's execution time may grow before a deadline is missed.

use crate::prm::{schedulable_on, Policy};
use crate::supply::Supply;
use crate::task::{first_passing, Task, Time};

/// The largest WCET task `i` may have while every task of `tasks` still meets its
/// deadline under `policy` on `supply`, the other tasks unchanged; `None` when even one
/// tick is too much (another task fails regardless).
///
/// Sensitivity analysis of the computation times, as in Bini, Di Natale & Buttazzo,
/// "Sensitivity Analysis for Fixed-Priority Real-Time Systems", ECRTS 2006 (here by
/// bisection on the exact test, which is monotone in `C_i`: more execution never helps).
/// The result is at most `D_i`.
pub fn max_wcet(tasks: &[Task], i: usize, policy: &Policy, supply: &impl Supply) -> Option<Time> {
    let mut trial = tasks.to_vec();
    let mut ok = |c: Time| {
        trial[i].wcet = c;
        schedulable_on(&trial, policy, supply)
    };
    if !ok(1) {
        return None;
    }
    // The first WCET that fails, taking D_i + 1 as failing (C_i > D_i always misses).
    Some(first_passing(1, tasks[i].deadline + 1, |c| !ok(c)) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supply::PeriodicSupply;

    /// (3, 7), (3, 12), (5, 20) under RM is tight: R3 = 20 = D3, and one more unit on the
    /// first task gives R3 = 5 + 3·4 + 2·3 = 23 > 20, on the last R3 = 6 + 3·3 + 2·3 = 21.
    /// Under EDF, U = 3/7 + 3/12 + C/20 <= 1 allows C3 = 6.
    #[test]
    fn headroom_of_the_textbook_set() {
        let ts = [
            Task::new(3, 7, 7),
            Task::new(3, 12, 12),
            Task::new(5, 20, 20),
        ];
        let rm = Policy::FixedPriority(vec![0, 1, 2]);
        let d = PeriodicSupply::dedicated();
        let c3 = max_wcet(&ts, 2, &rm, &d).unwrap();
        let c1 = max_wcet(&ts, 0, &rm, &d).unwrap();
        for (i, c) in [(2, c3), (0, c1)] {
            let mut more = ts;
            more[i].wcet = c + 1;
            assert!(!schedulable_on(&more, &rm, &d));
            more[i].wcet = c;
            assert!(schedulable_on(&more, &rm, &d));
        }
        assert_eq!((c1, c3), (3, 5));
        assert_eq!(max_wcet(&ts, 2, &Policy::Edf, &d), Some(6));
    }

    #[test]
    fn none_when_another_task_fails() {
        let ts = [Task::new(5, 4, 4), Task::new(1, 10, 10)];
        let rm = Policy::FixedPriority(vec![0, 1]);
        assert_eq!(max_wcet(&ts, 1, &rm, &PeriodicSupply::dedicated()), None);
    }
}
