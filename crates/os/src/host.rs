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

#[cfg(test)]
mod tests {
    use super::*;

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
