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

use crate::system::{analyze_system_with, Options};
use crate::task::{Task, Time};
use bulkhead_model::units::format_duration;
use bulkhead_model::{PartitionKind, Scheduler, System};
use serde::Serialize;

/// The verdicts of `analyze` with the platform's stall, beside those without it.
#[derive(Debug, Clone, Serialize)]
pub struct StallVerdicts {
    /// The longest stall of any CPU.
    pub stall_ns: Time,
    /// Every rt task meets its deadline with a stall in each busy period.
    pub schedulable: bool,
    pub tasks: Vec<StallTask>,
}

/// One rt task with the stall of its CPU.
#[derive(Debug, Clone, Serialize)]
pub struct StallTask {
    pub partition: String,
    pub name: String,
    /// The stall of its partition's CPUs.
    pub stall_ns: Time,
    /// Its WCRT without and with the stall (`None`: unbounded or not established).
    pub wcrt_ns: Option<Time>,
    pub stalled_wcrt_ns: Option<Time>,
    pub deadline_ns: Time,
    pub schedulable: bool,
}

/// The analysis of `system` with its `platform:` stall ([`with_stalls`]) beside the
/// one without; `None` without a `platform:` section.
pub fn stall_verdicts(system: &System, options: &Options) -> Option<StallVerdicts> {
    let platform = system.platform.as_ref()?;
    let ideal = analyze_system_with(system, options);
    let stalled = analyze_system_with(&with_stalls(system), options);
    let tasks: Vec<StallTask> = stalled
        .tasks
        .iter()
        .map(|t| {
            let before = ideal
                .tasks
                .iter()
                .find(|i| i.partition == t.partition && i.name == t.name);
            StallTask {
                partition: t.partition.clone(),
                name: t.name.clone(),
                stall_ns: partition_stall(system, &t.partition),
                wcrt_ns: before.and_then(|i| i.wcrt_ns),
                stalled_wcrt_ns: t.wcrt_ns,
                deadline_ns: t.deadline_ns,
                schedulable: t.schedulable,
            }
        })
        .collect();
    Some(StallVerdicts {
        stall_ns: platform.stall_of_any(None),
        schedulable: stalled.schedulable,
        tasks,
    })
}

/// The verdicts with the stall as text, after `analyze`'s report.
pub fn render_stall_text(v: &StallVerdicts) -> String {
    let d = |t: Option<Time>| t.map_or("-".to_string(), format_duration);
    let missing = v.tasks.iter().filter(|t| !t.schedulable).count();
    let verdict = match v.schedulable {
        true => "SCHEDULABLE".to_string(),
        false => format!(
            "NOT SCHEDULABLE ({missing} of {} tasks miss)",
            v.tasks.len()
        ),
    };
    let mut out = format!(
        "\nwith the platform's stall (up to {} on a CPU, as blocking or release jitter; docs/platform.md): {verdict}\n",
        format_duration(v.stall_ns)
    );
    out += &format!(
        "  {:<24} {:>9} {:>10} {:>12} {:>10}  verdict\n",
        "task", "stall", "WCRT", "with stall", "D"
    );
    for t in &v.tasks {
        out += &format!(
            "  {:<24} {:>9} {:>10} {:>12} {:>10}  {}\n",
            format!("{}/{}", t.partition, t.name),
            format_duration(t.stall_ns),
            d(t.wcrt_ns),
            d(t.stalled_wcrt_ns),
            format_duration(t.deadline_ns),
            if t.schedulable { "ok" } else { "MISS" }
        );
    }
    out
}

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

    fn system(platform: &str) -> System {
        let text = format!(
            "system: {{}}
partitions:
  - name: quest
    kind: rt
    cpus: 0
    tasks:
      - {{name: a, budget: 300us, period: 2ms}}
      - {{name: b, budget: 100us, period: 2ms}}
  - name: linux
    kind: rt
    cpus: 1
    scheduler: edf
    tasks:
      - {{name: c, budget: 200us, period: 2ms}}
{platform}"
        );
        bulkhead_model::load_str(&text, "p.yaml")
            .expect("loads")
            .system
    }

    /// A stall is blocking of every fixed-priority task (the highest one's WCRT grows
    /// from C to C + D) and release jitter of every EDF task (a 1.5 ms stall leaves
    /// Table I's ProcData, 200 µs every 2 ms, its deadline; a 2 ms one does not:
    /// dbf(t + 2 ms) > t at t = 200 µs); the per-CPU stall applies to its CPU only.
    #[test]
    fn a_stall_is_blocking_under_fixed_priority_and_jitter_under_edf() {
        let options = Options::default();
        assert!(stall_verdicts(&system(""), &options).is_none());
        let v = stall_verdicts(&system("platform: {stall: 1500us}"), &options).unwrap();
        let wcrt = |v: &StallVerdicts, n: &str| {
            let t = v.tasks.iter().find(|t| t.name == n).unwrap();
            (t.wcrt_ns, t.stalled_wcrt_ns, t.schedulable)
        };
        assert_eq!(wcrt(&v, "a"), (Some(300_000), Some(1_800_000), true));
        assert_eq!(wcrt(&v, "b"), (Some(400_000), Some(1_900_000), true));
        assert!(wcrt(&v, "c").2 && v.schedulable);
        let v = stall_verdicts(&system("platform: {stall: 2ms}"), &options).unwrap();
        assert!(!wcrt(&v, "c").2 && !v.schedulable);
        let text = "platform: {stall: 0s, cpus: [{cpu: 1, stall: 2ms}]}";
        let v = stall_verdicts(&system(text), &options).unwrap();
        assert_eq!(wcrt(&v, "a"), (Some(300_000), Some(300_000), true));
        assert!(!wcrt(&v, "c").2);
        assert_eq!(v.stall_ns, 2_000_000);
    }
}
