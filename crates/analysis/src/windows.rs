//! Static window schedules (DEmOS, ARINC 653 style): SC budgets against their windows,
//! per-CPU load, best-effort starvation, and the supply each partition receives.

use crate::supply::{Supply, WindowSupply};
use crate::task::Time;
use bulkhead_model::{Cpus, System};
use serde::Serialize;
use std::collections::BTreeMap;

/// How an SC partition's processes fit into one window slice.
///
/// DEmOS (thesis, Sec. 3.2 and 3.5.1): an SC partition starts at the beginning of its
/// window and all its processes must complete before the window ends; at most one
/// process of a partition runs at a time, across all the slice's CPUs, in FIFO order,
/// each up to its budget (drawn in `budget ± jitter/2`). So the SC partition holds its
/// slice for up to `Σ (budget + jitter/2)`.
#[derive(Debug, Clone, Serialize)]
pub struct SliceCheck {
    pub window: usize,
    pub slice: usize,
    pub partition: String,
    pub cpus: String,
    pub window_ns: Time,
    /// Σ (budget + jitter/2) of the partition's processes: its worst completion time.
    pub demand_ns: Time,
    pub verdict: Fit,
}

/// Verdict of a window check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fit {
    /// Every process completes within the window even with its largest budget.
    Fits,
    /// The processes' worst-case budgets exceed the window.
    Overruns,
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
        // Best-effort partitions start once every SC partition of the window is done.
        let mut sc_done = 0;
        for (si, s) in w.slices.iter().enumerate() {
            let Some(name) = &s.sc_partition else {
                continue;
            };
            let cpus = slice_cpus(system, &s.cpus);
            let check = sc_check(system, name, wi, si, w.length, &cpus);
            let held = check.demand_ns.min(w.length);
            sc_done = sc_done.max(held);
            for c in &cpus {
                *sc_busy.entry(c.clone()).or_default() += held;
                let iv = intervals.entry((name.clone(), c.clone())).or_default();
                iv.push((start, held));
            }
            report.slices.push(check);
        }
        for s in &w.slices {
            let Some(name) = &s.be_partition else {
                continue;
            };
            *be_time.entry(name.clone()).or_default() += w.length - sc_done;
            for c in slice_cpus(system, &s.cpus) {
                let iv = intervals.entry((name.clone(), c)).or_default();
                iv.push((start + sc_done, w.length - sc_done));
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
        let need: Time = system.partition(&name).map_or(0, |p| {
            p.processes.iter().map(|q| q.budget + q.jitter / 2).sum()
        });
        if time == 0 {
            report.warnings.push(format!(
                "best-effort partition `{name}` is starved: the SC partitions before it may use every window it appears in"
            ));
        } else if time < need {
            report.warnings.push(format!(
                "best-effort partition `{name}` is guaranteed only {} per major frame but its processes' budgets (with jitter) sum to up to {}",
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
    let demand: Time = system
        .partition(name)
        .map(|p| p.processes.iter().map(|q| q.budget + q.jitter / 2).sum())
        .unwrap_or_default();
    SliceCheck {
        window: wi,
        slice: si,
        partition: name.to_string(),
        cpus: cpus.join(","),
        window_ns: length,
        demand_ns: demand,
        verdict: if demand <= length {
            Fit::Fits
        } else {
            Fit::Overruns
        },
    }
}

fn fmt(ns: Time) -> String {
    bulkhead_model::units::format_duration(ns)
}
