//! Atomics and the futex, switched to loom's models under `--cfg loom`.
//!
//! The channel algorithms in [`crate::fifo`] and [`crate::fourslot`] use only
//! what this module exports, so the very same code runs over shared memory in
//! production and under the loom model checker in `tests/loom.rs`.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU32};
pub use std::sync::atomic::Ordering;
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicU32};

use std::time::Instant;

/// The futex word stayed equal to the expected value until the deadline.
#[derive(Debug, PartialEq, Eq)]
pub struct TimedOut;

/// Sleeps while `*word == expected`, at most until `deadline`.
///
/// Returns early (`Ok`) when the word differs, when woken by [`wake`], or
/// spuriously; callers always re-check their condition. Uses a shared
/// (non-private) futex so that it works across processes that map the same
/// file page, whatever their virtual addresses.
#[cfg(not(loom))]
pub fn wait(word: &AtomicU32, expected: u32, deadline: Option<Instant>) -> Result<(), TimedOut> {
    use rustix::thread::futex;
    let timeout = match deadline {
        None => None,
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TimedOut);
            }
            Some(rustix::time::Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: left.subsec_nanos() as i64,
            })
        }
    };
    match futex::wait(word, futex::Flags::empty(), expected, timeout.as_ref()) {
        Err(rustix::io::Errno::TIMEDOUT) => Err(TimedOut),
        // EAGAIN (value changed), EINTR (signal) and success all mean: re-check.
        _ => Ok(()),
    }
}

/// Wakes every process sleeping in [`wait`] on `word`.
#[cfg(not(loom))]
pub fn wake(word: &AtomicU32) {
    // A failing wake can only be EFAULT/EINVAL on a bad address, which the
    // mapping rules out; there is nothing useful to do with the error.
    let _ =
        rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), i32::MAX as u32);
}

/// Spin-wait hint.
#[cfg(not(loom))]
pub fn spin_hint() {
    std::hint::spin_loop();
}

#[cfg(loom)]
mod model {
    use loom::sync::{Condvar, Mutex};
    loom::lazy_static! {
        /// One futex hash bucket: its lock orders the value check of `wait`
        /// against `wake`, exactly as the kernel's bucket lock does.
        pub static ref BUCKET: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());
    }
}

/// Loom model of `FUTEX_WAIT`: check the value and sleep atomically with
/// respect to [`wake`]. A lost wake-up shows up as a loom deadlock.
#[cfg(loom)]
pub fn wait(word: &AtomicU32, expected: u32, _deadline: Option<Instant>) -> Result<(), TimedOut> {
    let guard = model::BUCKET.0.lock().unwrap();
    if word.load(Ordering::Relaxed) != expected {
        return Ok(());
    }
    drop(model::BUCKET.1.wait(guard).unwrap());
    Ok(())
}

/// Loom model of `FUTEX_WAKE` (all waiters).
#[cfg(loom)]
pub fn wake(_word: &AtomicU32) {
    let _guard = model::BUCKET.0.lock().unwrap();
    model::BUCKET.1.notify_all();
}

/// Spin-wait hint (a scheduling point under loom).
#[cfg(loom)]
pub fn spin_hint() {
    loom::thread::yield_now();
}
