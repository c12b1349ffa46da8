//! Is SCHED_DEADLINE (or SCHED_FIFO) usable here, and if not, why?
//!
//! The answer comes from trying: a short-lived probe thread asks for the policy with the
//! smallest reservation the kernel accepts and then returns to SCHED_OTHER. The reason for
//! a refusal is worked out from the error and the system's settings.

use crate::sched::{self, DeadlineParams, Policy};
use std::fmt;

/// Why a real-time policy cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub policy: &'static str,
    pub reason: String,
    /// The error of the probe's sched_setattr.
    pub errno: i32,
}

impl Unavailable {
    /// Whether the policy can never work in this process: the kernel lacks it, or the
    /// process lacks CAP_SYS_NICE (as opposed to a full root domain or a CPU affinity,
    /// which a dedicated exclusive cpuset does not share).
    pub fn is_permanent(&self) -> bool {
        matches!(self.errno, libc::ENOSYS | libc::EINVAL)
            || (self.errno == libc::EPERM && !has_cap_sys_nice())
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is unavailable: {}", self.policy, self.reason)
    }
}

impl std::error::Error for Unavailable {}

/// Checks that this process may run threads under SCHED_DEADLINE (with its current CPU
/// affinity: inside a cpuset smaller than its root domain the answer is no).
pub fn deadline() -> Result<(), Unavailable> {
    // 10 us every 100 ms: admitted wherever any bandwidth is left.
    let probe =
        Policy::Deadline(DeadlineParams::new(10_000, 100_000_000, 100_000_000).expect("valid"));
    probe_policy(probe)
}

/// Checks that this process may run threads under SCHED_FIFO.
pub fn fifo() -> Result<(), Unavailable> {
    probe_policy(Policy::Fifo { priority: 1 })
}

fn probe_policy(policy: Policy) -> Result<(), Unavailable> {
    let outcome = std::thread::spawn(move || {
        let r = sched::set_current(&policy);
        if r.is_ok() {
            sched::set_current(&Policy::Other { nice: 0 })
                .expect("returning to SCHED_OTHER cannot fail");
        }
        r.map_err(|e| e.raw_os_error().unwrap_or(0))
    })
    .join()
    .expect("probe thread does not panic");
    outcome.map_err(|errno| Unavailable {
        policy: policy.name(),
        reason: explain(&policy, errno),
        errno,
    })
}

fn explain(policy: &Policy, errno: i32) -> String {
    let dl = matches!(policy, Policy::Deadline(_));
    match errno {
        libc::ENOSYS => "the kernel has no sched_setattr system call (Linux < 3.14)".into(),
        libc::EINVAL if dl => "the kernel does not support SCHED_DEADLINE".into(),
        libc::EPERM if !has_cap_sys_nice() => "needs CAP_SYS_NICE: run as root".into(),
        libc::EPERM if dl => format!(
            "this process's allowed CPUs ({}) do not cover its root domain; SCHED_DEADLINE then needs an \
             exclusive cpuset root domain per partition",
            allowed_cpus()
        ),
        libc::EPERM => "the cpu cgroup of this process has no real-time runtime (CONFIG_RT_GROUP_SCHED: \
                        cpu.rt_runtime_us is 0)"
            .into(),
        libc::EBUSY => format!(
            "no SCHED_DEADLINE bandwidth left (sched_rt_runtime_us = {})",
            sysctl("sched_rt_runtime_us")
        ),
        e => format!("sched_setattr failed: {}", std::io::Error::from_raw_os_error(e)),
    }
}

/// Whether CAP_SYS_NICE (bit 23) is in this process's effective capabilities.
fn has_cap_sys_nice() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 23) != 0)
}

fn allowed_cpus() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| "?".into())
}

fn sysctl(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explanations_name_the_cause() {
        let dl = Policy::Deadline(DeadlineParams::new(10_000, 100_000, 100_000).unwrap());
        assert!(explain(&dl, libc::EINVAL).contains("does not support"));
        assert!(explain(&dl, libc::EBUSY).contains("bandwidth"));
        assert!(explain(&dl, libc::ENOSYS).contains("sched_setattr"));
    }

    /// On this project's machines (root, Linux 6.x) both policies work; elsewhere the test
    /// prints why they do not instead of failing.
    #[test]
    fn probes_without_leaving_a_policy_behind() {
        let before = sched::get(0).unwrap();
        for (name, r) in [("SCHED_DEADLINE", deadline()), ("SCHED_FIFO", fifo())] {
            match r {
                Ok(()) => {}
                Err(e) => eprintln!("skipping {name}: {e}"),
            }
        }
        assert_eq!(
            sched::get(0).unwrap(),
            before,
            "the probe restores the caller's policy and nice value"
        );
    }
}
