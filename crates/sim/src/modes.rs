//! Multi-mode systems in the simulation (M2-Xen, Li et al., RTAS 2018, Sec. IV-V).
//!
//! Every task of every mode is in the [`Spec`]; a task runs while its mode lists it,
//! with that mode's parameters. Each modal partition has its mode agent as a task that
//! is released only when the mode manager asks it to switch, at the top of its
//! partition (the first of its VCPUs for a partition scheduled as a server): its job
//! executes the agent's budget and its completion is the acknowledgement, at which the
//! partition's task set changes (tasks that leave have their jobs aborted, tasks that
//! join are released at once, changed ones take their new parameters from their next
//! release). The mode manager is the [`bulkhead_modes::Switch`] that `run` drives too;
//! a boosted agent's VCPU runs at once, above every other, without using its budget
//! (M2-Xen V-B's VCPU boost).

use crate::build::{build, exec, BuildError, BuildOptions};
use crate::spec::*;
use bulkhead_analysis::modes::mode_table;
use bulkhead_analysis::system::Options as AnalysisOptions;
use bulkhead_model::modes::AGENT_TASK;
use bulkhead_model::{Partition, PartitionKind, Service, System};

pub use crate::spec::{MemberSpec, ModesSpec, TaskParams};

/// A mode switch requested at system time `at` (`--mode-switch AT:MODE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeSwitch {
    pub at: Nanos,
    pub mode: String,
}

/// Why a `--mode-switch` text is not `AT:MODE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeSwitchError {
    #[error("`{0}`: expected AT:MODE, e.g. 50ms:highway")]
    Syntax(String),
    #[error(transparent)]
    At(#[from] bulkhead_model::units::UnitError),
}

/// The message, for the layers that report in text (the conformance suite's headers).
impl From<ModeSwitchError> for String {
    fn from(e: ModeSwitchError) -> String {
        e.to_string()
    }
}

impl ModeSwitch {
    /// Parses `AT:MODE`, e.g. `50ms:highway`.
    pub fn parse(text: &str) -> Result<ModeSwitch, ModeSwitchError> {
        let (at, mode) = text
            .split_once(':')
            .filter(|(_, m)| !m.is_empty())
            .ok_or_else(|| ModeSwitchError::Syntax(text.into()))?;
        Ok(ModeSwitch {
            at: bulkhead_model::units::parse_duration(at, None)?,
            mode: mode.to_string(),
        })
    }
}

/// Builds the simulation of a system with modes, in its initial mode.
pub(crate) fn from_modal_system(
    system: &System,
    options: &BuildOptions,
) -> Result<Spec, BuildError> {
    let modes = system.modes.as_ref().expect("a system with modes");
    let table = mode_table(system, &AnalysisOptions::default());
    let initial = table.mode(&modes.initial).expect("the initial mode");
    let universe = universe(system);
    let placements = crate::placements(system);
    let interface = |p: &Partition, _| {
        let k = table
            .members
            .iter()
            .position(|m| m.name == p.name)
            .expect("an rt partition");
        let i = table.modes[initial].locals[k]
            .interface
            .expect("a server's interface");
        (i.budget, i.period)
    };
    let mut spec = build(&universe, options, &interface, &|p, t| placements.get(p, t))?;
    let params: Vec<Vec<Option<TaskParams>>> = modes
        .table
        .iter()
        .map(|m| {
            let view = system.in_mode(&m.name).expect("a mode of the table");
            spec.tasks
                .iter()
                .map(|t| params_in(&view, t, options))
                .collect()
        })
        .collect();
    let members = table
        .members
        .iter()
        .map(|m| member(&spec, system, &m.name))
        .collect();
    let allowed = modes
        .allowed()
        .into_iter()
        .map(|(a, b, p)| {
            (
                table.mode(&a).expect("mode"),
                table.mode(&b).expect("mode"),
                p,
            )
        })
        .collect();
    let modes = ModesSpec {
        table,
        initial,
        allowed,
        min_interval: modes.agent.period,
        members,
        params,
    };
    apply_initial(&mut spec, &modes);
    spec.modes = Some(modes);
    spec.validate().map_err(BuildError::Spec)?;
    Ok(spec)
}

/// The system with every declared task in its partition and each modal partition's
/// agent first.
fn universe(system: &System) -> System {
    let modes = system.modes.as_ref().expect("a system with modes");
    let initial = system.in_mode(&modes.initial).expect("the initial mode");
    let mut universe = system.clone();
    universe.modes = None;
    for (p, view) in universe.partitions.iter_mut().zip(&initial.partitions) {
        if modes.is_modal(&p.name) {
            p.tasks.insert(0, view.tasks[0].clone());
        }
    }
    universe
}

/// The parameters of spec task `t` in the system `view` of one mode.
fn params_in(view: &System, t: &TaskSpec, options: &BuildOptions) -> Option<TaskParams> {
    let p = view.partition(&t.partition)?;
    let task = p.tasks.iter().find(|x| *x.name == *t.name)?;
    if task.service == Some(Service::ModeAgent) {
        return None;
    }
    Some(TaskParams {
        budget: task.budget,
        period: task.period,
        deadline: task.deadline,
        exec: exec(view, p.cpus.as_ref(), task, options.exec),
    })
}

fn member(spec: &Spec, system: &System, name: &str) -> MemberSpec {
    let mine: Vec<usize> = (0..spec.tasks.len())
        .filter(|&i| &*spec.tasks[i].partition == name)
        .collect();
    let agent = mine
        .iter()
        .copied()
        .find(|&i| &*spec.tasks[i].name == AGENT_TASK);
    let server = system
        .partition(name)
        .is_some_and(|p| p.kind == PartitionKind::Rt && p.interface.is_some());
    let mut vcpus: Vec<usize> = if server {
        mine.iter().map(|&i| spec.tasks[i].server).collect()
    } else {
        Vec::new()
    };
    vcpus.sort_unstable();
    vcpus.dedup();
    MemberSpec {
        agent,
        vcpus,
        tasks: mine.into_iter().filter(|&i| Some(i) != agent).collect(),
    }
}

/// Gives every task its initial-mode parameters; agents are released only on request.
fn apply_initial(spec: &mut Spec, modes: &ModesSpec) {
    for (i, params) in modes.params[modes.initial].iter().enumerate() {
        if let Some(p) = params {
            set_params(spec, i, p);
        }
    }
    for m in &modes.members {
        if let Some(a) = m.agent {
            spec.tasks[a].release = Release::At(Vec::new());
        }
    }
}

/// Sets task `i`'s parameters in `spec` (and its own server's, if it has one).
pub(crate) fn set_params(spec: &mut Spec, i: usize, p: &TaskParams) {
    let t = &mut spec.tasks[i];
    t.deadline = p.deadline;
    t.exec = p.exec;
    match &mut t.release {
        Release::Periodic { period, .. } => *period = p.period,
        Release::Sporadic { min_gap, .. } => *min_gap = p.period,
        Release::At(_) => {}
    }
    let s = t.server;
    if spec.inner.get(s).copied().flatten().is_none() {
        spec.servers[s].budget = p.budget;
        spec.servers[s].period = p.period;
    }
}
