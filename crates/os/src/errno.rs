//! The thread's `errno`: read after a failed call, set by the C APIs of the libraries
//! (`chan`, `task`, `client`), and the error numbers they and the supervisor name.

pub use libc::{
    EACCES, EAFNOSUPPORT, EAGAIN, EBADF, EBADMSG, EBUSY, EFAULT, EINTR, EINVAL, EIO, ENODEV,
    ENOENT, ENOKEY, ENOSPC, ENOTCONN, ENXIO, EOPNOTSUPP, EPERM, EPIPE, EPROTO, EPROTONOSUPPORT,
    EROFS, ESHUTDOWN, ESRCH, EWOULDBLOCK,
};

/// The calling thread's `errno` (EIO if the last error has no number).
pub fn last() -> i32 {
    of(&std::io::Error::last_os_error())
}

/// The error number of `e` (EIO if it has none).
pub fn of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(EIO)
}

/// Sets the calling thread's `errno` to `e` (the C APIs' -1-and-errno convention).
pub fn set(e: i32) {
    // SAFETY: __errno_location returns the calling thread's errno slot, valid for the
    // thread's life.
    unsafe { *libc::__errno_location() = e };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_errno_set_is_the_last_one_read() {
        set(ENOKEY);
        assert_eq!(last(), ENOKEY);
        assert_eq!(of(&std::io::Error::other("no number")), EIO);
    }
}
