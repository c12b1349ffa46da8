//! cgroup backends: v1 (freezer + cpuset hierarchies, as in systemd's hybrid or
//! legacy mode) and v2 (one unified hierarchy: `cgroup.freeze`, `cpuset.cpus`,
//! `cgroup.kill`), detected at run time, nested under the cgroup bulkhead runs in.
//!
//! Layout (the same names in every hierarchy used):
//! `<own cgroup>/bulkhead-<pid>-<start>-<n>/<partition>/proc<i>`: `<pid>` and `<start>`
//! (start time in clock ticks, `/proc/<pid>/stat` field 22) identify the supervisor,
//! so an instance whose supervisor died can be told from a live one even after the
//! pid was reused. v1: the cpuset is set per partition (`cpuset/.../<partition>`,
//! processes join it directly) and the freezer per process
//! (`freezer/.../<partition>/proc<i>`); v2: `cpuset.cpus` on the partition cgroup
//! (enabled in the subtree of the instance), `cgroup.freeze` on the process cgroups.

use bulkhead_model::CpuSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Which cgroup version is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// Where bulkhead creates its cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub version: Version,
    /// v1: the supervisor's cgroup in the freezer hierarchy; v2: in the unified one.
    pub freezer_base: PathBuf,
    /// v1: the supervisor's cgroup in the cpuset hierarchy; v2: `Some(freezer_base)`
    /// when the cpuset controller is available there, else `None` (CPU pinning is
    /// then impossible; only [`Hierarchy::v2_at`] builds such a hierarchy, for tests
    /// of the v2 freezer and kill on hybrid machines).
    pub cpuset_base: Option<PathBuf>,
}

/// A cgroup operation failed.
#[derive(Debug)]
pub struct CgroupError {
    pub path: PathBuf,
    pub what: &'static str,
    pub source: io::Error,
}

impl std::fmt::Display for CgroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot {} {}: {}",
            self.what,
            self.path.display(),
            self.source
        )?;
        let denied = matches!(
            self.source.raw_os_error(),
            Some(bulkhead_os::errno::EACCES)
                | Some(bulkhead_os::errno::EPERM)
                | Some(bulkhead_os::errno::EROFS)
        );
        let busy_control = self.source.raw_os_error() == Some(bulkhead_os::errno::EBUSY)
            && self.path.ends_with("cgroup.subtree_control");
        if busy_control {
            write!(
                f,
                "\ncgroup v2 enables controllers only for cgroups without processes of their own: \
                 start bulkhead in a cgroup of its own, e.g. systemd-run --scope -p Delegate=yes bulkhead run FILE"
            )?;
        }
        if denied {
            write!(
                f,
                "\nbulkhead run needs a writable cgroup hierarchy with the freezer and cpuset \
                 controllers. Run it as root (sudo bulkhead run ...), or, on a cgroup v2 system, \
                 let systemd delegate a cgroup to you: \
                 systemd-run --user --scope -p Delegate=yes bulkhead run FILE"
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for CgroupError {}

pub type Result<T> = std::result::Result<T, CgroupError>;

fn err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CgroupError + 'a {
    move |source| CgroupError {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// Writes `value` to a cgroup file.
pub fn write_file(path: &Path, value: &str) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(err("open", path))?;
    file.write_all(value.as_bytes()).map_err(err("write", path))
}

fn read_file(path: &Path) -> Result<String> {
    let mut text = String::new();
    File::open(path)
        .and_then(|mut f| f.read_to_string(&mut text))
        .map_err(err("read", path))?;
    Ok(text)
}

/// The pids listed in `<dir>/cgroup.procs` (empty if the cgroup is gone).
pub fn procs(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

impl Hierarchy {
    /// The supervisor's cgroups in the one detection of this machine's cgroups
    /// ([`bulkhead_os::cgroup::Layout::detect`]): v1 (with the freezer mounted too)
    /// where cpuset is a v1 controller, else v2 in the cgroup2 mount that offers cpuset
    /// (which must be available to the supervisor's own cgroup too). The supervisor's
    /// own cgroup in each hierarchy is read from `/proc/self/cgroup`; a missing line is
    /// an error, never the hierarchy's root.
    pub fn detect() -> std::result::Result<Hierarchy, String> {
        use bulkhead_os::cgroup::{controllers, CpusetMount, Layout};
        let layout = Layout::detect().map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => format!("no usable cgroups: {e}"),
            _ => e.to_string(),
        })?;
        let own = |mount: &Path, controller| {
            Layout::own_dir(mount, controller).map_err(|e| e.to_string())
        };
        match (&layout.cpuset, &layout.freezer) {
            (CpusetMount::V2(root), _) => {
                let base = own(root, None)?;
                let offered = controllers(&base);
                if !offered.split_whitespace().any(|c| c == "cpuset") {
                    return Err(format!(
                        "the cpuset controller is not available in {} (cgroup.controllers: `{}`): \
                         enable it for this cgroup (as root: echo +cpuset > <parent>/cgroup.subtree_control), \
                         or run under systemd-run --user --scope -p Delegate=yes",
                        base.display(),
                        offered.trim()
                    ));
                }
                Ok(Hierarchy {
                    version: Version::V2,
                    freezer_base: base.clone(),
                    cpuset_base: Some(base),
                })
            }
            (CpusetMount::V1(cpuset), Some(freezer)) => Ok(Hierarchy {
                version: Version::V1,
                freezer_base: own(freezer, Some("freezer"))?,
                cpuset_base: Some(own(cpuset, Some("cpuset"))?),
            }),
            (CpusetMount::V1(_), None) => Err(
                "no usable cgroups: the cpuset controller is mounted as cgroup v1, the freezer controller is not"
                    .into(),
            ),
        }
    }

    /// A v2 hierarchy rooted at `base` (e.g. the cgroup2 mount of a hybrid
    /// machine, `/sys/fs/cgroup/unified`), with CPU pinning only if `cpuset`.
    pub fn v2_at(base: &Path, cpuset: bool) -> Hierarchy {
        Hierarchy {
            version: Version::V2,
            freezer_base: base.to_path_buf(),
            cpuset_base: cpuset.then(|| base.to_path_buf()),
        }
    }

    /// The directories instances are created in (one per hierarchy used).
    pub fn bases(&self) -> Vec<&Path> {
        let mut bases = vec![self.freezer_base.as_path()];
        if let Some(cpuset) = &self.cpuset_base {
            if cpuset != &self.freezer_base {
                bases.push(cpuset);
            }
        }
        bases
    }
}

/// The cgroups of one run.
#[derive(Debug)]
pub struct Instance {
    pub hierarchy: Hierarchy,
    pub name: String,
    /// Instance directories, one per hierarchy (freezer first).
    pub dirs: Vec<PathBuf>,
    /// Created partition and process cgroups, for removal (deepest last).
    created: Vec<PathBuf>,
    /// v1: the CPUs of the instance cpuset, which new partitions inherit.
    cpus: Option<CpuSet>,
}

/// A partition's cgroups.
#[derive(Debug, Clone)]
pub struct PartitionCgroup {
    /// Where its processes' freezer cgroups live.
    pub freezer_dir: PathBuf,
    /// Its cpuset cgroup (v1: in the cpuset hierarchy; v2: the same as `freezer_dir`).
    pub cpuset_dir: Option<PathBuf>,
}

/// A process's cgroup, with its freeze file kept open (the supervisor's one cgroup
/// fd per process) unless descriptors are scarce.
#[derive(Debug)]
pub struct ProcessCgroup {
    pub dir: PathBuf,
    freeze: Option<File>,
    version: Version,
    /// The state last written, so that a write that would change nothing is skipped.
    frozen: bool,
}

impl ProcessCgroup {
    /// Freezes (`true`) or thaws the process cgroup. The kernel stops every task of
    /// the cgroup before it returns to user space; the write returns at once. Nothing
    /// is written when the cgroup is already in that state.
    pub fn set_frozen(&mut self, frozen: bool) -> Result<()> {
        if self.frozen == frozen {
            return Ok(());
        }
        let value = freeze_value(self.version, frozen).as_bytes();
        let path;
        let mut opened;
        let file = match &mut self.freeze {
            Some(file) => file,
            None => {
                path = self.dir.join(freeze_file(self.version));
                opened = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(err("open", &path))?;
                &mut opened
            }
        };
        file.write_all(value)
            .map_err(err("write the freezer state of", &self.dir))?;
        self.frozen = frozen;
        Ok(())
    }

    /// The cgroup version of this process cgroup.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Kills every process in the cgroup (v2 `cgroup.kill`; v1: freeze, SIGKILL each, thaw).
    pub fn kill(&mut self) {
        kill_cgroup(&self.dir, self.version);
    }
}

/// Kills the processes of the cgroup `dir` (and, on v2, of its descendants).
pub fn kill_cgroup(dir: &Path, version: Version) {
    if version == Version::V2 && write_file(&dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    // v1 (or a kernel without cgroup.kill): freeze so that nothing forks meanwhile,
    // signal every member, thaw so that the signals are delivered.
    let _ = set_frozen(dir, version, true);
    for pid in procs(dir) {
        // `pid` is a member of a cgroup this supervisor owns.
        let _ = bulkhead_os::proc::kill(pid, bulkhead_os::proc::SIGKILL);
    }
    let _ = set_frozen(dir, version, false);
}

impl Instance {
    /// Creates `<base>/<name>` in every hierarchy. v1: its cpuset gets `cpus` (the
    /// CPUs the schedule uses) and its parent's memory nodes; v2: the cpuset
    /// controller is enabled for its subtree. On failure nothing is left behind.
    pub fn create(hierarchy: &Hierarchy, name: &str, cpus: &CpuSet) -> Result<Instance> {
        Instance::create_on(hierarchy, name, Some(cpus))
    }

    /// [`Instance::create`]; `None`: v1's instance cpuset gets no CPUs (every partition's
    /// cpuset is made elsewhere: [`Instance::add_partition_below`]).
    pub fn create_on(hierarchy: &Hierarchy, name: &str, cpus: Option<&CpuSet>) -> Result<Instance> {
        let mut instance = Instance {
            hierarchy: hierarchy.clone(),
            name: name.to_string(),
            dirs: Vec::new(),
            created: Vec::new(),
            cpus: None,
        };
        let setup = instance.setup(cpus);
        if setup.is_err() {
            let _ = instance.remove();
        }
        setup.map(|()| instance)
    }

    fn setup(&mut self, cpus: Option<&CpuSet>) -> Result<()> {
        for base in self.hierarchy.bases() {
            let dir = base.join(&self.name);
            fs::create_dir(&dir).map_err(err("create cgroup", &dir))?;
            self.dirs.push(dir);
        }
        match (self.hierarchy.version, cpus) {
            (Version::V1, None) => {}
            (Version::V1, Some(cpus)) => {
                let cpuset = self.cpuset_dir().expect("v1 has a cpuset").to_path_buf();
                let parent = cpuset.parent().expect("has a parent").to_path_buf();
                let mems = read_file(&parent.join("cpuset.mems"))?;
                write_cpus(&cpuset, cpus)?;
                write_file(&cpuset.join("cpuset.mems"), mems.trim())?;
                // Partitions are born with the instance's CPUs and memory nodes, so
                // that most need no cpuset write at all: each write is checked
                // against every sibling, which makes many writes quadratic.
                write_file(&cpuset.join("cgroup.clone_children"), "1")?;
                self.cpus = Some(cpus.clone());
            }
            (Version::V2, _) => {
                if self.hierarchy.cpuset_base.is_some() {
                    enable_cpuset(&self.hierarchy.freezer_base)?;
                    enable_cpuset(&self.dirs[0])?;
                }
            }
        }
        Ok(())
    }

    fn cpuset_dir(&self) -> Option<&Path> {
        self.hierarchy
            .cpuset_base
            .as_ref()
            .map(|_| self.dirs.last().expect("created").as_path())
    }

    /// Creates the cgroup of a partition (named `name`) on `cpus`.
    pub fn add_partition(&mut self, name: &str, cpus: &CpuSet) -> Result<PartitionCgroup> {
        let freezer_dir = self.dirs[0].join(name);
        fs::create_dir(&freezer_dir).map_err(err("create cgroup", &freezer_dir))?;
        self.created.push(freezer_dir.clone());
        let instance_cpuset = self.cpuset_dir().map(Path::to_path_buf);
        let cpuset_dir = match (self.hierarchy.version, instance_cpuset) {
            (_, None) => None,
            (Version::V2, Some(_)) => Some(freezer_dir.clone()),
            (Version::V1, Some(instance)) => {
                let dir = instance.join(name);
                fs::create_dir(&dir).map_err(err("create cgroup", &dir))?;
                self.created.push(dir.clone());
                Some(dir)
            }
        };
        let partition = PartitionCgroup {
            freezer_dir,
            cpuset_dir,
        };
        if self.cpus.as_ref() != Some(cpus) {
            set_cpus(&partition, cpus)?;
        }
        Ok(partition)
    }

    /// [`Instance::add_partition`] for a best-effort partition on CPUs of a non-exclusive
    /// rt partition (v1 only): its cpuset is `<parent>/<instance>-<name>`, a plain child
    /// of `parent`, the rt cpuset holding its CPUs, since the kernel gives no sibling of
    /// an exclusive cpuset its CPUs; its freezer cgroup is where
    /// [`Instance::add_partition`] puts it. The cpuset is removed with the instance's
    /// cgroups, before the rt partitions stop.
    pub fn add_partition_below(
        &mut self,
        name: &str,
        cpus: &CpuSet,
        parent: &Path,
    ) -> Result<PartitionCgroup> {
        let freezer_dir = self.dirs[0].join(name);
        fs::create_dir(&freezer_dir).map_err(err("create cgroup", &freezer_dir))?;
        self.created.push(freezer_dir.clone());
        let dir = parent.join(format!("{}-{name}", self.name));
        fs::create_dir(&dir).map_err(err("create cgroup", &dir))?;
        self.created.push(dir.clone());
        let mems = read_file(&parent.join("cpuset.mems"))?;
        write_file(&dir.join("cpuset.mems"), mems.trim())?;
        write_cpus(&dir, cpus)?;
        Ok(PartitionCgroup {
            freezer_dir,
            cpuset_dir: Some(dir),
        })
    }

    /// Creates the (frozen) cgroup `proc<index>` of a process of `partition`;
    /// `keep_open`: keep its freeze file open (fast switches, one fd).
    pub fn add_process(
        &mut self,
        partition: &PartitionCgroup,
        index: usize,
        keep_open: bool,
    ) -> Result<ProcessCgroup> {
        let dir = partition.freezer_dir.join(format!("proc{index}"));
        fs::create_dir(&dir).map_err(err("create cgroup", &dir))?;
        self.created.push(dir.clone());
        let version = self.hierarchy.version;
        let file = dir.join(freeze_file(version));
        let freeze = match keep_open {
            true => Some(
                OpenOptions::new()
                    .write(true)
                    .open(&file)
                    .map_err(err("open", &file))?,
            ),
            false => None,
        };
        let mut process = ProcessCgroup {
            dir,
            freeze,
            version,
            frozen: false,
        };
        process.set_frozen(true)?;
        Ok(process)
    }

    /// Kills every process of the instance (v2: `cgroup.kill` on the instance).
    pub fn kill_all<'a>(&self, processes: impl Iterator<Item = &'a mut ProcessCgroup>) {
        if self.hierarchy.version == Version::V2
            && write_file(&self.dirs[0].join("cgroup.kill"), "1").is_ok()
        {
            return;
        }
        for p in processes {
            p.kill();
        }
    }

    /// How many cgroups of the instance exist (partitions, processes, instance dirs).
    pub fn cgroups_left(&self) -> usize {
        self.created.len() + self.dirs.len()
    }

    /// Removes the cgroups, deepest first; fails if a cgroup still has members.
    pub fn remove(&mut self) -> Result<()> {
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

fn freeze_file(version: Version) -> &'static str {
    match version {
        Version::V1 => "freezer.state",
        Version::V2 => "cgroup.freeze",
    }
}

/// What [`freeze_file`] is written to freeze (`frozen`) or thaw.
fn freeze_value(version: Version, frozen: bool) -> &'static str {
    match (version, frozen) {
        (Version::V1, true) => "FROZEN",
        (Version::V1, false) => "THAWED",
        (Version::V2, true) => "1",
        (Version::V2, false) => "0",
    }
}

/// Writes the freezer state of cgroup `dir`.
pub fn set_frozen(dir: &Path, version: Version, frozen: bool) -> Result<()> {
    let value = freeze_value(version, frozen);
    write_file(&dir.join(freeze_file(version)), value)
}

/// Whether cgroup `dir` is frozen now, as the kernel reports it (v1 `freezer.state`:
/// `FROZEN`, not `FREEZING`; v2 `cgroup.events`: `frozen 1`); `None` if unreadable.
pub fn is_frozen(dir: &Path, version: Version) -> Option<bool> {
    match version {
        Version::V1 => {
            let state = fs::read_to_string(dir.join("freezer.state")).ok()?;
            Some(state.trim() == "FROZEN")
        }
        Version::V2 => {
            let events = fs::read_to_string(dir.join("cgroup.events")).ok()?;
            Some(events.lines().any(|l| l.trim() == "frozen 1"))
        }
    }
}

fn remove_dir(dir: &Path) -> Result<()> {
    match fs::remove_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(err("remove cgroup", dir)(e)),
        _ => Ok(()),
    }
}

/// v2: enables the cpuset controller for the children of `dir` (if not already).
fn enable_cpuset(dir: &Path) -> Result<()> {
    enable_controller(dir, "cpuset")
}

/// v2: enables `controller` for the children of `dir` (if not already).
pub fn enable_controller(dir: &Path, controller: &str) -> Result<()> {
    let control = dir.join("cgroup.subtree_control");
    if read_file(&control)?
        .split_whitespace()
        .any(|c| c == controller)
    {
        return Ok(());
    }
    write_file(&control, &format!("+{controller}"))
}

/// Pins the partition to `cpus` (no-op without a cpuset).
pub fn set_cpus(partition: &PartitionCgroup, cpus: &CpuSet) -> Result<()> {
    match &partition.cpuset_dir {
        Some(dir) => write_cpus(dir, cpus),
        None => Ok(()),
    }
}

/// Writes `cpuset.cpus`; the kernel refuses CPUs another cgroup owns exclusively.
fn write_cpus(dir: &Path, cpus: &CpuSet) -> Result<()> {
    let path = dir.join("cpuset.cpus");
    write_file(&path, &cpus.to_string()).map_err(|e| match e.source.raw_os_error() {
        Some(bulkhead_os::errno::EINVAL) => CgroupError {
            what: "give CPUs (another cgroup may own them exclusively: cpuset.cpu_exclusive) to",
            ..e
        },
        _ => e,
    })
}

/// A cgroup-safe name for a partition: letters, digits, `-`, `_` and `.` kept,
/// anything else replaced by `_`; prefixed with its index so that names stay unique.
pub fn partition_dir_name(index: usize, name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("p{index}-{clean}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_errors_say_how_to_get_rights() {
        let e = CgroupError {
            path: PathBuf::from("/sys/fs/cgroup/freezer/bulkhead-1-2-0"),
            what: "create cgroup",
            source: io::Error::from_raw_os_error(bulkhead_os::errno::EACCES),
        };
        let text = e.to_string();
        assert!(
            text.starts_with(
                "cannot create cgroup /sys/fs/cgroup/freezer/bulkhead-1-2-0: Permission denied"
            ),
            "{text}"
        );
        assert!(
            text.contains("as root") && text.contains("systemd-run --user --scope -p Delegate=yes"),
            "{text}"
        );
        let other = CgroupError {
            source: io::Error::from_raw_os_error(bulkhead_os::errno::ENOSPC),
            ..e
        };
        assert!(!other.to_string().contains("systemd-run"));
    }

    #[test]
    fn partition_names_are_cgroup_safe() {
        assert_eq!(partition_dir_name(3, "SC1"), "p3-SC1");
        assert_eq!(partition_dir_name(0, "a/b c"), "p0-a_b_c");
    }
}
