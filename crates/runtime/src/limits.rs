//! A partition's `memory`, `pids` and `cpu` limits, set through its run's cgroups
//! ([`CgroupManager::limit`]: on v2 `memory.max`, `pids.max` and `cpu.max` of the
//! partition's cgroup; on v1 a cgroup per controller that the partition's processes join
//! before they exec). `cpu: N%` is CFS bandwidth: N ms of every 100 ms (the kernel's
//! default period), which throttles SCHED_OTHER work only, never rt tasks' reservations.

use crate::{CgroupsUnusable, RunError};
use bulkhead_model::Partition as Model;
use bulkhead_os::cgroup::{CgroupManager, Controller, LimitError, Partition};
use std::path::PathBuf;

/// Limits partition `p` (its cgroup `cg`) as configured; returns the cgroup directory
/// that holds its memory limit, if it has one.
pub fn apply(
    cgroups: &mut dyn CgroupManager,
    p: &Model,
    cg: Partition,
) -> Result<Option<PathBuf>, RunError> {
    let wanted = [
        (Controller::Memory, p.memory),
        (Controller::Pids, p.pids.map(u64::from)),
        (Controller::Cpu, p.cpu.map(cfs_quota_us)),
    ];
    let mut memory = None;
    for (controller, value) in wanted {
        let Some(value) = value else { continue };
        let dir = cgroups.limit(cg, controller, value).map_err(|e| match e {
            LimitError::Cgroup(e) => RunError::Cgroup(e),
            LimitError::Controller(source) => RunError::Cgroups(CgroupsUnusable::Limit {
                partition: p.name.clone(),
                controller: controller.name().to_string(),
                source,
            }),
        })?;
        if controller == Controller::Memory {
            memory = Some(dir);
        }
    }
    Ok(memory)
}

/// The CFS quota of `percent` of one CPU in microseconds per the kernel's default
/// 100 ms period (`cpu.cfs_period_us`, and `cpu.max`'s period when only the quota is
/// written).
fn cfs_quota_us(percent: u32) -> u64 {
    u64::from(percent) * 1_000
}
