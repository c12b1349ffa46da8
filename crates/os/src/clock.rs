//! CLOCK_MONOTONIC, the clock every bulkhead time is on, and the other clocks.

/// Clock `clock` now, ns; `None` if the kernel refuses it (e.g. the CPU clock of a
/// process that has exited).
pub fn read_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `ts`.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC now, ns. Served by the vDSO: no system call.
pub fn now_ns() -> u64 {
    read_ns(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// CLOCK_REALTIME now, ns of the Unix epoch.
pub fn realtime_ns() -> u64 {
    read_ns(libc::CLOCK_REALTIME).unwrap_or(0)
}

/// Busy-waits `d` on the caller's CPU: for waits of microseconds, which a sleep would
/// end later than `d` (its wake-up).
pub fn spin_for(d: std::time::Duration) {
    let start = std::time::Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Sleeps until CLOCK_MONOTONIC reaches `t_ns` (absolute, so no drift accumulates),
/// resuming after signals.
pub fn sleep_until(t_ns: u64) {
    while sleep_until_or_signal(t_ns) == Err(libc::EINTR) {}
}

/// Sleeps until CLOCK_MONOTONIC reaches `t_ns` or a signal arrives (`Err(EINTR)`), for
/// a loop that looks at a stop flag its signal handlers set.
pub fn sleep_until_or_signal(t_ns: u64) -> Result<(), i32> {
    let ts = timespec(t_ns);
    // SAFETY: clock_nanosleep reads `ts`; the remainder pointer may be null with
    // TIMER_ABSTIME.
    match unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } {
        0 => Ok(()),
        errno => Err(errno),
    }
}

/// CPU time of the calling thread, ns.
pub fn thread_cpu_ns() -> u64 {
    read_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

/// CPU time of the calling process (all its threads), ns.
pub fn process_cpu_ns() -> u64 {
    read_ns(libc::CLOCK_PROCESS_CPUTIME_ID).unwrap_or(0)
}

/// The CLOCK_MONOTONIC instant of the CLOCK_REALTIME instant `t_ns` (e.g. a CAN frame's
/// bus stamp), by the offset between the two clocks now (0 for an instant before the
/// monotonic clock's origin).
pub fn realtime_to_monotonic(t_ns: u64) -> u64 {
    let (mono, real) = (now_ns(), realtime_ns());
    (t_ns + mono).saturating_sub(real)
}

/// `t_ns` as a timespec.
pub fn timespec(t_ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_timespec_splits_seconds_and_nanoseconds() {
        let ts = timespec(3_000_000_007);
        assert_eq!((ts.tv_sec, ts.tv_nsec), (3, 7));
    }
}
