//! What the machine allows, as the kernel says: the bounds on a SCHED_DEADLINE period
//! and the CPUs present and online. Raw values, none when unreadable;
//! `bulkhead_model::host` compares them with a description.

/// `kernel.sched_deadline_period_min_us` and `_max_us`, in microseconds.
pub fn deadline_period_bounds_us() -> (Option<u64>, Option<u64>) {
    let read = |name: &str| {
        let text = std::fs::read_to_string(format!("/proc/sys/kernel/{name}")).ok()?;
        text.trim().parse().ok()
    };
    (
        read("sched_deadline_period_min_us"),
        read("sched_deadline_period_max_us"),
    )
}

/// The CPU list of `/sys/devices/system/cpu/present` (`0-3` or `0,2-5`).
pub fn cpus_present() -> Option<String> {
    cpu_list("present")
}

/// The CPU list of `/sys/devices/system/cpu/online`.
pub fn cpus_online() -> Option<String> {
    cpu_list("online")
}

fn cpu_list(which: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/sys/devices/system/cpu/{which}")).ok()?;
    Some(text.trim().to_string())
}

/// The type of the file system `file` lies on (`statfs`'s `f_type`, e.g. SYSFS_MAGIC
/// 0x62656572), `None` if the kernel does not say.
pub fn fs_type(file: &std::fs::File) -> Option<i64> {
    use std::os::fd::AsRawFd as _;
    // SAFETY: `statfs` is plain data, fully written by a successful fstatfs.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid open descriptor and a pointer to a live statfs.
    let r = unsafe { libc::fstatfs(file.as_raw_fd(), &mut stat) };
    (r == 0).then_some(stat.f_type as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_is_not_sysfs_and_sysfs_is() {
        let proc = std::fs::File::open("/proc/self/stat").unwrap();
        assert_ne!(fs_type(&proc), Some(0x6265_6572));
        let sys = std::fs::File::open("/sys/kernel").unwrap();
        assert_eq!(fs_type(&sys), Some(0x6265_6572));
    }

    #[test]
    fn the_machines_bounds_are_read() {
        let (min, max) = deadline_period_bounds_us();
        if let (Some(min), Some(max)) = (min, max) {
            assert!(min <= max, "{min} {max}");
        }
        let online = cpus_online().expect("sysfs is mounted");
        assert!(online.starts_with('0'), "{online}");
        assert!(cpus_present().is_some());
    }
}
