//! The stop-start worker's freezers (docs/stop-start.md): [`Freezers`] is everything the
//! worker does with cgroups (create a freezer cgroup per rt partition, move the tasks
//! into it, freeze and thaw, move them back and remove the cgroups), [`HostFreezers`]
//! carries it out on v1 (`freezer.state`) or v2 (`cgroup.freeze`) as detected, and a
//! fake host records it in tests without root.
//!
//! A second trait beside [`super::CgroupManager`], not more methods on it: the worker
//! runs on its own thread for the whole run and owns cgroups the run's manager does not
//! (its own instance in the freezer hierarchy, which the rt tasks join from their
//! cpusets), while it freezes cgroups others own (a best-effort partition's, the rt
//! tasks' own v2 cgroups); the run's manager is held by the supervisor's loop.

use super::files::{err, is_frozen, move_into, procs, remove_dir, set_frozen, CgroupError};
use super::{own_cgroup_in, Hierarchy, Mounts, Result, Version};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a freeze or thaw may take to show in the cgroup's state.
pub const SETTLE: Duration = Duration::from_secs(1);
/// How often the state is read while it settles.
const SETTLE_POLL: Duration = Duration::from_micros(20);

/// A group of cgroups frozen and thawed together: the `n`th one added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group(pub usize);

/// Why a group could not be frozen or thawed.
#[derive(Debug, thiserror::Error)]
pub enum FreezeError {
    #[error(transparent)]
    Write(#[from] CgroupError),
    /// Its cgroup `dir` did not settle in [`SETTLE`].
    #[error("{} is not {} after {SETTLE:?}", dir.display(), if *frozen { "frozen" } else { "thawed" })]
    Unsettled { dir: PathBuf, frozen: bool },
}

/// What the stop-start worker does with cgroups. Every cgroup it creates is removed by
/// [`Freezers::release`], which the worker calls however it ends.
pub trait Freezers: Send {
    /// A group of one cgroup `dir` that exists already and holds its processes (a
    /// best-effort partition's).
    fn adopt(&mut self, dir: &Path) -> Group;
    /// A group of one new cgroup `name` in the worker's instance, which processes join
    /// ([`Freezers::join`]).
    fn add_group(&mut self, name: &str) -> Result<Group>;
    /// A group of the processes' own cgroups (pure v2: an rt task's cpuset domain).
    fn add_own(&mut self) -> Group;
    /// Brings processes `pids` into group `g`: into its cgroup those not in it yet
    /// ([`Freezers::add_group`]), or their own cgroups now ([`Freezers::add_own`]).
    fn join(&mut self, g: Group, pids: &[u32]);
    /// Freezes (`true`) or thaws group `g`, and waits until its cgroups say so.
    fn set_frozen(&mut self, g: Group, frozen: bool) -> std::result::Result<(), FreezeError>;
    /// Moves the processes of the created cgroups home and removes those cgroups and the
    /// instance; nothing the second time.
    fn release(&mut self);
}

enum HostGroup {
    Adopted(PathBuf),
    Created(PathBuf),
    Own(Vec<PathBuf>),
}

/// The worker's freezers on this machine.
pub struct HostFreezers {
    version: Version,
    /// The supervisor's own freezer cgroup, where moved processes go back.
    home: PathBuf,
    /// The instance directory that [`Freezers::add_group`] creates cgroups in.
    instance: Option<PathBuf>,
    /// The cgroup2 mount point, where [`Freezers::add_own`]'s processes' cgroups are.
    unified: Option<PathBuf>,
    groups: Vec<HostGroup>,
}

impl HostFreezers {
    /// The freezers of `hierarchy`; with `instance`, creates that directory in its
    /// freezer base for [`Freezers::add_group`].
    pub fn create(hierarchy: &Hierarchy, instance: Option<&str>) -> Result<HostFreezers> {
        let home = hierarchy.freezer_base.clone();
        let instance = instance.map(|name| home.join(name));
        if let Some(dir) = &instance {
            fs::create_dir(dir).map_err(err("create cgroup", dir))?;
        }
        let unified = Mounts::read()
            .ok()
            .and_then(|m| m.v2().next().map(Path::to_path_buf));
        Ok(HostFreezers {
            version: hierarchy.version,
            home,
            instance,
            unified,
            groups: Vec::new(),
        })
    }

    fn dirs(&self, g: Group) -> &[PathBuf] {
        match &self.groups[g.0] {
            HostGroup::Adopted(dir) | HostGroup::Created(dir) => std::slice::from_ref(dir),
            HostGroup::Own(dirs) => dirs,
        }
    }

    fn push(&mut self, group: HostGroup) -> Group {
        self.groups.push(group);
        Group(self.groups.len() - 1)
    }
}

impl Freezers for HostFreezers {
    fn adopt(&mut self, dir: &Path) -> Group {
        self.push(HostGroup::Adopted(dir.to_path_buf()))
    }

    fn add_group(&mut self, name: &str) -> Result<Group> {
        let instance = self.instance.as_ref().expect("created with an instance");
        let dir = instance.join(name);
        fs::create_dir(&dir).map_err(err("create cgroup", &dir))?;
        Ok(self.push(HostGroup::Created(dir)))
    }

    fn add_own(&mut self) -> Group {
        self.push(HostGroup::Own(Vec::new()))
    }

    fn join(&mut self, g: Group, pids: &[u32]) {
        match &mut self.groups[g.0] {
            HostGroup::Adopted(_) => {}
            // The tasks stay in their partition's freezer cgroup between suspends instead
            // of moving at each one (the cost in `move_into`); one that cannot move is no
            // error here.
            HostGroup::Created(dir) => {
                let _ = move_into(dir, pids);
            }
            HostGroup::Own(dirs) => {
                let unified = self.unified.as_deref();
                *dirs = pids
                    .iter()
                    .filter_map(|&p| own_cgroup(unified?, p))
                    .collect();
            }
        }
    }

    fn set_frozen(&mut self, g: Group, frozen: bool) -> std::result::Result<(), FreezeError> {
        for dir in self.dirs(g) {
            set_frozen(dir, self.version, frozen)?;
        }
        let until = Instant::now() + SETTLE;
        for dir in self.dirs(g) {
            while is_frozen(dir, self.version) != Some(frozen) {
                if Instant::now() >= until {
                    let dir = dir.clone();
                    return Err(FreezeError::Unsettled { dir, frozen });
                }
                std::thread::sleep(SETTLE_POLL);
            }
        }
        Ok(())
    }

    fn release(&mut self) {
        for group in std::mem::take(&mut self.groups) {
            if let HostGroup::Created(dir) = group {
                let members: Vec<u32> = procs(&dir).into_iter().map(|p| p as u32).collect();
                let _ = move_into(&self.home, &members);
                let _ = remove_dir(&dir);
            }
        }
        if let Some(dir) = self.instance.take() {
            let _ = remove_dir(&dir);
        }
    }
}

/// The cgroup directory of process `pid` in the cgroup2 hierarchy mounted at `unified`
/// (its `0::/path` line in `/proc/PID/cgroup`).
fn own_cgroup(unified: &Path, pid: u32) -> Option<PathBuf> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    Some(unified.join(own_cgroup_in(&text, None)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process's own v2 cgroup is found under the cgroup2 mount wherever it is (on a
    /// hybrid machine, `/sys/fs/cgroup/unified`), not under a fixed `/sys/fs/cgroup`.
    #[test]
    fn a_process_is_found_in_its_cgroup_under_the_unified_mount() {
        let Some(unified) = Mounts::read().unwrap().v2().next().map(Path::to_path_buf) else {
            eprintln!("skipped: no cgroup2 mount on this machine");
            return;
        };
        let me = std::process::id();
        let dir = own_cgroup(&unified, me).expect("a 0:: line in /proc/self/cgroup");
        assert!(dir.starts_with(&unified), "{}", dir.display());
        assert!(
            procs(&dir).contains(&(me as i32)),
            "{} does not list us",
            dir.display()
        );
    }
}
