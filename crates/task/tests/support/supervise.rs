//! The test plays the supervisor's part of a stop: it asks a task process to suspend,
//! waits for the acknowledgement until the deadline, freezes the process (SIGSTOP), holds
//! it, shifts or resets the task's release epoch, publishes the resume and thaws it
//! (SIGCONT), in the order the supervisor does.
#![allow(dead_code)]

use bulkhead_task::clock::now_ns;
use bulkhead_task::control::{Control, Mapping};
use bulkhead_task::link::TaskLink;
use bulkhead_task::Resume;
use std::os::fd::BorrowedFd;
use std::process::Child;
use std::time::{Duration, Instant};

pub const MS: u64 = 1_000_000;

/// A task process, killed (even if stopped) when the test ends, passed or not.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    fn signal(&self, sig: i32) {
        // SAFETY: kill sends a signal to our own child, which we have not reaped.
        let r = unsafe { libc::kill(self.0.id() as i32, sig) };
        assert_eq!(r, 0, "kill({sig})");
    }
}

/// The supervisor's view of one task's stop-start words.
pub struct Stopper {
    ctl: Mapping,
    seq: u32,
    total_suspended_ns: u64,
    suspended_at: u64,
}

/// How a suspend went.
#[derive(Debug, Clone, Copy)]
pub struct Suspended {
    pub acked: bool,
    /// The acknowledgement deadline given with the request.
    pub deadline_ns: u64,
    /// CLOCK_MONOTONIC instant of the freeze.
    pub at_ns: u64,
}

impl Stopper {
    pub fn new(link: &TaskLink) -> Stopper {
        // SAFETY: the link's control descriptor stays open while the link lives, which
        // the test keeps for longer than this mapping (mmap keeps its own reference).
        let fd = unsafe { BorrowedFd::borrow_raw(link.fds()[0]) };
        Stopper {
            ctl: Mapping::map(fd).unwrap(),
            seq: 0,
            total_suspended_ns: 0,
            suspended_at: 0,
        }
    }

    pub fn control(&self) -> &Control {
        self.ctl.get()
    }

    /// Requests a suspend due in `ack_within`, waits for the acknowledgement at most
    /// that long, then freezes `task`, acknowledged or not.
    pub fn suspend(&mut self, task: &Proc, ack_within: Duration) -> Suspended {
        self.seq += 1;
        let deadline = now_ns() + ack_within.as_nanos() as u64;
        self.control().request_suspend(self.seq, deadline);
        let mut acked = false;
        while now_ns() < deadline {
            if self.control().suspend_acked(self.seq) {
                acked = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        task.signal(libc::SIGSTOP);
        self.suspended_at = now_ns();
        Suspended {
            acked,
            deadline_ns: deadline,
            at_ns: self.suspended_at,
        }
    }

    /// Stitches time and thaws `task`: a continuable task's epoch moves by the time
    /// suspended, a restartable task's goes to the resume instant; then the resume is
    /// published and the process continues. Returns the resume instant.
    pub fn resume(&mut self, link: &TaskLink, task: &Proc, mode: Resume) -> u64 {
        let resumed_at = now_ns();
        let suspended = resumed_at - self.suspended_at;
        self.total_suspended_ns += suspended;
        match mode {
            Resume::Continuable => link.set_epoch_ns(link.epoch_ns() + suspended),
            Resume::Restartable => link.set_epoch_ns(resumed_at),
        }
        self.control()
            .publish_resume(self.seq, self.total_suspended_ns, resumed_at);
        task.signal(libc::SIGCONT);
        resumed_at
    }

    pub fn total_suspended_ns(&self) -> u64 {
        self.total_suspended_ns
    }
}

/// Waits until `pred` holds (checking every millisecond), at most `within`.
pub fn wait_for(what: &str, within: Duration, mut pred: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !pred() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The value of the task's named counter `name` (0 if it has none yet).
pub fn counter(link: &TaskLink, name: &str) -> u64 {
    link.named_counters()
        .into_iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, v)| v)
}
