//! Exclusive cpuset root domains, which SCHED_DEADLINE needs.
//!
//! The kernel admits a SCHED_DEADLINE thread only if its allowed CPUs cover its whole
//! *root domain* (kernel/sched/syscalls.c, `__sched_setscheduler`: "Don't allow tasks with
//! an affinity mask smaller than the entire root_domain to become SCHED_DEADLINE"), and it
//! checks the bandwidth of each root domain separately. A partition's tasks are pinned to
//! the partition's CPUs, so those CPUs must form a root domain of their own
//! (Documentation/scheduler/sched-deadline.rst, section 5.1):
//!
//! * cgroup v1: the partition's cpuset has `cpuset.cpu_exclusive = 1` and
//!   `cpuset.sched_load_balance = 1`; every ancestor is exclusive (the kernel requires it)
//!   and does not balance load itself (`sched_load_balance = 0`, including the top cpuset),
//!   so the kernel builds a separate scheduling domain, hence root domain, per balancing
//!   cpuset. The top cpuset's original `sched_load_balance` is saved in [`ROOT_MARK`] and
//!   restored by [`restore_root_if_unused`] once no bulkhead exclusive domain is left
//!   (also after a crash, when the next bulkhead calls it).
//! * cgroup v2: `cpuset.cpus.partition = root` on the partition's cgroup, after granting its
//!   CPUs through `cpuset.cpus.exclusive` of every ancestor (a "remote partition",
//!   Documentation/admin-guide/cgroup-v2.rst, "Cpuset Interface Files"). The kernel reports
//!   an invalid partition as `root invalid (reason)`: that reason is the error.
//!
//! Every change is undone when the domain is removed or dropped, and a failed creation is
//! rolled back: nothing is left half-applied. Creations and removals are serialized between
//! processes with a lock file, because they read and write shared state (the top cpuset).

use super::procs_file;
use crate::error::{Error, Result};
use crate::proc::start_time;
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the top cpuset's original `sched_load_balance` is kept while bulkhead changed it.
pub const ROOT_MARK: &str = "/run/bulkhead-cpuset-root-load-balance";
const LOCK_FILE: &str = "/run/bulkhead-cpuset.lock";

pub use crate::cgroup::CpusetMount;

/// Where the cpuset controller is, in the one detection of this machine's cgroups
/// ([`crate::cgroup::Layout::detect`]: the v1 hierarchy mounted with `cpuset`,
/// else a cgroup2 mount whose root offers it).
pub fn detect() -> Result<CpusetMount> {
    match crate::cgroup::Layout::detect() {
        Ok(layout) => Ok(layout.cpuset),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::Invalid(e.to_string())),
        Err(e) => Err(Error::os("reading the mount table", e, "")),
    }
}

/// An exclusive domain of a [`Cpusets`]: the `n`th one added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Domain(pub usize);

/// What the rt partitions do with their exclusive cpusets: create them (cpus, mems,
/// exclusivity or partition root, all or nothing), and remove them (killing what is
/// left inside, undoing every setting); the tasks join them when spawned. [`HostCpusets`]
/// carries it out on this machine's v1 or v2 cpuset hierarchy ([`ExclusiveDomain`]), a
/// fake host records it in tests without root. Beside [`super::CgroupManager`], not in
/// it: the domains are shared host state (a lock between processes, the top cpuset's
/// load balancing saved and restored), and the window supervisor and the rt partitions
/// each hold their own.
pub trait Cpusets: Send {
    /// Makes the cgroup `rel` (relative to the hierarchy's mount; it must contain
    /// "bulkhead") an exclusive root domain on `cpus`, as [`ExclusiveDomain::create`].
    fn add_domain(&mut self, rel: &Path, cpus: &str) -> Result<Domain>;
    /// Domain `d`'s cgroup directory.
    fn dir(&self, d: Domain) -> &Path;
    /// Domain `d`'s CPUs, in the kernel's list format.
    fn cpus(&self, d: Domain) -> &str;
    /// Kills what is inside domain `d`, removes its cgroups and undoes its settings.
    fn remove(&mut self, d: Domain) -> Result<()>;
}

/// The exclusive domains of this machine's cpuset hierarchy. A domain not removed is
/// removed when this is dropped.
pub struct HostCpusets {
    hierarchy: CpusetMount,
    domains: Vec<ExclusiveDomain>,
}

impl HostCpusets {
    pub fn new(hierarchy: &CpusetMount) -> HostCpusets {
        HostCpusets {
            hierarchy: hierarchy.clone(),
            domains: Vec::new(),
        }
    }
}

impl Cpusets for HostCpusets {
    fn add_domain(&mut self, rel: &Path, cpus: &str) -> Result<Domain> {
        let domain = ExclusiveDomain::create(&self.hierarchy, rel, cpus)?;
        self.domains.push(domain);
        Ok(Domain(self.domains.len() - 1))
    }

    fn dir(&self, d: Domain) -> &Path {
        self.domains[d.0].dir()
    }

    fn cpus(&self, d: Domain) -> &str {
        self.domains[d.0].cpus()
    }

    fn remove(&mut self, d: Domain) -> Result<()> {
        self.domains[d.0].remove_now()
    }
}

/// A cpuset cgroup made an exclusive root domain on a set of CPUs. Removing it (or dropping
/// it) kills processes still inside, removes the cgroups it created and undoes every setting
/// it changed.
#[derive(Debug)]
pub struct ExclusiveDomain {
    hierarchy: CpusetMount,
    dir: PathBuf,
    /// The CPUs, in the kernel's list format (`0-2,5`).
    cpus: String,
    /// Files to restore on removal, in the order they were changed.
    undo: Vec<(PathBuf, String)>,
    /// Directories this domain created, parents first.
    created: Vec<PathBuf>,
    removed: bool,
}

impl ExclusiveDomain {
    /// Makes the cgroup `rel` (relative to the hierarchy's mount, e.g.
    /// `bulkhead-1234/rt-control`; it must contain "bulkhead") an exclusive root domain on
    /// `cpus` (the kernel's list format, `0-2,5`), creating it and missing ancestors.
    /// Existing ancestors must already include `cpus`. On error nothing is left changed.
    pub fn create(hierarchy: &CpusetMount, rel: &Path, cpus: &str) -> Result<ExclusiveDomain> {
        check_rel(rel)?;
        let cpus = list(&parse(cpus).ok_or_else(|| {
            Error::Invalid(format!(
                "`{cpus}` is not a CPU list (e.g. 0, 0-2 or 0,2,5-7)"
            ))
        })?);
        let _lock = Lock::take()?;
        let mut d = ExclusiveDomain {
            hierarchy: hierarchy.clone(),
            dir: hierarchy.mount().join(rel),
            cpus,
            undo: Vec::new(),
            created: Vec::new(),
            removed: false,
        };
        let r = match hierarchy {
            CpusetMount::V1(_) => d.setup_v1(rel),
            CpusetMount::V2(_) => d.setup_v2(rel),
        };
        if let Err(e) = r {
            d.removed = true;
            let _ = d.teardown();
            drop(_lock);
            if let CpusetMount::V1(m) = hierarchy {
                let _ = restore_root_if_unused(m);
            }
            return Err(e);
        }
        Ok(d)
    }

    /// The cgroup directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CPUs of the domain, in the kernel's list format.
    pub fn cpus(&self) -> &str {
        &self.cpus
    }

    /// Moves process `pid` (all its threads) into the domain.
    pub fn add_process(&self, pid: i32) -> Result<()> {
        write(&procs_file(&self.dir), &pid.to_string())
    }

    /// The processes in the domain.
    pub fn processes(&self) -> Result<Vec<i32>> {
        Ok(read(procs_file(&self.dir))?
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect())
    }

    /// Kills what is still inside, removes the cgroups this domain created and undoes its
    /// settings.
    pub fn remove(mut self) -> Result<()> {
        self.remove_now()
    }

    /// [`ExclusiveDomain::remove`] in place; nothing the second time.
    fn remove_now(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.removed, true) {
            return Ok(());
        }
        self.kill_and_remove()
    }

    fn kill_and_remove(&mut self) -> Result<()> {
        let lock = Lock::take()?;
        let r = self.teardown();
        drop(lock);
        if let CpusetMount::V1(m) = &self.hierarchy {
            restore_root_if_unused(m)?;
        }
        r
    }

    fn setup_v1(&mut self, rel: &Path) -> Result<()> {
        let mount = self.hierarchy.mount().to_path_buf();
        let mut dir = mount.clone();
        let comps: Vec<_> = rel.components().collect();
        for (i, c) in comps.iter().enumerate() {
            let parent = dir.clone();
            dir.push(c);
            let last = i + 1 == comps.len();
            self.make_dir_v1(&parent, &dir)?;
            self.set(&dir.join("cpuset.cpu_exclusive"), "1")
                .map_err(|e| explain_overlap(e, &dir, &self.cpus))?;
            self.set(
                &dir.join("cpuset.sched_load_balance"),
                if last { "1" } else { "0" },
            )?;
        }
        // The top cpuset must not balance over all CPUs, or its one domain would contain ours.
        let top = mount.join("cpuset.sched_load_balance");
        let was = read(&top)?;
        if was != "0" {
            if !Path::new(ROOT_MARK).exists() {
                write(Path::new(ROOT_MARK), &was)?;
            }
            write(&top, "0")?;
        }
        Ok(())
    }

    /// Creates `dir` if missing (cpus = ours, mems = the parent's), else checks that it
    /// holds our CPUs.
    fn make_dir_v1(&mut self, parent: &Path, dir: &Path) -> Result<()> {
        if dir.exists() && !dir.is_dir() {
            return Err(Error::Invalid(format!(
                "{} is a file: a cgroup cannot be named like a control file",
                dir.display()
            )));
        }
        if dir.exists() {
            if dir != self.dir {
                let have = cpuset_of(&dir.join("cpuset.cpus"))?;
                let ours = parse(&self.cpus).unwrap_or_default();
                if !have.as_ref().is_some_and(|h| ours.is_subset(h)) {
                    return Err(Error::Invalid(format!(
                        "cpuset {} has CPUs `{}`, which do not include {}",
                        dir.display(),
                        have.map(|h| list(&h)).unwrap_or_default(),
                        self.cpus
                    )));
                }
                return Ok(());
            }
        } else {
            fs::create_dir(dir)
                .map_err(|e| Error::os(format!("creating cpuset {}", dir.display()), e, ""))?;
            self.created.push(dir.to_path_buf());
        }
        let mems = read(parent.join("cpuset.mems"))?;
        if read(dir.join("cpuset.mems"))?.is_empty() {
            write(&dir.join("cpuset.mems"), &mems)?;
        }
        self.set(&dir.join("cpuset.cpus"), &self.cpus.clone())
            .map_err(|e| explain_overlap(e, dir, &self.cpus))
    }

    fn setup_v2(&mut self, rel: &Path) -> Result<()> {
        let mut dir = self.hierarchy.mount().to_path_buf();
        let comps: Vec<_> = rel.components().collect();
        let cpus = self.cpus.clone();
        for (i, c) in comps.iter().enumerate() {
            let parent = dir.clone();
            dir.push(c);
            self.enable_cpuset_v2(&parent)?;
            if !dir.exists() {
                fs::create_dir(&dir)
                    .map_err(|e| Error::os(format!("creating cgroup {}", dir.display()), e, ""))?;
                self.created.push(dir.clone());
            }
            if i + 1 == comps.len() {
                self.set(&dir.join("cpuset.cpus"), &cpus)?;
            }
            let excl = dir.join("cpuset.cpus.exclusive");
            if excl.exists() {
                let have = cpuset_of(&excl)?;
                let want = union(have.as_ref(), &self.cpus);
                self.set(&excl, &want)
                    .map_err(|e| explain_overlap(e, &dir, &self.cpus))?;
            }
        }
        self.set(&dir.join("cpuset.cpus.partition"), "root")?;
        let state = read(dir.join("cpuset.cpus.partition"))?;
        if state != "root" {
            return Err(Error::Invalid(format!(
                "the kernel did not make {} a root partition on CPUs {}: it reports `{state}`",
                dir.display(),
                self.cpus
            )));
        }
        Ok(())
    }

    fn enable_cpuset_v2(&mut self, parent: &Path) -> Result<()> {
        let control = parent.join("cgroup.subtree_control");
        if read(&control)?.split_whitespace().any(|c| c == "cpuset") {
            return Ok(());
        }
        write(&control, "+cpuset")?;
        self.undo.push((control, "-cpuset".into()));
        Ok(())
    }

    /// Writes `value` to `file`, remembering the old value for the undo.
    fn set(&mut self, file: &Path, value: &str) -> Result<()> {
        let old = read(file)?;
        if old == value {
            return Ok(());
        }
        write(file, value)?;
        self.undo.push((file.to_path_buf(), old));
        Ok(())
    }

    /// Kills what is inside, then walks from the domain up towards the mount: each
    /// directory this domain created is removed, each other one gets its old settings back,
    /// until a directory that still holds other cgroups (another domain sharing the
    /// ancestor) is reached; that one and those above it stay as they are.
    fn teardown(&mut self) -> Result<()> {
        let mut first_err = None;
        if self.dir.exists() {
            if let Err(e) = kill_all(&self.dir) {
                first_err.get_or_insert(e);
            }
        }
        // v2: leave the partition before the undo makes its CPUs non-exclusive.
        let partition = self.dir.join("cpuset.cpus.partition");
        if matches!(self.hierarchy, CpusetMount::V2(_)) && partition.exists() {
            let _ = write(&partition, "member");
        }
        let mount = self.hierarchy.mount().to_path_buf();
        let mut dir = Some(self.dir.clone());
        while let Some(d) = dir.filter(|d| d.starts_with(&mount)) {
            if d != self.dir && has_child_cgroups(&d) {
                break;
            }
            let r = if self.created.contains(&d) {
                fs::remove_dir(&d)
                    .map_err(|e| Error::os(format!("removing cgroup {}", d.display()), e, ""))
            } else {
                self.restore_dir(&d)
            };
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
            dir = d.parent().map(Path::to_path_buf);
        }
        self.undo.clear();
        self.created.clear();
        first_err.map_or(Ok(()), Err)
    }

    /// Writes back the old values of the files of `dir` this domain changed, newest first.
    fn restore_dir(&mut self, dir: &Path) -> Result<()> {
        let mut first_err = None;
        for (file, old) in self
            .undo
            .iter()
            .rev()
            .filter(|(f, _)| f.parent() == Some(dir))
        {
            match write(file, old) {
                // Another cgroup still uses the controller: leave it enabled.
                Err(e)
                    if file.ends_with("cgroup.subtree_control")
                        && e.errno() == Some(libc::EBUSY) => {}
                Err(e) => {
                    first_err.get_or_insert(e);
                }
                Ok(()) => {}
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

fn has_child_cgroups(dir: &Path) -> bool {
    fs::read_dir(dir)
        .map(|entries| entries.flatten().any(|e| e.path().is_dir()))
        .unwrap_or(false)
}

impl Drop for ExclusiveDomain {
    fn drop(&mut self) {
        if !self.removed {
            self.removed = true;
            if let Err(e) = self.kill_and_remove() {
                eprintln!("bulkhead: cleaning up {}: {e}", self.dir.display());
            }
        }
    }
}

/// A shield (cgroup v1): every process of the top cpuset except the caller moved to a cpuset
/// on other CPUs, so that nothing but the real-time tasks (and per-CPU kernel threads) runs
/// on the shielded CPUs. This is what an *exclusive* CPU means in practice: on a kernel
/// without full preemption, any process in kernel mode on an rt CPU delays the rt tasks.
/// Dropping it moves the processes back and removes the cpuset.
#[derive(Debug)]
pub struct Shield {
    mount: PathBuf,
    dir: PathBuf,
}

impl Shield {
    /// Moves the top cpuset's processes (not this one) to `<mount>/<name>` on `cpus`.
    /// Returns the shield and how many processes it moved (kernel threads bound to a CPU
    /// cannot move and stay).
    pub fn create(hierarchy: &CpusetMount, name: &str, cpus: &str) -> Result<(Shield, usize)> {
        let CpusetMount::V1(mount) = hierarchy else {
            return Err(Error::Invalid(
                "a shield needs the cgroup v1 cpuset layout".into(),
            ));
        };
        check_rel(Path::new(name))?;
        let dir = mount.join(name);
        fs::create_dir(&dir)
            .map_err(|e| Error::os(format!("creating cpuset {}", dir.display()), e, ""))?;
        let shield = Shield {
            mount: mount.clone(),
            dir,
        };
        register_shield(name)?;
        write(
            &shield.dir.join("cpuset.mems"),
            &read(mount.join("cpuset.mems"))?,
        )?;
        write(&shield.dir.join("cpuset.cpus"), cpus)?;
        let moved = move_procs(mount, &shield.dir);
        Ok((shield, moved))
    }
}

impl Drop for Shield {
    /// Moves the processes back (again and again: they may fork meanwhile) until the
    /// cpuset is empty, for up to 2 s, then removes it.
    fn drop(&mut self) {
        if !self.dir.exists() {
            if let Some(name) = self.dir.file_name() {
                let _ = fs::remove_file(Path::new(SHIELDS).join(name));
            }
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            move_procs(&self.dir, &self.mount);
            let empty = read(procs_file(&self.dir)).is_ok_and(|p| p.is_empty());
            if (empty && fs::remove_dir(&self.dir).is_ok()) || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if self.dir.exists() {
            eprintln!(
                "bulkhead: could not empty and remove {}",
                self.dir.display()
            );
        } else if let Some(name) = self.dir.file_name() {
            let _ = fs::remove_file(Path::new(SHIELDS).join(name));
        }
    }
}

/// Where live shields are registered: one file per shield holding its owner's pid and
/// start time, so that [`release_stale_shields`] can tell a dead owner's shield.
const SHIELDS: &str = "/run/bulkhead-shields";

fn register_shield(name: &str) -> Result<()> {
    fs::create_dir_all(SHIELDS).map_err(|e| Error::os(format!("creating {SHIELDS}"), e, ""))?;
    let me = std::process::id();
    let entry = format!("{me} {}", start_time(me).unwrap_or(0));
    write(&Path::new(SHIELDS).join(name), &entry)
}

/// Releases the shields of supervisors that died without dropping them (SIGKILL): their
/// processes go back to the top cpuset and the shield cpusets are removed. Returns the
/// names released. Call it at start-up, with the leftover cleanup.
pub fn release_stale_shields(mount: &Path) -> Vec<String> {
    let mut released = Vec::new();
    for entry in fs::read_dir(SHIELDS).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let owner = fs::read_to_string(entry.path()).unwrap_or_default();
        let mut f = owner.split_whitespace().map(|v| v.parse::<u64>().ok());
        let (pid, start) = (f.next().flatten(), f.next().flatten());
        let alive = pid.is_some_and(|p| start.is_some() && start_time(p as u32) == start);
        if alive {
            continue;
        }
        drop(Shield {
            mount: mount.to_path_buf(),
            dir: mount.join(&name),
        });
        released.push(name);
    }
    released
}

/// Moves every process of cpuset `from` except this one to `to`; returns how many moved.
fn move_procs(from: &Path, to: &Path) -> usize {
    let me = std::process::id().to_string();
    let procs = read(procs_file(from)).unwrap_or_default();
    procs
        .lines()
        .filter(|p| *p != me)
        .filter(|p| fs::write(procs_file(to), p).is_ok())
        .count()
}

/// Restores the top cpuset's `sched_load_balance` saved in [`ROOT_MARK`] when no bulkhead
/// exclusive domain (a cpuset whose path contains "bulkhead" with `cpu_exclusive = 1` and
/// `sched_load_balance = 1`) remains under `mount`. Call it at start-up to repair what a
/// bulkhead killed by SIGKILL left. Returns whether it restored the value.
pub fn restore_root_if_unused(mount: &Path) -> Result<bool> {
    let _lock = Lock::take()?;
    let Ok(saved) = fs::read_to_string(ROOT_MARK) else {
        return Ok(false);
    };
    if any_bulkhead_domain(mount, 0)? {
        return Ok(false);
    }
    write(&mount.join("cpuset.sched_load_balance"), saved.trim())?;
    fs::remove_file(ROOT_MARK).map_err(|e| Error::os(format!("removing {ROOT_MARK}"), e, ""))?;
    Ok(true)
}

fn any_bulkhead_domain(dir: &Path, depth: u32) -> Result<bool> {
    if depth > 8 {
        return Ok(false);
    }
    let entries =
        fs::read_dir(dir).map_err(|e| Error::os(format!("reading {}", dir.display()), e, ""))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() || !path.to_string_lossy().contains("bulkhead") {
            continue;
        }
        let flag = |f: &str| read(path.join(f)).map(|v| v == "1").unwrap_or(false);
        if (flag("cpuset.cpu_exclusive") && flag("cpuset.sched_load_balance"))
            || any_bulkhead_domain(&path, depth + 1)?
        {
            return Ok(true);
        }
    }
    Ok(false)
}

fn check_rel(rel: &Path) -> Result<()> {
    let ok =
        !rel.as_os_str().is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !ok {
        return Err(Error::Invalid(format!(
            "cgroup path `{}` must be relative, without `..`",
            rel.display()
        )));
    }
    if !rel.to_string_lossy().contains("bulkhead") {
        return Err(Error::Invalid(format!(
            "cgroup path `{}` must contain \"bulkhead\" so leftovers can be recognized",
            rel.display()
        )));
    }
    Ok(())
}

/// Turns the kernel's bare EINVAL on an exclusive cpuset into the sibling that overlaps.
fn explain_overlap(e: Error, dir: &Path, cpus: &str) -> Error {
    if e.errno() != Some(libc::EINVAL) {
        return e;
    }
    let Some(parent) = dir.parent() else { return e };
    let ours = parse(cpus).unwrap_or_default();
    let mut clashes = Vec::new();
    for entry in fs::read_dir(parent).into_iter().flatten().flatten() {
        let sib = entry.path();
        if sib == dir || !sib.is_dir() {
            continue;
        }
        for f in ["cpuset.cpus", "cpuset.cpus.exclusive"] {
            if let Ok(Some(set)) = cpuset_of(&sib.join(f)) {
                if !set.is_disjoint(&ours) {
                    clashes.push(format!("{} ({f} {})", sib.display(), list(&set)));
                    break;
                }
            }
        }
    }
    if clashes.is_empty() {
        return e;
    }
    Error::Invalid(format!(
        "cannot make {} exclusive on CPUs {cpus}: sibling cpuset(s) {} use some of them; \
         an exclusive cpuset's CPUs may belong to no sibling",
        dir.display(),
        clashes.join(", ")
    ))
}

/// The CPUs of `a` and of the list `b`, as a list.
fn union(a: Option<&BTreeSet<u32>>, b: &str) -> String {
    let mut all = a.cloned().unwrap_or_default();
    all.extend(parse(b).unwrap_or_default());
    list(&all)
}

/// The CPUs of a list in the kernel's format (`0-2,5`); `None` if it is not one.
fn parse(text: &str) -> Option<BTreeSet<u32>> {
    let mut cpus = BTreeSet::new();
    for part in text.trim().split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (u32, u32) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
        cpus.extend(lo..=hi);
    }
    Some(cpus)
}

/// `cpus` in the kernel's list format: ascending, runs as ranges (`0-2,5`).
fn list(cpus: &BTreeSet<u32>) -> String {
    let mut parts: Vec<(u32, u32)> = Vec::new();
    for &c in cpus {
        match parts.last_mut() {
            Some((_, hi)) if *hi + 1 == c => *hi = c,
            _ => parts.push((c, c)),
        }
    }
    let part = |&(lo, hi): &(u32, u32)| match lo == hi {
        true => lo.to_string(),
        false => format!("{lo}-{hi}"),
    };
    parts.iter().map(part).collect::<Vec<_>>().join(",")
}

/// The CPU set in a cpuset file; `None` when empty.
fn cpuset_of(file: &Path) -> Result<Option<BTreeSet<u32>>> {
    let text = read(file)?;
    if text.is_empty() {
        return Ok(None);
    }
    parse(&text)
        .map(Some)
        .ok_or_else(|| Error::Invalid(format!("{}: `{text}` is not a CPU list", file.display())))
}

/// SIGKILLs every process in cgroup `dir` and waits (up to 2 s) until it is empty.
fn kill_all(dir: &Path) -> Result<()> {
    let procs = procs_file(dir);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let pids: Vec<i32> = read(&procs)?
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Invalid(format!(
                "processes {pids:?} are still in {} 2 s after SIGKILL",
                dir.display()
            )));
        }
        for pid in pids {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn read(path: impl AsRef<Path>) -> Result<String> {
    let path = path.as_ref();
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| {
            let hint = access_hint(&e);
            Error::os(format!("reading {}", path.display()), e, hint)
        })
}

fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).map_err(|e| {
        let hint = access_hint(&e);
        Error::os(format!("writing `{value}` to {}", path.display()), e, hint)
    })
}

fn access_hint(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "run as root, or get a delegated cgroup (systemd-run --scope -p Delegate=yes)".into()
        }
        _ => String::new(),
    }
}

/// An exclusive `flock` on [`LOCK_FILE`], held while shared cpuset state changes; closing
/// the file (dropping the value) releases it. The file has mode 0600: a partition's
/// process could otherwise open it and hold a lock that stops every run's start (as
/// with the uid lock file).
struct Lock {
    _file: fs::File,
}

impl Lock {
    fn take() -> Result<Lock> {
        let opening = |e| Error::os(format!("opening {LOCK_FILE}"), e, "run as root");
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(LOCK_FILE)
            .map_err(opening)?;
        file.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(opening)?;
        crate::lock::whole_file(&file)
            .map_err(|e| Error::os(format!("locking {LOCK_FILE}"), e, ""))?;
        Ok(Lock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_paths() {
        assert!(check_rel(Path::new("bulkhead-1/rt")).is_ok());
        assert!(check_rel(Path::new("/bulkhead")).is_err());
        assert!(check_rel(Path::new("bulkhead/../x")).is_err());
        assert!(check_rel(Path::new("rt"))
            .unwrap_err()
            .to_string()
            .contains("bulkhead"));
    }

    #[test]
    fn unions_cpu_lists() {
        let a = parse("0,2").unwrap();
        assert_eq!(union(Some(&a), "1"), "0-2");
        assert_eq!(union(None, "0,2"), "0,2");
        assert_eq!(list(&parse(" 0-1,3,5-6\n").unwrap()), "0-1,3,5-6");
        assert_eq!(parse("0-x"), None);
    }
}
