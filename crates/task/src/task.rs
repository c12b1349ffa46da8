//! The task's side: attach, wait for each period, report completions.

use crate::clock::{now_ns, sleep_until};
use crate::control::{Mapping, ModeChange};
use crate::error::{Error, Result};
use crate::record::{flags, Record, RECORD_SIZE};
use crate::ENV;
use bulkhead_chan::{Channel, Sender};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::Ordering::{Acquire, Relaxed};

/// The task's parameters, as the supervisor configured them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub name: String,
    pub task_index: u32,
    /// Budget C, ns.
    pub budget_ns: u64,
    /// Period T, ns.
    pub period_ns: u64,
    /// Relative deadline D, ns.
    pub deadline_ns: u64,
}

/// One activation (job) of the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activation {
    /// k: the release is `epoch + k * period`.
    pub index: u64,
    /// Planned release time, CLOCK_MONOTONIC ns.
    pub release_ns: u64,
    /// Absolute deadline: release + D.
    pub deadline_ns: u64,
    /// [`flags`] bits.
    pub flags: u32,
    /// Releases skipped before this one (with [`flags::SKIPPED`]).
    pub skipped: u32,
}

/// One of the task's named counters (a slot of its control block), from
/// [`Task::counter`]. The supervisor reads them with
/// [`crate::supervisor::TaskLink::named_counters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter(usize);

impl Counter {
    /// The slot index (what the C API calls the counter).
    pub fn slot(self) -> usize {
        self.0
    }
}

/// The activation in progress.
#[derive(Clone, Copy)]
struct Current {
    act: Activation,
    start_ns: u64,
}

/// A task attached to its supervisor.
pub struct Task {
    ctl: Mapping,
    tx: Sender,
    params: Params,
    next: u64,
    current: Option<Current>,
    started: bool,
    pid: u32,
    /// Acknowledge mode requests as soon as they arrive ([`Task::ack_modes_at_once`]).
    ack_at_once: bool,
}

impl Task {
    /// Attaches to what the supervisor provides through [`ENV`] (`<control fd>,<trace fd>`).
    /// The descriptors are taken over (and closed with the task).
    pub fn attach() -> Result<Task> {
        let value = std::env::var(ENV).map_err(|_| {
            Error::NotAttached(format!(
                "{ENV} is not set: start the task with bulkhead run"
            ))
        })?;
        let (ctl, trace) = parse_env(&value)?;
        // SAFETY: the supervisor passed these descriptors to this process for the task
        // library alone; nothing else in the process owns them.
        let (ctl, trace) = unsafe { (OwnedFd::from_raw_fd(ctl), OwnedFd::from_raw_fd(trace)) };
        Task::from_fds(ctl, trace)
    }

    /// Attaches to a control block and a trace channel given as descriptors.
    pub fn from_fds(ctl: OwnedFd, trace: OwnedFd) -> Result<Task> {
        set_cloexec(&ctl)?;
        set_cloexec(&trace)?;
        let map = Mapping::open(std::os::fd::AsFd::as_fd(&ctl))?;
        let channel = Channel::from_fd(trace)?;
        if channel.meta().msg_size != RECORD_SIZE {
            return Err(Error::BadControl(format!(
                "trace ring carries {}-byte messages, want {RECORD_SIZE}",
                channel.meta().msg_size
            )));
        }
        let tx = channel.sender()?;
        let c = map.get();
        let params = Params {
            name: c.name(),
            task_index: c.task_index,
            budget_ns: c.budget_ns,
            period_ns: c.period_ns,
            deadline_ns: c.deadline_ns,
        };
        let pid = std::process::id();
        c.pid.store(pid, Relaxed);
        Ok(Task {
            ctl: map,
            tx,
            params,
            next: 0,
            current: None,
            started: false,
            pid,
            ack_at_once: false,
        })
    }

    /// The task's parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The named counter `name` (1 to 47 bytes), created at 0 on first use; a restarted
    /// process gets its predecessor's counter back, value included. At most
    /// [`crate::control::NAMED_COUNTERS`] names per task.
    pub fn counter(&mut self, name: &str) -> Result<Counter> {
        self.ctl.get().claim_counter(name).map(Counter)
    }

    /// The counter of slot `slot` if the task created one there (C handles).
    pub fn counter_at(&self, slot: i32) -> Option<Counter> {
        let n = self.ctl.get().named_count.load(Acquire) as usize;
        let slot = usize::try_from(slot).ok()?;
        (slot < n.min(crate::control::NAMED_COUNTERS)).then_some(Counter(slot))
    }

    /// Sets a named counter (a relaxed store in shared memory: no system call).
    pub fn set_counter(&self, counter: Counter, value: u64) {
        self.ctl.get().named[counter.0].value.store(value, Relaxed);
    }

    /// Adds `delta` to a named counter (wrapping).
    pub fn add_counter(&self, counter: Counter, delta: u64) {
        self.ctl.get().named[counter.0]
            .value
            .fetch_add(delta, Relaxed);
    }

    /// The current mode: its index in the description's mode table (`modes.table`),
    /// as of the latest request (acknowledged or not).
    pub fn current_mode(&self) -> u32 {
        self.ctl.get().mode_change().mode
    }

    /// Waits until the supervisor's mode agent asks this task to change mode, at most
    /// `timeout` (`None`: forever). Returns the request (acknowledge it with
    /// [`Task::ack_mode`] once the task has adapted), or `None` on timeout. A request
    /// already pending returns at once.
    pub fn wait_mode_change(&self, timeout: Option<std::time::Duration>) -> Option<ModeChange> {
        self.ctl.get().wait_mode(timeout)
    }

    /// The pending mode request, if any (never blocks).
    pub fn mode_change_pending(&self) -> Option<ModeChange> {
        self.wait_mode_change(Some(std::time::Duration::ZERO))
    }

    /// Tells the mode agent that the task runs in `change.mode` now.
    pub fn ack_mode(&self, change: ModeChange) {
        self.ctl.get().ack_mode(change)
    }

    /// For a program with nothing to adapt (the same code in every mode): from now on
    /// [`Task::wait_next_period`] acknowledges a mode request as soon as it arrives,
    /// while the task waits for its next release (woken through the futex of the mode
    /// words), and a request pending when it is called. A switch then waits for no job
    /// of the task; [`Task::current_mode`] still tells the mode.
    pub fn ack_modes_at_once(&mut self) {
        self.ack_at_once = true;
    }

    /// Sleeps until `release_ns` (CLOCK_MONOTONIC); with [`Task::ack_modes_at_once`],
    /// acknowledging each mode request that arrives meanwhile.
    fn sleep_until_release(&self, release_ns: u64) {
        if !self.ack_at_once {
            return sleep_until(release_ns);
        }
        let c = self.ctl.get();
        while let Some(change) = c.wait_mode_until(release_ns) {
            c.ack_mode(change);
        }
    }

    /// Whether the supervisor asked the task to stop.
    pub fn stop_requested(&self) -> bool {
        self.ctl.get().stop.load(Acquire) != 0
    }

    /// Completes the activation in progress (if any): its record goes to the trace ring.
    /// No system call: the end time comes from the vDSO and the ring write only wakes a
    /// sleeping reader, and the supervisor never sleeps on it.
    pub fn complete(&mut self) {
        let Some(cur) = self.current.take() else {
            return;
        };
        let rec = Record {
            index: cur.act.index,
            release_ns: cur.act.release_ns,
            start_ns: cur.start_ns,
            end_ns: now_ns(),
            flags: cur.act.flags,
            skipped: cur.act.skipped,
            pid: self.pid,
        };
        if self.tx.try_write(&rec.to_bytes()).is_err() {
            self.ctl.get().dropped.fetch_add(1, Relaxed);
        }
    }

    /// Completes the current activation, sleeps until the next release and returns it.
    ///
    /// Releases are `epoch + k * T`. If the next release has already passed, the new
    /// activation starts at once with [`flags::OVERRUN`]; if one or more whole periods
    /// passed too, their releases are skipped (counted in `skipped`, [`flags::SKIPPED`]),
    /// so the task works on the latest release instead of falling further behind.
    /// The first activation of a restarted process is the first release after it starts,
    /// with [`flags::RESTARTED`]. Returns [`Error::Stopped`] once the supervisor asks the
    /// task to stop.
    pub fn wait_next_period(&mut self) -> Result<Activation> {
        self.complete();
        if self.stop_requested() {
            return Err(Error::Stopped);
        }
        let c = self.ctl.get();
        let (epoch, period) = (c.epoch_ns.load(Acquire), self.params.period_ns);
        let mut act = Activation {
            index: self.next,
            release_ns: epoch + self.next * period,
            deadline_ns: 0,
            flags: 0,
            skipped: 0,
        };
        let now = now_ns();
        if !self.started && c.restarts.load(Acquire) > 0 {
            // A restarted process begins at the first release after now: the releases its
            // predecessor may have served are not run twice.
            act.flags |= flags::RESTARTED;
            act.index = now.saturating_sub(epoch) / period + 1;
            act.release_ns = epoch + act.index * period;
        }
        if self.ack_at_once {
            if let Some(change) = self.mode_change_pending() {
                self.ack_mode(change);
            }
        }
        if now < act.release_ns {
            self.sleep_until_release(act.release_ns);
        } else {
            let latest = (now - epoch) / period;
            if latest > act.index {
                act.skipped = (latest - act.index).min(u32::MAX as u64) as u32;
                act.flags |= flags::SKIPPED;
                act.index = latest;
                act.release_ns = epoch + latest * period;
            }
            if self.started {
                act.flags |= flags::OVERRUN;
            }
        }
        act.deadline_ns = act.release_ns + self.params.deadline_ns;
        self.current = Some(Current {
            act,
            start_ns: now_ns(),
        });
        self.next = act.index + 1;
        self.started = true;
        c.activations.fetch_add(1, Relaxed);
        if self.stop_requested() {
            return Err(Error::Stopped);
        }
        Ok(act)
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.complete();
    }
}

/// Parses `<control fd>,<trace fd>`.
fn parse_env(value: &str) -> Result<(i32, i32)> {
    let bad = || Error::NotAttached(format!("{ENV}={value:?}: want `<control fd>,<trace fd>`"));
    let (a, b) = value.split_once(',').ok_or_else(bad)?;
    let fd = |s: &str| {
        s.trim()
            .parse::<i32>()
            .ok()
            .filter(|&fd| fd > 2)
            .ok_or_else(bad)
    };
    let (ctl, trace) = (fd(a)?, fd(b)?);
    if ctl == trace {
        return Err(bad());
    }
    for fd in [ctl, trace] {
        // SAFETY: F_GETFD only inspects the descriptor table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(Error::NotAttached(format!(
                "{ENV}: descriptor {fd} is not open"
            )));
        }
    }
    Ok((ctl, trace))
}

/// Keeps the descriptor from leaking into programs the task executes.
fn set_cloexec(fd: &OwnedFd) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: F_SETFD on a descriptor we own.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        return Err(Error::last_os("fcntl(F_SETFD)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_must_name_two_open_descriptors() {
        assert!(parse_env("3").is_err());
        assert!(parse_env("a,b").is_err());
        assert!(parse_env("5,5").is_err());
        assert!(parse_env("0,1").is_err());
        let e = parse_env("900,901").unwrap_err().to_string();
        assert!(e.contains("not open"), "{e}");
    }
}
