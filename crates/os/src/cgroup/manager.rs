//! One interface to the cgroups of a run, in the shape of youki's `CgroupManager`
//! (crates/libcgroups: one trait, a backend per cgroup version chosen at run time):
//! [`CgroupManager`] is everything the supervisor does with its partitions' and
//! processes' cgroups, [`V1Cgroups`](super::v1::V1Cgroups) and
//! [`V2Cgroups`](super::v2::V2Cgroups) carry it out, and [`create`] picks the backend
//! of the detected [`Hierarchy`]. The supervisor takes its decisions (what to create,
//! freeze, thaw, kill and remove, in which order) against the trait, so that a fake
//! host can record them in tests without root.
//!
//! Layout (the same names in every hierarchy used):
//! `<own cgroup>/bulkhead-<pid>-<start>-<n>/<partition>/proc<i>`: `<pid>` and `<start>`
//! (start time in clock ticks, `/proc/<pid>/stat` field 22) identify the supervisor,
//! so an instance whose supervisor died can be told from a live one even after the
//! pid was reused. v1: the cpuset is set per partition (`cpuset/.../<partition>`,
//! processes join it directly) and the freezer per process
//! (`freezer/.../<partition>/proc<i>`); v2: `cpuset.cpus` on the partition cgroup
//! (enabled in the subtree of the instance), `cgroup.freeze` on the process cgroups.

use super::files::{
    err, freeze_file, freeze_value, procs, remove_dir, write_file, CgroupError, Hierarchy, Result,
    Version,
};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A partition's cgroup in a [`CgroupManager`]: the `n`th one added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition(pub usize);

/// A process's cgroup in a [`CgroupManager`]: the `n`th one added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process(pub usize);

/// A controller that limits a partition ([`CgroupManager::limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    /// Bytes of memory (v2 `memory.max`, v1 `memory.limit_in_bytes`).
    Memory,
    /// Processes and threads (`pids.max`).
    Pids,
    /// CFS bandwidth of SCHED_OTHER work, in microseconds of every 100 ms (v2 `cpu.max`,
    /// v1 `cpu.cfs_quota_us`): rt tasks' reservations are not throttled by it.
    Cpu,
}

impl Controller {
    /// The controller's name (`memory`, `pids`, `cpu`).
    pub fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpu => "cpu",
        }
    }
}

/// Why a limit could not be set.
#[derive(Debug)]
pub enum LimitError {
    /// A cgroup file could not be written (v2).
    Cgroup(CgroupError),
    /// The controller's own cgroup could not be made (v1).
    Controller(crate::Error),
}

/// The cgroup directory that holds a limit, or why it could not be set.
pub type Limited = std::result::Result<PathBuf, LimitError>;

/// How a process's child joins its cgroups before it runs its program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Joins {
    /// v2: created in this (frozen) cgroup (`clone3(CLONE_INTO_CGROUP)`).
    Into(PathBuf),
    /// v1: the child writes itself into each of `procs` (its partition's cpuset first,
    /// then its freezer cgroup and limits) while its freezer cgroup is thawed, and the
    /// process that execs the program alone into each of `program` (the memory limit).
    Hold {
        procs: Vec<PathBuf>,
        program: Vec<PathBuf>,
    },
}

/// What the supervisor does with the cgroups of one run (an *instance*: one cgroup per
/// hierarchy used, a cgroup per partition below it, a frozen cgroup per process below
/// that). Every cgroup it creates is removed by [`CgroupManager::remove`].
pub trait CgroupManager: Send {
    /// Creates the cgroup of a partition (`name`, a directory name) on `cpus` (the
    /// kernel's list format).
    fn add_partition(&mut self, name: &str, cpus: &str) -> Result<Partition>;
    /// [`CgroupManager::add_partition`] for a partition on CPUs of a non-exclusive rt
    /// partition: its cpuset is a plain child of `parent`, the rt cpuset holding those
    /// CPUs (v1: the kernel gives no sibling of an exclusive cpuset its CPUs); removed
    /// with the instance. v2 cannot (the rt CPUs are a cpuset partition root holding
    /// tasks, which takes no child): an error.
    fn add_partition_below(&mut self, name: &str, cpus: &str, parent: &Path) -> Result<Partition>;
    /// The directory of partition `p`'s cgroup, in which its processes' cgroups are.
    fn partition_dir(&self, p: Partition) -> &Path;
    /// Pins partition `p` to `cpus` (nothing without a cpuset controller).
    fn set_cpus(&mut self, p: Partition, cpus: &str) -> Result<()>;
    /// Limits partition `p` to `value` of `controller`; returns the cgroup directory
    /// that holds the limit.
    fn limit(&mut self, p: Partition, controller: Controller, value: u64) -> Limited;
    /// Creates the frozen cgroup `proc<index>` of a process of partition `p`;
    /// `keep_open`: keep its freeze file open (fast switches, one fd).
    fn add_process(&mut self, p: Partition, index: usize, keep_open: bool) -> Result<Process>;
    /// How a child spawned for process cgroup `p` joins its cgroups.
    fn joins(&self, p: Process) -> Joins;
    /// Freezes (`true`) or thaws process cgroup `p`; nothing is written when it is in
    /// that state already.
    fn set_frozen(&mut self, p: Process, frozen: bool) -> Result<()>;
    /// The processes in process cgroup `p` now (empty once it is gone).
    fn pids(&self, p: Process) -> Vec<i32>;
    /// Kills every process in process cgroup `p`.
    fn kill(&mut self, p: Process);
    /// Kills every process of the instance.
    fn kill_all(&mut self);
    /// Removes the cgroups, deepest first; fails if a cgroup still has members (then
    /// those not removed stay for a later call).
    fn remove(&mut self) -> Result<()>;
    /// How many cgroups of the instance exist (partitions, processes, instance dirs).
    fn cgroups_left(&self) -> usize;
}

/// The cgroups of a run in `hierarchy`, named `name`, on `cpus` (the CPUs it uses; `None`:
/// none of its own, every partition's cpuset is below an rt one,
/// [`CgroupManager::add_partition_below`]), by the backend of the hierarchy's version.
/// On failure nothing is left behind.
pub fn create(
    hierarchy: &Hierarchy,
    name: &str,
    cpus: Option<&str>,
) -> Result<Box<dyn CgroupManager>> {
    Ok(match hierarchy.version {
        Version::V1 => Box::new(super::v1::V1Cgroups::create(hierarchy, name, cpus)?),
        Version::V2 => Box::new(super::v2::V2Cgroups::create(hierarchy, name, cpus)?),
    })
}

/// The methods of [`CgroupManager`] that both backends carry out alike, on their
/// `tree` ([`Tree`]).
macro_rules! on_tree {
    () => {
        fn partition_dir(&self, p: Partition) -> &Path {
            &self.tree.partitions[p.0].1
        }

        fn add_process(&mut self, p: Partition, index: usize, keep_open: bool) -> Result<Process> {
            self.tree.add_process(p, index, keep_open)
        }

        fn set_frozen(&mut self, p: Process, frozen: bool) -> Result<()> {
            self.tree.set_frozen(p, frozen)
        }

        fn pids(&self, p: Process) -> Vec<i32> {
            self.tree.pids(p)
        }

        fn kill(&mut self, p: Process) {
            self.tree.kill(p);
        }

        fn cgroups_left(&self) -> usize {
            self.tree.cgroups_left()
        }
    };
}
pub(super) use on_tree;

/// A process's cgroup, with its freeze file kept open (the supervisor's one cgroup
/// fd per process) unless descriptors are scarce.
#[derive(Debug)]
struct ProcessCgroup {
    dir: PathBuf,
    partition: Partition,
    freeze: Option<File>,
    /// The state last written, so that a write that would change nothing is skipped.
    frozen: bool,
}

/// What both backends keep: the instance directories, what was created under them,
/// the partitions' and processes' cgroups.
#[derive(Debug)]
pub(super) struct Tree {
    pub(super) version: Version,
    pub(super) name: String,
    /// Instance directories, one per hierarchy (freezer first).
    pub(super) dirs: Vec<PathBuf>,
    /// Created partition and process cgroups, for removal (deepest last).
    created: Vec<PathBuf>,
    /// Per partition: its name and the directory its processes' cgroups are in.
    pub(super) partitions: Vec<(String, PathBuf)>,
    processes: Vec<ProcessCgroup>,
}

impl Tree {
    pub(super) fn new(version: Version, name: &str) -> Tree {
        Tree {
            version,
            name: name.to_string(),
            dirs: Vec::new(),
            created: Vec::new(),
            partitions: Vec::new(),
            processes: Vec::new(),
        }
    }

    /// Creates the instance directory in `base`.
    pub(super) fn add_instance_dir(&mut self, base: &Path) -> Result<()> {
        let dir = base.join(&self.name);
        fs::create_dir(&dir).map_err(err("create cgroup", &dir))?;
        self.dirs.push(dir);
        Ok(())
    }

    /// Creates cgroup `dir`, removed with the instance.
    pub(super) fn make(&mut self, dir: &Path) -> Result<()> {
        fs::create_dir(dir).map_err(err("create cgroup", dir))?;
        self.created.push(dir.to_path_buf());
        Ok(())
    }

    /// Creates the freezer cgroup of a partition named `name`; returns it.
    pub(super) fn add_partition(&mut self, name: &str) -> Result<Partition> {
        let dir = self.dirs[0].join(name);
        self.make(&dir)?;
        self.partitions.push((name.to_string(), dir));
        Ok(Partition(self.partitions.len() - 1))
    }

    pub(super) fn add_process(
        &mut self,
        p: Partition,
        index: usize,
        keep_open: bool,
    ) -> Result<Process> {
        let dir = self.partitions[p.0].1.join(format!("proc{index}"));
        self.make(&dir)?;
        let file = dir.join(freeze_file(self.version));
        let freeze = match keep_open {
            true => Some(
                OpenOptions::new()
                    .write(true)
                    .open(&file)
                    .map_err(err("open", &file))?,
            ),
            false => None,
        };
        self.processes.push(ProcessCgroup {
            dir,
            partition: p,
            freeze,
            frozen: false,
        });
        let process = Process(self.processes.len() - 1);
        self.set_frozen(process, true)?;
        Ok(process)
    }

    /// The processes in the cgroups of partition `p`'s processes.
    pub(super) fn partition_pids(&self, p: Partition) -> Vec<i32> {
        let of_p = self.processes.iter().filter(|c| c.partition == p);
        of_p.flat_map(|c| procs(&c.dir)).collect()
    }

    pub(super) fn partition_of(&self, p: Process) -> Partition {
        self.processes[p.0].partition
    }

    pub(super) fn process_dir(&self, p: Process) -> &Path {
        &self.processes[p.0].dir
    }

    /// The kernel stops every task of the cgroup before it returns to user space; the
    /// write returns at once.
    pub(super) fn set_frozen(&mut self, p: Process, frozen: bool) -> Result<()> {
        let version = self.version;
        let process = &mut self.processes[p.0];
        if process.frozen == frozen {
            return Ok(());
        }
        let value = freeze_value(version, frozen).as_bytes();
        let path;
        let mut opened;
        let file = match &mut process.freeze {
            Some(file) => file,
            None => {
                path = process.dir.join(freeze_file(version));
                opened = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(err("open", &path))?;
                &mut opened
            }
        };
        file.write_all(value)
            .map_err(err("write the freezer state of", &process.dir))?;
        process.frozen = frozen;
        Ok(())
    }

    pub(super) fn pids(&self, p: Process) -> Vec<i32> {
        procs(self.process_dir(p))
    }

    /// Kills the processes of process cgroup `p` as [`super::files::kill_cgroup`] does,
    /// on v1 through its freeze file kept open and with no write when it is frozen
    /// already (as most are outside their windows): a teardown of thousands of
    /// partitions made three opens and two writes per process.
    pub(super) fn kill(&mut self, p: Process) {
        let dir = &self.processes[p.0].dir;
        if self.version == Version::V2 && write_file(&dir.join("cgroup.kill"), "1").is_ok() {
            return;
        }
        // Frozen, nothing forks meanwhile; thawed after, the signals are delivered.
        let _ = self.set_frozen(p, true);
        for pid in procs(&self.processes[p.0].dir) {
            // `pid` is a member of a cgroup this supervisor owns.
            let _ = crate::proc::kill(pid, crate::proc::SIGKILL);
        }
        let _ = self.set_frozen(p, false);
    }

    pub(super) fn kill_each(&mut self) {
        for i in 0..self.processes.len() {
            self.kill(Process(i));
        }
    }

    /// v1: kills every process of the instance while all of them stay frozen, then lets
    /// them die at once. The instance's freezer cgroup is frozen first (a v1 cgroup
    /// stays frozen while its parent is), every process cgroup's members are signalled
    /// and its own state set to thawed, and the instance is thawed last. Killing one
    /// process cgroup after the other (freeze, signal, thaw) let each die while the
    /// supervisor still killed the next: with thousands of partitions it then had a
    /// share of the CPUs among thousands of exiting processes. Falls back to
    /// [`Tree::kill_each`] if the instance cannot be frozen. Frozen, nothing forks
    /// while its cgroup is read.
    pub(super) fn kill_under_frozen_instance(&mut self) {
        let Some(instance) = self.dirs.first().cloned() else {
            return;
        };
        if super::files::set_frozen(&instance, self.version, true).is_err() {
            return self.kill_each();
        }
        for i in 0..self.processes.len() {
            for pid in procs(&self.processes[i].dir) {
                // `pid` is a member of a cgroup this supervisor owns.
                let _ = crate::proc::kill(pid, crate::proc::SIGKILL);
            }
            let _ = self.set_frozen(Process(i), false);
        }
        let _ = super::files::set_frozen(&instance, self.version, false);
    }

    pub(super) fn cgroups_left(&self) -> usize {
        self.created.len() + self.dirs.len()
    }

    pub(super) fn remove(&mut self) -> Result<()> {
        while let Some(dir) = self.created.pop() {
            if let Err(e) = remove_dir(&dir) {
                self.created.push(dir);
                return Err(e);
            }
        }
        while let Some(dir) = self.dirs.pop() {
            if let Err(e) = remove_dir(&dir) {
                self.dirs.push(dir);
                return Err(e);
            }
        }
        Ok(())
    }
}
