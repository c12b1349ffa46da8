//! The cgroup v1 backend of [`CgroupManager`] (freezer and cpuset hierarchies, as in
//! systemd's hybrid or legacy mode): the cpuset is set per partition
//! (`cpuset/.../<partition>`, processes join it directly), the freezer per process
//! (`freezer/.../<partition>/proc<i>`), each limit in a hierarchy of its own
//! ([`crate::limit::V1Limit`]).

use super::files::{procs_file, read_file, write_cpus, write_file, Hierarchy, Result, Version};
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
    /// Per partition: its cpuset cgroup.
    cpusets: Vec<PathBuf>,
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
        write_file(&dir.join("freezer.state"), "FROZEN")
    }

    /// The instance's cgroup in the cpuset hierarchy (created last).
    fn instance_cpuset(&self) -> &Path {
        self.tree.dirs.last().expect("created")
    }
}

impl CgroupManager for V1Cgroups {
    on_tree!();

    fn add_partition(&mut self, name: &str, cpus: &str) -> Result<Partition> {
        let p = self.tree.add_partition(name)?;
        let dir = self.instance_cpuset().join(name);
        self.tree.make(&dir)?;
        self.cpusets.push(dir);
        self.joins.push((Vec::new(), Vec::new()));
        if self.cpus.as_deref() != Some(cpus) {
            self.set_cpus(p, cpus)?;
        }
        Ok(p)
    }

    fn add_partition_below(&mut self, name: &str, cpus: &str, parent: &Path) -> Result<Partition> {
        let p = self.tree.add_partition(name)?;
        let dir = parent.join(format!("{}-{name}", self.tree.name));
        self.tree.make(&dir)?;
        self.cpusets.push(dir.clone());
        self.joins.push((Vec::new(), Vec::new()));
        let mems = read_file(&parent.join("cpuset.mems"))?;
        write_file(&dir.join("cpuset.mems"), mems.trim())?;
        write_cpus(&dir, cpus)?;
        Ok(p)
    }

    fn set_cpus(&mut self, p: Partition, cpus: &str) -> Result<()> {
        write_cpus(&self.cpusets[p.0], cpus)
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
            procs_file(&self.cpusets[partition]),
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

    /// `kill_all` kills every process of the instance: in a frozen process cgroup, one
    /// its member forked too, and in a thawed one; the instance can then be removed.
    #[test]
    #[ignore = "needs root: cgroup v1 freezer"]
    fn kill_all_kills_the_members_of_frozen_and_thawed_process_cgroups() {
        let Ok(hierarchy) = Hierarchy::detect() else {
            return;
        };
        if hierarchy.version != Version::V1 {
            return;
        }
        let name = format!("bulkhead-test-kill-all-{}", std::process::id());
        let mut cgroups = V1Cgroups::create(&hierarchy, &name, Some("0")).unwrap();
        let p = cgroups.add_partition("p", "0").unwrap();
        let (forking, thawed) = (
            cgroups.add_process(p, 0, true).unwrap(),
            cgroups.add_process(p, 1, false).unwrap(),
        );
        let spawn = |script: &str| {
            let mut c = Command::new("sh");
            c.args(["-c", script]).stdin(Stdio::piped());
            c.spawn().unwrap()
        };
        let mut parent = spawn("read x; sleep 100 & exec sleep 100");
        let mut plain = spawn("exec sleep 100");
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
        let deadline = Instant::now() + Duration::from_secs(5);
        while cgroups.remove().is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(left, (vec![], vec![]), "every member was killed");
        assert_eq!(cgroups.cgroups_left(), 0, "the instance was removed");
    }
}
