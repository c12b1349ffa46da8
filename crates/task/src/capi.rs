//! The C API (`include/bulkhead/task.h`): one task per process, attached from the
//! environment. Every function returns 0 or a negative errno.

use crate::clock::now_ns;
use crate::record::flags;
use crate::task::{Activation, Counter, Resume, Task};
use std::ffi::c_void;
use std::sync::Mutex;

/// The process's task. An uncontended mutex costs no system call.
static TASK: Mutex<Option<Task>> = Mutex::new(None);

/// A restartable C task's checkpoint (`bulkhead_checkpoint`): where its state lives and
/// a copy of it as it was then.
struct Checkpoint {
    /// Address of the task's state (kept as an integer: the task owns the memory).
    state: usize,
    saved: Vec<u8>,
}

static CHECKPOINT: Mutex<Option<Checkpoint>> = Mutex::new(None);

/// The suspend callback's type: `fn(deadline_ns, arg)`.
pub type SuspendCallback = Option<unsafe extern "C" fn(u64, *mut c_void)>;

/// C mirror of [`Activation`].
#[repr(C)]
pub struct bulkhead_activation {
    pub index: u64,
    pub release_ns: u64,
    pub deadline_ns: u64,
    pub flags: u32,
    pub skipped: u32,
}

impl From<Activation> for bulkhead_activation {
    fn from(a: Activation) -> Self {
        bulkhead_activation {
            index: a.index,
            release_ns: a.release_ns,
            deadline_ns: a.deadline_ns,
            flags: a.flags,
            skipped: a.skipped,
        }
    }
}

fn with_task(f: impl FnOnce(&mut Task) -> i32) -> i32 {
    let mut guard = TASK.lock().unwrap_or_else(|p| p.into_inner());
    match guard.as_mut() {
        Some(t) => f(t),
        None => -bulkhead_os::errno::ENOTCONN,
    }
}

/// Attaches to the supervisor (environment variable `BULKHEAD_TASK`). Idempotent.
#[no_mangle]
pub extern "C" fn bulkhead_task_attach() -> i32 {
    let mut guard = TASK.lock().unwrap_or_else(|p| p.into_inner());
    if guard.is_some() {
        return 0;
    }
    match Task::attach() {
        Ok(t) => {
            *guard = Some(t);
            0
        }
        Err(e) => e.errno(),
    }
}

/// Completes the current activation, sleeps until the next release and fills `out`.
/// Returns `-ESHUTDOWN` when the supervisor asks the task to stop.
///
/// # Safety
/// `out` is null or points to a writable `bulkhead_activation`.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_wait_next_period(out: *mut bulkhead_activation) -> i32 {
    // SAFETY: the caller guarantees `out` as `deliver` requires.
    with_task(|t| unsafe { deliver(t.wait_next_period(), out) })
}

/// An activation's hand-over to C: the checkpoint copied back after a resume, `out`
/// filled; 0, or the error's negative errno.
///
/// # Safety
/// `out` is null or points to a writable `bulkhead_activation`.
unsafe fn deliver(activation: crate::Result<Activation>, out: *mut bulkhead_activation) -> i32 {
    match activation {
        Ok(a) => {
            if a.flags & flags::RESUMED != 0 {
                restore_checkpoint();
            }
            if !out.is_null() {
                // SAFETY: the caller guarantees `out` is writable when not null.
                unsafe { out.write(a.into()) };
            }
            0
        }
        Err(e) => e.errno(),
    }
}

/// The input wait of `bulkhead_wait_arrival`: `f(slice_ns, &at_ns, arg)`.
pub type ArrivalCallback = Option<unsafe extern "C" fn(u64, *mut u64, *mut c_void) -> i32>;

/// The sporadic counterpart of `bulkhead_wait_next_period` ([`Task::wait_arrival`]):
/// completes the current activation, then calls `arrival(slice_ns, &at_ns, arg)` until
/// it returns 1 (an input arrived; `at_ns` its arrival on CLOCK_MONOTONIC, or left 0
/// for now), looking at the supervisor's requests between calls; 0 means no input came
/// within `slice_ns`, a negative errno gives up and is returned. Fills `out` with the
/// activation released at the arrival. `-EINVAL` for a null `arrival`.
///
/// # Safety
/// `arrival` is safe to call with `arg` and must not call other `bulkhead_` functions
/// (the task is locked during the wait); `out` is null or points to a writable
/// `bulkhead_activation`.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_wait_arrival(
    arrival: ArrivalCallback,
    arg: *mut c_void,
    out: *mut bulkhead_activation,
) -> i32 {
    let Some(f) = arrival else {
        return -bulkhead_os::errno::EINVAL;
    };
    let mut wait = |wake: crate::Wake<'_>| {
        let mut at = 0u64;
        // SAFETY: the caller guarantees `f` may be called with `arg`; `at` is a valid u64.
        match unsafe { f(wake.slice.as_nanos() as u64, &mut at, arg) } {
            r if r < 0 => Err(std::io::Error::from_raw_os_error(-r)),
            0 => Ok(None),
            _ => Ok(Some(if at == 0 { now_ns() } else { at })),
        }
    };
    // SAFETY: the caller guarantees `out` as `deliver` requires.
    with_task(|t| unsafe { deliver(t.wait_arrival(&mut wait), out) })
}

/// Reports the current activation complete (before doing non-periodic work, say).
#[no_mangle]
pub extern "C" fn bulkhead_complete() -> i32 {
    with_task(|t| {
        t.complete();
        0
    })
}

/// 1 if the supervisor asked the task to stop, 0 if not, negative if not attached.
#[no_mangle]
pub extern "C" fn bulkhead_stop_requested() -> i32 {
    with_task(|t| t.stop_requested() as i32)
}

/// The task's budget, period and deadline in ns (any pointer may be null).
///
/// # Safety
/// Each non-null pointer points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_task_params(
    budget_ns: *mut u64,
    period_ns: *mut u64,
    deadline_ns: *mut u64,
) -> i32 {
    with_task(|t| {
        let p = t.params();
        for (ptr, v) in [
            (budget_ns, p.budget_ns),
            (period_ns, p.period_ns),
            (deadline_ns, p.deadline_ns),
        ] {
            if !ptr.is_null() {
                // SAFETY: the caller guarantees non-null pointers are writable.
                unsafe { ptr.write(v) };
            }
        }
        0
    })
}

/// The named counter `name` (NUL-terminated, 1 to 47 bytes): its handle (>= 0), created
/// at 0 on first use; `-EINVAL` for a bad name or when all 32 slots are used.
///
/// # Safety
/// `name` is null or points to a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_counter(name: *const std::ffi::c_char) -> i32 {
    if name.is_null() {
        return -bulkhead_os::errno::EINVAL;
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    let Ok(name) = name.to_str() else {
        return -bulkhead_os::errno::EINVAL;
    };
    with_task(|t| match t.counter(name) {
        Ok(c) => c.slot() as i32,
        Err(e) => e.errno(),
    })
}

/// Sets named counter `counter` (from `bulkhead_counter`) to `value`.
#[no_mangle]
pub extern "C" fn bulkhead_counter_set(counter: i32, value: u64) -> i32 {
    with_counter(counter, |t, c| t.set_counter(c, value))
}

/// Adds `delta` to named counter `counter` (wrapping).
#[no_mangle]
pub extern "C" fn bulkhead_counter_add(counter: i32, delta: u64) -> i32 {
    with_counter(counter, |t, c| t.add_counter(c, delta))
}

/// Runs `f` on the task's counter of handle `counter`; `-EINVAL` if it has none.
fn with_counter(counter: i32, f: impl FnOnce(&Task, Counter)) -> i32 {
    with_task(|t| match t.counter_at(counter) {
        Some(c) => {
            f(t, c);
            0
        }
        None => -bulkhead_os::errno::EINVAL,
    })
}

/// The current mode's index in the description's mode table (>= 0), or a negative errno.
#[no_mangle]
pub extern "C" fn bulkhead_current_mode() -> i32 {
    with_task(|t| t.current_mode().min(i32::MAX as u32) as i32)
}

/// Waits up to `timeout_ns` (0: only look) for a mode request; on one returns 1 and
/// fills `mode` and `seq` (either may be null), on timeout returns 0.
///
/// # Safety
/// Each non-null pointer points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_mode_wait(timeout_ns: u64, mode: *mut u32, seq: *mut u32) -> i32 {
    with_task(|t| {
        let timeout = std::time::Duration::from_nanos(timeout_ns);
        let Some(change) = t.wait_mode_change(Some(timeout)) else {
            return 0;
        };
        for (ptr, v) in [(mode, change.mode), (seq, change.seq)] {
            if !ptr.is_null() {
                // SAFETY: the caller guarantees non-null pointers are writable.
                unsafe { ptr.write(v) };
            }
        }
        1
    })
}

/// Acknowledges the mode request `seq` (from `bulkhead_mode_wait`): the task runs in the
/// new mode now.
#[no_mangle]
pub extern "C" fn bulkhead_mode_ack(seq: u32) -> i32 {
    with_task(|t| {
        let mode = t.current_mode();
        t.ack_mode(crate::control::ModeChange { seq, mode });
        0
    })
}

/// Copies the checkpoint, if the task made one, back over its state.
fn restore_checkpoint() {
    let guard = CHECKPOINT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(cp) = guard.as_ref() {
        // SAFETY: `bulkhead_checkpoint`'s caller guarantees `state` stays valid for
        // `saved.len()` writable bytes while the checkpoint is registered, and that
        // nothing else uses them during `bulkhead_wait_next_period`.
        unsafe {
            std::ptr::copy_nonoverlapping(cp.saved.as_ptr(), cp.state as *mut u8, cp.saved.len())
        };
    }
}

/// Makes the task restartable and saves `len` bytes at `state` as its checkpoint
/// (JuMP2start Fig. 3, "Save Context"): `bulkhead_wait_next_period` copies them back
/// before it returns the first activation after a resume (flags RESUMED | RESTARTED).
/// Calling it again replaces the checkpoint. `-EINVAL` for a null `state` or `len` 0.
///
/// # Safety
/// `state` points to `len` readable and writable bytes that stay valid (and are not
/// used by another thread during `bulkhead_wait_next_period`) for the rest of the
/// task's life.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_checkpoint(state: *mut c_void, len: usize) -> i32 {
    if state.is_null() || len == 0 {
        return -bulkhead_os::errno::EINVAL;
    }
    with_task(|t| {
        t.set_resume(Resume::Restartable);
        // SAFETY: the caller guarantees `len` readable bytes at `state`.
        let saved = unsafe { std::slice::from_raw_parts(state as *const u8, len) }.to_vec();
        *CHECKPOINT.lock().unwrap_or_else(|p| p.into_inner()) = Some(Checkpoint {
            state: state as usize,
            saved,
        });
        0
    })
}

/// Sets the suspend callback: `f(deadline_ns, arg)` runs at a suspend request, inside
/// `bulkhead_wait_next_period` (or `bulkhead_suspend_point`), before the task
/// acknowledges; past `deadline_ns` (CLOCK_MONOTONIC) the task is frozen anyway. The
/// callback must not call other `bulkhead_` functions. `f` NULL removes it.
///
/// # Safety
/// `f` is NULL or a function safe to call with `arg` from the task's thread.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_on_suspend(f: SuspendCallback, arg: *mut c_void) -> i32 {
    let arg = arg as usize;
    with_task(|t| {
        if let Some(f) = f {
            t.on_suspend(Box::new(move |_, deadline| {
                // SAFETY: the caller of bulkhead_on_suspend guarantees `f(…, arg)` is
                // safe to call from the task's thread, which is where this runs.
                unsafe { f(deadline, arg as *mut c_void) }
            }));
        } else {
            t.on_suspend(Box::new(|_, _| {}));
        }
        0
    })
}

/// The task's safe point for a suspension (for a long job): if a suspend request is
/// pending, runs the callback, acknowledges and waits for the resume, then returns 1;
/// 0 if none was pending; `-ESHUTDOWN` if asked to stop meanwhile.
#[no_mangle]
pub extern "C" fn bulkhead_suspend_point() -> i32 {
    with_task(|t| match t.suspend_point() {
        Ok(done) => done as i32,
        Err(e) => e.errno(),
    })
}

/// 1 if the system was suspended and resumed since the current activation started (a
/// restartable job should give up its stale work), 0 if not.
#[no_mangle]
pub extern "C" fn bulkhead_stale() -> i32 {
    with_task(|t| t.stale() as i32)
}

/// The stale/fresh rule for an input stamped `stamp_ns` (CLOCK_MONOTONIC, e.g. a CAN
/// frame's reception time): 1 if the task may use it, 0 if it is stale (a restartable
/// task's input stamped before the latest resume; counted in `ss.stale_dropped`).
#[no_mangle]
pub extern "C" fn bulkhead_fresh(stamp_ns: u64) -> i32 {
    with_task(|t| t.fresh(stamp_ns) as i32)
}

/// The stale/fresh rule for a CAN frame from a gateway channel, stamped `stamp_ns` on
/// CLOCK_REALTIME (the bus's reception time, the message's first word): as
/// [`bulkhead_fresh`] once the stamp is moved to CLOCK_MONOTONIC.
#[no_mangle]
pub extern "C" fn bulkhead_fresh_can(stamp_ns: u64) -> i32 {
    with_task(|t| t.fresh_can(stamp_ns) as i32)
}

/// bulkhead's system time, ns: CLOCK_MONOTONIC minus the time the system spent
/// suspended (CLOCK_MONOTONIC itself when not attached).
#[no_mangle]
pub extern "C" fn bulkhead_system_time_ns() -> u64 {
    let guard = TASK.lock().unwrap_or_else(|p| p.into_inner());
    guard.as_ref().map_or_else(now_ns, |t| t.system_time_ns())
}

/// CLOCK_MONOTONIC instant of the latest resume (0: none); frames stamped before it are
/// stale for a restartable task.
#[no_mangle]
pub extern "C" fn bulkhead_resumed_at_ns() -> u64 {
    let guard = TASK.lock().unwrap_or_else(|p| p.into_inner());
    guard.as_ref().map_or(0, |t| t.resumed_at_ns())
}

/// CLOCK_MONOTONIC now, ns (no system call).
#[no_mangle]
pub extern "C" fn bulkhead_now_ns() -> u64 {
    now_ns()
}

/// Completes the current activation and detaches.
#[no_mangle]
pub extern "C" fn bulkhead_task_detach() {
    let mut guard = TASK.lock().unwrap_or_else(|p| p.into_inner());
    guard.take();
    CHECKPOINT.lock().unwrap_or_else(|p| p.into_inner()).take();
}
