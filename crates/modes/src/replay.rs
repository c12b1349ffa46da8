//! Dry runs of a switch, and an independent check of the two overload conditions at
//! every step (M2-Xen III: "overload avoidance in VMs" and "in the physical host").

use crate::switch::{Step, Switch, SwitchError};
use crate::table::{demand, Ppm, Table};
use bulkhead_model::SwitchPolicy;

/// The order in which the agents of a dry run acknowledge, when several are awaited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckOrder {
    /// The earliest request first.
    Fifo,
    /// The latest request first.
    Lifo,
    /// A deterministic shuffle from this seed.
    Seeded(u64),
}

/// A dry run: the steps in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    pub steps: Vec<Step>,
}

/// A dry run that stopped: the steps taken, and why it could not go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub steps: Vec<Step>,
    pub error: SwitchError,
}

/// Drives a switch of `table` from `from` to `to` under `policy` to its end, the agents
/// acknowledging in `order` (an agent's acknowledgement is its only input).
pub fn dry_run(
    table: &Table,
    from: usize,
    to: usize,
    policy: SwitchPolicy,
    order: AckOrder,
) -> Result<Replay, Stopped> {
    let mut switch = Switch::new(table, from, to, policy);
    let mut steps = Vec::new();
    let mut rng = match order {
        AckOrder::Seeded(seed) => seed | 1,
        _ => 1,
    };
    let mut next = switch.start();
    loop {
        match next {
            Ok(more) => steps.extend(more),
            Err(error) => return Err(Stopped { steps, error }),
        }
        let awaiting = switch.awaiting();
        if awaiting.is_empty() {
            return Ok(Replay { steps });
        }
        let pick = match order {
            AckOrder::Fifo => 0,
            AckOrder::Lifo => awaiting.len() - 1,
            AckOrder::Seeded(_) => {
                // xorshift64
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                (rng % awaiting.len() as u64) as usize
            }
        };
        next = switch.ack(awaiting[pick]);
    }
}

/// An overload found by [`verify`] after step `step` (0-based index into the steps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Pool `pool` carries `load` above its `capacity`.
    Host {
        step: usize,
        member: usize,
        pool: usize,
        load: Ppm,
        capacity: Ppm,
    },
    /// Member `member`'s tasks demand more than its interface gives.
    Partition {
        step: usize,
        member: usize,
        demand: Ppm,
        interface: Ppm,
    },
}

/// What [`verify`] measured: the highest load of every pool during the switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peaks {
    pub pools: Vec<Ppm>,
}

/// Replays `steps` of a switch from `from` to `to` from the table alone (not from the
/// machine's own bookkeeping) and checks after every step that no pool carries more
/// than its capacity and no partition in a pool demands more than its interface.
/// The task set of a partition changes at its acknowledgement, its interface at its
/// interface step.
pub fn verify(table: &Table, from: usize, to: usize, steps: &[Step]) -> Result<Peaks, Violation> {
    let start = &table.modes[from].locals;
    let mut interface: Vec<Option<Ppm>> = start
        .iter()
        .enumerate()
        .map(|(k, l)| table.interface_bw(k, l))
        .collect();
    let mut demands: Vec<Ppm> = start.iter().map(|l| demand(&l.tasks)).collect();
    let mut peaks = Peaks {
        pools: table.loads(from),
    };
    for (index, step) in steps.iter().enumerate() {
        let member = match *step {
            Step::Interface {
                member, bandwidth, ..
            } => {
                interface[member] = Some(bandwidth);
                member
            }
            Step::Ack { member, .. } => {
                demands[member] = demand(&table.modes[to].locals[member].tasks);
                member
            }
            Step::Request { .. } | Step::Done => continue,
        };
        check_pools(table, &interface, index, member, &mut peaks)?;
        if let Some(bw) = interface[member] {
            if demands[member] > bw {
                return Err(Violation::Partition {
                    step: index,
                    member,
                    demand: demands[member],
                    interface: bw,
                });
            }
        }
    }
    Ok(peaks)
}

fn check_pools(
    table: &Table,
    interface: &[Option<Ppm>],
    step: usize,
    member: usize,
    peaks: &mut Peaks,
) -> Result<(), Violation> {
    for (pool, p) in table.pools.iter().enumerate() {
        let load: Ppm = p.reserve
            + (0..table.members.len())
                .filter(|&k| table.members[k].pool == Some(pool))
                .filter_map(|k| interface[k])
                .sum::<Ppm>();
        peaks.pools[pool] = peaks.pools[pool].max(load);
        if load > p.capacity {
            return Err(Violation::Host {
                step,
                member,
                pool,
                load,
                capacity: p.capacity,
            });
        }
    }
    Ok(())
}
