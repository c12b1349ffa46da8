//! Best-effort partitions in no window: their processes run for the whole run as
//! ordinary Linux processes, never frozen, confined to the partition's cgroups (CPUs,
//! memory limit), user and network namespace. An unwindowed partition with `cpus: all`
//! (or none) gets every CPU the system may use except the rt partitions'.
//!
//! Postcondition of dropping a [`FreeRun`]: every process it started is dead and every
//! cgroup it created is removed.

use crate::cgroup::{Hierarchy, Instance, ProcessCgroup};
use crate::isolation::Confinements;
use crate::limits::{self, Limits};
use crate::spawn::{self, Environment, Prepared};
use crate::{cgroup, command, leftovers, RunError};
use bulkhead_model::{CpuSet, Cpus, Partition, PartitionKind, System};
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// The unwindowed best-effort partitions of a system.
pub fn partitions(system: &System) -> Vec<&Partition> {
    let windowed = system.windowed_partitions();
    system
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Be && !p.processes.is_empty())
        .filter(|p| !windowed.contains(p.name.as_str()))
        .collect()
}

struct FreeProc {
    pid: i32,
    cgroup: ProcessCgroup,
    /// The DEmOS channel's supervisor end, held open so that a client library call
    /// does not fail; nothing is ever sent on it.
    _channel: OwnedFd,
    /// What a v1 child reads until it execs; freed only after it is dead.
    memory: Option<spawn::ChildMemory>,
    exited: bool,
    /// `partition `P`, process K (`CMD`)`, for the report of its exit.
    what: String,
    /// Its wait status once reaped by [`FreeRun::all_exited`].
    status: Option<i32>,
}

/// The running unwindowed best-effort partitions.
///
/// Field order matters: processes are killed in `Drop` before the commands and
/// environments they may still read (v1, before exec) are freed.
pub struct FreeRun {
    instance: Instance,
    procs: Vec<FreeProc>,
    limits: Vec<Limits>,
    plans: Vec<Prepared>,
    envs: Vec<Environment>,
}

impl FreeRun {
    /// Starts every unwindowed best-effort partition of `system`; `None` when there is
    /// none. `own_cpus`: the CPUs this process may use. On error nothing is left running.
    pub fn start(
        system: &System,
        hierarchy: &Hierarchy,
        confinements: &Confinements,
        own_cpus: &CpuSet,
        workdir: &Path,
    ) -> Result<Option<FreeRun>, RunError> {
        let free = partitions(system);
        if free.is_empty() {
            return Ok(None);
        }
        let cpus: Vec<CpuSet> = free
            .iter()
            .map(|p| partition_cpus(system, p, own_cpus))
            .collect::<Result<_, _>>()?;
        let all = CpuSet::from_cpus(cpus.iter().flat_map(|c| c.iter())).expect("not empty");
        let instance = Instance::create(hierarchy, &leftovers::instance_name(), &all)
            .map_err(RunError::Cgroup)?;
        let mut run = FreeRun {
            instance,
            procs: Vec::new(),
            limits: Vec::new(),
            plans: Vec::new(),
            envs: Vec::new(),
        };
        for (i, (p, cpus)) in free.iter().zip(&cpus).enumerate() {
            run.start_partition(i, p, cpus, confinements, workdir)?;
        }
        Ok(Some(run))
    }

    fn start_partition(
        &mut self,
        index: usize,
        p: &Partition,
        cpus: &CpuSet,
        confinements: &Confinements,
        workdir: &Path,
    ) -> Result<(), RunError> {
        let dir_name = cgroup::partition_dir_name(index, &p.name);
        let cg = self
            .instance
            .add_partition(&dir_name, cpus)
            .map_err(RunError::Cgroup)?;
        let limits = limits::apply(&self.instance, p, &cg, &dir_name)?;
        let confine = confinements.of(&p.name);
        self.envs.push(Environment::demos(false, &confine));
        for (k, process) in p.processes.iter().enumerate() {
            let where_ = || format!("partition `{}`, process {k} (`{}`)", p.name, process.cmd);
            let exec = command::plan(&process.cmd, workdir)
                .map_err(|e| RunError::Invalid(format!("{}: {e}", where_())))?;
            let plan = Prepared::new(&exec.path, &exec.argv, Some(workdir))
                .map_err(|e| RunError::Invalid(format!("{}: {e}", where_())))?
                .confined(&confine);
            self.plans.push(plan);
            let mut pcg = self
                .instance
                .add_process(&cg, k, false)
                .map_err(RunError::Cgroup)?;
            let (plan, env) = (
                self.plans.last().expect("pushed"),
                self.envs.last().expect("pushed"),
            );
            let child = spawn::spawn_into(plan, env, &cg, &mut pcg, &limits.join)
                .map_err(|e| RunError::Spawn(format!("{}: {e}", where_())))?;
            self.procs.push(FreeProc {
                pid: child.pid,
                cgroup: pcg,
                _channel: child.channel,
                memory: child.memory,
                exited: false,
                what: where_(),
                status: None,
            });
            let last = self.procs.last_mut().expect("pushed");
            last.cgroup.set_frozen(false).map_err(RunError::Cgroup)?;
        }
        self.limits.push(limits);
        Ok(())
    }

    /// True once every process has exited (and been reaped).
    pub fn all_exited(&mut self) -> bool {
        for p in &mut self.procs {
            if !p.exited {
                let mut status = 0;
                // SAFETY: waitpid on our own child with a valid status pointer.
                let r = unsafe { libc::waitpid(p.pid, &mut status, libc::WNOHANG) };
                p.exited = r == p.pid || r < 0;
                p.status = (r == p.pid).then_some(status);
            }
        }
        self.procs.iter().all(|p| p.exited)
    }

    /// One line per process reaped so far that did not exit with status 0, with its
    /// status (`exit status: 3`, `signal: 9 (SIGKILL)`).
    pub fn failures(&self) -> Vec<String> {
        self.procs
            .iter()
            .filter_map(|p| Some((p, p.status.filter(|&s| s != 0)?)))
            .map(|(p, s)| format!("{} exited: {}", p.what, ExitStatus::from_raw(s)))
            .collect()
    }
}

impl Drop for FreeRun {
    fn drop(&mut self) {
        self.instance
            .kill_all(self.procs.iter_mut().map(|p| &mut p.cgroup));
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline
            && self
                .procs
                .iter()
                .any(|p| !cgroup::procs(&p.cgroup.dir).is_empty())
        {
            for p in self
                .procs
                .iter_mut()
                .filter(|p| !cgroup::procs(&p.cgroup.dir).is_empty())
            {
                p.cgroup.kill();
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let alive = self
            .procs
            .iter()
            .any(|p| !cgroup::procs(&p.cgroup.dir).is_empty());
        self.all_exited();
        if alive {
            // Not confirmed dead: what they may still read must never be freed.
            for p in &mut self.procs {
                std::mem::forget(p.memory.take());
            }
            std::mem::forget(std::mem::take(&mut self.plans));
            std::mem::forget(std::mem::take(&mut self.envs));
        }
        self.procs.clear();
        if let Err(e) = self.instance.remove() {
            eprintln!("bulkhead: warning: {e}");
        }
    }
}

/// The CPUs of an unwindowed partition: its own set, or (`all`, none) the system's CPUs
/// (else this process's) that no rt partition owns.
fn partition_cpus(system: &System, p: &Partition, own: &CpuSet) -> Result<CpuSet, RunError> {
    if let Some(Cpus::Set(set)) = &p.cpus {
        return Ok(set.clone());
    }
    let rt: Vec<u32> = system
        .partitions
        .iter()
        .filter(|o| o.kind == PartitionKind::Rt)
        .filter_map(|o| match &o.cpus {
            Some(Cpus::Set(s)) => Some(s.iter().collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    let base = system.cpus.as_ref().unwrap_or(own);
    CpuSet::from_cpus(base.iter().filter(|c| !rt.contains(c))).ok_or_else(|| {
        RunError::Invalid(format!(
            "partition `{}`: every CPU belongs to an rt partition; give it `cpus`",
            p.name
        ))
    })
}
