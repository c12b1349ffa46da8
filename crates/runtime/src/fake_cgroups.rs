//! A fake host for the supervisor's tests without root: a [`CgroupManager`] that keeps
//! its cgroups in memory and records every call that changes them, and a spawner that
//! "starts" processes into them (a pid no process has, a real channel), so that the
//! supervisor's decisions (start order, freeze order, cleanup, CPU changes) are
//! checked from the recorded calls; and the stop-start worker's [`Freezers`] and the
//! rt partitions' exclusive [`Cpusets`] on the same host, recorded alike.

use crate::spawn::Child;
use bulkhead_os::cgroup::{
    CgroupError, CgroupManager, Controller, FreezeError, Freezers, Group, Joins, LimitError,
    Limited, Partition, Process, Result,
};
use bulkhead_os::cpuset::{Cpusets, Domain};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// What the supervisor asked the host to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    AddPartition {
        name: String,
        cpus: String,
    },
    SetCpus {
        partition: usize,
        cpus: String,
    },
    Limit {
        partition: usize,
        controller: Controller,
        value: u64,
    },
    /// A process cgroup, created frozen.
    AddProcess {
        partition: usize,
        index: usize,
    },
    /// A process started in process cgroup `process` (by [`Fake::spawn`]).
    Spawn {
        process: usize,
    },
    Freeze {
        process: usize,
    },
    Thaw {
        process: usize,
    },
    Kill {
        process: usize,
    },
    KillAll,
    Remove,
    /// A stop-start freezer group: the adopted cgroup's directory, the created cgroup's
    /// name, or `own` (the processes' own cgroups).
    AddFreezer {
        name: String,
    },
    /// Processes brought into a freezer group (by its name).
    Join {
        freezer: String,
        pids: Vec<u32>,
    },
    FreezeGroup {
        freezer: String,
    },
    ThawGroup {
        freezer: String,
    },
    ReleaseFreezers,
    /// An exclusive cpuset domain, `rel` below the cpuset mount.
    AddDomain {
        rel: String,
        cpus: String,
    },
    RemoveDomain {
        rel: String,
    },
}

/// A fake process cgroup.
struct FakeProcess {
    frozen: bool,
    /// The pid of the process in it, while it runs.
    pid: Option<i32>,
    /// The process's end of its channel, while it runs.
    channel: Option<OwnedFd>,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    partitions: Vec<PathBuf>,
    processes: Vec<FakeProcess>,
    /// The instance and everything below it exist.
    exists: bool,
    /// The first call for which this returns true fails (and is not carried out).
    fail: Option<fn(&Call) -> bool>,
    /// The freezer groups, by name, and whether each was created (to be removed).
    freezers: Vec<(String, bool)>,
    /// Per exclusive domain, whether it still exists.
    domains: Vec<bool>,
}

/// The test's handle on the fake host; [`Fake::cgroups`] is the supervisor's.
#[derive(Clone, Default)]
pub struct Fake(Arc<Mutex<State>>);

/// The [`CgroupManager`] of a [`Fake`].
pub struct FakeCgroups(Fake);

impl Fake {
    /// A fake host whose first call for which `fail` is true fails.
    pub fn failing(fail: fn(&Call) -> bool) -> Fake {
        let fake = Fake::default();
        fake.state().fail = Some(fail);
        fake
    }

    /// The run's cgroups on this host (its instance created).
    pub fn cgroups(&self) -> Box<dyn CgroupManager> {
        self.state().exists = true;
        Box::new(FakeCgroups(self.clone()))
    }

    /// The stop-start worker's freezers on this host.
    pub fn freezers(&self) -> Box<dyn Freezers> {
        Box::new(FakeFreezers(self.clone()))
    }

    /// The freezer cgroups created and not removed.
    pub fn freezers_left(&self) -> usize {
        self.state()
            .freezers
            .iter()
            .filter(|(_, made)| *made)
            .count()
    }

    /// The rt partitions' exclusive cpusets on this host.
    pub fn cpusets(&self) -> Box<dyn Cpusets> {
        Box::new(FakeCpusets(self.clone(), Vec::new()))
    }

    /// The exclusive domains created and not removed.
    pub fn domains_left(&self) -> usize {
        self.state().domains.iter().filter(|&&d| d).count()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// How many cgroups exist and how many processes run.
    pub fn left(&self) -> (usize, usize) {
        let s = self.state();
        let cgroups = match s.exists {
            true => 1 + s.partitions.len() + s.processes.len(),
            false => 0,
        };
        (
            cgroups,
            s.processes.iter().filter(|p| p.pid.is_some()).count(),
        )
    }

    /// Records `call`; an error (and nothing done) when it is the one to fail.
    fn record(&self, call: Call) -> Result<()> {
        let mut s = self.state();
        if s.fail.is_some_and(|fail| fail(&call)) {
            s.fail = None;
            return Err(CgroupError {
                path: PathBuf::from(format!("/fake/{call:?}")),
                what: "carry out",
                source: std::io::Error::from_raw_os_error(bulkhead_os::errno::ENOSPC),
            });
        }
        s.calls.push(call);
        Ok(())
    }

    /// Starts a process in process cgroup `cg`: its pid is one no process has (pids
    /// are below 2^22), its channel a real socket whose other end the host keeps.
    pub fn spawn(&self, cg: Process) -> std::io::Result<Child> {
        self.record(Call::Spawn { process: cg.0 })
            .map_err(std::io::Error::other)?;
        let (ours, theirs) = UnixStream::pair()?;
        let pid = 1 << 30 | cg.0 as i32;
        let mut s = self.state();
        s.processes[cg.0].pid = Some(pid);
        s.processes[cg.0].channel = Some(theirs.into());
        Ok(Child {
            pid,
            channel: ours.into(),
            memory: None,
        })
    }
}

impl CgroupManager for FakeCgroups {
    fn add_partition(&mut self, name: &str, cpus: &str) -> Result<Partition> {
        let (name, cpus) = (name.to_string(), cpus.to_string());
        self.0.record(Call::AddPartition {
            name: name.clone(),
            cpus,
        })?;
        let mut s = self.0.state();
        s.partitions.push(PathBuf::from("/fake").join(name));
        Ok(Partition(s.partitions.len() - 1))
    }

    fn add_partition_below(&mut self, name: &str, cpus: &str, _: &Path) -> Result<Partition> {
        self.add_partition(name, cpus)
    }

    fn partition_dir(&self, _: Partition) -> &Path {
        Path::new("/fake")
    }

    fn set_cpus(&mut self, p: Partition, cpus: &str) -> Result<()> {
        let cpus = cpus.to_string();
        self.0.record(Call::SetCpus {
            partition: p.0,
            cpus,
        })
    }

    fn limit(&mut self, p: Partition, controller: Controller, value: u64) -> Limited {
        let call = Call::Limit {
            partition: p.0,
            controller,
            value,
        };
        self.0.record(call).map_err(LimitError::Cgroup)?;
        Ok(self.0.state().partitions[p.0].clone())
    }

    fn add_process(&mut self, p: Partition, index: usize, _: bool) -> Result<Process> {
        self.0.record(Call::AddProcess {
            partition: p.0,
            index,
        })?;
        let mut s = self.0.state();
        s.processes.push(FakeProcess {
            frozen: true,
            pid: None,
            channel: None,
        });
        Ok(Process(s.processes.len() - 1))
    }

    fn joins(&self, _: Process) -> Joins {
        Joins::Into(PathBuf::from("/fake"))
    }

    fn set_frozen(&mut self, p: Process, frozen: bool) -> Result<()> {
        if self.0.state().processes[p.0].frozen == frozen {
            return Ok(());
        }
        self.0.record(match frozen {
            true => Call::Freeze { process: p.0 },
            false => Call::Thaw { process: p.0 },
        })?;
        self.0.state().processes[p.0].frozen = frozen;
        Ok(())
    }

    fn pids(&self, p: Process) -> Vec<i32> {
        self.0.state().processes[p.0].pid.into_iter().collect()
    }

    fn kill(&mut self, p: Process) {
        if self.0.record(Call::Kill { process: p.0 }).is_ok() {
            let mut s = self.0.state();
            s.processes[p.0].pid = None;
            s.processes[p.0].channel = None;
        }
    }

    fn kill_all(&mut self) {
        if self.0.record(Call::KillAll).is_ok() {
            for p in &mut self.0.state().processes {
                p.pid = None;
                p.channel = None;
            }
        }
    }

    fn remove(&mut self) -> Result<()> {
        if self.0.state().processes.iter().any(|p| p.pid.is_some()) {
            return Err(CgroupError {
                path: PathBuf::from("/fake"),
                what: "remove cgroup",
                source: std::io::Error::from_raw_os_error(bulkhead_os::errno::EBUSY),
            });
        }
        self.0.record(Call::Remove)?;
        let mut s = self.0.state();
        s.partitions.clear();
        s.processes.clear();
        s.exists = false;
        Ok(())
    }

    fn cgroups_left(&self) -> usize {
        self.0.left().0
    }
}

/// The [`Freezers`] of a [`Fake`].
struct FakeFreezers(Fake);

impl FakeFreezers {
    fn add(&mut self, name: String, made: bool) -> Result<Group> {
        self.0.record(Call::AddFreezer { name: name.clone() })?;
        let mut s = self.0.state();
        s.freezers.push((name, made));
        Ok(Group(s.freezers.len() - 1))
    }

    fn name(&self, g: Group) -> String {
        self.0.state().freezers[g.0].0.clone()
    }
}

impl Freezers for FakeFreezers {
    fn adopt(&mut self, dir: &Path) -> Group {
        let name = dir.display().to_string();
        self.add(name, false).expect("adopting cannot fail")
    }

    fn add_group(&mut self, name: &str) -> Result<Group> {
        self.add(name.to_string(), true)
    }

    fn add_own(&mut self) -> Group {
        self.add("own".to_string(), false).expect("own cannot fail")
    }

    fn join(&mut self, g: Group, pids: &[u32]) {
        let freezer = self.name(g);
        let _ = self.0.record(Call::Join {
            freezer,
            pids: pids.to_vec(),
        });
    }

    fn set_frozen(&mut self, g: Group, frozen: bool) -> std::result::Result<(), FreezeError> {
        let freezer = self.name(g);
        Ok(self.0.record(match frozen {
            true => Call::FreezeGroup { freezer },
            false => Call::ThawGroup { freezer },
        })?)
    }

    fn release(&mut self) {
        if self.0.record(Call::ReleaseFreezers).is_ok() {
            self.0.state().freezers.clear();
        }
    }
}

/// The [`Cpusets`] of a [`Fake`]: each domain's directory and CPUs; a call that fails
/// is an invalid-input error.
struct FakeCpusets(Fake, Vec<(PathBuf, String)>);

fn invalid(e: CgroupError) -> bulkhead_os::Error {
    bulkhead_os::Error::Invalid(e.to_string())
}

impl Cpusets for FakeCpusets {
    fn add_domain(&mut self, rel: &Path, cpus: &str) -> bulkhead_os::Result<Domain> {
        let call = Call::AddDomain {
            rel: rel.display().to_string(),
            cpus: cpus.to_string(),
        };
        self.0.record(call).map_err(invalid)?;
        self.0.state().domains.push(true);
        self.1
            .push((Path::new("/fake").join(rel), cpus.to_string()));
        Ok(Domain(self.1.len() - 1))
    }

    fn dir(&self, d: Domain) -> &Path {
        &self.1[d.0].0
    }

    fn cpus(&self, d: Domain) -> &str {
        &self.1[d.0].1
    }

    fn remove(&mut self, d: Domain) -> bulkhead_os::Result<()> {
        let dir = &self.1[d.0].0;
        let rel = dir
            .strip_prefix("/fake")
            .unwrap_or(dir)
            .display()
            .to_string();
        self.0.record(Call::RemoveDomain { rel }).map_err(invalid)?;
        self.0.state().domains[d.0] = false;
        Ok(())
    }
}
