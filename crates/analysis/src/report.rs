//! The verdicts of the analysis of a system (per task, partition, CPU, window, mode and
//! mode switch) and what builds them, shared by the analysis of one mode
//! ([`crate::system`]), of partitions scheduled as servers ([`crate::servers`]) and of
//! every mode and switch ([`crate::modes`]), which build on it and not on each other.

use crate::bounds::{hyperbolic, liu_layland, Quick};
use crate::reservation::{Kernel, DEFAULT_CAP};
use crate::task::{Task, Time};
use crate::windows::WindowReport;
use bulkhead_model::{units::format_duration, Cpus, Partition, Resume, System};
use bulkhead_modes::Ppm;
use serde::Serialize;

/// The verdict on one task.
#[derive(Debug, Clone, Serialize)]
pub struct TaskVerdict {
    pub partition: String,
    pub name: String,
    /// The CPU the task runs on (a cpulist when it fits on none of its partition's CPUs).
    pub cpu: String,
    /// Where it runs, as a type: what `sim` simulates and `run` reserves.
    pub placement: Placement,
    /// Worst-case response time; `null` when unbounded or not established.
    pub wcrt_ns: Option<Time>,
    pub deadline_ns: Time,
    pub schedulable: bool,
    /// `deadline - wcrt` (negative = miss); `null` with `wcrt_ns`.
    pub slack_ns: Option<i64>,
    pub wcet_ns: Time,
    pub period_ns: Time,
    /// Priority position on its CPU, 1 = highest (fixed priority only).
    pub priority: Option<usize>,
    /// The test that decided: `rta`, `edf-qpa`, `placement`.
    pub test: &'static str,
    /// The binding constraint in words (equation and the job that attains it).
    pub binding: String,
    /// The largest WCET this task may have with its CPU still schedulable (others
    /// unchanged; sensitivity analysis); `null` where not computed or none suffices.
    pub wcet_limit_ns: Option<Time>,
}

/// Where a task runs, decided by the analysis that admits it: the placement `sim`
/// simulates and `run` gives the kernel (an exclusive cpuset of one CPU, or one over
/// several CPUs whose SCHED_DEADLINE tasks the kernel schedules by global EDF).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// On this CPU alone (partitioned scheduling: first-fit decreasing, or the
    /// partition's only CPU).
    Cpu(u32),
    /// Global scheduling over these CPUs: jobs migrate among them (global EDF of an
    /// `edf` partition on several CPUs, or the pool of a partition scheduled as a server).
    Global(Vec<u32>),
    /// On no CPU: it fits on none of its partition's, or the partition names none
    /// (`cpus: all` without `system.cpus`, analysed as one CPU).
    Unplaced,
}

/// The verdict on one partition.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionVerdict {
    pub name: String,
    pub kind: &'static str,
    pub scheduler: &'static str,
    pub cpus: String,
    pub schedulable: bool,
    pub utilization: f64,
    pub liu_layland: Quick,
    pub hyperbolic: Quick,
    /// The binding constraint (least slack or first failure).
    pub binding: String,
    /// The smallest periodic-resource interface that keeps each CPU's share schedulable.
    pub interfaces: Vec<Interface>,
}

/// A periodic resource interface Γ(Π, Θ) of one CPU's share of a partition (Shin & Lee).
#[derive(Debug, Clone, Serialize)]
pub struct Interface {
    pub cpu: String,
    /// m of the multiprocessor periodic resource ⟨Π, Θ, m⟩ (1 = Shin & Lee's PRM).
    pub concurrency: u64,
    pub period_ns: Time,
    pub budget_ns: Option<Time>,
    pub bandwidth: Option<f64>,
}

/// The verdict on one CPU.
#[derive(Debug, Clone, Serialize)]
pub struct CpuVerdict {
    pub cpu: String,
    pub schedulable: bool,
    /// Σ C/T of the real-time tasks placed on it.
    pub rt_utilization: f64,
    /// SCHED_DEADLINE bandwidth requested and the kernel cap (EDF partitions).
    pub deadline_bandwidth: Option<f64>,
    pub deadline_cap: f64,
    /// Share of the major frame SC windows may use on this CPU.
    pub window_load: Option<f64>,
    /// Σ B/P of the interfaces of the partitions scheduled as servers on this CPU.
    pub server_load: Option<f64>,
    pub binding: String,
    /// The best-effort partitions that share this CPU with a non-exclusive rt partition,
    /// and what they can still do to its tasks ([`crate::shared`]).
    pub best_effort: Option<String>,
    /// What the kernel and that be work can still take from the rt tasks, in numbers.
    pub sharing: Option<crate::shared::Sharing>,
}

/// Everything `bulkhead analyze` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schedulable: bool,
    pub tasks: Vec<TaskVerdict>,
    pub partitions: Vec<PartitionVerdict>,
    pub cpus: Vec<CpuVerdict>,
    pub windows: Option<WindowReport>,
    pub warnings: Vec<String>,
    /// Every mode and allowed switch of a system with modes (the rest of the report is
    /// its initial mode).
    pub modes: Option<ModesReport>,
}

impl Report {
    /// The report as one JSON document.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serializes")
    }
}

/// Knobs of [`crate::system::analyze_system_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// SCHED_DEADLINE bandwidth cap per CPU as (runtime, period), the kernel's
    /// `sched_rt_runtime_us / sched_rt_period_us`; default 950000/1000000.
    pub deadline_cap: (Time, Time),
    /// Compute each task's `wcet_limit_ns` (C max, sensitivity analysis); default true.
    /// Admission needs the verdicts alone.
    pub sensitivity: bool,
    /// The kernel's fair server, for CPUs rt partitions share with best-effort ones
    /// (`crate::shared`); default: the kernel's defaults.
    pub fair_server: crate::shared::FairServer,
}

impl Options {
    /// The cap and the fair server, as SCHED_DEADLINE admission counts them.
    pub fn kernel(&self) -> Kernel {
        Kernel {
            cap: self.deadline_cap,
            fair_server: (self.fair_server.runtime_ns, self.fair_server.period_ns),
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            deadline_cap: DEFAULT_CAP,
            sensitivity: true,
            fair_server: crate::shared::FairServer::default(),
        }
    }
}

#[derive(Default)]
pub(crate) struct CpuAcc {
    pub(crate) utilization: f64,
    /// Σ B/P of the server interfaces on this CPU, in ppm.
    pub(crate) servers: Option<u64>,
    pub(crate) dl_bw: Option<(u64, u64)>,
    pub(crate) window_load: Option<f64>,
    pub(crate) best_effort: Option<String>,
    pub(crate) sharing: Option<crate::shared::Sharing>,
    pub(crate) tightest: Option<(i64, String)>,
    pub(crate) failures: Vec<String>,
    /// What proved an EDF CPU schedulable (no per-task slack there).
    pub(crate) note: Option<String>,
}

impl CpuAcc {
    pub(crate) fn verdict(self, cpu: String, kernel: Kernel) -> CpuVerdict {
        let mut failures = self.failures;
        let cap_ppm = kernel.cap_ppm();
        let cap = kernel.cap;
        if let Some(load) = self.servers.filter(|&l| l > cap_ppm) {
            failures.push(format!(
                "the interfaces of the partitions scheduled as servers take {:.2}% of CPU {cpu}, above the cap {:.2}%",
                load as f64 / 1e4,
                cap_ppm as f64 / 1e4
            ));
        }
        let cap = cap.0 as f64 / cap.1 as f64;
        if let Some(load) = self.window_load {
            if self.utilization > 0.0 && load > 0.0 {
                failures.push(format!(
                    "CPU {cpu} is used both by rt tasks and by SC windows"
                ));
            }
        }
        let binding = match (failures.first(), &self.tightest) {
            (Some(f), _) => f.clone(),
            (None, Some((slack, what))) => format!("least slack {} ({what})", fmt_signed(*slack)),
            (None, None) if self.note.is_some() => self.note.clone().unwrap_or_default(),
            (None, None) if self.window_load.is_some() => "window schedule only".to_string(),
            (None, None) => "no real-time tasks".to_string(),
        };
        CpuVerdict {
            schedulable: failures.is_empty(),
            rt_utilization: self.utilization,
            deadline_bandwidth: self.dl_bw.map(|(bw, _)| bw as f64 / (1u64 << 20) as f64),
            deadline_cap: cap,
            window_load: self.window_load,
            server_load: self.servers.map(|l| l as f64 / 1e6),
            binding,
            cpu,
            best_effort: self.best_effort,
            sharing: self.sharing,
        }
    }
}

/// What SCHED_DEADLINE tasks may take of a CPU under `kernel`, in words: the cap less the
/// kernel's fair server ([`Kernel::task_bandwidth`]).
pub(crate) fn tasks_cap(kernel: Kernel) -> String {
    let cap = kernel.cap;
    let tasks = kernel.task_bandwidth() as f64 / (1u64 << 20) as f64;
    let whole = cap.0 as f64 / cap.1 as f64;
    match cap.0 >= cap.1 {
        true => format!("the kernel cap {whole:.2}"),
        false => format!("{tasks:.2} (the kernel cap {whole:.2} less its fair server's share)"),
    }
}

pub(crate) fn cpu_names(system: &System, p: &Partition) -> Vec<String> {
    match cpu_numbers(system, p) {
        Some(cpus) => cpus.iter().map(|c| c.to_string()).collect(),
        None => vec!["all".to_string()],
    }
}

/// The CPUs of partition `p` by number (its own, or the system's for `cpus: all`);
/// `None` when it names none (`cpus: all` without `system.cpus`).
pub(crate) fn cpu_numbers(system: &System, p: &Partition) -> Option<Vec<u32>> {
    match (&p.cpus, &system.cpus) {
        (Some(Cpus::Set(set)), _) | (Some(Cpus::All) | None, Some(set)) => {
            Some(set.iter().collect())
        }
        (Some(Cpus::All) | None, None) => None,
    }
}

pub(crate) fn to_task(t: &bulkhead_model::Task) -> Task {
    Task {
        wcet: t.budget,
        period: t.period,
        deadline: t.deadline,
        jitter: t.release_jitter,
        blocking: t.blocking,
    }
}

/// Priority rank of each task of `p` (0 = highest): the one order of
/// [`bulkhead_model::priority::ranks`], which `sim` and `run` use too.
pub fn priority_ranks(p: &Partition) -> Vec<usize> {
    bulkhead_model::priority::ranks(&p.tasks)
}

pub(crate) fn index_of(p: &Partition, name: &str) -> usize {
    p.tasks
        .iter()
        .position(|t| t.name == name)
        .expect("task of this partition")
}

pub(crate) fn partition_verdict(
    p: &Partition,
    tasks: &[Task],
    cpus: &[String],
    mine: &[TaskVerdict],
    interfaces: Vec<Interface>,
    edf: bool,
) -> PartitionVerdict {
    let rm = !edf && p.tasks.iter().all(|t| t.priority.is_none()) && cpus.len() == 1;
    let quick = |q: Quick| if rm { q } else { Quick::NotApplicable };
    let failed = mine.iter().find(|t| !t.schedulable);
    let tightest = mine
        .iter()
        .filter(|t| t.slack_ns.is_some())
        .min_by_key(|t| t.slack_ns);
    let binding = match (failed, tightest) {
        (Some(t), _) => format!("task `{}` on CPU {}: {}", t.name, t.cpu, t.binding),
        (None, Some(t)) => format!(
            "task `{}` on CPU {} has the least slack, {}",
            t.name,
            t.cpu,
            fmt_signed(t.slack_ns.unwrap_or(0))
        ),
        (None, None) => mine
            .first()
            .map_or("no tasks".to_string(), |t| t.binding.clone()),
    };
    PartitionVerdict {
        name: p.name.clone(),
        kind: "rt",
        scheduler: if edf { "edf" } else { "fixed-priority" },
        cpus: cpus.join(","),
        schedulable: failed.is_none(),
        utilization: crate::task::utilization(tasks),
        liu_layland: quick(liu_layland(tasks)),
        hyperbolic: quick(hyperbolic(tasks)),
        binding,
        interfaces,
    }
}

/// JuMP2start (Sec. 2.2): at resume every task is re-released at the new time reference,
/// i.e. a synchronous release, which the critical-instant analysis covers as long as each
/// task has at most one pending job at suspension. A continuable task whose WCRT exceeds
/// its period may carry several jobs across a resume.
pub(crate) fn resume_warnings(p: &Partition, mine: &[TaskVerdict], warnings: &mut Vec<String>) {
    for v in mine {
        let model = &p.tasks[index_of(p, &v.name)];
        if model.resume == Resume::Continuable && v.wcrt_ns.is_some_and(|w| w > model.period) {
            warnings.push(format!(
                "task `{}` of `{}` is continuable and its WCRT exceeds its period: a stop-start may carry more than one pending job into the resume, which this analysis does not cover",
                v.name, p.name
            ));
        }
    }
}

pub(crate) fn fmt(ns: Time) -> String {
    format_duration(ns)
}

pub(crate) fn fmt_signed(ns: i64) -> String {
    if ns < 0 {
        format!("-{}", fmt(ns.unsigned_abs()))
    } else {
        fmt(ns as Time)
    }
}

/// What `bulkhead analyze` reports about the modes of a system.
#[derive(Debug, Clone, Serialize)]
pub struct ModesReport {
    pub initial: String,
    pub agent_budget_ns: Time,
    pub agent_period_ns: Time,
    /// Whether a boost reserve is held (some allowed switch boosts).
    pub boost_reserved: bool,
    pub pools: Vec<PoolReport>,
    pub modes: Vec<ModeReport>,
    pub transitions: Vec<TransitionReport>,
}

/// A pool of CPUs shared by partitions scheduled as servers.
#[derive(Debug, Clone, Serialize)]
pub struct PoolReport {
    pub cpus: String,
    pub capacity_ppm: Ppm,
    /// The boost reserve (M2-Xen V-B's hypothetical VCPU): the agent budgets of the
    /// pool's modal partitions per agent period.
    pub reserve_ppm: Ppm,
}

/// The verdict on one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ModeReport {
    pub name: String,
    pub schedulable: bool,
    /// Per rt partition: its interface and demand in this mode.
    pub partitions: Vec<LocalReport>,
    /// Per pool: the bandwidth its interfaces and reserve take.
    pub loads_ppm: Vec<Ppm>,
    pub binding: String,
    /// The full analysis of the system in this mode.
    pub report: Report,
}

/// One partition in one mode.
#[derive(Debug, Clone, Serialize)]
pub struct LocalReport {
    pub partition: String,
    pub tasks: Vec<String>,
    pub demand_ppm: Ppm,
    /// The interface (partitions scheduled as servers): budget and period per CPU.
    pub budget_ns: Option<Time>,
    pub period_ns: Option<Time>,
    pub bandwidth_ppm: Option<Ppm>,
    /// Which of budget and period analysis derived.
    pub derived: Vec<&'static str>,
}

/// The verdict on one allowed switch.
#[derive(Debug, Clone, Serialize)]
pub struct TransitionReport {
    pub from: String,
    pub to: String,
    pub policy: &'static str,
    pub safe: bool,
    /// The steps of a dry run (acknowledgements in request order).
    pub steps: Vec<StepReport>,
    /// Per pool: the highest load during the switch.
    pub peak_ppm: Vec<Ppm>,
    pub refusal: Option<Refusal>,
}

/// One step of a switch.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    /// `interface_change`, `agent_request`, `agent_ack` or `mode_done`.
    pub event: &'static str,
    pub partition: Option<String>,
    pub boost: bool,
    /// The load of the partition's pool after an interface change.
    pub load_ppm: Option<Ppm>,
}

/// Why a switch is refused: the instant (the step about to be taken, 0-based) and the
/// partition that would be overloaded.
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    pub step: usize,
    pub partition: Option<String>,
    pub message: String,
}
