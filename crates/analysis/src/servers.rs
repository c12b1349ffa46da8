//! Partitions scheduled as servers: a partition's tasks analysed on its resource
//! interface ω = (N, B, P), B every P on each of its N CPUs (M2-Xen, Li et al., RTAS
//! 2018, Sec. II-B and III), and the least budget that keeps them schedulable.
//!
//! - One CPU: Shin & Lee's periodic resource Γ(P, B) ("Periodic Resource Model for
//!   Compositional Real-Time Guarantees", RTSS 2003), with fixed priority (response-time
//!   analysis over sbf_Γ) or EDF (`dbf(t) <= sbf_Γ(t)`).
//! - Several CPUs, EDF: global EDF on the multiprocessor periodic resource ⟨P, N·B, N⟩
//!   (Shin, Easwaran & Lee, ECRTS 2008, Theorem 1).
//! - Several CPUs, fixed priority: the tasks are placed by first-fit decreasing
//!   utilization (as for a partition that owns its CPUs), each CPU's share analysed on
//!   Γ(P, B).

use crate::assign::{first_fit_decreasing, CpuPolicy};
use crate::edf::demand_test;
use crate::prm::{gedf_schedulable, minimal_budget, minimal_mpr_budget, Bound, Mpr, Policy};
use crate::report::{
    partition_verdict, resume_warnings, CpuAcc, Interface, Placement, Report, TaskVerdict,
};
use crate::rta::levels;
use crate::supply::PeriodicSupply;
use crate::task::{Task, Time};
use bulkhead_model::units::format_duration as fmt;
use bulkhead_model::{Partition, Scheduler};
use std::collections::BTreeMap;

/// Period of a derived interface when the partition has no task.
const EMPTY_PERIOD: Time = 1_000_000;

/// A partition's tasks as a server analyses them.
#[derive(Debug, Clone)]
pub struct ServerSet {
    pub tasks: Vec<Task>,
    /// The tasks' names, for the verdicts.
    pub names: Vec<String>,
    /// Priority rank of each task (0 = highest), fixed priority only.
    pub rank: Vec<usize>,
    pub edf: bool,
    /// N, the number of CPUs of the interface.
    pub cpus: usize,
}

/// The verdict on a server's tasks under one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerVerdict {
    pub schedulable: bool,
    /// Per task: the worst-case response time if established (EDF: the deadline).
    pub wcrt: Vec<Option<Time>>,
    /// Per task: the CPU index it is placed on (`None`: global, or placed nowhere).
    pub cpu: Vec<Option<usize>>,
    /// The test that decided: `rta-prm`, `edf-prm`, `gedf-mpr`, `placement`.
    pub test: &'static str,
    /// The binding constraint, or the first failure, in words.
    pub binding: String,
}

/// An interface with what the description left open filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub period: Time,
    /// `None` when no budget up to the period makes the tasks schedulable.
    pub budget: Option<Time>,
    pub derived_period: bool,
    pub derived_budget: bool,
}

impl ServerSet {
    /// The tasks of `p` on `cpus` CPUs.
    pub fn of(p: &Partition, cpus: usize) -> ServerSet {
        ServerSet {
            tasks: p.tasks.iter().map(crate::report::to_task).collect(),
            names: p.tasks.iter().map(|t| t.name.clone()).collect(),
            rank: crate::report::priority_ranks(p),
            edf: p.scheduler == Scheduler::Edf,
            cpus: cpus.max(1),
        }
    }

    /// Half the shortest task period (Shin & Lee's guidance that Π well below the
    /// periods keeps the blackout 2(Π - Θ) small), the rule analysis uses elsewhere.
    pub fn default_period(&self) -> Time {
        match self.tasks.iter().map(|t| t.period).min() {
            Some(p) => (p / 2).max(1),
            None => EMPTY_PERIOD,
        }
    }

    /// The CPU of each task: all on CPU 0 with one CPU, first-fit decreasing with
    /// fixed priority on several, none (global) with EDF on several.
    fn placement(&self) -> Vec<Option<usize>> {
        match (self.cpus, self.edf) {
            (1, _) => vec![Some(0); self.tasks.len()],
            (_, true) => vec![None; self.tasks.len()],
            (n, false) => {
                first_fit_decreasing(&self.tasks, &self.rank, n, CpuPolicy::FixedPriority)
            }
        }
    }

    /// The tasks on CPU `cpu` (all with one CPU) and their fixed-priority order.
    fn share(&self, placed: &[Option<usize>], cpu: usize) -> (Vec<usize>, Policy) {
        let members: Vec<usize> = (0..self.tasks.len())
            .filter(|&i| placed[i] == Some(cpu))
            .collect();
        let policy = if self.edf {
            Policy::Edf
        } else {
            let mut order: Vec<usize> = (0..members.len()).collect();
            order.sort_by_key(|&k| self.rank[members[k]]);
            Policy::FixedPriority(order)
        };
        (members, policy)
    }

    /// The least per-CPU budget at `period` on which the tasks are schedulable.
    pub fn minimal_budget(&self, period: Time) -> Option<Time> {
        if self.edf && self.cpus > 1 {
            let theta = minimal_mpr_budget(&self.tasks, period, self.cpus as Time)?;
            return Some(theta.div_ceil(self.cpus as Time));
        }
        let placed = self.placement();
        if placed.iter().any(Option::is_none) {
            return None;
        }
        (0..self.cpus)
            .map(|c| {
                let (members, policy) = self.share(&placed, c);
                let local: Vec<Task> = members.iter().map(|&i| self.tasks[i]).collect();
                if local.is_empty() {
                    return Some(0);
                }
                minimal_budget(&local, &policy, period, Bound::Exact)
            })
            .try_fold(0, |acc, b| b.map(|b| acc.max(b)))
    }

    /// The verdict on the tasks with `budget` every `period` on each CPU.
    pub fn test(&self, period: Time, budget: Time) -> ServerVerdict {
        if self.edf && self.cpus > 1 {
            return self.global_edf(period, budget);
        }
        let placed = self.placement();
        let mut verdict = ServerVerdict {
            schedulable: true,
            wcrt: vec![None; self.tasks.len()],
            cpu: placed.clone(),
            test: if self.edf { "edf-prm" } else { "rta-prm" },
            binding: String::new(),
        };
        if let Some(i) = placed.iter().position(Option::is_none) {
            verdict.schedulable = false;
            verdict.test = "placement";
            verdict.binding = format!(
                "task `{}` fits on none of the {} CPUs (first-fit decreasing utilization)",
                self.names[i], self.cpus
            );
            return verdict;
        }
        let supply = PeriodicSupply::prm(period, budget.min(period));
        for c in 0..self.cpus {
            let (members, policy) = self.share(&placed, c);
            let local: Vec<Task> = members.iter().map(|&i| self.tasks[i]).collect();
            match policy {
                Policy::Edf => self.edf_share(&local, &members, &supply, &mut verdict),
                Policy::FixedPriority(order) => {
                    self.fp_share(&local, &members, &order, &supply, &mut verdict)
                }
            }
        }
        if verdict.binding.is_empty() {
            verdict.binding = format!(
                "every task meets its deadline on the periodic resource Γ({}, {}) of each CPU (Shin & Lee 2003)",
                fmt(period),
                fmt(budget)
            );
        }
        verdict
    }

    fn fp_share(
        &self,
        local: &[Task],
        members: &[usize],
        order: &[usize],
        supply: &PeriodicSupply,
        verdict: &mut ServerVerdict,
    ) {
        for (pos, (r, &k)) in levels(local, order, supply).zip(order).enumerate() {
            let i = members[k];
            verdict.wcrt[i] = r.wcrt;
            let ok = r.wcrt.is_some_and(|w| w <= local[k].deadline);
            if !ok && verdict.schedulable {
                verdict.schedulable = false;
                verdict.binding = match r.wcrt {
                    Some(w) => format!(
                        "task `{}`: RTA over Γ({}, {}) gives R = {} > D = {}",
                        self.names[i],
                        fmt(supply.period),
                        fmt(supply.budget),
                        fmt(w),
                        fmt(local[k].deadline)
                    ),
                    None => format!(
                        "task `{}`: its level-{} load exceeds the rate of Γ({}, {})",
                        self.names[i],
                        pos + 1,
                        fmt(supply.period),
                        fmt(supply.budget)
                    ),
                };
            }
        }
    }

    fn edf_share(
        &self,
        local: &[Task],
        members: &[usize],
        supply: &PeriodicSupply,
        verdict: &mut ServerVerdict,
    ) {
        let demand = demand_test(local, supply);
        for (k, &i) in members.iter().enumerate() {
            verdict.wcrt[i] = demand.schedulable.then_some(local[k].deadline);
        }
        if !demand.schedulable && verdict.schedulable {
            verdict.schedulable = false;
            verdict.binding = match demand.violation {
                Some(v) if !v.utilization => format!(
                    "EDF over Γ({}, {}): dbf({}) = {} > sbf = {}",
                    fmt(supply.period),
                    fmt(supply.budget),
                    fmt(v.interval),
                    fmt(v.demand),
                    fmt(v.supply)
                ),
                _ => format!(
                    "EDF over Γ({}, {}): the utilization reaches the resource's rate",
                    fmt(supply.period),
                    fmt(supply.budget)
                ),
            };
        }
    }

    fn global_edf(&self, period: Time, budget: Time) -> ServerVerdict {
        let m = self.cpus as Time;
        let mpr = Mpr {
            period,
            budget: budget.min(period) * m,
            cpus: m,
        };
        let test = gedf_schedulable(&self.tasks, &mpr);
        let ok = test.is_some_and(|v| v.schedulable);
        let binding = match test.and_then(|v| v.violation) {
            _ if ok => format!(
                "global EDF on the multiprocessor periodic resource ⟨{}, {}, {m}⟩ (Shin, Easwaran & Lee 2008, Thm 1)",
                fmt(period),
                fmt(mpr.budget)
            ),
            Some(v) => format!(
                "global EDF on ⟨{}, {}, {m}⟩: for task `{}`, DEM({}) = {} >= {} supplied",
                fmt(period),
                fmt(mpr.budget),
                self.names[v.task],
                fmt(v.interval),
                fmt(v.demand),
                fmt(v.supply)
            ),
            None => format!(
                "global EDF on ⟨{}, {}, {m}⟩: the MPR demand test is inconclusive (utilization or evaluation limit)",
                fmt(period),
                fmt(mpr.budget)
            ),
        };
        ServerVerdict {
            schedulable: ok,
            wcrt: self
                .tasks
                .iter()
                .map(|t| ok.then_some(t.deadline))
                .collect(),
            cpu: vec![None; self.tasks.len()],
            test: "gedf-mpr",
            binding,
        }
    }
}

/// The interface of `p` (a partition scheduled as a server) on `cpus` CPUs, with the
/// period and budget the description leaves open derived.
pub fn resolve(p: &Partition, cpus: usize) -> Resolved {
    let set = ServerSet::of(p, cpus);
    let given = p.interface.unwrap_or_default();
    let period = given.period.unwrap_or_else(|| set.default_period());
    // A derived budget is rounded up to a whole microsecond (the unit of the kernel's
    // bandwidth files); a larger budget keeps the tasks schedulable.
    let budget = match given.budget {
        Some(b) => Some(b),
        None => set
            .minimal_budget(period)
            .map(|b| b.next_multiple_of(1_000).min(period)),
    };
    Resolved {
        period,
        budget,
        derived_period: given.period.is_none(),
        derived_budget: given.budget.is_none(),
    }
}

/// Analyses partition `p`, scheduled as a server on `cpus`: its tasks on its interface
/// (derived where the description leaves it open), and the interface's bandwidth on
/// each CPU it shares with other servers.
pub(crate) fn analyze(
    p: &Partition,
    cpus: (&[String], Option<&[u32]>),
    report: &mut Report,
    per_cpu: &mut BTreeMap<String, CpuAcc>,
) {
    let (cpus, numbers) = cpus;
    let set = ServerSet::of(p, cpus.len());
    let resolved = resolve(p, cpus.len());
    let verdict = match resolved.budget {
        Some(budget) => set.test(resolved.period, budget),
        None => ServerVerdict {
            schedulable: false,
            wcrt: vec![None; set.tasks.len()],
            cpu: vec![None; set.tasks.len()],
            test: set.test(resolved.period, resolved.period).test,
            binding: format!(
                "no budget up to the period {} makes the tasks schedulable",
                fmt(resolved.period)
            ),
        },
    };
    let first = report.tasks.len();
    for (i, t) in set.tasks.iter().enumerate() {
        report
            .tasks
            .push(task_verdict(p, &set, &verdict, i, t, cpus));
        let placement = match (numbers, verdict.cpu[i]) {
            (Some(n), Some(c)) => Placement::Cpu(n[c]),
            (Some(n), None) => Placement::Global(n.to_vec()),
            (None, _) => Placement::Unplaced,
        };
        report.tasks.last_mut().expect("just pushed").placement = placement;
    }
    let budget_ppm = resolved
        .budget
        .map(|b| bulkhead_modes::bandwidth(b, resolved.period, 1));
    for (c, cpu) in cpus.iter().enumerate() {
        let acc = per_cpu.entry(cpu.clone()).or_default();
        let on_cpu = (0..set.tasks.len()).filter(|&i| verdict.cpu[i].is_none_or(|x| x == c));
        let share = if set.edf && set.cpus > 1 {
            set.cpus as f64
        } else {
            1.0
        };
        acc.utilization += on_cpu.map(|i| set.tasks[i].utilization()).sum::<f64>() / share;
        let load = acc.servers.unwrap_or(0) + budget_ppm.unwrap_or(crate::reservation::CPU);
        acc.servers = Some(load);
        acc.note = Some(format!(
            "server partition `{}`: {}",
            p.name, verdict.binding
        ));
        if !verdict.schedulable {
            acc.failures
                .push(format!("partition `{}`: {}", p.name, verdict.binding));
        }
    }
    let interface = Interface {
        cpu: cpus.join(","),
        concurrency: set.cpus as u64,
        period_ns: resolved.period,
        budget_ns: resolved.budget,
        bandwidth: resolved.budget.map(|b| b as f64 / resolved.period as f64),
    };
    let mine = &report.tasks[first..];
    resume_warnings(p, mine, &mut report.warnings);
    report.partitions.push(partition_verdict(
        p,
        &set.tasks,
        cpus,
        mine,
        vec![interface],
        set.edf,
    ));
}

fn task_verdict(
    p: &Partition,
    set: &ServerSet,
    verdict: &ServerVerdict,
    i: usize,
    t: &Task,
    cpus: &[String],
) -> TaskVerdict {
    let wcrt = verdict.wcrt[i];
    let schedulable = wcrt.is_some_and(|w| w <= t.deadline);
    let binding = match wcrt {
        Some(w) if schedulable && verdict.test == "rta-prm" => format!(
            "RTA over the interface's periodic resource (Shin & Lee 2003): R = {} <= D = {}",
            fmt(w),
            fmt(t.deadline)
        ),
        _ => verdict.binding.clone(),
    };
    let rank = (!set.edf).then(|| {
        let mut peers: Vec<usize> = (0..set.tasks.len())
            .filter(|&k| verdict.cpu[k] == verdict.cpu[i])
            .collect();
        peers.sort_by_key(|&k| set.rank[k]);
        peers.iter().position(|&k| k == i).unwrap_or(0) + 1
    });
    TaskVerdict {
        partition: p.name.clone(),
        name: p.tasks[i].name.clone(),
        cpu: verdict.cpu[i].map_or_else(|| cpus.join(","), |c| cpus[c].clone()),
        placement: Placement::Unplaced,
        wcrt_ns: wcrt,
        deadline_ns: t.deadline,
        schedulable,
        slack_ns: wcrt
            .filter(|_| verdict.test == "rta-prm")
            .map(|w| t.deadline as i64 - w as i64),
        wcet_ns: t.wcet,
        period_ns: t.period,
        priority: rank,
        test: verdict.test,
        binding,
        wcet_limit_ns: None,
    }
}
