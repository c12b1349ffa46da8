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

#[cfg(test)]
mod tests {
    use super::*;

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
