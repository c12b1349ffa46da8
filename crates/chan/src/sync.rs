//! Atomics and the futex, switched to loom's models under `--cfg loom`.
//!
//! The channel algorithms in [`crate::fifo`] and [`crate::fourslot`] use only
//! what this module exports, so the very same code runs over shared memory in
//! production and under the loom model checker in `tests/loom.rs`.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64};
pub use std::sync::atomic::Ordering;
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicU32, AtomicU64};

#[cfg(not(loom))]
use rustix::time::Timespec;
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
    let timeout = time_left(deadline, Timespec::default())?;
    match futex::wait(word, futex::Flags::empty(), expected, timeout.as_ref()) {
        Err(rustix::io::Errno::TIMEDOUT) => Err(TimedOut),
        // EAGAIN (value changed), EINTR (signal) and success all mean: re-check.
        _ => Ok(()),
    }
}

/// The time left until `deadline`, added to `base` (zero: a relative timeout; the
/// CLOCK_MONOTONIC time now: an absolute one); `None` without a deadline, `TimedOut`
/// once it passed.
#[cfg(not(loom))]
fn time_left(deadline: Option<Instant>, base: Timespec) -> Result<Option<Timespec>, TimedOut> {
    let Some(d) = deadline else {
        return Ok(None);
    };
    let left = d.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(TimedOut);
    }
    let ns = base.tv_nsec as u128 + left.as_nanos();
    Ok(Some(Timespec {
        tv_sec: base.tv_sec + (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    }))
}

/// Why [`wait_either`] returned without timing out.
#[cfg(not(loom))]
#[derive(Debug, PartialEq, Eq)]
pub enum Woken {
    /// `word` changed, was woken, or the call was interrupted: re-check.
    Mine,
    /// `other` differs from `other_seen` or was woken.
    Other,
}

/// [`wait`] on `word` that also ends when `other` (a futex word of another mapping, e.g.
/// a task's control block) differs from `other_seen` or is woken: `futex_waitv` (Linux
/// 5.16) on both, shared futexes. Not in the loom model: it adds a wake source outside
/// the channel's protocol, whose steps ([`crate::fifo`]'s `sleep`) it leaves unchanged.
#[cfg(not(loom))]
pub fn wait_either(
    word: &AtomicU32,
    expected: u32,
    other: &AtomicU32,
    other_seen: u32,
    deadline: Option<Instant>,
) -> Result<Woken, TimedOut> {
    use rustix::thread::futex::{waitv, Wait, WaitFlags, WaitPtr, WaitvFlags};
    if other.load(Ordering::Acquire) != other_seen {
        return Ok(Woken::Other);
    }
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let until = time_left(deadline, now)?;
    let wait_on = |w: &AtomicU32, val: u32| {
        let mut entry = Wait::new();
        entry.val = u64::from(val);
        entry.uaddr = WaitPtr::new(w.as_ptr().cast());
        entry.flags = WaitFlags::SIZE_U32;
        entry
    };
    let waiters = [wait_on(word, expected), wait_on(other, other_seen)];
    let clock = rustix::time::ClockId::Monotonic;
    match waitv(&waiters, WaitvFlags::empty(), until.as_ref(), clock) {
        Ok(1) => Ok(Woken::Other),
        Err(rustix::io::Errno::TIMEDOUT) => Err(TimedOut),
        // EAGAIN: one of the words differs already.
        _ if other.load(Ordering::Acquire) != other_seen => Ok(Woken::Other),
        // A wake-up of `word`, EAGAIN on it, or EINTR (signal): re-check.
        _ => Ok(Woken::Mine),
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

/// Prepares the asymmetric barrier pair ([`heavy_barrier`], [`light_barrier`]) for
/// this process: registers it for `MEMBARRIER_CMD_GLOBAL_EXPEDITED` (so that another
/// process's heavy barrier interrupts this one's threads), then issues one heavy barrier
/// as a probe. Returns whether both worked; if not (a kernel before 4.16, a seccomp
/// filter that refuses them), the caller must use fences on both sides.
///
/// The registration belongs to the process (its memory map), not to the caller: a child
/// forked afterwards is not registered, so an endpoint must be attached, not inherited
/// through `fork`, by the process that uses it.
#[cfg(not(loom))]
pub fn barriers_ready() -> bool {
    use rustix::thread::{membarrier, MembarrierCommand};
    membarrier(MembarrierCommand::RegisterGlobalExpedited).is_ok() && heavy_barrier()
}

/// The heavy half of an asymmetric barrier pair: a SeqCst fence in this thread and,
/// before it returns, a full memory barrier in every running thread of every process
/// registered by [`barriers_ready`] (`membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)`, an
/// inter-processor interrupt to their CPUs; a thread not running passed one in the
/// scheduler). So for every such thread there is a point P during this call such that
/// what it did before P is visible to this thread after the call, and what this thread
/// did before the call is visible to what it does after P: as if that thread had
/// executed a SeqCst fence at P (membarrier(2)). A few microseconds; returns whether the
/// kernel did it.
#[cfg(not(loom))]
pub fn heavy_barrier() -> bool {
    use rustix::thread::{membarrier, MembarrierCommand};
    membarrier(MembarrierCommand::GlobalExpedited).is_ok()
}

/// The light half of the pair: keeps the compiler from moving memory accesses across
/// it; the processor's reordering across it is what [`heavy_barrier`] undoes.
#[cfg(not(loom))]
#[inline]
pub fn light_barrier() {
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
}

/// Loom model of [`barriers_ready`]: the pair always works.
#[cfg(loom)]
pub fn barriers_ready() -> bool {
    true
}

/// Loom model of the heavy barrier: a SeqCst fence. With [`light_barrier`] modelled as a
/// SeqCst fence too, the model checks the protocol built on the pair as if the peer's
/// barrier point P were at its light barrier; why any P will do is argued where the pair
/// is used ([`crate::fifo`]).
#[cfg(loom)]
pub fn heavy_barrier() -> bool {
    fence(Ordering::SeqCst);
    true
}

/// Loom model of the light barrier: a SeqCst fence (see [`heavy_barrier`]).
#[cfg(loom)]
pub fn light_barrier() {
    fence(Ordering::SeqCst);
}

/// Spin-wait hint.
#[cfg(not(loom))]
#[inline]
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
