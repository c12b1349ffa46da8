//! Property tests: on random task sets, RTA and the EDF demand test agree with an
//! exhaustive schedule over one hyperperiod (tests/reference).

mod reference;

use bulkhead_analysis::edf::qpa;
use bulkhead_analysis::prm::{gedf_schedulable, Mpr};
use bulkhead_analysis::rta::{fp_schedulable, response_times};
use bulkhead_analysis::task::{hyperperiod, priority_order, PriorityRule};
use bulkhead_analysis::task::{utilization_cmp, Task};
use bulkhead_analysis::{PeriodicSupply, Supply, WindowSupply};
use proptest::prelude::*;
use std::cmp::Ordering;

const PERIODS: [u64; 12] = [2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 24, 30];

/// A task with T from PERIODS, C in [1, T], D in [C, max_d_factor * T].
fn task(max_d_factor: u64) -> impl Strategy<Value = Task> {
    prop::sample::select(PERIODS.to_vec())
        .prop_flat_map(|t| (Just(t), 1..=t))
        .prop_flat_map(move |(t, c)| (Just(t), Just(c), c..=max_d_factor * t))
        .prop_map(|(t, c, d)| Task::new(c, t, d))
}

fn tasks(max_d_factor: u64) -> impl Strategy<Value = (Vec<Task>, Vec<usize>)> {
    prop::collection::vec(task(max_d_factor), 1..=5).prop_flat_map(|ts| {
        let n = ts.len();
        (
            Just(ts),
            Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
        )
    })
}

/// One to three light tasks (C <= T/3), D in [C, 2T], in a random priority order.
fn light_tasks() -> impl Strategy<Value = (Vec<Task>, Vec<usize>)> {
    let light = prop::sample::select(PERIODS.to_vec())
        .prop_flat_map(|t| (Just(t), 1..=(t / 3).max(1)))
        .prop_flat_map(|(t, c)| (Just(t), Just(c), c..=2 * t))
        .prop_map(|(t, c, d)| Task::new(c, t, d));
    prop::collection::vec(light, 1..=3).prop_flat_map(|ts| {
        let n = ts.len();
        (
            Just(ts),
            Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Exact RTA (arbitrary deadlines, any priority order) equals the largest response
    /// observed in the synchronous schedule of the tasks of priority >= i; unbounded
    /// exactly when their utilization exceeds 1.
    #[test]
    fn rta_equals_exhaustive_schedule((ts, order) in tasks(2)) {
        let ours = response_times(&ts, &order, &PeriodicSupply::dedicated());
        for (pos, &i) in order.iter().enumerate() {
            let hep: Vec<Task> = order[..=pos].iter().map(|&k| ts[k]).collect();
            if utilization_cmp(&hep, 1, 1) == Ordering::Greater {
                prop_assert_eq!(ours[i].wcrt, None);
            } else {
                let rank: Vec<usize> = (0..hep.len()).collect();
                let (sim, _) = reference::simulate(&hep, &rank, false);
                prop_assert_eq!(ours[i].wcrt, Some(sim[pos]), "task {} of {:?}", i, ts);
            }
        }
    }

    /// The verdict-only path (hyperbolic bound, then RTA with early exit) agrees with the
    /// full analysis, with rate-monotonic and with arbitrary priorities.
    #[test]
    fn verdict_path_agrees_with_full_rta((ts, order) in tasks(2)) {
        let full = |o: &[usize]| response_times(&ts, o, &PeriodicSupply::dedicated())
            .iter()
            .zip(&ts)
            .all(|(r, t)| r.wcrt.is_some_and(|w| w <= t.deadline));
        let rm = priority_order(&ts, PriorityRule::RateMonotonic);
        prop_assert_eq!(fp_schedulable(&ts, &rm, true), full(&rm));
        prop_assert_eq!(fp_schedulable(&ts, &order, false), full(&order));
    }

    /// QPA's verdict equals "no deadline miss" in the synchronous EDF schedule
    /// (constrained deadlines; U > 1 is always a miss).
    #[test]
    fn qpa_equals_exhaustive_edf_schedule((ts, _) in tasks(1)) {
        let verdict = qpa(&ts);
        if utilization_cmp(&ts, 1, 1) == Ordering::Greater {
            prop_assert!(!verdict.schedulable);
        } else {
            let rank: Vec<usize> = (0..ts.len()).collect();
            let (_, missed) = reference::simulate(&ts, &rank, true);
            prop_assert_eq!(verdict.schedulable, !missed, "{:?}", ts);
        }
    }

    /// The global-EDF test on an MPR is sufficient: whenever it accepts a set on two
    /// dedicated CPUs (Θ = 2Π), the synchronous global-EDF schedule has no miss.
    #[test]
    fn gedf_acceptance_implies_no_miss((ts, _) in tasks(1)) {
        let two = Mpr { period: 1, budget: 2, cpus: 2 };
        if let Some(v) = gedf_schedulable(&ts, &two) {
            if v.schedulable {
                prop_assert!(!reference::global_edf_misses(&ts, 2), "{:?}", ts);
            }
        }
    }

    /// RTA over a periodic resource Γ(Π, Θ) is exact: it equals the largest response in a
    /// tick-by-tick schedule whose supply follows the worst-case pattern from time 0
    /// (blackout 2(Π - Θ), then Θ every Π), which attains sbf for every interval length.
    #[test]
    fn rta_on_prm_equals_worst_pattern_schedule(
        (ts, order) in light_tasks(),
        (period, budget) in (2u64..7).prop_flat_map(|p| (Just(p), 1..=p)),
    ) {
        let prm = PeriodicSupply::prm(period, budget);
        prop_assume!(utilization_cmp(&ts, budget, period) == Ordering::Less);
        let ours = response_times(&ts, &order, &prm);
        let mut rank = vec![0; ts.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
        }
        let frame = bulkhead_analysis::task::lcm(hyperperiod(&ts).unwrap(), period).unwrap();
        let blackout = prm.blackout;
        let available = |t: u64| t >= blackout && (t - blackout) % period < budget;
        let sim = reference::simulate_fp_on_supply(&ts, &rank, 2 * frame, available);
        for i in 0..ts.len() {
            prop_assert_eq!(ours[i].wcrt, Some(sim[i]), "task {} of {:?} on Γ({}, {})", i, ts, period, budget);
        }
    }

    /// The window supply bound equals the brute-force minimum over every integer offset,
    /// and `time_for` is its exact pseudo-inverse.
    #[test]
    fn window_sbf_is_the_minimum_over_offsets(
        frame in 4u64..40,
        raw in prop::collection::vec((0u64..40, 1u64..8), 1..4),
    ) {
        let mut used = vec![false; frame as usize];
        let mut iv = Vec::new();
        for (s, l) in raw {
            let s = s % frame;
            let l = l.min(frame - s);
            if (s..s + l).all(|x| !used[x as usize]) {
                (s..s + l).for_each(|x| used[x as usize] = true);
                iv.push((s, l));
            }
        }
        let w = WindowSupply::new(frame, iv);
        let supplied = |a: u64, t: u64| (a..a + t).filter(|&x| used[(x % frame) as usize]).count() as u64;
        for t in 0..3 * frame {
            let brute = (0..frame).map(|a| supplied(a, t)).min().unwrap();
            prop_assert_eq!(w.sbf(t), brute, "t = {}", t);
        }
        for d in 1..2 * w.per_frame() {
            let t = w.time_for(d).unwrap();
            prop_assert!(w.sbf(t) >= d && w.sbf(t - 1) < d);
        }
    }
}
