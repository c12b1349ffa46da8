//! Static window schedules (DEmOS, ARINC 653 style): SC budgets against their windows,
//! per-CPU load, best-effort starvation, and the supply each partition receives.

use crate::supply::{Supply, WindowSupply};
use crate::task::Time;
use bulkhead_model::{Cpus, System};
use serde::Serialize;
use std::collections::BTreeMap;

/// How an SC partition's processes fit into one window slice.
#[derive(Debug, Clone, Serialize)]
pub struct SliceCheck {
    pub window: usize,
    pub slice: usize,
    pub partition: String,
    pub cpus: String,
    pub window_ns: Time,
    /// Σ (budget + jitter/2) of the partition's processes.
    pub demand_ns: Time,
    /// Finishing time bound of the SC processes in the window (see [`completion_bound`]).
    pub completion_ns: Time,
    pub verdict: Fit,
}

/// Verdict of a window check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fit {
    /// Guaranteed to complete within the window.
    Fits,
    /// Completes only under a favourable distribution over the slice's CPUs.
    MayOverrun,
    /// Cannot complete: demand exceeds the window even with perfect packing.
    Overruns,
}

/// Bounds on when `budgets` complete on `cpus` CPUs under a work-conserving scheduler:
/// `(necessary, guaranteed)` = `(max(max b, Σb / m), Σb / m + (1 - 1/m) max b)`
/// (Graham, "Bounds on Multiprocessing Timing Anomalies", SIAM J. Appl. Math. 17(2),
/// 1969, Sec. 2: list scheduling finishes within `Σb/m + (1 - 1/m) max b`).
pub fn completion_bound(budgets: &[Time], cpus: u64) -> (Time, Time) {
    let m = cpus.max(1);
    let sum: Time = budgets.iter().sum();
    let max = budgets.iter().copied().max().unwrap_or(0);
    let necessary = max.max(sum.div_ceil(m));
    let guaranteed = (sum + (m - 1) * max).div_ceil(m);
    (necessary, guaranteed)
}

/// The window analysis of a system.
#[derive(Debug, Clone, Serialize)]
pub struct WindowReport {
    pub major_frame_ns: Time,
    pub slices: Vec<SliceCheck>,
    /// Per CPU: the share of the major frame SC partitions may use.
    pub cpu_load: BTreeMap<String, f64>,
    /// Per windowed partition and CPU: supply per frame and the longest time without supply.
    pub supply: Vec<PartitionSupply>,
    pub warnings: Vec<String>,
}

/// The supply a partition gets from the window schedule on one CPU.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionSupply {
    pub partition: String,
    pub cpu: String,
    pub per_frame_ns: Time,
    /// Longest interval with no supply: `time_for(1) - 1`.
    pub max_blackout_ns: Time,
    pub share: f64,
}

/// CPU names of a slice; `all` is resolved against `system.cpus` when given.
pub fn slice_cpus(system: &System, cpus: &Cpus) -> Vec<String> {
    match cpus {
        Cpus::Set(set) => set.iter().map(|c| c.to_string()).collect(),
        Cpus::All => match &system.cpus {
            Some(set) => set.iter().map(|c| c.to_string()).collect(),
            None => vec!["all".to_string()],
        },
    }
}

/// Analyses the window schedule of `system` (empty report when it has none).
pub fn analyze_windows(system: &System) -> WindowReport {
    let frame = system.major_frame();
    let mut report = WindowReport {
        major_frame_ns: frame,
        slices: Vec::new(),
        cpu_load: BTreeMap::new(),
        supply: Vec::new(),
        warnings: Vec::new(),
    };
    let mut intervals: BTreeMap<(String, String), Vec<(Time, Time)>> = BTreeMap::new();
    let mut be_time: BTreeMap<String, Time> = BTreeMap::new();
    let mut sc_busy: BTreeMap<String, Time> = BTreeMap::new();
    let mut start = 0;
    for (wi, w) in system.windows.iter().enumerate() {
        for (si, s) in w.slices.iter().enumerate() {
            let cpus = slice_cpus(system, &s.cpus);
            let mut sc_done = 0;
            if let Some(name) = &s.sc_partition {
                let check = sc_check(system, name, wi, si, w.length, &cpus);
                sc_done = check.completion_ns.min(w.length);
                for c in &cpus {
                    *sc_busy.entry(c.clone()).or_default() +=
                        check.demand_ns.div_ceil(cpus.len() as Time).min(w.length);
                    intervals
                        .entry((name.clone(), c.clone()))
                        .or_default()
                        .push((start, w.length));
                }
                report.slices.push(check);
            }
            if let Some(name) = &s.be_partition {
                *be_time.entry(name.clone()).or_default() += w.length - sc_done;
                for c in &cpus {
                    // BE runs after the SC partition's guaranteed completion.
                    let (from, len) = (start + sc_done, w.length - sc_done);
                    intervals
                        .entry((name.clone(), c.clone()))
                        .or_default()
                        .push((from, len));
                }
            }
        }
        start += w.length;
    }
    for (cpu, busy) in sc_busy {
        report
            .cpu_load
            .insert(cpu, busy as f64 / frame.max(1) as f64);
    }
    for ((partition, cpu), iv) in intervals {
        let supply = WindowSupply::new(frame, iv);
        report.supply.push(PartitionSupply {
            max_blackout_ns: supply.time_for(1).map_or(frame, |t| t - 1),
            per_frame_ns: supply.per_frame(),
            share: supply.per_frame() as f64 / frame.max(1) as f64,
            partition,
            cpu,
        });
    }
    for (name, time) in be_time {
        let need: Time = system
            .partition(&name)
            .map_or(0, |p| p.processes.iter().map(|q| q.budget).sum());
        if time == 0 {
            report.warnings.push(format!(
                "best-effort partition `{name}` is starved: the SC partitions before it may use every window it appears in"
            ));
        } else if time < need {
            report.warnings.push(format!(
                "best-effort partition `{name}` is guaranteed only {} per major frame but its processes' budgets sum to {}",
                fmt(time),
                fmt(need)
            ));
        }
    }
    report
}

fn sc_check(
    system: &System,
    name: &str,
    wi: usize,
    si: usize,
    length: Time,
    cpus: &[String],
) -> SliceCheck {
    let budgets: Vec<Time> = system
        .partition(name)
        .map(|p| {
            p.processes
                .iter()
                .map(|q| q.budget + q.jitter / 2)
                .collect()
        })
        .unwrap_or_default();
    let (necessary, guaranteed) = completion_bound(&budgets, cpus.len() as u64);
    let verdict = if guaranteed <= length {
        Fit::Fits
    } else if necessary <= length {
        Fit::MayOverrun
    } else {
        Fit::Overruns
    };
    SliceCheck {
        window: wi,
        slice: si,
        partition: name.to_string(),
        cpus: cpus.join(","),
        window_ns: length,
        demand_ns: budgets.iter().sum(),
        completion_ns: guaranteed,
        verdict,
    }
}

fn fmt(ns: Time) -> String {
    bulkhead_model::units::format_duration(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graham_bounds() {
        assert_eq!(completion_bound(&[100, 50], 1), (150, 150));
        // Two CPUs: at least max(100, 75) = 100, at most 75 + 50 = 125.
        assert_eq!(completion_bound(&[100, 50], 2), (100, 125));
    }
}
