//! The supervisor's own CPUs (DEmOS `demos_cpu`): checked against the machine before
//! anything starts, applied once the partitions' processes exist (DEmOS `main.cpp`
//! calls `sched_setaffinity` after spawning them, so that they do not inherit it).

use crate::RunError;
use bulkhead_model::{CpuSet, System};

/// Whether `demos_cpu` names CPUs this process may run on (online and in its affinity,
/// as DEmOS parses `demos_cpu` against its allowed CPUs).
pub(crate) fn check(system: &System, allowed: &CpuSet) -> Result<(), RunError> {
    let Some(cpus) = &system.supervisor_cpus else {
        return Ok(());
    };
    let online = bulkhead_os::host::cpus_online().unwrap_or_default();
    let usable = match CpuSet::parse(&online) {
        Ok(online) => CpuSet::from_cpus(allowed.iter().filter(|&c| online.contains(c))),
        Err(_) => Some(allowed.clone()),
    };
    match usable {
        Some(usable) if cpus.is_subset(&usable) => Ok(()),
        usable => Err(RunError::invalid(format!(
            "demos_cpu: CPUs {cpus} are not all online and allowed for bulkhead on this machine (usable: {})",
            usable.map_or("none".into(), |u| u.to_string())
        ))),
    }
}

/// Pins every thread of this process to `demos_cpu` (threads started later inherit
/// it); a failure is a warning, as in DEmOS. Nothing without `demos_cpu`.
pub(crate) fn pin(system: &System, warnings: &mut Vec<String>) {
    let Some(cpus) = &system.supervisor_cpus else {
        return;
    };
    let tids: Vec<i32> = match std::fs::read_dir("/proc/self/task") {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => vec![0],
    };
    for tid in tids {
        if let Err(e) = bulkhead_os::sched::set_affinity(tid, cpus.iter()) {
            warnings.push(format!(
                "demos_cpu: the supervisor could not be pinned to CPUs {cpus}: {e}"
            ));
            return;
        }
    }
}
