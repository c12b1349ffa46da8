//! Best-effort partitions on the CPUs of non-exclusive rt partitions (`exclusive: false`,
//! issue 39.4; DriveOS 7.1's Linux side, Boomerang IV-A's ProcData beside its load): they
//! run in the background of the rt tasks, in the time the tasks leave on those CPUs.
//!
//! The model: the rt tasks are simulated as on CPUs of their own (SCHED_DEADLINE and
//! SCHED_FIFO run before any SCHED_OTHER work; the kernel's fair server is not simulated),
//! and each CPU's time without a running rt job goes to the be partitions naming it,
//! shared equally (CFS gives each cgroup the same weight) except that a partition with a
//! `cpu` bandwidth gets at most its share of each of its CPUs' time (`cpu: 30%` over two
//! CPUs: 15% of each), what it leaves going to the others (water-filling). The be work
//! is assumed always runnable (a CPU burner): the figures are what it can get.
//!
//! Its non-preemptible sections (`nonpreemptible:`, the kernel paths the be work enters
//! with preemption off): an rt job released onto a CPU where only be work ran (no rt job
//! since before the release) waits for the longest section declared on that CPU, as if
//! the be work had just entered it; once per busy period, the blocking term `analyze`
//! adds (George, Rivierre & Spuri, INRIA RR-2966, 1996, Sec. 3.3, for EDF; the classic
//! blocking term of response-time analysis for fixed priorities). A be partition that
//! declares none is simulated without one; `analyze` assumes 1 ms for it.

use bulkhead_model::{Cpus, Nanos, PartitionKind, System};
use serde::Serialize;

/// A best-effort partition on CPUs of a non-exclusive rt partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackgroundSpec {
    pub partition: String,
    pub cpus: Vec<u32>,
    /// Its `cpu` bandwidth, percent of one CPU.
    pub cpu_percent: Option<u32>,
    /// Its declared longest non-preemptible section.
    pub nonpreemptible: Option<Nanos>,
}

/// What a best-effort partition on rt CPUs got.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct BackgroundStats {
    pub partition: String,
    pub cpus: Vec<u32>,
    /// CPU time, all its CPUs together.
    pub cpu_ns: Nanos,
    /// `cpu_ns` over the simulated time (1.0 = one whole CPU).
    pub share_of_one_cpu: f64,
}

/// The be partitions of `system` that name CPUs of a non-exclusive rt partition.
pub fn of_system(system: &System) -> Vec<BackgroundSpec> {
    let shared: Vec<u32> = system
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Rt && !p.exclusive)
        .filter_map(|p| match &p.cpus {
            Some(Cpus::Set(set)) => Some(set.iter().collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    system
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Be)
        .filter_map(|p| match &p.cpus {
            Some(Cpus::Set(set)) if set.iter().all(|c| shared.contains(&c)) => {
                Some(BackgroundSpec {
                    partition: p.name.clone(),
                    cpus: set.iter().collect(),
                    cpu_percent: p.cpu,
                    nonpreemptible: p.nonpreemptible,
                })
            }
            _ => None,
        })
        .collect()
}

/// The longest non-preemptible section declared by the be work on `cpu`, if any.
pub fn section(specs: &[BackgroundSpec], cpu: u32) -> Option<Nanos> {
    let on_cpu = specs.iter().filter(|s| s.cpus.contains(&cpu));
    on_cpu.filter_map(|s| s.nonpreemptible).max()
}

/// What each be partition got over `duration` ns, given the rt jobs' busy time of each
/// CPU (`busy(cpu)`).
pub fn stats(
    specs: &[BackgroundSpec],
    duration: Nanos,
    busy: impl Fn(u32) -> Nanos,
) -> Vec<BackgroundStats> {
    let mut got = vec![0u128; specs.len()];
    let mut cpus: Vec<u32> = specs.iter().flat_map(|s| s.cpus.iter().copied()).collect();
    cpus.sort_unstable();
    cpus.dedup();
    for cpu in cpus {
        let left = duration.saturating_sub(busy(cpu)) as u128;
        let on: Vec<usize> = (0..specs.len())
            .filter(|&i| specs[i].cpus.contains(&cpu))
            .collect();
        let caps: Vec<u128> = on.iter().map(|&i| cap(&specs[i], duration)).collect();
        for (k, share) in water_fill(left, &caps).into_iter().enumerate() {
            got[on[k]] += share;
        }
    }
    specs
        .iter()
        .zip(got)
        .map(|(s, ns)| BackgroundStats {
            partition: s.partition.clone(),
            cpus: s.cpus.clone(),
            cpu_ns: ns as Nanos,
            share_of_one_cpu: if duration == 0 {
                0.0
            } else {
                ns as f64 / duration as f64
            },
        })
        .collect()
}

/// The most partition `s` may get of each of its CPUs over `duration`.
fn cap(s: &BackgroundSpec, duration: Nanos) -> u128 {
    match s.cpu_percent {
        Some(p) => duration as u128 * p as u128 / 100 / s.cpus.len() as u128,
        None => u128::MAX,
    }
}

/// `total` shared equally among claimants with the given caps, what a capped one leaves
/// going to the others.
fn water_fill(total: u128, caps: &[u128]) -> Vec<u128> {
    let mut order: Vec<usize> = (0..caps.len()).collect();
    order.sort_by_key(|&i| caps[i]);
    let mut out = vec![0u128; caps.len()];
    let mut left = total;
    for (k, &i) in order.iter().enumerate() {
        let fair = left / (caps.len() - k) as u128;
        out[i] = fair.min(caps[i]);
        left -= out[i];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::water_fill;

    #[test]
    fn a_capped_partition_leaves_the_rest_to_the_others() {
        assert_eq!(water_fill(100, &[10, u128::MAX]), vec![10, 90]);
        assert_eq!(water_fill(100, &[u128::MAX, u128::MAX]), vec![50, 50]);
        assert_eq!(water_fill(100, &[80, 80]), vec![50, 50]);
        assert_eq!(water_fill(0, &[10]), vec![0]);
    }
}
