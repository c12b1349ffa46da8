//! The supervisor's event loop: an epoll set, a timerfd on absolute CLOCK_MONOTONIC
//! times, non-blocking reads and writes of its channel sockets, reaping children.

use crate::check;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn owned(fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: `fd` was just returned by a successful system call and is owned by nobody else.
    check(fd).map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A ready descriptor: the token it was added with and its `EPOLL*` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    pub token: u64,
    pub flags: u32,
}

impl Ready {
    /// The peer closed (hang-up or read hang-up).
    pub fn closed(&self) -> bool {
        self.flags & (libc::EPOLLHUP | libc::EPOLLRDHUP) as u32 != 0
    }
}

/// An epoll set watching descriptors for input, each under a token.
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    /// A new, empty set (close-on-exec), reporting up to 64 descriptors per wait.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: a plain system call creating a new fd.
        let fd = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll {
            fd,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
        })
    }

    /// Watches `fd` for input and hang-up under `token`. Precondition: `fd` stays open
    /// until [`Epoll::remove`] (the kernel drops closed descriptors itself).
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            u64: token,
        };
        // SAFETY: valid epoll fd, watched fd and event pointer.
        check(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })
            .map(|_| ())
    }

    /// Stops watching `fd` (an error, e.g. not watched, is ignored).
    pub fn remove(&self, fd: RawFd) {
        // SAFETY: removing an fd from our epoll set; a null event is allowed for DEL.
        unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
    }

    /// Waits up to `timeout_ms` (-1: without limit) for ready descriptors; an
    /// interruption by a signal returns none.
    pub fn wait(&mut self, timeout_ms: i32) -> io::Result<Vec<Ready>> {
        // SAFETY: `events` is a valid buffer of `len` epoll_event entries.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as i32,
                timeout_ms,
            )
        };
        match check(n) {
            Ok(n) => Ok(self.events[..n as usize]
                .iter()
                .map(|e| Ready {
                    token: e.u64,
                    flags: e.events,
                })
                .collect()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

/// A non-blocking timerfd on CLOCK_MONOTONIC, armed at absolute times.
pub struct Timer {
    fd: OwnedFd,
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        // SAFETY: a plain system call creating a new fd.
        let fd = owned(unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            )
        })?;
        Ok(Timer { fd })
    }

    /// The descriptor to watch: readable once the timer expired.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Arms the timer at CLOCK_MONOTONIC time `at_ns` (an instant in the past, 0
    /// included, fires at once), or disarms it (`None`). Postcondition: expirations
    /// not yet read are dropped (the kernel's `timerfd_setup` resets the count), so the
    /// descriptor is readable again only once the new time has passed.
    pub fn set(&self, at_ns: Option<u64>) -> io::Result<()> {
        let value = match at_ns {
            // An absolute time of 0 would disarm: 1 ns is as much in the past.
            Some(t) => crate::clock::timespec(t.max(1)),
            None => crate::clock::timespec(0),
        };
        let spec = libc::itimerspec {
            it_interval: crate::clock::timespec(0),
            it_value: value,
        };
        // SAFETY: valid timerfd and itimerspec; the old value pointer may be null.
        let r = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        check(r).map(|_| ())
    }

    /// Consumes the expirations (none pending is not an error).
    pub fn clear(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reading 8 bytes into a valid buffer from our timerfd (non-blocking).
        unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }
}

/// A non-blocking eventfd with which a worker thread wakes the event loop: the loop
/// watches [`Wakeup::fd`], the worker calls [`Wakeup::notify`], the loop [`Wakeup::clear`]s
/// it before it collects what the worker finished (so a notification after the clear
/// wakes it again).
pub struct Wakeup {
    fd: OwnedFd,
}

impl Wakeup {
    pub fn new() -> io::Result<Wakeup> {
        // SAFETY: a plain system call creating a new fd.
        let fd = owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        Ok(Wakeup { fd })
    }

    /// A wakeup over an eventfd another process created and passed down (the task
    /// library's wakeup of the supervisor's drain). Precondition: `fd` is an eventfd.
    pub fn from_eventfd(fd: OwnedFd) -> Wakeup {
        Wakeup { fd }
    }

    /// The descriptor to watch: readable once notified.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Makes the descriptor readable (adds 1 to the eventfd's counter).
    pub fn notify(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes from a local buffer to our eventfd; it can only fail
        // when the counter would overflow, which leaves it readable anyway.
        unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// Consumes the notifications (none pending is not an error).
    pub fn clear(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reading 8 bytes into a valid buffer from our eventfd (non-blocking).
        unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }
}

/// Receives into `buf` from socket `fd` without blocking: `Ok(0)` when the peer closed,
/// `WouldBlock` when nothing is pending.
pub fn recv_nonblocking(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: receiving into a valid buffer of `buf.len()` bytes.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Sends `buf` on socket `fd` without blocking and without SIGPIPE: a peer that is
/// gone makes it fail with EPIPE.
pub fn send_nonblocking(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: sending from a valid buffer of `buf.len()` bytes.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_timer_in_the_past_fires_at_once_and_its_token_is_reported() {
        let mut epoll = Epoll::new().unwrap();
        let timer = Timer::new().unwrap();
        epoll.add(timer.fd(), 7).unwrap();
        timer.set(Some(0)).unwrap();
        let ready = epoll.wait(5_000).unwrap();
        assert_eq!(ready.iter().map(|r| r.token).collect::<Vec<_>>(), [7]);
        timer.clear();
        timer.set(None).unwrap();
        assert!(epoll.wait(0).unwrap().is_empty());
    }

    /// The supervisor consumes an expiration by arming the next one, without a read.
    #[test]
    fn arming_again_drops_the_expirations_not_read() {
        let mut epoll = Epoll::new().unwrap();
        let timer = Timer::new().unwrap();
        epoll.add(timer.fd(), 7).unwrap();
        timer.set(Some(0)).unwrap();
        assert_eq!(epoll.wait(5_000).unwrap().len(), 1, "expired");
        let in_an_hour = crate::clock::now_ns() + 3_600_000_000_000;
        timer.set(Some(in_an_hour)).unwrap();
        assert!(
            epoll.wait(0).unwrap().is_empty(),
            "not readable after re-arming"
        );
        timer.set(Some(1)).unwrap();
        assert_eq!(
            epoll.wait(5_000).unwrap().len(),
            1,
            "fires again once re-armed"
        );
        timer.set(None).unwrap();
        assert!(
            epoll.wait(0).unwrap().is_empty(),
            "not readable once disarmed"
        );
    }

    #[test]
    fn a_wakeup_is_readable_from_its_notify_until_its_clear() {
        let mut epoll = Epoll::new().unwrap();
        let wake = Wakeup::new().unwrap();
        epoll.add(wake.fd(), 9).unwrap();
        assert!(epoll.wait(0).unwrap().is_empty());
        std::thread::scope(|s| {
            s.spawn(|| wake.notify());
        });
        wake.notify();
        assert_eq!(epoll.wait(5_000).unwrap()[0].token, 9);
        wake.clear();
        assert!(
            epoll.wait(0).unwrap().is_empty(),
            "both notifications consumed"
        );
        wake.clear();
    }

    #[test]
    fn a_socket_reports_bytes_then_its_close() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut epoll = Epoll::new().unwrap();
        epoll.add(b.as_raw_fd(), 3).unwrap();
        let mut buf = [0u8; 8];
        let e = recv_nonblocking(b.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(send_nonblocking(a.as_raw_fd(), b"abc").unwrap(), 3);
        assert_eq!(epoll.wait(5_000).unwrap()[0].token, 3);
        assert_eq!(recv_nonblocking(b.as_raw_fd(), &mut buf).unwrap(), 3);
        drop(a);
        assert!(epoll.wait(5_000).unwrap()[0].closed());
        assert_eq!(recv_nonblocking(b.as_raw_fd(), &mut buf).unwrap(), 0);
        epoll.remove(b.as_raw_fd());
        assert!(epoll.wait(0).unwrap().is_empty());
    }
}
