//! CLOCK_MONOTONIC, the clock every bulkhead time is on.

pub use bulkhead_os::clock::{now_ns, read_ns, realtime_ns, sleep_until, thread_cpu_ns};

/// The CLOCK_MONOTONIC instant of the CLOCK_REALTIME instant `t_ns` (e.g. a CAN frame's
/// bus stamp), by the offset between the two clocks now (0 for an instant before the
/// monotonic clock's origin).
pub fn realtime_to_monotonic(t_ns: u64) -> u64 {
    let (mono, real) = (now_ns(), realtime_ns());
    (t_ns + mono).saturating_sub(real)
}

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
    fn a_realtime_stamp_moves_to_the_same_instant_on_the_monotonic_clock() {
        let (real, mono) = (realtime_ns(), now_ns());
        let moved = realtime_to_monotonic(real - 5_000_000);
        // The two reads are a few microseconds apart at most, even on a loaded machine
        // (a wide margin: the test checks the direction and the scale).
        let expected = mono - 5_000_000;
        assert!(
            moved.abs_diff(expected) < 50_000_000,
            "{moved} vs {expected}"
        );
        assert!(realtime_to_monotonic(real - 5_000_000) < realtime_to_monotonic(real));
        assert_eq!(realtime_to_monotonic(0), 0);
    }

    #[test]
    fn sleeps_until_an_absolute_time() {
        let until = now_ns() + 3_000_000;
        sleep_until(until);
        assert!(now_ns() >= until);
    }
}
