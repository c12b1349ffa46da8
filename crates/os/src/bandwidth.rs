//! The machine's real-time bandwidth cap: `sched_rt_runtime_us / sched_rt_period_us`
//! (Documentation/scheduler/sched-rt-group.rst, "System wide settings"), which also caps
//! SCHED_DEADLINE admission per CPU of a root domain
//! (Documentation/scheduler/sched-deadline.rst, 5.1: "the kernel ... will use
//! `sched_rt_runtime_us / sched_rt_period_us` ... on each root domain").

use crate::error::{Error, Result};
use std::path::Path;

/// Where the kernel publishes the cap.
pub const SYSCTL_DIR: &str = "/proc/sys/kernel";

/// The cap as `(runtime, period)` in µs read from `dir` (normally [`SYSCTL_DIR`]);
/// a runtime of `-1` (no limit) is the whole period. An unreadable or malformed file is
/// an error naming it.
pub fn cap(dir: &Path) -> Result<(u64, u64)> {
    let read = |name: &str| -> Result<i64> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            Error::os(
                format!("reading the real-time bandwidth cap {}", path.display()),
                e,
                "",
            )
        })?;
        text.trim().parse().map_err(|_| {
            Error::Invalid(format!(
                "{}: `{}` is not a whole number of microseconds",
                path.display(),
                text.trim()
            ))
        })
    };
    let period = read("sched_rt_period_us")?;
    let runtime = read("sched_rt_runtime_us")?;
    if period <= 0 {
        return Err(Error::Invalid(format!(
            "{}: the period must be positive, is {period}",
            dir.join("sched_rt_period_us").display()
        )));
    }
    let runtime = match runtime {
        -1 => period,
        r if (0..=period).contains(&r) => r,
        r => {
            return Err(Error::Invalid(format!(
                "{}: {r} is neither -1 nor within 0..={period}",
                dir.join("sched_rt_runtime_us").display()
            )))
        }
    };
    Ok((runtime as u64, period as u64))
}

/// Where Linux 6.12 and later publish each CPU's fair server (`cpuN/runtime`,
/// `cpuN/period`, in ns): debugfs, readable by root when the kernel is not locked down.
pub const FAIR_SERVER_DIR: &str = "/sys/kernel/debug/sched/fair_server";

/// The fair servers of the CPUs below `dir` (normally [`FAIR_SERVER_DIR`]) that can be
/// read, as `(runtime, period)` in ns; none on a kernel without them, without root or
/// under lockdown (which refuses even root: EPERM). A malformed pair is left out.
pub fn fair_servers(dir: &Path) -> Vec<(u64, u64)> {
    let read = |cpu: &Path, name: &str| -> Option<u64> {
        std::fs::read_to_string(cpu.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter_map(|cpu| Some((read(&cpu, "runtime")?, read(&cpu, "period")?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fair_servers_that_can_be_read() {
        let root = std::env::temp_dir().join(format!("bulkhead-fair-{}", std::process::id()));
        for (cpu, runtime, period) in [("cpu0", "50000000", "1000000000"), ("cpu1", "x", "1")] {
            std::fs::create_dir_all(root.join(cpu)).unwrap();
            std::fs::write(root.join(cpu).join("runtime"), format!("{runtime}\n")).unwrap();
            std::fs::write(root.join(cpu).join("period"), format!("{period}\n")).unwrap();
        }
        assert_eq!(fair_servers(&root), [(50_000_000, 1_000_000_000)]);
        std::fs::remove_dir_all(&root).unwrap();
        assert!(fair_servers(&root).is_empty());
    }

    fn dir(runtime: &str, period: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "bulkhead-bandwidth-{}-{runtime}-{period}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("sched_rt_runtime_us"), format!("{runtime}\n")).unwrap();
        std::fs::write(dir.join("sched_rt_period_us"), format!("{period}\n")).unwrap();
        dir
    }

    #[test]
    fn reads_the_cap_and_minus_one_is_unlimited() {
        let d = dir("950000", "1000000");
        assert_eq!(cap(&d).unwrap(), (950_000, 1_000_000));
        let d2 = dir("-1", "1000000");
        assert_eq!(cap(&d2).unwrap(), (1_000_000, 1_000_000));
        let d3 = dir("500000", "1000000");
        assert_eq!(cap(&d3).unwrap(), (500_000, 1_000_000));
        for d in [d, d2, d3] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn an_unreadable_or_malformed_cap_is_an_error_naming_the_file() {
        let missing = std::env::temp_dir().join("bulkhead-bandwidth-missing");
        let e = cap(&missing).unwrap_err().to_string();
        assert!(
            e.contains("bulkhead-bandwidth-missing/sched_rt_period_us"),
            "{e}"
        );
        let d = dir("lots", "1000000");
        let e = cap(&d).unwrap_err().to_string();
        assert!(e.contains("sched_rt_runtime_us: `lots`"), "{e}");
        std::fs::remove_dir_all(d).unwrap();
    }
}
