//! One mode switch as a state machine: the order in which the mode manager changes
//! interfaces and asks agents to switch task sets, under each policy of M2-Xen.

use crate::table::{Change, Interface, Ppm, Table};
use bulkhead_model::{CpuSet, Nanos, SwitchPolicy};
use bulkhead_trace::{EventKind, Name};
use std::fmt;

/// What the driver does next, in the order given, each with what the trace records
/// of it ([`Switch::event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Set member `member`'s interface to `interface` (the manager does it at once);
    /// `load` is its pool's load afterwards.
    Interface {
        member: usize,
        interface: Interface,
        bandwidth: Ppm,
        load: Ppm,
    },
    /// Ask member `member`'s agent to switch to the new task set and wait for its
    /// acknowledgement ([`Switch::ack`]); with `boost` the agent runs at the reserved
    /// boost priority until then.
    Request { member: usize, boost: bool },
    /// The acknowledgement of member `member`'s agent was taken (the first step
    /// [`Switch::ack`] returns; nothing to do): its tasks now demand `demand`, its
    /// interface is `interface`.
    Ack {
        member: usize,
        demand: Ppm,
        interface: Option<Ppm>,
    },
    /// Every partition is in the new mode.
    Done,
}

/// Why a switch cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwitchError {
    /// Growing `member`'s interface now would put `load` on pool `pool`, above its
    /// `capacity`: the host would be overloaded (M2-Xen III).
    Overload {
        member: usize,
        pool: usize,
        load: Ppm,
        capacity: Ppm,
    },
    /// An acknowledgement from an agent that was not asked.
    UnexpectedAck { member: usize },
}

impl fmt::Display for SwitchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwitchError::Overload {
                member,
                pool,
                load,
                capacity,
            } => write!(
                f,
                "growing the interface of partition {member} would load pool {pool} with {load} ppm, above its capacity of {capacity} ppm"
            ),
            SwitchError::UnexpectedAck { member } => {
                write!(f, "acknowledgement from partition {member}, which was not asked to switch")
            }
        }
    }
}

impl std::error::Error for SwitchError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Pending,
    Waiting,
    Done,
}

/// A switch from one mode to another under one policy (M2-Xen, Li et al., RTAS 2018).
///
/// Each partition that changes follows the order of Sec. IV-B, Step 3, which prevents
/// *VM overload*: "if the bandwidth of the VM increases in the new mode, the HMM first
/// changes the VM's resource interface before sending the mode change command to the
/// VM. Otherwise, the HMM sends the mode change command to the DMM, waits for the
/// completion acknowledgement from the VM, and changes the resource interface". A
/// partition whose task set does not change gets its new interface at once; one whose
/// interface does not change only switches its tasks.
///
/// The policies (Sec. V-A, V-B) order the partitions; every one of them sorts the
/// switches "in increasing order of the difference between the new bandwidth and the
/// old bandwidth" (ties: declaration order):
///
/// - **Sequential**: one partition at a time, the next one only after the previous one
///   acknowledged.
/// - **Batch**: every partition whose bandwidth does not grow at once; after all of
///   them acknowledged, every one that grows at once.
/// - **Greedy**: like Batch, but a growing partition starts "as soon as it can be
///   performed without overloading the host": at the start and after every
///   acknowledgement, each pending growth that fits its pool now starts, in sorted order.
/// - **Boost**: Sequential, each agent boosted from its request to its acknowledgement.
///
/// The machine never grows an interface beyond its pool's capacity (*host overload*):
/// for Sequential, Batch and Boost that holds whenever both modes fit (decreases come
/// first, so every load on the way is at most the new mode's), and Greedy checks it
/// before each growth. Should it not hold, [`Switch::start`] or [`Switch::ack`] return
/// [`SwitchError::Overload`] instead of the step.
#[derive(Debug, Clone)]
pub struct Switch {
    policy: SwitchPolicy,
    /// Changes in the policy's order.
    changes: Vec<Change>,
    phase: Vec<Phase>,
    /// Per pool: the bandwidth of its interfaces now, reserve included.
    load: Vec<Ppm>,
    capacity: Vec<Ppm>,
    /// Per member: pool and interface bandwidth now.
    pools: Vec<Option<usize>>,
    interface: Vec<Option<Ppm>>,
    cpus: Vec<u32>,
    /// The second batch has started (Batch).
    second: bool,
    done: bool,
    names: Vec<Name>,
    pool_cpus: Vec<CpuSet>,
    modes: (Name, Name),
}

impl Switch {
    /// Prepares the switch of `table` from mode `from` to mode `to` (indices) under `policy`.
    pub fn new(table: &Table, from: usize, to: usize, policy: SwitchPolicy) -> Switch {
        let mut changes = table.changes(from, to);
        changes.sort_by_key(|c| (c.delta(), c.member));
        let interface = table.modes[from]
            .locals
            .iter()
            .enumerate()
            .map(|(k, l)| table.interface_bw(k, l))
            .collect();
        Switch {
            policy,
            phase: vec![Phase::Pending; changes.len()],
            changes,
            load: table.loads(from),
            capacity: table.pools.iter().map(|p| p.capacity).collect(),
            pools: table.members.iter().map(|m| m.pool).collect(),
            interface,
            cpus: table.members.iter().map(|m| m.cpus).collect(),
            second: false,
            done: false,
            names: table
                .members
                .iter()
                .map(|m| m.name.as_str().into())
                .collect(),
            pool_cpus: table.pools.iter().map(|p| p.cpus.clone()).collect(),
            modes: (
                table.modes[from].name.as_str().into(),
                table.modes[to].name.as_str().into(),
            ),
        }
    }

    pub fn policy(&self) -> SwitchPolicy {
        self.policy
    }

    /// The changes in the order the policy takes them.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// The steps to take first.
    pub fn start(&mut self) -> Result<Vec<Step>, SwitchError> {
        let mut steps = Vec::new();
        if matches!(self.policy, SwitchPolicy::Batch | SwitchPolicy::Greedy) {
            for i in 0..self.changes.len() {
                if !self.changes[i].grows() {
                    self.begin(i, &mut steps)?;
                }
            }
        }
        self.advance(&mut steps)?;
        Ok(steps)
    }

    /// Member `member`'s agent acknowledged: its new task set runs. Returns the next steps.
    pub fn ack(&mut self, member: usize) -> Result<Vec<Step>, SwitchError> {
        let i = (0..self.changes.len())
            .find(|&i| self.changes[i].member == member && self.phase[i] == Phase::Waiting)
            .ok_or(SwitchError::UnexpectedAck { member })?;
        self.phase[i] = Phase::Done;
        let change = &self.changes[i];
        let mut steps = vec![Step::Ack {
            member,
            demand: crate::table::demand(&change.new.tasks),
            interface: self.interface[member],
        }];
        if !change.grows() && change.interface_changes() {
            self.set_interface(i, &mut steps);
        }
        self.advance(&mut steps)?;
        Ok(steps)
    }

    /// Whether [`Step::Done`] has been given.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The members whose acknowledgement is awaited, in request order.
    pub fn awaiting(&self) -> Vec<usize> {
        (0..self.changes.len())
            .filter(|&i| self.phase[i] == Phase::Waiting)
            .map(|i| self.changes[i].member)
            .collect()
    }

    /// The bandwidth pool `pool`'s interfaces take now, reserve included.
    pub fn load(&self, pool: usize) -> Ppm {
        self.load[pool]
    }

    /// The bandwidth of member `member`'s interface now (`None` outside a pool).
    pub fn interface(&self, member: usize) -> Option<Ppm> {
        self.interface[member]
    }

    /// Starts change `i`: its first steps.
    fn begin(&mut self, i: usize, steps: &mut Vec<Step>) -> Result<(), SwitchError> {
        let change = &self.changes[i];
        if change.grows() && change.interface_changes() {
            self.check_fits(i)?;
            self.set_interface(i, steps);
        }
        let change = &self.changes[i];
        if change.tasks_change() {
            let boost = self.policy == SwitchPolicy::Boost;
            steps.push(Step::Request {
                member: change.member,
                boost,
            });
            self.phase[i] = Phase::Waiting;
        } else {
            if !change.grows() && change.interface_changes() {
                self.set_interface(i, steps);
            }
            self.phase[i] = Phase::Done;
        }
        Ok(())
    }

    /// Starts what the policy starts now; gives [`Step::Done`] once all is done.
    fn advance(&mut self, steps: &mut Vec<Step>) -> Result<(), SwitchError> {
        match self.policy {
            SwitchPolicy::Sequential | SwitchPolicy::Boost => {
                while self.awaiting().is_empty() {
                    let Some(i) = self.next_pending() else { break };
                    self.begin(i, steps)?;
                }
            }
            SwitchPolicy::Batch => {
                if !self.second && self.awaiting().is_empty() {
                    self.second = true;
                    for i in 0..self.changes.len() {
                        if self.phase[i] == Phase::Pending {
                            self.begin(i, steps)?;
                        }
                    }
                }
            }
            SwitchPolicy::Greedy => {
                for i in 0..self.changes.len() {
                    if self.phase[i] == Phase::Pending && self.fits(i) {
                        self.begin(i, steps)?;
                    }
                }
                if self.awaiting().is_empty() {
                    if let Some(i) = self.next_pending() {
                        // Nothing can free capacity any more: report the overload.
                        self.check_fits(i)?;
                    }
                }
            }
        }
        if !self.done && self.phase.iter().all(|&p| p == Phase::Done) {
            self.done = true;
            steps.push(Step::Done);
        }
        Ok(())
    }

    fn next_pending(&self) -> Option<usize> {
        self.phase.iter().position(|&p| p == Phase::Pending)
    }

    /// The pool load after change `i`'s interface grows, and the pool.
    fn grown_load(&self, i: usize) -> Option<(usize, Ppm)> {
        let change = &self.changes[i];
        let pool = self.pools[change.member]?;
        let new = self.new_bw(i)?;
        let old = self.interface[change.member].unwrap_or(0);
        Some((pool, self.load[pool] - old + new))
    }

    fn fits(&self, i: usize) -> bool {
        !self.changes[i].grows()
            || self
                .grown_load(i)
                .is_none_or(|(pool, load)| load <= self.capacity[pool])
    }

    fn check_fits(&self, i: usize) -> Result<(), SwitchError> {
        match self.grown_load(i) {
            Some((pool, load)) if load > self.capacity[pool] => Err(SwitchError::Overload {
                member: self.changes[i].member,
                pool,
                load,
                capacity: self.capacity[pool],
            }),
            _ => Ok(()),
        }
    }

    fn new_bw(&self, i: usize) -> Option<Ppm> {
        let change = &self.changes[i];
        let interface = change.new.interface?;
        Some(crate::table::bandwidth(
            interface.budget,
            interface.period,
            self.cpus[change.member],
        ))
    }

    fn set_interface(&mut self, i: usize, steps: &mut Vec<Step>) {
        let member = self.changes[i].member;
        let (Some(interface), Some(pool)) = (self.changes[i].new.interface, self.pools[member])
        else {
            return;
        };
        let new = self.new_bw(i).unwrap_or(0);
        let old = self.interface[member].unwrap_or(0);
        self.load[pool] = self.load[pool] - old + new;
        self.interface[member] = Some(new);
        steps.push(Step::Interface {
            member,
            interface,
            bandwidth: new,
            load: self.load[pool],
        });
    }

    /// The bandwidth all pools' interfaces take now and what the pools offer.
    pub fn total(&self) -> (Ppm, Ppm) {
        (self.load.iter().sum(), self.capacity.iter().sum())
    }

    /// The trace event of the request: call it before [`Switch::start`], so that it
    /// records the load before the first step.
    pub fn request_event(&self) -> EventKind {
        let (load_ppm, capacity_ppm) = self.total();
        EventKind::ModeRequest {
            from: self.modes.0.clone(),
            to: self.modes.1.clone(),
            policy: self.policy.name().into(),
            load_ppm,
            capacity_ppm,
        }
    }

    /// The trace event of `step`; `latency` is the time since the request (used by
    /// [`Step::Done`]). `bulkhead run` and `bulkhead sim` both record exactly these.
    pub fn event(&self, step: &Step, latency: Nanos) -> EventKind {
        let name = |k: usize| self.names[k].clone();
        match *step {
            Step::Interface {
                member,
                interface,
                bandwidth,
                load,
            } => {
                let pool = self.pools[member].unwrap_or_default();
                EventKind::InterfaceChange {
                    partition: name(member),
                    cpus: self.pool_cpus[pool].clone(),
                    budget_ns: interface.budget,
                    period_ns: interface.period,
                    bandwidth_ppm: bandwidth,
                    load_ppm: load,
                    capacity_ppm: self.capacity[pool],
                }
            }
            Step::Request { member, boost } => EventKind::AgentRequest {
                partition: name(member),
                mode: self.modes.1.clone(),
                boost,
            },
            Step::Ack {
                member,
                demand,
                interface,
            } => EventKind::AgentAck {
                partition: name(member),
                demand_ppm: demand,
                interface_ppm: interface,
            },
            Step::Done => {
                let (load_ppm, capacity_ppm) = self.total();
                EventKind::ModeDone {
                    mode: self.modes.1.clone(),
                    latency_ns: latency,
                    load_ppm,
                    capacity_ppm,
                }
            }
        }
    }
}
