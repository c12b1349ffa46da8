//! The calling process's CPUs, scheduling policy and descriptor limit.

pub mod detect;
mod policy;

pub use policy::*;

use std::sync::OnceLock;

/// The CPUs the calling thread may run on, in increasing order.
pub fn own_cpus() -> Vec<u32> {
    affinity(0).unwrap_or_default()
}

/// The CPUs thread (or process) `tid` may run on, in increasing order (0: the calling
/// thread).
pub fn affinity(tid: i32) -> std::io::Result<Vec<u32>> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_getaffinity(tid, std::mem::size_of_val(&set), &mut set) };
    crate::check(r)?;
    // SAFETY: CPU_ISSET reads the set filled above, within CPU_SETSIZE.
    let cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) });
    Ok(cpus.map(|c| c as u32).collect())
}

/// Lets thread (or process) `tid` run on `cpus` only (0: the calling thread). CPUs at
/// or above CPU_SETSIZE are left out; a set the kernel cannot honour fails (EINVAL).
pub fn set_affinity(tid: i32, cpus: impl IntoIterator<Item = u32>) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in cpus
        .into_iter()
        .filter(|&c| (c as usize) < libc::CPU_SETSIZE as usize)
    {
        // SAFETY: CPU_SET writes inside `set` for c < CPU_SETSIZE (filtered).
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
    crate::check(r).map(drop)
}

/// Sets the calling thread's timer slack to `ns` (the kernel's default is 50 µs): its
/// timed sleeps end that much closer to their time. Best effort.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes an integer argument and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

/// The descriptor limit the process had before [`raise_fd_limit`] first raised it: the
/// limit its children get back ([`restore_fd_limit`]).
static ORIGINAL_FD_LIMIT: OnceLock<libc::rlimit> = OnceLock::new();

/// Raises the descriptor limit so that `need` descriptors fit: the soft limit to the
/// hard one and, when the hard limit is below `need` and the process may raise it
/// (CAP_SYS_RESOURCE), the hard limit too, up to the kernel's `fs.nr_open`. Returns the
/// soft limit in force. The limit before the first call is kept for the children
/// ([`restore_fd_limit`]): a supervisor holds descriptors for thousands of processes,
/// its programs do not need to.
pub fn raise_fd_limit(need: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    ORIGINAL_FD_LIMIT.get_or_init(|| limit);
    let hard = if limit.rlim_max < need {
        need.min(nr_open()).max(limit.rlim_max)
    } else {
        limit.rlim_max
    };
    for max in [hard, limit.rlim_max] {
        let raised = libc::rlimit {
            rlim_cur: max,
            rlim_max: max,
        };
        // SAFETY: a valid rlimit for setrlimit to read. Raising the hard limit fails
        // (EPERM) without CAP_SYS_RESOURCE; the hard limit in force is tried next.
        if max >= limit.rlim_cur && unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return max;
        }
    }
    limit.rlim_cur
}

/// The kernel's ceiling for a hard descriptor limit (`/proc/sys/fs/nr_open`).
fn nr_open() -> u64 {
    let text = std::fs::read_to_string("/proc/sys/fs/nr_open").unwrap_or_default();
    text.trim().parse().unwrap_or(1 << 20)
}

/// Gives the calling process the descriptor limit its parent had before
/// [`raise_fd_limit`] (nothing if it never raised it).
///
/// Async-signal-safe: one `setrlimit` of a value stored before the fork, so it may run
/// in a child between fork and exec; an error is ignored (the child keeps the higher
/// limit it inherited).
pub fn restore_fd_limit() {
    if let Some(limit) = ORIGINAL_FD_LIMIT.get() {
        // SAFETY: a valid rlimit for setrlimit to read; lowering needs no privilege.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, limit) };
    }
}

/// The calling thread under SCHED_FIFO with SCHED_RESET_ON_FORK (children start
/// with the normal policy); the previous policy is restored on drop. It belongs to the
/// thread that entered (not `Send`): dropped elsewhere it would reset another thread.
pub struct Realtime {
    policy: i32,
    param: libc::sched_param,
    _thread: std::marker::PhantomData<*const ()>,
}

impl Realtime {
    /// Enters SCHED_FIFO at `priority`; the error is the kernel's refusal (or a failure
    /// to read the policy in force, which could then not be restored).
    pub fn enter(priority: i32) -> std::io::Result<Realtime> {
        let (policy, param) = in_force()?;
        Realtime::raise(policy, param, priority)
    }

    /// Enters SCHED_FIFO at `priority` unless the thread runs under SCHED_FIFO or
    /// SCHED_RR at `priority` or above already: then `None`, and nothing changed. One
    /// system call fewer than reading the policy before [`Realtime::enter`].
    pub fn at_least(priority: i32) -> std::io::Result<Option<Realtime>> {
        let (policy, param) = in_force()?;
        let fixed = matches!(
            policy & !libc::SCHED_RESET_ON_FORK,
            libc::SCHED_FIFO | libc::SCHED_RR
        );
        match fixed && param.sched_priority >= priority {
            true => Ok(None),
            false => Realtime::raise(policy, param, priority).map(Some),
        }
    }

    /// Sets SCHED_FIFO at `priority`; `policy` and `param` are the ones in force, which
    /// the drop restores.
    fn raise(policy: i32, param: libc::sched_param, priority: i32) -> std::io::Result<Realtime> {
        let fifo = libc::sched_param {
            sched_priority: priority,
        };
        let flags = libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK;
        // SAFETY: setting the calling thread's policy with a valid sched_param.
        crate::check(unsafe { libc::sched_setscheduler(0, flags, &fifo) })?;
        Ok(Realtime {
            policy,
            param,
            _thread: std::marker::PhantomData,
        })
    }
}

/// The calling thread's policy (with SCHED_RESET_ON_FORK when set) and its parameters.
fn in_force() -> std::io::Result<(i32, libc::sched_param)> {
    // SAFETY: querying the calling thread's policy.
    let policy = crate::check(unsafe { libc::sched_getscheduler(0) })?;
    // SAFETY: a zeroed sched_param is valid.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    // SAFETY: `param` is a valid sched_param for the kernel to fill.
    crate::check(unsafe { libc::sched_getparam(0, &mut param) })?;
    Ok((policy, param))
}

impl Drop for Realtime {
    fn drop(&mut self) {
        // SAFETY: restoring the policy saved in `enter`.
        unsafe { libc::sched_setscheduler(0, self.policy, &self.param) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd_limit() -> (u64, u64) {
        let mut now = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid rlimit for getrlimit to fill.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut now) }, 0);
        (now.rlim_cur, now.rlim_max)
    }

    /// Whether this process may raise its hard limits (CAP_SYS_RESOURCE, bit 24 of
    /// its effective capabilities).
    fn may_raise_hard_limits() -> bool {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .unwrap();
        u64::from_str_radix(eff.trim(), 16).unwrap() & (1 << 24) != 0
    }

    #[test]
    fn a_thread_pinned_to_one_of_its_cpus_runs_on_that_cpu_only() {
        let cpus = own_cpus();
        let last = *cpus.last().unwrap();
        let seen = std::thread::spawn(move || {
            set_affinity(0, [last]).unwrap();
            affinity(0).unwrap()
        });
        assert_eq!(seen.join().unwrap(), vec![last]);
        assert_eq!(own_cpus(), cpus, "the other threads keep theirs");
        let none = set_affinity(0, [libc::CPU_SETSIZE as u32]).unwrap_err();
        assert_eq!(none.raw_os_error(), Some(libc::EINVAL));
    }

    /// `at_least` raises a thread of normal policy and gives it back at the drop, and
    /// leaves one that runs higher alone.
    #[test]
    fn at_least_raises_only_a_thread_below_the_priority() {
        let checks = std::thread::spawn(|| {
            let now = || {
                in_force()
                    .map(|(p, param)| (p, param.sched_priority))
                    .unwrap()
            };
            let fifo = |priority| (libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, priority);
            let normal = now();
            assert_eq!(normal, (libc::SCHED_OTHER, 0));
            let Ok(raised) = Realtime::at_least(45) else {
                return; // without CAP_SYS_NICE there is nothing to check
            };
            assert!(raised.is_some());
            assert_eq!(now(), fifo(45));
            drop(raised);
            assert_eq!(now(), normal);
            let high = Realtime::enter(50).unwrap();
            assert!(Realtime::at_least(45).unwrap().is_none());
            assert_eq!(now(), fifo(50));
            drop(high);
            assert_eq!(now(), normal);
        });
        checks.join().unwrap();
    }

    /// The only test that changes the process's limit (tests run in parallel threads).
    #[test]
    fn the_fd_limit_is_raised_past_the_hard_limit_when_privileged_and_children_get_the_old_one() {
        assert!(!own_cpus().is_empty());
        let before = fd_limit();
        assert_eq!(
            raise_fd_limit(64),
            before.1,
            "the soft limit goes to the hard one"
        );
        assert_eq!(fd_limit(), (before.1, before.1));
        let need = before.1 + 1000;
        let limit = raise_fd_limit(need);
        if may_raise_hard_limits() {
            assert_eq!((limit, fd_limit()), (need, (need, need)));
        } else {
            assert_eq!(
                limit, before.1,
                "without CAP_SYS_RESOURCE the hard limit stays"
            );
        }
        let mut sh = std::process::Command::new("sh");
        sh.args(["-c", "ulimit -Sn; ulimit -Hn"]);
        // SAFETY: restore_fd_limit is async-signal-safe (one setrlimit).
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut sh, || {
                restore_fd_limit();
                Ok(())
            });
        }
        let out = sh.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text, format!("{}\n{}\n", before.0, before.1));
    }
}
