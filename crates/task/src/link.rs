//! The supervisor's side: create a task's control block and trace ring, hand them to the
//! task's process, drain its records.

use crate::control::{Mapping, Timing, CONTROL_LEN, MAGIC, NAME_LEN, VERSION};
use crate::error::{Error, Result};
use crate::record::{Record, RECORD_SIZE};
use crate::ENV;
use bulkhead_chan::{Channel, Receiver, Spec};
use bulkhead_os::event::Wakeup;
use bulkhead_os::shm;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// What the supervisor knows about a task when it creates its link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSpec {
    pub name: String,
    pub task_index: u32,
    pub budget_ns: u64,
    pub period_ns: u64,
    pub deadline_ns: u64,
    /// CLOCK_MONOTONIC time of release 0.
    pub epoch_ns: u64,
    /// Trace ring capacity in records: the supervisor must drain at least this often
    /// (in activations) or records are dropped (and counted).
    pub ring_depth: u32,
}

/// The task's counters, as it reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub pid: u32,
    pub activations: u64,
    pub dropped: u64,
    pub restarts: u32,
}

/// A task's control block and trace ring, owned by the supervisor.
pub struct TaskLink {
    spec: LinkSpec,
    ctl_fd: OwnedFd,
    ctl: Mapping,
    trace: Channel,
    rx: Receiver,
    /// The eventfd the task's library notifies when it reports a late job (a deadline
    /// miss, skipped releases, a job over its budget), so that the supervisor drains
    /// the ring at once. The task can only wake the supervisor's drain through it.
    wake: Wakeup,
}

impl TaskLink {
    /// Creates the control block (a sealed memfd) and the trace ring (a `bulkhead-chan`
    /// fifo of [`Record`]s).
    pub fn create(spec: &LinkSpec) -> Result<TaskLink> {
        check(spec)?;
        let ctl_fd = memfd(&format!("bulkhead-task-{}", spec.name))?;
        let mut ctl = Mapping::map(ctl_fd.as_fd())?;
        // SAFETY: the memfd was just created; no other process can have mapped it.
        let c = unsafe { ctl.get_mut() };
        c.version = VERSION;
        c.task_index = spec.task_index;
        c.budget_ns.store(spec.budget_ns, Relaxed);
        c.period_ns.store(spec.period_ns, Relaxed);
        c.deadline_ns.store(spec.deadline_ns, Relaxed);
        c.epoch_ns.store(spec.epoch_ns, Relaxed);
        let n = spec.name.len().min(NAME_LEN);
        c.name[..n].copy_from_slice(&spec.name.as_bytes()[..n]);
        c.magic.store(MAGIC, Release);
        let (trace, rx) = ring(spec)?;
        let wake = Wakeup::new().map_err(|e| Error::io("eventfd", e))?;
        Ok(TaskLink {
            spec: spec.clone(),
            ctl_fd,
            ctl,
            trace,
            rx,
            wake,
        })
    }

    /// The three descriptors the task's process must inherit (control, trace, wake).
    /// They are close-on-exec in the supervisor; [`TaskLink::prepare`] clears that in
    /// the child.
    pub fn fds(&self) -> [RawFd; 3] {
        [
            self.ctl_fd.as_raw_fd(),
            self.trace.as_fd().as_raw_fd(),
            self.wake.fd(),
        ]
    }

    /// The environment entry that names them: ([`ENV`], `"<control>,<trace>,<wake>"`).
    pub fn env(&self) -> (&'static str, String) {
        let [c, t, w] = self.fds();
        (ENV, format!("{c},{t},{w}"))
    }

    /// The descriptor that becomes readable when the task reports a late job; the same
    /// across restarts.
    pub fn wake_fd(&self) -> RawFd {
        self.wake.fd()
    }

    /// Consumes the task's wake notifications.
    pub fn clear_wake(&self) {
        self.wake.clear();
    }

    /// Sets up `cmd` to start the task: the environment entry, and a `pre_exec` step that
    /// lets exactly the three descriptors survive `exec` (async-signal-safe: fcntl calls).
    pub fn prepare(&self, cmd: &mut Command) {
        let (key, value) = self.env();
        cmd.env(key, value);
        let fds = self.fds();
        // SAFETY: the closure only calls fcntl on descriptors that are open in the child
        // (inherited from the supervisor), which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || inherit(&fds));
        }
    }

    /// Moves every record waiting in the ring into `out`; returns how many.
    pub fn drain(&mut self, out: &mut Vec<Record>) -> usize {
        let mut buf = [0u8; RECORD_SIZE as usize];
        let mut n = 0;
        while self.rx.try_read(&mut buf).is_ok() {
            out.push(Record::from_bytes(&buf));
            n += 1;
        }
        n
    }

    /// What the task reported through its counters.
    pub fn counters(&self) -> Counters {
        let c = self.ctl.get();
        Counters {
            pid: c.pid.load(Relaxed),
            activations: c.activations.load(Relaxed),
            dropped: c.dropped.load(Relaxed),
            restarts: c.restarts.load(Relaxed),
        }
    }

    /// Moves the message events the task reported ([`crate::Task::message_done`]) into
    /// `out` as (id, origin, done); returns how many.
    pub fn take_messages(&self, out: &mut Vec<crate::control::Message>) -> usize {
        self.ctl.get().take_messages(out)
    }

    /// Message events the task dropped because the ring was full.
    pub fn messages_dropped(&self) -> u64 {
        self.ctl.get().msg_dropped.load(Relaxed)
    }

    /// The task's named counters as (name, value), in the order the task created them
    /// (see [`crate::control`] for how they are published).
    pub fn named_counters(&self) -> Vec<(String, u64)> {
        self.ctl.get().named_counters()
    }

    /// The parameters the link was created with (the epoch as created).
    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    /// The current release epoch.
    pub fn epoch_ns(&self) -> u64 {
        self.ctl.get().epoch_ns.load(Acquire)
    }

    /// Moves the release grid: later activations are released at `epoch + k * T`.
    pub fn set_epoch_ns(&self, epoch_ns: u64) {
        self.ctl.get().epoch_ns.store(epoch_ns, Release);
    }

    /// Sets the task's release offset O: its releases are `epoch + O + k * T` (phased
    /// releases, [`crate::control`]). Precondition: the task's process has not started
    /// (the task library reads the offset at every release and expects it fixed).
    pub fn set_release_offset_ns(&self, offset_ns: u64) {
        self.ctl.get().offset_ns.store(offset_ns, Relaxed);
    }

    /// The task's release offset O.
    pub fn release_offset_ns(&self) -> u64 {
        self.ctl.get().offset_ns.load(Relaxed)
    }

    /// The task's current timing (a mode agent may change it, [`ModePort::set_timing`]).
    pub fn timing(&self) -> Timing {
        self.ctl.get().timing()
    }

    /// Asks the task to adapt to mode `mode` (its index in the mode table) and wakes it
    /// if it waits for a mode change; returns the request's sequence number.
    pub fn request_mode(&self, mode: u32) -> u32 {
        self.ctl.get().request_mode(mode)
    }

    /// Whether the task acknowledged the mode request `seq` (or a later one).
    pub fn mode_acked(&self, seq: u32) -> bool {
        let acked = self.ctl.get().mode_ack.load(Acquire);
        acked.wrapping_sub(seq) as i32 >= 0
    }

    /// A second mapping of the control block that carries mode requests only, for a
    /// mode agent running on another thread than the one that owns this link.
    pub fn mode_port(&self) -> Result<ModePort> {
        Ok(ModePort {
            ctl: Mapping::map(self.ctl_fd.as_fd())?,
        })
    }

    /// A second mapping of the control block that carries the stop-start words, for the
    /// supervisor's stop-start worker (another thread than the one that owns this link).
    pub fn stop_start_port(&self) -> Result<StopStartPort> {
        Ok(StopStartPort {
            ctl: Mapping::map(self.ctl_fd.as_fd())?,
        })
    }

    /// Asks the task to stop: its next `wait_next_period` returns `Stopped`. Opens the
    /// start gate, so a task still held there sees the request.
    pub fn request_stop(&self) {
        let c = self.ctl.get();
        c.stop.store(1, Release);
        c.release();
        // The release sleep and input waits on the request word (`Wake`) hear it at once.
        bulkhead_os::futex::wake_all(&c.suspend_seq);
    }

    /// Closes the start gate (see [`crate::control`]): the task's process, once started,
    /// runs no activation until [`ModePort::release`]. Precondition: the process is not
    /// started yet (the gate closes only once, before the task's first activation).
    pub fn hold(&self) {
        self.ctl.get().held.store(1, Release);
    }

    /// Opens the start gate closed by [`TaskLink::hold`] and wakes a task waiting at it
    /// (the supervisor's start of a task in the initial mode, once the epoch is fixed).
    pub fn release(&self) {
        self.ctl.get().release();
    }

    /// Whether a process has attached to the control block (the task library stores its
    /// pid there in [`crate::Task::attach`], after the program's own set-up before it).
    pub fn attached(&self) -> bool {
        self.ctl.get().pid.load(Acquire) != 0
    }

    /// Prepares the link for a new process of the same task after the old one died: drains
    /// the old ring into `out`, creates a fresh ring (the old writer closed it), counts the
    /// restart (the new process's first activation carries `RESTARTED`) and clears a stop
    /// request. Pass [`TaskLink::fds`] anew to the new process.
    pub fn restart(&mut self, out: &mut Vec<Record>) -> Result<()> {
        self.drain(out);
        let (trace, rx) = ring(&self.spec)?;
        self.rx = rx;
        self.trace = trace;
        let c = self.ctl.get();
        c.restarts.fetch_add(1, Release);
        c.stop.store(0, Release);
        Ok(())
    }
}

fn check(spec: &LinkSpec) -> Result<()> {
    if spec.period_ns == 0 || spec.deadline_ns == 0 || spec.budget_ns > spec.period_ns {
        return Err(Error::Invalid(format!(
            "task `{}`: needs period > 0, deadline > 0 and budget <= period (C {} ns, T {} ns, D {} ns)",
            spec.name, spec.budget_ns, spec.period_ns, spec.deadline_ns
        )));
    }
    if spec.ring_depth == 0 {
        return Err(Error::Invalid(format!(
            "task `{}`: trace ring depth must be > 0",
            spec.name
        )));
    }
    Ok(())
}

fn ring(spec: &LinkSpec) -> Result<(Channel, Receiver)> {
    let name = format!("task-{}", spec.task_index);
    let trace = Channel::create(&Spec::fifo(&name, RECORD_SIZE, spec.ring_depth))?;
    let rx = trace.receiver()?;
    Ok((trace, rx))
}

/// A close-on-exec memfd of [`CONTROL_LEN`] bytes, sealed against resizing.
fn memfd(name: &str) -> Result<OwnedFd> {
    let cname = CString::new(name.replace('\0', "_")).expect("no NUL");
    let fd = shm::memfd(&cname, CONTROL_LEN).map_err(|e| Error::io("memfd_create", e))?;
    shm::add_seals(
        fd.as_fd(),
        shm::SEAL_SHRINK | shm::SEAL_GROW | shm::SEAL_SEAL,
    )
    .map_err(|e| Error::io("sealing control block", e))?;
    Ok(fd)
}

/// In a forked child: clears close-on-exec on `fds` so they reach the task program.
fn inherit(fds: &[RawFd; 3]) -> std::io::Result<()> {
    for &fd in fds {
        bulkhead_os::fd::set_cloexec(fd, false)?;
    }
    Ok(())
}

/// The mode words of one task's control block ([`TaskLink::mode_port`]): what a mode
/// agent uses to tell a program the new mode and to see its acknowledgement.
pub struct ModePort {
    ctl: Mapping,
}

impl ModePort {
    /// Publishes `mode` as the current one without a request (the initial mode, at
    /// start): [`crate::Task::current_mode`] returns it, nothing is to acknowledge.
    pub fn set_mode(&self, mode: u32) {
        self.ctl.get().mode.store(mode, Release);
    }

    /// Opens the start gate of a task created held ([`TaskLink::hold`]): its first
    /// activation may run.
    pub fn release(&self) {
        self.ctl.get().release();
    }

    /// Gives the task budget, period and deadline (ns) from the first release of its
    /// current grid at or after now on ([`crate::control::Control::set_timing`]); the
    /// task takes them at its next activation. Precondition: this port is the task's
    /// only timing writer (its mode agent), and `period_ns > 0`.
    pub fn set_timing(&self, budget_ns: u64, period_ns: u64, deadline_ns: u64) -> Timing {
        let now = crate::clock::now_ns();
        self.ctl
            .get()
            .set_timing(budget_ns, period_ns, deadline_ns, now)
    }

    /// Gives the task budget, period and deadline (ns) on a grid whose first release is
    /// now, for a task its agent starts ([`crate::control::Control::start_timing`]).
    /// Same precondition as [`ModePort::set_timing`].
    pub fn start_timing(&self, budget_ns: u64, period_ns: u64, deadline_ns: u64) -> Timing {
        let now = crate::clock::now_ns();
        self.ctl
            .get()
            .start_timing(budget_ns, period_ns, deadline_ns, now)
    }

    /// The task's current timing.
    pub fn timing(&self) -> Timing {
        self.ctl.get().timing()
    }

    /// As [`TaskLink::request_mode`].
    pub fn request_mode(&self, mode: u32) -> u32 {
        self.ctl.get().request_mode(mode)
    }

    /// Publishes mode request `mode` without waking the task's sleep for its next
    /// release ([`crate::control::Control::publish_mode`]), for a program that
    /// acknowledges every request at once ([`ModePort::acks_at_once`]). Returns its
    /// sequence number.
    pub fn publish_mode(&self, mode: u32) -> u32 {
        self.ctl.get().publish_mode(mode)
    }

    /// Whether the task's program has reached its closed start gate
    /// ([`crate::control::Control::waits_at_gate`]): what it declared in its own set-up
    /// before (e.g. [`ModePort::acks_at_once`]) is visible.
    pub fn waits_at_gate(&self) -> bool {
        self.ctl.get().waits_at_gate()
    }

    /// Whether the program declared that it acknowledges every mode request at once
    /// ([`crate::Task::ack_modes_at_once`]): its acknowledgement counts as given.
    pub fn acks_at_once(&self) -> bool {
        let counters = self.ctl.get().named_counters();
        counters
            .iter()
            .any(|(name, value)| name == crate::ACK_AT_ONCE && *value == 1)
    }

    /// As [`TaskLink::mode_acked`].
    pub fn mode_acked(&self, seq: u32) -> bool {
        let acked = self.ctl.get().mode_ack.load(Acquire);
        acked.wrapping_sub(seq) as i32 >= 0
    }

    /// Waits (on the futex the task's acknowledgement wakes) until the task acknowledged
    /// request `seq` or a later one, at most until CLOCK_MONOTONIC `deadline_ns`;
    /// whether it did.
    pub fn wait_mode_ack(&self, seq: u32, deadline_ns: u64) -> bool {
        self.ctl.get().wait_mode_ack(seq, deadline_ns)
    }
}

/// The stop-start words of one task's control block ([`TaskLink::stop_start_port`]), as
/// the supervisor uses them (the module doc of [`crate::control`] gives the protocol).
pub struct StopStartPort {
    ctl: Mapping,
}

impl StopStartPort {
    /// Publishes suspend request `seq`, due to be acknowledged by `deadline_ns`
    /// (CLOCK_MONOTONIC), and wakes the task if it waits.
    pub fn request_suspend(&self, seq: u32, deadline_ns: u64) {
        self.ctl.get().request_suspend(seq, deadline_ns);
    }

    /// Whether the task acknowledged suspend request `seq`.
    pub fn suspend_acked(&self, seq: u32) -> bool {
        self.ctl.get().suspend_acked(seq)
    }

    /// Waits (futex) until the task acknowledged suspend request `seq` or CLOCK_MONOTONIC
    /// reaches `deadline_ns`; whether it did.
    pub fn wait_suspend_ack(&self, seq: u32, deadline_ns: u64) -> bool {
        self.ctl.get().wait_suspend_ack(seq, deadline_ns)
    }

    /// Publishes the resume of request `seq` with the total suspended time and the resume
    /// instant. Precondition: the task is still frozen.
    pub fn publish_resume(&self, seq: u32, suspended_ns: u64, resumed_at_ns: u64) {
        self.ctl
            .get()
            .publish_resume(seq, suspended_ns, resumed_at_ns);
    }

    /// The release epoch (CLOCK_MONOTONIC of release 0).
    pub fn epoch_ns(&self) -> u64 {
        self.ctl.get().epoch_ns.load(Acquire)
    }

    /// Moves the release grid: later activations are released at `epoch + k * T`.
    pub fn set_epoch_ns(&self, epoch_ns: u64) {
        self.ctl.get().epoch_ns.store(epoch_ns, Release);
    }

    /// The value of the task's named counter `name`, if it published one.
    pub fn counter(&self, name: &str) -> Option<u64> {
        let counters = self.ctl.get().named_counters();
        counters
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task attached to `link` through duplicates of its descriptors.
    fn attach(link: &TaskLink) -> crate::Task {
        let [c, t, _] = link.fds();
        // SAFETY: the link's descriptors stay open while it lives; only borrowed to dup.
        let (c, t) = unsafe {
            (
                std::os::fd::BorrowedFd::borrow_raw(c),
                std::os::fd::BorrowedFd::borrow_raw(t),
            )
        };
        let (c, t) = (
            c.try_clone_to_owned().unwrap(),
            t.try_clone_to_owned().unwrap(),
        );
        crate::Task::from_fds(c, t).unwrap()
    }

    fn spec() -> LinkSpec {
        LinkSpec {
            name: "ctl".into(),
            task_index: 3,
            budget_ns: 100_000,
            period_ns: 1_000_000,
            deadline_ns: 900_000,
            epoch_ns: 5,
            ring_depth: 4,
        }
    }

    #[test]
    fn rejects_impossible_parameters() {
        let mut s = spec();
        s.budget_ns = 2_000_000;
        let e = TaskLink::create(&s).err().expect("refused").to_string();
        assert!(e.contains("budget <= period"), "{e}");
        let mut s = spec();
        s.ring_depth = 0;
        assert!(TaskLink::create(&s).is_err());
    }

    /// A job whose thread used more CPU time than the budget (100 us) is reported
    /// over it; one that used less is not.
    #[test]
    fn a_job_over_its_cpu_budget_is_flagged_in_its_record() {
        let mut link = TaskLink::create(&spec()).unwrap();
        link.set_epoch_ns(crate::clock::now_ns());
        let mut task = attach(&link);
        task.wait_next_period().unwrap();
        crate::clock::burn_cpu(300_000);
        task.wait_next_period().unwrap();
        task.complete();
        let mut recs = Vec::new();
        link.drain(&mut recs);
        let over: Vec<bool> = recs
            .iter()
            .map(|r| r.flags & crate::flags::OVER_BUDGET != 0)
            .collect();
        assert_eq!(over, [true, false], "{recs:?}");
    }

    /// Whether `fd` is readable now.
    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polling one valid pollfd, without waiting.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    /// A job completed past its deadline makes the link's wake descriptor readable (the
    /// supervisor's drain wakes and sees the miss at once); a job on time does not.
    /// Period 100 ms, deadline 90 ms: the late job sleeps 95 ms.
    #[test]
    fn a_late_job_wakes_the_supervisor_and_a_job_on_time_does_not() {
        let spec = LinkSpec {
            budget_ns: 50_000_000,
            period_ns: 100_000_000,
            deadline_ns: 90_000_000,
            ..spec()
        };
        let link = TaskLink::create(&spec).unwrap();
        link.set_epoch_ns(crate::clock::now_ns());
        // SAFETY: the link's descriptor stays open while it lives; only borrowed to dup.
        let wake = unsafe { std::os::fd::BorrowedFd::borrow_raw(link.wake_fd()) };
        let wake = wake.try_clone_to_owned().unwrap();
        let mut task = attach(&link).waking(Some(wake)).unwrap();
        task.wait_next_period().unwrap();
        task.wait_next_period().unwrap();
        assert!(!readable(link.wake_fd()), "job 0 was on time");
        std::thread::sleep(std::time::Duration::from_millis(95));
        task.complete();
        assert!(readable(link.wake_fd()), "job 1 missed its deadline");
        link.clear_wake();
        assert!(!readable(link.wake_fd()));
    }

    #[test]
    fn in_process_round_trip() {
        let mut link = TaskLink::create(&spec()).unwrap();
        link.set_epoch_ns(crate::clock::now_ns());
        let mut task = attach(&link);
        assert_eq!(task.params().deadline_ns, 900_000);
        assert_eq!(task.params().name, "ctl");
        for _ in 0..6 {
            task.wait_next_period().unwrap();
        }
        task.complete();
        let mut out = Vec::new();
        // Depth 4: two of the six records were dropped, and counted.
        assert_eq!(link.drain(&mut out), 4);
        assert_eq!(link.counters().dropped, 2);
        // In order, consecutive but for releases skipped when this thread ran late.
        let mut next = 0;
        for r in &out {
            assert_eq!(r.index, next + r.skipped as u64, "{out:?}");
            next = r.index + 1;
        }
        link.request_stop();
        assert!(matches!(task.wait_next_period(), Err(Error::Stopped)));
    }

    #[test]
    fn releases_follow_the_release_offset_and_no_job_starts_before_its_release() {
        let link = TaskLink::create(&spec()).unwrap();
        let epoch = crate::clock::now_ns() + 3_000_000;
        link.set_epoch_ns(epoch);
        link.set_release_offset_ns(400_000);
        assert_eq!(link.release_offset_ns(), 400_000);
        let mut task = attach(&link);
        for _ in 0..5 {
            let act = task.wait_next_period().unwrap();
            let started = crate::clock::now_ns();
            // Releases at epoch + 0.4 ms + k * 1 ms, each job after its own release.
            assert_eq!(act.release_ns, epoch + 400_000 + act.index * 1_000_000);
            assert_eq!(act.deadline_ns, act.release_ns + 900_000);
            assert!(started >= act.release_ns, "{act:?} started at {started}");
        }
    }

    /// A period change (M2-Xen IV-B's re-parameterized task) starts at the old grid's
    /// first release at or after the change: no release in between, none twice, and the
    /// new period and deadline from there on; a budget-only change keeps the grid.
    #[test]
    fn a_timing_change_starts_at_the_old_grids_next_release_and_keeps_to_the_new_period() {
        let link = TaskLink::create(&spec()).unwrap();
        let epoch = crate::clock::now_ns();
        link.set_epoch_ns(epoch);
        link.set_release_offset_ns(400_000);
        let mut task = attach(&link);
        let before = task.wait_next_period().unwrap();
        let port = link.mode_port().unwrap();
        let changed = port.set_timing(200_000, 3_000_000, 2_500_000);
        // The old grid's next release: at or after the change, on epoch + 0.4 ms + k ms.
        let from = epoch + changed.from_ns;
        assert_eq!(changed.from_ns % 1_000_000, 400_000, "{changed:?}");
        assert!(from > before.release_ns, "{changed:?} {before:?}");
        assert_eq!(link.timing(), changed);
        let mut acts = Vec::new();
        for _ in 0..4 {
            acts.push(task.wait_next_period().unwrap());
        }
        assert_eq!(task.params().period_ns, 3_000_000);
        assert_eq!(task.params().budget_ns, 200_000);
        // The first activation under the new timing is the change's first release (or
        // one on the new grid after it, when this thread ran late), then every 3 ms.
        assert!(acts[0].release_ns >= from, "{acts:?} from {from}");
        assert_eq!((acts[0].release_ns - from) % 3_000_000, 0, "{acts:?}");
        for a in &acts {
            assert_eq!(a.deadline_ns, a.release_ns + 2_500_000, "{a:?}");
            assert_eq!(
                a.release_ns,
                epoch + changed.offset_ns + a.index * 3_000_000
            );
        }
        for w in acts.windows(2) {
            assert!(w[1].index > w[0].index, "{acts:?}");
        }
        // A budget and deadline change keeps the grid (and the index).
        let kept = port.set_timing(100_000, 3_000_000, 3_000_000);
        assert_eq!(kept.offset_ns, changed.offset_ns);
        let next = task.wait_next_period().unwrap();
        assert_eq!(
            next.index,
            acts[3].index + 1 + u64::from(next.skipped),
            "{next:?}"
        );
        assert_eq!(next.deadline_ns, next.release_ns + 3_000_000);
    }

    /// A sporadic task: one activation per arrival, released at the arrival, indices
    /// counting activations; a wait without input is no activation; a stop is noticed
    /// while the task waits for input that never comes.
    #[test]
    fn a_sporadic_task_is_released_by_each_arrival_and_stops_while_waiting() {
        let mut link = TaskLink::create(&spec()).unwrap();
        link.set_epoch_ns(crate::clock::now_ns());
        let mut task = attach(&link);
        // Arrivals stamped 5 s ago, then now, each after two empty waits.
        let mut waits = Vec::new();
        let mut arrivals = Vec::new();
        for k in 0..3u64 {
            let mut empty = 0;
            let act = task
                .wait_arrival(|wake| {
                    waits.push(wake.slice);
                    empty += 1;
                    Ok((empty > 2).then(|| crate::clock::now_ns() - (2 - k) * 2_500_000_000))
                })
                .unwrap();
            arrivals.push(act);
        }
        task.complete();
        // The period (1 ms) bounds each wait.
        assert!(waits.iter().all(|w| w.as_nanos() == 1_000_000), "{waits:?}");
        assert_eq!(waits.len(), 9);
        let mut out = Vec::new();
        assert_eq!(link.drain(&mut out), 3);
        for (k, (r, act)) in out.iter().zip(&arrivals).enumerate() {
            assert_eq!((r.index, act.index), (k as u64, k as u64));
            assert_eq!((r.skipped, r.flags), (0, 0));
            assert_eq!(r.release_ns, act.release_ns);
            assert_eq!(act.deadline_ns, act.release_ns + 900_000);
        }
        // Released at the arrivals: 5 s and 2.5 s before the last.
        let gap = |a: &Record, b: &Record| b.release_ns - a.release_ns;
        assert!(gap(&out[0], &out[2]) >= 5_000_000_000, "{out:?}");
        assert!(gap(&out[1], &out[2]) >= 2_500_000_000, "{out:?}");
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let ended = task.wait_arrival(|wake| {
                let _ = tx.send(());
                std::thread::sleep(wake.slice);
                Ok(None)
            });
            matches!(ended, Err(Error::Stopped))
        });
        rx.recv().unwrap();
        link.request_stop();
        assert!(waiter.join().unwrap(), "the waiting task saw the stop");
    }

    #[test]
    fn a_held_task_runs_no_job_until_released_and_a_stop_opens_the_gate() {
        for stop in [false, true] {
            let link = TaskLink::create(&spec()).unwrap();
            link.set_epoch_ns(crate::clock::now_ns());
            link.hold();
            let mut task = attach(&link);
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || tx.send(task.wait_next_period().is_ok()).unwrap());
            // Ten periods pass at the gate: no activation starts.
            let waited = rx.recv_timeout(std::time::Duration::from_millis(10));
            assert!(waited.is_err(), "a held task ran a job");
            assert_eq!(link.counters().activations, 0);
            if stop {
                link.request_stop();
            } else {
                link.mode_port().unwrap().release();
            }
            let ran = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
            assert_eq!(ran, !stop, "released: a job; stopped: Stopped");
            assert_eq!(link.counters().activations, u64::from(!stop));
        }
    }

    #[test]
    fn a_restarted_process_begins_at_the_next_release_with_restarted() {
        let mut link = TaskLink::create(&spec()).unwrap();
        link.set_epoch_ns(crate::clock::now_ns());
        link.restart(&mut Vec::new()).unwrap();
        let mut task = attach(&link);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let started = crate::clock::now_ns();
            let first = task.wait_next_period().unwrap();
            let second = task.wait_next_period().unwrap();
            tx.send((started, first, second)).unwrap();
        });
        let (started, first, second) = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("the first activations come within a few periods");
        assert_eq!(
            first.flags & crate::flags::RESTARTED,
            crate::flags::RESTARTED
        );
        assert!(first.release_ns > started, "{first:?}");
        // The next one follows (skipping releases only if this thread ran 1 ms late).
        assert!(second.index > first.index, "{first:?} {second:?}");
        assert_eq!(second.flags & crate::flags::RESTARTED, 0);
    }

    #[test]
    fn a_mode_port_on_another_thread_requests_and_sees_the_acknowledgement() {
        let link = TaskLink::create(&spec()).unwrap();
        let task = attach(&link);
        let port = link.mode_port().unwrap();
        let seq = std::thread::spawn(move || port.request_mode(2))
            .join()
            .unwrap();
        let change = task
            .wait_mode_change(Some(std::time::Duration::from_millis(100)))
            .expect("the request reaches the task");
        assert_eq!((change.mode, change.seq), (2, seq));
        assert!(!link.mode_acked(seq));
        task.ack_mode(change);
        assert!(link.mode_port().unwrap().mode_acked(seq));
    }

    /// A task its agent starts (it joins at a mode switch, M2-Xen IV-C) is first
    /// released at its start, not on the grid of the schedule's start, whether it never
    /// ran (held at its gate) or ran before on another phase; then every period.
    #[test]
    fn a_started_task_is_first_released_at_its_start() {
        let link = TaskLink::create(&spec()).unwrap();
        let epoch = crate::clock::now_ns() - 10_300_000;
        link.set_epoch_ns(epoch);
        link.hold();
        let port = link.mode_port().unwrap();
        let mut task = attach(&link);
        for _ in 0..2 {
            let started = port.start_timing(100_000, 1_000_000, 900_000);
            let at = epoch + started.from_ns;
            port.release();
            // At the start, or on its grid when this thread ran a period late; the
            // schedule's grid lies 0.3 ms off it (but for a start exactly on it).
            let first = task.wait_next_period().unwrap();
            assert!(first.release_ns >= at, "{first:?} {started:?}");
            assert_eq!(
                (first.release_ns - at) % 1_000_000,
                0,
                "{first:?} {started:?}"
            );
            let next = task.wait_next_period().unwrap();
            assert_eq!((next.release_ns - at) % 1_000_000, 0, "{next:?}");
            assert!(next.release_ns > first.release_ns, "{next:?}");
            // Parked a while: the next start lies on another phase of the period.
            std::thread::sleep(std::time::Duration::from_micros(2_300));
        }
    }

    #[test]
    fn the_mode_port_sees_the_program_declare_acks_at_once_and_reach_its_gate() {
        let link = TaskLink::create(&spec()).unwrap();
        link.set_epoch_ns(crate::clock::now_ns());
        link.hold();
        let port = link.mode_port().unwrap();
        let mut task = attach(&link);
        assert!(!port.acks_at_once());
        task.ack_modes_at_once();
        assert!(port.acks_at_once());
        assert_eq!(link.named_counters(), vec![(crate::ACK_AT_ONCE.into(), 1)]);
        // Attached and set up, but not at its gate until it waits for its first job.
        assert!(!port.waits_at_gate());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(task.wait_next_period().is_ok()).unwrap());
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !port.waits_at_gate() {
            assert!(std::time::Instant::now() < until, "never reached its gate");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(rx.try_recv().is_err(), "a held task ran a job");
        port.release();
        assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap());
        assert!(!port.waits_at_gate());
    }

    #[test]
    fn named_counters_reach_the_supervisor_by_name_and_survive_a_restart() {
        let mut link = TaskLink::create(&spec()).unwrap();
        assert_eq!(link.named_counters(), vec![]);
        let mut task = attach(&link);
        let sent = task.counter("can0.tx_sent").unwrap();
        let denied = task.counter("can0.tx_denied").unwrap();
        task.set_counter(sent, 41);
        task.add_counter(sent, 1);
        task.add_counter(denied, 3);
        assert_eq!(task.counter("can0.tx_sent").unwrap(), sent);
        assert_eq!(
            link.named_counters(),
            vec![("can0.tx_sent".into(), 42), ("can0.tx_denied".into(), 3)]
        );
        for bad in ["", &"x".repeat(48), "nul\0"] {
            let e = task.counter(bad).unwrap_err().to_string();
            assert!(e.contains("1 to 47 bytes"), "{e}");
        }
        drop(task);
        let mut out = Vec::new();
        link.restart(&mut out).unwrap();
        let mut task = attach(&link);
        let sent = task.counter("can0.tx_sent").unwrap();
        task.add_counter(sent, 1);
        for i in 2..crate::control::NAMED_COUNTERS {
            task.counter(&format!("c{i}")).unwrap();
        }
        let e = task.counter("one-too-many").unwrap_err().to_string();
        assert!(e.contains("all 32"), "{e}");
        let named = link.named_counters();
        assert_eq!(named.len(), 32);
        assert_eq!(named[0], ("can0.tx_sent".into(), 43));
        assert_eq!(named[31], ("c31".into(), 0));
    }
}
