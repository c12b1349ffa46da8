//! Descriptors handed to a child process, and reads and writes on descriptor numbers
//! (the protocols whose descriptors are named by number in a variable).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// The lowest descriptor number a descriptor handed to a child may have: the numbers
/// below are the child's standard streams and the ones the launcher moves into place
/// (a channel becomes fd 3), so a handed descriptor must not sit on one of them.
pub const HANDED_MIN_FD: i32 = 10;

/// The flag that opens a file for non-blocking reads and writes (`OpenOptionsExt::custom_flags`).
pub const O_NONBLOCK: i32 = libc::O_NONBLOCK;

/// A close-on-exec duplicate of `fd` numbered at least [`HANDED_MIN_FD`].
pub fn dup_for_handing(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC takes a descriptor and a minimum number and returns a new
    // descriptor or -1; it touches no memory.
    let new =
        crate::check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, HANDED_MIN_FD) })?;
    // SAFETY: `new` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Whether descriptor number `fd` is open in this process.
pub fn is_open(fd: i32) -> bool {
    // SAFETY: F_GETFD only inspects the descriptor table.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// Sets (`on`) or clears close-on-exec on descriptor number `fd`. Async-signal-safe
/// (one fcntl, no allocation): a forked child may call it before exec.
pub fn set_cloexec(fd: i32, on: bool) -> io::Result<()> {
    let flags = if on { libc::FD_CLOEXEC } else { 0 };
    // SAFETY: F_SETFD takes an int argument and touches no memory.
    crate::check(unsafe { libc::fcntl(fd, libc::F_SETFD, flags) }).map(drop)
}

/// A pipe: (reading end, writing end), both close-on-exec.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    crate::check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded: both descriptors are new and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Which of `fds` are readable (or at their end, or failed), waiting at most
/// `timeout_ms` for one to be (poll(2)); none after the timeout or a signal.
pub fn poll_readable(fds: &[i32], timeout_ms: i32) -> Vec<i32> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: poll on a valid array of pollfds of the length passed.
    let ready = unsafe {
        libc::poll(
            polled.as_mut_ptr(),
            polled.len() as libc::nfds_t,
            timeout_ms,
        )
    };
    if ready <= 0 {
        return Vec::new();
    }
    polled
        .iter()
        .filter(|p| p.revents != 0)
        .map(|p| p.fd)
        .collect()
}

/// Reads at most `buf.len()` bytes from descriptor number `fd` (one read(2)). A number
/// that is no open descriptor fails with EBADF.
pub fn read_raw(fd: i32, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: read writes at most buf.len() bytes into the live buffer.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Writes at most `buf.len()` bytes to descriptor number `fd` (one write(2)). A number
/// that is no open descriptor fails with EBADF.
pub fn write_raw(fd: i32, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: write reads at most buf.len() bytes of the live buffer.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Sends at most `buf.len()` bytes on socket number `fd` without blocking (one
/// send(2) with MSG_DONTWAIT): a full socket fails with EAGAIN, a number that is no
/// open descriptor with EBADF.
pub fn send_nonblocking(fd: i32, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: send reads at most buf.len() bytes of the live buffer.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
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
        assert_eq!(cloexec(dup.as_raw_fd()), libc::FD_CLOEXEC);
    }

    fn cloexec(fd: i32) -> i32 {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        unsafe { libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC }
    }

    #[test]
    fn a_pipe_is_readable_once_written_and_carries_the_bytes() {
        let (r, w) = pipe().unwrap();
        assert_eq!(cloexec(r.as_raw_fd()), libc::FD_CLOEXEC);
        assert!(poll_readable(&[r.as_raw_fd()], 0).is_empty());
        assert_eq!(write_raw(w.as_raw_fd(), b"abc").unwrap(), 3);
        assert_eq!(poll_readable(&[r.as_raw_fd()], 1000), vec![r.as_raw_fd()]);
        let mut buf = [0u8; 8];
        assert_eq!(read_raw(r.as_raw_fd(), &mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"abc");
        drop(w);
        assert_eq!(read_raw(r.as_raw_fd(), &mut buf).unwrap(), 0, "its end");
        let closed = read_raw(NEVER_OPEN, &mut buf).unwrap_err();
        assert_eq!(closed.raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn a_nonblocking_send_fills_a_socket_then_fails_with_would_block() {
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        assert_eq!(
            send_nonblocking(a.as_raw_fd(), &2u64.to_ne_bytes()).unwrap(),
            8
        );
        let mut buf = [0u8; 8];
        assert_eq!(b.recv(&mut buf).unwrap(), 8);
        assert_eq!(u64::from_ne_bytes(buf), 2);
        let full = (0..100_000)
            .find_map(|_| send_nonblocking(a.as_raw_fd(), &buf).err())
            .expect("a socket's buffer is bounded");
        assert_eq!(full.kind(), io::ErrorKind::WouldBlock);
        let closed = send_nonblocking(NEVER_OPEN, &buf).unwrap_err();
        assert_eq!(closed.raw_os_error(), Some(libc::EBADF));
    }

    /// A descriptor number no process has open (above any descriptor limit).
    const NEVER_OPEN: i32 = i32::MAX - 1;

    #[test]
    fn close_on_exec_is_set_and_cleared_and_a_closed_number_is_not_open() {
        // In a forked child, so that the descriptor made inheritable for a moment cannot
        // leak into a process another test of this binary starts meanwhile. The child
        // calls only open, fcntl and _exit (async-signal-safe).
        // SAFETY: fork has no memory preconditions; the child ends in _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: open reads a NUL-terminated literal.
            let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) };
            let cleared = set_cloexec(fd, false).is_ok() && cloexec(fd) == 0;
            let set = set_cloexec(fd, true).is_ok() && cloexec(fd) == libc::FD_CLOEXEC;
            // SAFETY: _exit ends the child without running the parent's destructors.
            unsafe { libc::_exit(if cleared && set && is_open(fd) { 0 } else { 1 }) };
        }
        assert_eq!(crate::proc::wait(pid).unwrap(), 0);
        assert!(!is_open(NEVER_OPEN));
        let err = set_cloexec(NEVER_OPEN, true).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
    }
}
