//! The `sim` executor: the simulator library, driven as `bulkhead sim` drives it (the
//! pipelines solved and lowered, the stop protocol of the description, the pipelines'
//! totals), with the scenario's deterministic workload: every rt job executes the
//! scenario's share of its budget (`sim --exec uniform:P-P`).

use crate::observation::{Message, Observation, PipelineTotals};
use crate::scenario::Scenario;
use crate::{ExecuteError, Executor};
use bulkhead_model::{Nanos, PartitionKind, System};
use bulkhead_power::PolicyError;
use bulkhead_sim::stop::StopSpec;
use bulkhead_sim::{BuildError, BuildOptions, Exec, ExecModel, Options, SimError};
use bulkhead_trace::{Event, EventKind};

/// The simulator.
pub struct Sim;

/// Why a scenario could not be simulated.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error(transparent)]
    Sim(#[from] SimError),
}

impl Executor for Sim {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn cannot(&self, _: &Scenario) -> Option<String> {
        None
    }

    fn execute(&self, s: &Scenario) -> Result<Observation, ExecuteError> {
        let exec = ExecModel::Uniform {
            min_pct: s.exec_pct,
            max_pct: s.exec_pct,
        };
        Ok(simulate(s, &s.solved()?, exec)?)
    }
}

/// The simulation of `s`'s `system` with every rt job executing as `exec` says.
pub fn simulate(
    s: &Scenario,
    system: &System,
    exec: ExecModel,
) -> Result<Observation, SimulateError> {
    let power_policy = match &s.power_policy {
        Some(name) => Some(bulkhead_power::Policy::parse(name)?),
        None => None,
    };
    let options = BuildOptions {
        exec,
        behaviours: s.header.behaviours.clone(),
        power_policy,
        ..BuildOptions::default()
    };
    let mut spec = bulkhead_sim::from_system(system, &options)?;
    for t in &mut spec.tasks {
        let name = format!("{}/{}", t.partition, t.name);
        let own = s.exec_of.iter().find(|(task, _)| *task == name);
        if let (Some(&(_, pct)), Some(budget)) = (own, budget(system, &t.partition, &t.name)) {
            t.exec = Exec::Fixed(budget * u64::from(pct) / 100);
        }
    }
    let options = Options {
        seed: s.header.seed,
        mode_switches: s.mode_switches.clone(),
        suspensions: s.suspensions.clone(),
        stop: StopSpec::of(system),
        ..Options::until(horizon(s) + tail(system))
    };
    let mut events: Vec<Event> = Vec::new();
    let report = bulkhead_sim::simulate(&spec, options, &mut events)?;
    let mut o = Observation::from_events(&events, s.header.until);
    o.messages.extend(channel_reads(system, &events, &o));
    o.messages
        .sort_by(|a, b| (&a.sink, a.at).cmp(&(&b.sink, b.at)));
    o.pipelines = bulkhead_sim::pipes::pipeline_stats(system, &report.chains)
        .into_iter()
        .map(|p| PipelineTotals {
            name: p.name,
            messages_in: p.messages_in,
            messages_out: p.messages_out,
            lost: p.lost,
            max_e2e_ns: p.max_e2e_ns,
        })
        .collect();
    o.stops = report
        .stops
        .iter()
        .filter(|e| e.event != "first_fresh_frame")
        .map(|e| match &e.partition {
            Some(p) => format!("{} {p}", e.event),
            None => e.event.to_string(),
        })
        .collect();
    Ok(o)
}

/// The messages the readers of the description's channels (`channels:`, not the
/// pipelines' edges) read, each named by the release of the writer's job that wrote
/// it (a writer writes as its job completes).
fn channel_reads(system: &System, events: &[Event], o: &Observation) -> Vec<Message> {
    let declared = |c: &str| system.channels.iter().any(|d| d.name == c);
    let mut written: Vec<(&str, u64, Nanos)> = Vec::new();
    for e in events {
        if let EventKind::ChannelWrite {
            channel,
            partition,
            task,
            msg,
            ..
        } = &e.kind
        {
            let writer = format!("{partition}/{task}");
            let job = o
                .jobs
                .iter()
                .find(|j| j.completed == Some(e.t_ns) && j.task_name() == writer);
            if let (true, Some(job)) = (declared(channel), job) {
                written.push((channel, *msg, job.release));
            }
        }
    }
    let mut out = Vec::new();
    for e in events {
        if let EventKind::ChannelRead {
            channel,
            partition,
            task,
            msg,
            ..
        } = &e.kind
        {
            let origin = written
                .iter()
                .find(|&&(c, m, _)| c == &**channel && m == *msg);
            if let Some(&(_, _, origin)) = origin {
                let sink = format!("{partition}/{task}");
                out.push(Message {
                    sink,
                    at: e.t_ns,
                    source: 0,
                    origin,
                });
            }
        }
    }
    out
}

/// The budget of task `name` of partition `partition`.
fn budget(system: &System, partition: &str, name: &str) -> Option<Nanos> {
    let p = system.partitions.iter().find(|p| p.name == partition)?;
    Some(p.tasks.iter().find(|t| t.name == name)?.budget)
}

/// The compared time, or the last stimulus when it comes later (a real run received it
/// late, [`Scenario::retimed`]).
fn horizon(s: &Scenario) -> Nanos {
    let switches = s.mode_switches.iter().map(|m| m.at);
    let stops = s.suspensions.iter().map(|x| x.at);
    switches.chain(stops).fold(s.header.until, Nanos::max)
}

/// How long past `until` an execution goes on, so that every job released before
/// `until` can complete: the longest deadline of an rt task (none without rt tasks,
/// where the window schedule stops at `until` after what it plans for that instant).
pub fn tail(system: &System) -> Nanos {
    system
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Rt)
        .flat_map(|p| &p.tasks)
        .map(|t| t.deadline.max(t.period))
        .max()
        .unwrap_or(0)
}
