//! Pipelines in simulation: each edge of a solved pipeline (Boomerang III-B, III-E)
//! becomes a channel between its stage tasks, the solved buffer of the edge
//! ([`bulkhead_model::Pipeline::buffers`], the lowering `run` builds too): four-slot `latest`, or a
//! `fifo` of the solved depth and overflow rule from which the consumer takes its m
//! messages per job (over all its fifo inputs); the chain statistics of a pipeline's
//! sources and sinks add up to its statistics.
//!
//! A message's end-to-end delay runs from the release of the source stage's job that
//! took it in (when it sampled its input) to the completion of the sink stage's job
//! that wrote it out.

use crate::channels::ChainStats;
use crate::error::BuildError;
use crate::spec::{ChannelSpec, Spec};
use bulkhead_model::Nanos;
use bulkhead_model::System;
use serde::Serialize;

/// `--stats-json`'s `pipelines` entries.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PipelineStats {
    pub name: String,
    /// Messages the source stages took in (jobs whose data entered the pipeline).
    pub messages_in: u64,
    /// Messages that reached a sink stage.
    pub messages_out: u64,
    /// Messages older than a delivered one that never reached the sink.
    pub lost: u64,
    pub min_e2e_ns: Option<Nanos>,
    pub max_e2e_ns: Option<Nanos>,
    pub mean_e2e_ns: Option<f64>,
}

/// Adds a channel per pipeline edge between the stage tasks of `spec`; the stages of a
/// solved system carry their period and budget (`bulkhead_analysis::pipes::apply`).
pub(crate) fn link_pipelines(system: &System, spec: &mut Spec) -> Result<(), BuildError> {
    for p in &system.pipelines {
        if p.buffers.len() != p.edges.len() {
            let stage = p.stages.first().map_or(String::new(), |s| s.name.clone());
            return Err(BuildError::Unsolved {
                pipeline: p.name.clone(),
                stage,
            });
        }
        for (&(from, to), buffer) in p.edges.iter().zip(&p.buffers) {
            let task = |i: usize| {
                let s = &p.stages[i];
                let found = spec
                    .tasks
                    .iter()
                    .position(|t| *t.partition == *s.partition && *t.name == *s.name);
                found.ok_or_else(|| BuildError::Unsolved {
                    pipeline: p.name.clone(),
                    stage: s.name.clone(),
                })
            };
            let (writer, reader) = (task(from)?, task(to)?);
            spec.channels.push(ChannelSpec {
                name: format!("{}/{}->{}", p.name, p.stages[from].name, p.stages[to].name)
                    .as_str()
                    .into(),
                kind: buffer.kind,
                depth: buffer.depth,
                overflow: buffer.overflow,
                per_read: messages_per_job(&p.stages[to]),
                pipeline: true,
            });
            let c = spec.channels.len() - 1;
            spec.tasks[writer].outputs.push(c);
            spec.tasks[reader].inputs.push(c);
        }
    }
    Ok(())
}

/// The messages a solved stage takes per job: its budget over its WCET (its m).
fn messages_per_job(s: &bulkhead_model::Stage) -> u32 {
    let m = s.budget.map_or(1, |b| (b / s.wcet).max(1));
    u32::try_from(m).unwrap_or(u32::MAX)
}

/// Per pipeline of `system`, the sum of the chains from its source stages to its sinks.
pub fn pipeline_stats(system: &System, chains: &[ChainStats]) -> Vec<PipelineStats> {
    system
        .pipelines
        .iter()
        .map(|p| {
            let name = |i: usize| format!("{}/{}", p.stages[i].partition, p.stages[i].name);
            let sources: Vec<String> = p.sources().into_iter().map(name).collect();
            let sinks: Vec<String> = p.sinks().into_iter().map(name).collect();
            let mine: Vec<&ChainStats> = chains
                .iter()
                .filter(|c| sources.contains(&c.source) && sinks.contains(&c.sink))
                .collect();
            let mut counted = Vec::new();
            let mut stats = PipelineStats {
                name: p.name.clone(),
                ..PipelineStats::default()
            };
            let mut sum = 0.0;
            for c in &mine {
                if !counted.contains(&&c.source) {
                    counted.push(&c.source);
                    stats.messages_in += c.produced;
                }
                stats.messages_out += c.delivered;
                stats.lost += c.lost;
                stats.min_e2e_ns = min_opt(stats.min_e2e_ns, c.min_delay_ns);
                stats.max_e2e_ns = stats.max_e2e_ns.max(c.max_delay_ns);
                sum += c.mean_delay_ns.unwrap_or(0.0) * c.delivered as f64;
            }
            stats.mean_e2e_ns = (stats.messages_out > 0).then(|| sum / stats.messages_out as f64);
            stats
        })
        .collect()
}

fn min_opt(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
