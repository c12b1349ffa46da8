//! Whether a channel's ends are attached by a live process, vouched for by the kernel
//! and independent of pid namespaces: each attached end holds a read lock on one byte
//! of the message file (its side's offset: [`Layout::writer_off`] or
//! [`Layout::reader_off`]), taken on an open file description of its own (`F_OFD_SETLK`
//! on the file reopened read-only through `/proc/self/fd`). The kernel releases the
//! lock when the last descriptor of that description is closed, so at the latest when
//! the process (and any child it forked without exec) has died, whatever pid
//! namespace each side runs in and whatever either side writes into shared memory.
//!
//! Pre- and postconditions:
//! - [`Hold::take`] succeeds only if no other open file description holds a lock on
//!   the end's byte, and then holds one until the [`Hold`] is dropped: two live
//!   endpoints of one end never coexist (both taking at once may both fail `Busy`,
//!   never both succeed, because each locks before it looks).
//! - [`Hold::peer_alive`] is false only once no open file description holds the
//!   peer's byte: a peer that is attached and alive is never reported dead. A process
//!   that holds the message file can keep an end looking alive (by locking its byte),
//!   which only the ends themselves (and the supervisor that created the channel)
//!   hold: it fools only itself or its own partition.
//!
//! The locks are advisory and touch no byte of the file: the message path (reads,
//! writes, futex waits) does not use them; a blocked call looks at its peer's lock
//! once per liveness slice.
//!
//! [`Layout::writer_off`]: crate::layout::Layout::writer_off
//! [`Layout::reader_off`]: crate::layout::Layout::reader_off

use crate::error::{Error, Result};
use rustix::fd::{AsRawFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};

/// An end's lock: an open file description of the message file of this endpoint
/// alone, holding a read lock on the end's byte.
#[derive(Debug)]
pub(crate) struct Hold {
    fd: OwnedFd,
}

impl Hold {
    /// Attaches this endpoint to the end whose byte is `mine` in the message file
    /// `data`; `owner` is the end's owner word (for the error only). Fails with
    /// [`Error::Busy`] when another endpoint holds the end.
    pub fn take(data: BorrowedFd<'_>, mine: u64, owner: u32) -> Result<Hold> {
        let path = format!("/proc/self/fd/{}", data.as_raw_fd());
        let fd = rustix::fs::open(
            path.as_str(),
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io("reopen channel for its liveness lock", e))?;
        let hold = Hold { fd };
        // Never refused: nobody takes a write lock.
        lock(hold.fd.as_raw_fd(), libc::F_OFD_SETLK, libc::F_RDLCK, mine)?;
        if held_by_others(hold.fd.as_raw_fd(), mine)? {
            return Err(Error::Busy(owner));
        }
        Ok(hold)
    }

    /// Whether an endpoint other than this one holds the byte `peer`.
    pub fn peer_alive(&self, peer: u64) -> bool {
        held_by_others(self.fd.as_raw_fd(), peer).unwrap_or(true)
    }
}

/// Whether an open file description other than `fd`'s holds a lock on `byte` of the
/// file (for stale-channel cleanup: `fd` holds none).
pub(crate) fn held(fd: BorrowedFd<'_>, byte: u64) -> bool {
    held_by_others(fd.as_raw_fd(), byte).unwrap_or(true)
}

/// `F_OFD_GETLK` for a write lock on `byte`: a lock of another open file description
/// conflicts with it; one of `fd`'s own does not.
fn held_by_others(fd: i32, byte: u64) -> Result<bool> {
    let l = lock(fd, libc::F_OFD_GETLK, libc::F_WRLCK, byte)?;
    Ok(l.l_type != libc::F_UNLCK as libc::c_short)
}

/// One `fcntl` record-lock command on the single byte `byte` of `fd`.
fn lock(fd: i32, cmd: libc::c_int, kind: libc::c_int, byte: u64) -> Result<libc::flock> {
    // SAFETY: an all-zero flock is valid (l_pid must be 0 for the OFD commands).
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = byte as libc::off_t;
    l.l_len = 1;
    // SAFETY: fcntl with a record-lock command and a pointer to a local flock, which
    // the kernel reads (and for GETLK writes) only during the call.
    let r = unsafe { libc::fcntl(fd, cmd, &mut l) };
    if r != 0 {
        return Err(Error::io(
            "fcntl channel liveness lock",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(l)
}
