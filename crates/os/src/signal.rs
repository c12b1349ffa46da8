//! SIGINT and SIGTERM as readable events: a handler writes one byte to a pipe the
//! event loop watches (the self-pipe pattern; works whatever threads the process has).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

static WRITE_END: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    let fd = WRITE_END.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; the buffer is a valid static byte.
        unsafe { libc::write(fd, b"s".as_ptr().cast(), 1) };
    }
}

/// Installed handlers; dropping restores the previous ones.
pub struct StopSignals {
    read_end: OwnedFd,
    write_end: OwnedFd,
    previous: [libc::sigaction; 2],
}

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

impl StopSignals {
    /// Installs the handlers. Precondition: one instance at a time per process.
    pub fn install() -> io::Result<StopSignals> {
        let mut fds = [0; 2];
        // SAFETY: `fds` is a valid array for pipe2 to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded; both fds are new and owned here.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        WRITE_END.store(write_end.as_raw_fd(), Ordering::Relaxed);
        // SAFETY: zeroed sigaction structs are valid "no handler" values to be filled.
        let mut previous: [libc::sigaction; 2] = unsafe { std::mem::zeroed() };
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY: a zeroed sigaction with a valid handler and an empty mask.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            // SAFETY: valid sigaction pointers; the handler is async-signal-safe.
            unsafe {
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(sig, &action, &mut previous[i]);
            }
        }
        Ok(StopSignals {
            read_end,
            write_end,
            previous,
        })
    }

    /// The fd that becomes readable when a stop signal arrived.
    pub fn fd(&self) -> i32 {
        self.read_end.as_raw_fd()
    }

    /// Consumes the pending notifications.
    pub fn drain(&self) {
        let mut buf = [0u8; 16];
        // SAFETY: reading into a valid buffer from our non-blocking pipe.
        while unsafe {
            libc::read(
                self.read_end.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        } > 0
        {}
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY: restoring the handlers saved at install.
            unsafe { libc::sigaction(sig, &self.previous[i], std::ptr::null_mut()) };
        }
        WRITE_END.store(-1, Ordering::Relaxed);
        let _ = self.write_end.as_raw_fd();
    }
}
