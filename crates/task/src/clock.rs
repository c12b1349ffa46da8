//! CLOCK_MONOTONIC, the clock every bulkhead time is on.

pub use bulkhead_os::clock::{
    now_ns, read_ns, realtime_ns, realtime_to_monotonic, sleep_until, thread_cpu_ns,
};

/// Busy-computes until the calling thread has used `ns` of CPU time (time it is preempted
/// does not count), as a task's execution time.
pub fn burn_cpu(ns: u64) {
    burn_cpu_until(thread_cpu_ns() + ns);
}

/// Busy-computes until the calling thread's CPU time (`thread_cpu_ns`) reaches `until`;
/// returns at once if it already has. A job that must fit a CPU budget burns up to a
/// point measured from its start, so that what it spent besides (waking, reading,
/// writing) comes out of its work, not on top of it.
pub fn burn_cpu_until(until: u64) {
    let mut x = 0u64;
    while thread_cpu_ns() < until {
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
    fn burns_up_to_a_cpu_time_and_not_past_one_reached() {
        let t0 = thread_cpu_ns();
        burn_cpu_until(t0 + 2_000_000);
        let t1 = thread_cpu_ns();
        assert!(t1 >= t0 + 2_000_000);
        burn_cpu_until(t0);
        assert!(
            thread_cpu_ns() - t1 < 1_000_000,
            "returns at once when reached"
        );
    }

    #[test]
    fn sleeps_until_an_absolute_time() {
        let until = now_ns() + 3_000_000;
        sleep_until(until);
        assert!(now_ns() >= until);
    }
}
