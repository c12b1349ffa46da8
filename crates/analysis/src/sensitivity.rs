//! Sensitivity: how far a task's execution time may grow before a deadline is missed.

use crate::levels::{jobs_by, Analysed, LevelFacts};
use crate::prm::{schedulable_on, Policy};
use crate::rta::{level, ResponseTime};
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

/// [`max_wcet`] of every task of a fixed-priority set: `tasks` in priority order (highest
/// first), `responses` their [`crate::rta::response_times`] on `supply`.
///
/// The same bisection as [`max_wcet`] task by task, with the same trials and so the same
/// results, but each trial answered from the first analysis where it can be: the levels
/// above the task do not change, and each level at or below it is decided by its
/// [`LevelFacts`] (`O(1)`) or, when they leave it open, by the exact iteration of that
/// level alone. A trial of `max_wcet` analyses every level again, `O(n²)` for `n` tasks,
/// so that `O(n³ log D)` for all of them.
pub fn fp_max_wcets(
    tasks: &[Task],
    responses: &[ResponseTime],
    supply: &impl Supply,
) -> Vec<Option<Time>> {
    let mut search = Search::new(tasks, responses, supply);
    let mut above_ok = true;
    let mut out = Vec::with_capacity(tasks.len());
    for p in 0..tasks.len() {
        out.push(if above_ok { search.max_wcet(p) } else { None });
        above_ok &= search.analysed.facts[p].ok;
    }
    out
}

/// The trials of [`fp_max_wcets`].
struct Search<'a, S> {
    analysed: Analysed,
    supply: &'a S,
    /// Whether every level from `j` on met its deadline (met it in one exact job).
    ok_from: Vec<bool>,
    simple_from: Vec<bool>,
    /// The set of the trial in progress (one task's C changed, then restored).
    trial: Vec<Task>,
}

impl<'a, S: Supply> Search<'a, S> {
    fn new(tasks: &[Task], responses: &[ResponseTime], supply: &'a S) -> Self {
        let analysed = Analysed::new(tasks.to_vec(), responses);
        let suffix = |f: fn(&LevelFacts) -> bool| {
            let mut all = vec![true; tasks.len() + 1];
            for j in (0..tasks.len()).rev() {
                all[j] = all[j + 1] && f(&analysed.facts[j]);
            }
            all
        };
        Search {
            ok_from: suffix(|f| f.ok),
            simple_from: suffix(|f| f.simple),
            trial: tasks.to_vec(),
            analysed,
            supply,
        }
    }

    /// [`max_wcet`] of `tasks[p]`, the levels above it having met their deadlines.
    fn max_wcet(&mut self, p: usize) -> Option<Time> {
        if !self.ok(p, 1) {
            return None;
        }
        let deadline = self.trial[p].deadline;
        Some(first_passing(1, deadline + 1, |c| !self.ok(p, c)) - 1)
    }

    /// Whether every level from `p` on meets its deadline with `C_p = c`.
    fn ok(&mut self, p: usize, c: Time) -> bool {
        let me = self.analysed.tasks[p];
        if c == me.wcet {
            return self.ok_from[p];
        }
        if c < me.wcet && self.simple_from[p] {
            // Less demand: each level's one job finishes no later.
            return true;
        }
        let more = c > me.wcet;
        let delta = c.abs_diff(me.wcet) as u128;
        self.trial[p].wcet = c;
        let mut load = self.analysed.loads[p];
        let mut open = Vec::new();
        for j in p..self.trial.len() {
            load = load.add(&self.trial[j]);
            let facts = &self.analysed.facts[j];
            let decided = match more {
                true if j == p => facts.decide(|_| Some(delta), load.utilization(), self.supply),
                true => facts.decide(
                    |t| Some(delta * jobs_by(&me, t)?),
                    load.utilization(),
                    self.supply,
                ),
                false => facts.simple.then_some(true),
            };
            match decided {
                Some(false) => {
                    self.trial[p].wcet = me.wcet;
                    return false;
                }
                Some(true) => {}
                None => open.push((j, load)),
            }
        }
        let ok = open.into_iter().all(|(j, load)| {
            let start = if more {
                self.analysed.facts[j].start()
            } else {
                0
            };
            let t = &self.trial;
            let r = level(&t[..j], &t[j], self.supply, start, load);
            r.wcrt.is_some_and(|w| w <= t[j].deadline)
        });
        self.trial[p].wcet = me.wcet;
        ok
    }
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
