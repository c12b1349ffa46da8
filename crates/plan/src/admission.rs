//! Admission: whether the analysis admits a system's rt partitions on this machine, the
//! one verdict `run` carries out (it starts nothing the analysis refused) and `check`
//! and `analyze` report. The analysis is `bulkhead-analysis` with the machine's
//! SCHED_DEADLINE bandwidth cap per CPU of each partition's root domain; a refusal names
//! the first failing task and the test that failed it, or the CPU, partition, mode or
//! mode switch and why (DriveOS 3.2: a task is admitted as a service only if its
//! reservation fits).

pub use bulkhead_analysis::shared::FairServer;
pub use bulkhead_analysis::system::Options;
use bulkhead_analysis::system::{analyze_system_with, Report};
use bulkhead_model::System;
use std::fmt;

/// Why the analysis refuses a system: its first failing verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A task fails its test on a CPU.
    Task {
        task: String,
        partition: String,
        test: &'static str,
        cpu: String,
        binding: String,
    },
    /// A CPU is overloaded.
    Cpu { cpu: String, binding: String },
    /// A partition scheduled as a server does not fit its interface.
    Partition { partition: String, binding: String },
    /// A mode is not schedulable.
    Mode { mode: String, binding: String },
    /// A mode switch is unsafe.
    Switch {
        from: String,
        to: String,
        policy: String,
        why: String,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("admission refused: ")?;
        match self {
            Refusal::Task {
                task,
                partition,
                test,
                cpu,
                binding,
            } => write!(
                f,
                "task `{task}` of partition `{partition}` fails the {test} test on CPU {cpu}: {binding}"
            ),
            Refusal::Cpu { cpu, binding } => write!(f, "CPU {cpu}: {binding}"),
            Refusal::Partition { partition, binding } => {
                write!(f, "partition `{partition}`: {binding}")
            }
            Refusal::Mode { mode, binding } => write!(f, "mode `{mode}`: {binding}"),
            Refusal::Switch {
                from,
                to,
                policy,
                why,
            } => write!(f, "switch {from} -> {to} ({policy}): {why}"),
        }
    }
}

impl std::error::Error for Refusal {}

/// Admits `system` as the machine's kernel counts bandwidth (`machine`: its
/// SCHED_DEADLINE cap per CPU of each partition's root domain, less its fair server):
/// its analysis report, or the first verdict that refuses it. With modes, every mode and
/// every allowed switch must pass: a switch then never fails for lack of bandwidth
/// (docs/modes.md).
pub fn admit(system: &System, machine: &Options) -> Result<Report, Refusal> {
    // Admission needs the verdicts, not C max.
    let options = Options {
        sensitivity: false,
        ..*machine
    };
    let report = analyze_system_with(system, &options);
    refusal(&report).map_or(Ok(report), Err)
}

/// The first verdict of `report` that refuses the system: modes and switches, then
/// tasks, CPUs and partitions.
pub fn refusal(report: &Report) -> Option<Refusal> {
    if let Some(r) = mode_refusal(report) {
        return Some(r);
    }
    if let Some(t) = report.tasks.iter().find(|t| !t.schedulable) {
        return Some(Refusal::Task {
            task: t.name.clone(),
            partition: t.partition.clone(),
            test: t.test,
            cpu: t.cpu.clone(),
            binding: t.binding.clone(),
        });
    }
    if let Some(c) = report.cpus.iter().find(|c| !c.schedulable) {
        return Some(Refusal::Cpu {
            cpu: c.cpu.clone(),
            binding: c.binding.clone(),
        });
    }
    let p = report.partitions.iter().find(|p| !p.schedulable)?;
    Some(Refusal::Partition {
        partition: p.name.clone(),
        binding: p.binding.clone(),
    })
}

fn mode_refusal(report: &Report) -> Option<Refusal> {
    let modes = report.modes.as_ref()?;
    if let Some(m) = modes.modes.iter().find(|m| !m.schedulable) {
        return Some(Refusal::Mode {
            mode: m.name.clone(),
            binding: m.binding.clone(),
        });
    }
    let t = modes.transitions.iter().find(|t| !t.safe)?;
    Some(Refusal::Switch {
        from: t.from.to_string(),
        to: t.to.to_string(),
        policy: t.policy.to_string(),
        why: t
            .refusal
            .as_ref()
            .map_or(String::new(), |r| r.message.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tests::load;

    /// A machine with the kernel's default cap and `fair_server`.
    fn machine(fair_server: FairServer) -> Options {
        Options {
            fair_server,
            ..Options::default()
        }
    }

    /// Two 60% tasks on one CPU: the second fails its response-time test, named with
    /// its partition, test and CPU; one of them alone is admitted.
    #[test]
    fn an_overloaded_cpu_is_refused_naming_the_task_and_its_test() {
        let two = load(
            "system: {cpus: 0}\npartitions:\n  - {name: p, kind: rt, cpus: 0, tasks: [{name: a, budget: 6ms, period: 10ms}, {name: b, budget: 6ms, period: 10ms}]}\n",
        );
        let refusal = admit(&two, &machine(FairServer::default())).unwrap_err();
        assert!(
            matches!(&refusal, Refusal::Task { task, partition, cpu, .. } if task == "b" && partition == "p" && cpu == "0"),
            "{refusal:?}"
        );
        let text = refusal.to_string();
        assert!(
            text.starts_with("admission refused: task `b` of partition `p` fails the "),
            "{text}"
        );
        let one = load(
            "system: {cpus: 0}\npartitions:\n  - {name: p, kind: rt, cpus: 0, tasks: [{name: a, budget: 6ms, period: 10ms}]}\n",
        );
        assert!(admit(&one, &machine(FairServer::default())).is_ok());
    }

    /// `run` admits against the machine's fair server (`FairServer::read` of debugfs),
    /// not the kernel's default: 88% of a CPU under SCHED_DEADLINE fits beside the
    /// default 50 ms every second, not beside 150 ms, as the kernel would refuse it.
    #[test]
    fn the_machines_fair_server_decides_admission() {
        let edf = load(
            "system: {cpus: 0}\npartitions:\n  - {name: p, kind: rt, cpus: 0, scheduler: edf, tasks: [{name: a, budget: 8800us, period: 10ms}]}\n",
        );
        assert!(admit(&edf, &machine(FairServer::default())).is_ok());
        let larger = FairServer::read([(150_000_000, 1_000_000_000)]);
        let refusal = admit(&edf, &machine(larger)).unwrap_err();
        assert!(
            refusal
                .to_string()
                .contains("0.80 (the kernel cap 0.95 less its fair server's share)"),
            "{refusal}"
        );
    }
}
