//! What `analyze` and `solve` promise about a scenario's system, which every execution
//! is held to: each rt task's WCRT and where it runs, each pipeline's loss and delay
//! bounds.

use bulkhead_analysis::system::{analyze_system, Placement, Report};
use bulkhead_model::{Nanos, Scheduler, System};

/// One rt task's promise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskBound {
    /// `partition/task`.
    pub task: String,
    /// The largest WCRT the analysis gives it in any mode; `None` when not established.
    pub wcrt: Option<Nanos>,
    /// The CPUs it runs on (one, or a set it migrates over).
    pub cpus: Vec<u32>,
    /// Its SCHED_DEADLINE reservation in a run (a task of an `edf` partition), as
    /// (runtime, period): its smallest budget and its longest period in any mode.
    pub reservation: Option<(Nanos, Nanos)>,
}

/// One pipeline's promise.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineBound {
    pub name: String,
    /// The fraction of its messages it may lose.
    pub loss: f64,
    /// The end-to-end delay no message exceeds: the bound with one platform stall
    /// where the description has a `platform:` section, else the exact bound (the
    /// larger of Boomerang III-E's two), else the paper's.
    pub delay: Nanos,
    /// The CPUs its stages run on.
    pub cpus: Vec<u32>,
    /// The longest stall the pipeline is not expected to survive without a loss: the
    /// platform stall it is sized for plus the gap between consecutive stages' phased
    /// releases (Boomerang III-E, Fig. 7: `T/n`), by which a later read would cross an
    /// earlier write.
    pub stall_tolerance: Nanos,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bounds {
    /// Whether `analyze` admits the system (every mode and switch of a modal one).
    pub schedulable: bool,
    pub tasks: Vec<TaskBound>,
    pub pipelines: Vec<PipelineBound>,
}

impl Bounds {
    /// The promises of `system` (its pipelines solved, as executions run it).
    pub fn of(system: &System) -> Bounds {
        let report = analyze_system(system);
        let reserved = |partition: &str| {
            system
                .partitions
                .iter()
                .any(|p| p.name == partition && p.scheduler == Scheduler::Edf)
        };
        let mut tasks: Vec<TaskBound> = Vec::new();
        for r in reports(&report) {
            for t in &r.tasks {
                let name = format!("{}/{}", t.partition, t.name);
                let cpus = match &t.placement {
                    Placement::Cpu(c) => vec![*c],
                    Placement::Global(set) => set.clone(),
                    Placement::Unplaced => Vec::new(),
                };
                let reservation = reserved(&t.partition).then_some((t.wcet_ns, t.period_ns));
                match tasks.iter_mut().find(|b| b.task == name) {
                    Some(b) => {
                        b.wcrt = max_known(b.wcrt, t.wcrt_ns);
                        b.reservation = b
                            .reservation
                            .zip(reservation)
                            .map(|((q, p), (q2, p2))| (q.min(q2), p.max(p2)));
                    }
                    None => tasks.push(TaskBound {
                        task: name,
                        wcrt: t.wcrt_ns,
                        cpus,
                        reservation,
                    }),
                }
            }
        }
        let options = bulkhead_analysis::system::Options::default();
        let pipelines = bulkhead_analysis::pipes::solve(system, &options)
            .into_iter()
            .map(|s| pipeline(s, &tasks))
            .collect();
        Bounds {
            schedulable: report.schedulable,
            tasks,
            pipelines,
        }
    }

    pub fn task(&self, name: &str) -> Option<&TaskBound> {
        self.tasks.iter().find(|t| t.task == name)
    }
}

fn pipeline(s: bulkhead_analysis::pipes::Solution, tasks: &[TaskBound]) -> PipelineBound {
    let mut cpus: Vec<u32> = s
        .stages
        .iter()
        .filter_map(|st| {
            tasks
                .iter()
                .find(|t| t.task == format!("{}/{}", st.partition, st.name))
        })
        .flat_map(|t| t.cpus.iter().copied())
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    let n = s.stages.len().max(1) as Nanos;
    let gap = s
        .stages
        .iter()
        .map(|st| st.period_ns / n)
        .min()
        .unwrap_or(0);
    PipelineBound {
        name: s.name,
        loss: s.loss_bound,
        delay: s
            .stall_delay_bound_ns
            .or(s.exact_delay_bound_ns)
            .unwrap_or(s.e2e_delay_bound_ns),
        cpus,
        stall_tolerance: s.stall_ns + gap,
    }
}

/// The main report and, for a modal system, the report of every mode.
fn reports(report: &Report) -> Vec<&Report> {
    let mut out = vec![report];
    if let Some(m) = &report.modes {
        out.extend(m.modes.iter().map(|mode| &mode.report));
    }
    out
}

/// The larger of two WCRTs; unknown if either is (an unknown one may be anything).
fn max_known(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    Some(a?.max(b?))
}
