//! The cgroup v2 backend of [`CgroupManager`] (one unified hierarchy): `cpuset.cpus`
//! and the limits (`memory.max`, `pids.max`) on the partition's cgroup, the
//! controllers enabled down to it; `cgroup.freeze` on the process cgroups, which
//! children are spawned into; `cgroup.kill` on the instance.

use super::files::{
    enable_controller, write_cpus, write_file, CgroupError, Hierarchy, Result, Version,
};
use super::manager::{
    on_tree, CgroupManager, Controller, Joins, LimitError, Limited, Partition, Process, Tree,
};
use std::path::{Path, PathBuf};

/// A run's cgroups on cgroup v2.
pub struct V2Cgroups {
    tree: Tree,
    /// The supervisor's own cgroup, the instance's parent.
    base: PathBuf,
    /// The cpuset controller is available (else CPU pinning is impossible).
    cpuset: bool,
}

impl V2Cgroups {
    /// Creates `<base>/<name>` and enables the cpuset controller for its subtree (if
    /// the hierarchy offers it). The instance's CPUs need no cpuset of their own: each
    /// partition gets its CPUs. On failure nothing is left behind.
    pub fn create(hierarchy: &Hierarchy, name: &str, _cpus: Option<&str>) -> Result<V2Cgroups> {
        let mut cgroups = V2Cgroups {
            tree: Tree::new(Version::V2, name),
            base: hierarchy.freezer_base.clone(),
            cpuset: hierarchy.cpuset_base.is_some(),
        };
        let setup = cgroups.setup();
        if setup.is_err() {
            let _ = cgroups.tree.remove();
        }
        setup.map(|()| cgroups)
    }

    fn setup(&mut self) -> Result<()> {
        self.tree.add_instance_dir(&self.base)?;
        if self.cpuset {
            enable_controller(&self.base, "cpuset")?;
            enable_controller(&self.tree.dirs[0], "cpuset")?;
        }
        Ok(())
    }
}

impl CgroupManager for V2Cgroups {
    on_tree!();

    fn add_partition(&mut self, name: &str, cpus: &str) -> Result<Partition> {
        let p = self.tree.add_partition(name)?;
        self.set_cpus(p, cpus)?;
        Ok(p)
    }

    fn add_partition_below(&mut self, _: &str, _: &str, parent: &Path) -> Result<Partition> {
        Err(CgroupError {
            path: parent.to_path_buf(),
            what: "create a best-effort partition's cpuset below",
            source: std::io::Error::from_raw_os_error(crate::errno::EOPNOTSUPP),
        })
    }

    fn set_cpus(&mut self, p: Partition, cpus: &str) -> Result<()> {
        match self.cpuset {
            true => write_cpus(self.partition_dir(p), cpus),
            false => Ok(()),
        }
    }

    fn limit(&mut self, p: Partition, controller: Controller, value: u64) -> Limited {
        let name = controller.name();
        for dir in [&self.base, &self.tree.dirs[0]] {
            enable_controller(dir, name).map_err(LimitError::Cgroup)?;
        }
        let dir = self.partition_dir(p).to_path_buf();
        let file = dir.join(format!("{name}.max"));
        write_file(&file, &value.to_string()).map_err(LimitError::Cgroup)?;
        Ok(dir)
    }

    fn joins(&self, p: Process) -> Joins {
        Joins::Into(self.tree.process_dir(p).to_path_buf())
    }

    fn kill_all(&mut self) {
        if write_file(&self.tree.dirs[0].join("cgroup.kill"), "1").is_err() {
            self.tree.kill_each();
        }
    }

    fn remove(&mut self) -> Result<()> {
        self.tree.remove()
    }
}
