//! Compositional interfaces: minimal periodic-resource budgets (Shin & Lee) and the
//! multiprocessor periodic resource model (Shin, Easwaran & Lee).

use crate::edf::demand_schedulable;
use crate::levels::Analysed;
use crate::rta::{meets_deadlines, response_times};
use crate::supply::{LinearSupply, PeriodicSupply, Supply};
use crate::task::{first_passing, Task, Time};
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
/// (fixed priority: every WCRT <= D, by [`meets_deadlines`]; EDF: [`demand_schedulable`]).
pub fn schedulable_on(tasks: &[Task], policy: &Policy, supply: &impl Supply) -> bool {
    match policy {
        Policy::FixedPriority(order) => meets_deadlines(tasks, order, supply),
        Policy::Edf => demand_schedulable(tasks, supply),
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
///
/// Under fixed priority the set is analysed once on a dedicated processor, and each trial
/// budget asks that analysis's facts first ([`Analysed::meets_deadlines_on`]: neither
/// supply gives more than a dedicated processor), so a trial costs `O(n)` plus the levels
/// they leave open, not a whole analysis.
pub fn minimal_budget(tasks: &[Task], policy: &Policy, period: Time, bound: Bound) -> Option<Time> {
    let analysed = match policy {
        Policy::FixedPriority(order) => {
            let sorted: Vec<Task> = order.iter().map(|&k| tasks[k]).collect();
            let identity: Vec<usize> = (0..sorted.len()).collect();
            let responses = response_times(&sorted, &identity, &PeriodicSupply::dedicated());
            Some(Analysed::new(sorted, &responses))
        }
        Policy::Edf => None,
    };
    let ok = |budget: Time| {
        let prm = PeriodicSupply::prm(period, budget);
        match (&analysed, bound) {
            (Some(a), Bound::Exact) => a.meets_deadlines_on(&prm),
            (Some(a), Bound::Linear) => a.meets_deadlines_on(&LinearSupply(prm)),
            (None, Bound::Exact) => demand_schedulable(tasks, &prm),
            (None, Bound::Linear) => demand_schedulable(tasks, &LinearSupply(prm)),
        }
    };
    if !ok(period) {
        return None;
    }
    Some(first_passing(0, period, ok))
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

/// The outcome of the global-EDF test on an MPR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GedfVerdict {
    pub schedulable: bool,
    /// The first failing check: task index k, interval `A_k + D_k`, demand and supply.
    pub violation: Option<GedfViolation>,
}

/// A failing instance of the global-EDF demand condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GedfViolation {
    pub task: usize,
    pub interval: Time,
    pub demand: Time,
    pub supply: Time,
}

/// Upper limit on the points [`gedf_schedulable`] evaluates before giving up.
pub const GEDF_MAX_POINTS: u64 = 2_000_000;

/// Sufficient test for global EDF of constrained-deadline sporadic `tasks` on the
/// multiprocessor periodic resource `mpr` (Shin, Easwaran, Lee, ECRTS 2008, Theorem 1,
/// Eq. (5)): for every task k and every `A_k >= 0`,
/// `DEM(A_k + D_k, m) < sbf_μ(A_k + D_k)` with
/// `DEM = m C_k + Σ_i Î_i + Σ_{m-1 largest} (Ī_i - Î_i)`, where the interference of task i
/// without (Î) and with (Ī) carry-in is `min(W_i(t) - CI_i(t), t - C_k)` and
/// `min(W_i(t), t - C_k)` (for i = k: `min(W_k - C_k - CI_k, A_k)`, `min(W_k - C_k, A_k)`),
/// `W_i(t) = N_i(t) C_i + CI_i(t)`, `N_i(t) = ⌊(t + T_i - D_i)/T_i⌋`,
/// `CI_i(t) = min(C_i, max(0, t - N_i(t) T_i))` (Eq. (3)).
///
/// The inequality is strict, as in the interference test of Bertogna, Cirinei & Lipari
/// ("Improved Schedulability Analysis of EDF on Multiprocessor Platforms", ECRTS 2005)
/// that this test generalizes: with `<=` the set (C, T, D) = (3, 12, 5), (3, 8, 8),
/// (10, 15, 12) passes on two dedicated CPUs, yet its third task misses at t = 12 in the
/// synchronous schedule (found by the property test against the reference scheduler).
///
/// `A_k` is bounded by where the demand's linear upper bound meets lsbf:
/// `(Θ/Π - U)(A_k + D_k) >= m C_k + Σ U_i (T_i - D_i) + Σ_{i≠k} C_i + 2(Θ/Π)(Π - Θ/m)`.
/// Both sides are piecewise linear with breakpoints on the grid `g/(2m)` (g = gcd of all
/// parameters), so checking every grid point is exact for this condition. Returns `None`
/// when more than [`GEDF_MAX_POINTS`] points would be needed, or when `U >= Θ/Π`
/// (the condition then cannot hold for all A_k).
pub fn gedf_schedulable(tasks: &[Task], mpr: &Mpr) -> Option<GedfVerdict> {
    let m = mpr.cpus;
    let g = tasks
        .iter()
        .flat_map(|t| [t.wcet, t.period, t.deadline])
        .chain([mpr.period, mpr.budget])
        .fold(0u128, |acc, x| crate::task::gcd(acc, x as u128)) as Time;
    let scale = |x: Time| x / g * 2 * m;
    let scaled: Vec<Task> = tasks
        .iter()
        .map(|t| Task::new(scale(t.wcet), scale(t.period), scale(t.deadline)))
        .collect();
    let smpr = Mpr {
        period: scale(mpr.period),
        budget: scale(mpr.budget),
        cpus: m,
    };
    let rate = mpr.budget as f64 / mpr.period as f64;
    let u = crate::task::utilization(tasks);
    if u >= rate {
        return None;
    }
    let fixed: f64 = scaled
        .iter()
        .map(|t| t.utilization() * (t.period - t.deadline) as f64)
        .sum::<f64>()
        + 2.0 * rate * (smpr.period as f64 - smpr.budget as f64 / m as f64);
    let all_c: f64 = scaled.iter().map(|t| t.wcet as f64).sum();
    let mut points: u64 = 0;
    for (k, tk) in scaled.iter().enumerate() {
        let rest = m as f64 * tk.wcet as f64 + all_c - tk.wcet as f64;
        let t_max = ((fixed + rest) / (rate - u)).ceil() as Time;
        let a_max = t_max.saturating_sub(tk.deadline);
        points += a_max + 1;
        if points > GEDF_MAX_POINTS {
            return None;
        }
        for a in 0..=a_max {
            let t = a + tk.deadline;
            let demand = dem(&scaled, k, a, m);
            let supply = smpr.sbf(t);
            if demand >= supply {
                let back = |x: Time| x * g / (2 * m);
                let violation = GedfViolation {
                    task: k,
                    interval: back(t),
                    demand: back(demand),
                    supply: back(supply),
                };
                return Some(GedfVerdict {
                    schedulable: false,
                    violation: Some(violation),
                });
            }
        }
    }
    Some(GedfVerdict {
        schedulable: true,
        violation: None,
    })
}

/// `DEM(A_k + D_k, m)` of [`gedf_schedulable`] (all times on the scaled grid).
fn dem(tasks: &[Task], k: usize, a: Time, m: Time) -> Time {
    let tk = tasks[k];
    let t = a + tk.deadline;
    let mut hat_sum = 0;
    let mut extra: Vec<Time> = Vec::with_capacity(tasks.len());
    for (i, ti) in tasks.iter().enumerate() {
        let n = (t + ti.period - ti.deadline) / ti.period;
        let ci = ti.wcet.min(t.saturating_sub(n * ti.period));
        let w = n * ti.wcet + ci;
        let (hat, bar) = if i == k {
            let body = w - tk.wcet;
            ((body - ci).min(a), body.min(a))
        } else {
            ((w - ci).min(t - tk.wcet), w.min(t - tk.wcet))
        };
        hat_sum += hat;
        extra.push(bar - hat);
    }
    extra.sort_unstable_by(|x, y| y.cmp(x));
    let carry: Time = extra.iter().take(m as usize - 1).sum();
    m * tk.wcet + hat_sum + carry
}

/// The least Θ of ⟨`period`, Θ, `cpus`⟩ that passes [`gedf_schedulable`], searched in
/// steps of the gcd of all task parameters and `period` (so the test's grid stays coarse);
/// `None` when even Θ = m Π does not pass (or the test gives up).
pub fn minimal_mpr_budget(tasks: &[Task], period: Time, cpus: Time) -> Option<Time> {
    let step = tasks
        .iter()
        .flat_map(|t| [t.wcet, t.period, t.deadline])
        .fold(period as u128, |acc, x| crate::task::gcd(acc, x as u128)) as Time;
    let ok = |units: Time| {
        let mpr = Mpr {
            period,
            budget: units * step,
            cpus,
        };
        gedf_schedulable(tasks, &mpr).is_some_and(|v| v.schedulable)
    };
    let full = period / step * cpus;
    if !ok(full) {
        return None;
    }
    Some(first_passing(0, full, ok) * step)
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
    fn full_mpr_is_m_dedicated_cpus() {
        let mpr = Mpr {
            period: 10,
            budget: 20,
            cpus: 2,
        };
        for t in 0..50 {
            assert_eq!(mpr.sbf(t), 2 * t);
        }
    }

    /// Global EDF on two dedicated CPUs: two heavy tasks and a light one pass; Dhall's
    /// effect (m light tasks with tiny deadlines and one heavy task) is rejected.
    #[test]
    fn gedf_on_dedicated_cpus() {
        let two = Mpr {
            period: 10,
            budget: 20,
            cpus: 2,
        };
        let fine = [
            Task::new(6, 10, 10),
            Task::new(6, 10, 10),
            Task::new(1, 10, 10),
        ];
        assert!(gedf_schedulable(&fine, &two).unwrap().schedulable);
        let dhall = [
            Task::new(2, 20, 20),
            Task::new(2, 20, 20),
            Task::new(20, 21, 21),
        ];
        let v = gedf_schedulable(&dhall, &two).unwrap();
        assert!(!v.schedulable);
        assert_eq!(v.violation.unwrap().task, 2);
        // The strict inequality rejects a set that misses at t = 12 (see the doc comment).
        let tight = [
            Task::new(3, 12, 5),
            Task::new(3, 8, 8),
            Task::new(10, 15, 12),
        ];
        assert!(!gedf_schedulable(&tight, &two).unwrap().schedulable);
    }

    #[test]
    fn minimal_mpr_budget_between_utilization_and_full() {
        let ts = [
            Task::new(3, 10, 10),
            Task::new(3, 10, 10),
            Task::new(3, 10, 10),
        ];
        let theta = minimal_mpr_budget(&ts, 5, 2).unwrap();
        assert!(5 * 9 <= theta * 10 && theta <= 10, "Θ = {theta}");
        assert!(!gedf_schedulable(
            &ts,
            &Mpr {
                period: 5,
                budget: theta - 1,
                cpus: 2
            }
        )
        .is_some_and(|v| v.schedulable));
    }

    #[test]
    fn dedicated_budget_is_needed_for_full_load() {
        let ts = [Task::new(5, 10, 10), Task::new(5, 10, 10)];
        let fp = Policy::FixedPriority(priority_order(&ts, PriorityRule::RateMonotonic));
        assert_eq!(minimal_budget(&ts, &fp, 5, Bound::Exact), Some(5));
        assert_eq!(minimal_budget(&ts, &Policy::Edf, 5, Bound::Exact), Some(5));
    }
}
