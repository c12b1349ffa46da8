//! SIGINT and SIGTERM as readable events: a handler writes one byte to a pipe the
//! event loop watches (the self-pipe pattern; works whatever threads the process has).
//!
//! The pipe is the process's, made once and never closed: a handler that runs on
//! another thread while the handlers are being restored writes to it, never to a
//! descriptor number closed and reused meanwhile.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;

/// The process's pipe: read end, write end.
static PIPE: OnceLock<[OwnedFd; 2]> = OnceLock::new();
/// The pipe's write end for the handler (-1 until the pipe exists).
static WRITE_END: AtomicI32 = AtomicI32::new(-1);
/// Whether a [`StopSignals`] is installed.
static INSTALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    let fd = WRITE_END.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; the buffer is a valid static byte.
        unsafe { libc::write(fd, b"s".as_ptr().cast(), 1) };
    }
}

/// The process's pipe, made on first use.
fn pipe() -> io::Result<&'static [OwnedFd; 2]> {
    if let Some(p) = PIPE.get() {
        return Ok(p);
    }
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array for pipe2 to fill.
    crate::check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) })?;
    // SAFETY: pipe2 succeeded; both fds are new and owned here.
    let made = unsafe { [OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])] };
    // Only one StopSignals is installed at a time, so no other thread is here.
    let p = PIPE.get_or_init(|| made);
    WRITE_END.store(p[1].as_raw_fd(), Ordering::Relaxed);
    Ok(p)
}

/// Installed handlers; dropping restores the previous ones.
pub struct StopSignals {
    read_end: i32,
    previous: [libc::sigaction; 2],
}

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

impl StopSignals {
    /// Installs the handlers; fails with `AlreadyExists` while another instance is
    /// installed in this process, and with the kernel's error if `sigaction` refuses.
    pub fn install() -> io::Result<StopSignals> {
        if INSTALLED.swap(true, Ordering::AcqRel) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "stop signal handlers are installed already",
            ));
        }
        let installed = Self::install_handlers();
        if installed.is_err() {
            INSTALLED.store(false, Ordering::Release);
        }
        installed
    }

    fn install_handlers() -> io::Result<StopSignals> {
        let read_end = pipe()?[0].as_raw_fd();
        // SAFETY: zeroed sigaction structs are valid "no handler" values to be filled.
        let mut previous: [libc::sigaction; 2] = unsafe { std::mem::zeroed() };
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY: a zeroed sigaction with a valid handler and an empty mask.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            // SAFETY: valid sigaction pointers; the handler is async-signal-safe.
            let set = unsafe {
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(sig, &action, &mut previous[i])
            };
            if let Err(e) = crate::check(set) {
                for (j, &restored) in SIGNALS[..i].iter().enumerate() {
                    // SAFETY: restoring a handler saved just above.
                    unsafe { libc::sigaction(restored, &previous[j], std::ptr::null_mut()) };
                }
                return Err(e);
            }
        }
        let signals = StopSignals { read_end, previous };
        // A signal of an earlier instance's time is no stop request of this one.
        signals.drain();
        Ok(signals)
    }

    /// The fd that becomes readable when a stop signal arrived.
    pub fn fd(&self) -> i32 {
        self.read_end
    }

    /// Consumes the pending notifications.
    pub fn drain(&self) {
        let mut buf = [0u8; 16];
        // SAFETY: reading into a valid buffer from our non-blocking pipe.
        while unsafe { libc::read(self.read_end, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY: restoring the handlers saved at install.
            unsafe { libc::sigaction(sig, &self.previous[i], std::ptr::null_mut()) };
        }
        INSTALLED.store(false, Ordering::Release);
    }
}

/// The process's stop flag, set by SIGINT and SIGTERM once [`stop_flag`] installed its
/// handlers.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn set_stop(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP.store(true, Ordering::Relaxed);
}

/// Installs SIGINT and SIGTERM handlers that set the returned flag, for a program that
/// looks at a flag between jobs rather than watching a descriptor (the CAN services).
/// Precondition: no [`StopSignals`] is installed in this process (they would replace
/// each other's handlers).
pub fn stop_flag() -> io::Result<&'static AtomicBool> {
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction with a handler that only stores an atomic
        // (async-signal-safe) and an empty mask; sigaction reads it during the call.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = set_stop as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut())
        };
        crate::check(rc)?;
    }
    Ok(&STOP)
}

/// Ends the process the way a program killed by SIGPIPE ends (a shell shows status
/// 141), without a message: for a write to standard output after its reader has gone
/// (`bulkhead analyze --json | head -1`), where `cat` would die of the signal. Rust
/// programs ignore SIGPIPE, so the signal's default action is restored and it is
/// raised unblocked; never returns.
pub fn die_of_sigpipe() -> ! {
    // SAFETY: restoring a signal's default action, unblocking it in this thread and
    // raising it have no preconditions; with the default action the kernel ends the
    // whole process at the raise.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(128 + libc::SIGPIPE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_instance_at_a_time_and_a_raised_signal_is_readable() {
        let signals = StopSignals::install().unwrap();
        let again = StopSignals::install().err().expect("a second instance");
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        // SAFETY: raise(2) delivers SIGTERM to this thread, whose handler is ours.
        assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
        let mut byte = [0u8; 1];
        // SAFETY: reading one byte into a valid buffer from the non-blocking pipe.
        let n = unsafe { libc::read(signals.fd(), byte.as_mut_ptr().cast(), 1) };
        assert_eq!((n, byte), (1, *b"s"));
        drop(signals);
        let next = StopSignals::install().unwrap();
        next.drain();
    }
}
