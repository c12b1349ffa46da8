//! Descriptors handed to a child process.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// The lowest descriptor number a descriptor handed to a child may have: the numbers
/// below are the child's standard streams and the ones the launcher moves into place
/// (a channel becomes fd 3), so a handed descriptor must not sit on one of them.
pub const HANDED_MIN_FD: i32 = 10;

/// A close-on-exec duplicate of `fd` numbered at least [`HANDED_MIN_FD`].
pub fn dup_for_handing(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC takes a descriptor and a minimum number and returns a new
    // descriptor or -1; it touches no memory.
    let new =
        crate::check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, HANDED_MIN_FD) })?;
    // SAFETY: `new` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_handed_duplicate_is_numbered_above_the_moved_ones() {
        let file = std::fs::File::open("/dev/null").unwrap();
        let dup = dup_for_handing(file.as_fd()).unwrap();
        assert!(dup.as_raw_fd() >= HANDED_MIN_FD);
        // SAFETY: F_GETFD only reads the descriptor's flags.
        let flags = unsafe { libc::fcntl(dup.as_raw_fd(), libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
    }
}
