//! The window schedule compiled from a [`System`]: partitions, processes and windows
//! addressed by plain indices, CPU sets resolved.

use bulkhead_model::{CpuSet, Cpus, Nanos, System};

/// Index into [`Schedule::partitions`].
pub type PartitionId = usize;
/// Index into [`Schedule::processes`] (flat over all scheduled partitions).
pub type ProcessId = usize;

/// Everything the state machine needs from a system description.
///
/// Only partitions that some slice names are scheduled: a partition that appears
/// in no window is not part of the schedule (`run` starts it as a free-running partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Scheduled partitions, in the order of [`System::partitions`].
    pub partitions: Vec<PartitionSpec>,
    /// All processes of the scheduled partitions, partition after partition.
    pub processes: Vec<ProcessSpec>,
    /// The windows of one major frame, in order.
    pub windows: Vec<WindowSpec>,
}

/// A scheduled partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSpec {
    pub name: String,
    /// Index of this partition in [`System::partitions`].
    pub model_index: usize,
    /// Its processes: `processes.start..processes.end` in [`Schedule::processes`].
    pub processes: std::ops::Range<ProcessId>,
    /// The widest CPU set of the slices it appears in (the first one with the most
    /// CPUs, in window and slice order; DEmOS `MajorFrame::find_widest_cpu_set`).
    /// Its processes initialize there, and its cgroup starts with these CPUs.
    pub widest_cpus: CpuSet,
}

/// A process of a scheduled partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    pub partition: PartitionId,
    /// Position inside its partition (0-based).
    pub index: usize,
    /// The command as configured.
    pub cmd: String,
    pub budget: Nanos,
    pub jitter: Nanos,
    pub init: bool,
    /// The CPU frequency it asks for, in kHz (DEmOS `frequency`; `per_process` policy).
    pub frequency_khz: Option<u64>,
}

/// One window of the major frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowSpec {
    pub length: Nanos,
    pub slices: Vec<SliceSpec>,
}

/// One slice: CPUs, at most one safety-critical and one best-effort partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceSpec {
    pub cpus: CpuSet,
    pub sc: Option<PartitionId>,
    pub be: Option<PartitionId>,
    /// The CPU frequency it asks for, in kHz (DEmOS `frequency`; `per_slice` policy).
    pub frequency_khz: Option<u64>,
}

/// Why a system has no runnable window schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleError {
    /// `windows` is empty.
    NoWindows,
    /// A slice names a partition the system does not define (a model invariant broken).
    UnknownPartition(String),
}

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleError::NoWindows => {
                f.write_str("the description has no window schedule (`windows` is empty)")
            }
            ScheduleError::UnknownPartition(name) => {
                write!(f, "a slice names unknown partition `{name}`")
            }
        }
    }
}

impl std::error::Error for ScheduleError {}

impl Schedule {
    /// Compiles `system`'s window schedule.
    ///
    /// `all_cpus` is what a slice with `cpu: all` gets when the description has no
    /// `system.cpus` (the runtime passes the CPUs it may use; the simulator a fixed set).
    pub fn from_system(system: &System, all_cpus: &CpuSet) -> Result<Schedule, ScheduleError> {
        if system.windows.is_empty() {
            return Err(ScheduleError::NoWindows);
        }
        let all = system.cpus.clone().unwrap_or_else(|| all_cpus.clone());
        let resolve = |cpus: &Cpus| match cpus {
            Cpus::All => all.clone(),
            Cpus::Set(set) => set.clone(),
        };
        // Pass 1: which partitions are scheduled, numbered in model order.
        let mut widest: Vec<Option<CpuSet>> = vec![None; system.partitions.len()];
        for slice in system.windows.iter().flat_map(|w| &w.slices) {
            let cpus = resolve(&slice.cpus);
            for name in [&slice.sc_partition, &slice.be_partition]
                .into_iter()
                .flatten()
            {
                let index = system
                    .partition_index(name)
                    .ok_or_else(|| ScheduleError::UnknownPartition(name.clone()))?;
                let entry = &mut widest[index];
                if entry.as_ref().is_none_or(|w| cpus.len() > w.len()) {
                    *entry = Some(cpus.clone());
                }
            }
        }
        let mut schedule = Schedule {
            partitions: Vec::new(),
            processes: Vec::new(),
            windows: Vec::new(),
        };
        let mut ids: Vec<Option<PartitionId>> = vec![None; system.partitions.len()];
        for (model_index, cpus) in widest.into_iter().enumerate() {
            let Some(widest_cpus) = cpus else { continue };
            let id = schedule.partitions.len();
            ids[model_index] = Some(id);
            let start = schedule.processes.len();
            for (index, p) in system.partitions[model_index].processes.iter().enumerate() {
                schedule.processes.push(ProcessSpec {
                    partition: id,
                    index,
                    cmd: p.cmd.clone(),
                    budget: p.budget,
                    jitter: p.jitter,
                    init: p.init,
                    frequency_khz: p.frequency_khz,
                });
            }
            schedule.partitions.push(PartitionSpec {
                name: system.partitions[model_index].name.clone(),
                model_index,
                processes: start..schedule.processes.len(),
                widest_cpus,
            });
        }
        // Pass 2: the windows, with partition ids.
        let id_of = |name: &Option<String>| {
            name.as_ref()
                .and_then(|n| system.partition_index(n))
                .and_then(|i| ids[i])
        };
        for window in &system.windows {
            let slices = window
                .slices
                .iter()
                .map(|s| SliceSpec {
                    cpus: resolve(&s.cpus),
                    sc: id_of(&s.sc_partition),
                    be: id_of(&s.be_partition),
                    frequency_khz: s.frequency_khz,
                })
                .collect();
            schedule.windows.push(WindowSpec {
                length: window.length,
                slices,
            });
        }
        Ok(schedule)
    }

    /// Length of the major frame (sum of window lengths).
    pub fn major_frame(&self) -> Nanos {
        self.windows.iter().map(|w| w.length).sum()
    }

    /// The partition a process belongs to.
    pub fn partition_of(&self, process: ProcessId) -> &PartitionSpec {
        &self.partitions[self.processes[process].partition]
    }
}
