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

/// Without `demos_cpu` (DEmOS's `all`): moves the calling thread, the supervisor, onto
/// the CPUs no window uses (`used`: those the windows use), if it may run on one, and
/// then gives it all its CPUs back. It may still run on every CPU, but a SCHED_FIFO
/// thread is woken on the CPU it last ran on (the kernel's `select_task_rq_rt` moves it
/// only off a CPU a real-time task of its priority or higher holds), so it starts
/// where no partition runs and stays there: woken on a partition's CPU, it preempts
/// that partition at each switch, and all of the switch is taken from the
/// partition's work (issue 36; docs/runtime.md).
pub(crate) fn start_apart(system: &System, used: &CpuSet) {
    if system.supervisor_cpus.is_some() {
        return;
    }
    let own = bulkhead_os::sched::own_cpus();
    let free: Vec<u32> = own.iter().copied().filter(|&c| !used.contains(c)).collect();
    if free.is_empty() || free.len() == own.len() {
        return;
    }
    // On failure the thread keeps its CPUs: no harm, and nothing to report.
    if bulkhead_os::sched::set_affinity(0, free).is_ok() {
        let _ = bulkhead_os::sched::set_affinity(0, own);
    }
}
