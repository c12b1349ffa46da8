//! Spawning a process so that it is inside its cgroups before it runs one
//! instruction of its command, and inherits no file descriptor of the supervisor
//! but its own channel.
//!
//! - cgroup v2: `clone3(CLONE_INTO_CGROUP)` creates the child directly in its
//!   (frozen) process cgroup: it is born frozen and runs nothing until its first thaw.
//! - cgroup v1 (no such flag): the child writes itself into its cpuset and its
//!   (still thawed) freezer cgroup, reports success on its channel and blocks reading
//!   it; the parent waits for the report, freezes the freezer cgroup and releases the
//!   child, which continues (and execs) only when first thawed.
//!
//! In the child, between fork and exec, only async-signal-safe system calls run:
//! the signal mask is cleared and SIGPIPE reset (the Rust runtime ignores it), the
//! channel becomes fd 3 (without close-on-exec), every other fd above 2 is closed
//! (`close_range`), the working directory is set, then `execve`.

use std::ffi::{c_char, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// The fd number of the channel in the child (`DEMOS_PARAMETERS=3,3,<init>`).
pub const CHILD_CHANNEL_FD: i32 = 3;

/// A command ready to exec: every string is allocated before fork.
pub struct Prepared {
    path: CString,
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const c_char>,
    cwd: Option<CString>,
}

/// An environment block (NUL-terminated pointer array) that outlives the spawns using it.
pub struct Environment {
    _vars: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

impl Environment {
    /// The supervisor's environment with `DEMOS_PARAMETERS` set to `3,3,<init>`
    /// (completion fd, continue fd, has-initialization: the DEmOS protocol; both fds
    /// are the one channel).
    pub fn demos(init: bool) -> Environment {
        let mut vars: Vec<CString> = std::env::vars_os()
            .filter(|(k, _)| k != "DEMOS_PARAMETERS")
            .filter_map(|(k, v)| {
                let mut kv = k.into_encoded_bytes();
                kv.push(b'=');
                kv.extend(v.into_encoded_bytes());
                CString::new(kv).ok()
            })
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
        })
    }
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

/// A spawned child: its pid and the supervisor's end of its channel.
pub struct Child {
    pub pid: i32,
    pub channel: OwnedFd,
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
                unsafe { child_main(command, env, child_end.as_raw_fd(), &[]) }
            }
            Ok(Child {
                pid: pid as i32,
                channel: parent_end,
            })
        }
        Target::V1 { join, freeze } => {
            // SAFETY: fork in the parent; the child only runs `child_main`.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return Err(io::Error::last_os_error());
            }
            if pid == 0 {
                // SAFETY: in the child, see above.
                unsafe { child_main(command, env, child_end.as_raw_fd(), join) }
            }
            drop(child_end);
            let child = Child {
                pid,
                channel: parent_end,
            };
            if let Err(e) = v1_handshake(&child, freeze) {
                // SAFETY: `pid` is our child; kill and reap it so it does not linger.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, std::ptr::null_mut(), 0);
                }
                return Err(e);
            }
            Ok(child)
        }
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

/// The child between fork and exec.
///
/// # Safety
/// Must only be called in a freshly forked/cloned child. Uses only
/// async-signal-safe system calls on memory prepared before the fork; never returns.
unsafe fn child_main(command: &Prepared, env: &Environment, channel: i32, join: &[CString]) -> ! {
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
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
    if channel == CHILD_CHANNEL_FD {
        libc::fcntl(channel, libc::F_SETFD, 0);
    } else if libc::dup2(channel, CHILD_CHANNEL_FD) < 0 {
        libc::_exit(127);
    }
    libc::syscall(
        libc::SYS_close_range,
        (CHILD_CHANNEL_FD + 1) as u32,
        u32::MAX,
        0u32,
    );
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
