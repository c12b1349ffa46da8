//! What one response-time analysis of a fixed-priority set proves about the same set with
//! one task's execution time changed, or on a smaller supply, without analysing it again.
//!
//! Sensitivity analysis (C max of every task, [`crate::sensitivity::fp_max_wcets`]) and
//! the minimal budget of a periodic resource ([`crate::prm::minimal_budget`]) ask the exact
//! test of a whole set again and again for slightly different sets: each question costs a
//! fixed-point iteration per level, `O(n)` work per level, so `O(n²)` per question and
//! `O(n³)` for the C max of all `n` tasks. Most of those questions are answered by two
//! facts of the first analysis, kept here per level `i`, at `O(1)` each:
//!
//! * **Certainly schedulable.** Job 0 of level `i` completes by `t` as soon as its demand
//!   `f_i(t) = B_i + C_i + Σ_{j ∈ hp(i)} ⌈(t + J_j)/T_j⌉ C_j` is at most `sbf(t)`: the least
//!   fixed point of `w = sbf⁻¹(f_i(w))` is then at most `t` (the iteration of
//!   [`crate::rta`], Joseph & Pandya 1986; Tindell, Burns, Wellings 1994, which is
//!   monotone). At `t* = min(D_i, T_i) - J_i` that job also meets its deadline and ends its
//!   busy period alone (Lehoczky 1990: `w + J_i <= T_i`), so the level is schedulable,
//!   provided its utilization stays below the supply's rate (else the analysis calls the
//!   busy period unbounded).
//! * **Certainly not.** With at least as much demand on at most as much supply, the least
//!   fixed point is at least the first analysis's `w_i(0)`; if `f_i(w_i(0))` already
//!   exceeds `sbf(D_i - J_i)`, no `t` up to `D_i - J_i` satisfies `f_i(t) <= sbf(t)`, and
//!   job 0 misses its deadline.
//!
//! Whatever these leave open is decided by the exact iteration of that one level
//! ([`crate::rta::level`]), so every verdict is the exact test's.

use crate::rta::{level, Load, ResponseTime};
use crate::supply::Supply;
use crate::task::{Task, Time};

/// The facts about one level (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LevelFacts {
    /// The level met its deadline.
    pub ok: bool,
    /// It met it with exactly one job in its busy period, by the exact analysis: then less
    /// demand on the same supply keeps it so.
    pub simple: bool,
    /// Its WCRT exceeded its deadline: more demand or less supply cannot help.
    pub missed: bool,
    /// `w(0)` and `f(w(0))`, when the level was bounded.
    first: Option<(Time, u128)>,
    /// `t*` and `f(t*)`.
    finish: Option<(Time, u128)>,
    /// `D - J`, the latest finish of job 0 that meets the deadline.
    latest: Option<Time>,
    /// Σ C/T of the level's tasks, in priority order (float).
    pub utilization: f64,
}

impl LevelFacts {
    /// The facts of level `tasks[pos]` (tasks in priority order, highest first), analysed as
    /// `r` with the sums `load` ([`Load::of`] `tasks[..=pos]`).
    pub fn new(tasks: &[Task], pos: usize, r: &ResponseTime, load: Load) -> LevelFacts {
        let me = &tasks[pos];
        let ok = r.wcrt.is_some_and(|w| w <= me.deadline);
        let finish = me.deadline.min(me.period).checked_sub(me.jitter);
        LevelFacts {
            ok,
            simple: ok && r.exact && r.jobs == 1,
            missed: r.wcrt.is_some_and(|w| w > me.deadline),
            first: r
                .first_window
                .and_then(|w| Some((w, demand(tasks, pos, w)?))),
            finish: finish.and_then(|t| Some((t, demand(tasks, pos, t)?))),
            latest: me.deadline.checked_sub(me.jitter),
            utilization: load.utilization(),
        }
    }

    /// The facts once `task` has joined the tasks above the level, the level having been
    /// found schedulable with it: the first analysis's window stays a lower bound of the
    /// new one, and the demands at it and at `t*` gain the new task's jobs.
    pub fn joined(&self, task: &Task) -> LevelFacts {
        let add = |(t, f): (Time, u128)| {
            let jobs = jobs_by(task, t).unwrap_or(u128::MAX);
            (t, f.saturating_add(jobs.saturating_mul(task.wcet as u128)))
        };
        LevelFacts {
            ok: true,
            simple: false,
            missed: false,
            first: self.first.map(add),
            finish: self.finish.map(add),
            latest: self.latest,
            utilization: self.utilization + task.utilization(),
        }
    }

    /// A start for the exact iteration of this level with at least as much demand on at
    /// most as much supply: the first analysis's `w(0)`, which the new least fixed point
    /// cannot be below (0 when the level was unbounded).
    pub fn start(&self) -> Time {
        self.first.map_or(0, |(w, _)| w)
    }

    /// Whether the level is schedulable when its job-0 demand grows by `extra(t)` at `t`
    /// (`extra` nondecreasing in `t`; zero for the supply question), on `supply` (no more
    /// than the first analysis's at any `t`), with utilization `utilization` against the
    /// supply's rate: `Some` when the facts decide it, `None` when only the exact analysis can.
    pub fn decide(
        &self,
        extra: impl Fn(Time) -> Option<u128>,
        utilization: f64,
        supply: &impl Supply,
    ) -> Option<bool> {
        let (num, den) = supply.rate();
        let rate = num as f64 / den as f64;
        // utilization_cmp decides by the float sum beyond 1e-9: twice that is certain.
        let margin = 2e-9 * rate.max(1.0);
        if self.missed || utilization > rate + margin {
            return Some(false);
        }
        if let (Some((w, f_w)), Some(latest)) = (self.first, self.latest) {
            if f_w.saturating_add(extra(w)?) > supply.sbf(latest) as u128 {
                return Some(false);
            }
        }
        let (t, f_t) = self.finish?;
        let fits = f_t.saturating_add(extra(t)?) <= supply.sbf(t) as u128;
        (utilization < rate - margin && fits).then_some(true)
    }
}

/// A fixed-priority set in priority order (highest first), analysed once, with the facts
/// of each of its levels.
pub(crate) struct Analysed {
    pub tasks: Vec<Task>,
    pub facts: Vec<LevelFacts>,
    /// `loads[j]` = [`Load::of`] `tasks[..j]`.
    pub loads: Vec<Load>,
}

impl Analysed {
    /// `tasks` (in priority order) and their [`crate::rta::response_times`] on some supply.
    pub fn new(tasks: Vec<Task>, responses: &[ResponseTime]) -> Analysed {
        let mut loads = vec![Load::default()];
        for t in &tasks {
            loads.push(loads[loads.len() - 1].add(t));
        }
        let facts = (0..tasks.len())
            .map(|j| LevelFacts::new(&tasks, j, &responses[j], loads[j + 1]))
            .collect();
        Analysed {
            tasks,
            facts,
            loads,
        }
    }

    /// Whether every task meets its deadline on `supply`, which supplies no more than the
    /// one analysed on at any `t`: each level by its facts, the levels they leave open by
    /// the exact iteration (those only after every level's facts were asked).
    pub fn meets_deadlines_on(&self, supply: &impl Supply) -> bool {
        let mut open = Vec::new();
        for (j, facts) in self.facts.iter().enumerate() {
            match facts.decide(|_| Some(0), facts.utilization, supply) {
                Some(false) => return false,
                Some(true) => {}
                None => open.push(j),
            }
        }
        open.into_iter().all(|j| {
            let (t, start) = (&self.tasks, self.facts[j].start());
            let r = level(&t[..j], &t[j], supply, start, self.loads[j + 1]);
            r.wcrt.is_some_and(|w| w <= t[j].deadline)
        })
    }
}

/// Job 0's demand at `t` of level `tasks[pos]`: `B + C + Σ_{hp} ⌈(t + J)/T⌉ C`; `None` on
/// overflow of 128 bits.
fn demand(tasks: &[Task], pos: usize, t: Time) -> Option<u128> {
    let me = &tasks[pos];
    let mut sum = me.blocking as u128 + me.wcet as u128;
    for hp in &tasks[..pos] {
        sum = sum.checked_add(jobs_by(hp, t)? * hp.wcet as u128)?;
    }
    Some(sum)
}

/// `⌈(t + J)/T⌉`: the jobs of `task` released in a window of length `t` after a critical
/// instant; `None` on overflow.
pub(crate) fn jobs_by(task: &Task, t: Time) -> Option<u128> {
    Some(t.checked_add(task.jitter)?.div_ceil(task.period) as u128)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rta::response_times;
    use crate::supply::PeriodicSupply;

    fn facts(ts: &[Task]) -> Vec<LevelFacts> {
        let order: Vec<usize> = (0..ts.len()).collect();
        let rs = response_times(ts, &order, &PeriodicSupply::dedicated());
        (0..ts.len())
            .map(|i| LevelFacts::new(ts, i, &rs[i], Load::of(&ts[..=i])))
            .collect()
    }

    /// Burns & Wellings' set (3, 7), (3, 12), (5, 20): R3 = 20 = D3. Level 3's facts:
    /// w = 20 with f(20) = 5 + 3·3 + 2·3 = 20, t* = 20. One more unit of C1 adds
    /// ⌈20/7⌉ = 3 at w: 23 > sbf(20) = 20, certainly a miss; one less unit of C3 leaves
    /// f(t*) = 19 <= 20, certainly schedulable.
    #[test]
    fn the_textbook_set_is_decided_both_ways() {
        let ts = [
            Task::new(3, 7, 7),
            Task::new(3, 12, 12),
            Task::new(5, 20, 20),
        ];
        let f = facts(&ts);
        let d = PeriodicSupply::dedicated();
        let u = f[2].utilization;
        assert!(f[2].ok && f[2].simple && !f[2].missed);
        let c1_more = |t: Time| jobs_by(&ts[0], t);
        assert_eq!(f[2].decide(c1_more, u + 1.0 / 7.0, &d), Some(false));
        assert_eq!(f[2].decide(|_| Some(0), u, &d), Some(true));
        // Half a processor: f(20) = 20 > sbf(20) = 10 at once.
        assert_eq!(
            f[2].decide(|_| Some(0), u, &PeriodicSupply::prm(2, 1)),
            Some(false)
        );
    }

    /// When the facts cannot tell, they say so: level 2 of (2, 5), (2, 7) has w = 4 and
    /// t* = 7. One more unit of C1 gives demand 4 + ⌈4/5⌉ = 5 <= 7 at w (no miss proved)
    /// and 2 + ⌈7/5⌉·3 = 8 > 7 at t* (no fit proved); only the exact iteration finds
    /// w = 2 + ⌈5/5⌉·3 = 5 <= 7.
    #[test]
    fn what_the_facts_leave_open() {
        let ts = [Task::new(2, 5, 5), Task::new(2, 7, 7)];
        let f = facts(&ts);
        let one_more = |t: Time| jobs_by(&ts[0], t);
        let u = f[1].utilization + 1.0 / 5.0;
        let d = PeriodicSupply::dedicated();
        assert_eq!(f[1].decide(one_more, u, &d), None);
        let more = [Task::new(3, 5, 5), ts[1]];
        assert!(crate::rta::meets_deadlines(&more, &[0, 1], &d));
    }
}
