//! What a launched process may do, set in the child between clone and exec
//! ([`crate::launch`]): its network namespace ([`enter_netns`]), its user
//! ([`take_identity`]), no new privileges ([`no_new_privs`]), death with its parent
//! ([`die_with_parent`]), and the parts of a be partition process's sandbox that limit
//! what it may ask the kernel (DriveOS 3.1: a partition is a sandbox): no capabilities
//! ([`drop_bounding_set`], [`clear_capabilities`]), a seccomp filter ([`Filter`]) and a
//! mount namespace of its own with a private `/tmp` and `/dev/shm` ([`Mounts`]).
//!
//! Everything a child calls between clone and exec makes only async-signal-safe system
//! calls on memory prepared before the clone (the [`Filter`] is compiled by the parent)
//! and returns the errno of the call that failed.

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition, SeccompFilter, SeccompRule,
};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Component, Path};

/// errno of the calling thread.
pub(crate) fn errno() -> i32 {
    // SAFETY: errno of the calling thread, read right after the failed call.
    unsafe { *libc::__errno_location() }
}

/// Enters the network namespace `fd` (an open namespace descriptor).
///
/// # Safety
/// Only in a child between clone and exec (it changes the calling process's
/// namespace); `fd` must be an open network namespace descriptor. Async-signal-safe.
pub unsafe fn enter_netns(fd: i32) -> Result<(), i32> {
    // SAFETY: the caller guarantees an open namespace fd; setns changes only this
    // (single-threaded, cloned) process.
    ok(unsafe { libc::setns(fd, libc::CLONE_NEWNET) })
}

/// Gives up root for `uid` and `gid`, without supplementary groups.
///
/// The credentials are changed by raw system calls, not by the C library's
/// `setgroups`/`setgid`/`setuid`: in a process it believes multi-threaded, the C
/// library changes the credentials of every thread (`__nptl_setxid`), holding its
/// thread-list lock while it signals the threads and waits for them. A child cloned
/// with `CLONE_VM` shares that lock with the supervisor, and a child killed in the
/// middle (a run stopped while it starts) left it held: the supervisor then hung at
/// its next thread exit. The raw calls change only the calling process, which is
/// all a child between clone and exec has.
///
/// # Safety
/// Only in a child between clone and exec; async-signal-safe, no heap memory.
pub unsafe fn take_identity(uid: u32, gid: u32) -> Result<(), i32> {
    let (uid, gid) = (uid as libc::c_long, gid as libc::c_long);
    // SAFETY: credential system calls with no pointers (an empty group list); they
    // change only the calling (cloned, single-threaded) process.
    unsafe {
        ok_raw(libc::syscall(
            libc::SYS_setgroups,
            0,
            std::ptr::null::<libc::gid_t>(),
        ))?;
        ok_raw(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
        ok_raw(libc::syscall(libc::SYS_setresuid, uid, uid, uid))
    }
}

/// Makes the calling child die (SIGKILL) with the thread that started it, `parent` the
/// supervisor's pid read before the clone. Called after the last credential change (a
/// change of uid or gid clears the parent-death signal). If the parent died before the
/// signal was set (then `getppid()` is no longer `parent`), returns `Err(ESRCH)`: the
/// caller must exit instead of exec'ing.
///
/// The signal follows the *thread* that cloned: bulkhead starts processes from the
/// thread that runs until the partitions are stopped.
///
/// # Safety
/// Only in a child between clone and exec; async-signal-safe (prctl, getppid).
pub unsafe fn die_with_parent(parent: libc::pid_t) -> Result<(), i32> {
    // SAFETY: prctl with integer arguments changes only the calling process.
    ok(unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    })?;
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        return Err(libc::ESRCH);
    }
    Ok(())
}

/// Forbids the calling child and everything it execs to gain privileges (setuid and
/// file-capability binaries run without them; `PR_SET_NO_NEW_PRIVS`).
///
/// # Safety
/// Only in a child between clone and exec; async-signal-safe (one prctl).
pub unsafe fn no_new_privs() -> Result<(), i32> {
    // SAFETY: prctl with integer arguments changes only the calling process; the flag
    // is inherited across fork and exec and cannot be cleared.
    ok(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })
}

/// The highest capability number the kernel may know (`CAP_LAST_CAP` is 40 in Linux
/// 6.x); dropping a number the kernel does not know fails with EINVAL and ends the loop.
const CAP_MAX: libc::c_ulong = 63;

/// Empties the capability bounding set and the ambient set of the calling child, so that
/// nothing it execs can gain a capability, even as root (capabilities(7): after execve,
/// permitted = file permitted & bounding set). Needs CAP_SETPCAP: call it while still
/// root, before the uid changes. A caller that is not root has no capability to give up
/// and is left as it is.
///
/// # Safety
/// Only in a child between fork and exec; async-signal-safe (prctl).
pub unsafe fn drop_bounding_set() -> Result<(), i32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    for cap in 0..=CAP_MAX {
        // SAFETY: prctl with integer arguments changes only the calling process.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            match errno() {
                libc::EINVAL => break,
                e => return Err(e),
            }
        }
    }
    // SAFETY: as above.
    if unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    } != 0
    {
        return Err(errno());
    }
    Ok(())
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: two [`CapData`] (capabilities 0-31, 32-63).
const CAP_VERSION_3: u32 = 0x2008_0522;

/// Clears the effective, permitted and inheritable sets of the calling child (a uid
/// change from root clears only the first two). Call it after the last uid change, once
/// nothing that needs a capability is left to do.
///
/// # Safety
/// Only in a child between fork and exec; async-signal-safe (capset).
pub unsafe fn clear_capabilities() -> Result<(), i32> {
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a valid header and two data structs (version 3).
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// The seccomp filters of a be partition's processes, compiled (before fork) for this
/// machine's architecture. [`Filter::install`] loads them in a child.
///
/// What the filters refuse, and why (each call is one a be process may make without any
/// capability, or one that a capability it no longer has guards only in part):
/// - with EPERM, `sched_setscheduler` to SCHED_FIFO, SCHED_RR or SCHED_DEADLINE (with or
///   without SCHED_RESET_ON_FORK), `sched_setparam` and `sched_setattr` (they set a
///   real-time priority or a reservation), `sched_setaffinity` (moving threads among
///   CPUs; the cpuset bounds it, the filter keeps the kernel's balancing untouched),
///   `ioprio_set` to the real-time I/O class, `mlockall`, `mlock` and `mlock2`: the rt
///   partitions' CPU time, I/O and memory (locked pages are out of the reach of the
///   partition's memory limit's reclaim);
/// - with EPERM, `ptrace`, `process_vm_readv`/`process_vm_writev`, `perf_event_open`,
///   `bpf`, `userfaultfd`, `keyctl`/`add_key`/`request_key`, `io_uring_setup`,
///   `io_uring_enter`, `io_uring_register`, `syslog`: reading or steering other
///   processes, timing side channels, kernel attack surface (io_uring's requests run
///   in kernel workers, out of the filter's sight), the per-uid keyrings, the kernel's
///   log;
/// - with EPERM, `membarrier` with a command that reaches other processes (global, global
///   expedited and its registration): a global expedited barrier interrupts every CPU
///   running a registered process, rt partitions' exclusive CPUs included (their fifo
///   channels register, `bulkhead_chan::sync::barriers_ready`); a be process's channel
///   ends then fence on every message instead;
/// - with EPERM, `unshare`, `setns`, `clone` with a namespace flag, `mount`, `umount2`,
///   `pivot_root`, `chroot` and the new mount API (`open_tree`, `move_mount`, `fsopen`,
///   `fsconfig`, `fsmount`, `fspick`, `mount_setattr`): leaving the sandbox's namespaces,
///   in particular through a user namespace, which would give it capabilities there;
/// - with ENOSYS, `clone3`, whose flags a filter cannot read (they are in memory): the C
///   library then falls back to `clone`, whose flags the filter checks.
pub struct Filter {
    programs: Vec<BpfProgram>,
}

/// Calls refused outright with EPERM.
const REFUSED: [i64; 31] = [
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
    libc::SYS_sched_setaffinity,
    libc::SYS_mlockall,
    libc::SYS_mlock,
    libc::SYS_mlock2,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_syslog,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_perf_event_open,
    libc::SYS_bpf,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
];

/// The namespace flags `clone` may not be given.
const NAMESPACE_FLAGS: [i32; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
];

/// The `membarrier` commands that reach other processes: `MEMBARRIER_CMD_GLOBAL` (1),
/// `MEMBARRIER_CMD_GLOBAL_EXPEDITED` (2), which interrupts every CPU running a process
/// registered for it (the fifo channels of rt partitions register), and its
/// registration (4).
const MEMBARRIER_GLOBAL: [u64; 3] = [1, 2, 4];

/// `IOPRIO_CLASS_RT` in the class bits of an I/O priority (`class << 13`).
const IOPRIO_CLASS_RT: u64 = 1 << 13;
const IOPRIO_CLASS_MASK: u64 = 7 << 13;

/// Why the seccomp filter cannot be compiled: seccompiler's error, shared (the filter
/// is compiled once and its result handed to every launch that needs it).
#[derive(Debug, Clone, thiserror::Error)]
pub enum FilterError {
    /// This machine's architecture is not one seccompiler supports.
    #[error("seccomp: {0:?}")]
    Arch(#[source] std::sync::Arc<BackendError>),
    #[error("seccomp: {0}")]
    Compile(#[source] std::sync::Arc<BackendError>),
}

impl From<BackendError> for FilterError {
    fn from(e: BackendError) -> FilterError {
        FilterError::Compile(e.into())
    }
}

impl Filter {
    /// Compiles the filters; an error names what failed (e.g. an unsupported
    /// architecture).
    pub fn new() -> Result<Filter, FilterError> {
        let arch = std::env::consts::ARCH
            .try_into()
            .map_err(|e: BackendError| FilterError::Arch(e.into()))?;
        let mut refused: BTreeMap<i64, Vec<SeccompRule>> =
            REFUSED.iter().map(|&nr| (nr, Vec::new())).collect();
        refused.insert(libc::SYS_mount_setattr, Vec::new());
        let rt_policies = [libc::SCHED_FIFO, libc::SCHED_RR, 6];
        refused.insert(
            libc::SYS_sched_setscheduler,
            rules(rt_policies.iter().map(|&p| (1, 0xff, p as u64)))?,
        );
        refused.insert(
            libc::SYS_ioprio_set,
            rules([(2, IOPRIO_CLASS_MASK, IOPRIO_CLASS_RT)])?,
        );
        refused.insert(
            libc::SYS_membarrier,
            rules(MEMBARRIER_GLOBAL.iter().map(|&c| (0, 0xffff_ffff, c)))?,
        );
        refused.insert(
            libc::SYS_clone,
            rules(NAMESPACE_FLAGS.iter().map(|&f| (0, f as u64, f as u64)))?,
        );
        let clone3 = [(libc::SYS_clone3, Vec::new())].into_iter().collect();
        let compile = |rules, errno: i32| -> Result<BpfProgram, FilterError> {
            SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(errno as u32),
                arch,
            )
            .and_then(BpfProgram::try_from)
            .map_err(FilterError::from)
        };
        Ok(Filter {
            programs: vec![
                compile(refused, libc::EPERM)?,
                compile(clone3, libc::ENOSYS)?,
            ],
        })
    }

    /// Loads the filters into the calling child (and everything it starts). Needs
    /// no-new-privileges or CAP_SYS_ADMIN.
    ///
    /// # Safety
    /// Only in a child between fork and exec; async-signal-safe (seccomp), reads only
    /// `self`, which the parent keeps unchanged until the child has exec'd.
    pub unsafe fn install(&self) -> Result<(), i32> {
        for program in &self.programs {
            let prog = libc::sock_fprog {
                len: program.len() as u16,
                filter: program.as_ptr() as *mut libc::sock_filter,
            };
            // SAFETY: `prog` points at `program`, a valid BPF program of `len`
            // instructions (seccompiler's sock_filter has the kernel's layout).
            if unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &prog as *const libc::sock_fprog,
                )
            } != 0
            {
                return Err(errno());
            }
        }
        Ok(())
    }
}

/// One rule per `(argument, mask, value)`: the call matches when `argument & mask ==
/// value` (a 64-bit comparison) for any of them.
fn rules(
    matches: impl IntoIterator<Item = (u8, u64, u64)>,
) -> Result<Vec<SeccompRule>, FilterError> {
    matches
        .into_iter()
        .map(|(arg, mask, value)| {
            let c = SeccompCondition::new(arg, Len::Qword, Op::MaskedEq(mask), value)?;
            Ok(SeccompRule::new(vec![c])?)
        })
        .collect()
}

/// The directories a be process gets fresh, empty and private in its mount namespace.
pub const PRIVATE_DIRS: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// The mount namespace of a be process: its own, with mount events private both ways
/// (nothing it mounts reaches the host, nothing of the host's reaches it later), a fresh
/// tmpfs on `/tmp`, one on `/var/tmp` and one on `/dev/shm` ([`PRIVATE_DIRS`]). They go
/// away with the last process of the namespace. What the private directories would hide
/// and the process needs is bind-mounted back at its path: its working directory
/// (writable: the description's files keep working), and read-only the program it runs,
/// its script and the directories of its `PATH` (so a checkout under `/tmp` runs its own
/// programs, `bulkhead`'s too, without the host's `/tmp` being shown). Prepared before
/// fork ([`Mounts::new`]), applied in the child ([`Mounts::apply`]) while still root.
pub struct Mounts {
    /// What to bind back, ancestors before what lies below them.
    binds: Vec<Bind>,
}

/// A path under a private directory shown in the fresh one at the same place.
struct Bind {
    path: CString,
    /// The directories to create in the fresh tmpfs down to `path`'s parent, in order.
    parents: Vec<CString>,
    dir: bool,
    read_only: bool,
}

impl Mounts {
    /// The mounts for a process whose working directory is `workdir` and which `needs`
    /// to see these paths (absolute; what lies outside the private directories is
    /// visible anyway and left out, so is what an earlier bind shows already).
    pub fn new(workdir: Option<&Path>, needs: &[std::path::PathBuf]) -> Mounts {
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let mut wanted: Vec<(std::path::PathBuf, bool)> = workdir
            .map(|w| (canonical(w), false))
            .into_iter()
            .chain(needs.iter().map(|n| (canonical(n), true)))
            .filter(|(p, _)| hidden(p))
            .collect();
        wanted.sort_by_key(|(p, _)| p.components().count());
        let mut binds: Vec<Bind> = Vec::new();
        let mut shown: Vec<(std::path::PathBuf, bool)> = Vec::new();
        for (path, read_only) in wanted {
            // Shown already, with at least the rights it needs: a writable working
            // directory below a read-only bind (a program's install prefix) is bound
            // again, writable, over it.
            let covered = |(s, s_read_only): &(std::path::PathBuf, bool)| {
                path.starts_with(s) && (read_only || !s_read_only)
            };
            if shown.iter().any(covered) {
                continue;
            }
            if let Some(bind) = Bind::new(&path, read_only) {
                binds.push(bind);
                shown.push((path, read_only));
            }
        }
        binds.truncate(MAX_BINDS);
        Mounts { binds }
    }

    /// Enters a new mount namespace, mounts the fresh `/tmp` and `/dev/shm` and binds
    /// back what [`Mounts::new`] kept. Needs CAP_SYS_ADMIN: before the uid change and
    /// the seccomp filter.
    ///
    /// # Safety
    /// Only in a child between fork and exec; async-signal-safe (unshare, open, mount,
    /// mkdir, close) on strings prepared before the fork.
    pub unsafe fn apply(&self) -> Result<(), i32> {
        let tmpfs = c"tmpfs".as_ptr();
        let options = c"mode=1777".as_ptr().cast();
        let flags = libc::MS_NOSUID | libc::MS_NODEV;
        // SAFETY: the caller's contract; every pointer is a NUL-terminated string that
        // lives through the call.
        unsafe {
            private_mount_namespace()?;
            // Opened in the new namespace (a bind mount's source must be in it), before
            // the fresh directories hide them; at most a few, on the stack.
            let mut sources = [-1; MAX_BINDS];
            for (bind, fd) in self.binds.iter().zip(sources.iter_mut()) {
                *fd = libc::open(bind.path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                if *fd < 0 {
                    return Err(errno());
                }
            }
            for dir in [c"/tmp", c"/dev/shm"] {
                ok(libc::mount(tmpfs, dir.as_ptr(), tmpfs, flags, options))?;
            }
            private_var_tmp()?;
            for (bind, &fd) in self.binds.iter().zip(sources.iter()) {
                bind.apply(fd)?;
                libc::close(fd);
            }
        }
        Ok(())
    }
}

/// The most paths one process gets bound back (its working directory, program, script
/// and a few `PATH` directories); more are left hidden.
const MAX_BINDS: usize = 16;

/// Whether `path` lies strictly below one of the [`PRIVATE_DIRS`].
fn hidden(path: &Path) -> bool {
    PRIVATE_DIRS
        .iter()
        .any(|d| path.starts_with(d) && path != Path::new(d))
}

impl Bind {
    /// `path` (canonical, below a private directory) bound back, read-only if asked.
    fn new(path: &Path, read_only: bool) -> Option<Bind> {
        let root = PRIVATE_DIRS.iter().find(|d| path.starts_with(d))?;
        let mut parents = Vec::new();
        let mut at = std::path::PathBuf::from(root);
        let below = path.parent()?.strip_prefix(root).ok()?;
        for part in below.components() {
            let Component::Normal(name) = part else {
                return None;
            };
            at.push(name);
            parents.push(cstr(&at)?);
        }
        Some(Bind {
            path: cstr(path)?,
            parents,
            dir: path.is_dir(),
            read_only,
        })
    }

    /// Creates the mount point in the fresh tmpfs and binds `source` (an `O_PATH`
    /// descriptor of the original) on it; then, if read-only, remounts it so.
    ///
    /// # Safety
    /// As [`Mounts::apply`].
    unsafe fn apply(&self, source: i32) -> Result<(), i32> {
        let none = std::ptr::null();
        // SAFETY: the caller's contract; the strings are NUL-terminated and alive.
        unsafe {
            for parent in &self.parents {
                // An existing one (made by an earlier bind) is fine.
                if libc::mkdir(parent.as_ptr(), 0o755) != 0 && errno() != libc::EEXIST {
                    return Err(errno());
                }
            }
            let made = match self.dir {
                true => libc::mkdir(self.path.as_ptr(), 0o755),
                false => {
                    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC;
                    let fd = libc::open(self.path.as_ptr(), flags, 0o444);
                    if fd >= 0 {
                        libc::close(fd);
                    }
                    fd.min(0)
                }
            };
            if made != 0 && errno() != libc::EEXIST {
                return Err(errno());
            }
            let mut from = [0u8; 32];
            fd_path(source, &mut from);
            let bind = libc::MS_BIND | libc::MS_REC;
            ok(libc::mount(
                from.as_ptr().cast(),
                self.path.as_ptr(),
                none,
                bind,
                none.cast(),
            ))?;
            if self.read_only {
                let flags = libc::MS_BIND
                    | libc::MS_REMOUNT
                    | libc::MS_RDONLY
                    | libc::MS_NOSUID
                    | libc::MS_NODEV;
                ok(libc::mount(
                    none,
                    self.path.as_ptr(),
                    none,
                    flags,
                    none.cast(),
                ))?;
            }
        }
        Ok(())
    }
}

/// A fresh tmpfs on `/var/tmp` (the other world-writable directory that outlives a
/// run), as on `/tmp`; nothing if the host has no `/var/tmp`.
///
/// # Safety
/// As [`Mounts::apply`], in the process's own mount namespace.
unsafe fn private_var_tmp() -> Result<(), i32> {
    let tmpfs = c"tmpfs".as_ptr();
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    let options = c"mode=1777".as_ptr().cast();
    // SAFETY: the caller's contract; static NUL-terminated strings.
    match unsafe { libc::mount(tmpfs, c"/var/tmp".as_ptr(), tmpfs, flags, options) } {
        0 => Ok(()),
        _ if errno() == libc::ENOENT => Ok(()),
        _ => Err(errno()),
    }
}

/// Mounts a fresh `/proc` for the calling child, which must be the first process of a
/// new pid namespace: `/proc` then lists only that namespace's processes. With
/// `own_namespace` it first enters a new mount namespace of its own (`/` made
/// recursively private), so the host's `/proc` is left as it is; without, the caller is
/// already in one ([`Mounts::apply`]). Needs CAP_SYS_ADMIN: before the uid change and
/// the seccomp filter.
///
/// # Safety
/// Only in a child between fork and exec; async-signal-safe (unshare, mount).
pub unsafe fn mount_proc(own_namespace: bool) -> Result<(), i32> {
    let none: *const libc::c_void = std::ptr::null();
    // SAFETY: the caller's contract; every pointer is a NUL-terminated static string.
    unsafe {
        if own_namespace {
            private_mount_namespace()?;
        }
        let proc = c"proc".as_ptr();
        ok(libc::mount(
            proc,
            c"/proc".as_ptr(),
            proc,
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            none,
        ))
    }
}

/// Enters a new mount namespace with `/` made recursively private, so that what the
/// caller mounts next stays out of the host's namespace. Needs CAP_SYS_ADMIN.
///
/// # Safety
/// Only in a child between fork and exec; async-signal-safe (unshare, mount).
pub(crate) unsafe fn private_mount_namespace() -> Result<(), i32> {
    let none = std::ptr::null();
    // SAFETY: the caller's contract; every pointer is null or a NUL-terminated static
    // string.
    unsafe {
        ok(libc::unshare(libc::CLONE_NEWNS))?;
        ok(libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_PRIVATE,
            none.cast(),
        ))
    }
}

/// `Ok` for a system call's 0, else its errno.
pub(crate) fn ok(r: libc::c_int) -> Result<(), i32> {
    if r == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// `Ok` for a raw system call's 0, else its errno.
fn ok_raw(r: libc::c_long) -> Result<(), i32> {
    ok(if r == 0 { 0 } else { -1 })
}

fn cstr(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_encoded_bytes()).ok()
}

/// Writes `/proc/self/fd/<fd>` and a NUL into `out` (no allocation: used in a child).
fn fd_path(fd: i32, out: &mut [u8; 32]) {
    let prefix = b"/proc/self/fd/";
    out[..prefix.len()].copy_from_slice(prefix);
    let len = decimal(fd.into(), &mut out[prefix.len()..]);
    out[prefix.len() + len] = 0;
}

/// Writes `n` in decimal at the start of `out`, which must hold it (up to 20 bytes);
/// its length. No allocation: used in a child.
pub(crate) fn decimal(n: i64, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 20];
    let (mut rest, mut len) = (n.unsigned_abs(), 0);
    loop {
        digits[len] = b'0' + (rest % 10) as u8;
        len += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let sign = usize::from(n < 0);
    if n < 0 {
        out[0] = b'-';
    }
    for (i, d) in digits[..len].iter().rev().enumerate() {
        out[sign + i] = *d;
    }
    sign + len
}

#[cfg(test)]
mod tests {
    use super::*;

    /// seccompiler's refusals read as before ("seccomp: ...") and stay the source.
    #[test]
    fn filter_errors_keep_seccompilers_error() {
        let bad_arg = SeccompCondition::new(6, Len::Qword, Op::Eq, 0).unwrap_err();
        let e = FilterError::from(bad_arg);
        assert!(matches!(e, FilterError::Compile(_)), "{e:?}");
        assert!(e.to_string().starts_with("seccomp: "), "{e}");
        assert!(std::error::Error::source(&e).is_some());
        let arch = seccompiler::TargetArch::try_from("sparc").unwrap_err();
        let e = FilterError::Arch(arch.into());
        assert_eq!(e.to_string(), "seccomp: InvalidTargetArch(\"sparc\")");
    }

    #[test]
    fn a_descriptor_path_is_written_without_allocating() {
        let mut out = [0xffu8; 32];
        fd_path(1207, &mut out);
        assert_eq!(&out[..20], b"/proc/self/fd/1207\0\xff");
    }

    #[test]
    fn numbers_are_written_in_decimal_without_allocating() {
        for (n, text) in [
            (0, "0"),
            (-1000, "-1000"),
            (65534, "65534"),
            (i64::MIN, "-9223372036854775808"),
        ] {
            let mut out = [0u8; 20];
            let len = decimal(n, &mut out);
            assert_eq!(&out[..len], text.as_bytes());
        }
    }

    #[test]
    fn a_working_directory_under_tmp_is_kept_with_its_parents() {
        let m = Mounts::new(Some(Path::new("/tmp/a/b")), &[]);
        let bind = &m.binds[0];
        assert_eq!(bind.path.as_bytes(), b"/tmp/a/b");
        let parents: Vec<&[u8]> = bind.parents.iter().map(|p| p.as_bytes()).collect();
        assert_eq!(parents, [&b"/tmp/a"[..]]);
        assert!(!bind.read_only);
        assert!(Mounts::new(Some(Path::new("/srv/x")), &[]).binds.is_empty());
        assert!(Mounts::new(None, &[]).binds.is_empty());
    }

    #[test]
    fn needed_paths_under_private_directories_are_bound_back_read_only_once() {
        let needs = [
            "/usr/bin/sleep",
            "/tmp/clone/target/release",
            "/tmp/clone/target/release/bulkhead-app",
            "/dev/shm/prog",
            "/tmp",
            "/tmpfoo/x",
        ]
        .map(std::path::PathBuf::from);
        let m = Mounts::new(Some(Path::new("/tmp/clone/examples")), &needs);
        let paths: Vec<(&[u8], bool)> = m
            .binds
            .iter()
            .map(|b| (b.path.as_bytes(), b.read_only))
            .collect();
        assert_eq!(
            paths,
            [
                (&b"/tmp/clone/examples"[..], false),
                (b"/dev/shm/prog", true),
                (b"/tmp/clone/target/release", true),
            ]
        );
    }

    /// A working directory below a read-only path (a program's install prefix) stays
    /// writable: it is bound again over the read-only one, after it.
    #[test]
    fn a_working_directory_below_a_read_only_path_stays_writable() {
        let needs = ["/tmp/x/bin/prog", "/tmp/x"].map(std::path::PathBuf::from);
        let m = Mounts::new(Some(Path::new("/tmp/x/desc")), &needs);
        let paths: Vec<(&[u8], bool)> = m
            .binds
            .iter()
            .map(|b| (b.path.as_bytes(), b.read_only))
            .collect();
        assert_eq!(paths, [(&b"/tmp/x"[..], true), (b"/tmp/x/desc", false)]);
    }

    /// A forked child that loads the filter cannot switch itself to SCHED_FIFO or change
    /// its affinity (EPERM), gets ENOSYS from clone3 and EPERM from io_uring, mlock and
    /// syslog, and still runs a program.
    #[test]
    fn a_filtered_child_is_refused_rt_scheduling_and_affinity_but_runs() {
        let filter = Filter::new().expect("compiles");
        // SAFETY: fork in a test: the child makes only system calls and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: in the child; system calls on local memory only.
            unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                if filter.install().is_err() {
                    libc::_exit(10);
                }
                let param = libc::sched_param { sched_priority: 1 };
                if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0
                    || errno() != libc::EPERM
                {
                    libc::_exit(11);
                }
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0 {
                    libc::_exit(12);
                }
                if libc::syscall(libc::SYS_clone3, 0usize, 0usize) == 0 || errno() != libc::ENOSYS {
                    libc::_exit(13);
                }
                // Refused before the kernel looks at the (here invalid) arguments.
                for nr in [
                    libc::SYS_io_uring_setup,
                    libc::SYS_io_uring_enter,
                    libc::SYS_io_uring_register,
                    libc::SYS_mlock,
                    libc::SYS_mlock2,
                    libc::SYS_syslog,
                ] {
                    if libc::syscall(nr, 0usize, 0usize, 0usize) == 0 || errno() != libc::EPERM {
                        libc::_exit(15);
                    }
                }
                for cmd in MEMBARRIER_GLOBAL {
                    if libc::syscall(libc::SYS_membarrier, cmd, 0usize) == 0
                        || errno() != libc::EPERM
                    {
                        libc::_exit(16);
                    }
                }
                // MEMBARRIER_CMD_QUERY stays allowed (and answers which commands work).
                if libc::syscall(libc::SYS_membarrier, 0usize, 0usize) < 0 {
                    libc::_exit(17);
                }
                let other = libc::sched_param { sched_priority: 0 };
                if libc::sched_setscheduler(0, libc::SCHED_BATCH, &other) != 0 {
                    libc::_exit(14);
                }
                libc::_exit(0);
            }
        }
        let mut status = 0;
        // SAFETY: waiting for our own child with a valid status pointer.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "{status:#x}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "see the exit codes above");
    }
}
