//! The cgroup files bulkhead reads and writes, by path: the supervisor's hierarchy
//! ([`Hierarchy`]), freezing, killing and listing a cgroup's processes, enabling a v2
//! controller, and the errors of these operations ([`CgroupError`]). The backends of
//! [`super::manager::CgroupManager`] and the cleanup of leftovers are built on them.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

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
            Some(crate::errno::EACCES) | Some(crate::errno::EPERM) | Some(crate::errno::EROFS)
        );
        let busy_control = self.source.raw_os_error() == Some(crate::errno::EBUSY)
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

pub(super) fn err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> CgroupError + 'a {
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

pub(super) fn read_file(path: &Path) -> Result<String> {
    let mut text = String::new();
    File::open(path)
        .and_then(|mut f| f.read_to_string(&mut text))
        .map_err(err("read", path))?;
    Ok(text)
}

/// The file of cgroup `dir` that lists its processes and that a process is written
/// into to join it.
pub fn procs_file(dir: &Path) -> PathBuf {
    dir.join("cgroup.procs")
}

/// The pids listed in `<dir>/cgroup.procs` (empty if the cgroup is gone).
pub fn procs(dir: &Path) -> Vec<i32> {
    fs::read_to_string(procs_file(dir))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// How many processes this process moved between cgroups with [`move_into`] (each move
/// counted as it is tried), under a lock its observers share ([`hold_moves`]).
static MOVES: RwLock<u64> = RwLock::new(0);

/// Holds off every [`move_into`] of this process until the guard is dropped, and gives
/// how many it made so far. An observer that sees the same count as at an earlier hold
/// knows that no process was moved by [`move_into`] in between: a mode agent that placed
/// a task in its park cgroup knows it is still there without reading the cgroup's
/// processes (which the stop-start worker's moves, the other mover, would change).
pub fn hold_moves() -> RwLockReadGuard<'static, u64> {
    MOVES.read().unwrap_or_else(PoisonError::into_inner)
}

/// Moves the processes `pids` that are not in cgroup `dir` yet into it (each with its
/// every thread) and returns how many it moved. Only the missing ones are written: each
/// migration takes the kernel's cgroup threadgroup lock, whose first taking after a quiet
/// time waits for an RCU grace period (about 10 ms here). A process that exited meanwhile
/// (ESRCH) is no error; after another error the rest are still moved and the first error
/// is returned. Counted, and waits for the observers that hold [`hold_moves`].
pub fn move_into(dir: &Path, pids: &[u32]) -> Result<usize> {
    let mut moves = MOVES.write().unwrap_or_else(PoisonError::into_inner);
    let there = procs(dir);
    let file = procs_file(dir);
    let (mut moved, mut failed) = (0, None);
    for &pid in pids.iter().filter(|&&p| !there.contains(&(p as i32))) {
        // A call that finds every process in place changes no count: a park that placed
        // its task need not place it again (a write of its pid, and the kernel's
        // threadgroup lock, for nothing).
        *moves += 1;
        match write_file(&file, &pid.to_string()) {
            Ok(()) => moved += 1,
            Err(e) if e.source.raw_os_error() == Some(crate::errno::ESRCH) => {}
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    failed.map_or(Ok(moved), Err)
}

/// Why this machine's cgroups cannot hold partitions ([`Hierarchy::detect`]).
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    #[error("no usable cgroups: {0}")]
    NoCgroups(io::Error),
    /// The mount table could not be read.
    #[error("{0}")]
    Mounts(io::Error),
    /// The supervisor's own cgroup is not listed in `/proc/self/cgroup`.
    #[error("{0}")]
    OwnCgroup(io::Error),
    #[error(
        "the cpuset controller is not available in {} (cgroup.controllers: `{offered}`): \
         enable it for this cgroup (as root: echo +cpuset > <parent>/cgroup.subtree_control), \
         or run under systemd-run --user --scope -p Delegate=yes",
        base.display()
    )]
    NoCpuset { base: PathBuf, offered: String },
    #[error("no usable cgroups: the cpuset controller is mounted as cgroup v1, the freezer controller is not")]
    NoV1Freezer,
}

impl Hierarchy {
    /// The supervisor's cgroups in the one detection of this machine's cgroups
    /// ([`super::Layout::detect`]): v1 (with the freezer mounted too)
    /// where cpuset is a v1 controller, else v2 in the cgroup2 mount that offers cpuset
    /// (which must be available to the supervisor's own cgroup too). The supervisor's
    /// own cgroup in each hierarchy is read from `/proc/self/cgroup`; a missing line is
    /// an error, never the hierarchy's root.
    pub fn detect() -> std::result::Result<Hierarchy, DetectError> {
        use super::{controllers, CpusetMount, Layout};
        let layout = Layout::detect().map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => DetectError::NoCgroups(e),
            _ => DetectError::Mounts(e),
        })?;
        let own = |mount: &Path, controller| {
            Layout::own_dir(mount, controller).map_err(DetectError::OwnCgroup)
        };
        match (&layout.cpuset, &layout.freezer) {
            (CpusetMount::V2(root), _) => {
                let base = own(root, None)?;
                let offered = controllers(&base);
                if !offered.split_whitespace().any(|c| c == "cpuset") {
                    return Err(DetectError::NoCpuset {
                        base,
                        offered: offered.trim().to_string(),
                    });
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
            (CpusetMount::V1(_), None) => Err(DetectError::NoV1Freezer),
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
        let _ = crate::proc::kill(pid, crate::proc::SIGKILL);
    }
    let _ = set_frozen(dir, version, false);
}

pub(super) fn freeze_file(version: Version) -> &'static str {
    match version {
        Version::V1 => "freezer.state",
        Version::V2 => "cgroup.freeze",
    }
}

/// What [`freeze_file`] is written to freeze (`frozen`) or thaw.
pub(super) fn freeze_value(version: Version, frozen: bool) -> &'static str {
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
            let state = fs::read_to_string(dir.join(freeze_file(Version::V1))).ok()?;
            Some(v1_frozen(&state))
        }
        Version::V2 => {
            let events = fs::read_to_string(dir.join("cgroup.events")).ok()?;
            Some(events.lines().any(|l| l.trim() == "frozen 1"))
        }
    }
}

/// Whether the text of a v1 `freezer.state` says frozen: `FROZEN`, not `FREEZING`.
fn v1_frozen(state: &str) -> bool {
    state.trim() == "FROZEN"
}

/// A cgroup's v1 `freezer.state`, held open: a freeze, a look at the state and a thaw
/// are one system call each (`pwrite`/`pread` at offset 0) instead of an open, the
/// access and a close each; a mode agent's park made nine of them (opens took 3-7 µs on
/// the 2-vCPU VM, docs/modes.md, An agent on its tasks' CPU).
pub struct FreezerState(File);

impl FreezerState {
    /// Opens the `freezer.state` of v1 cgroup `dir` for reading and writing.
    pub fn open(dir: &Path) -> io::Result<FreezerState> {
        let path = dir.join(freeze_file(Version::V1));
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(FreezerState(file))
    }

    /// Freezes (`true`) or thaws the cgroup.
    pub fn set(&self, frozen: bool) -> io::Result<()> {
        let value = freeze_value(Version::V1, frozen);
        FileExt::write_at(&self.0, value.as_bytes(), 0).map(drop)
    }

    /// Whether the kernel reports the cgroup `FROZEN` (not `FREEZING`); `None` if unreadable.
    pub fn frozen(&self) -> Option<bool> {
        let mut text = [0u8; 16];
        let n = FileExt::read_at(&self.0, &mut text, 0).ok()?;
        Some(v1_frozen(std::str::from_utf8(&text[..n]).ok()?))
    }
}

pub(super) fn remove_dir(dir: &Path) -> Result<()> {
    match fs::remove_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(err("remove cgroup", dir)(e)),
        _ => Ok(()),
    }
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

/// Writes `cpuset.cpus`; the kernel refuses CPUs another cgroup owns exclusively.
pub(super) fn write_cpus(dir: &Path, cpus: &str) -> Result<()> {
    let path = dir.join("cpuset.cpus");
    write_file(&path, cpus).map_err(|e| match e.source.raw_os_error() {
        Some(crate::errno::EINVAL) => CgroupError {
            what: "give CPUs (another cgroup may own them exclusively: cpuset.cpu_exclusive) to",
            ..e
        },
        _ => e,
    })
}

/// A cgroup-safe name for a partition ([`crate::name::safe_name`]), prefixed with its
/// index so that names stay unique.
pub fn partition_dir_name(index: usize, name: &str) -> String {
    format!("p{index}-{}", crate::name::safe_name(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_errors_say_how_to_get_rights() {
        let e = CgroupError {
            path: PathBuf::from("/sys/fs/cgroup/freezer/bulkhead-1-2-0"),
            what: "create cgroup",
            source: io::Error::from_raw_os_error(crate::errno::EACCES),
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
            source: io::Error::from_raw_os_error(crate::errno::ENOSPC),
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
