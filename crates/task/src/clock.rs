//! CLOCK_MONOTONIC, the clock every bulkhead time is on.

pub use bulkhead_os::clock::{
    now_ns, read_ns, realtime_ns, realtime_to_monotonic, sleep_until, thread_cpu_ns,
};

/// Busy-computes until the calling thread has used `ns` of CPU time (time it is preempted
/// does not count), as a task's execution time.
pub fn burn_cpu(ns: u64) {
    let end = thread_cpu_ns() + ns;
    let mut x = 0u64;
    while thread_cpu_ns() < end {
        for i in 0..64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    std::hint::black_box(x);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burns_at_least_the_cpu_time_asked() {
        let t0 = thread_cpu_ns();
        burn_cpu(2_000_000);
        assert!(thread_cpu_ns() - t0 >= 2_000_000);
    }

    #[test]
    fn sleeps_until_an_absolute_time() {
        let until = now_ns() + 3_000_000;
        sleep_until(until);
        assert!(now_ns() >= until);
    }
}
