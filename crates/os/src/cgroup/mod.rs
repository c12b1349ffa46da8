//! The machine's cgroup mounts and the calling process's cgroups, read in one place
//! (`/proc/self/mountinfo`, `/proc/self/cgroup`), and the one detection of the cgroups
//! bulkhead uses ([`Layout::detect`], by the one rule of [`Mounts::cpuset_root`]): the
//! supervisor's hierarchy ([`Hierarchy`]), the exclusive cpusets and the v1 limit
//! cgroups (`cpuset`, `limit`) all start from it.
//!
//! The cgroups of a run are behind one interface, [`CgroupManager`], with a backend per
//! version ([`V1Cgroups`], [`V2Cgroups`]) chosen at run time ([`create`]); the cgroup
//! files they and the cleanup of leftovers use are in `files`. The stop-start worker's
//! freezers are behind a second interface, [`Freezers`] ([`HostFreezers`] on this
//! machine), for the reason given in `freezers`. The exclusive cpusets of rt partitions
//! and the shield (host-wide, not a run's: their own lock and undo log) are in
//! [`cpuset`].

pub mod cpuset;
mod files;
mod freezers;
mod manager;
mod v1;
mod v2;

pub use files::{
    enable_controller, hold_moves, is_frozen, kill_cgroup, move_into, partition_dir_name, procs,
    procs_file, set_frozen, write_file, CgroupError, DetectError, FreezerState, Hierarchy, Result,
    Version,
};
pub use freezers::{FreezeError, Freezers, Group, HostFreezers, SETTLE};
pub use manager::{
    create, CgroupManager, Controller, Joins, LimitError, Limited, Partition, Process,
};
pub use v1::V1Cgroups;
pub use v2::V2Cgroups;

use std::io;
use std::path::{Path, PathBuf};

/// One cgroup file system mounted on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted.
    pub path: PathBuf,
    /// A cgroup2 (unified) mount; else a v1 hierarchy.
    pub v2: bool,
    /// A v1 hierarchy's super options, its controllers among them (`rw,cpuset`).
    pub options: Vec<String>,
}

/// The cgroup mounts, in the mount table's order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mounts(pub Vec<Mount>);

impl Mounts {
    /// The calling process's view (`/proc/self/mountinfo`); an error names the file.
    pub fn read() -> io::Result<Mounts> {
        let path = "/proc/self/mountinfo";
        std::fs::read_to_string(path)
            .map(|text| Mounts::parse(&text))
            .map_err(|e| io::Error::new(e.kind(), format!("cannot read {path}: {e}")))
    }

    /// Parses mountinfo text (proc(5): `ID PARENT MAJ:MIN ROOT MOUNT OPTIONS [TAGS...] -
    /// FSTYPE SOURCE SUPER_OPTIONS`); lines of other file systems are skipped.
    pub fn parse(text: &str) -> Mounts {
        let mounts = text.lines().filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let dash = fields.iter().position(|&f| f == "-")?;
            let (path, fstype) = (fields.get(4)?, fields.get(dash + 1)?);
            let options = fields.get(dash + 3).unwrap_or(&"");
            let v2 = match *fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            Some(Mount {
                path: PathBuf::from(path),
                v2,
                options: options.split(',').map(str::to_owned).collect(),
            })
        });
        Mounts(mounts.collect())
    }

    /// The mount point of the v1 hierarchy that holds `controller`, if one does.
    pub fn v1(&self, controller: &str) -> Option<&Path> {
        self.0
            .iter()
            .find(|m| !m.v2 && m.options.iter().any(|o| o == controller))
            .map(|m| m.path.as_path())
    }

    /// The cgroup2 mount points.
    pub fn v2(&self) -> impl Iterator<Item = &Path> {
        self.0.iter().filter(|m| m.v2).map(|m| m.path.as_path())
    }

    /// The memory cgroup directory of the process whose `/proc/PID/cgroup` text is
    /// `proc_cgroup`: in the v1 memory hierarchy where the process has a line for it,
    /// else in the first cgroup2 mount.
    pub fn memory_dir(&self, proc_cgroup: &str) -> Option<PathBuf> {
        match own_cgroup_in(proc_cgroup, Some("memory")) {
            Some(path) => Some(self.v1("memory")?.join(path)),
            None => Some(self.v2().next()?.join(own_cgroup_in(proc_cgroup, None)?)),
        }
    }

    /// The hierarchy bulkhead uses, the one rule for every crate: the v1 hierarchy of
    /// the cpuset controller if one is mounted (a hybrid machine binds cpuset there, and
    /// then no cgroup2 mount can offer it), else the first cgroup2 mount whose root
    /// offers cpuset (`cgroup.controllers`, read through `controllers`). `None`: no
    /// cpuset anywhere, so no CPU can be reserved.
    pub fn cpuset_root(&self, controllers: impl Fn(&Path) -> String) -> Option<CpusetMount> {
        if let Some(path) = self.v1("cpuset") {
            return Some(CpusetMount::V1(path.to_path_buf()));
        }
        let offers = |p: &&Path| controllers(p).split_whitespace().any(|c| c == "cpuset");
        let v2 = self.v2().find(offers)?;
        Some(CpusetMount::V2(v2.to_path_buf()))
    }
}

/// The mount point of the cgroup hierarchy that holds the cpuset controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpusetMount {
    /// A cgroup v1 hierarchy with the cpuset controller, at this mount point.
    V1(PathBuf),
    /// The cgroup v2 hierarchy, at this mount point, with cpuset available.
    V2(PathBuf),
}

impl CpusetMount {
    /// The mount point.
    pub fn mount(&self) -> &Path {
        match self {
            CpusetMount::V1(p) | CpusetMount::V2(p) => p,
        }
    }
}

/// The cgroups of this machine bulkhead uses, found by the one detection every crate
/// shares ([`Layout::detect`]): the supervisor's hierarchy (`bulkhead-runtime`) and the
/// exclusive cpusets and v1 limit cgroups (`cpuset`, `limit`) both start from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Where the cpuset controller is ([`Mounts::cpuset_root`]).
    pub cpuset: CpusetMount,
    /// With a v1 cpuset, the v1 freezer hierarchy's mount point, if one is mounted.
    pub freezer: Option<PathBuf>,
}

impl Layout {
    /// Reads the mount table and applies [`Mounts::cpuset_root`]; an error when the
    /// table cannot be read or no hierarchy offers cpuset.
    pub fn detect() -> io::Result<Layout> {
        Layout::of(&Mounts::read()?)
    }

    /// [`Layout::detect`] on the mount table `mounts`.
    pub fn of(mounts: &Mounts) -> io::Result<Layout> {
        let cpuset = mounts.cpuset_root(controllers).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "no cpuset controller: mount a cgroup v1 hierarchy with -o cpuset, or enable \
                 cpuset in cgroup v2 (it must not be bound to a v1 hierarchy)",
            )
        })?;
        let freezer = match cpuset {
            CpusetMount::V1(_) => mounts.v1("freezer").map(Path::to_path_buf),
            CpusetMount::V2(_) => None,
        };
        Ok(Layout { cpuset, freezer })
    }

    /// The calling process's own cgroup directory in the hierarchy mounted at `mount`:
    /// the v1 hierarchy of `controller`, or with `None` the unified one. An error (never
    /// a guess) when `/proc/self/cgroup` has no line for it.
    pub fn own_dir(mount: &Path, controller: Option<&str>) -> io::Result<PathBuf> {
        let rel = own_cgroup(controller)?.ok_or_else(|| {
            let which = controller.map_or("the unified hierarchy (0::)".to_string(), |c| {
                format!("the {c} controller")
            });
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("/proc/self/cgroup has no line for {which}"),
            )
        })?;
        Ok(mount.join(rel))
    }
}

/// The memory cgroup directory of process `pid` ([`Mounts::memory_dir`]), `None` if
/// its cgroups or the mounts cannot be read.
pub fn memory_dir_of(pid: u32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    Mounts::read().ok()?.memory_dir(&text)
}

/// The text of `<dir>/cgroup.controllers` (empty if it cannot be read).
pub fn controllers(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default()
}

/// The calling process's cgroup, relative to its hierarchy's root (no leading `/`): in
/// the v1 hierarchy of `controller`, or with `None` in the unified one (`0::PATH`);
/// `None` if `/proc/self/cgroup` has no such line. An error names the file.
pub fn own_cgroup(controller: Option<&str>) -> io::Result<Option<String>> {
    let path = "/proc/self/cgroup";
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read {path}: {e}")))?;
    Ok(own_cgroup_in(&text, controller))
}

/// [`own_cgroup`] from the text of a `/proc/PID/cgroup` file (`ID:CONTROLLERS:PATH`).
pub fn own_cgroup_in(text: &str, controller: Option<&str>) -> Option<String> {
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = match controller {
            None => controllers.is_empty(),
            Some(c) => controllers.split(',').any(|x| x == c),
        };
        matches.then(|| path.trim_start_matches('/').to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hybrid machine's mountinfo (this one's: v1 controllers, cgroup2 at `unified`).
    const HYBRID: &str = "\
25 30 0:23 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid shared:5 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:25 / /sys/fs/cgroup/cpuset rw,nosuid shared:6 - cgroup cgroup rw,cpuset
28 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:7 - cgroup cgroup rw,cpu,cpuacct
29 25 0:27 / /sys/fs/cgroup/freezer rw,nosuid shared:8 - cgroup cgroup rw,freezer
";

    #[test]
    fn a_processs_memory_cgroup_is_in_the_v1_memory_hierarchy_else_the_unified_one() {
        let with_memory =
            format!("{HYBRID}30 25 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
        let m = Mounts::parse(&with_memory);
        let v1 = "5:memory:/bulkhead-p\n0::/user.slice\n";
        assert_eq!(
            m.memory_dir(v1),
            Some(PathBuf::from("/sys/fs/cgroup/memory/bulkhead-p"))
        );
        let v2 = "0::/bulkhead-q\n";
        assert_eq!(
            m.memory_dir(v2),
            Some(PathBuf::from("/sys/fs/cgroup/unified/bulkhead-q"))
        );
        assert_eq!(
            Mounts::parse(HYBRID).memory_dir(v1),
            None,
            "no v1 memory mount"
        );
    }

    #[test]
    fn mounts_name_each_controllers_hierarchy_and_the_unified_one() {
        let m = Mounts::parse(HYBRID);
        assert_eq!(m.0.len(), 4, "the tmpfs is no cgroup mount");
        assert_eq!(m.v1("cpuset"), Some(Path::new("/sys/fs/cgroup/cpuset")));
        assert_eq!(
            m.v1("cpuacct"),
            Some(Path::new("/sys/fs/cgroup/cpu,cpuacct"))
        );
        assert_eq!(m.v1("memory"), None);
        assert_eq!(
            m.v2().collect::<Vec<_>>(),
            [Path::new("/sys/fs/cgroup/unified")]
        );
        let pure = Mounts::parse("30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
        assert_eq!(pure.v1("cpuset"), None);
        assert_eq!(pure.v2().collect::<Vec<_>>(), [Path::new("/sys/fs/cgroup")]);
        // This machine's own table parses and has some cgroup mount.
        assert!(!Mounts::read().unwrap().0.is_empty());
    }

    #[test]
    fn cpuset_is_v1_where_bound_there_else_the_first_unified_mount_offering_it() {
        let offering = |p: &Path| match p.ends_with("unified") {
            true => "cpu memory cpuset".to_string(),
            false => String::new(),
        };
        let hybrid = Mounts::parse(HYBRID);
        let v1 = CpusetMount::V1("/sys/fs/cgroup/cpuset".into());
        assert_eq!(hybrid.cpuset_root(offering), Some(v1.clone()));
        let layout = Layout::of(&hybrid).unwrap();
        assert_eq!(layout.cpuset, v1);
        assert_eq!(layout.freezer, Some("/sys/fs/cgroup/freezer".into()));
        let v2_only = Mounts(hybrid.0.into_iter().filter(|m| m.v2).collect());
        let unified = CpusetMount::V2("/sys/fs/cgroup/unified".into());
        assert_eq!(v2_only.cpuset_root(offering), Some(unified));
        assert_eq!(v2_only.cpuset_root(|_| "cpu io".to_string()), None);
        let e = Layout::of(&Mounts(Vec::new())).unwrap_err();
        assert!(e.to_string().contains("no cpuset controller"), "{e}");
    }

    #[test]
    fn own_cgroups_by_controller_and_unified() {
        let text = "12:freezer:/user.slice\n4:cpu,cpuacct:/\n0::/user.slice/session-1.scope\n";
        assert_eq!(
            own_cgroup_in(text, Some("freezer")).as_deref(),
            Some("user.slice")
        );
        assert_eq!(own_cgroup_in(text, Some("cpuacct")).as_deref(), Some(""));
        assert_eq!(
            own_cgroup_in(text, None).as_deref(),
            Some("user.slice/session-1.scope")
        );
        assert_eq!(own_cgroup_in(text, Some("cpuset")), None);
    }
}
