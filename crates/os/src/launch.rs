//! The one launcher: every process bulkhead starts (window and be processes, rt tasks)
//! is started here, inside its cgroups before it runs one instruction of its program,
//! under its scheduling policy, credentials, namespaces and sandbox, with exactly the
//! descriptors it is handed: the spawner thread clones it from a descriptor table that
//! holds those alone ([`crate::spawner`]), never from the supervisor's.
//!
//! How the child gets into its cgroups ([`Join`]):
//! - [`Join::Into`] (cgroup v2): `clone3(CLONE_INTO_CGROUP)` creates the child directly
//!   in its cgroup; in a frozen cgroup it is born frozen and runs nothing until its
//!   first thaw.
//! - [`Join::Write`]: the child writes itself into the given `cgroup.procs` files
//!   (opened by the parent) first of all, before it execs.
//! - [`Join::Hold`] (cgroup v1 window processes, whose freezer has no such flag): the
//!   child writes itself into its cgroups (the freezer one still thawed), reports
//!   success on its channel and blocks reading it; the parent waits for the report,
//!   freezes the freezer cgroup (`freeze`) and releases the child, which continues (and
//!   execs) only when first thawed. A child that becomes a pid namespace's monitor is
//!   cloned with `CLONE_VM` (see [`ChildMemory`]): thousands of frozen, not yet exec'd
//!   children sharing the supervisor's memory copy-on-write made each further fork
//!   slower (10000 partitions: 35 s). One that execs itself (`pid_namespace: false`)
//!   is forked copy-on-write: it sets its OOM score, which the kernel would pass on to
//!   every sharer of its memory ([`crate::oom`]); that relaxation pays the slower forks.
//!
//! In the child, between clone and exec, only async-signal-safe system calls run, on
//! memory prepared before the clone (no allocation), in this order: SIGPIPE is reset
//! (the Rust runtime ignores it); the cgroups are joined; the scheduling policy is set
//! (`sched_setattr`: inside the exclusive cpuset, while still privileged and before the
//! seccomp filter refuses it); with [`Confine::pid_namespace`] the child splits into a
//! monitor and a pid namespace's init that runs the rest and starts the program
//! ([`crate::pidns`]); the process gets its own mount namespace with a fresh `/tmp`,
//! `/var/tmp` and `/dev/shm` ([`Mounts`]) and the init a fresh `/proc`; then the
//! read-only host, the hidden runtime directory and its IPC namespace ([`Protections`]);
//! the working directory is set; the process enters its network namespace, sets
//! no-new-privileges, empties its capability bounding set, loads the seccomp filter,
//! takes its user (and enters its user namespace) and clears its capabilities (each as
//! [`Confine`] says, see [`restrict`]); it asks to be SIGKILLed when the parent dies (and
//! exits if it already has); the process that execs the program (the pid namespace's
//! program, else the child itself) joins the cgroups only it joins (the v1 memory
//! cgroup) and sets its OOM score ([`crate::oom`]); the descriptors are handed over
//! ([`Fds`]: stdin from `/dev/null`, the channel becomes fd [`CHANNEL_FD`] without
//! close-on-exec, the kept descriptors lose close-on-exec, every other one above is
//! closed when asked); the descriptor limit the supervisor started with is restored
//! ([`crate::sched::restore_fd_limit`]); the signal handlers are reset and the signal
//! mask (all blocked from clone on) is cleared; then `execve`. A failure ends the child
//! with status 126 (its sandbox or working directory) or 127 (anything else) and, with
//! [`Launch::wait_exec`], is reported to the parent as the errno of the failed call.
//!
//! (A `CLONE_VM` child shares the supervisor thread's `errno`: a call failing in the
//! child right after its first thaw could change the code in a supervisor error
//! message; nothing else is shared that either writes.)

use crate::harden::{enter_user_namespace, Protect, Protections};
use crate::sandbox::{
    clear_capabilities, die_with_parent, drop_bounding_set, enter_netns, mount_proc, no_new_privs,
    take_identity, Filter, FilterError, Mounts,
};
use std::ffi::{c_char, CString};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The fd number a handed channel has in the child (`DEMOS_PARAMETERS=3,3,<init>`).
pub const CHANNEL_FD: i32 = 3;

/// The seccomp filter of sandboxed processes, compiled once before the first launch
/// that needs it and never changed after (children read it between clone and exec).
static FILTER: std::sync::OnceLock<Result<Filter, FilterError>> = std::sync::OnceLock::new();

/// A program ready to exec: every string is allocated before the clone.
pub struct Program {
    path: CString,
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const c_char>,
    cwd: Option<CString>,
    /// Paths it must see where they are ([`Program::needing`]).
    needs: Vec<PathBuf>,
}

impl Program {
    /// `path` run with `argv` (its first word is the program's name) in `cwd`; an
    /// error for a NUL byte in any of them.
    pub fn new(path: &Path, argv: &[String], cwd: Option<&Path>) -> io::Result<Program> {
        let argv: Vec<CString> = argv
            .iter()
            .map(|a| cstr(a.as_bytes()))
            .collect::<io::Result<_>>()?;
        let mut argv_ptrs: Vec<*const c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        Ok(Program {
            path: cstr(path.as_os_str().as_encoded_bytes())?,
            _argv: argv,
            argv_ptrs,
            cwd: cwd
                .map(|c| cstr(c.as_os_str().as_encoded_bytes()))
                .transpose()?,
            needs: Vec::new(),
        })
    }

    /// The program, which must see `needs` at their paths (its file, its script, the
    /// directories of its `PATH`): a private `/tmp` or `/dev/shm` shows them read-only
    /// ([`Mounts`]).
    pub fn needing(mut self, needs: &[PathBuf]) -> Program {
        self.needs = needs.to_vec();
        self
    }

    /// The working directory, if set.
    fn cwd(&self) -> Option<&Path> {
        let cwd = self.cwd.as_ref()?;
        Some(Path::new(std::ffi::OsStr::from_bytes(cwd.as_bytes())))
    }
}

fn cstr(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in command"))
}

/// The whole environment of a program (a NUL-terminated pointer array), prepared before
/// the clone; it must outlive every launch that uses it until the child has exec'd.
pub struct Env {
    _vars: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

impl Env {
    /// The variables `vars`, in order (a variable with a NUL byte is left out).
    pub fn new(vars: impl IntoIterator<Item = (String, String)>) -> Env {
        let vars: Vec<CString> = vars
            .into_iter()
            .filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok())
            .collect();
        let mut ptrs: Vec<*const c_char> = vars.iter().map(|v| v.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        Env { _vars: vars, ptrs }
    }
}

/// Credentials, namespaces and sandbox of a launched process; all off by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Confine {
    /// uid and gid to run as (supplementary groups are dropped); `None` = unchanged.
    pub identity: Option<(u32, u32)>,
    /// A network namespace to enter (an fd the caller keeps open until the child has
    /// exec'd); `None` = the parent's.
    pub netns: Option<RawFd>,
    /// `PR_SET_NO_NEW_PRIVS`.
    pub no_new_privs: bool,
    /// An empty capability bounding set and no capabilities left after the uid change.
    pub no_capabilities: bool,
    /// The seccomp filter of [`Filter`].
    pub seccomp: bool,
    /// A mount namespace of its own with a fresh `/tmp` and `/dev/shm` ([`Mounts`]).
    pub private_tmp: bool,
    /// A pid namespace of its own under a minimal init ([`crate::pidns`]).
    pub pid_namespace: bool,
    /// The `oom_score_adj` the program starts with (not below the supervisor's, see
    /// [`crate::oom`]); `None`: the supervisor's, inherited.
    pub oom_score_adj: Option<i32>,
    /// Root of a user namespace of its own whose uid and gid 0 are [`Confine::identity`]
    /// ([`enter_user_namespace`]); without an identity, nothing.
    pub private_users: bool,
    /// Read-only system files, kernel settings and cgroups, the runtime directory
    /// hidden, an IPC namespace of its own ([`Protections`]).
    pub protect: Protect,
}

/// How the child gets into its cgroups before its program runs.
pub enum Join<'a> {
    /// It stays in the parent's cgroups.
    Stay,
    /// cgroup v2: created in this cgroup directory (`clone3(CLONE_INTO_CGROUP)`).
    Into(&'a Path),
    /// It writes itself into each of these `cgroup.procs` files, in order (the cpuset
    /// first, so that a reservation is set inside its exclusive domain).
    Write(&'a [PathBuf]),
    /// cgroup v1 with a freezer: [`Join::Write`] of `procs`, then the handshake on the
    /// channel ([`Fds::channel`], whose other end is `peer`): `freeze` freezes the
    /// freezer cgroup (thawed during the join) before the child is released. With
    /// [`Confine::pid_namespace`] the child (the monitor) is cloned with `CLONE_VM`;
    /// keep [`Child::memory`] until it is dead. `program_procs` (the memory cgroup) are
    /// joined by the process that execs the program alone: no process sharing the
    /// supervisor's memory is ever in a partition's memory cgroup ([`crate::oom`]).
    Hold {
        procs: &'a [PathBuf],
        program_procs: &'a [PathBuf],
        peer: RawFd,
        freeze: &'a mut dyn FnMut() -> io::Result<()>,
    },
}

/// The descriptors a child is handed, the only ones of the parent's it ever holds (it
/// is cloned from a table holding those alone, [`crate::spawner`]); the copies it reads
/// before exec and does not keep are close-on-exec (or closed with `close_others`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Fds<'a> {
    /// A socket that becomes [`CHANNEL_FD`] in the child.
    pub channel: Option<RawFd>,
    /// Descriptors kept open across exec at their numbers (channels, a task's link);
    /// the caller keeps them open until the child has exec'd. Each is above the
    /// standard streams and, when a channel is handed, above [`CHANNEL_FD`] (else
    /// [`spawn`] refuses it: the child's own descriptor would replace it).
    pub keep: &'a [RawFd],
    /// Close every descriptor above the standard streams (and the channel) but `keep`.
    pub close_others: bool,
    /// Standard input from `/dev/null` instead of the parent's.
    pub null_stdin: bool,
    /// Standard output and error (e.g. pipes whose lines the supervisor labels)
    /// instead of the parent's; the caller keeps them open until the child has exec'd.
    pub output: Option<(RawFd, RawFd)>,
}

/// What to start, where and how.
pub struct Launch<'a> {
    pub program: &'a Program,
    pub env: &'a Env,
    pub join: Join<'a>,
    /// The scheduling policy the program starts under (`sched_setattr`).
    pub sched: Option<libc::sched_attr>,
    pub confine: Confine,
    pub fds: Fds<'a>,
    /// Wait until the child has exec'd, and return the errno of a step that failed
    /// before as the error. Only for a child that runs at once (not with [`Join::Into`],
    /// whose cgroup may be frozen, nor [`Join::Hold`]).
    pub wait_exec: bool,
}

/// A started child: its pid and (with [`Join::Hold`]) the memory it uses until it
/// execs: keep it until the child is dead.
pub struct Child {
    pub pid: i32,
    pub memory: Option<ChildMemory>,
}

/// Starts `launch`. Postcondition: the child is in its cgroups (with [`Join::Hold`]:
/// frozen, not yet exec'd); with [`Launch::wait_exec`] it has exec'd its program.
/// On error no child is left (a failed child is reaped).
pub fn spawn(launch: Launch<'_>) -> io::Result<Child> {
    let Launch {
        program,
        env,
        join,
        sched,
        confine,
        fds,
        wait_exec,
    } = launch;
    check_keep(&fds)?;
    if confine.seccomp {
        if let Err(e) = FILTER.get_or_init(Filter::new) {
            return Err(io::Error::other(e.clone()));
        }
    }
    let hold = matches!(join, Join::Hold { .. });
    let waits_in_vain = wait_exec && (hold || matches!(join, Join::Into(_)));
    if waits_in_vain || (hold && fds.channel.is_none()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a held child or a frozen one cannot be waited for, and a held one needs a channel",
        ));
    }
    let (procs, program_procs): (&[PathBuf], &[PathBuf]) = match &join {
        Join::Write(procs) => (procs, &[]),
        Join::Hold {
            procs,
            program_procs,
            ..
        } => (procs, program_procs),
        _ => (&[], &[]),
    };
    let files = open_procs(procs)?;
    let program_files = open_procs(program_procs)?;
    let null = match fds.null_stdin {
        true => Some(File::open("/dev/null")?),
        false => None,
    };
    let report = match wait_exec {
        true => Some(pipe()?),
        false => None,
    };
    let plan = Plan {
        program,
        env,
        procs: files.iter().map(|f| f.as_raw_fd()).collect(),
        program_procs: program_files.iter().map(|f| f.as_raw_fd()).collect(),
        hold,
        sched,
        confine,
        mounts: confine
            .private_tmp
            .then(|| Mounts::new(program.cwd(), &program.needs)),
        protections: Protections::new(confine.protect),
        channel: fds.channel.unwrap_or(-1),
        stdin: null.as_ref().map_or(-1, |f| f.as_raw_fd()),
        output: fds.output,
        keep: sorted(fds.keep),
        close_others: fds.close_others,
        report: report.as_ref().map_or(-1, |(_, w)| w.as_raw_fd()),
        parent: std::process::id() as libc::pid_t,
    };
    let dir = match join {
        Join::Into(dir) => Some(File::open(dir)?),
        _ => None,
    };
    let dir_fd = dir.as_ref().map(|d| d.as_raw_fd());
    // Only a monitor, which never execs, may share the supervisor's memory: a process
    // that execs sets its OOM score, which the kernel would pass on.
    let shares_memory = hold && confine.pid_namespace;
    let (pid, memory) = crate::spawner::on_own_table(|table| {
        let mut plan = plan;
        plan.copy_into(table)?;
        let dir = dir_fd.map(|fd| table.copy(fd)).transpose()?;
        table.seal();
        match shares_memory {
            true => {
                let memory = ChildMemory::new(plan)?;
                Ok((memory.clone_child()?, Some(memory)))
            }
            false => Ok((fork_into(dir, &plan)?, None)),
        }
    })?;
    if let Join::Hold { peer, freeze, .. } = join {
        if let Err(e) = handshake(peer, freeze) {
            kill_and_reap(pid);
            return Err(e);
        }
    }
    let child = Child { pid, memory };
    drop((files, program_files, null, dir));
    if let Some((read, write)) = report {
        drop(write);
        if let Err(e) = wait_for_exec(&read) {
            kill_and_reap(child.pid);
            return Err(e);
        }
    }
    Ok(child)
}

/// Opens each `cgroup.procs` file for writing (close-on-exec); an error names the file.
fn open_procs(procs: &[PathBuf]) -> io::Result<Vec<File>> {
    procs
        .iter()
        .map(|p| {
            OpenOptions::new()
                .write(true)
                .open(p)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))
        })
        .collect()
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    crate::check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded: both fds are new and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Reads the child's report: end of file once it exec'd (the write end was
/// close-on-exec), else the errno of the step that failed.
fn wait_for_exec(read: &OwnedFd) -> io::Result<()> {
    let mut errno = [0u8; 4];
    loop {
        // SAFETY: reading at most 4 bytes into a 4-byte buffer from an fd we own.
        let n = unsafe { libc::read(read.as_raw_fd(), errno.as_mut_ptr().cast(), 4) };
        match n {
            0 => return Ok(()),
            4 => return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno))),
            n if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return Err(io::Error::other("the child's report was cut short")),
        }
    }
}

/// Kills child `pid` and waits until it is gone.
fn kill_and_reap(pid: i32) {
    // SAFETY: `pid` is our own unreaped child; kill and waitpid touch no memory of ours
    // but the null status pointer, which waitpid accepts.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
    }
}

/// Everything the child reads between clone and exec, prepared before the clone.
/// Postcondition of [`spawn`]'s callers: it, the [`Program`] and the [`Env`] stay
/// allocated and unchanged until the child has exec'd or is dead.
struct Plan {
    program: *const Program,
    env: *const Env,
    /// Open `cgroup.procs` files to write "0" into.
    procs: Vec<RawFd>,
    /// Those the process that execs writes "0" into, last ([`Join::Hold`]).
    program_procs: Vec<RawFd>,
    hold: bool,
    sched: Option<libc::sched_attr>,
    confine: Confine,
    mounts: Option<Mounts>,
    protections: Option<Protections>,
    channel: RawFd,
    stdin: RawFd,
    output: Option<(RawFd, RawFd)>,
    /// Descriptors kept, ascending, above the standard streams and the channel.
    keep: Vec<RawFd>,
    close_others: bool,
    /// The write end of the report pipe ([`Launch::wait_exec`]), or -1.
    report: RawFd,
    parent: libc::pid_t,
}

impl Plan {
    /// Renumbers every descriptor the child reads to a copy in the spawner's `table`
    /// ([`crate::spawner`]): the kept ones at their numbers first, then the standard
    /// streams it inherits, then the rest (numbered above [`CHANNEL_FD`], so that moving
    /// the child's own into place replaces none of them).
    fn copy_into(&mut self, table: &mut crate::spawner::Table) -> io::Result<()> {
        for &fd in &self.keep {
            table.copy_at(fd)?;
        }
        if self.stdin < 0 {
            table.stream(0)?;
        }
        if self.output.is_none() {
            table.stream(1)?;
            table.stream(2)?;
        }
        let copy = |fd: &mut RawFd| -> io::Result<()> {
            if *fd >= 0 {
                *fd = table.copy(*fd)?;
            }
            Ok(())
        };
        self.procs.iter_mut().try_for_each(copy)?;
        self.program_procs.iter_mut().try_for_each(copy)?;
        copy(&mut self.channel)?;
        copy(&mut self.stdin)?;
        copy(&mut self.report)?;
        if let Some((out, err)) = &mut self.output {
            copy(out)?;
            copy(err)?;
        }
        if let Some(netns) = &mut self.confine.netns {
            copy(netns)?;
        }
        Ok(())
    }
}

/// Refuses a descriptor of `fds.keep` at a number the child's standard streams or
/// channel take: the child's own would replace it.
fn check_keep(fds: &Fds<'_>) -> io::Result<()> {
    let floor = if fds.channel.is_some() { CHANNEL_FD } else { 2 };
    match fds.keep.iter().find(|&&fd| fd <= floor) {
        Some(fd) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "descriptor {fd} cannot be kept at its number: the child's 0..={floor} are its own"
            ),
        )),
        None => Ok(()),
    }
}

/// The descriptors of `fds` (above the standard streams and the channel: [`spawn`]
/// checked), ascending, without duplicates.
fn sorted(fds: &[RawFd]) -> Vec<RawFd> {
    let mut fds = fds.to_vec();
    fds.sort_unstable();
    fds.dedup();
    fds
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

/// Blocks every signal of the calling thread; returns the mask to restore.
fn block_all() -> libc::sigset_t {
    // SAFETY: sigset manipulation on valid local sets.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    }
}

fn restore_mask(old: &libc::sigset_t) {
    // SAFETY: restoring a mask saved by `block_all`.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

/// Starts the child like fork (`clone3` without `CLONE_VM`), in cgroup directory
/// `cgroup` (an open fd) when given. All signals are blocked in the child until just
/// before it execs.
fn fork_into(cgroup: Option<RawFd>, plan: &Plan) -> io::Result<i32> {
    let args = CloneArgs {
        flags: if cgroup.is_some() {
            CLONE_INTO_CGROUP
        } else {
            0
        },
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: 0,
        stack_size: 0,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
        cgroup: cgroup.unwrap_or(0) as u64,
    };
    let old = block_all();
    // SAFETY: clone3 without CLONE_VM duplicates the process like fork; the child only
    // runs `child_main` (async-signal-safe calls on its copy of `plan`, then exec or
    // _exit) and never returns into Rust code of the parent.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if pid == 0 {
        // SAFETY: in the child, see above.
        unsafe { child_main(plan) }
    }
    let error = io::Error::last_os_error();
    restore_mask(&old);
    if pid < 0 {
        return Err(error);
    }
    Ok(pid as i32)
}

/// Stack size of a `CLONE_VM` child before it execs (it only makes system calls).
const CHILD_STACK: usize = 64 * 1024;

/// What a [`Join::Hold`] child reads between clone and exec, in memory it shares with
/// the parent (`CLONE_VM`): its stack and its plan. Must stay allocated, and the
/// [`Program`] and [`Env`] it points to unchanged, until the child has exec'd or is
/// dead.
pub struct ChildMemory {
    stack: Stack,
    plan: Box<Plan>,
}

/// An mmap'd stack with a guard page below it: only the pages the child touches
/// cost memory, and an overflow faults instead of corrupting the parent. The guard is
/// a guard region in the page tables (`MADV_GUARD_INSTALL`, Linux 6.13) where the
/// kernel has them, so that the stacks stay mergeable into few mappings; else a
/// `PROT_NONE` page, which splits each stack into two mappings of its own. Every
/// exiting process walks its memory's mappings (`acct_collect`), and a held child
/// shares the supervisor's: 10,000 stacks made 20,000 mappings walked by each of
/// 10,000 dying children in a teardown.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

const PAGE: usize = 4096;

/// `madvise` advice installing a guard region (Linux 6.13; not in the libc crate yet).
const MADV_GUARD_INSTALL: libc::c_int = 102;

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
        // SAFETY: the lowest page of our own mapping becomes the guard region.
        let guarded = unsafe { libc::madvise(base, PAGE, MADV_GUARD_INSTALL) } == 0;
        // SAFETY: else the lowest page of our own mapping becomes the guard page.
        if !guarded && unsafe { libc::mprotect(base, PAGE, libc::PROT_NONE) } != 0 {
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

impl ChildMemory {
    fn new(plan: Plan) -> io::Result<ChildMemory> {
        Ok(ChildMemory {
            stack: Stack::new()?,
            plan: Box::new(plan),
        })
    }

    /// Starts the child with `CLONE_VM`: unlike fork, no page tables are copied and
    /// no anonymous memory is shared copy-on-write with the (frozen, not yet exec'd)
    /// child, which would make every further fork slower (thousands of processes).
    /// All signals are blocked in the child until just before it execs.
    fn clone_child(&self) -> io::Result<i32> {
        let top = self.stack.top();
        let old = block_all();
        let arg = &*self.plan as *const Plan as *mut libc::c_void;
        // SAFETY: the child runs `child_entry` on its own stack (`top`, 16-byte
        // aligned, CHILD_STACK bytes above a guard page) and only reads the plan and
        // what it points to, which the caller keeps alive and unchanged until the
        // child exec'd or died.
        let pid = unsafe { libc::clone(child_entry, top, libc::CLONE_VM | libc::SIGCHLD, arg) };
        let error = io::Error::last_os_error();
        restore_mask(&old);
        if pid < 0 {
            return Err(error);
        }
        Ok(pid)
    }
}

extern "C" fn child_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Plan` of a live `ChildMemory` (see `clone_child`).
    unsafe { child_main(&*(arg as *const Plan)) }
}

/// [`Join::Hold`]: waits for the child's join report on `peer`, freezes it, releases it.
fn handshake(peer: RawFd, freeze: &mut dyn FnMut() -> io::Result<()>) -> io::Result<()> {
    let mut status = [0u8; 4];
    // SAFETY: reading into a 4-byte buffer from an fd the caller owns.
    let n = unsafe { libc::read(peer, status.as_mut_ptr().cast(), 4) };
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
    // SAFETY: writing one byte from a valid buffer to an fd the caller owns.
    if unsafe { libc::send(peer, [1u8].as_ptr().cast(), 1, libc::MSG_NOSIGNAL) } != 1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Confines the calling child as `confine` says, in this order: its network namespace,
/// no-new-privileges, an empty bounding set (while still root), the seccomp filter (which
/// refuses `setns`, so after it), its user, then no capabilities left. With a user
/// namespace, that is entered after the uid change (unprivileged: the new namespace's
/// root is the process's uid outside), and the bounding set emptied again (a new user
/// namespace gives its creator every capability in it) and the filter loaded (it
/// refuses `unshare`) in it.
///
/// # Safety
/// Only in a child between clone and exec: async-signal-safe calls on memory prepared
/// before the clone ([`FILTER`] is set when `confine.seccomp`).
unsafe fn restrict(confine: &Confine) -> Result<(), i32> {
    let userns = confine.identity.filter(|_| confine.private_users);
    // SAFETY: the caller's contract.
    unsafe {
        if let Some(fd) = confine.netns {
            enter_netns(fd)?;
        }
        if confine.no_new_privs {
            no_new_privs()?;
        }
        if confine.no_capabilities {
            drop_bounding_set()?;
        }
        if confine.seccomp && userns.is_none() {
            install_filter()?;
        }
        if let Some((uid, gid)) = confine.identity {
            take_identity(uid, gid)?;
        }
        if let Some((uid, gid)) = userns {
            enter_user_namespace(uid, gid)?;
            if confine.no_capabilities {
                drop_bounding_set()?;
            }
            if confine.seccomp {
                install_filter()?;
            }
        }
        if confine.no_capabilities {
            clear_capabilities()?;
        }
    }
    Ok(())
}

/// Loads the seccomp filter ([`FILTER`]) into the calling child.
///
/// # Safety
/// As [`restrict`].
unsafe fn install_filter() -> Result<(), i32> {
    match FILTER.get() {
        // SAFETY: the caller's contract.
        Some(Ok(filter)) => unsafe { filter.install() },
        _ => Err(libc::EINVAL),
    }
}

/// Ends the child after a failed step: reports `errno` on the report pipe, if any,
/// and exits with `code`.
///
/// # Safety
/// Only in a child between clone and exec.
unsafe fn fail(plan: &Plan, errno: i32, code: i32) -> ! {
    // SAFETY: write(2) of a local 4-byte buffer and _exit are async-signal-safe.
    unsafe {
        if plan.report >= 0 {
            libc::write(plan.report, errno.to_ne_bytes().as_ptr().cast(), 4);
        }
        libc::_exit(code)
    }
}

/// `Ok` for a system call's 0 (or any non-negative result), else the errno it set.
fn ok(r: libc::c_long) -> Result<(), i32> {
    match r >= 0 {
        true => Ok(()),
        false => Err(crate::sandbox::errno()),
    }
}

/// Writes the calling child into each cgroup whose `cgroup.procs` is open as `procs`.
/// The files were opened by the supervisor (root), which is what the kernel checks:
/// this works after the child's uid change too.
///
/// # Safety
/// Only in a child between clone and exec; the descriptors are open.
unsafe fn join_cgroups(procs: &[RawFd]) -> Result<(), i32> {
    for &fd in procs {
        // SAFETY: write(2) of a static byte to an open descriptor.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return Err(crate::sandbox::errno());
        }
    }
    Ok(())
}

/// [`Join::Hold`]: reports the join on the channel and blocks until the parent froze
/// the freezer cgroup and released the child; the read completes only once the child
/// is thawed.
///
/// # Safety
/// Only in a child between clone and exec; `plan.channel` is open.
unsafe fn hold(plan: &Plan, joined: Result<(), i32>) {
    let errno = joined.err().unwrap_or(0);
    // SAFETY: write and read of local buffers on an open descriptor; _exit.
    unsafe {
        libc::write(plan.channel, errno.to_ne_bytes().as_ptr().cast(), 4);
        if errno != 0 {
            libc::_exit(127);
        }
        let mut release = 0u8;
        if libc::read(plan.channel, (&mut release as *mut u8).cast(), 1) != 1 {
            libc::_exit(127);
        }
    }
}

/// Hands the descriptors over ([`Fds`]).
///
/// # Safety
/// Only in a child between clone and exec: close_range, dup2 and fcntl on its own
/// descriptor table.
unsafe fn hand_over(plan: &Plan) -> Result<(), i32> {
    // SAFETY: the caller's contract.
    unsafe {
        if plan.stdin >= 0 {
            ok(libc::dup2(plan.stdin, 0).into())?;
        }
        if let Some((out, err)) = plan.output {
            ok(libc::dup2(out, 1).into())?;
            ok(libc::dup2(err, 2).into())?;
        }
        let mut from = 3;
        if plan.channel >= 0 {
            if plan.channel == CHANNEL_FD {
                ok(libc::fcntl(plan.channel, libc::F_SETFD, 0).into())?;
            } else {
                ok(libc::dup2(plan.channel, CHANNEL_FD).into())?;
            }
            from = CHANNEL_FD + 1;
        }
        for &fd in &plan.keep {
            if plan.close_others && fd > from {
                close_all_but(from, fd - 1, plan.report);
            }
            ok(libc::fcntl(fd, libc::F_SETFD, 0).into())?;
            from = fd + 1;
        }
        if plan.close_others {
            close_all_but(from, RawFd::MAX, plan.report);
        }
    }
    Ok(())
}

/// Closes the descriptors `from..=to` of the calling child but `spare` (the report
/// pipe, close-on-exec: it reports a failure up to the exec).
///
/// # Safety
/// Only in a child between clone and exec (close_range on its own table).
unsafe fn close_all_but(from: i32, to: i32, spare: RawFd) {
    let close = |from: i32, to: i32| {
        if from <= to {
            // SAFETY: the caller's contract.
            unsafe { libc::syscall(libc::SYS_close_range, from as u32, to as u32, 0u32) };
        }
    };
    if (from..=to).contains(&spare) {
        close(from, spare - 1);
        close(spare + 1, to);
    } else {
        close(from, to);
    }
}

/// Resets every caught signal to its default action, then unblocks all signals: the
/// parent's handlers (which may write to the parent's descriptors) never run in the
/// child, and the program starts with an empty mask.
///
/// # Safety
/// Only in a child between clone and exec (its handlers are its own: no
/// `CLONE_SIGHAND`); sigaction and sigprocmask are async-signal-safe.
unsafe fn default_signals() {
    // SAFETY: sigaction and sigprocmask on local, initialised values.
    unsafe {
        for sig in 1..=libc::SIGRTMAX() {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
}

/// The child between clone and exec.
///
/// # Safety
/// Must only be called in a freshly cloned child, with all signals blocked. Uses only
/// async-signal-safe system calls on memory prepared before the clone (`plan` and what
/// it points to); never returns.
unsafe fn child_main(plan: &Plan) -> ! {
    // SAFETY: the caller's contract: a fresh child, async-signal-safe calls only, on
    // NUL-terminated strings and pointer arrays prepared (and kept alive) before the clone.
    unsafe {
        let (program, env) = (&*plan.program, &*plan.env);
        let joined = join_cgroups(&plan.procs);
        if plan.hold {
            hold(plan, joined);
        } else if let Err(e) = joined {
            fail(plan, e, 127);
        }
        if let Some(attr) = &plan.sched {
            let r = libc::syscall(
                libc::SYS_sched_setattr,
                0,
                attr as *const libc::sched_attr,
                0,
            );
            if let Err(e) = ok(r) {
                fail(plan, e, 127);
            }
        }
        let confine = &plan.confine;
        let status = if confine.pid_namespace {
            if let Err(e) = die_with_parent(plan.parent) {
                fail(plan, e, 127);
            }
            Some(crate::pidns::split())
        } else {
            None
        };
        if let Some(mounts) = &plan.mounts {
            if let Err(e) = mounts.apply() {
                fail(plan, e, 126);
            }
        }
        if status.is_some() {
            if let Err(e) = mount_proc(plan.mounts.is_none()) {
                fail(plan, e, 126);
            }
        }
        if let Some(protections) = &plan.protections {
            let in_mount_namespace = plan.mounts.is_some() || status.is_some();
            if let Err(e) = protections.apply(in_mount_namespace) {
                fail(plan, e, 126);
            }
        }
        if let Some(cwd) = &program.cwd {
            if let Err(e) = ok(libc::chdir(cwd.as_ptr()).into()) {
                fail(plan, e, 126);
            }
        }
        if let Err(e) = restrict(confine) {
            fail(plan, e, 126);
        }
        let dies = match status {
            Some(status) => crate::pidns::die_with_monitor(status),
            None => die_with_parent(plan.parent),
        };
        if let Err(e) = dies {
            fail(plan, e, 127);
        }
        if let Some(status) = status {
            crate::pidns::start_program(status);
        }
        if let Err(e) = join_cgroups(&plan.program_procs) {
            fail(plan, e, 127);
        }
        if let Some(score) = confine.oom_score_adj {
            if let Err(e) = crate::oom::set_score(score) {
                fail(plan, e, 127);
            }
        }
        if let Err(e) = hand_over(plan) {
            fail(plan, e, 127);
        }
        crate::sched::restore_fd_limit();
        default_signals();
        libc::execve(
            program.path.as_ptr(),
            program.argv_ptrs.as_ptr(),
            env.ptrs.as_ptr(),
        );
        fail(plan, crate::sandbox::errno(), 127)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::net::UnixStream;

    /// Runs `script` in `/bin/sh` through the launcher (waiting for its exec) with
    /// `launch` adjusting the defaults; its standard output and error go to a socket. Returns the
    /// output and the wait status.
    fn run(script: &str, adjust: impl FnOnce(&mut Launch<'_>)) -> (String, i32) {
        let (mut out, theirs) = UnixStream::pair().unwrap();
        // The child's standard output and error: a redirection to the descriptor's number
        // would fail in dash from fd 10 on, which the pair gets while other tests of this
        // process hold descriptors.
        let fd = theirs.as_raw_fd();
        let argv = ["/bin/sh".into(), "-c".into(), script.to_string()];
        let program = Program::new(Path::new("/bin/sh"), &argv, Some(Path::new("/"))).unwrap();
        let env = Env::new([("PATH".to_string(), "/usr/bin:/bin".to_string())]);
        let mut launch = plain(&program, &env);
        launch.fds.output = Some((fd, fd));
        adjust(&mut launch);
        let child = spawn(launch).expect("starts");
        drop(theirs);
        let mut text = String::new();
        out.read_to_string(&mut text).unwrap();
        (text, crate::proc::wait(child.pid).unwrap())
    }

    /// A launch of `program` that stays in this cgroup, is not confined, is handed
    /// nothing and is waited for.
    fn plain<'a>(program: &'a Program, env: &'a Env) -> Launch<'a> {
        Launch {
            program,
            env,
            join: Join::Stay,
            sched: None,
            confine: Confine::default(),
            fds: Fds::default(),
            wait_exec: true,
        }
    }

    /// The error of launching `path` (without arguments) as `adjust` says.
    fn failure(path: &str, adjust: impl FnOnce(&mut Launch<'_>)) -> io::Error {
        let argv = [path.to_string()];
        let program = Program::new(Path::new(path), &argv, None).unwrap();
        let env = Env::new([]);
        let mut launch = plain(&program, &env);
        adjust(&mut launch);
        spawn(launch).err().expect("fails")
    }

    /// A descriptor to keep at a number the child's own streams or channel take is
    /// refused before anything starts, instead of being replaced in the child.
    #[test]
    fn a_descriptor_kept_at_the_childs_own_numbers_is_refused() {
        let (channel, _peer) = UnixStream::pair().unwrap();
        let ch = channel.as_raw_fd();
        let e = failure("/bin/true", |l| {
            l.fds.channel = Some(ch);
            l.fds.keep = &[CHANNEL_FD];
        });
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        let e = failure("/bin/true", |l| l.fds.keep = &[2]);
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }

    #[test]
    fn a_program_that_cannot_be_execd_is_an_error_with_its_errno() {
        let e = failure("/nonexistent/bulkhead-program", |_| {});
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    }

    #[test]
    fn the_child_gets_its_environment_directory_and_only_the_handed_descriptors() {
        let (channel, _peer) = UnixStream::pair().unwrap();
        // Handed to no child and left open across exec on purpose: the child never gets
        // it, with close_others or without (it is cloned from the spawner's table, which
        // holds only what is handed); above every handed descriptor.
        let null = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: F_DUPFD (without close-on-exec) of a descriptor this test owns; the
        // new descriptor is owned below.
        let stray = unsafe {
            let fd = libc::fcntl(null.as_raw_fd(), libc::F_DUPFD, 900);
            assert!(fd >= 900);
            std::fs::File::from_raw_fd(fd)
        };
        // Shell built-ins only: no descriptor of another program is looked at.
        let script = format!(
            "echo $PATH; pwd; for f in 0 {CHANNEL_FD} {}; do \
             if [ -e /proc/self/fd/$f ]; then echo open; else echo closed; fi; done",
            stray.as_raw_fd()
        );
        let ch = channel.as_raw_fd();
        let handed = |close_others| {
            move |l: &mut Launch<'_>| {
                l.fds.channel = Some(ch);
                l.fds.null_stdin = true;
                l.fds.close_others = close_others;
            }
        };
        let (text, status) = run(&script, handed(false));
        assert_eq!(status, 0, "{text}");
        assert_eq!(text, "/usr/bin:/bin\n/\nopen\nopen\nclosed\n");
        let (text, status) = run(&script, handed(true));
        assert_eq!(status, 0, "{text}");
        assert_eq!(text, "/usr/bin:/bin\n/\nopen\nopen\nclosed\n");
        let (text, _) = run("readlink /proc/self/fd/0", handed(false));
        assert_eq!(text, "/dev/null\n");
        // The report pipe survives close_others up to the exec: a failure still arrives.
        let e = failure("/nonexistent/bulkhead-program", |l| {
            l.fds.close_others = true
        });
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    }

    /// Before it execs (as a held child stays until its first window), a child holds
    /// the descriptors it reads and nothing else of its parent's: here it is stopped
    /// in its cgroup join, writing into a full FIFO named as its `cgroup.procs`, and
    /// its table is read from outside while this process holds 200 other descriptors.
    #[test]
    fn a_child_holds_only_what_it_is_handed_before_it_execs() {
        let dir = std::env::temp_dir().join(format!("bulkhead-launch-fds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("cgroup.procs");
        let path = cstr(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo of a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        // Reader and writer at once (no open blocks), filled until a write would block.
        let full = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        while (&full).write(&[0u8; 4096]).is_ok() {}
        while (&full).write(&[0u8]).is_ok() {}
        let marker = dir.join("marker");
        std::fs::write(&marker, b"").unwrap();
        let held: Vec<File> = (0..200).map(|_| File::open(&marker).unwrap()).collect();
        let argv = ["/bin/true".to_string()];
        let program = Program::new(Path::new("/bin/true"), &argv, None).unwrap();
        let env = Env::new([]);
        let procs = [fifo.clone()];
        let mut launch = plain(&program, &env);
        launch.join = Join::Write(&procs);
        launch.wait_exec = false;
        let child = spawn(launch).expect("starts");
        let links: Vec<PathBuf> = std::fs::read_dir(format!("/proc/{}/fd", child.pid))
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .collect();
        let mut drain = vec![0u8; 1 << 16];
        while (&full).read(&mut drain).is_ok_and(|n| n > 0) {}
        assert_eq!(crate::proc::wait(child.pid).unwrap(), 0);
        drop(held);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(!links.contains(&marker), "{links:?}");
        // The standard streams, the cgroup.procs file and /dev/null as 3.
        assert!(links.len() <= 5, "{links:?}");
        assert!(links.contains(&fifo), "{links:?}");
    }

    #[test]
    fn the_program_starts_under_its_policy_with_no_signal_blocked() {
        let mut attr = zeroed_attr();
        attr.size = std::mem::size_of::<libc::sched_attr>() as u32;
        attr.sched_policy = libc::SCHED_BATCH as u32;
        attr.sched_nice = 5;
        // Blocked in the launching thread: the program starts with it unblocked.
        // SAFETY: sigset calls on a local set; the mask of this test's thread only.
        let usr1 = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR1);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            set
        };
        let script = "grep SigBlk /proc/self/status; cut -d' ' -f19,41 /proc/self/stat";
        let (text, status) = run(script, |l| l.sched = Some(attr));
        // SAFETY: unblocking the signal blocked above on this thread.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &usr1, std::ptr::null_mut()) };
        assert_eq!(status, 0, "{text}");
        assert_eq!(
            text, "SigBlk:\t0000000000000000\n5 3\n",
            "nice 5, SCHED_BATCH"
        );
    }

    fn zeroed_attr() -> libc::sched_attr {
        // SAFETY: sched_attr is plain integers; all zero is a valid value.
        unsafe { std::mem::zeroed() }
    }
}
