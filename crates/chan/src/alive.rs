//! Whether a channel's ends are attached by a live process, vouched for by the kernel
//! and independent of pids and pid namespaces: each attached end holds a read lock
//! (`F_OFD_SETLK`) on one byte of a *lock file*, taken on an open file description of
//! its own (the file reopened read-only through `/proc/self/fd`). The kernel releases
//! the lock when the last descriptor of that description is closed, so at the latest
//! when the process (and any child it forked without exec) has died, by SIGKILL or
//! otherwise, whatever pid namespace each side runs in. A recycled pid cannot inherit
//! the lock: it belongs to a file description, not to a number.
//!
//! Which lock file ([`Lock`]):
//! - A channel handed over by a supervisor ([`crate::Channel::handover`]) has one lock
//!   file per end, apart from the message file. The end's processes get it read-only
//!   and the supervisor makes it theirs alone (mode 0400, owned by the end's user,
//!   [`crate::Channel::own_end`]); the peer gets it with neither read nor write access
//!   (open mode 3), which lets it test the lock (`F_OFD_GETLK`) but not take one
//!   (`EBADF`), nor reopen the file for reading (`EACCES`). So a peer under another
//!   user can neither make a dead end look alive nor, by holding a lock on the end's
//!   byte, keep the end from attaching ([`crate::OpenError::Busy`]).
//! - Any other channel locks its ends' bytes of the message file
//!   ([`Layout::writer_off`], [`Layout::reader_off`]). Both ends can read that file, so
//!   each end could fake or block the other's lock: such channels are for processes
//!   that trust each other.
//!
//! Pre- and postconditions:
//! - [`Hold::take`] succeeds only if no other open file description holds a lock on
//!   the end's byte, and then holds one until the [`Hold`] is dropped: two live
//!   endpoints of one end never coexist (both taking at once may both fail `Busy`,
//!   never both succeed, because each locks before it looks).
//! - [`Hold::peer_alive`] is false only once no open file description holds the
//!   peer's byte: a peer that is attached and alive is never reported dead.
//!
//! The locks are advisory and touch no byte of any file: the message path (reads,
//! writes, futex waits) does not use them; a blocked call looks at its peer's lock
//! once per liveness slice.
//!
//! [`Layout::writer_off`]: crate::layout::Layout::writer_off
//! [`Layout::reader_off`]: crate::layout::Layout::reader_off

use crate::error::{OpenError, Result};
use bulkhead_os::lock::{locked_by_others, try_lock_byte, Kind};
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};

/// Where an end's lock lies: one byte of a file.
#[derive(Clone, Copy)]
pub(crate) struct Lock<'a> {
    pub file: BorrowedFd<'a>,
    pub byte: u64,
}

/// An end's lock: an open file description of its lock file of this endpoint alone,
/// holding a read lock on the end's byte; and a descriptor through which to test the
/// peer's lock.
#[derive(Debug)]
pub(crate) struct Hold {
    fd: OwnedFd,
    peer: OwnedFd,
    peer_byte: u64,
}

impl Hold {
    /// Attaches this endpoint to the end whose lock is `mine`; `peer` is the peer's
    /// lock and `owner` the end's owner word (for the error only). Fails with
    /// [`OpenError::Busy`] when another endpoint holds the end.
    pub fn take(mine: Lock<'_>, peer: Lock<'_>, owner: u32) -> Result<Hold, OpenError> {
        let path = format!("/proc/self/fd/{}", mine.file.as_raw_fd());
        let fd = rustix::fs::open(
            path.as_str(),
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| OpenError::io("reopen channel for its liveness lock", e))?;
        let peer_fd = rustix::io::fcntl_dupfd_cloexec(peer.file, 0)
            .map_err(|e| OpenError::io("dup channel liveness lock", e))?;
        let hold = Hold {
            fd,
            peer: peer_fd,
            peer_byte: peer.byte,
        };
        // Refused only by a write lock, which no endpoint takes.
        if !try_lock_byte(hold.fd.as_fd(), mine.byte, Kind::Read).map_err(lock_error)? {
            return Err(OpenError::Busy(owner));
        }
        if held_by_others(hold.fd.as_fd(), mine.byte)? {
            return Err(OpenError::Busy(owner));
        }
        Ok(hold)
    }

    /// Whether an endpoint other than this one holds the peer's byte.
    pub fn peer_alive(&self) -> bool {
        held_by_others(self.peer.as_fd(), self.peer_byte).unwrap_or(true)
    }
}

/// Whether an open file description other than `fd`'s holds a lock on `byte` of the
/// file (for stale-channel cleanup: `fd` holds none).
pub(crate) fn held(fd: BorrowedFd<'_>, byte: u64) -> bool {
    held_by_others(fd, byte).unwrap_or(true)
}

/// Whether another open file description than `fd`'s holds a lock on `byte`. Needs no
/// access to the file.
fn held_by_others(fd: BorrowedFd<'_>, byte: u64) -> Result<bool, OpenError> {
    locked_by_others(fd, byte).map_err(lock_error)
}

fn lock_error(e: std::io::Error) -> OpenError {
    OpenError::io("fcntl channel liveness lock", e)
}
