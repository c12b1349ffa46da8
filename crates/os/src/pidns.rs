//! A pid namespace of its own for a be process (`sandbox.pid_namespace`): the process
//! sees only its own processes, and every process it starts (also one that left its
//! session and parent: `setsid` and a double fork) dies with the namespace's init.
//!
//! Three processes, none of which but the last execs:
//! - the *monitor*, the child the supervisor spawned (its pid is the one the supervisor
//!   knows and waits for), in the supervisor's pid namespace: it is SIGKILLed when the
//!   supervisor dies, starts the init, forwards [`FORWARDED`] signals to it and ends
//!   as the program ended (same exit code, or killed by the same signal);
//! - the *init*, pid 1 of a new pid namespace: SIGKILLed when the monitor dies (and the
//!   kernel then kills every process of the namespace), it starts the program, forwards
//!   the signals to it, reaps every orphan, and reports the program's wait status to the
//!   monitor on a private socket;
//! - the program, which execs the command.
//!
//! The signals are forwarded because an init receives from outside its namespace only
//! the signals it handles (and SIGKILL, SIGSTOP); the status goes through the monitor
//! because a pid namespace's init cannot be killed by a signal it raises itself.
//!
//! Everything here runs in a child between clone and exec: async-signal-safe calls only,
//! no heap memory (a cgroup v1 monitor shares the supervisor's memory, `CLONE_VM`), and
//! new processes come from the raw `clone` system call (the C library's `fork` would
//! take the supervisor's locks in shared memory).

/// The signals the monitor and the init pass on to their child.
const FORWARDED: [libc::c_int; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGCONT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

extern "C" fn ignore(_: libc::c_int) {}

/// The forwarded signals and SIGCHLD, blocked (taken by `sigwaitinfo`) and handled by
/// a handler that does nothing (so that an init receives them), in the calling process.
///
/// # Safety
/// In a child between clone and exec (its signal handlers are its own: no `CLONE_SIGHAND`).
unsafe fn catch_signals() -> libc::sigset_t {
    // SAFETY: sigset and sigaction calls on local, initialised values.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        for sig in FORWARDED.into_iter().chain([libc::SIGCHLD]) {
            libc::sigaddset(&mut set, sig);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// A new process (`fork` without the C library), in a new pid namespace when `flags`
/// says so: 0 in the child, its pid in the caller, -1 on failure.
///
/// # Safety
/// As `fork` in a child between clone and exec; the new process has its own memory.
unsafe fn raw_fork(flags: libc::c_int) -> libc::pid_t {
    // SAFETY: clone without CLONE_VM and without a new stack duplicates the caller like
    // fork: the child returns here on its own copy of the stack.
    unsafe { libc::syscall(libc::SYS_clone, flags | libc::SIGCHLD, 0, 0, 0, 0) as libc::pid_t }
}

/// Splits the calling monitor (the supervisor's child, in the supervisor's pid
/// namespace, already joined to its cgroups and already set to die with the supervisor):
/// returns only in the new init, pid 1 of a new pid namespace, with its end of the
/// status socket; the monitor itself waits and ends as the program does.
///
/// # Safety
/// In a child between clone and exec, before its sandbox is applied (the seccomp filter
/// refuses a new pid namespace).
pub(crate) unsafe fn split() -> i32 {
    // SAFETY: the caller's contract; async-signal-safe calls on local memory.
    unsafe {
        catch_signals();
        let mut fds = [0i32; 2];
        if libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        ) != 0
        {
            libc::_exit(127);
        }
        let init = raw_fork(libc::CLONE_NEWPID);
        if init < 0 {
            libc::_exit(127);
        }
        if init == 0 {
            libc::close(fds[0]);
            return fds[1];
        }
        close_all_but_one(fds[0]);
        monitor(init, fds[0])
    }
}

/// Closes every descriptor of the calling process but `keep`.
///
/// # Safety
/// In a child between clone and exec.
unsafe fn close_all_but_one(keep: i32) {
    // SAFETY: close_range on the calling child's own descriptor table.
    unsafe {
        if keep > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
    }
}

/// The monitor: forwards signals to `init`; when it is gone, ends with the program's
/// wait status (sent on `status`) or, if none came, the init's own.
unsafe fn monitor(init: libc::pid_t, status: i32) -> ! {
    // SAFETY: the caller's contract (`split`).
    unsafe {
        let ended = wait_for(init, false);
        let mut report = [0u8; 4];
        let n = libc::recv(status, report.as_mut_ptr().cast(), 4, libc::MSG_DONTWAIT);
        let wait_status = if n == 4 {
            i32::from_ne_bytes(report)
        } else {
            ended
        };
        end_as(wait_status)
    }
}

/// Forwards the caught signals to `child` until it has ended, and returns its wait
/// status; with `reap_all` (an init), reaps every other process that ends meanwhile.
///
/// # Safety
/// After [`catch_signals`] (inherited), in a child between clone and exec.
unsafe fn wait_for(child: libc::pid_t, reap_all: bool) -> i32 {
    // SAFETY: sigset, sigwaitinfo, kill and waitpid on local memory and own children.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in FORWARDED.into_iter().chain([libc::SIGCHLD]) {
            libc::sigaddset(&mut set, sig);
        }
        loop {
            let sig = libc::sigwaitinfo(&set, std::ptr::null_mut());
            if sig != libc::SIGCHLD {
                if sig > 0 {
                    libc::kill(child, sig);
                }
                continue;
            }
            loop {
                let mut status = 0;
                let who = if reap_all { -1 } else { child };
                let pid = libc::waitpid(who, &mut status, libc::WNOHANG | libc::__WALL);
                if pid == child {
                    return status;
                }
                if pid <= 0 {
                    break;
                }
            }
        }
    }
}

/// Ends the calling monitor as `wait_status` says: the same exit code, or killed by
/// the same signal (without a core dump: on cgroup v1 its memory is the supervisor's).
unsafe fn end_as(wait_status: i32) -> ! {
    // SAFETY: async-signal-safe calls changing only the calling process.
    unsafe {
        if libc::WIFSIGNALED(wait_status) {
            let sig = libc::WTERMSIG(wait_status);
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig)
        }
        libc::_exit(libc::WEXITSTATUS(wait_status))
    }
}

/// In the init (after its sandbox is applied): makes it die with the monitor (and
/// fails if the monitor, which holds the other end of `status`, is already gone) and
/// keeps its memory (a copy of the supervisor's) from the program's `/proc/1/mem`.
///
/// # Safety
/// In the init returned by [`split`], between clone and exec.
pub(crate) unsafe fn die_with_monitor(status: i32) -> Result<(), i32> {
    // SAFETY: prctl with integer arguments and poll on a local pollfd.
    unsafe {
        if libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
        {
            return Err(*libc::__errno_location());
        }
        let mut pfd = libc::pollfd {
            fd: status,
            events: libc::POLLRDHUP,
            revents: 0,
        };
        if libc::poll(&mut pfd, 1, 0) != 0 {
            return Err(libc::ESRCH);
        }
    }
    Ok(())
}

/// In the init: starts the program, which returns from here (with all signals
/// unblocked) to exec its command; the init never returns: it reaps, forwards signals,
/// and sends the program's wait status on `status` before it exits (and the kernel kills
/// what is left in the namespace).
///
/// # Safety
/// In the init returned by [`split`], between clone and exec.
pub(crate) unsafe fn start_program(status: i32) {
    // SAFETY: the caller's contract; async-signal-safe calls on local memory.
    unsafe {
        let program = raw_fork(0);
        if program < 0 {
            libc::_exit(127);
        }
        if program == 0 {
            libc::close(status);
            for sig in FORWARDED.into_iter().chain([libc::SIGCHLD]) {
                libc::signal(sig, libc::SIG_DFL);
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            return;
        }
        close_all_but_one(status);
        let ended = wait_for(program, true).to_ne_bytes();
        libc::send(status, ended.as_ptr().cast(), 4, libc::MSG_NOSIGNAL);
        libc::_exit(0)
    }
}
