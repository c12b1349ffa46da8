//! The mapping of a channel file and its header page: read and validated on connect,
//! written (magic last) on create.

use crate::ctrl::Side;
use crate::error::{OpenError, Result};
use crate::layout::{self, Layout, Meta, HEADER_LEN, MAGIC};
use rustix::fd::BorrowedFd;
use rustix::mm::{MapFlags, MprotectFlags, ProtFlags};
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

/// An `mmap` of a whole channel file, unmapped on drop.
pub(crate) struct Map {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: the mapping is plain shared memory, usable from any thread.
unsafe impl Send for Map {}

impl Map {
    pub(crate) fn new(fd: BorrowedFd<'_>, len: u64, prot: ProtFlags) -> Result<Map, OpenError> {
        let len =
            usize::try_from(len).map_err(|_| OpenError::Invalid("channel too large".into()))?;
        // SAFETY: a fresh shared mapping at an address the kernel chooses
        // aliases no Rust object; the file is at least `len` bytes (validated
        // or just truncated), and memfds are sealed against shrinking.
        let ptr =
            unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, fd, 0) }
                .map_err(|e| OpenError::io("mmap channel", e))?;
        Ok(Map {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Makes `[off, off+len)` read-only (both page-aligned, inside the map).
    pub(crate) fn read_only(&self, off: u64, len: u64) -> Result<(), OpenError> {
        // SAFETY: the range lies inside this mapping (layout offsets are page
        // multiples below total_len); only protections change.
        unsafe {
            rustix::mm::mprotect(
                self.ptr.add(off as usize).cast(),
                len as usize,
                MprotectFlags::READ,
            )
        }
        .map_err(|e| OpenError::io("mprotect channel", e))
    }

    /// The control words at `off` (a page offset inside the map).
    pub fn side(&self, off: u64) -> *const Side {
        // SAFETY: off + size_of::<Side>() <= len by the validated layout, and
        // page alignment satisfies Side's alignment.
        unsafe { self.ptr.add(off as usize) as *const Side }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: ptr/len come from our own successful mmap; every pointer
        // derived from it lives in the endpoint that owns (and drops) this Map.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}

pub(crate) fn read_header(fd: BorrowedFd<'_>, file_len: u64) -> Result<(Meta, Layout), OpenError> {
    let page = page_size();
    if file_len < page {
        return Err(OpenError::BadHeader(format!(
            "file is {file_len} bytes, shorter than a page"
        )));
    }
    let map = Map::new(fd, page, ProtFlags::READ)?;
    // SAFETY: page 0 is mapped and 8-aligned; the creator stores the magic
    // last with Release, so Acquire here makes the rest of the header visible.
    let magic = unsafe { &*(map.ptr as *const AtomicU64) }.load(Ordering::Acquire);
    if magic != MAGIC {
        return Err(OpenError::BadHeader(format!(
            "magic {magic:#018x}, want {MAGIC:#018x}"
        )));
    }
    let mut b = [0u8; HEADER_LEN];
    for (i, byte) in b.iter_mut().enumerate() {
        // SAFETY: i < HEADER_LEN <= page, inside the mapping. Volatile: a peer
        // may write concurrently; the copy is validated, never trusted.
        *byte = unsafe { map.ptr.add(i).read_volatile() };
    }
    layout::validate(&b, file_len, page)
}

pub(crate) fn write_header(fd: BorrowedFd<'_>, meta: &Meta, l: &Layout) -> Result<(), OpenError> {
    let map = Map::new(fd, l.page, ProtFlags::READ | ProtFlags::WRITE)?;
    let b = layout::encode(meta, l);
    // SAFETY: the page is ours alone (nobody can validate it before the
    // magic is set); bytes 8.. first, then the magic with Release.
    unsafe {
        std::ptr::copy_nonoverlapping(b[8..].as_ptr(), map.ptr.add(8), HEADER_LEN - 8);
        (*(map.ptr as *const AtomicU64)).store(MAGIC, Ordering::Release);
    }
    Ok(())
}
