//! Exact response-time analysis for preemptive fixed-priority scheduling.

use crate::supply::{PeriodicSupply, Supply};
use crate::task::{hyperperiod, utilization_cmp_summed, Task, Time};
use serde::Serialize;
use std::cmp::Ordering;

/// The result of the response-time analysis of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResponseTime {
    /// Worst-case response time (from arrival, jitter included); `None` when the
    /// level-i busy period is unbounded (higher-or-equal priority load exceeds the supply).
    pub wcrt: Option<Time>,
    /// Jobs examined in the level-i busy period (Lehoczky's q = 0..Q-1).
    pub jobs: u64,
    /// Index q of the job with the largest response time.
    pub worst_job: u64,
    /// Length of the level-i busy period, when bounded.
    pub busy_period: Option<Time>,
    /// `w_i(0)`, the window of the first job (a lower bound for the next level's).
    pub first_window: Option<Time>,
    /// False when the busy period held more than [`MAX_JOBS`] jobs: `wcrt` is then the
    /// safe bound `L_i + J_i` (no job of the busy period finishes after its end).
    pub exact: bool,
}

/// The most jobs of one task examined in a level-i busy period before falling back to
/// the bound `L_i + J_i` (keeps pathological inputs, such as a huge blocking term, fast).
pub const MAX_JOBS: u64 = 100_000;

/// The float sums over the tasks of a level (the higher-priority ones and its own) that
/// its busy-period horizon needs: Σ C/T and Σ C (1 + J/T), each added in priority order.
/// A caller analysing level after level keeps them as running sums ([`Load::add`]), so a
/// level costs its fixed-point iteration alone, not another pass over the tasks above it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Load {
    utilization: f64,
    fixed: f64,
}

impl Load {
    /// The sums over `tasks`, in their order.
    pub(crate) fn of(tasks: &[Task]) -> Load {
        tasks.iter().fold(Load::default(), |l, t| l.add(t))
    }

    /// Σ C/T.
    pub(crate) fn utilization(self) -> f64 {
        self.utilization
    }

    /// The sums with `t` added last.
    pub(crate) fn add(self, t: &Task) -> Load {
        Load {
            utilization: self.utilization + t.utilization(),
            fixed: self.fixed + t.wcet as f64 * (1.0 + t.jitter as f64 / t.period as f64),
        }
    }
}

/// The analysis of task `me` below the higher-priority tasks `hp`, with the fixed-point
/// iteration of job 0 started at `start`, which must not exceed the least fixed point `w_i(0)`.
/// `load` is [`Load::of`] `hp` then `me`.
pub(crate) fn level(
    hp: &[Task],
    me: &Task,
    supply: &impl Supply,
    start: Time,
    load: Load,
) -> ResponseTime {
    let me = *me;
    let unbounded = ResponseTime {
        wcrt: None,
        jobs: 0,
        worst_job: 0,
        busy_period: None,
        first_window: None,
        exact: true,
    };
    let Some(horizon) = busy_period_horizon(hp, &me, supply, load) else {
        return unbounded;
    };
    let mut best = ResponseTime {
        wcrt: Some(0),
        jobs: 0,
        worst_job: 0,
        busy_period: None,
        first_window: None,
        exact: true,
    };
    let mut w: Time = start;
    for q in 0.. {
        if q == MAX_JOBS {
            let Some(busy) = busy_period(hp, &me, horizon, supply) else {
                return unbounded;
            };
            return ResponseTime {
                wcrt: Some(busy.saturating_add(me.jitter)),
                jobs: busy.saturating_add(me.jitter).div_ceil(me.period),
                busy_period: Some(busy),
                exact: false,
                ..best
            };
        }
        let Some(next) = window(hp, &me, q, w, horizon, supply) else {
            return unbounded;
        };
        w = next;
        best.first_window.get_or_insert(w);
        let release = q.saturating_mul(me.period);
        let response = w.saturating_add(me.jitter).saturating_sub(release);
        best.jobs = q + 1;
        if Some(response) > best.wcrt {
            best.wcrt = Some(response);
            best.worst_job = q;
        }
        if w.saturating_add(me.jitter) <= (q + 1).saturating_mul(me.period) {
            best.busy_period = Some(w);
            return best;
        }
    }
    unreachable!("the loop returns")
}

/// The level-i busy period `L = sbf⁻¹(B_i + Σ_{j ∈ hep(i)} ⌈(L + J_j)/T_j⌉ C_j)`
/// (Tindell et al. 1994); `None` past `horizon`.
fn busy_period(hp: &[Task], me: &Task, horizon: Time, supply: &impl Supply) -> Option<Time> {
    let mut l: Time = 0;
    loop {
        let mut demand = me.blocking;
        for t in hp.iter().chain(std::iter::once(me)) {
            let jobs = l.checked_add(t.jitter)?.div_ceil(t.period).max(1);
            demand = demand.checked_add(jobs.checked_mul(t.wcet)?)?;
        }
        let next = supply.time_for(demand)?;
        if next > horizon {
            return None;
        }
        if next <= l {
            return Some(l);
        }
        l = next;
    }
}

/// Least fixed point of the job-q recurrence, starting from `start` (a lower bound);
/// `None` when it exceeds `horizon`.
fn window(
    hp: &[Task],
    me: &Task,
    q: u64,
    start: Time,
    horizon: Time,
    supply: &impl Supply,
) -> Option<Time> {
    let own = me.blocking.checked_add((q + 1).checked_mul(me.wcet)?)?;
    let mut w = start;
    loop {
        let mut demand = own;
        for t in hp {
            let jobs = w.checked_add(t.jitter)?.div_ceil(t.period);
            demand = demand.checked_add(jobs.checked_mul(t.wcet)?)?;
        }
        let next = supply.time_for(demand)?;
        if next > horizon {
            return None;
        }
        if next <= w {
            return Some(w);
        }
        w = next;
    }
}

/// An upper bound on the level-i busy period, or `None` when it is unbounded.
///
/// With `U` the utilization of priority >= i and `ρ = sbf rate`: if `U > ρ` it is
/// unbounded; if `U = ρ` it is bounded (by the hyperperiod) only on a dedicated
/// processor without jitter and blocking; if `U < ρ`, demand
/// `<= B + U L + Σ C_j (1 + J_j/T_j)` meets supply `>= ρ (L - Δ)` by
/// `L* = (B + Σ C_j (1 + J_j/T_j) + ρ Δ) / (ρ - U)`, doubled here as a margin for rounding.
/// `load` is [`Load::of`] `hp` then `me`.
fn busy_period_horizon(hp: &[Task], me: &Task, supply: &impl Supply, load: Load) -> Option<Time> {
    let (num, den) = supply.rate();
    let all = hp.iter().chain(std::iter::once(me));
    match utilization_cmp_summed(load.utilization, all.clone(), num, den) {
        Ordering::Greater => None,
        Ordering::Equal => {
            let clean =
                supply.is_dedicated() && me.blocking == 0 && all.clone().all(|t| t.jitter == 0);
            let tasks: Vec<Task> = all.copied().collect();
            clean.then(|| hyperperiod(&tasks).unwrap_or(Time::MAX / 4))
        }
        Ordering::Less => {
            let rho = num as f64 / den as f64;
            let fixed = me.blocking as f64 + load.fixed;
            let bound = (fixed + rho * supply.linear_delay() as f64)
                / (rho - load.utilization).max(f64::MIN_POSITIVE);
            let bound = 2.0 * bound + 2.0 * den as f64 + me.period as f64;
            Some(if bound >= (Time::MAX / 4) as f64 {
                Time::MAX / 4
            } else {
                bound as Time
            })
        }
    }
}

/// Response times of all tasks, indexed like `tasks` (every level of [`levels`]).
pub fn response_times(tasks: &[Task], order: &[usize], supply: &impl Supply) -> Vec<ResponseTime> {
    let mut out = vec![None; tasks.len()];
    for (r, &i) in levels(tasks, order, supply).zip(order) {
        out[i] = Some(r);
    }
    out.into_iter()
        .map(|r| r.expect("order is a permutation"))
        .collect()
}

/// Whether every task meets its deadline: the levels of [`levels`], stopping at the first
/// task whose WCRT exceeds its deadline.
pub fn meets_deadlines(tasks: &[Task], order: &[usize], supply: &impl Supply) -> bool {
    levels(tasks, order, supply)
        .zip(order)
        .all(|(r, &i)| r.wcrt.is_some_and(|w| w <= tasks[i].deadline))
}

/// The analysis of each task of `order` (task indices, highest priority first), level by
/// level, lazily: its worst-case response time on `supply` and how it was found.
///
/// Exact for preemptive fixed priority with constrained *and* arbitrary deadlines:
/// the level-i busy period holds several jobs of task i, each analysed in turn
/// (Lehoczky, "Fixed Priority Scheduling of Periodic Task Sets with Arbitrary
/// Deadlines", RTSS 1990, the level-i busy period analysis), with release jitter and blocking as in
/// Tindell, Burns, Wellings, "An Extendible Approach for Analysing Fixed Priority Hard
/// Real-Time Tasks", Real-Time Systems 6(2), 1994 (window with jitter and blocking):
///
/// `w_i(q) = sbf⁻¹( B_i + (q+1) C_i + Σ_{j ∈ hp(i)} ⌈(w_i(q) + J_j) / T_j⌉ C_j )`,
/// `R_i = max_q ( w_i(q) - q T_i + J_i )`, for `q = 0, 1, ...` until
/// `w_i(q) + J_i <= (q+1) T_i` (the busy period ends). With a dedicated processor and
/// one job this is the recurrence of Joseph & Pandya, "Finding Response Times in a
/// Real-Time System", The Computer Journal 29(5), 1986. Using the inverse supply bound
/// function `sbf⁻¹` for a partition's resource is the compositional form of Shin & Lee,
/// RTSS 2003 (fixed priority over a periodic resource), and of Davis & Burns,
/// RTSS 2005.
///
/// Tasks of equal priority must be ordered by `order`; an earlier one is treated as higher.
///
/// The iteration of job 0 starts from the previous level's `w(0)` whenever
/// `B_i + C_i >= B_{i-1}`: then `f_i(w) >= f_{i-1}(w)` pointwise, so the least fixed point
/// can only grow (the start value of Sjödin & Hansson, "Improved Response-Time Analysis
/// Calculations", RTSS 1998). The sums the busy-period horizon needs are carried from
/// level to level ([`Load`]).
pub fn levels<'a, S: Supply>(
    tasks: &'a [Task],
    order: &'a [usize],
    supply: &'a S,
) -> impl Iterator<Item = ResponseTime> + 'a {
    let sorted: Vec<Task> = order.iter().map(|&k| tasks[k]).collect();
    let mut prev: Option<(Time, Time)> = None;
    let mut load = Load::default();
    (0..sorted.len()).map(move |pos| {
        let me = sorted[pos];
        let start = match prev {
            Some((w0, blocking)) if me.blocking + me.wcet >= blocking => w0,
            _ => 0,
        };
        load = load.add(&me);
        let r = level(&sorted[..pos], &me, supply, start, load);
        prev = r.first_window.map(|w0| (w0, me.blocking));
        r
    })
}

/// Verdict only, as cheaply as possible: when the priorities are rate monotonic
/// (`rate_monotonic`) and the quick tests apply, the hyperbolic bound
/// ([`crate::bounds::hyperbolic`]) may prove schedulability at once; otherwise exact RTA
/// level by level, stopping at the first task whose WCRT exceeds its deadline
/// ([`meets_deadlines`]).
pub fn fp_schedulable(tasks: &[Task], order: &[usize], rate_monotonic: bool) -> bool {
    if rate_monotonic && crate::bounds::hyperbolic(tasks) == crate::bounds::Quick::Passed {
        return true;
    }
    meets_deadlines(tasks, order, &PeriodicSupply::dedicated())
}

/// The worst-case supply a periodic, sporadic or deferrable server (budget `budget` per
/// `period`) gives the tasks it serves when it runs as a task of its own below the
/// higher-priority tasks `higher` on a dedicated CPU: its budget completes within
/// `R_s` (the server's response time as the task (Q, P, P), by [`levels`]), so the
/// supply is [`PeriodicSupply::server`] with blackout `P + R_s - 2Q` (Davis & Burns,
/// "Hierarchical Fixed Priority Pre-emptive Scheduling", RTSS 2005). `None` when the
/// server itself is not schedulable (`R_s > P`).
///
/// The deferrable server's back-to-back effect on *lower*-priority tasks is not modelled
/// here: to analyse those, treat the deferrable server as a task with jitter `P - Q`.
pub fn server_supply(higher: &[Task], budget: Time, period: Time) -> Option<PeriodicSupply> {
    let server = Task::new(budget, period, period);
    let load = Load::of(higher).add(&server);
    let r = level(higher, &server, &PeriodicSupply::dedicated(), 0, load).wcrt?;
    (r <= period).then(|| PeriodicSupply::server(period, budget, r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{priority_order, PriorityRule};

    fn wcrts(tasks: &[Task], rule: PriorityRule) -> Vec<Option<Time>> {
        let order = priority_order(tasks, rule);
        response_times(tasks, &order, &PeriodicSupply::dedicated())
            .iter()
            .map(|r| r.wcrt)
            .collect()
    }

    /// Lehoczky's RTSS 1990 example (also Tindell et al. 1994): C1 = 26, T1 = 70;
    /// C2 = 62, T2 = 100, D2 = 200. The busy period holds 7 jobs of task 2 with
    /// responses 114, 102, 116, 104, 118, 106, 94: the fifth (q = 4) is the worst, R2 = 118.
    #[test]
    fn lehoczky_arbitrary_deadline_example() {
        let ts = [Task::new(26, 70, 70), Task::new(62, 100, 200)];
        let order = priority_order(&ts, PriorityRule::RateMonotonic);
        let r = response_times(&ts, &order, &PeriodicSupply::dedicated());
        assert_eq!(r[0].wcrt, Some(26));
        assert_eq!(r[1].wcrt, Some(118));
        assert_eq!(r[1].worst_job, 4);
        assert_eq!(r[1].jobs, 7);
    }

    /// The classic textbook set (Burns & Wellings, Real-Time Systems and Programming
    /// Languages): (3,7), (3,12), (5,20) -> 3, 6, 20.
    #[test]
    fn burns_wellings_example() {
        let ts = [
            Task::new(3, 7, 7),
            Task::new(3, 12, 12),
            Task::new(5, 20, 20),
        ];
        assert_eq!(
            wcrts(&ts, PriorityRule::RateMonotonic),
            vec![Some(3), Some(6), Some(20)]
        );
    }

    #[test]
    fn overload_is_unbounded_only_below_the_overloaded_level() {
        let ts = [Task::new(3, 4, 4), Task::new(2, 6, 6)];
        assert_eq!(wcrts(&ts, PriorityRule::RateMonotonic), vec![Some(3), None]);
    }

    #[test]
    fn full_utilization_is_bounded_by_the_hyperperiod() {
        let ts = [Task::new(2, 4, 4), Task::new(3, 6, 4)];
        assert_eq!(
            wcrts(&ts, PriorityRule::RateMonotonic),
            vec![Some(2), Some(7)]
        );
    }

    #[test]
    fn jitter_and_blocking_are_added() {
        // Tindell et al. 1994: a higher-priority task with jitter J interferes
        // ceil((w + J)/T) times; the own jitter adds to the response.
        let hi = Task {
            jitter: 4,
            ..Task::new(2, 10, 10)
        };
        let lo = Task {
            jitter: 1,
            blocking: 1,
            ..Task::new(5, 20, 20)
        };
        // w = 1 + 5 + ceil((w+4)/10)*2: w=8 -> ceil(12/10)=2 -> 10 -> ceil(14/10)=2 -> 10.
        let ts = [hi, lo];
        let r = response_times(&ts, &[0, 1], &PeriodicSupply::dedicated());
        assert_eq!(r[0].wcrt, Some(2 + 4));
        assert_eq!(r[1].wcrt, Some(10 + 1));
    }

    /// A server (Q = 2, P = 10) below a task (2, 5): R_s = 4, so its supply has a
    /// blackout of 10 + 4 - 2·2 = 10; a served task with C = 3 needs one full budget and
    /// one more unit: R = 10 + 10 + 1 = 21.
    #[test]
    fn server_below_a_higher_task() {
        let supply = server_supply(&[Task::new(2, 5, 5)], 2, 10).unwrap();
        assert_eq!(supply.blackout, 10);
        let served = [Task::new(3, 40, 40)];
        let r = response_times(&served, &[0], &supply);
        assert_eq!(r[0].wcrt, Some(21));
        // At the top priority the server's own response is Q: blackout P - Q.
        assert_eq!(server_supply(&[], 2, 10).unwrap().blackout, 8);
        assert!(server_supply(&[Task::new(9, 10, 10)], 2, 10).is_none());
    }

    /// A blocking term of 10^16 puts ~3·10^15 jobs in the busy period: the analysis falls
    /// back to the bound L + J instead of enumerating them, and stays fast.
    #[test]
    fn huge_busy_period_falls_back_to_a_bound() {
        let b = 10_000_000_000_000_000;
        let t = Task {
            blocking: b,
            ..Task::new(1, 3, 3)
        };
        let r = response_times(&[t], &[0], &PeriodicSupply::dedicated())[0];
        assert!(!r.exact);
        let l = r.busy_period.unwrap();
        assert_eq!(r.wcrt, Some(l));
        // L = B + ⌈L/3⌉, so L ≈ 1.5 B; the exact WCRT (job 0) is B + 1 <= L.
        assert!(l > b && l <= b / 2 * 3 + 2, "L = {l}");
    }

    #[test]
    fn supply_stretches_response() {
        // One task C=2 on PRM Γ(5,2): blackout 6, then 2 units -> R = 8.
        let ts = [Task::new(2, 20, 20)];
        let r = response_times(&ts, &[0], &PeriodicSupply::prm(5, 2));
        assert_eq!(r[0].wcrt, Some(8));
    }
}
