//! Pages shared through memfds: a task's control block, the stop-start notice page. The
//! creator makes a memfd of the page's size ([`memfd`]) and seals it ([`add_seals`]), the processes that
//! are handed its descriptor check it ([`size`], [`seals`]) and map it ([`SharedMap`]).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Seals: no shrinking (a mapping of the file can never fault past its end).
pub const SEAL_SHRINK: i32 = libc::F_SEAL_SHRINK;
/// Seals: no growing.
pub const SEAL_GROW: i32 = libc::F_SEAL_GROW;
/// Seals: no new writable mapping or write (the existing writable mappings stay).
pub const SEAL_FUTURE_WRITE: i32 = libc::F_SEAL_FUTURE_WRITE;
/// Seals: no further seals.
pub const SEAL_SEAL: i32 = libc::F_SEAL_SEAL;

/// A new close-on-exec memfd named `name` of `len` zero bytes, which can be sealed
/// ([`add_seals`]).
pub fn memfd(name: &CStr, len: usize) -> io::Result<OwnedFd> {
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: memfd_create reads a NUL-terminated name; the result is checked.
    let fd = crate::check(unsafe { libc::memfd_create(name.as_ptr(), flags) })?;
    // SAFETY: fd was just returned by memfd_create and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: ftruncate on our own descriptor.
    crate::check(unsafe { libc::ftruncate(fd.as_raw_fd(), len) })?;
    Ok(fd)
}

/// Adds `seals` (a union of the `SEAL_` constants) to the memfd of `fd`.
pub fn add_seals(fd: BorrowedFd<'_>, seals: i32) -> io::Result<()> {
    // SAFETY: F_ADD_SEALS takes an int argument.
    crate::check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) }).map(drop)
}

/// The seals of the file of `fd` (a union of the `SEAL_` constants).
pub fn seals(fd: BorrowedFd<'_>) -> io::Result<i32> {
    // SAFETY: F_GET_SEALS takes no pointer argument.
    crate::check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) })
}

/// The size in bytes of the file of `fd`.
pub fn size(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: stat is plain data; all-zero is a valid value for fstat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one stat struct into `st`.
    crate::check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(u64::try_from(st.st_size).unwrap_or(0))
}

/// A shared mapping of the first `len` bytes of a file, unmapped when dropped.
pub struct SharedMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process-wide memory, valid from any thread until dropped; what
// is stored in it, and how it is shared (atomics), is its user's concern.
unsafe impl Send for SharedMap {}
// SAFETY: as for Send: &SharedMap only hands out the address.
unsafe impl Sync for SharedMap {}

impl SharedMap {
    /// Maps the first `len` bytes of `fd` shared, writable or read-only. Precondition
    /// (for accesses, not for the call): the file is at least `len` long and cannot
    /// shrink (check [`size`] and [`seals`]); an access past its end faults.
    pub fn new(fd: BorrowedFd<'_>, len: usize, writable: bool) -> io::Result<SharedMap> {
        let prot = match writable {
            true => libc::PROT_READ | libc::PROT_WRITE,
            false => libc::PROT_READ,
        };
        // SAFETY: a fresh shared mapping chosen by the kernel, overlapping nothing of
        // ours; unmapped only in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMap { ptr: p.cast(), len })
    }

    /// The first byte of the mapping, page-aligned, valid until the map is dropped.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: ptr/len come from our own successful mmap, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_sealed_page_is_written_before_its_seal_and_read_only_after() {
        let fd = memfd(c"bulkhead-os-shm-test", 4096).unwrap();
        let writable = SharedMap::new(fd.as_fd(), 4096, true).unwrap();
        let all = SEAL_SHRINK | SEAL_GROW | SEAL_FUTURE_WRITE | SEAL_SEAL;
        add_seals(fd.as_fd(), all).unwrap();
        // SAFETY: the mapping is 4096 bytes long and ours alone.
        unsafe { *writable.as_ptr().add(7) = 42 };
        assert_eq!(size(fd.as_fd()).unwrap(), 4096);
        assert_ne!(seals(fd.as_fd()).unwrap() & SEAL_SHRINK, 0);
        let err = SharedMap::new(fd.as_fd(), 4096, true).err().unwrap();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM));
        let map = SharedMap::new(fd.as_fd(), 4096, false).unwrap();
        // SAFETY: the mapping is 4096 bytes long.
        assert_eq!(unsafe { *map.as_ptr().add(7) }, 42);
    }
}
