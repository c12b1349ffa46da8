//! The thread that clones every launched child ([`crate::launch`]), from a descriptor
//! table of its own that holds only what the child is handed.
//!
//! A child cloned without `CLONE_FILES` gets a copy of its parent thread's descriptor
//! table, and its exit closes every copied descriptor (`put_files_struct` →
//! `filp_close`). The supervisor holds a few descriptors per partition, and a held
//! child (frozen before it execs) keeps its copy until it dies: a teardown of N
//! partitions closed about N²/2 descriptors (docs/runtime.md, *Teardown, fourth
//! pass*). So no child is cloned from the supervisor's table: the spawner thread left
//! the process's table at its start (`unshare(CLONE_FILES)`) and emptied its own; for
//! each launch it copies into it exactly the descriptors the child reads
//! (`pidfd_getfd` on the supervisor itself, Linux 5.6), clones, and closes them again.
//! A child's table is then a handful of descriptors, whatever the supervisor holds.
//!
//! The spawner's table outside a launch (the invariant every launch starts from and
//! restores): 0..=3 are `/dev/null`, so that no copied descriptor lands on a number the
//! child moves one of its own to (its standard streams and
//! [`crate::launch::CHANNEL_FD`]); nothing else is open. A launch replaces those of
//! 0..=2 the child inherits with the supervisor's streams as they are then. Only the spawner thread touches its table: the other threads
//! of the supervisor open and close in theirs, which the spawner never sees but through
//! `pidfd_getfd`, and the caller of [`on_own_table`] keeps the descriptors it names open
//! until the call returns (it blocks meanwhile). Every signal is blocked in the spawner
//! thread, so that no handler ever runs there against the wrong table. The spawner never
//! exits: a child asking to die with its parent (`PR_SET_PDEATHSIG`, which follows the
//! thread that cloned it) dies with the process. A process forked from the supervisor
//! without exec has no spawner thread (only the memory of its queue): it starts its
//! own at its first launch instead of waiting for one that is not there.

use std::io;
use std::os::fd::RawFd;
use std::sync::mpsc::{self, Sender, SyncSender};
use std::sync::Mutex;

/// The lowest number a descriptor copied into the spawner's table gets: the numbers
/// below are the child's standard streams and its channel.
const FIRST_COPY: RawFd = 4;

/// A job run on the spawner thread while its caller waits ([`on_own_table`]); the
/// lifetime of what it borrows is erased, which the wait makes sound.
struct Job(*mut (dyn FnMut() + 'static));

// SAFETY: the job runs on the spawner thread while the thread that sent it blocks until
// it is done: what it borrows is used by one thread at a time.
unsafe impl Send for Job {}

type Queue = Sender<(Job, SyncSender<()>)>;

/// The spawner of this process: the pid it was started in, and its queue. A process
/// forked from that one (without exec) has the queue's memory but not the thread, and
/// starts a spawner of its own at its first launch.
static SPAWNER: Mutex<Option<(u32, Queue)>> = Mutex::new(None);

/// The spawner's table during one launch: copies of the supervisor's descriptors.
pub(crate) struct Table {
    /// A pidfd of this process (the supervisor's table, for `pidfd_getfd`), or -1 once
    /// [`Table::seal`]ed.
    pidfd: RawFd,
    /// Which of 0..=3 (bit n for n) hold something else than `/dev/null`.
    taken: u8,
}

/// Runs `job` on the spawner thread with its [`Table`], then restores the table (every
/// copy closed): `job` copies what its child is handed ([`Table::copy`],
/// [`Table::copy_at`], [`Table::stream`]), calls [`Table::seal`] and clones.
/// Precondition: every descriptor `job` copies stays open in the supervisor until this
/// returns.
pub(crate) fn on_own_table<R>(job: impl FnOnce(&mut Table) -> io::Result<R>) -> io::Result<R> {
    let mut job = Some(job);
    let mut result = None;
    let mut run = || {
        let job = job.take().expect("a job runs once");
        result = Some(Table::open().and_then(|mut table| {
            let r = job(&mut table);
            table.restore();
            r
        }));
    };
    let run: &mut dyn FnMut() = &mut run;
    // SAFETY: erases the lifetime of `run`, which outlives its use: this thread blocks
    // below until the spawner has run it (or has died, and then it never runs again).
    let run: &'static mut dyn FnMut() = unsafe { std::mem::transmute(run) };
    let (done, finished) = mpsc::sync_channel(1);
    send(Job(run), done)?;
    if finished.recv().is_err() {
        return Err(gone());
    }
    result.unwrap_or_else(|| Err(io::Error::other("the spawner thread failed")))
}

/// Queues `job` for this process's spawner, started first if it has none.
fn send(job: Job, done: SyncSender<()>) -> io::Result<()> {
    let mut spawner = SPAWNER.lock().unwrap_or_else(|e| e.into_inner());
    let me = std::process::id();
    if spawner.as_ref().is_none_or(|(pid, _)| *pid != me) {
        *spawner = Some((me, start().map_err(io::Error::other)?));
    }
    let (_, queue) = spawner.as_ref().expect("started above");
    queue.send((job, done)).map_err(|_| gone())
}

fn gone() -> io::Error {
    io::Error::other("the spawner thread is gone")
}

/// Starts the spawner thread: its own table, emptied to the invariant, every signal
/// blocked; an error if it cannot have them.
fn start() -> Result<Queue, String> {
    let (queue, jobs) = mpsc::channel::<(Job, SyncSender<()>)>();
    let (ready, setup) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .spawn(move || {
            let own = own_table();
            let failed = own.is_err();
            let _ = ready.send(own);
            if failed {
                return;
            }
            for (Job(run), done) in jobs {
                // SAFETY: `run` is alive until `done` is sent or dropped (see Job).
                let _ =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { (*run)() }));
                let _ = done.send(());
            }
        })
        .map_err(|e| format!("cannot start the spawner thread: {e}"))?;
    match setup.recv() {
        Ok(Ok(())) => Ok(queue),
        Ok(Err(e)) => Err(format!("the spawner thread has no table of its own: {e}")),
        Err(_) => Err("the spawner thread died at its start".to_string()),
    }
}

/// In the new spawner thread: blocks every signal, leaves the process's table for a
/// copy of it, closes every descriptor of that copy and opens `/dev/null` as 0..=3.
fn own_table() -> io::Result<()> {
    // SAFETY: sigfillset on a local set, then this thread's own mask; unshare(2)
    // gives this thread a copy of the table: the close_range after it closes copies
    // only, never a descriptor of the supervisor's.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
        crate::check(libc::unshare(libc::CLONE_FILES))?;
        crate::check(libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) as i32)?;
    }
    (0..FIRST_COPY).try_for_each(put_null_at)
}

/// Opens `/dev/null` as descriptor `fd` of the spawner's table (close-on-exec).
fn put_null_at(fd: RawFd) -> io::Result<()> {
    // SAFETY: open of a static NUL-terminated path; dup3 and close on descriptors of
    // this (the spawner's) table.
    unsafe {
        let null = crate::check(libc::open(
            c"/dev/null".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        ))?;
        if null != fd {
            let placed = libc::dup3(null, fd, libc::O_CLOEXEC);
            libc::close(null);
            crate::check(placed)?;
        }
    }
    Ok(())
}

impl Table {
    fn open() -> io::Result<Table> {
        // SAFETY: pidfd_open of this process touches no memory.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
        let pidfd = above_streams(crate::check(pidfd as i32)?)?;
        Ok(Table { pidfd, taken: 0 })
    }

    /// A copy of the supervisor's descriptor `fd` here, numbered [`FIRST_COPY`] or above,
    /// close-on-exec.
    pub(crate) fn copy(&self, fd: RawFd) -> io::Result<RawFd> {
        // SAFETY: pidfd_getfd takes two descriptors and flags, and touches no memory.
        let copy = unsafe { libc::syscall(libc::SYS_pidfd_getfd, self.pidfd, fd, 0) };
        above_streams(crate::check(copy as i32)?)
    }

    /// A copy of the supervisor's descriptor `fd` here at the same number (a descriptor
    /// the child keeps at its number), close-on-exec. Copy these before any other: a
    /// copy of another may take the number.
    pub(crate) fn copy_at(&mut self, fd: RawFd) -> io::Result<()> {
        if fd == self.pidfd {
            // The pidfd sits where the copy goes: move it first, or the copy replaces it.
            // SAFETY: fcntl F_DUPFD_CLOEXEC on this table's pidfd; `fd` stays open (the
            // old pidfd) until dup3 below replaces it, so the duplicate lands elsewhere.
            self.pidfd = crate::check(unsafe {
                libc::fcntl(self.pidfd, libc::F_DUPFD_CLOEXEC, FIRST_COPY)
            })?;
        }
        let copy = self.copy(fd)?;
        if copy != fd {
            // SAFETY: dup3 and close on descriptors of this table.
            let placed = unsafe { libc::dup3(copy, fd, libc::O_CLOEXEC) };
            // SAFETY: as above.
            unsafe { libc::close(copy) };
            crate::check(placed)?;
        }
        self.take(fd);
        Ok(())
    }

    /// Standard stream `fd` (0..=2) as the supervisor has it now, inherited across exec;
    /// closed here if the supervisor has none.
    pub(crate) fn stream(&mut self, fd: RawFd) -> io::Result<()> {
        self.take(fd);
        match self.copy(fd) {
            // SAFETY: dup3 (no close-on-exec: a stream is inherited) and close on
            // descriptors of this table.
            Ok(copy) => unsafe {
                let placed = libc::dup3(copy, fd, 0);
                libc::close(copy);
                crate::check(placed).map(drop)
            },
            Err(e) if e.raw_os_error() == Some(libc::EBADF) => {
                // SAFETY: closes a standard stream of this table.
                unsafe { libc::close(fd) };
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn take(&mut self, fd: RawFd) {
        if fd < FIRST_COPY {
            self.taken |= 1 << fd;
        }
    }

    /// Closes the pidfd: what the table holds now is what the next child gets.
    pub(crate) fn seal(&mut self) {
        if self.pidfd >= 0 {
            // SAFETY: closes this table's pidfd.
            unsafe { libc::close(self.pidfd) };
            self.pidfd = -1;
        }
    }

    /// Back to the invariant: every copy closed, `/dev/null` as 0..=3.
    fn restore(mut self) {
        self.seal();
        // SAFETY: close_range on this (the spawner's) table only.
        unsafe { libc::syscall(libc::SYS_close_range, FIRST_COPY as u32, u32::MAX, 0u32) };
        for fd in (0..FIRST_COPY).filter(|fd| self.taken & (1 << fd) != 0) {
            // Fails only for want of memory; then a copy may land on `fd` and is moved
            // above by `above_streams`, and the child gets nothing there instead.
            let _ = put_null_at(fd);
        }
    }
}

/// `fd` itself if numbered [`FIRST_COPY`] or above, else a close-on-exec duplicate that
/// is (and `fd` closed).
fn above_streams(fd: RawFd) -> io::Result<RawFd> {
    if fd >= FIRST_COPY {
        return Ok(fd);
    }
    // SAFETY: fcntl F_DUPFD_CLOEXEC and close on a descriptor of this table.
    unsafe {
        let moved = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, FIRST_COPY);
        libc::close(fd);
        crate::check(moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// The inode of descriptor `fd` of the calling thread's table.
    fn inode(fd: RawFd) -> u64 {
        // SAFETY: an all-zero stat is a valid value; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat with a valid stat pointer.
        crate::check(unsafe { libc::fstat(fd, &mut st) }).expect("open");
        st.st_ino
    }

    /// A descriptor the child keeps at the number where the table's pidfd happens to
    /// be (an rt task's channel at 4, the first number a pidfd gets) is copied there,
    /// and the pidfd still copies what comes after it.
    #[test]
    fn a_descriptor_kept_at_the_pidfds_number_leaves_the_pidfd_working() {
        const AT: RawFd = 900;
        let (kept, other) = std::io::pipe().unwrap();
        // SAFETY: dup2 of our pipe's end to a number this test owns, closed below.
        crate::check(unsafe { libc::dup2(kept.as_raw_fd(), AT) }).unwrap();
        let inodes = (inode(AT), inode(other.as_raw_fd()));
        let other_fd = other.as_raw_fd();
        let seen = on_own_table(|t| {
            // SAFETY: fcntl and close on this table's pidfd: it moves to AT.
            t.pidfd = unsafe {
                let moved = libc::fcntl(t.pidfd, libc::F_DUPFD_CLOEXEC, AT);
                libc::close(t.pidfd);
                moved
            };
            assert_eq!(t.pidfd, AT, "the pidfd sits where the kept descriptor goes");
            t.copy_at(AT)?;
            let copy = t.copy(other_fd)?;
            Ok((inode(AT), inode(copy)))
        });
        // SAFETY: closes the number dup2'd above.
        unsafe { libc::close(AT) };
        assert_eq!(seen.unwrap(), inodes);
    }
}
