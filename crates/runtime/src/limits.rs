//! A partition's `memory`, `pids` and `cpu` limits on its cgroups: on v2 `memory.max`,
//! `pids.max` and `cpu.max` of the partition's cgroup (the controllers enabled down to
//! it); on v1 a cgroup per controller (`<instance>-<partition>` at the root of the
//! memory, pids and cpu hierarchies) that the partition's processes join before they
//! exec. `cpu: N%` is CFS bandwidth: N ms of every 100 ms (the kernel's default period),
//! which throttles SCHED_OTHER work only, never rt tasks' reservations.

use crate::cgroup::{self, Instance, PartitionCgroup, Version};
use crate::{CgroupsUnusable, RunError};
use bulkhead_model::Partition;
use bulkhead_os::limit::V1Limit;
use std::path::PathBuf;

/// The limits of one partition; dropping it removes its v1 cgroups (after the
/// partition's processes are gone).
pub struct Limits {
    /// `cgroup.procs` files a v1 process joins (its pids cgroup).
    pub join: Vec<PathBuf>,
    /// `cgroup.procs` files only the process that execs the program joins on v1 (its
    /// memory cgroup): a pid namespace's monitor and init stay out of the partition's
    /// OOM kills ([`bulkhead_os::oom`]).
    pub program_join: Vec<PathBuf>,
    /// The cgroup directory holding the memory limit, if there is one.
    pub memory: Option<PathBuf>,
    _v1: Vec<V1Limit>,
}

/// Limits partition `p` (its cgroup `cg`, directory name `dir_name`) as configured.
pub fn apply(
    instance: &Instance,
    p: &Partition,
    cg: &PartitionCgroup,
    dir_name: &str,
) -> Result<Limits, RunError> {
    let wanted = [
        ("memory", p.memory, "memory.max", "memory.limit_in_bytes"),
        ("pids", p.pids.map(u64::from), "pids.max", "pids.max"),
        (
            "cpu",
            p.cpu.map(cfs_quota_us),
            "cpu.max",
            "cpu.cfs_quota_us",
        ),
    ];
    let mut limits = Limits {
        join: Vec::new(),
        program_join: Vec::new(),
        memory: None,
        _v1: Vec::new(),
    };
    let cgroup_err = RunError::Cgroup;
    for (controller, value, v2_file, v1_file) in wanted {
        let Some(value) = value else { continue };
        match instance.hierarchy.version {
            Version::V2 => {
                for dir in [&instance.hierarchy.freezer_base, &instance.dirs[0]] {
                    cgroup::enable_controller(dir, controller).map_err(cgroup_err)?;
                }
                let file = cg.freezer_dir.join(v2_file);
                cgroup::write_file(&file, &value.to_string()).map_err(cgroup_err)?;
                if controller == "memory" {
                    limits.memory = Some(cg.freezer_dir.clone());
                }
            }
            Version::V1 => {
                let name = format!("{}-{dir_name}", instance.name);
                let limit =
                    V1Limit::create(controller, &name, v1_file, value).map_err(|source| {
                        RunError::Cgroups(CgroupsUnusable::Limit {
                            partition: p.name.clone(),
                            controller: controller.to_string(),
                            source,
                        })
                    })?;
                let procs = limit.dir().join("cgroup.procs");
                if controller == "memory" {
                    limits.memory = Some(limit.dir().to_path_buf());
                    limits.program_join.push(procs);
                } else {
                    limits.join.push(procs);
                }
                limits._v1.push(limit);
            }
        }
    }
    Ok(limits)
}

/// The CFS quota of `percent` of one CPU in microseconds per the kernel's default
/// 100 ms period (`cpu.cfs_period_us`, and `cpu.max`'s period when only the quota is
/// written).
fn cfs_quota_us(percent: u32) -> u64 {
    u64::from(percent) * 1_000
}
