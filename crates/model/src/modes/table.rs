//! The mode table's types: what the `modes:` section says once loaded ([`super`] reads,
//! validates and writes it), apart from the system that holds it, so that the system's
//! types name them without importing the section's reader.

use crate::stop_start::settings::Trigger;
use crate::units::Nanos;
use serde::Deserialize;

/// Name of the mode agent task that [`crate::System::in_mode`] adds to each modal partition.
pub const AGENT_TASK: &str = "mode-agent";

/// M2-Xen Sec. IV-A: "The WCET of a local mode switch is 100 µs in our current implementation."
pub const DEFAULT_AGENT_BUDGET: Nanos = 100_000;

/// Default minimum time between two mode requests (the agent's period).
pub const DEFAULT_AGENT_PERIOD: Nanos = 100_000_000;

/// The resource interface of a partition scheduled as a server: on each of its CPUs it
/// receives `budget` every `period` (M2-Xen Sec. II-B, III: ω = (N, B, P) with N the
/// number of CPUs; Shin & Lee's periodic resource model Γ(P, B) on one CPU, the
/// multiprocessor periodic resource ⟨P, N·B, N⟩ on several). What is omitted is derived
/// by analysis: the period as half the shortest task period, the budget as the least
/// one on which the tasks are schedulable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ServerInterface {
    pub period: Option<Nanos>,
    pub budget: Option<Nanos>,
}

/// The `modes:` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Modes {
    /// The mode the system starts in.
    pub initial: String,
    /// The cost of each modal partition's mode agent.
    pub agent: Agent,
    /// The global mode table, in declaration order.
    pub table: Vec<Mode>,
    /// The switches allowed; `None`: every switch between two different modes, under
    /// [`SwitchPolicy::Boost`].
    pub transitions: Option<Vec<Transition>>,
    /// The partitions whose programs may request a mode or a suspend from inside
    /// (docs/modes.md, "Requests from inside"); empty: none may.
    pub requesters: Vec<Requester>,
    /// Switches triggered by a decoded CAN signal (docs/modes.md, "Switches from a
    /// signal"), in declaration order.
    pub switch_when: Vec<SwitchWhen>,
}

/// A switch to mode `to` when the bus's gateway sees `when` met (counted by the reader
/// like a stop-start trigger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchWhen {
    pub to: String,
    pub when: Trigger,
}

/// A partition allowed to request switches to `modes` and, when `suspend`, a suspend
/// of the system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    pub partition: String,
    pub modes: Vec<String>,
    pub suspend: bool,
}

impl Modes {
    /// Whether a program of `partition` may request the mode `name`.
    pub fn may_request_mode(&self, partition: &str, name: &str) -> bool {
        let mut of = self.requesters.iter().filter(|r| r.partition == partition);
        of.any(|r| r.modes.iter().any(|m| m == name))
    }

    /// Whether a program of `partition` may request a suspend.
    pub fn may_request_suspend(&self, partition: &str) -> bool {
        let mut of = self.requesters.iter().filter(|r| r.partition == partition);
        of.any(|r| r.suspend)
    }
}

/// The mode agent of a partition as a task (M2-Xen Sec. IV-A: "we can model the DMM as a
/// periodic task whose period is the minimum inter-arrival time of mode switch requests").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agent {
    /// Worst-case execution time of one local switch.
    pub budget: Nanos,
    /// Minimum time between two mode requests; a request sooner is refused.
    pub period: Nanos,
}

/// One global mode: the local mode of each partition it lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode {
    pub name: String,
    pub partitions: Vec<LocalMode>,
}

/// What a partition runs in one mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalMode {
    pub partition: String,
    /// The tasks that run, by name, with any changed parameters.
    pub tasks: Vec<ModeTask>,
    /// The interface in this mode (server partitions only): what it gives replaces the
    /// partition's `interface` value by value.
    pub interface: Option<ServerInterface>,
}

/// A declared task that runs in a mode, with the parameters the mode changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeTask {
    pub name: String,
    pub budget: Option<Nanos>,
    pub period: Option<Nanos>,
    /// Default: the mode's period when the declared deadline equals the declared
    /// period (an implicit deadline), else the declared deadline.
    pub deadline: Option<Nanos>,
}

/// An allowed switch and the policy that schedules it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub from: String,
    pub to: String,
    pub policy: SwitchPolicy,
}

/// How the mode manager orders the partitions' switches (M2-Xen Sec. V-A, V-B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SwitchPolicy {
    /// One partition at a time, largest bandwidth decrease first.
    Sequential,
    /// Every decrease at once, then every increase at once.
    Batch,
    /// Every decrease at once; each increase as soon as the capacity it needs is free.
    Greedy,
    /// As sequential, each agent boosted until it acknowledges.
    #[default]
    Boost,
}

impl SwitchPolicy {
    pub fn name(self) -> &'static str {
        match self {
            SwitchPolicy::Sequential => "sequential",
            SwitchPolicy::Batch => "batch",
            SwitchPolicy::Greedy => "greedy",
            SwitchPolicy::Boost => "boost",
        }
    }
}

impl Modes {
    /// The mode named `name`.
    pub fn mode(&self, name: &str) -> Option<&Mode> {
        self.table.iter().find(|m| m.name == name)
    }

    /// The policy of the switch `from` -> `to`, or `None` when it is not allowed.
    pub fn policy(&self, from: &str, to: &str) -> Option<SwitchPolicy> {
        match &self.transitions {
            None => (from != to && self.mode(from).is_some() && self.mode(to).is_some())
                .then_some(SwitchPolicy::Boost),
            Some(list) => list
                .iter()
                .find(|t| t.from == from && t.to == to)
                .map(|t| t.policy),
        }
    }

    /// Every allowed switch (from, to, policy), in declaration order.
    pub fn allowed(&self) -> Vec<(String, String, SwitchPolicy)> {
        match &self.transitions {
            Some(list) => list
                .iter()
                .map(|t| (t.from.clone(), t.to.clone(), t.policy))
                .collect(),
            None => {
                let names = self.table.iter().map(|m| &m.name);
                names
                    .clone()
                    .flat_map(|a| names.clone().filter(move |b| *b != a).map(move |b| (a, b)))
                    .map(|(a, b)| (a.clone(), b.clone(), SwitchPolicy::Boost))
                    .collect()
            }
        }
    }

    /// Whether some mode lists `partition` (it then has a mode agent).
    pub fn is_modal(&self, partition: &str) -> bool {
        self.table
            .iter()
            .any(|m| m.partitions.iter().any(|l| l.partition == partition))
    }
}
