//! The control block: one page of a memfd shared by the supervisor and one task.
//!
//! Layout ([`Control`], `repr(C)`, native endianness: both sides run on the same machine).
//! Fields marked *supervisor* are written by the supervisor only, *task* by the task only;
//! the task maps the page read-write, so a faulty task can corrupt its own block, which
//! only affects itself: the supervisor treats the task's counters as reports, never as
//! inputs to a decision about another task.

use crate::error::{Error, Result};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU32, AtomicU64};

/// `b"BHTASK01"` as a little-endian integer.
pub const MAGIC: u64 = u64::from_le_bytes(*b"BHTASK01");
pub const VERSION: u32 = 1;
/// Size of the mapped control block (one page on every Linux platform bulkhead targets).
pub const CONTROL_LEN: usize = 4096;
/// Longest task name stored (bytes, UTF-8, NUL padded).
pub const NAME_LEN: usize = 64;

/// The shared control block.
#[repr(C)]
pub struct Control {
    /// [`MAGIC`], stored last by the supervisor (Release) once the rest is written.
    pub magic: AtomicU64,
    pub version: u32,
    /// Index of the task in its system (supervisor).
    pub task_index: u32,
    /// Budget C, period T, relative deadline D, ns (supervisor).
    pub budget_ns: u64,
    pub period_ns: u64,
    pub deadline_ns: u64,
    /// CLOCK_MONOTONIC time of release 0 (supervisor; may move while the task runs).
    pub epoch_ns: AtomicU64,
    /// How many times the supervisor restarted this task (supervisor).
    pub restarts: AtomicU32,
    /// Non-zero: the task should stop (supervisor).
    pub stop: AtomicU32,
    /// The process currently attached (task).
    pub pid: AtomicU32,
    _pad: u32,
    /// Activations started (task).
    pub activations: AtomicU64,
    /// Records dropped because the trace ring was full or closed (task).
    pub dropped: AtomicU64,
    /// Task name, NUL padded (supervisor).
    pub name: [u8; NAME_LEN],
}

const _: () = assert!(std::mem::size_of::<Control>() <= CONTROL_LEN);

/// A shared, writable mapping of a control block.
pub struct Mapping {
    ptr: *mut Control,
}

// SAFETY: the mapping is process-wide memory; all shared fields are atomics or written
// only before the magic is published.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first [`CONTROL_LEN`] bytes of `fd` shared and writable.
    /// Precondition: the file is at least that long (checked) and sealed against shrinking
    /// (checked by [`Mapping::open`]; the creator seals it).
    pub fn map(fd: BorrowedFd<'_>) -> Result<Mapping> {
        // SAFETY: fstat writes one stat struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(Error::last_os("fstat control block"));
        }
        if (st.st_size as usize) < CONTROL_LEN {
            return Err(Error::BadControl(format!(
                "file is {} bytes, want {CONTROL_LEN}",
                st.st_size
            )));
        }
        // SAFETY: a fresh shared mapping of a file at least CONTROL_LEN long; it is unmapped
        // only in Drop, after which no reference derived from it is used.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CONTROL_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os("mmap control block"));
        }
        Ok(Mapping { ptr: p.cast() })
    }

    /// Maps a control block received from the supervisor and validates it.
    pub fn open(fd: BorrowedFd<'_>) -> Result<Mapping> {
        // SAFETY: F_GET_SEALS takes no pointer argument.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
            return Err(Error::BadControl(
                "not a memfd sealed against shrinking".into(),
            ));
        }
        let m = Mapping::map(fd)?;
        let c = m.get();
        let magic = c.magic.load(std::sync::atomic::Ordering::Acquire);
        if magic != MAGIC {
            return Err(Error::BadControl(format!(
                "magic {magic:#x}, want {MAGIC:#x}"
            )));
        }
        if c.version != VERSION {
            return Err(Error::BadControl(format!(
                "version {}, want {VERSION}",
                c.version
            )));
        }
        if c.period_ns == 0 || c.deadline_ns == 0 {
            return Err(Error::BadControl("zero period or deadline".into()));
        }
        Ok(m)
    }

    /// The control block.
    pub fn get(&self) -> &Control {
        // SAFETY: ptr is a live mapping of CONTROL_LEN >= size_of::<Control>() bytes,
        // page-aligned; every field is valid for any bit pattern.
        unsafe { &*self.ptr }
    }

    /// Mutable access for initialization by the creator, before it publishes the magic.
    ///
    /// # Safety
    /// No other process may have mapped the block yet.
    pub(crate) unsafe fn get_mut(&mut self) -> &mut Control {
        // SAFETY: the caller guarantees exclusive access.
        unsafe { &mut *self.ptr }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/CONTROL_LEN come from our own successful mmap.
        unsafe { libc::munmap(self.ptr.cast(), CONTROL_LEN) };
    }
}

impl Control {
    /// The task name.
    pub fn name(&self) -> String {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }
}
