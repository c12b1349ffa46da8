//! Random task sets for benchmarks and property tests (seeded, reproducible).

use crate::task::{Task, Time};
use rand::{RngExt, SeedableRng};
use rand_xorshift::XorShiftRng;

/// UUniFast-discard: `n` utilizations, uniformly distributed over the simplex
/// `Σ u_i = total`, redrawn until every `u_i <= 1`.
///
/// UUniFast: Bini & Buttazzo, "Measuring the Performance of Schedulability Tests",
/// Real-Time Systems 30(1–2), 2005 (the UUniFast algorithm): `s_i = s_{i-1} · r^{1/(n-i)}`,
/// `u_i = s_{i-1} - s_i`. The discard variant for totals above 1: Davis & Burns,
/// "Priority Assignment for Global Fixed Priority Pre-emptive Scheduling in
/// Multiprocessor Real-Time Systems", RTSS 2009 (task-set generation).
/// Precondition: `n >= 1` and `0 <= total <= n` (otherwise no draw can succeed).
pub fn uunifast_discard<R: rand::Rng + ?Sized>(rng: &mut R, n: usize, total: f64) -> Vec<f64> {
    assert!(
        n >= 1 && (0.0..=n as f64).contains(&total),
        "need n >= 1 and 0 <= total <= n"
    );
    loop {
        let mut out = Vec::with_capacity(n);
        let mut sum = total;
        for i in 1..n {
            let next = sum * rng.random::<f64>().powf(1.0 / (n - i) as f64);
            out.push(sum - next);
            sum = next;
        }
        out.push(sum);
        if out.iter().all(|&u| u <= 1.0) {
            return out;
        }
    }
}

/// How relative deadlines are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadlines {
    /// D = T.
    Implicit,
    /// D uniform in `[C, T]`.
    Constrained,
    /// D uniform in `[C, 2T]`.
    Arbitrary,
}

/// Parameters of [`random_task_set`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SetConfig {
    pub tasks: usize,
    pub utilization: f64,
    pub period_min: Time,
    pub period_max: Time,
    /// Periods are multiples of this (keeps hyperperiods small in tests).
    pub granularity: Time,
    pub deadlines: Deadlines,
}

/// A random task set: utilizations by [`uunifast_discard`], periods log-uniform in
/// `[period_min, period_max]` (Emberson, Stafford, Davis, "Techniques for the Synthesis
/// of Multiprocessor Tasksets", WATERS 2010, log-uniform periods), `C = max(1, round(u T))`.
pub fn random_task_set<R: rand::Rng + ?Sized>(rng: &mut R, cfg: &SetConfig) -> Vec<Task> {
    let us = uunifast_discard(rng, cfg.tasks, cfg.utilization);
    let (lo, hi) = ((cfg.period_min as f64).ln(), (cfg.period_max as f64).ln());
    let g = cfg.granularity.max(1);
    us.into_iter()
        .map(|u| {
            let raw = (lo + (hi - lo) * rng.random::<f64>()).exp();
            let period = ((raw / g as f64).round() as Time).max(1) * g;
            let wcet = ((u * period as f64).round() as Time).clamp(1, period);
            let deadline = match cfg.deadlines {
                Deadlines::Implicit => period,
                Deadlines::Constrained => rng.random_range(wcet..=period),
                Deadlines::Arbitrary => rng.random_range(wcet..=2 * period),
            };
            Task::new(wcet, period, deadline)
        })
        .collect()
}

/// A seeded generator (XorShift, reproducible across platforms) for benchmarks.
pub fn seeded(seed: u64) -> XorShiftRng {
    XorShiftRng::seed_from_u64(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilizations_sum_and_bounds() {
        let mut rng = seeded(7);
        for total in [0.5, 1.0, 2.5] {
            let us = uunifast_discard(&mut rng, 5, total);
            assert_eq!(us.len(), 5);
            assert!((us.iter().sum::<f64>() - total).abs() < 1e-9);
            assert!(us.iter().all(|&u| (0.0..=1.0).contains(&u)));
        }
    }

    #[test]
    fn same_seed_same_set() {
        let cfg = SetConfig {
            tasks: 10,
            utilization: 0.8,
            period_min: 1_000_000,
            period_max: 100_000_000,
            granularity: 1_000,
            deadlines: Deadlines::Constrained,
        };
        let a = random_task_set(&mut seeded(1), &cfg);
        let b = random_task_set(&mut seeded(1), &cfg);
        assert_eq!(a, b);
        assert!(a
            .iter()
            .all(|t| t.wcet <= t.deadline && t.deadline <= t.period && t.period % 1_000 == 0));
    }
}
