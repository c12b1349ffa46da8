//! Compositional interfaces: minimal periodic-resource budgets (Shin & Lee) and the
//! multiprocessor periodic resource model (Shin, Easwaran & Lee).

use crate::edf::demand_test;
use crate::rta::response_times;
use crate::supply::{LinearSupply, PeriodicSupply, Supply};
use crate::task::{Task, Time};
use serde::Serialize;

/// Scheduling policy of the tasks inside a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// Preemptive fixed priority; task indices from highest to lowest priority.
    FixedPriority(Vec<usize>),
    /// Preemptive EDF.
    Edf,
}

/// Which supply bound a budget is computed against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// The exact supply bound function sbf.
    Exact,
    /// Its linear lower bound lsbf (cheaper, pessimistic).
    Linear,
}

/// Whether `tasks` meet their deadlines under `policy` on `supply`
/// (fixed priority: every WCRT <= D, by [`response_times`]; EDF: [`demand_test`]).
pub fn schedulable_on(tasks: &[Task], policy: &Policy, supply: &impl Supply) -> bool {
    match policy {
        Policy::FixedPriority(order) => response_times(tasks, order, supply)
            .iter()
            .zip(tasks)
            .all(|(r, t)| r.wcrt.is_some_and(|w| w <= t.deadline)),
        Policy::Edf => demand_test(tasks, supply).schedulable,
    }
}

/// The minimal budget Θ (an integer number of ticks, so exact to one tick) of a
/// periodic resource Γ(Π = `period`, Θ) on which `tasks` are schedulable under
/// `policy`; `None` if even Θ = Π does not suffice.
///
/// Shin & Lee, "Periodic Resource Model for Compositional Real-Time Guarantees",
/// RTSS 2003 (component abstraction): the schedulability conditions are
/// `∀i ∃t ∈ (0, D_i]: rbf_i(t) <= sbf_Γ(t)` (fixed priority) and
/// `∀t: dbf(t) <= sbf_Γ(t)` (EDF), with `sbf_Γ(t) = yΘ + max(0, t - 2(Π-Θ) - yΠ)`,
/// `y = ⌊(t - (Π-Θ))/Π⌋`, or the linear bound `lsbf_Γ(t) = (Θ/Π)(t - 2(Π-Θ))`.
/// Both conditions are monotone in Θ, so the least Θ is found by bisection.
pub fn minimal_budget(tasks: &[Task], policy: &Policy, period: Time, bound: Bound) -> Option<Time> {
    let ok = |budget: Time| {
        let prm = PeriodicSupply::prm(period, budget);
        match bound {
            Bound::Exact => schedulable_on(tasks, policy, &prm),
            Bound::Linear => schedulable_on(tasks, policy, &LinearSupply(prm)),
        }
    };
    if !ok(period) {
        return None;
    }
    let (mut lo, mut hi) = (0, period);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// The multiprocessor periodic resource μ = ⟨Π, Θ, m⟩: Θ units of execution every Π
/// over at most `m` CPUs at a time (Shin, Easwaran, Lee, "Hierarchical Scheduling
/// Framework for Virtual Clustering of Multiprocessors", ECRTS 2008, Sec. 3.2;
/// Easwaran, Shin, Lee, "Optimal virtual cluster-based multiprocessor scheduling",
/// Real-Time Systems 43(1), 2009). Precondition: `0 < budget <= cpus * period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mpr {
    pub period: Time,
    pub budget: Time,
    pub cpus: Time,
}

impl Mpr {
    /// `sbf_μ(t) = kΘ + max(0, m(I - kΠ) + Θ)` for `t >= Π - ⌈Θ/m⌉`, else 0, with
    /// `k = ⌊(t - (Π - ⌈Θ/m⌉))/Π⌋` and `I = t - 2Π + ⌈Θ/m⌉` (ECRTS 2008, Eq. (1)).
    /// With m = 1 this is the PRM bound of Shin & Lee 2003.
    pub fn sbf(&self, t: Time) -> Time {
        let c = self.budget.div_ceil(self.cpus);
        let start = self.period - c;
        if t < start {
            return 0;
        }
        let k = (t - start) / self.period;
        // m(I - kΠ) + Θ with I - kΠ = t + c - (k + 2)Π, which is in [-Π, 0).
        let deficit = ((k + 2) * self.period - c - t) * self.cpus;
        k * self.budget + self.budget.saturating_sub(deficit)
    }

    /// `lsbf_μ(t) = (Θ/Π)(t - 2(Π - Θ/m))` (ECRTS 2008, Eq. (2)), as a float.
    pub fn lsbf(&self, t: Time) -> f64 {
        let (p, b, m) = (self.period as f64, self.budget as f64, self.cpus as f64);
        (b / p * (t as f64 - 2.0 * (p - b / m))).max(0.0)
    }

    /// The periodic server tasks that realize μ on dedicated CPUs (ECRTS 2008,
    /// Sec. 5.2, Definition 1): `m` servers of period Π; with `α = ⌊Θ/m⌋` and
    /// `β = Θ - mα`, `β` servers get `α + 1` and the others `α` (so they sum to Θ).
    pub fn servers(&self) -> Vec<Task> {
        let alpha = self.budget / self.cpus;
        let beta = self.budget - alpha * self.cpus;
        (0..self.cpus)
            .map(|i| alpha + Time::from(i < beta))
            .filter(|&c| c > 0)
            .map(|c| Task::new(c, self.period, self.period))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{priority_order, PriorityRule};

    #[test]
    fn single_cpu_mpr_is_prm() {
        let mpr = Mpr {
            period: 7,
            budget: 3,
            cpus: 1,
        };
        let prm = PeriodicSupply::prm(7, 3);
        for t in 0..60 {
            assert_eq!(mpr.sbf(t), prm.sbf(t), "t={t}");
        }
    }

    #[test]
    fn mpr_supply_and_servers() {
        // μ = <10, 15, 2>: ⌈Θ/m⌉ = 8, no supply before Π - 8 = 2. At t = 1000:
        // k = ⌊998/10⌋ = 99, m(I - kΠ) + Θ = 2(1000 + 8 - 1010) + 15 = 11 -> 99·15 + 11.
        let mpr = Mpr {
            period: 10,
            budget: 15,
            cpus: 2,
        };
        assert_eq!(mpr.sbf(2), 0);
        assert_eq!(mpr.sbf(1000), 1496);
        let mut prev = 0;
        for t in 0..200 {
            let s = mpr.sbf(t);
            assert!(s >= prev && s as f64 + 1e-9 >= mpr.lsbf(t), "t={t}");
            prev = s;
        }
        let servers = mpr.servers();
        assert_eq!(servers.iter().map(|s| s.wcet).sum::<Time>(), 15);
        assert_eq!(servers.len(), 2);
    }

    #[test]
    fn dedicated_budget_is_needed_for_full_load() {
        let ts = [Task::new(5, 10, 10), Task::new(5, 10, 10)];
        let fp = Policy::FixedPriority(priority_order(&ts, PriorityRule::RateMonotonic));
        assert_eq!(minimal_budget(&ts, &fp, 5, Bound::Exact), Some(5));
        assert_eq!(minimal_budget(&ts, &Policy::Edf, 5, Bound::Exact), Some(5));
    }
}
