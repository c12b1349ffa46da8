//! Futexes on words in shared memory (process-shared, not private: the words live in
//! mappings several processes share: a task's control block, the stop-start page).

use std::sync::atomic::AtomicU32;

/// Sleeps while `word` holds `expected`, at most `timeout_ns` (`None`: no limit).
/// Returns on a wake-up, the timeout, a signal, or at once if the word differs
/// (EAGAIN): callers loop on their condition.
pub fn wait(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>) {
    let ts = timeout_ns.map(crate::clock::timespec);
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a live, aligned u32 for the duration of the call; the timeout
    // pointer is null or points to `ts`, alive until the call returns. Spurious wake-ups
    // and EAGAIN are handled by the caller's loop.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
        )
    };
}

/// Sleeps while `word` holds `expected`, until CLOCK_MONOTONIC reaches `until_ns` at the
/// latest (an absolute time, FUTEX_WAIT_BITSET). Returns on a wake-up ([`wake_all`]
/// wakes any bitset), the time, a signal, or at once if the word differs: callers loop.
pub fn wait_until(word: &AtomicU32, expected: u32, until_ns: u64) {
    let ts = crate::clock::timespec(until_ns);
    // SAFETY: `word` is a live, aligned u32 for the duration of the call; `ts` outlives
    // it; the bitset call takes no second word (null).
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT_BITSET,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            libc::FUTEX_BITSET_MATCH_ANY,
        )
    };
}

/// Wakes every waiter on `word`.
pub fn wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE only reads its address.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    #[test]
    fn a_waiter_wakes_on_a_change_or_its_timeout() {
        let word = AtomicU32::new(0);
        let t = Instant::now();
        wait(&word, 0, Some(20_000_000));
        assert!(t.elapsed() >= Duration::from_millis(15), "timed out");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                while word.load(Ordering::Acquire) == 0 {
                    wait(&word, 0, Some(5_000_000_000));
                }
            });
            std::thread::sleep(Duration::from_millis(20));
            word.store(1, Ordering::Release);
            wake_all(&word);
            waiter.join().unwrap();
        });
        assert!(t.elapsed() < Duration::from_secs(4), "woken, not timed out");
    }

    #[test]
    fn a_waiter_until_a_time_sleeps_until_it() {
        let word = AtomicU32::new(0);
        let until = crate::clock::now_ns() + 20_000_000;
        while crate::clock::now_ns() < until {
            wait_until(&word, 0, until);
        }
        let t = Instant::now();
        wait_until(&word, 1, crate::clock::now_ns() + 5_000_000_000);
        assert!(
            t.elapsed() < Duration::from_secs(4),
            "a differing word returns at once"
        );
    }
}
