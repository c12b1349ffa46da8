//! The platform's stall in the analysis (docs/platform.md): a stretch of time of at most
//! `D` in which a CPU runs none of the system's tasks (a vCPU descheduled by its host, a
//! system management interrupt). Every rt task of a CPU with a stall of `D` is analysed
//! as if the stall struck during its busy period:
//!
//! * fixed priority: the stall is interference of `D` above every task, at most once in
//!   a busy period, i.e. the blocking term `B` of the response-time analysis (Tindell,
//!   Burns, Wellings, "An Extendible Approach for Analysing Fixed Priority Hard Real-Time
//!   Tasks", Real-Time Systems 6(2), 1994: `w = B + (q+1)C + Σ ⌈(w+J)/T⌉ C`);
//! * EDF: a stall takes at most `D` of supply from any interval, so the demand test
//!   becomes `dbf(t) ≤ t - D` for every `t`; with `J = D` on every task the demand
//!   `dbf_J(t) = dbf(t + D)` (Spuri 1996's release jitter) gives exactly that test at
//!   `u = t + D`, so the stall enters as release jitter.
//!
//! `analyze` reports the verdicts with and without it; the pipeline solver uses
//! [`stall_busy_period`] for the delay bound with a stall (`pipes.rs`).

use crate::task::{Task, Time};
use bulkhead_model::{PartitionKind, Scheduler, System};

/// `system` with the platform's stall added to every rt task: blocking on a fixed-
/// priority partition, release jitter on an EDF one (module doc). Without a `platform:`
/// section (or with a zero stall) the system is unchanged.
pub fn with_stalls(system: &System) -> System {
    let mut out = system.clone();
    let Some(platform) = &system.platform else {
        return out;
    };
    for p in out.partitions.iter_mut() {
        if p.kind != PartitionKind::Rt {
            continue;
        }
        let stall = platform.stall_of_any(partition_cpus(system, p));
        for t in p.tasks.iter_mut() {
            match p.scheduler {
                Scheduler::FixedPriority => t.blocking = t.blocking.saturating_add(stall),
                Scheduler::Edf => t.release_jitter = t.release_jitter.saturating_add(stall),
            }
        }
    }
    out
}

/// The CPUs of partition `p` (`None`: any CPU of the machine).
pub fn partition_cpus<'a>(
    system: &'a System,
    p: &'a bulkhead_model::Partition,
) -> Option<&'a bulkhead_model::CpuSet> {
    match &p.cpus {
        Some(bulkhead_model::Cpus::Set(set)) => Some(set),
        _ => system.cpus.as_ref(),
    }
}

/// The longest stall of the CPUs of partition `name` (0 without a `platform:` section).
pub fn partition_stall(system: &System, name: &str) -> Time {
    let (Some(platform), Some(p)) = (&system.platform, system.partition(name)) else {
        return 0;
    };
    platform.stall_of_any(partition_cpus(system, p))
}

/// The longest busy period of a CPU running `tasks` when one stall of `stall` strikes in
/// it: the least fixed point of `L = stall + Σ ⌈L / T_i⌉ C_i` (the synchronous busy
/// period of Lehoczky, "Fixed Priority Scheduling of Periodic Task Sets with Arbitrary
/// Deadlines", RTSS 1990, with the stall as one more interference, as the blocking term
/// of Tindell et al. 1994). Any job of these tasks, under any work-conserving scheduler
/// of the CPU, completes within the busy period it is released in, so within `L` of its
/// release. `None` when the utilization reaches 1 (the busy period may not end).
pub fn stall_busy_period(tasks: &[Task], stall: Time) -> Option<Time> {
    if crate::task::utilization_cmp(tasks, 1, 1) != std::cmp::Ordering::Less {
        return None;
    }
    let demand = |l: Time| -> Option<Time> {
        tasks.iter().try_fold(stall, |acc, k| {
            acc.checked_add(l.div_ceil(k.period).checked_mul(k.wcet)?)
        })
    };
    let mut l = tasks.iter().map(|k| k.wcet).sum::<Time>() + stall;
    loop {
        let next = demand(l)?;
        if next <= l {
            return Some(l);
        }
        l = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table I's CPU 0 (`quest`): the gateway's reader and writer (300 µs every 2 ms) and
    /// four stages of 100 µs every 2 ms, 1 ms of work per 2 ms; a stall of 5 ms gives a
    /// busy period of 10 ms (the stall and five periods' work).
    #[test]
    fn table_i_cpu_0_with_a_5_ms_stall() {
        let ms = 1_000_000;
        let us = 1_000;
        let mut tasks = vec![Task::new(300 * us, 2 * ms, 2 * ms); 2];
        tasks.extend(vec![Task::new(100 * us, 2 * ms, 2 * ms); 4]);
        // L = 5 + ⌈L/2⌉ x 1 ms: 6 -> 8 -> 9 -> 10 -> 10.
        assert_eq!(stall_busy_period(&tasks, 5 * ms), Some(10 * ms));
        // Without a stall: one period's work, 1 ms.
        assert_eq!(stall_busy_period(&tasks, 0), Some(ms));
        assert_eq!(stall_busy_period(&[Task::new(2, 2, 2)], 1), None);
    }
}
