//! What the simulator executes: scheduling domains (an rt partition and its CPUs),
//! servers (reservations), tasks and channels. [`crate::from_system`] builds it from a
//! loaded `bulkhead_model::System`; tests and benchmarks may also build one directly,
//! for set-ups the description language has no words for yet (a server shared by
//! several tasks, explicit arrival times, I/O servers).

pub use bulkhead_model::Nanos;

use crate::error::SpecError;
use bulkhead_model::{ChannelKind, Overflow, Resume, SwitchPolicy};
use bulkhead_modes::Table;
use bulkhead_trace::Name;

/// An rt partition: its CPUs and its scheduling policy. With several CPUs the
/// policy is global (the m highest-priority eligible servers run), as Linux does
/// for SCHED_FIFO and SCHED_DEADLINE threads sharing an exclusive cpuset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub name: Name,
    pub cpus: Vec<u32>,
    pub policy: Policy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Fixed priority: lower `priority` number first (1 = highest), ties by index.
    FixedPriority,
    /// Earliest deadline first on the server's deadline (see [`ServerKind`]).
    Edf,
}

/// How a server (a reservation of `budget` every `period`) hands out CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// No reservation: jobs run to completion (plain periodic tasks).
    Unlimited,
    /// Sporadic server with a replenishment list: consumed budget returns one period
    /// after the server became active, i.e. ready with budget (Sprunt, Sha, Lehoczky
    /// 1989; POSIX SCHED_SPORADIC; the Main VCPUs of Quest, Danish, Li, West, RTAS 2011,
    /// and JuMP2start Sec. 2.2, Fig. 5). Budget that arrives while the server is active
    /// closes the activation and opens a new one, so replenishments never merge into
    /// more than was consumed (the budget-amplification defect of Stanovich, Baker,
    /// Wang, Gonzalez Harbour, RTAS 2010).
    Sporadic,
    /// Deferrable server: the budget is refilled to full at every period boundary and
    /// unused budget is kept until then (Strosnider, Lehoczky, Sha 1995; Xen RTDS,
    /// M2-Xen Sec. II-B). Under EDF its deadline is the end of the current period.
    Deferrable,
    /// Constant bandwidth server with hard reservation, as Linux SCHED_DEADLINE:
    /// a server throttled at zero budget is replenished at its deadline, which moves
    /// one period on (Abeni, Buttazzo, RTSS 1998; Linux `Documentation/scheduler/sched-deadline.rst`).
    Cbs,
    /// Quest I/O VCPU with a single replenishment: after running for `c` from its
    /// activation at `a`, it is eligible again with a full budget at `a + c*T/C`
    /// (Danish, Li, West, RTAS 2011, Sec. III-B; DriveOS 4.1: budget = U_io x T of
    /// the task it serves).
    Io,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    pub domain: usize,
    pub kind: ServerKind,
    /// Budget per period (ignored by [`ServerKind::Unlimited`]).
    pub budget: Nanos,
    pub period: Nanos,
    /// Fixed priority (1 = highest) under [`Policy::FixedPriority`].
    pub priority: u32,
}

impl Server {
    /// An I/O server for a task of period `period`: budget `utilization_permille/1000 * period`.
    pub fn io(domain: usize, utilization_permille: u32, period: Nanos, priority: u32) -> Server {
        let budget = (period as u128 * utilization_permille as u128 / 1000) as Nanos;
        Server {
            domain,
            kind: ServerKind::Io,
            budget: budget.max(1),
            period,
            priority,
        }
    }
}

/// When jobs of a task arrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// Every `period` from `offset`, each release delayed by a draw in `[0, jitter]`.
    Periodic {
        period: Nanos,
        offset: Nanos,
        jitter: Nanos,
    },
    /// Sporadic: the first at `offset`, then gaps of `min_gap` plus a draw in `[0, max_extra]`.
    Sporadic {
        min_gap: Nanos,
        offset: Nanos,
        max_extra: Nanos,
    },
    /// Exactly at these (sorted) times.
    At(Vec<Nanos>),
}

/// How long each job executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exec {
    Fixed(Nanos),
    /// Drawn uniformly in `[min, max]` from the seeded generator.
    Uniform {
        min: Nanos,
        max: Nanos,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    pub partition: Name,
    pub name: Name,
    /// Index into [`Spec::servers`]; the server's domain is the task's.
    pub server: usize,
    /// Rank among the tasks of its server (1 = first), for servers shared by several tasks.
    pub priority: u32,
    /// Relative deadline.
    pub deadline: Nanos,
    pub release: Release,
    pub exec: Exec,
    pub resume: Resume,
    /// Channels read at the first start of each job (index into [`Spec::channels`]).
    pub inputs: Vec<usize>,
    /// Channels written at the completion of each job.
    pub outputs: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSpec {
    pub name: Name,
    /// `fifo`: ring of `depth` messages, one read per job and input (a pipeline stage:
    /// `per_read` over all its fifo inputs); a write to a full ring follows `overflow`.
    /// `latest`: the reader gets the newest message (Simpson's four-slot); a message
    /// overwritten before any read is lost.
    pub kind: ChannelKind,
    pub depth: u32,
    /// What a write to a full fifo does: the writer's job waits for room (`block`), the
    /// new message is lost (`drop_newest`) or the oldest unread one (`drop_oldest`).
    pub overflow: Overflow,
    /// `fifo`: messages a reader takes per job (a pipeline stage's m, Boomerang III-E,
    /// over all of its pipeline inputs together); 1 otherwise.
    pub per_read: u32,
    /// An edge of a pipeline: a sink reading it reports each message it finishes
    /// (a `message` event with its end-to-end delay), as a pipeline's sink does under
    /// `bulkhead run`.
    pub pipeline: bool,
}

/// A complete simulation set-up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spec {
    pub domains: Vec<Domain>,
    pub servers: Vec<Server>,
    pub tasks: Vec<TaskSpec>,
    pub channels: Vec<ChannelSpec>,
    /// A DEmOS window schedule for the windowed partitions' processes.
    pub windows: Option<crate::windows::WindowsSpec>,
    /// Per server: the policy among its tasks when it serves several and it differs
    /// from its domain's (a partition scheduled as a server: EDF among the servers of
    /// its pool, its own scheduler inside); missing entries follow the domain.
    pub inner: Vec<Option<Policy>>,
    /// The modes, their table and the mode manager's set-up (a system with modes).
    pub modes: Option<ModesSpec>,
    /// Best-effort partitions in the background of non-exclusive rt partitions' tasks.
    pub background: Vec<crate::background::BackgroundSpec>,
}

impl Spec {
    /// Checks the references and parameters a hand-built spec could get wrong.
    pub fn validate(&self) -> Result<(), SpecError> {
        for (index, d) in self.domains.iter().enumerate() {
            if d.cpus.is_empty() {
                let name = d.name.to_string();
                return Err(SpecError::NoCpus { index, name });
            }
        }
        for (i, s) in self.servers.iter().enumerate() {
            if s.domain >= self.domains.len() {
                return Err(SpecError::NoDomain {
                    server: i,
                    domain: s.domain,
                });
            }
            if s.kind != ServerKind::Unlimited
                && (s.budget == 0 || s.period == 0 || s.budget > s.period)
            {
                return Err(SpecError::Budget(i));
            }
        }
        for t in &self.tasks {
            let who = || format!("{}/{}", t.partition, t.name);
            if t.server >= self.servers.len() {
                return Err(SpecError::NoServer {
                    task: who(),
                    server: t.server,
                });
            }
            if let Some(&c) = t
                .inputs
                .iter()
                .chain(&t.outputs)
                .find(|&&c| c >= self.channels.len())
            {
                return Err(SpecError::NoChannel {
                    task: who(),
                    channel: c,
                });
            }
            match &t.release {
                Release::Periodic { period: 0, .. } | Release::Sporadic { min_gap: 0, .. } => {
                    return Err(SpecError::Period(who()))
                }
                Release::At(times) if times.windows(2).any(|w| w[0] > w[1]) => {
                    return Err(SpecError::Arrivals(who()))
                }
                _ => {}
            }
            if let Exec::Uniform { min, max } = t.exec {
                if min > max {
                    return Err(SpecError::Exec(who()));
                }
            }
        }
        for c in &self.channels {
            if c.depth == 0 {
                return Err(SpecError::Depth(c.name.to_string()));
            }
        }
        Ok(())
    }
}

/// The modes of a simulated system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModesSpec {
    /// The global mode table with every interface resolved (as analysis resolves it).
    pub table: Table,
    pub initial: usize,
    /// The switches allowed: (from, to, policy), modes by index.
    pub allowed: Vec<(usize, usize, SwitchPolicy)>,
    /// The least time between two requests (the agent's period); a request sooner is refused.
    pub min_interval: Nanos,
    /// Per member of the table.
    pub members: Vec<MemberSpec>,
    /// `[mode][task]`: the parameters of each task of the spec in that mode, `None` when
    /// it does not run there (mode agents never run periodically).
    pub params: Vec<Vec<Option<TaskParams>>>,
}

/// What the simulation knows of one rt partition of the mode table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpec {
    /// The task of its mode agent, if modal.
    pub agent: Option<usize>,
    /// Its VCPU servers (a partition scheduled as a server); empty when each of its
    /// tasks has a server of its own.
    pub vcpus: Vec<usize>,
    /// Its other tasks.
    pub tasks: Vec<usize>,
}

/// A task's parameters in one mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskParams {
    pub budget: Nanos,
    pub period: Nanos,
    pub deadline: Nanos,
    pub exec: Exec,
}

impl ModesSpec {
    /// The policy of the switch `from` -> `to`, if allowed.
    pub fn policy(&self, from: usize, to: usize) -> Option<SwitchPolicy> {
        self.allowed
            .iter()
            .find(|&&(a, b, _)| a == from && b == to)
            .map(|&(_, _, p)| p)
    }

    /// The member whose agent is `task`.
    pub fn agent_of(&self, task: usize) -> Option<usize> {
        self.members.iter().position(|m| m.agent == Some(task))
    }
}
