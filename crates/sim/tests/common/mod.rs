//! Helpers shared by the simulator's tests: building small specs and reading the
//! schedule back from trace events.
#![allow(dead_code)]

use bulkhead_model::{ChannelKind, Resume};
use bulkhead_sim::*;
use bulkhead_trace::{Event, EventKind};
use std::collections::BTreeMap;

pub const MS: u64 = 1_000_000;

/// One CPU (0), one domain with `policy`.
pub fn one_cpu(policy: Policy) -> Spec {
    Spec {
        domains: vec![Domain {
            name: "p".into(),
            cpus: vec![0],
            policy,
        }],
        ..Spec::default()
    }
}

/// Adds a task with its own server; returns its index.
pub fn add_task(
    spec: &mut Spec,
    name: &str,
    kind: ServerKind,
    c: u64,
    t: u64,
    priority: u32,
) -> usize {
    spec.servers.push(Server {
        domain: 0,
        kind,
        budget: c,
        period: t,
        priority,
    });
    spec.tasks.push(TaskSpec {
        partition: "p".into(),
        name: name.into(),
        server: spec.servers.len() - 1,
        priority: 1,
        deadline: t,
        release: Release::Periodic {
            period: t,
            offset: 0,
            jitter: 0,
        },
        exec: Exec::Fixed(c),
        resume: Resume::Continuable,
        inputs: vec![],
        outputs: vec![],
    });
    spec.tasks.len() - 1
}

pub fn add_channel(
    spec: &mut Spec,
    name: &str,
    kind: ChannelKind,
    depth: u32,
    writer: usize,
    reader: usize,
) {
    spec.channels.push(ChannelSpec {
        name: name.into(),
        kind,
        depth,
        overflow: bulkhead_model::Overflow::DropNewest,
        per_read: 1,
        pipeline: false,
    });
    let c = spec.channels.len() - 1;
    spec.tasks[writer].outputs.push(c);
    spec.tasks[reader].inputs.push(c);
}

pub fn run(spec: &Spec, options: Options) -> (Report, Vec<Event>) {
    let mut events = Vec::new();
    let report = simulate(spec, options, &mut events).expect("valid spec");
    (report, events)
}

/// Execution segments `(start, end, task)` per CPU, adjacent pieces of one task merged.
pub fn segments(events: &[Event]) -> BTreeMap<u32, Vec<(u64, u64, String)>> {
    let mut open: BTreeMap<u32, (u64, String)> = BTreeMap::new();
    let mut out: BTreeMap<u32, Vec<(u64, u64, String)>> = BTreeMap::new();
    for e in events {
        match &e.kind {
            EventKind::JobStart { cpu, task, .. } => {
                assert!(
                    open.insert(*cpu, (e.t_ns, task.to_string())).is_none(),
                    "two jobs on CPU {cpu} at {}",
                    e.t_ns
                );
            }
            EventKind::JobPreempt { cpu, task, .. } | EventKind::JobComplete { cpu, task, .. } => {
                if let Some((start, name)) = open.remove(cpu) {
                    assert_eq!(&name, &**task);
                    let list = out.entry(*cpu).or_default();
                    match list.last_mut() {
                        Some(last) if last.1 == start && last.2 == name => last.1 = e.t_ns,
                        _ if start < e.t_ns => list.push((start, e.t_ns, name)),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The times of events of `task` matching `pick`.
pub fn times(events: &[Event], task: &str, pick: fn(&EventKind) -> bool) -> Vec<u64> {
    events
        .iter()
        .filter(|e| pick(&e.kind) && task_of(&e.kind) == Some(task))
        .map(|e| e.t_ns)
        .collect()
}

pub fn task_of(kind: &EventKind) -> Option<&str> {
    match kind {
        EventKind::JobRelease { task, .. }
        | EventKind::JobStart { task, .. }
        | EventKind::JobPreempt { task, .. }
        | EventKind::JobComplete { task, .. }
        | EventKind::JobAbort { task, .. }
        | EventKind::DeadlineMiss { task, .. } => Some(task),
        _ => None,
    }
}

pub fn stats<'r>(report: &'r Report, task: &str) -> &'r TaskStats {
    report
        .tasks
        .iter()
        .find(|t| t.name == task)
        .expect("task in report")
}
