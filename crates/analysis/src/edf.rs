//! Exact processor-demand tests for preemptive EDF.

use crate::supply::Supply;
use crate::task::{utilization, utilization_cmp, Task, Time};
use serde::Serialize;
use std::cmp::Ordering;

/// Outcome of a demand test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DemandVerdict {
    pub schedulable: bool,
    /// The interval length `t` with `dbf(t) > sbf(t)` that proves a miss (the binding
    /// constraint), or where the utilization condition fails (`t = 0`).
    pub violation: Option<Violation>,
    /// The last interval length that had to be examined.
    pub checked_up_to: Time,
    /// Number of `dbf` evaluations (QPA's cost).
    pub evaluations: u64,
    /// True when the test gave up (more than [`MAX_DEADLINES`] deadlines to check):
    /// then `schedulable` is false without a violation.
    pub inconclusive: bool,
}

impl DemandVerdict {
    /// The verdict before any interval was examined: schedulable, no evaluation yet.
    fn not_yet_violated() -> DemandVerdict {
        DemandVerdict {
            schedulable: true,
            violation: None,
            checked_up_to: 0,
            evaluations: 0,
            inconclusive: false,
        }
    }
}

/// The most absolute deadlines [`demand_test`] enumerates before giving up.
pub const MAX_DEADLINES: u64 = 1_000_000;

/// A witness of unschedulability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub interval: Time,
    pub demand: Time,
    pub supply: Time,
    /// `true` when the utilization exceeds the supply rate (no finite interval needed).
    pub utilization: bool,
}

/// Processor demand `dbf(t) = Σ max(0, ⌊(t - D_i)/T_i⌋ + 1) C_i` (Baruah, Rosier, Howell,
/// "Algorithms and Complexity Concerning the Preemptive Scheduling of Periodic,
/// Real-Time Tasks on One Processor", Real-Time Systems 2(4), 1990, the processor demand criterion).
/// Release jitter enlarges it to `⌊(t + J_i - D_i)/T_i⌋ + 1` (Spuri 1996).
pub fn dbf(tasks: &[Task], t: Time) -> Time {
    tasks
        .iter()
        .map(|k| {
            let reach = t.saturating_add(k.jitter);
            if reach < k.deadline {
                0
            } else {
                ((reach - k.deadline) / k.period + 1).saturating_mul(k.wcet)
            }
        })
        .fold(0, Time::saturating_add)
}

/// Exact EDF test on a dedicated processor for constrained deadlines (`D <= T`):
/// Quick Processor-demand Analysis, Zhang & Burns, "Schedulability Analysis for
/// Real-Time Systems with EDF Scheduling", IEEE Trans. Computers 58(9):1250–1258, 2009,
/// the QPA algorithm: starting from the last absolute deadline
/// before `L`, `t <- dbf(t)` if `dbf(t) < t`, else `t <-` the previous deadline,
/// until `dbf(t) <= d_min` (schedulable) or `dbf(t) > t` (a miss at `t`).
/// `L = min(L_a, L_b)`: `L_a = max(D_max, Σ (T_i - D_i) U_i / (1 - U))` (Zhang & Burns
/// 2009, after George, Rivierre, Spuri 1996) when `U < 1`, and the synchronous busy
/// period `L_b` (Spuri 1996; Ripoll et al.).
pub fn qpa(tasks: &[Task]) -> DemandVerdict {
    let mut verdict = DemandVerdict::not_yet_violated();
    if tasks.is_empty() {
        return verdict;
    }
    if let Some(v) = utilization_violation(tasks, 1, 1) {
        verdict.schedulable = false;
        verdict.violation = Some(v);
        return verdict;
    }
    let d_min = tasks.iter().map(|k| k.deadline).min().expect("non-empty");
    let Some(limit) = interval_bound(tasks) else {
        // U = 1 with release jitter: the demand is never bounded away from supply.
        verdict.schedulable = false;
        verdict.violation = Some(Violation {
            interval: 0,
            demand: 0,
            supply: 0,
            utilization: true,
        });
        return verdict;
    };
    verdict.checked_up_to = limit;
    let Some(mut t) = last_deadline_before(tasks, limit.saturating_add(1)) else {
        return verdict;
    };
    loop {
        let h = dbf(tasks, t);
        verdict.evaluations += 1;
        if h > t {
            verdict.schedulable = false;
            verdict.violation = Some(Violation {
                interval: t,
                demand: h,
                supply: t,
                utilization: false,
            });
            return verdict;
        }
        if h <= d_min {
            return verdict;
        }
        t = if h < t {
            h
        } else {
            match last_deadline_before(tasks, t) {
                Some(d) => d,
                None => return verdict,
            }
        };
    }
}

/// The EDF demand test against any supply: `dbf(t) <= sbf(t)` at every absolute
/// deadline `t` up to `L = (Σ U_i (T_i - D_i) + ρ Δ) / (ρ - U)` where `sbf(t) >= ρ (t - Δ)`
/// (Shin & Lee, RTSS 2003, EDF schedulability over a periodic resource,
/// `∀t: dbf(t) <= sbf(t)`, with the interval bound derived from the linear bound lsbf
/// and generalized to any supply with a linear lower bound). Reports the first deadline
/// that fails; [`demand_schedulable`] gives the verdict alone, faster.
pub fn demand_test(tasks: &[Task], supply: &impl Supply) -> DemandVerdict {
    let limit = match demand_limit(tasks, supply) {
        Ok(limit) => limit,
        Err(verdict) => return verdict,
    };
    let mut verdict = DemandVerdict::not_yet_violated();
    verdict.checked_up_to = limit;
    let mut demand_at = Demand::new(tasks, limit);
    for t in deadlines_up_to(tasks, limit) {
        let demand = demand_at.next(t);
        verdict.evaluations += 1;
        let sup = supply.sbf(t);
        if demand > sup {
            verdict.schedulable = false;
            verdict.violation = Some(Violation {
                interval: t,
                demand,
                supply: sup,
                utilization: false,
            });
            return verdict;
        }
    }
    verdict
}

/// The verdict of [`demand_test`], found from the last deadline down as QPA does on a
/// dedicated processor (Zhang & Burns 2009, see [`qpa`]), with the supply in place of `t`:
/// when `dbf(t) <= sbf(t)`, every deadline `t'` in `[sbf⁻¹(dbf(t)), t]` passes too
/// (`dbf(t') <= dbf(t) <= sbf(t')`), so the next one to check is the last deadline below
/// `sbf⁻¹(dbf(t))`. A few evaluations instead of every deadline up to `L`.
pub fn demand_schedulable(tasks: &[Task], supply: &impl Supply) -> bool {
    let limit = match demand_limit(tasks, supply) {
        Ok(limit) => limit,
        Err(verdict) => return verdict.schedulable,
    };
    let mut next = checkpoint_before(tasks, limit.saturating_add(1));
    while let Some(t) = next {
        let demand = dbf(tasks, t);
        if demand > supply.sbf(t) {
            return false;
        }
        let passed = supply.time_for(demand).unwrap_or(t).min(t);
        next = checkpoint_before(tasks, passed);
    }
    true
}

/// The `L` up to which [`demand_test`] checks the deadlines; `Err` with the verdict when
/// none need checking: no tasks, utilization at or above the supply's rate, a dedicated
/// processor (QPA), or more than [`MAX_DEADLINES`] deadlines (inconclusive).
fn demand_limit(tasks: &[Task], supply: &impl Supply) -> Result<Time, DemandVerdict> {
    let mut verdict = DemandVerdict::not_yet_violated();
    if tasks.is_empty() {
        return Err(verdict);
    }
    let (num, den) = supply.rate();
    let strict = utilization_cmp(tasks, num, den) == Ordering::Less;
    if !strict && !supply.is_dedicated() {
        verdict.schedulable = false;
        verdict.violation = Some(Violation {
            interval: 0,
            demand: 0,
            supply: 0,
            utilization: true,
        });
        return Err(verdict);
    }
    if supply.is_dedicated() {
        return Err(qpa(tasks));
    }
    let rho = num as f64 / den as f64;
    let slack: f64 = tasks
        .iter()
        .map(|k| k.utilization() * (k.period as f64 + k.jitter as f64 - k.deadline as f64).max(0.0))
        .sum();
    let bound = (slack + rho * supply.linear_delay() as f64) / (rho - utilization(tasks));
    let d_max = tasks.iter().map(|k| k.deadline).max().expect("non-empty");
    let limit = (bound.ceil() as Time).max(d_max);
    let count = tasks
        .iter()
        .map(|k| limit.saturating_sub(k.deadline.saturating_sub(k.jitter)) / k.period + 1)
        .fold(0, Time::saturating_add);
    if count > MAX_DEADLINES {
        verdict.checked_up_to = limit;
        verdict.schedulable = false;
        verdict.inconclusive = true;
        return Err(verdict);
    }
    Ok(limit)
}

fn utilization_violation(tasks: &[Task], num: Time, den: Time) -> Option<Violation> {
    (utilization_cmp(tasks, num, den) == Ordering::Greater).then_some(Violation {
        interval: 0,
        demand: 0,
        supply: 0,
        utilization: true,
    })
}

/// `min(L_a, L_b)` for QPA (see [`qpa`]); `None` when both are unbounded. `L_b` is
/// iterated only up to `L_a`: beyond it the minimum is `L_a` (the iteration is
/// increasing), and as `U` nears 1 it would take steps of about `(1 - U) L_b`.
fn interval_bound(tasks: &[Task]) -> Option<Time> {
    if utilization_cmp(tasks, 1, 1) != Ordering::Less {
        return synchronous_busy_period(tasks);
    }
    let u = utilization(tasks);
    let d_max = tasks.iter().map(|k| k.deadline).max().unwrap_or(0);
    let s: f64 = tasks
        .iter()
        .map(|k| (k.period as f64 + k.jitter as f64 - k.deadline as f64) * k.utilization())
        .sum();
    let la = (s / (1.0 - u)).ceil();
    let la = if la >= Time::MAX as f64 {
        Time::MAX
    } else {
        (la as Time).max(d_max)
    };
    Some(busy_period_up_to(tasks, la))
}

/// Length of the synchronous busy period `L = Σ ⌈(L + J_i)/T_i⌉ C_i`; `None` when it is
/// unbounded (`U > 1`, or `U = 1` with release jitter). With `U = 1` and no jitter it is
/// the hyperperiod: `Σ ⌈t/T_i⌉ C_i >= Σ (t/T_i) C_i = t`, with equality first where
/// every `T_i` divides `t` ([`Time::MAX`] when the hyperperiod overflows).
pub fn synchronous_busy_period(tasks: &[Task]) -> Option<Time> {
    match utilization_cmp(tasks, 1, 1) {
        Ordering::Greater => None,
        Ordering::Equal if tasks.iter().any(|k| k.jitter > 0) => None,
        Ordering::Equal => Some(crate::task::hyperperiod(tasks).unwrap_or(Time::MAX)),
        Ordering::Less => Some(busy_period_up_to(tasks, Time::MAX)),
    }
}

/// The least fixed point of `L = Σ ⌈(L + J_i)/T_i⌉ C_i` from `Σ C_i`, or `cap` once the
/// iteration reaches it. Precondition: `U < 1` (or a finite `cap`).
fn busy_period_up_to(tasks: &[Task], cap: Time) -> Time {
    let mut w: Time = tasks.iter().map(|k| k.wcet).fold(0, Time::saturating_add);
    while w < cap {
        let next = tasks
            .iter()
            .map(|k| {
                w.saturating_add(k.jitter)
                    .div_ceil(k.period)
                    .saturating_mul(k.wcet)
            })
            .fold(0, Time::saturating_add);
        if next <= w {
            return w;
        }
        w = next;
    }
    cap
}

/// The largest absolute deadline `k T_i + D_i - J_i` strictly below `t`.
fn last_deadline_before(tasks: &[Task], t: Time) -> Option<Time> {
    tasks
        .iter()
        .filter_map(|k| {
            let first = k.deadline.saturating_sub(k.jitter);
            if first >= t {
                return None;
            }
            Some(first + (t - 1 - first) / k.period * k.period)
        })
        .max()
}

/// [`dbf`] at ascending points, in `O(1)` per absolute deadline passed instead of `O(n)`
/// per point: `dbf` grows by `C_i` at each absolute deadline `D_i - J_i + k T_i` and is
/// constant in between, so the first point is evaluated by the formula and the later ones
/// add the deadlines they pass.
struct Demand<'a> {
    tasks: &'a [Task],
    /// The absolute deadlines up to the limit, with the C of their task, ascending.
    steps: Vec<(Time, Time)>,
    next: usize,
    /// `dbf` at the last point.
    last: Option<Time>,
}

impl<'a> Demand<'a> {
    fn new(tasks: &'a [Task], limit: Time) -> Demand<'a> {
        let mut steps = Vec::new();
        for k in tasks {
            // The deadlines D - J + mT that are positive (earlier ones count from the start).
            let mut d = match k.deadline.checked_sub(k.jitter) {
                Some(d) if d > 0 => d,
                _ => k.period - (k.jitter - k.deadline) % k.period,
            };
            while d <= limit {
                steps.push((d, k.wcet));
                let Some(next) = d.checked_add(k.period) else {
                    break;
                };
                d = next;
            }
        }
        steps.sort_unstable();
        Demand {
            tasks,
            steps,
            next: 0,
            last: None,
        }
    }

    /// `dbf(t)`; `t` not below the previous point.
    fn next(&mut self, t: Time) -> Time {
        let mut demand = self.last.unwrap_or_else(|| dbf(self.tasks, t));
        while let Some(&(d, c)) = self.steps.get(self.next) {
            if d > t {
                break;
            }
            // The first point's formula counted the deadlines up to it already.
            if self.last.is_some() {
                demand = demand.saturating_add(c);
            }
            self.next += 1;
        }
        self.last = Some(demand);
        demand
    }
}

/// The first point [`deadlines_up_to`] checks for `k`: its first absolute deadline
/// `D - J`, or 1 if that is not positive.
fn first_checkpoint(k: &Task) -> Time {
    k.deadline.saturating_sub(k.jitter).max(1)
}

/// The largest point of [`deadlines_up_to`] (whatever its limit) strictly below `t`.
fn checkpoint_before(tasks: &[Task], t: Time) -> Option<Time> {
    tasks
        .iter()
        .filter_map(|k| {
            let first = first_checkpoint(k);
            (first < t).then(|| first + (t - 1 - first) / k.period * k.period)
        })
        .max()
}

/// Every absolute deadline up to `limit`, ascending and without duplicates.
fn deadlines_up_to(tasks: &[Task], limit: Time) -> Vec<Time> {
    let mut all = Vec::new();
    for k in tasks {
        let mut d = first_checkpoint(k);
        while d <= limit {
            all.push(d);
            let Some(next) = d.checked_add(k.period) else {
                break;
            };
            d = next;
        }
    }
    all.sort_unstable();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supply::PeriodicSupply;

    /// A constrained-deadline set with U < 1 that is not schedulable; QPA finds the miss.
    #[test]
    fn qpa_detects_miss_with_low_utilization() {
        // C=(1,2), T=(4,6), D=(1,2): dbf(2) = 1 + 2 = 3 > 2.
        let ts = [Task::new(1, 4, 1), Task::new(2, 6, 2)];
        let v = qpa(&ts);
        assert!(!v.schedulable);
        let miss = v.violation.unwrap();
        assert!(miss.demand > miss.interval);
    }

    #[test]
    fn qpa_accepts_full_utilization_implicit() {
        let ts = [Task::new(2, 4, 4), Task::new(3, 6, 6)];
        assert!(qpa(&ts).schedulable);
        let over = [Task::new(3, 4, 4), Task::new(2, 6, 6)];
        assert!(qpa(&over).violation.unwrap().utilization);
    }

    #[test]
    fn full_utilization_with_jitter_is_not_provable() {
        let ts = [
            Task {
                jitter: 1,
                ..Task::new(2, 4, 4)
            },
            Task::new(3, 6, 6),
        ];
        assert_eq!(synchronous_busy_period(&ts), None);
        assert!(qpa(&ts).violation.unwrap().utilization);
        assert_eq!(
            synchronous_busy_period(&[Task::new(2, 4, 4), Task::new(3, 6, 6)]),
            Some(12)
        );
    }

    #[test]
    fn demand_under_prm() {
        let ts = [Task::new(1, 10, 10)];
        // Γ(4, 2): blackout 4, sbf(10) = 2 + 2 = 4 >= 1.
        assert!(demand_test(&ts, &PeriodicSupply::prm(4, 2)).schedulable);
        let many = [
            Task::new(1, 10, 10),
            Task::new(1_000_000, 100_000_000, 100_000_000),
        ];
        let v = demand_test(&many, &PeriodicSupply::prm(5, 4));
        assert!(v.inconclusive && !v.schedulable && v.violation.is_none());
        let tight = [Task::new(3, 10, 5)];
        let v = demand_test(&tight, &PeriodicSupply::prm(4, 2));
        assert!(!v.schedulable);
        assert_eq!(v.violation.unwrap().interval, 5);
    }
}
