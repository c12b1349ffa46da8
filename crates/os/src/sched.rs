//! The calling process's CPUs, scheduling policy and descriptor limit.

/// The CPUs the calling thread may run on, in increasing order.
pub fn own_cpus() -> Vec<u32> {
    // SAFETY: `set` is a valid cpu_set_t for sched_getaffinity to fill.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; pid 0 = the calling thread.
    unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    // SAFETY: CPU_ISSET reads the set filled above.
    let cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) });
    cpus.map(|c| c as u32).collect()
}

/// Raises the soft fd limit to the hard limit; returns the limit in force.
pub fn raise_fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid rlimit pointers for get/setrlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
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
        // SAFETY: querying the calling thread's policy; `param` is a valid sched_param.
        let policy = crate::check(unsafe { libc::sched_getscheduler(0) })?;
        // SAFETY: as above.
        let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
        // SAFETY: `param` is a valid sched_param for the kernel to fill.
        crate::check(unsafe { libc::sched_getparam(0, &mut param) })?;
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

impl Drop for Realtime {
    fn drop(&mut self) {
        // SAFETY: restoring the policy saved in `enter`.
        unsafe { libc::sched_setscheduler(0, self.policy, &self.param) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_on_some_cpu_and_may_open_its_hard_limit_of_files() {
        assert!(!own_cpus().is_empty());
        let limit = raise_fd_limit();
        let mut now = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid rlimit for getrlimit to fill.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut now) }, 0);
        assert_eq!((limit, now.rlim_cur), (now.rlim_max, now.rlim_max));
    }
}
