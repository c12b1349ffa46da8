//! Plain task-set types shared by every test in this crate, and by the simulator:
//! tasks, utilization, hyperperiod and priority assignment.

use serde::Serialize;
use std::cmp::Ordering;

/// A duration in integer ticks. The adapter from the model uses nanoseconds; the
/// tests scale decimal inputs to an integral tick (see [`decimal_scale`]) so that every
/// computation stays exact.
pub type Time = u64;

/// A sporadic task: worst-case execution time `wcet` (C), period or minimum
/// inter-arrival time `period` (T), relative deadline `deadline` (D, may exceed T),
/// release jitter `jitter` (J) and worst-case blocking `blocking` (B) by lower-priority work.
///
/// Precondition of every analysis: `wcet > 0`, `period > 0`, `deadline > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Task {
    pub wcet: Time,
    pub period: Time,
    pub deadline: Time,
    pub jitter: Time,
    pub blocking: Time,
}

impl Task {
    /// A task with C, T and D, no jitter and no blocking.
    pub fn new(wcet: Time, period: Time, deadline: Time) -> Self {
        Task {
            wcet,
            period,
            deadline,
            jitter: 0,
            blocking: 0,
        }
    }

    /// C/T as a float (for display and quick tests; exact comparisons use [`utilization_cmp`]).
    pub fn utilization(&self) -> f64 {
        self.wcet as f64 / self.period as f64
    }
}

/// Total utilization sum(C/T) as a float.
pub fn utilization(tasks: &[Task]) -> f64 {
    tasks.iter().map(Task::utilization).sum()
}

/// Compares sum(C/T) of `tasks` with `num/den` exactly (rational arithmetic on u128),
/// falling back to floating point only when the common denominator overflows.
pub fn utilization_cmp<'a>(
    tasks: impl IntoIterator<Item = &'a Task> + Clone,
    num: Time,
    den: Time,
) -> Ordering {
    let float: f64 = tasks.clone().into_iter().map(Task::utilization).sum();
    utilization_cmp_summed(float, tasks, num, den)
}

/// [`utilization_cmp`] given `float`, the float sum of the tasks' C/T in their order (a
/// caller that analyses level after level keeps it as a running sum): the tasks are
/// read again only when `float` is too close to `num/den` to decide.
pub fn utilization_cmp_summed<'a>(
    float: f64,
    tasks: impl IntoIterator<Item = &'a Task>,
    num: Time,
    den: Time,
) -> Ordering {
    let target = num as f64 / den as f64;
    // Each term is exact to 1 ulp: a margin of 1e-9 separates clear cases safely.
    if (float - target).abs() > 1e-9 * target.max(1.0) {
        return float.total_cmp(&target);
    }
    let mut acc: Option<(u128, u128)> = Some((0, 1));
    for t in tasks {
        acc = acc.and_then(|(n, d)| add_fraction(n, d, t.wcet as u128, t.period as u128));
    }
    match acc {
        Some((n, d)) => match (n.checked_mul(den as u128), (num as u128).checked_mul(d)) {
            (Some(l), Some(r)) => l.cmp(&r),
            _ => float.total_cmp(&target),
        },
        None => float.total_cmp(&target),
    }
}

fn add_fraction(n1: u128, d1: u128, n2: u128, d2: u128) -> Option<(u128, u128)> {
    let g = gcd(d1, d2);
    let d = (d1 / g).checked_mul(d2)?;
    let n = n1
        .checked_mul(d2 / g)?
        .checked_add(n2.checked_mul(d1 / g)?)?;
    let r = gcd(n, d).max(1);
    Some((n / r, d / r))
}

/// The smallest `x` in `(lo, hi]` with `ok(x)`, for a test that is monotone on that range
/// (false up to some point, true from there on) and holds at `hi`. `ok` is evaluated only
/// strictly between `lo` and `hi`, by bisection: `O(log(hi - lo))` evaluations.
pub fn first_passing(mut lo: Time, mut hi: Time, mut ok: impl FnMut(Time) -> bool) -> Time {
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// Greatest common divisor (Euclid).
pub fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Least common multiple of two times, `None` on overflow.
pub fn lcm(a: Time, b: Time) -> Option<Time> {
    let g = gcd(a as u128, b as u128) as Time;
    (a / g.max(1)).checked_mul(b)
}

/// The hyperperiod: the least common multiple of all periods; `None` when it overflows
/// [`Time`] (or the set is empty).
pub fn hyperperiod(tasks: &[Task]) -> Option<Time> {
    let mut periods = tasks.iter().map(|t| t.period);
    let first = periods.next()?;
    periods.try_fold(first, lcm)
}

/// How priorities are assigned when the description gives none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PriorityRule {
    /// Shorter period = higher priority (Liu & Layland 1973); how Quest schedules the
    /// real-time services of DriveOS (§3.2, §4.1) and Boomerang's VCPUs (§II-A).
    RateMonotonic,
    /// Shorter relative deadline = higher priority (Leung & Whitehead 1982).
    DeadlineMonotonic,
}

/// Task indices from highest to lowest priority under `rule`; ties keep input order.
pub fn priority_order(tasks: &[Task], rule: PriorityRule) -> Vec<usize> {
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    match rule {
        PriorityRule::RateMonotonic => order.sort_by_key(|&i| tasks[i].period),
        PriorityRule::DeadlineMonotonic => order.sort_by_key(|&i| tasks[i].deadline),
    }
    order
}

/// Task indices from highest to lowest priority for explicit priorities
/// (1 = highest); ties keep input order.
pub fn explicit_order(priorities: &[u32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..priorities.len()).collect();
    order.sort_by_key(|&i| priorities[i]);
    order
}

/// The smallest power of ten (at most 10^9) that makes every value integral, so that
/// decimal inputs (such as `1.25`) can be analysed exactly as integer ticks.
/// `None` when no such power exists (more than nine decimals).
pub fn decimal_scale(values: &[f64]) -> Option<Time> {
    let mut scale: Time = 1;
    while scale <= 1_000_000_000 {
        let integral = values.iter().all(|v| {
            let x = v * scale as f64;
            (x - x.round()).abs() <= 1e-9 * x.abs().max(1.0)
        });
        if integral {
            return Some(scale);
        }
        scale *= 10;
    }
    None
}

/// Rounds `value * scale` to the nearest integer tick (use with [`decimal_scale`]).
pub fn to_ticks(value: f64, scale: Time) -> Time {
    (value * scale as f64).round() as Time
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_passing_finds_the_threshold_and_never_evaluates_the_ends() {
        let mut seen = Vec::new();
        let mut ok = |x: Time| {
            seen.push(x);
            x >= 37
        };
        assert_eq!(first_passing(0, 100, &mut ok), 37);
        assert!(seen.iter().all(|&x| x > 0 && x < 100), "{seen:?}");
        assert!(seen.len() <= 7, "bisection: {} evaluations", seen.len());
        assert_eq!(
            first_passing(0, 100, |_| false),
            100,
            "`ok(hi)` is taken as given"
        );
        assert_eq!(first_passing(0, 100, |_| true), 1);
    }

    #[test]
    fn hyperperiod_and_overflow() {
        let ts = [Task::new(1, 4, 4), Task::new(1, 6, 6), Task::new(1, 10, 10)];
        assert_eq!(hyperperiod(&ts), Some(60));
        let big = [Task::new(1, u64::MAX - 1, 1), Task::new(1, u64::MAX - 2, 1)];
        assert_eq!(hyperperiod(&big), None);
    }

    #[test]
    fn exact_utilization_comparison() {
        let ts = [Task::new(1, 3, 3), Task::new(1, 3, 3), Task::new(1, 3, 3)];
        assert_eq!(utilization_cmp(&ts, 1, 1), Ordering::Equal);
        let ts = [Task::new(2, 4, 4), Task::new(3, 6, 4)];
        assert_eq!(utilization_cmp(&ts, 1, 1), Ordering::Equal);
        assert_eq!(utilization_cmp(&ts[..1], 1, 1), Ordering::Less);
        assert_eq!(utilization_cmp(&ts, 99, 100), Ordering::Greater);
    }

    #[test]
    fn orders_break_ties_by_input() {
        let ts = [Task::new(1, 10, 5), Task::new(1, 5, 5), Task::new(1, 10, 3)];
        assert_eq!(
            priority_order(&ts, PriorityRule::RateMonotonic),
            vec![1, 0, 2]
        );
        assert_eq!(
            priority_order(&ts, PriorityRule::DeadlineMonotonic),
            vec![2, 0, 1]
        );
        assert_eq!(explicit_order(&[2, 1, 2]), vec![1, 0, 2]);
    }

    #[test]
    fn decimal_scaling_is_exact() {
        assert_eq!(decimal_scale(&[0.5, 1.25, 2.0]), Some(100));
        assert_eq!(decimal_scale(&[3.0, 7.0]), Some(1));
        assert_eq!(to_ticks(1.25, 100), 125);
    }
}
