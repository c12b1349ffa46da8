//! Stop-start for best-effort programs (docs/stop-start.md; JuMP2start: Golchin and
//! West, ECRTS 2024, Sec. 2.1-2.3): a program of a best-effort partition learns that
//! the system was asked to suspend and that it resumed, with the resume instant and the
//! total time suspended, and drops inputs stamped before the resume (the stale/fresh
//! rule the task library gives rt tasks).
//!
//! **The notice page.** The supervisor creates one memfd page per run ([`NoticeWriter`]),
//! maps it writable, then seals it (`F_SEAL_FUTURE_WRITE`, no resize): every best-effort
//! partition's programs get a descriptor of it as `BULKHEAD_STOP_START=fd:N` and can map
//! it read-only only. It carries nothing of any partition, only the system's stop-start
//! state, the same for all. Layout ([`Notice`], `repr(C)`): at a suspend request the
//! supervisor stores the acknowledgement deadline, then the request's number in
//! `suspend_seq` (Release) and wakes the futex waiters; at a resume, before it thaws the
//! best-effort partitions, it stores the total time suspended and the resume instant,
//! then the number in `resume_seq` (Release), and wakes them. The system is suspended
//! while `suspend_seq != resume_seq`.
//!
//! Best-effort programs are not waited for: they are frozen right after the notice (the
//! paper's Linux mission applications are frozen by the kernel's freezer, Sec. 2.1), so
//! a program usually sees the suspend and its resume together, after the thaw: an
//! [`Event::Resumed`] from [`StopStart::event`] or [`StopStart::wait_event`].

use crate::Error;
/// CLOCK_MONOTONIC now, ns.
pub use bulkhead_os::clock::now_ns as monotonic_ns;
use bulkhead_os::clock::realtime_to_monotonic;
use bulkhead_os::futex::{wait as futex_wait, wake_all as futex_wake_all};
use bulkhead_os::shm::{self, SharedMap};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::time::Duration;

/// The variable naming the notice page's descriptor (`fd:N`).
pub const NOTICE_VAR: &str = "BULKHEAD_STOP_START";
/// `b"BHSTOP01"` as a little-endian integer.
pub const NOTICE_MAGIC: u64 = u64::from_le_bytes(*b"BHSTOP01");
/// The layout's version.
pub const NOTICE_VERSION: u32 = 1;
/// Size of the page.
pub const NOTICE_LEN: usize = 4096;

/// The notice page. Written by the supervisor only.
#[repr(C)]
pub struct Notice {
    /// [`NOTICE_MAGIC`], stored (Release) once the rest is written.
    pub magic: AtomicU64,
    pub version: AtomicU32,
    _pad: u32,
    /// The latest suspend request, 0 = none (futex word).
    pub suspend_seq: AtomicU32,
    /// The latest request that was resumed (futex word).
    pub resume_seq: AtomicU32,
    /// CLOCK_MONOTONIC instant by which the latest request is to be acknowledged.
    pub suspend_deadline_ns: AtomicU64,
    /// Total time the system has spent suspended, ns.
    pub suspended_ns: AtomicU64,
    /// CLOCK_MONOTONIC instant of the latest resume.
    pub resumed_at_ns: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<Notice>() <= NOTICE_LEN);

/// A stop-start event as a program sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Suspend request `seq` is out: the program is about to be frozen.
    Suspending { seq: u32, deadline_ns: u64 },
    /// The system resumed at `resumed_at_ns` (CLOCK_MONOTONIC) after request `seq`;
    /// it has spent `suspended_ns` suspended in total since the run started.
    Resumed {
        seq: u32,
        resumed_at_ns: u64,
        suspended_ns: u64,
    },
}

/// A shared mapping of the page (read-only for programs, writable for the supervisor).
struct Map(SharedMap);

impl Map {
    /// Precondition (checked by the callers): the file is at least NOTICE_LEN long and
    /// sealed against shrinking.
    fn new(fd: BorrowedFd<'_>, writable: bool) -> std::io::Result<Map> {
        SharedMap::new(fd, NOTICE_LEN, writable).map(Map)
    }

    fn get(&self) -> &Notice {
        // SAFETY: the mapping is NOTICE_LEN >= size_of::<Notice>() bytes, page-aligned;
        // every field is an atomic, valid for any bit pattern.
        unsafe { &*self.0.as_ptr().cast::<Notice>() }
    }
}

/// The supervisor's side: creates, seals and writes the page.
pub struct NoticeWriter {
    fd: OwnedFd,
    map: Map,
}

impl NoticeWriter {
    /// A new page, initialized and sealed so that no one else can map it writable.
    pub fn create() -> std::io::Result<NoticeWriter> {
        let fd = shm::memfd(c"bulkhead-stop-start", NOTICE_LEN)?;
        let map = Map::new(fd.as_fd(), true)?;
        let n = map.get();
        n.version.store(NOTICE_VERSION, Relaxed);
        n.magic.store(NOTICE_MAGIC, Release);
        let seals = shm::SEAL_SHRINK | shm::SEAL_GROW | shm::SEAL_FUTURE_WRITE | shm::SEAL_SEAL;
        shm::add_seals(fd.as_fd(), seals)?;
        Ok(NoticeWriter { fd, map })
    }

    /// A new close-on-exec descriptor of the page opened read-only (reopened through
    /// `/proc/self/fd`), for a partition: neither it nor the seals let it write.
    pub fn read_only_fd(&self) -> std::io::Result<OwnedFd> {
        let path = format!("/proc/self/fd/{}", self.fd.as_raw_fd());
        let file = std::fs::OpenOptions::new().read(true).open(path)?;
        Ok(OwnedFd::from(file))
    }

    /// Publishes suspend request `seq`, to be acknowledged by `deadline_ns`, and wakes
    /// the programs waiting.
    pub fn suspend(&self, seq: u32, deadline_ns: u64) {
        let n = self.map.get();
        n.suspend_deadline_ns.store(deadline_ns, Relaxed);
        n.suspend_seq.store(seq, Release);
        futex_wake_all(&n.suspend_seq);
    }

    /// Publishes the resume of request `seq` at `resumed_at_ns` with the total time
    /// suspended, and wakes the programs waiting. Precondition (for the programs' view):
    /// called before their partitions are thawed.
    pub fn resume(&self, seq: u32, suspended_ns: u64, resumed_at_ns: u64) {
        let n = self.map.get();
        n.suspended_ns.store(suspended_ns, Relaxed);
        n.resumed_at_ns.store(resumed_at_ns, Relaxed);
        n.resume_seq.store(seq, Release);
        futex_wake_all(&n.resume_seq);
    }
}

/// A program's view of the notice page.
pub struct StopStart {
    map: Map,
    /// The latest suspend and resume this handle reported.
    seen_suspend: AtomicU32,
    seen_resume: AtomicU32,
    stale_dropped: AtomicU64,
}

impl StopStart {
    /// Maps the page named by `BULKHEAD_STOP_START` (`Error::NoStopStart` when the
    /// variable is not set: not under `bulkhead run`, or a windowed system, which has no
    /// stop-start; `Error::BadNotice` when it names no notice page).
    pub fn open() -> Result<StopStart, Error> {
        let text = std::env::var(NOTICE_VAR).map_err(|_| Error::NoStopStart)?;
        let fd = text
            .strip_prefix("fd:")
            .and_then(|n| n.parse::<i32>().ok())
            .filter(|&fd| fd >= 0)
            .ok_or(Error::BadNotice)?;
        // SAFETY: the descriptor named by the supervisor stays open for the process's
        // life; it is only borrowed for the checks and the mmap.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        StopStart::from_fd(fd)
    }

    /// Maps the page of descriptor `fd` read-only and checks it.
    pub fn from_fd(fd: BorrowedFd<'_>) -> Result<StopStart, Error> {
        let size = shm::size(fd).map_err(io_errno)?;
        if size < NOTICE_LEN as u64 {
            return Err(Error::BadNotice);
        }
        let map = Map::new(fd, false).map_err(io_errno)?;
        let n = map.get();
        if n.magic.load(Acquire) != NOTICE_MAGIC || n.version.load(Relaxed) != NOTICE_VERSION {
            return Err(Error::BadNotice);
        }
        let (seen_suspend, seen_resume) = (n.suspend_seq.load(Acquire), n.resume_seq.load(Acquire));
        Ok(StopStart {
            map,
            seen_suspend: AtomicU32::new(seen_suspend),
            seen_resume: AtomicU32::new(seen_resume),
            stale_dropped: AtomicU64::new(0),
        })
    }

    fn notice(&self) -> &Notice {
        self.map.get()
    }

    /// Whether a suspend request is outstanding (requested and not yet resumed).
    pub fn suspending(&self) -> bool {
        let n = self.notice();
        n.suspend_seq.load(Acquire) != n.resume_seq.load(Acquire)
    }

    /// How many times the system resumed (the latest resumed request's number).
    pub fn resumes(&self) -> u32 {
        self.notice().resume_seq.load(Acquire)
    }

    /// CLOCK_MONOTONIC instant of the latest resume (0: none yet). Data stamped before
    /// it is stale.
    pub fn resumed_at_ns(&self) -> u64 {
        self.notice().resumed_at_ns.load(Acquire)
    }

    /// Total time the system has spent suspended.
    pub fn suspended_ns(&self) -> u64 {
        self.notice().suspended_ns.load(Acquire)
    }

    /// bulkhead's system time now: CLOCK_MONOTONIC minus the time spent suspended
    /// (JuMP2start 2.3); it does not advance while the system is suspended.
    pub fn system_time_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.suspended_ns())
    }

    /// The next event this handle has not reported yet, if any: a resume (which covers
    /// its suspend) before an outstanding suspend request.
    /// Precondition for exact reports: one thread asks for events (a second one may
    /// miss an event the first took).
    pub fn event(&self) -> Option<Event> {
        let n = self.notice();
        // The resume's times go with its number: read again if a later resume was
        // published meanwhile (this program may be frozen between any two loads).
        let (resume_seq, resumed) = loop {
            let seq = n.resume_seq.load(Acquire);
            let resumed = Event::Resumed {
                seq,
                resumed_at_ns: n.resumed_at_ns.load(Relaxed),
                suspended_ns: n.suspended_ns.load(Relaxed),
            };
            std::sync::atomic::fence(Acquire);
            if n.resume_seq.load(Relaxed) == seq {
                break (seq, resumed);
            }
        };
        let suspend_seq = n.suspend_seq.load(Acquire);
        let suspending = Event::Suspending {
            seq: suspend_seq,
            deadline_ns: n.suspend_deadline_ns.load(Relaxed),
        };
        if self.seen_resume.swap(resume_seq, Relaxed) != resume_seq {
            if resume_seq == suspend_seq {
                self.seen_suspend.store(suspend_seq, Relaxed);
            }
            return Some(resumed);
        }
        if suspend_seq != resume_seq && self.seen_suspend.swap(suspend_seq, Relaxed) != suspend_seq
        {
            return Some(suspending);
        }
        None
    }

    /// Waits for the next event (as [`StopStart::event`]) at most `timeout` (`None`:
    /// forever); `None` when the time passed without one.
    pub fn wait_event(&self, timeout: Option<Duration>) -> Option<Event> {
        let deadline = timeout.map(|t| monotonic_ns().saturating_add(t.as_nanos() as u64));
        loop {
            // The word that changes next: the suspend number while running, else the
            // resume number; loaded before the check, so a change in between is not lost.
            let on_resume = self.suspending();
            let value = match on_resume {
                false => self.notice().suspend_seq.load(Acquire),
                true => self.notice().resume_seq.load(Acquire),
            };
            if let Some(e) = self.event() {
                return Some(e);
            }
            let left = match deadline {
                Some(d) => Some(d.checked_sub(monotonic_ns()).filter(|&l| l > 0)?),
                None => None,
            };
            let n = self.notice();
            let word = if on_resume {
                &n.resume_seq
            } else {
                &n.suspend_seq
            };
            futex_wait(word, value, left);
        }
    }

    /// The stale/fresh rule for an input stamped `stamp_ns` on CLOCK_MONOTONIC: false
    /// (stale, counted in [`StopStart::stale_dropped`]) when it was stamped before the
    /// latest resume; the program uses the input only if this returns true.
    pub fn fresh(&self, stamp_ns: u64) -> bool {
        if stamp_ns < self.resumed_at_ns() {
            self.stale_dropped.fetch_add(1, Relaxed);
            return false;
        }
        true
    }

    /// [`StopStart::fresh`] for a CAN frame from a gateway channel, whose stamp is the
    /// bus's reception time on CLOCK_REALTIME: the stamp is moved to CLOCK_MONOTONIC by
    /// the two clocks' offset now.
    pub fn fresh_can(&self, stamp_realtime_ns: u64) -> bool {
        self.fresh(realtime_to_monotonic(stamp_realtime_ns))
    }

    /// Inputs [`StopStart::fresh`] found stale so far.
    pub fn stale_dropped(&self) -> u64 {
        self.stale_dropped.load(Relaxed)
    }
}

fn io_errno(e: std::io::Error) -> Error {
    Error::Io(bulkhead_os::errno::of(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    #[test]
    fn a_program_sees_the_suspend_then_the_resume_and_drops_older_inputs() {
        let w = NoticeWriter::create().unwrap();
        let ro = w.read_only_fd().unwrap();
        let wrote = std::fs::File::from(ro.try_clone().unwrap()).write(&[1]);
        assert!(
            wrote.is_err(),
            "a partition's descriptor of the page cannot write"
        );
        let p = StopStart::from_fd(ro.as_fd()).unwrap();
        assert_eq!(p.event(), None);
        assert_eq!(p.resumed_at_ns(), 0);
        w.suspend(1, 5_000);
        assert!(p.suspending());
        assert_eq!(
            p.event(),
            Some(Event::Suspending {
                seq: 1,
                deadline_ns: 5_000
            })
        );
        assert_eq!(p.event(), None);
        let at = monotonic_ns();
        let event = std::thread::scope(|s| {
            let waiter = s.spawn(|| p.wait_event(Some(Duration::from_secs(20))));
            std::thread::sleep(Duration::from_millis(20));
            w.resume(1, 700, at);
            waiter.join().unwrap()
        });
        assert_eq!(
            event,
            Some(Event::Resumed {
                seq: 1,
                resumed_at_ns: at,
                suspended_ns: 700
            })
        );
        assert!(!p.suspending());
        assert!(!p.fresh(at - 1));
        assert!(p.fresh(at));
        assert_eq!(p.stale_dropped(), 1);
        assert_eq!(p.wait_event(Some(Duration::from_millis(5))), None);
    }

    #[test]
    fn a_suspend_and_resume_seen_together_are_one_resumed_event() {
        let w = NoticeWriter::create().unwrap();
        let ro = w.read_only_fd().unwrap();
        let p = StopStart::from_fd(ro.as_fd()).unwrap();
        w.suspend(1, 1);
        w.resume(1, 10, 20);
        w.suspend(2, 30);
        w.resume(2, 40, 50);
        assert_eq!(
            p.event(),
            Some(Event::Resumed {
                seq: 2,
                resumed_at_ns: 50,
                suspended_ns: 40
            })
        );
        assert_eq!(p.event(), None);
        assert_eq!(p.resumes(), 2);
    }

    #[test]
    fn the_page_cannot_be_mapped_writable_by_a_program() {
        let w = NoticeWriter::create().unwrap();
        let writable = SharedMap::new(w.fd.as_fd(), NOTICE_LEN, true);
        assert!(writable.is_err(), "the sealed page was mapped writable");
        let file = std::fs::File::from(w.fd.try_clone().unwrap());
        assert!(
            file.write_at(&[1], 8).is_err(),
            "the sealed page was written"
        );
    }
}
