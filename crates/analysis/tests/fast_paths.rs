//! The fast forms of the analysis give the answers of the direct ones on random task sets:
//! C max of every task at once ([`fp_max_wcets`]) and [`max_wcet`] task by task; the
//! minimal periodic-resource budget and the bisection on the exact test it speeds up; the
//! EDF demand verdict from the last deadline down ([`demand_schedulable`]) and every
//! deadline checked in turn ([`demand_test`]), whose demand at each deadline is the formula
//! `dbf`; first-fit placement and first-fit with a whole analysis per trial.

use bulkhead_analysis::assign::{first_fit_decreasing, CpuPolicy};
use bulkhead_analysis::edf::{dbf, demand_schedulable, demand_test, qpa};
use bulkhead_analysis::prm::{minimal_budget, schedulable_on, Bound, Policy};
use bulkhead_analysis::rta::{meets_deadlines, response_times};
use bulkhead_analysis::sensitivity::{fp_max_wcets, max_wcet};
use bulkhead_analysis::task::{first_passing, Task, Time};
use bulkhead_analysis::{LinearSupply, PeriodicSupply, Supply};
use proptest::prelude::*;

const PERIODS: [u64; 12] = [2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 24, 30];

/// A task with T from PERIODS times `scale`, C in [1, T/2], D in [C, 2T] (constrained
/// and arbitrary), release jitter and blocking now and then.
fn task(scale: u64) -> impl Strategy<Value = Task> {
    prop::sample::select(PERIODS.to_vec())
        .prop_map(move |t| t * scale)
        .prop_flat_map(|t| (Just(t), 1..=(t / 2).max(1)))
        .prop_flat_map(|(t, c)| (Just(t), Just(c), c..=2 * t, 0..=t / 4, 0..=c))
        .prop_flat_map(|(t, c, d, j, b)| {
            let jitter = prop_oneof![3 => Just(0), 1 => Just(j)];
            let blocking = prop_oneof![3 => Just(0), 1 => Just(b)];
            (Just(Task::new(c, t, d)), jitter, blocking)
        })
        .prop_map(|(t, jitter, blocking)| Task {
            jitter,
            blocking,
            ..t
        })
}

/// One to `max` tasks at a scale of 1 or 1000 ticks.
fn tasks(max: usize) -> impl Strategy<Value = Vec<Task>> {
    prop_oneof![Just(1), Just(1000)].prop_flat_map(move |s| prop::collection::vec(task(s), 1..=max))
}

/// A periodic resource Γ(Π, Θ) with Π a small multiple of 1 or 1000.
fn prm() -> impl Strategy<Value = PeriodicSupply> {
    (2u64..8, prop_oneof![Just(1), Just(1000)])
        .prop_flat_map(|(p, s)| (Just(p * s), 1..=p * s))
        .prop_map(|(period, budget)| PeriodicSupply::prm(period, budget))
}

/// The minimal budget as [`minimal_budget`] defines it: the least budget in `[1, period]`
/// that `ok`, by bisection; `None` if not even the whole period is.
fn bisection(period: Time, ok: impl Fn(Time) -> bool) -> Option<Time> {
    if !ok(period) {
        return None;
    }
    Some(first_passing(0, period, ok))
}

/// First-fit as it was: each trial analyses the whole CPU again.
fn first_fit_by_whole_analyses(tasks: &[Task], cpus: usize) -> Vec<Option<usize>> {
    let mut by_util: Vec<usize> = (0..tasks.len()).collect();
    by_util.sort_by(|&a, &b| tasks[b].utilization().total_cmp(&tasks[a].utilization()));
    let mut bins: Vec<Vec<usize>> = vec![Vec::new(); cpus];
    let mut placed = vec![None; tasks.len()];
    for i in by_util {
        for (cpu, bin) in bins.iter_mut().enumerate() {
            bin.push(i);
            let set: Vec<Task> = bin.iter().map(|&k| tasks[k]).collect();
            // Rank = index: the lower index has the higher priority.
            let mut order: Vec<usize> = (0..set.len()).collect();
            order.sort_by_key(|&k| bin[k]);
            if meets_deadlines(&set, &order, &PeriodicSupply::dedicated()) {
                placed[i] = Some(cpu);
                break;
            }
            bin.pop();
        }
    }
    placed
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// C max of every task at once equals `max_wcet` of each, on a dedicated processor
    /// and on a periodic resource.
    #[test]
    fn c_max_of_all_tasks_is_max_wcet_of_each(ts in tasks(9), supply in prm()) {
        let order: Vec<usize> = (0..ts.len()).collect();
        let fp = Policy::FixedPriority(order.clone());
        for s in [PeriodicSupply::dedicated(), supply] {
            let all = fp_max_wcets(&ts, &response_times(&ts, &order, &s), &s);
            for (p, &limit) in all.iter().enumerate() {
                prop_assert_eq!(limit, max_wcet(&ts, p, &fp, &s), "task {} of {:?} on {:?}", p, ts, s);
            }
        }
    }

    /// The minimal budget equals the bisection on the exact test, for fixed priority
    /// (by whole analyses) and EDF (by checking every deadline), against sbf and lsbf.
    #[test]
    fn minimal_budgets_are_the_bisections(ts in tasks(6), period in 2u64..40) {
        let order: Vec<usize> = (0..ts.len()).rev().collect();
        let fp = Policy::FixedPriority(order.clone());
        for bound in [Bound::Exact, Bound::Linear] {
            let supply = |budget: Time| PeriodicSupply::prm(period, budget);
            let fp_ok = |budget: Time| match bound {
                Bound::Exact => meets_deadlines(&ts, &order, &supply(budget)),
                Bound::Linear => meets_deadlines(&ts, &order, &LinearSupply(supply(budget))),
            };
            let edf_ok = |budget: Time| match bound {
                Bound::Exact => demand_test(&ts, &supply(budget)).schedulable,
                Bound::Linear => demand_test(&ts, &LinearSupply(supply(budget))).schedulable,
            };
            prop_assert_eq!(minimal_budget(&ts, &fp, period, bound), bisection(period, fp_ok));
            prop_assert_eq!(minimal_budget(&ts, &Policy::Edf, period, bound), bisection(period, edf_ok));
        }
    }

    /// The demand verdict found from the last deadline down is the one of checking every
    /// deadline, and the demand at each deadline is the formula's.
    #[test]
    fn demand_verdicts_agree(ts in tasks(6), supply in prm()) {
        let full = demand_test(&ts, &supply);
        prop_assert_eq!(demand_schedulable(&ts, &supply), full.schedulable, "{:?} on {:?}", ts, supply);
        prop_assert_eq!(schedulable_on(&ts, &Policy::Edf, &supply), full.schedulable);
        if let Some(v) = full.violation.filter(|v| !v.utilization) {
            prop_assert_eq!(v.demand, dbf(&ts, v.interval));
            // The first deadline that fails: none before it does (QPA, on a dedicated
            // processor, finds one from the last down; with J >= D the points checked are
            // not all deadlines: both are left out here).
            if !supply.is_dedicated() && ts.iter().all(|t| t.jitter < t.deadline) {
                let earlier = (1..v.interval).any(|t| dbf(&ts, t) > supply.sbf(t));
                prop_assert!(!earlier, "{:?} on {:?}: {:?}", ts, supply, v);
            }
        }
        prop_assert_eq!(demand_schedulable(&ts, &PeriodicSupply::dedicated()), qpa(&ts).schedulable);
    }

    /// First-fit places every task where first-fit with a whole analysis per trial does.
    #[test]
    fn first_fit_places_as_whole_analyses_do(ts in tasks(12), cpus in 1usize..4) {
        let rank: Vec<usize> = (0..ts.len()).collect();
        prop_assert_eq!(
            first_fit_decreasing(&ts, &rank, cpus, CpuPolicy::FixedPriority),
            first_fit_by_whole_analyses(&ts, cpus),
            "{:?}", ts
        );
    }
}
