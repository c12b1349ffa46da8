//! The C API (`include/bulkhead/task.h`): one task per process, attached from the
//! environment. Every function returns 0 or a negative errno.

use crate::clock::now_ns;
use crate::task::{Activation, Counter, Task};
use std::sync::Mutex;

/// The process's task. An uncontended mutex costs no system call.
static TASK: Mutex<Option<Task>> = Mutex::new(None);

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
        None => -libc::ENOTCONN,
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
    with_task(|t| match t.wait_next_period() {
        Ok(a) => {
            if !out.is_null() {
                // SAFETY: the caller guarantees `out` is writable when not null.
                unsafe { out.write(a.into()) };
            }
            0
        }
        Err(e) => e.errno(),
    })
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
        return -libc::EINVAL;
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    let Ok(name) = name.to_str() else {
        return -libc::EINVAL;
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
        None => -libc::EINVAL,
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
}
