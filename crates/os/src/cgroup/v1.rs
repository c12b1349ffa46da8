//! The cgroup v1 backend of [`CgroupManager`] (freezer and cpuset hierarchies, as in
//! systemd's hybrid or legacy mode): the cpuset is set per partition
//! (`cpuset/.../<partition>`, processes join it directly; a partition on the instance's
//! CPUs stays in the instance's cpuset until it is given others), the freezer per process
//! (`freezer/.../<partition>/proc<i>`), each limit in a hierarchy of its own
//! ([`crate::limit::V1Limit`]).

use super::files::{
    move_into, procs_file, read_file, set_frozen, write_cpus, write_file, Hierarchy, Result,
    Version,
};
use super::manager::{
    on_tree, CgroupManager, Controller, Joins, LimitError, Limited, Partition, Process, Tree,
};
use crate::limit::V1Limit;
use std::path::{Path, PathBuf};

/// The name of the empty frozen freezer cgroup of an instance ([`V1Cgroups`]); partition
/// cgroups are named `p<index>-...` ([`super::files::partition_dir_name`]).
const ANCHOR: &str = "anchor";

/// A run's cgroups on cgroup v1.
pub struct V1Cgroups {
    tree: Tree,
    /// The CPUs of the instance cpuset, which new partitions inherit (`None`: it has
    /// none; every partition is below an rt cpuset).
    cpus: Option<String>,
    /// Per partition: its own cpuset cgroup, or `None` while it is in the instance's
    /// (its CPUs are the instance's).
    cpusets: Vec<Option<PathBuf>>,
    /// Per partition: the `cgroup.procs` files of its v1 limits that every process
    /// joins (pids) and that the process running the program joins (memory).
    joins: Vec<(Vec<PathBuf>, Vec<PathBuf>)>,
    /// The limits' cgroups, removed after the instance's.
    limits: Vec<V1Limit>,
}

impl V1Cgroups {
    /// Creates `<base>/<name>` in the freezer and cpuset hierarchies; its cpuset gets
    /// `cpus` and its parent's memory nodes. On failure nothing is left behind.
    pub fn create(hierarchy: &Hierarchy, name: &str, cpus: Option<&str>) -> Result<V1Cgroups> {
        let mut cgroups = V1Cgroups {
            tree: Tree::new(Version::V1, name),
            cpus: cpus.map(str::to_string),
            cpusets: Vec::new(),
            joins: Vec::new(),
            limits: Vec::new(),
        };
        let setup = cgroups.setup(hierarchy);
        if setup.is_err() {
            let _ = cgroups.tree.remove();
        }
        setup.map(|()| cgroups)
    }

    fn setup(&mut self, hierarchy: &Hierarchy) -> Result<()> {
        for base in hierarchy.bases() {
            self.tree.add_instance_dir(base)?;
        }
        self.freeze_anchor()?;
        let Some(cpus) = &self.cpus else {
            return Ok(());
        };
        let cpuset = self.instance_cpuset().to_path_buf();
        let parent = cpuset.parent().expect("has a parent").to_path_buf();
        let mems = read_file(&parent.join("cpuset.mems"))?;
        write_cpus(&cpuset, cpus)?;
        write_file(&cpuset.join("cpuset.mems"), mems.trim())?;
        // Partitions are born with the instance's CPUs and memory nodes, so that most
        // need no cpuset write at all: each write is checked against every sibling,
        // which makes many writes quadratic.
        write_file(&cpuset.join("cgroup.clone_children"), "1")
    }

    /// Creates the empty cgroup [`ANCHOR`] in the freezer instance, frozen until the
    /// instance is removed. The kernel counts the frozen v1 cgroups in a static key
    /// (`freezer_active`, kernel/cgroup/legacy_freezer.c since 6.1): each change of that
    /// count from 0 to 1 or back patches the kernel's code on every CPU, about 200 µs
    /// here. Held above 0, a thaw of the last frozen process cgroup and the freeze after
    /// it are plain writes, so a window switch may thaw the next partition before it
    /// freezes the last one (`bulkhead_runtime`'s handoff) without that cost.
    fn freeze_anchor(&mut self) -> Result<()> {
        let dir = self.tree.dirs[0].join(ANCHOR);
        self.tree.make(&dir)?;
        set_frozen(&dir, Version::V1, true)
    }

    /// The instance's cgroup in the cpuset hierarchy (created last).
    fn instance_cpuset(&self) -> &Path {
        self.tree.dirs.last().expect("created")
    }

    /// The cpuset cgroup partition `p`'s processes are in.
    fn cpuset_of(&self, p: Partition) -> &Path {
        self.cpusets[p.0]
            .as_deref()
            .unwrap_or_else(|| self.instance_cpuset())
    }

    /// Gives partition `p`, so far in the instance's cpuset, a cpuset of its own on
    /// `cpus` and moves its processes there. Every pass moves the processes not in it
    /// yet; one forked before its parent moved is found by the next pass, one forked
    /// after is born in the new cpuset, so the passes end (forks only between a pass's
    /// read and its moves make another).
    fn own_cpuset(&mut self, p: Partition, cpus: &str) -> Result<()> {
        let dir = self.instance_cpuset().join(&self.tree.partitions[p.0].0);
        self.tree.make(&dir)?;
        self.cpusets[p.0] = Some(dir.clone());
        write_cpus(&dir, cpus)?;
        loop {
            let pids: Vec<u32> = (self.tree.partition_pids(p).into_iter())
                .map(|pid| pid as u32)
                .collect();
            if move_into(&dir, &pids)? == 0 {
                return Ok(());
            }
        }
    }
}

impl CgroupManager for V1Cgroups {
    on_tree!();

    /// A partition on the instance's CPUs gets no cpuset of its own (yet): removing
    /// thousands of sibling cpusets is quadratic in the kernel (each `rmdir` validates
    /// the cpuset against its siblings and rebuilds the scheduling domains under
    /// `cpuset_mutex`), which made the teardown of 10,000 partitions slower than their
    /// startup.
    fn add_partition(&mut self, name: &str, cpus: &str) -> Result<Partition> {
        let p = self.tree.add_partition(name)?;
        self.cpusets.push(None);
        self.joins.push((Vec::new(), Vec::new()));
        self.set_cpus(p, cpus)?;
        Ok(p)
    }

    fn add_partition_below(&mut self, name: &str, cpus: &str, parent: &Path) -> Result<Partition> {
        let p = self.tree.add_partition(name)?;
        let dir = parent.join(format!("{}-{name}", self.tree.name));
        self.tree.make(&dir)?;
        self.cpusets.push(Some(dir.clone()));
        self.joins.push((Vec::new(), Vec::new()));
        let mems = read_file(&parent.join("cpuset.mems"))?;
        write_file(&dir.join("cpuset.mems"), mems.trim())?;
        write_cpus(&dir, cpus)?;
        Ok(p)
    }

    fn set_cpus(&mut self, p: Partition, cpus: &str) -> Result<()> {
        match &self.cpusets[p.0] {
            Some(dir) => write_cpus(dir, cpus),
            None if self.cpus.as_deref() == Some(cpus) => Ok(()),
            None => self.own_cpuset(p, cpus),
        }
    }

    fn limit(&mut self, p: Partition, controller: Controller, value: u64) -> Limited {
        let file = match controller {
            Controller::Memory => "memory.limit_in_bytes",
            Controller::Pids => "pids.max",
            Controller::Cpu => "cpu.cfs_quota_us",
        };
        let name = format!("{}-{}", self.tree.name, self.tree.partitions[p.0].0);
        let limit = V1Limit::create(controller.name(), &name, file, value)
            .map_err(LimitError::Controller)?;
        let dir = limit.dir().to_path_buf();
        let (all, program) = &mut self.joins[p.0];
        match controller {
            Controller::Memory => program.push(procs_file(&dir)),
            Controller::Pids | Controller::Cpu => all.push(procs_file(&dir)),
        }
        self.limits.push(limit);
        Ok(dir)
    }

    fn joins(&self, p: Process) -> Joins {
        let Partition(partition) = self.tree.partition_of(p);
        let (all, program) = &self.joins[partition];
        let mut procs = vec![
            procs_file(self.cpuset_of(Partition(partition))),
            procs_file(self.tree.process_dir(p)),
        ];
        procs.extend(all.iter().cloned());
        Joins::Hold {
            procs,
            program: program.clone(),
        }
    }

    fn kill_all(&mut self) {
        self.tree.kill_under_frozen_instance();
    }

    fn remove(&mut self) -> Result<()> {
        self.tree.remove()?;
        self.limits.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::procs;
    use crate::sched::affinity;
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// The processes of `p`, waited for until there are `n` (at most 5 s).
    fn members(cgroups: &V1Cgroups, p: Process, n: usize) -> Vec<i32> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let pids = cgroups.pids(p);
            if pids.len() == n || Instant::now() > deadline {
                return pids;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// This machine's cgroup v1 hierarchy; `None` (the test is skipped) without one.
    fn v1_hierarchy() -> Option<Hierarchy> {
        match Hierarchy::detect() {
            Ok(hierarchy) if hierarchy.version == Version::V1 => Some(hierarchy),
            _ => {
                eprintln!("skipped: no cgroup v1 hierarchy here");
                None
            }
        }
    }

    /// A v1 instance `bulkhead-test-TAG-PID` on `cpus` with one partition `p` on them,
    /// and the lock of the runs that take CPUs exclusively (another could hold `cpus` as
    /// an exclusive cpuset, which the instance could then not have), held until dropped;
    /// `None` (the test is skipped) without a v1 hierarchy.
    fn instance(tag: &str, cpus: &str) -> Option<(std::fs::File, V1Cgroups, Partition)> {
        let lock = crate::lock::exclusive_cpus().unwrap();
        let hierarchy = v1_hierarchy()?;
        let name = format!("bulkhead-test-{tag}-{}", std::process::id());
        let mut cgroups = V1Cgroups::create(&hierarchy, &name, Some(cpus)).unwrap();
        let p = cgroups.add_partition("p", cpus).unwrap();
        Some((lock, cgroups, p))
    }

    /// `sh -c SCRIPT`, its standard input piped.
    fn shell(script: &str) -> std::process::Child {
        let mut c = Command::new("sh");
        c.args(["-c", script]).stdin(Stdio::piped());
        c.spawn().unwrap()
    }

    /// Removes the instance of `cgroups`, tried again for up to 5 s while the processes
    /// killed in it leave.
    fn remove_within_5s(cgroups: &mut V1Cgroups) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while cgroups.remove().is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A partition on the instance's CPUs is in the instance's cpuset; given other
    /// CPUs, it gets a cpuset of its own, with its processes and what they forked.
    #[test]
    #[ignore = "needs root: cgroup v1 cpuset"]
    fn a_partition_gets_a_cpuset_of_its_own_with_its_processes_once_given_other_cpus() {
        if crate::sched::own_cpus().len() < 2 {
            return;
        }
        let Some((_lock, mut cgroups, p)) = instance("own-cpuset", "0-1") else {
            return;
        };
        let own = cgroups.instance_cpuset().join("p");
        let had_own = own.exists();
        let cg = cgroups.add_process(p, 0, false).unwrap();
        let mut child = shell("read x; sleep 100 & exec sleep 100");
        let Joins::Hold { procs: files, .. } = cgroups.joins(cg) else {
            panic!("v1 joins by holding the child")
        };
        for file in &files {
            write_file(file, &child.id().to_string()).unwrap();
        }
        cgroups.set_frozen(cg, false).unwrap();
        writeln!(child.stdin.take().unwrap()).unwrap();
        let pids = members(&cgroups, cg, 2);
        cgroups.set_cpus(p, "1").unwrap();
        let mut in_own = procs(&own);
        in_own.sort();
        let allowed: Vec<_> = (pids.iter()).map(|&pid| affinity(pid).ok()).collect();
        cgroups.kill_all();
        let _ = child.wait();
        remove_within_5s(&mut cgroups);
        assert!(!had_own, "no cpuset of its own on the instance's CPUs");
        let mut expected = pids.clone();
        expected.sort();
        assert_eq!(in_own, expected, "both processes moved");
        assert_eq!(allowed, [Some(vec![1]), Some(vec![1])]);
        assert_eq!(cgroups.cgroups_left(), 0, "the instance was removed");
    }

    /// `kill_all` kills every process of the instance: in a frozen process cgroup, one
    /// its member forked too, and in a thawed one; the instance can then be removed.
    #[test]
    #[ignore = "needs root: cgroup v1 freezer"]
    fn kill_all_kills_the_members_of_frozen_and_thawed_process_cgroups() {
        let Some((_lock, mut cgroups, p)) = instance("kill-all", "0") else {
            return;
        };
        let (forking, thawed) = (
            cgroups.add_process(p, 0, true).unwrap(),
            cgroups.add_process(p, 1, false).unwrap(),
        );
        let mut parent = shell("read x; sleep 100 & exec sleep 100");
        let mut plain = shell("exec sleep 100");
        let join = |cg: Process, pid: u32| {
            write_file(&procs_file(cgroups.tree.process_dir(cg)), &pid.to_string()).unwrap()
        };
        join(forking, parent.id());
        join(thawed, plain.id());
        cgroups.set_frozen(forking, false).unwrap();
        cgroups.set_frozen(thawed, false).unwrap();
        writeln!(parent.stdin.take().unwrap()).unwrap();
        assert_eq!(
            members(&cgroups, forking, 2).len(),
            2,
            "sh forked its sleep"
        );
        cgroups.set_frozen(forking, true).unwrap();
        cgroups.kill_all();
        let left = (members(&cgroups, forking, 0), members(&cgroups, thawed, 0));
        let _ = (parent.wait(), plain.wait());
        remove_within_5s(&mut cgroups);
        assert_eq!(left, (vec![], vec![]), "every member was killed");
        assert_eq!(cgroups.cgroups_left(), 0, "the instance was removed");
    }
}
