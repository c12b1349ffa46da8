//! The resolved global mode table: per mode and partition, the interface (with every
//! derived value filled in by analysis), the demand of the task set and the task set.

use bulkhead_model::{CpuSet, Nanos, Task};

/// Bandwidth in parts per million of one CPU.
pub type Ppm = u64;

/// One CPU, fully.
pub const CPU_PPM: Ppm = 1_000_000;

/// The bandwidth of `budget` every `period` on each of `cpus` CPUs, rounded up (so that
/// sums of bandwidths never understate the load).
pub fn bandwidth(budget: Nanos, period: Nanos, cpus: u32) -> Ppm {
    let num = budget as u128 * CPU_PPM as u128 * cpus as u128;
    num.div_ceil(period.max(1) as u128) as Ppm
}

/// The utilization of `tasks`, each C/T rounded up, in ppm.
pub fn demand(tasks: &[Task]) -> Ppm {
    tasks.iter().map(|t| bandwidth(t.budget, t.period, 1)).sum()
}

/// A resource interface: `budget` every `period` on each CPU of the partition
/// (M2-Xen's ω = (N, B, P)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interface {
    pub budget: Nanos,
    pub period: Nanos,
}

/// CPUs that partitions scheduled as servers share, and what they offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    pub cpus: CpuSet,
    /// What the CPUs offer: the number of CPUs times the bandwidth cap.
    pub capacity: Ppm,
    /// Bandwidth held back at all times: the boost reserve (M2-Xen V-B's hypothetical
    /// VCPU), 0 when no switch boosts.
    pub reserve: Ppm,
}

/// An rt partition of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    /// The pool it draws its interface from; `None`: it owns its CPUs.
    pub pool: Option<usize>,
    /// The number of CPUs its interface covers (N).
    pub cpus: u32,
}

/// What a partition runs in one mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    /// The interface (partitions in a pool only).
    pub interface: Option<Interface>,
    /// The task set, mode agent included.
    pub tasks: Vec<Task>,
}

/// One mode: the local mode of every member, in member order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMode {
    pub name: String,
    pub locals: Vec<Local>,
}

/// The global mode table as the mode manager uses it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    pub pools: Vec<Pool>,
    pub members: Vec<Member>,
    pub modes: Vec<TableMode>,
}

/// How one partition changes in a switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub member: usize,
    pub old: Local,
    pub new: Local,
    /// Bandwidth of the interface before and after (the demand for a partition that owns
    /// its CPUs): what M2-Xen sorts the switches by.
    pub old_bw: Ppm,
    pub new_bw: Ppm,
}

impl Change {
    /// The partition needs more bandwidth: its interface grows before its tasks do.
    pub fn grows(&self) -> bool {
        self.new_bw > self.old_bw
    }

    /// Its task set changes: the agent must switch it.
    pub fn tasks_change(&self) -> bool {
        self.old.tasks != self.new.tasks
    }

    /// Its interface changes.
    pub fn interface_changes(&self) -> bool {
        self.old.interface != self.new.interface
    }

    /// `new_bw - old_bw`.
    pub fn delta(&self) -> i128 {
        self.new_bw as i128 - self.old_bw as i128
    }
}

impl Table {
    /// Index of mode `name`.
    pub fn mode(&self, name: &str) -> Option<usize> {
        self.modes.iter().position(|m| m.name == name)
    }

    /// The bandwidth of `local`'s interface for member `k` (none outside a pool).
    pub fn interface_bw(&self, k: usize, local: &Local) -> Option<Ppm> {
        let member = &self.members[k];
        member.pool?;
        local
            .interface
            .map(|i| bandwidth(i.budget, i.period, member.cpus))
    }

    /// What member `k` is sorted by in mode-local `local`: its interface bandwidth in a
    /// pool, the demand of its task set otherwise.
    pub fn sort_bw(&self, k: usize, local: &Local) -> Ppm {
        self.interface_bw(k, local)
            .unwrap_or_else(|| demand(&local.tasks))
    }

    /// The load of every pool in mode `m`: its interfaces and its reserve.
    pub fn loads(&self, m: usize) -> Vec<Ppm> {
        let mut loads: Vec<Ppm> = self.pools.iter().map(|p| p.reserve).collect();
        for (k, local) in self.modes[m].locals.iter().enumerate() {
            if let (Some(pool), Some(bw)) = (self.members[k].pool, self.interface_bw(k, local)) {
                loads[pool] += bw;
            }
        }
        loads
    }

    /// The partitions that change from mode `from` to mode `to`, in member order.
    pub fn changes(&self, from: usize, to: usize) -> Vec<Change> {
        let (a, b) = (&self.modes[from], &self.modes[to]);
        a.locals
            .iter()
            .zip(&b.locals)
            .enumerate()
            .filter(|(_, (old, new))| old != new)
            .map(|(k, (old, new))| Change {
                member: k,
                old: old.clone(),
                new: new.clone(),
                old_bw: self.sort_bw(k, old),
                new_bw: self.sort_bw(k, new),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_rounds_up_and_counts_cpus() {
        assert_eq!(bandwidth(4, 10, 1), 400_000);
        assert_eq!(bandwidth(1, 3, 1), 333_334);
        assert_eq!(bandwidth(1, 3, 3), CPU_PPM);
        assert_eq!(bandwidth(10, 10, 3), 3 * CPU_PPM);
    }
}
