//! The adapter from a [`System`] to the tests of this crate, and the verdicts.

use crate::assign::{first_fit_decreasing, CpuPolicy};
use crate::edf::qpa;
use crate::prm::{gedf_schedulable, minimal_budget, minimal_mpr_budget, Bound, Mpr, Policy};
use crate::report::{
    cpu_names, cpu_numbers, fmt, index_of, partition_verdict, resume_warnings, tasks_cap, to_task,
    CpuAcc,
};
pub use crate::report::{
    priority_ranks, CpuVerdict, Interface, Options, PartitionVerdict, Placement, Report,
    TaskVerdict,
};
use crate::reservation::{admit, reservation_of, Kernel};
use crate::rta::{response_times, ResponseTime};
use crate::sensitivity::{fp_max_wcets, max_wcet};
use crate::supply::PeriodicSupply;
use crate::task::{Task, Time};
use crate::windows::analyze_windows;
use bulkhead_model::{Partition, PartitionKind, Scheduler, System};
use std::collections::BTreeMap;

/// Analyses every partition, CPU and window of `system`.
///
/// rt partitions: tasks become (C = budget, T = period, D = deadline, J, B); a partition
/// on several CPUs is partitioned by [`first_fit_decreasing`]; fixed priority uses
/// explicit priorities first, then deadline monotonic; each task's WCRT comes from
/// [`response_times`]; EDF partitions are checked by [`qpa`] and SCHED_DEADLINE admission
/// ([`admit`], 95% per CPU), and a schedulable EDF task's WCRT is bounded by its
/// deadline (CBS guarantee). Windowed partitions: [`analyze_windows`].
pub fn analyze_system(system: &System) -> Report {
    analyze_system_with(system, &Options::default())
}

/// The most tasks on one CPU of a partition for which C max is searched for exactly.
///
/// That search ([`max_wcet`]: bisection on the exact test) is the one part of the analysis
/// that grows faster than `n²`: a trial is an analysis of the CPU's tasks, and each of the
/// `n` tasks needs about `log2 D` trials; [`fp_max_wcets`] answers most trials from the
/// first analysis, but not all, and an EDF trial is a whole demand test. Beyond this many
/// tasks on one CPU, C max is given only where one demand test at the SCHED_DEADLINE cap
/// settles it, and otherwise left out, with a warning: 5,000 tasks on one CPU are then
/// analysed in seconds, where the search would take hours.
pub const SENSITIVITY_MAX_TASKS: usize = 100;

/// [`analyze_system`] with explicit [`Options`].
pub fn analyze_system_with(system: &System, options: &Options) -> Report {
    if system.modes.is_some() {
        let analyze_mode = |view: &System| analyze_system_with(view, options);
        return crate::modes::analyze(system, options, &analyze_mode);
    }
    let mut report = Report {
        schedulable: true,
        tasks: Vec::new(),
        partitions: Vec::new(),
        cpus: Vec::new(),
        windows: None,
        warnings: Vec::new(),
        modes: None,
    };
    let mut per_cpu: BTreeMap<String, CpuAcc> = BTreeMap::new();
    for p in system
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Rt)
    {
        analyze_partition(system, p, options, &mut report, &mut per_cpu);
    }
    if !system.windows.is_empty() {
        let w = analyze_windows(system);
        for (cpu, load) in &w.cpu_load {
            per_cpu.entry(cpu.clone()).or_default().window_load = Some(*load);
        }
        report.warnings.extend(w.warnings.iter().cloned());
        if w.slices
            .iter()
            .any(|s| s.verdict != crate::windows::Fit::Fits)
        {
            report.schedulable = false;
        }
        report.windows = Some(w);
    }
    for (cpu, acc) in per_cpu {
        let v = acc.verdict(cpu, options.kernel());
        report.schedulable &= v.schedulable;
        report.cpus.push(v);
    }
    report.schedulable &= report.tasks.iter().all(|t| t.schedulable);
    report.schedulable &= report.partitions.iter().all(|p| p.schedulable);
    report
}

/// Adds the verdicts of partition `p`'s tasks on one CPU to that CPU's account: their
/// utilization, the tightest slack, the failures.
fn accumulate(acc: &mut CpuAcc, p: &Partition, tasks: &[Task], verdicts: &[TaskVerdict]) {
    for v in verdicts {
        acc.utilization += tasks[index_of(p, &v.name)].utilization();
        if let Some(s) = v.slack_ns {
            if acc.tightest.as_ref().is_none_or(|(old, _)| s < *old) {
                acc.tightest = Some((s, format!("task `{}` of `{}`", v.name, p.name)));
            }
        }
        if !v.schedulable {
            acc.failures
                .push(format!("task `{}` of `{}`: {}", v.name, p.name, v.binding));
        }
    }
}

fn analyze_partition(
    system: &System,
    p: &Partition,
    options: &Options,
    report: &mut Report,
    per_cpu: &mut BTreeMap<String, CpuAcc>,
) {
    let cpus = cpu_names(system, p);
    if cpus == ["all"] {
        report.warnings.push(format!(
            "partition `{}` uses `cpus: all` but system.cpus is not set: analysed as one CPU",
            p.name
        ));
    }
    let numbers = cpu_numbers(system, p);
    if p.interface.is_some() {
        crate::servers::analyze(p, (&cpus, numbers.as_deref()), report, per_cpu);
        return;
    }
    let tasks: Vec<Task> = p.tasks.iter().map(to_task).collect();
    let rank = priority_ranks(p);
    let edf = p.scheduler == Scheduler::Edf;
    if edf && cpus.len() > 1 {
        let first = report.tasks.len();
        global_edf(p, &tasks, &cpus, options.kernel(), report, per_cpu);
        let placement = numbers.map_or(Placement::Unplaced, Placement::Global);
        for v in &mut report.tasks[first..] {
            v.placement = placement.clone();
        }
        return;
    }
    let policy = if edf {
        CpuPolicy::Edf
    } else {
        CpuPolicy::FixedPriority
    };
    let placed = if cpus.len() == 1 {
        vec![Some(0); tasks.len()]
    } else {
        first_fit_decreasing(&tasks, &rank, cpus.len(), policy)
    };
    let first_task = report.tasks.len();
    let mut interfaces = Vec::new();
    for (ci, cpu) in cpus.iter().enumerate() {
        let members: Vec<usize> = (0..tasks.len())
            .filter(|&i| placed[i] == Some(ci))
            .collect();
        if members.is_empty() {
            continue;
        }
        let acc = per_cpu.entry(cpu.clone()).or_default();
        let search = options.sensitivity && members.len() <= SENSITIVITY_MAX_TASKS;
        let shared = shared_tasks(system, p, cpu, options, acc, &tasks);
        let tasks = shared.as_deref().unwrap_or(&tasks);
        let verdicts = if edf {
            edf_cpu(p, tasks, &members, cpu, options, acc)
        } else {
            fp_cpu(p, tasks, &rank, &members, cpu, search)
        };
        let left_out = verdicts
            .iter()
            .filter(|v| v.wcet_limit_ns.is_none())
            .count();
        if options.sensitivity && !search && left_out > 0 {
            report.warnings.push(format!(
                "C max (sensitivity) is not computed for {left_out} of the {} tasks of partition `{}` on CPU {cpu}: \
                 its exact search is run on at most {SENSITIVITY_MAX_TASKS} tasks per CPU",
                members.len(),
                p.name
            ));
        }
        accumulate(acc, p, tasks, &verdicts);
        interfaces.push(interface(tasks, &rank, &members, edf, cpu));
        let placement = numbers
            .as_ref()
            .map_or(Placement::Unplaced, |n| Placement::Cpu(n[ci]));
        report
            .tasks
            .extend(verdicts.into_iter().map(|v| TaskVerdict {
                placement: placement.clone(),
                ..v
            }));
    }
    for (i, t) in p
        .tasks
        .iter()
        .enumerate()
        .filter(|(i, _)| placed[*i].is_none())
    {
        report.tasks.push(unplaced(p, t, &tasks[i], &cpus));
    }
    let mine = &report.tasks[first_task..];
    resume_warnings(p, mine, &mut report.warnings);
    report
        .partitions
        .push(partition_verdict(p, &tasks, &cpus, mine, interfaces, edf));
}

/// `tasks` of `p` with what the be partitions sharing `cpu` can still do to them
/// ([`crate::shared`]), noted on the CPU; `None` if no be partition shares it.
fn shared_tasks(
    system: &System,
    p: &Partition,
    cpu: &str,
    options: &Options,
    acc: &mut CpuAcc,
    tasks: &[Task],
) -> Option<Vec<Task>> {
    let kernel = (options.fair_server, options.deadline_cap);
    let sharing = crate::shared::sharing(system, p, cpu.parse().ok()?, kernel)?;
    acc.best_effort = Some(crate::shared::note(p, &sharing));
    let shared = crate::shared::with_sharing(&sharing, tasks);
    acc.sharing = Some(sharing);
    Some(shared)
}

/// The verdicts of the tasks `members` of `p` on `cpu` under fixed priority; C max by
/// [`fp_max_wcets`] if `search`.
fn fp_cpu(
    p: &Partition,
    tasks: &[Task],
    rank: &[usize],
    members: &[usize],
    cpu: &str,
    search: bool,
) -> Vec<TaskVerdict> {
    let mut order = members.to_vec();
    order.sort_by_key(|&i| rank[i]);
    let local: Vec<Task> = order.iter().map(|&i| tasks[i]).collect();
    let local_order: Vec<usize> = (0..local.len()).collect();
    let supply = PeriodicSupply::dedicated();
    let responses = response_times(&local, &local_order, &supply);
    let limits = match search {
        true => fp_max_wcets(&local, &responses, &supply),
        false => vec![None; local.len()],
    };
    let mut hep_utilization = 0.0;
    order
        .iter()
        .enumerate()
        .map(|(pos, &i)| {
            hep_utilization += local[pos].utilization();
            TaskVerdict {
                wcet_limit_ns: limits[pos],
                ..fp_verdict(p, i, &tasks[i], responses[pos], (pos, hep_utilization), cpu)
            }
        })
        .collect()
}

fn fp_verdict(
    p: &Partition,
    i: usize,
    t: &Task,
    r: ResponseTime,
    (pos, hep_utilization): (usize, f64),
    cpu: &str,
) -> TaskVerdict {
    let model = &p.tasks[i];
    let (schedulable, binding) = match r.wcrt {
        Some(w) if !r.exact => (
            w <= t.deadline,
            format!(
                "RTA bound: the level-{} busy period L = {} holds {} jobs (more than {} examined), so R <= L + J = {} {} D = {}",
                pos + 1,
                fmt(r.busy_period.unwrap_or(w)),
                r.jobs,
                crate::rta::MAX_JOBS,
                fmt(w),
                if w <= t.deadline { "<=" } else { ">" },
                fmt(t.deadline)
            ),
        ),
        Some(w) => (
            w <= t.deadline,
            format!(
                "RTA w(q) = B + (q+1)C + Σhp ⌈(w+J)/T⌉C: job q={} of {} in the level-{} busy period gives R = {} {} D = {}",
                r.worst_job,
                r.jobs,
                pos + 1,
                fmt(w),
                if w <= t.deadline { "<=" } else { ">" },
                fmt(t.deadline)
            ),
        ),
        None if hep_utilization >= 1.0 - 1e-9 => (
            false,
            format!(
                "RTA: the level-{} busy period is unbounded (utilization of priority >= {} is {:.1}%)",
                pos + 1,
                pos + 1,
                hep_utilization * 100.0
            ),
        ),
        None => (
            false,
            format!(
                "RTA: the level-{} busy period exceeds the range of the analysis (2^62 ns, about 146 years)",
                pos + 1
            ),
        ),
    };
    TaskVerdict {
        partition: p.name.clone(),
        name: model.name.clone(),
        cpu: cpu.to_string(),
        placement: Placement::Unplaced,
        wcrt_ns: r.wcrt,
        deadline_ns: t.deadline,
        schedulable,
        slack_ns: r.wcrt.map(|w| t.deadline as i64 - w as i64),
        wcet_ns: t.wcet,
        period_ns: t.period,
        priority: Some(pos + 1),
        test: "rta",
        binding,
        wcet_limit_ns: None,
    }
}

fn edf_cpu(
    p: &Partition,
    tasks: &[Task],
    members: &[usize],
    cpu: &str,
    options: &Options,
    acc: &mut CpuAcc,
) -> Vec<TaskVerdict> {
    let kernel = options.kernel();
    let local: Vec<Task> = members.iter().map(|&i| tasks[i]).collect();
    let reservations: Vec<_> = local.iter().map(reservation_of).collect();
    let adm = admit(&reservations, 1, kernel);
    let prev = acc.dl_bw.unwrap_or((0, adm.cap_bw));
    let total = prev.0 + adm.total_bw;
    acc.dl_bw = Some((total, adm.cap_bw));
    let over_cap = (total > adm.cap_bw).then(|| {
        format!(
            "SCHED_DEADLINE admission: Σ runtime/period = {:.4} exceeds {} (the kernel refuses the last reservation)",
            total as f64 / (1u64 << 20) as f64,
            tasks_cap(kernel)
        )
    });
    if let Some(msg) = &over_cap {
        acc.failures.push(msg.clone());
    }
    // Beside be work, its non-preemptible section is one more demand.
    let demand = match acc.sharing {
        Some(_) => qpa(&crate::shared::with_blocking_demand(&local)),
        None => qpa(&local),
    };
    acc.note = Some(format!(
        "EDF demand (QPA) of partition `{}` passes up to {}",
        p.name,
        fmt(demand.checked_up_to)
    ));
    let miss = demand.violation.map(|v| {
        if v.utilization {
            "EDF: utilization exceeds 100% (or reaches it with release jitter): demand is unbounded"
                .to_string()
        } else {
            format!(
                "EDF demand (QPA): dbf({}) = {} > {}",
                fmt(v.interval),
                fmt(v.demand),
                fmt(v.supply)
            )
        }
    });
    members
        .iter()
        .zip(&local)
        .enumerate()
        .map(|(k, (&i, t))| {
            let invalid = t.wcet > t.deadline || t.deadline > t.period;
            let ok = demand.schedulable && !invalid && over_cap.is_none();
            let binding = if invalid {
                "SCHED_DEADLINE requires runtime <= deadline <= period".to_string()
            } else if let Some(m) = over_cap.as_ref().or(miss.as_ref()) {
                m.clone()
            } else {
                format!(
                    "EDF demand (QPA): dbf(t) <= t for all t <= {}; CBS bounds R by D",
                    fmt(demand.checked_up_to)
                )
            };
            let wcrt = ok.then_some(t.deadline);
            TaskVerdict {
                partition: p.name.clone(),
                name: p.tasks[i].name.clone(),
                cpu: cpu.to_string(),
                placement: Placement::Unplaced,
                wcrt_ns: wcrt,
                deadline_ns: t.deadline,
                schedulable: ok,
                slack_ns: None,
                wcet_ns: t.wcet,
                period_ns: t.period,
                priority: None,
                test: "edf-qpa",
                binding,
                wcet_limit_ns: options
                    .sensitivity
                    .then(|| edf_wcet_limit(&local, k, &adm))
                    .flatten(),
            }
        })
        .collect()
}

/// SCHED_DEADLINE on a partition of m > 1 CPUs is global EDF over its exclusive cpuset
/// (one root domain): admission is `Σ bw <= m × cap`, schedulability the MPR demand test
/// on m dedicated CPUs (Θ = mΠ), and the interface the minimal MPR budget.
fn global_edf(
    p: &Partition,
    tasks: &[Task],
    cpus: &[String],
    kernel: Kernel,
    report: &mut Report,
    per_cpu: &mut BTreeMap<String, CpuAcc>,
) {
    let m = cpus.len() as Time;
    let cpulist = cpus.join(",");
    let reservations: Vec<_> = tasks.iter().map(reservation_of).collect();
    let adm = admit(&reservations, m, kernel);
    let period = tasks.iter().map(|t| t.period).min().unwrap_or(1);
    let dedicated = Mpr {
        period,
        budget: period * m,
        cpus: m,
    };
    let invalid = tasks.iter().any(|t| t.deadline > t.period);
    let test = if invalid {
        None
    } else {
        gedf_schedulable(tasks, &dedicated)
    };
    let failure = if adm.invalid.is_some() || invalid {
        Some("SCHED_DEADLINE requires runtime <= deadline <= period".to_string())
    } else if !adm.admitted {
        Some(format!(
            "SCHED_DEADLINE admission: Σ runtime/period = {:.4} exceeds {m} × {}",
            adm.total_bw as f64 / (1u64 << 20) as f64,
            tasks_cap(kernel)
        ))
    } else {
        match test {
            None => Some(format!("global EDF on CPUs {cpulist}: the MPR demand test is inconclusive (utilization or evaluation limit)")),
            Some(v) => v.violation.map(|x| {
                format!(
                    "global EDF on CPUs {cpulist} (MPR demand test, Shin-Easwaran-Lee ECRTS 2008 Thm 1): for `{}`, DEM({}) = {} >= {} supplied",
                    p.tasks[x.task].name,
                    fmt(x.interval),
                    fmt(x.demand),
                    fmt(x.supply)
                )
            }),
        }
    };
    for (i, t) in tasks.iter().enumerate() {
        let ok = failure.is_none();
        let wcrt = ok.then_some(t.deadline);
        report.tasks.push(TaskVerdict {
            partition: p.name.clone(),
            name: p.tasks[i].name.clone(),
            cpu: cpulist.clone(),
            placement: Placement::Unplaced,
            wcrt_ns: wcrt,
            deadline_ns: t.deadline,
            schedulable: ok,
            slack_ns: None,
            wcet_ns: t.wcet,
            period_ns: t.period,
            priority: None,
            test: "gedf-mpr",
            wcet_limit_ns: None,
            binding: failure.clone().unwrap_or_else(|| {
                format!("global EDF on CPUs {cpulist}: DEM(A_k + D_k) < m·t for every task and A_k (sufficient test); CBS bounds R by D")
            }),
        });
    }
    let share = crate::task::utilization(tasks) / m as f64;
    for cpu in cpus {
        let acc = per_cpu.entry(cpu.clone()).or_default();
        acc.utilization += share;
        acc.dl_bw = Some((adm.total_bw / m, adm.cap_bw / m));
        acc.note = Some(format!("global EDF of partition `{}` passes", p.name));
        if let Some(f) = &failure {
            acc.failures.push(format!("partition `{}`: {f}", p.name));
        }
    }
    let half = (period / 2).max(1);
    let budget = minimal_mpr_budget(tasks, half, m);
    let interfaces = vec![Interface {
        cpu: cpulist,
        concurrency: m,
        period_ns: half,
        budget_ns: budget,
        bandwidth: budget.map(|b| b as f64 / half as f64),
    }];
    let first = report.tasks.len() - tasks.len();
    let mine = &report.tasks[first..];
    resume_warnings(p, mine, &mut report.warnings);
    report
        .partitions
        .push(partition_verdict(p, tasks, cpus, mine, interfaces, true));
}

/// The largest runtime task `k` may have on its CPU: the EDF demand test (QPA) still
/// passes ([`max_wcet`]) and the kernel still admits the reservations under the cap.
///
/// The demand test passes for every runtime up to the one it passes with (more demand never
/// helps), so when it passes at the cap's runtime, that is the answer without a search; only
/// otherwise does [`max_wcet`] search, on at most [`SENSITIVITY_MAX_TASKS`] tasks.
fn edf_wcet_limit(local: &[Task], k: usize, adm: &crate::reservation::Admission) -> Option<Time> {
    let own = crate::reservation::to_ratio(local[k].period, local[k].wcet);
    let room = adm.cap_bw.checked_sub(adm.total_bw - own)?;
    // Largest C with (C << 20) / T <= room.
    let by_cap = (((room as u128 + 1) * local[k].period as u128 - 1)
        >> crate::reservation::BW_SHIFT) as Time;
    let cap = by_cap.min(local[k].deadline);
    if cap >= 1 && edf_passes_with(local, k, cap) {
        return Some(cap);
    }
    if local.len() > SENSITIVITY_MAX_TASKS {
        return None;
    }
    let by_demand = max_wcet(local, k, &Policy::Edf, &PeriodicSupply::dedicated())?;
    Some(by_demand.min(cap))
}

/// Whether `local` with task `k`'s runtime `c` passes the EDF demand test: at once when its
/// density `Σ C / min(D - J, T)` is below 1 (then `dbf(t) <= t` everywhere: each task's
/// demand is at most `C t / min(D - J, T)`), else by QPA.
fn edf_passes_with(local: &[Task], k: usize, c: Time) -> bool {
    let mut trial = local.to_vec();
    trial[k].wcet = c;
    let density = trial.iter().try_fold(0.0, |sum, t| {
        let window = t.deadline.checked_sub(t.jitter)?.min(t.period);
        (window > 0).then(|| sum + t.wcet as f64 / window as f64)
    });
    if density.is_some_and(|d| d < 1.0 - 1e-9) {
        return true;
    }
    crate::prm::schedulable_on(&trial, &Policy::Edf, &PeriodicSupply::dedicated())
}

fn unplaced(p: &Partition, model: &bulkhead_model::Task, t: &Task, cpus: &[String]) -> TaskVerdict {
    TaskVerdict {
        partition: p.name.clone(),
        name: model.name.clone(),
        cpu: cpus.join(","),
        placement: Placement::Unplaced,
        wcrt_ns: None,
        deadline_ns: t.deadline,
        schedulable: false,
        slack_ns: None,
        wcet_ns: t.wcet,
        period_ns: t.period,
        priority: None,
        test: "placement",
        wcet_limit_ns: None,
        binding: format!(
            "fits on none of CPUs {} (first-fit decreasing utilization with the exact test on each CPU)",
            cpus.join(",")
        ),
    }
}

/// The PRM interface at Π = half the shortest period (Shin & Lee 2003, minimal budget),
/// the per-CPU resource interface (N = 1, B, P) of M2-Xen Sec. II-B/III whose bandwidth
/// B/P a host must reserve.
fn interface(tasks: &[Task], rank: &[usize], members: &[usize], edf: bool, cpu: &str) -> Interface {
    let local: Vec<Task> = members.iter().map(|&i| tasks[i]).collect();
    let period = (local.iter().map(|t| t.period).min().unwrap_or(1) / 2).max(1);
    let policy = if edf {
        Policy::Edf
    } else {
        let mut order: Vec<usize> = (0..members.len()).collect();
        order.sort_by_key(|&k| rank[members[k]]);
        Policy::FixedPriority(order)
    };
    let budget = minimal_budget(&local, &policy, period, Bound::Exact);
    Interface {
        cpu: cpu.to_string(),
        concurrency: 1,
        period_ns: period,
        budget_ns: budget,
        bandwidth: budget.map(|b| b as f64 / period as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reservation::{to_ratio, BW_SHIFT};
    use proptest::prelude::*;

    /// C max of an EDF task as it was computed before the shortcut at the cap: the
    /// bisection on the demand test, then the admission cap and the deadline.
    fn searched(local: &[Task], k: usize, adm: &crate::reservation::Admission) -> Option<Time> {
        let by_demand = max_wcet(local, k, &Policy::Edf, &PeriodicSupply::dedicated())?;
        let own = to_ratio(local[k].period, local[k].wcet);
        let room = adm.cap_bw.checked_sub(adm.total_bw - own)?;
        let by_cap = (((room as u128 + 1) * local[k].period as u128 - 1) >> BW_SHIFT) as Time;
        Some(by_demand.min(by_cap).min(local[k].deadline))
    }

    fn edf_task() -> impl Strategy<Value = Task> {
        (1u64..=30, 1u64..=1000)
            .prop_flat_map(|(t, s)| (Just(t * s), 1..=t * s / 2 + 1))
            .prop_flat_map(|(t, c)| (Just(t), Just(c.min(t)), c.min(t)..=t))
            .prop_map(|(t, c, d)| Task::new(c, t, d))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// The EDF C max settled by one demand test at the cap equals the search's.
        #[test]
        fn edf_c_max_at_the_cap_is_the_searched_one(
            local in prop::collection::vec(edf_task(), 1..=8),
            cap in prop_oneof![Just((950_000, 1_000_000)), Just((1, 1)), Just((1, 2))],
        ) {
            let reservations: Vec<_> = local.iter().map(reservation_of).collect();
            let adm = admit(&reservations, 1, Kernel::with_cap(cap));
            for k in 0..local.len() {
                prop_assert_eq!(edf_wcet_limit(&local, k, &adm), searched(&local, k, &adm), "task {} of {:?}", k, local);
            }
        }
    }
}
