//! Spawning a process so that it is inside its cgroups before it runs one
//! instruction of its command, and inherits no file descriptor of the supervisor
//! but its own channel.
//!
//! - cgroup v2: `clone3(CLONE_INTO_CGROUP)` creates the child directly in its
//!   (frozen) process cgroup: it is born frozen and runs nothing until its first thaw.
//! - cgroup v1 (no such flag): the child writes itself into its cpuset and its
//!   (still thawed) freezer cgroup, reports success on its channel and blocks reading
//!   it; the parent waits for the report, freezes the freezer cgroup and releases the
//!   child, which continues (and execs) only when first thawed. The child is cloned
//!   with `CLONE_VM` (see [`ChildMemory`]): thousands of frozen, not yet exec'd
//!   children sharing the supervisor's memory copy-on-write made each further fork
//!   slower (10000 partitions: 35 s).
//!
//! In the child, between clone and exec, only async-signal-safe system calls run:
//! SIGPIPE is reset (the Rust runtime ignores it), the process gets its own mount
//! namespace with a fresh `/tmp` and `/dev/shm` ([`Mounts`]), enters its network
//! namespace, sets no-new-privileges, empties its capability bounding set, loads the
//! seccomp filter, takes its user and clears its capabilities (each as its partition's
//! `sandbox` says, see [`restrict`]), asks to be SIGKILLed when the supervisor
//! dies (and exits if it already has), the channel becomes fd 3 (without
//! close-on-exec), every other fd above 2 but the confinement's passed descriptors
//! (its channels) is closed (`close_range`), the working
//! directory is set, the signal mask (all blocked from clone on) is cleared, then
//! `execve`. With `sandbox.pid_namespace` (channels or not), the child first
//! splits into a monitor and a pid namespace's init that runs the rest and starts the
//! program ([`crate::pidns`]); the init also mounts a fresh `/proc`. (A `CLONE_VM` child shares the supervisor thread's `errno`: a call
//! failing in the child right after its first thaw could change the code in a
//! supervisor error message; nothing else is shared that either writes.)

use crate::cgroup::{PartitionCgroup, ProcessCgroup, Version};
use bulkhead_reserve::confine::{die_with_parent, no_new_privs, partition_env, Confinement};
use bulkhead_reserve::sandbox::{
    clear_capabilities, drop_bounding_set, mount_proc, Filter, Mounts,
};
use std::ffi::{c_char, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The seccomp filter of sandboxed processes, compiled once before the first spawn that
/// needs it and never changed after (children read it between clone and exec).
static FILTER: std::sync::OnceLock<Result<Filter, String>> = std::sync::OnceLock::new();

/// The fd number of the channel in the child (`DEMOS_PARAMETERS=3,3,<init>`).
pub const CHILD_CHANNEL_FD: i32 = 3;

/// A command ready to exec: every string is allocated before fork.
pub struct Prepared {
    path: CString,
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const c_char>,
    cwd: Option<CString>,
    /// User and network namespace, applied after the cgroup join (its `env` is unused:
    /// the environment is the [`Environment`]).
    confine: Confinement,
    /// The private `/tmp` and `/dev/shm` (`sandbox.private_tmp`), mounted first.
    mounts: Option<Mounts>,
    /// A pid namespace of its own under an init ([`crate::pidns`], `sandbox.pid_namespace`).
    pid_namespace: bool,
}

/// An environment block (NUL-terminated pointer array) that outlives the spawns using it.
pub struct Environment {
    _vars: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

impl Environment {
    /// A partition's environment ([`partition_env`]: bulkhead's variables for the
    /// partition, `confine.env`, relaxed as `confine.sandbox` says) with
    /// `DEMOS_PARAMETERS` set to `3,3,<init>` (completion fd, continue fd,
    /// has-initialization: the DEmOS protocol; both fds are the one channel).
    pub fn demos(init: bool, confine: &Confinement) -> Environment {
        let mut vars: Vec<CString> = partition_env(&confine.env, confine.sandbox.clean_env)
            .into_iter()
            .filter(|(k, _)| k != "DEMOS_PARAMETERS")
            .filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok())
            .collect();
        let value = format!(
            "DEMOS_PARAMETERS={CHILD_CHANNEL_FD},{CHILD_CHANNEL_FD},{}",
            u8::from(init)
        );
        vars.push(CString::new(value).expect("no NUL"));
        let mut ptrs: Vec<*const c_char> = vars.iter().map(|v| v.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        Environment { _vars: vars, ptrs }
    }
}

impl Prepared {
    pub fn new(path: &Path, argv: &[String], cwd: Option<&Path>) -> io::Result<Prepared> {
        let cstr = |bytes: &[u8]| {
            CString::new(bytes)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in command"))
        };
        let argv: Vec<CString> = argv
            .iter()
            .map(|a| cstr(a.as_bytes()))
            .collect::<io::Result<_>>()?;
        let mut argv_ptrs: Vec<*const c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        Ok(Prepared {
            path: cstr(path.as_os_str().as_encoded_bytes())?,
            _argv: argv,
            argv_ptrs,
            cwd: cwd
                .map(|c| cstr(c.as_os_str().as_encoded_bytes()))
                .transpose()?,
            confine: Confinement::default(),
            mounts: None,
            pid_namespace: false,
        })
    }

    /// The command run as `confine`'s user in its network namespace, keeping its passed
    /// descriptors (all of which must stay open until the child has exec'd).
    pub fn confined(mut self, confine: &Confinement) -> Prepared {
        self.confine = Confinement {
            identity: confine.identity,
            netns: confine.netns,
            env: Vec::new(),
            pass_fds: sorted(&confine.pass_fds),
            sandbox: confine.sandbox,
        };
        self.mounts = confine.sandbox.private_tmp.then(|| {
            let cwd = self
                .cwd
                .as_ref()
                .map(|c| Path::new(c.to_str().unwrap_or("")));
            Mounts::new(cwd)
        });
        // Channels work across pid namespaces: their ends' liveness is a lock the
        // kernel releases when the holder dies (`bulkhead_chan`), not a pid.
        self.pid_namespace = confine.sandbox.pid_namespace;
        self
    }
}

/// The descriptors above [`CHILD_CHANNEL_FD`] to keep, ascending, without duplicates.
fn sorted(fds: &[i32]) -> Vec<i32> {
    let mut fds: Vec<i32> = fds
        .iter()
        .copied()
        .filter(|&f| f > CHILD_CHANNEL_FD)
        .collect();
    fds.sort_unstable();
    fds.dedup();
    fds
}

/// Closes every descriptor above [`CHILD_CHANNEL_FD`] except `keep` (ascending) and
/// clears close-on-exec on those.
///
/// # Safety
/// Only in a child between clone and exec: async-signal-safe calls, no heap memory.
unsafe fn close_all_but(keep: &[i32]) {
    let mut from = CHILD_CHANNEL_FD + 1;
    for &fd in keep {
        // SAFETY: close_range and fcntl on this (cloned) child's own descriptor table.
        unsafe {
            if fd > from {
                libc::syscall(libc::SYS_close_range, from as u32, (fd - 1) as u32, 0u32);
            }
            libc::fcntl(fd, libc::F_SETFD, 0);
        }
        from = fd + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from as u32, u32::MAX, 0u32) };
}

/// Where the child goes.
pub enum Target<'a> {
    /// v2: the process cgroup directory (frozen).
    V2 { cgroup: &'a Path },
    /// v1: the `cgroup.procs` files of its cpuset (may be absent) and freezer
    /// cgroups; `freeze` freezes the freezer cgroup (thawed during the join).
    V1 {
        join: &'a [CString],
        freeze: &'a mut dyn FnMut() -> io::Result<()>,
    },
}

/// A spawned child: its pid, the supervisor's end of its channel, and (v1) the
/// memory it uses until it execs: keep it until the child is dead.
pub struct Child {
    pub pid: i32,
    pub channel: OwnedFd,
    pub memory: Option<ChildMemory>,
}

#[repr(C)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Spawns `command` with environment `env` into `target`.
pub fn spawn(command: &Prepared, env: &Environment, target: Target<'_>) -> io::Result<Child> {
    if command.confine.sandbox.seccomp {
        if let Err(e) = FILTER.get_or_init(Filter::new) {
            return Err(io::Error::other(e.clone()));
        }
    }
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for socketpair to fill.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } < 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socketpair succeeded, so both fds are open and owned by nobody else.
    let (parent_end, child_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    match target {
        Target::V2 { cgroup } => {
            let parent = std::process::id() as libc::pid_t;
            let dir = std::fs::File::open(cgroup)?;
            let args = CloneArgs {
                flags: CLONE_INTO_CGROUP,
                pidfd: 0,
                child_tid: 0,
                parent_tid: 0,
                exit_signal: libc::SIGCHLD as u64,
                stack: 0,
                stack_size: 0,
                tls: 0,
                set_tid: 0,
                set_tid_size: 0,
                cgroup: dir.as_raw_fd() as u64,
            };
            // SAFETY: clone3 without CLONE_VM duplicates the process like fork; the
            // child only runs `child_main` (async-signal-safe calls, then exec or
            // _exit) and never returns into Rust code of the parent.
            let pid = unsafe {
                libc::syscall(
                    libc::SYS_clone3,
                    &args as *const CloneArgs,
                    std::mem::size_of::<CloneArgs>(),
                )
            };
            if pid < 0 {
                return Err(io::Error::last_os_error());
            }
            if pid == 0 {
                // SAFETY: in the child, see above.
                unsafe { child_main(command, env, child_end.as_raw_fd(), &[], parent) }
            }
            Ok(Child {
                pid: pid as i32,
                channel: parent_end,
                memory: None,
            })
        }
        Target::V1 { join, freeze } => {
            let memory = ChildMemory::new(command, env, child_end.as_raw_fd(), join)?;
            let pid = memory.clone_child()?;
            drop(child_end);
            let child = Child {
                pid,
                channel: parent_end,
                memory: Some(memory),
            };
            if let Err(e) = v1_handshake(&child, freeze) {
                // SAFETY: `pid` is our child; kill it and wait until it is gone
                // (it shares our memory until it execs, so `memory` must outlive it).
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
                }
                return Err(e);
            }
            Ok(child)
        }
    }
}

/// Spawns `command` into the frozen process cgroup `cg` of `partition`: on v2 straight
/// into it (clone3); on v1 the child joins the partition's cpuset, `cg` and `extra` (the
/// `cgroup.procs` files of further cgroups: memory, pids) before it execs. The child is
/// frozen when this returns.
pub fn spawn_into(
    command: &Prepared,
    env: &Environment,
    partition: &PartitionCgroup,
    cg: &mut ProcessCgroup,
    extra: &[PathBuf],
) -> io::Result<Child> {
    if cg.version() == Version::V2 {
        return spawn(command, env, Target::V2 { cgroup: &cg.dir });
    }
    let mut join: Vec<CString> = Vec::new();
    if let Some(dir) = &partition.cpuset_dir {
        join.push(cstring(&dir.join("cgroup.procs")));
    }
    join.push(cstring(&cg.dir.join("cgroup.procs")));
    join.extend(extra.iter().map(|p| cstring(p)));
    cg.set_frozen(false).map_err(io::Error::other)?;
    let mut freeze = || cg.set_frozen(true).map_err(io::Error::other);
    spawn(
        command,
        env,
        Target::V1 {
            join: &join,
            freeze: &mut freeze,
        },
    )
}

fn cstring(path: &Path) -> CString {
    CString::new(path.as_os_str().as_encoded_bytes()).expect("cgroup paths have no NUL")
}

/// Stack size of a v1 child before it execs (it only makes system calls).
const CHILD_STACK: usize = 64 * 1024;

/// What a v1 child reads between clone and exec, in memory it shares with the
/// supervisor (`CLONE_VM`): its stack and its arguments. Must stay allocated, and
/// the `Prepared` command and `Environment` it points to unchanged, until the
/// child has exec'd or is dead.
pub struct ChildMemory {
    stack: Stack,
    args: Box<ChildArgs>,
}

/// An mmap'd stack with a guard page below it: only the pages the child touches
/// cost memory, and an overflow faults instead of corrupting the supervisor.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

const PAGE: usize = 4096;

impl Stack {
    fn new() -> io::Result<Stack> {
        let len = CHILD_STACK + PAGE;
        // SAFETY: a fresh private anonymous mapping; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the lowest page of our own mapping becomes the guard page.
        if unsafe { libc::mprotect(base, PAGE, libc::PROT_NONE) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: unmapping the mapping made above.
            unsafe { libc::munmap(base, len) };
            return Err(e);
        }
        Ok(Stack { base, len })
    }

    /// The initial stack pointer (the stack grows down), 16-byte aligned.
    fn top(&self) -> *mut libc::c_void {
        ((self.base as usize + self.len) & !15) as *mut libc::c_void
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; callers drop it only once the child
        // that used it exec'd or died.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

struct ChildArgs {
    command: *const Prepared,
    env: *const Environment,
    channel: i32,
    join: *const CString,
    join_len: usize,
    parent: libc::pid_t,
}

impl ChildMemory {
    fn new(
        command: &Prepared,
        env: &Environment,
        channel: i32,
        join: &[CString],
    ) -> io::Result<ChildMemory> {
        let args = ChildArgs {
            command,
            env,
            channel,
            join: join.as_ptr(),
            join_len: join.len(),
            parent: std::process::id() as libc::pid_t,
        };
        Ok(ChildMemory {
            stack: Stack::new()?,
            args: Box::new(args),
        })
    }

    /// Starts the child with `CLONE_VM`: unlike fork, no page tables are copied and
    /// no anonymous memory is shared copy-on-write with the (frozen, not yet exec'd)
    /// child, which would make every further fork slower (thousands of processes).
    /// All signals are blocked in the child until just before it execs.
    fn clone_child(&self) -> io::Result<i32> {
        let top = self.stack.top();
        // SAFETY: sigset manipulation on valid local sets; the mask is restored below.
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        }
        let arg = &*self.args as *const ChildArgs as *mut libc::c_void;
        // SAFETY: the child runs `child_entry` on its own stack (`top`, 16-byte
        // aligned, CHILD_STACK bytes above a guard page) and only reads `args` and what it points to,
        // which the caller keeps alive and unchanged until the child exec'd or died.
        let pid = unsafe { libc::clone(child_entry, top, libc::CLONE_VM | libc::SIGCHLD, arg) };
        let error = io::Error::last_os_error();
        // SAFETY: restoring the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        if pid < 0 {
            return Err(error);
        }
        Ok(pid)
    }
}

extern "C" fn child_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildArgs` of a live `ChildMemory` (see `clone_child`).
    unsafe {
        let a = &*(arg as *const ChildArgs);
        let join = std::slice::from_raw_parts(a.join, a.join_len);
        child_main(&*a.command, &*a.env, a.channel, join, a.parent)
    }
}

/// v1: waits for the child's join report, freezes it, releases it.
fn v1_handshake(child: &Child, freeze: &mut dyn FnMut() -> io::Result<()>) -> io::Result<()> {
    let fd = child.channel.as_raw_fd();
    let mut status = [0u8; 4];
    // SAFETY: reading into a 4-byte buffer from an fd we own.
    let n = unsafe { libc::read(fd, status.as_mut_ptr().cast(), 4) };
    if n != 4 {
        return Err(io::Error::other(
            "the child died before joining its cgroups",
        ));
    }
    let errno = i32::from_ne_bytes(status);
    if errno != 0 {
        return Err(io::Error::from_raw_os_error(errno));
    }
    freeze()?;
    // SAFETY: writing one byte from a valid buffer to an fd we own.
    if unsafe { libc::send(fd, [1u8].as_ptr().cast(), 1, libc::MSG_NOSIGNAL) } != 1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Confines the calling child as `confine` says, in this order: its network namespace,
/// no-new-privileges, an empty bounding set (while still root), the seccomp filter (which
/// refuses `setns`, so after it), its user, then no capabilities left.
///
/// # Safety
/// Only in a child between clone and exec: async-signal-safe calls on memory prepared
/// before the clone ([`FILTER`] is set when `confine.sandbox.seccomp`).
unsafe fn restrict(confine: &Confinement) -> Result<(), i32> {
    let sandbox = confine.sandbox;
    // SAFETY: the caller's contract.
    unsafe {
        confine.enter_netns()?;
        if sandbox.no_new_privs {
            no_new_privs()?;
        }
        if sandbox.no_capabilities {
            drop_bounding_set()?;
        }
        if sandbox.seccomp {
            match FILTER.get() {
                Some(Ok(filter)) => filter.install()?,
                _ => return Err(libc::EINVAL),
            }
        }
        confine.take_identity()?;
        if sandbox.no_capabilities {
            clear_capabilities()?;
        }
    }
    Ok(())
}

/// The child between fork and exec.
///
/// # Safety
/// Must only be called in a freshly forked/cloned child of `parent`. Uses only
/// async-signal-safe system calls on memory prepared before the fork; never returns.
unsafe fn child_main(
    command: &Prepared,
    env: &Environment,
    channel: i32,
    join: &[CString],
    parent: libc::pid_t,
) -> ! {
    // SAFETY: the caller's contract: a fresh child, async-signal-safe calls only, on
    // NUL-terminated strings and pointer arrays prepared (and kept alive) before the clone.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        if !join.is_empty() {
            let mut errno: i32 = 0;
            for file in join {
                let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    errno = *libc::__errno_location();
                    break;
                }
                libc::close(fd);
            }
            let report = errno.to_ne_bytes();
            libc::write(channel, report.as_ptr().cast(), 4);
            if errno != 0 {
                libc::_exit(127);
            }
            // Blocks until the parent froze our freezer cgroup and released us; the
            // read completes only once we are thawed.
            let mut release = 0u8;
            if libc::read(channel, (&mut release as *mut u8).cast(), 1) != 1 {
                libc::_exit(127);
            }
        }
        let status = if command.pid_namespace {
            if die_with_parent(parent).is_err() {
                libc::_exit(127);
            }
            Some(crate::pidns::split())
        } else {
            None
        };
        if let Some(mounts) = &command.mounts {
            if mounts.apply().is_err() {
                libc::_exit(126);
            }
        }
        if status.is_some() && mount_proc(command.mounts.is_none()).is_err() {
            libc::_exit(126);
        }
        if restrict(&command.confine).is_err() {
            libc::_exit(126);
        }
        match status {
            Some(status) => {
                if crate::pidns::die_with_monitor(status).is_err() {
                    libc::_exit(127);
                }
                crate::pidns::start_program(status);
            }
            None => {
                if die_with_parent(parent).is_err() {
                    libc::_exit(127);
                }
            }
        }
        if channel == CHILD_CHANNEL_FD {
            libc::fcntl(channel, libc::F_SETFD, 0);
        } else if libc::dup2(channel, CHILD_CHANNEL_FD) < 0 {
            libc::_exit(127);
        }
        bulkhead_os::sched::restore_fd_limit();
        close_all_but(&command.confine.pass_fds);
        if let Some(cwd) = &command.cwd {
            if libc::chdir(cwd.as_ptr()) < 0 {
                libc::_exit(126);
            }
        }
        libc::execve(
            command.path.as_ptr(),
            command.argv_ptrs.as_ptr(),
            env.ptrs.as_ptr(),
        );
        libc::_exit(127)
    }
}
