//! M2-Xen Fig. 5 (Li et al., "Multi-Mode Virtualization for Soft Real-Time Systems",
//! RTAS 2018, Sec. VI-B): the CPUs 40 random two-mode test cases need when each VM keeps
//! one resource interface for its worst mode ("Static Worst-case", Xen) against one
//! interface per mode (M2-Xen), and how many test cases miss deadlines after the switch
//! to mode 1 when the interfaces stay those of the initial mode 0 (Xen configured on
//! its initial mode).
//!
//! The paper's set-up: 12 VMs of 3 VCPUs on 15 PCPUs; each VM's tasks random, periods
//! in [100, 1000] ms; a total bandwidth of 8.0 in each mode, split differently between
//! the VMs in the two modes; interfaces of period 5 ms computed by CARTS. Here: each
//! mode's tasks are drawn (UUniFast-discard shares over the VMs, then over each VM's 3
//! to 6 tasks; periods log-uniform in [100, 1000] ms on a 10 ms grid, WCETs rounded up
//! to 100 us) and scaled to the largest total utilization whose interfaces take 8.0
//! CPUs at most (bisection); each VM's interface is the least budget of the multiprocessor
//! periodic resource <5 ms, budget, 3> that passes the global-EDF test of Easwaran,
//! Shin and Lee (ECRTS 2008; `prm::minimal_mpr_budget`, which CARTS implements too); the
//! PCPUs a mode needs are the sum of its interfaces' bandwidths rounded up (CARTS also
//! packs the VCPUs on the PCPUs, which can need more).
//!
//! Usage: m2xen-fig5 [CASES] [SEED]. Last line: one JSON object.

use bulkhead_analysis::generate::{
    random_task_set, seeded, uunifast_discard, Deadlines, SetConfig,
};
use bulkhead_analysis::prm::{gedf_schedulable, minimal_mpr_budget, Mpr};
use bulkhead_analysis::{Task, Time};
use rand::RngExt;
use serde_json::json;

const MS: Time = 1_000_000;
const VMS: usize = 12;
const VCPUS: Time = 3;
const PCPUS: Time = 15;
const PERIOD: Time = 5 * MS;
const BANDWIDTH: f64 = 8.0;

/// One mode of one test case as drawn: per VM, its tasks' periods and their shares of
/// the mode's total utilization (all shares of the mode sum to 1).
struct Draw(Vec<Vec<(Time, f64)>>);

impl Draw {
    fn new<R: rand::Rng>(rng: &mut R) -> Draw {
        let shares = uunifast_discard(rng, VMS, 1.0);
        Draw(
            shares
                .into_iter()
                .map(|share| {
                    let n = rng.random_range(3..=6);
                    let cfg = SetConfig {
                        tasks: n,
                        utilization: 1.0,
                        period_min: 100 * MS,
                        period_max: 1000 * MS,
                        granularity: 10 * MS,
                        deadlines: Deadlines::Implicit,
                    };
                    random_task_set(rng, &cfg)
                        .into_iter()
                        .map(|t| (t.period, share * t.wcet as f64 / t.period as f64))
                        .collect()
                })
                .collect(),
        )
    }

    /// Each VM's task set when the mode's tasks total `utilization` CPUs (WCETs rounded up
    /// to 100 us, at most the period).
    fn tasks(&self, utilization: f64) -> Vec<Vec<Task>> {
        let step = MS / 10;
        self.0
            .iter()
            .map(|vm| {
                vm.iter()
                    .map(|&(period, share)| {
                        let wcet = (share * utilization * period as f64) as Time;
                        Task::new(
                            (wcet.div_ceil(step) * step).clamp(step, period),
                            period,
                            period,
                        )
                    })
                    .collect()
            })
            .collect()
    }

    /// The task sets whose interfaces take the mode's bandwidth, 8.0 CPUs, at most: the
    /// largest total utilization that fits (bisection), and their interface budgets.
    fn fitted(&self) -> (f64, Vec<Vec<Task>>, Vec<Time>) {
        let (mut lo, mut hi) = (0.0, BANDWIDTH);
        for _ in 0..12 {
            let mid = (lo + hi) / 2.0;
            let budgets: Vec<Time> = self.tasks(mid).iter().map(|t| budget(t)).collect();
            if budgets.iter().sum::<Time>() as f64 <= BANDWIDTH * PERIOD as f64 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let tasks = self.tasks(lo);
        let budgets = tasks.iter().map(|t| budget(t)).collect();
        (lo, tasks, budgets)
    }
}

/// A VM's interface budget per 5 ms (all 3 VCPUs when no budget passes).
fn budget(tasks: &[Task]) -> Time {
    minimal_mpr_budget(tasks, PERIOD, VCPUS).unwrap_or(PERIOD * VCPUS)
}

fn cpus(budgets: impl Iterator<Item = Time>) -> Time {
    budgets.sum::<Time>().div_ceil(PERIOD)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let cases: usize = args
        .get(1)
        .map_or(40, |a| a.parse().expect("CASES: a number"));
    let seed: u64 = args
        .get(2)
        .map_or(2018, |a| a.parse().expect("SEED: a number"));
    let mut rng = seeded(seed);
    let mut rows = Vec::new();
    for case in 0..cases {
        let fitted = [Draw::new(&mut rng).fitted(), Draw::new(&mut rng).fitted()];
        let modes = [&fitted[0].1, &fitted[1].1];
        let budgets = [&fitted[0].2, &fitted[1].2];
        let per_mode: Vec<Time> = budgets.iter().map(|b| cpus(b.iter().copied())).collect();
        let worst = cpus((0..VMS).map(|vm| budgets[0][vm].max(budgets[1][vm])));
        // Xen on its initial mode: mode 1's tasks on mode 0's interfaces.
        let missing: Vec<usize> = (0..VMS)
            .filter(|&vm| {
                let mpr = Mpr {
                    period: PERIOD,
                    budget: budgets[0][vm],
                    cpus: VCPUS,
                };
                !gedf_schedulable(&modes[1][vm], &mpr).is_some_and(|v| v.schedulable)
            })
            .collect();
        println!(
            "case {case:>2}: static worst-case {worst:>2} PCPUs, mode 0 {:>2}, mode 1 {:>2}; \
             initial-mode interfaces unschedulable in mode 1 for {} VMs",
            per_mode[0],
            per_mode[1],
            missing.len()
        );
        rows.push(json!({"case": case, "task_utilization": [fitted[0].0, fitted[1].0], "static_worst_case": worst, "mode0": per_mode[0],
                         "mode1": per_mode[1], "m2xen": per_mode[0].max(per_mode[1]),
                         "initial_mode_vms_unschedulable": missing.len()}));
    }
    let count = |f: &dyn Fn(&serde_json::Value) -> bool| rows.iter().filter(|r| f(r)).count();
    let fits = |key: &str| count(&|r| r[key].as_u64().is_some_and(|v| v <= PCPUS));
    println!(
        "{}",
        json!({"bench": "m2xen-fig5", "cases": cases, "seed": seed, "pcpus": PCPUS,
               "static_schedulable": fits("static_worst_case"), "m2xen_schedulable": fits("m2xen"),
               "initial_mode_cases_missing": count(&|r| r["initial_mode_vms_unschedulable"] != 0),
               "rows": rows})
    );
}
