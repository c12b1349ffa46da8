//! The task's side: attach, wait for each period, report completions.

use crate::clock::{self, now_ns};
use crate::control::{Mapping, ModeChange, Timing};
use crate::error::{Error, Result};
use crate::record::{flags, Record, RECORD_SIZE};
use crate::ENV;
use bulkhead_chan::{Channel, Sender};
use bulkhead_os::event::Wakeup;
use std::ops::ControlFlow;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::Duration;

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
    /// k: the release is `epoch + offset + k * period` (the task's release offset,
    /// [`crate::control`]).
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
/// [`crate::link::TaskLink::named_counters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter(usize);

impl Counter {
    /// The slot index (what the C API calls the counter).
    pub fn slot(self) -> usize {
        self.0
    }
}

/// How a task comes back from a system suspension (JuMP2start 2.2, the task parameter
/// M<sup>resume</sup>).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Resume {
    /// Continues where it was: its releases keep their place in system time (the
    /// supervisor shifts the epoch by the suspension), no catch-up burst, no miss or
    /// skip caused by the stop.
    #[default]
    Continuable,
    /// Returns to its checkpoint: the first activation after a resume is a new first
    /// release at the resume instant (or the first one after it) with
    /// [`flags::RESTARTED`].
    Restartable,
}

/// Called at a suspend request with the task and the request's acknowledgement deadline
/// (CLOCK_MONOTONIC ns).
pub type SuspendFn = Box<dyn FnMut(&Task, u64) + Send>;

/// The activation in progress.
#[derive(Clone, Copy)]
struct Current {
    act: Activation,
    start_ns: u64,
    /// The control block's `suspended_ns` when the activation started: a suspension
    /// during the activation moves its release and start by the time suspended.
    suspended_ns: u64,
    /// The control block's `resume_seq` when the activation started ([`Task::stale`]).
    resume_seq: u32,
    /// The thread's CPU time when the activation started.
    cpu_ns: u64,
}

/// The named counter a task sets to 1 when it acknowledges every mode request at once
/// ([`Task::ack_modes_at_once`]).
pub const ACK_AT_ONCE: &str = "mode.ack_at_once";

/// The longest a sporadic task waits for its input before it looks at its control block
/// again ([`Task::wait_arrival`]): 1 ms.
pub const ARRIVAL_CHECK_NS: u64 = 1_000_000;

/// What [`Task::wait_arrival`] gives each wait for the task's input.
#[derive(Clone, Copy, Debug)]
pub struct Wake<'a> {
    /// The longest the wait may take: the task's period, at most [`ARRIVAL_CHECK_NS`].
    pub slice: Duration,
    /// The control block's request word (the suspend request's sequence number, woken at
    /// a mode request too), shared with the supervisor.
    pub word: &'a AtomicU32,
    /// `word`'s value before the wait. A wait that also ends when `word` differs from it
    /// or is woken (`futex_waitv`: `bulkhead_chan::Receiver::read_timeout_or` on a fifo)
    /// hears a suspend or mode request at once rather than up to `slice` later.
    pub seen: u32,
}

/// A task attached to its supervisor.
pub struct Task {
    ctl: Mapping,
    tx: Sender,
    params: Params,
    /// The timing the releases are planned with (the control block's, as last seen).
    timing: Timing,
    next: u64,
    /// The release of the latest activation, CLOCK_MONOTONIC ns.
    last_release_ns: Option<u64>,
    current: Option<Current>,
    started: bool,
    pid: u32,
    resume: Resume,
    on_suspend: Option<SuspendFn>,
    /// The latest resume this task has planned an activation after.
    seen_resume: u32,
    /// The resume instant whose first fresh input [`Task::fresh`] has reported.
    fresh_reported: u64,
    /// Acknowledge mode requests at each release ([`Task::ack_modes_at_once`]).
    ack_at_once: bool,
    /// Notified after a late job's record ([`Task::complete`]): the supervisor's drain
    /// wakes and sees the miss at once. `None`: attached without one.
    wake: Option<Wakeup>,
}

impl Task {
    /// Attaches to what the supervisor provides through [`ENV`] (`<control fd>,<trace
    /// fd>[,<wake fd>]`). The descriptors are taken over (and closed with the task).
    pub fn attach() -> Result<Task> {
        let value = std::env::var(ENV).map_err(|_| {
            Error::NotAttached(format!(
                "{ENV} is not set: start the task with bulkhead run"
            ))
        })?;
        let (ctl, trace, wake) = parse_env(&value)?;
        // SAFETY: the supervisor passed these descriptors to this process for the task
        // library alone; nothing else in the process owns them.
        let (ctl, trace) = unsafe { (OwnedFd::from_raw_fd(ctl), OwnedFd::from_raw_fd(trace)) };
        // SAFETY: as above; the supervisor's third descriptor is the link's eventfd.
        let wake = wake.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
        Task::from_fds(ctl, trace)?.waking(wake)
    }

    /// The task with `wake` (the supervisor's eventfd, taken over) to notify after a
    /// late job's record ([`Task::complete`]).
    pub(crate) fn waking(mut self, wake: Option<OwnedFd>) -> Result<Task> {
        if let Some(fd) = wake {
            set_cloexec(&fd)?;
            self.wake = Some(Wakeup::from_eventfd(fd));
        }
        Ok(self)
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
        let timing = c.timing();
        let params = Params {
            name: c.name(),
            task_index: c.task_index,
            budget_ns: timing.budget_ns,
            period_ns: timing.period_ns,
            deadline_ns: timing.deadline_ns,
        };
        let pid = std::process::id();
        c.pid.store(pid, Relaxed);
        let seen_resume = c.resume_seq.load(Acquire);
        Ok(Task {
            ctl: map,
            tx,
            params,
            timing,
            next: timing.first_index(),
            last_release_ns: None,
            current: None,
            started: false,
            pid,
            resume: Resume::Continuable,
            on_suspend: None,
            seen_resume,
            fresh_reported: 0,
            ack_at_once: false,
            wake: None,
        })
    }

    /// The task's parameters (a mode switch may change budget, period and deadline: they
    /// are the ones of the latest activation).
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

    /// Reports a finished message to the supervisor (a pipeline's sink: its id, origin
    /// stamp and completion time, CLOCK_MONOTONIC ns), which writes it to the run's log
    /// and trace. No system call; false when the supervisor's ring was full and the
    /// event was dropped (counted).
    pub fn message_done(&self, id: u64, origin_ns: u64, done_ns: u64) -> bool {
        self.ctl.get().push_message((id, origin_ns, done_ns))
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
    /// [`Task::wait_next_period`] acknowledges a pending mode request at each release
    /// and when it is called. The declaration is published as the named counter
    /// [`ACK_AT_ONCE`] (value 1), from which the mode agent counts the task's
    /// acknowledgement as given and does not wait for it: the task would need CPU time
    /// of its reservation to say so, which it may not have until its next replenishment.
    /// Nor does the agent wake the task's release sleep for the request
    /// ([`crate::control::Control::publish_mode`]): the acknowledgement comes at the next
    /// release. A switch then waits for nothing of the task; [`Task::current_mode`] tells
    /// the new mode as soon as it is published. Without a free counter slot the
    /// declaration is not published and the agent wakes the task and waits for it as for
    /// any task ([`crate::control::Control::request_mode`]).
    pub fn ack_modes_at_once(&mut self) {
        self.ack_at_once = true;
        if let Ok(c) = self.counter(ACK_AT_ONCE) {
            self.set_counter(c, 1);
        }
    }

    /// Whether the supervisor asked the task to stop.
    pub fn stop_requested(&self) -> bool {
        self.ctl.get().stop.load(Acquire) != 0
    }

    /// Completes the activation in progress (if any): its record goes to the trace ring,
    /// with [`flags::OVER_BUDGET`] if the calling thread used more CPU time than the
    /// budget since the activation started (a job's work done by other threads is not
    /// counted). One system call (the thread's CPU time); the end time comes from the
    /// vDSO and the ring write only wakes a sleeping reader, and the supervisor never
    /// sleeps on it.
    pub fn complete(&mut self) {
        let Some(cur) = self.current.take() else {
            return;
        };
        let used = clock::thread_cpu_ns().saturating_sub(cur.cpu_ns);
        let over_budget = self.params.budget_ns > 0 && used > self.params.budget_ns;
        let end_ns = now_ns();
        // A suspension during the activation (frozen before it acknowledged) is no time
        // of the job's: its release and start move by it, as the epoch did.
        let shift = self.suspended_ns().saturating_sub(cur.suspended_ns);
        let rec = Record {
            index: cur.act.index,
            release_ns: cur.act.release_ns + shift,
            start_ns: (cur.start_ns + shift).min(end_ns),
            end_ns,
            flags: cur.act.flags | if over_budget { flags::OVER_BUDGET } else { 0 },
            skipped: cur.act.skipped,
            pid: self.pid,
        };
        if self.tx.try_write(&rec.to_bytes()).is_err() {
            self.ctl.get().dropped.fetch_add(1, Relaxed);
        }
        let late = rec.missed(self.params.deadline_ns) || rec.skipped > 0 || over_budget;
        if let Some(wake) = self.wake.as_ref().filter(|_| late) {
            wake.notify();
        }
    }

    /// Completes the current activation, sleeps until the next release and returns it.
    ///
    /// Releases are `epoch + O + k * T` (O: the task's release offset). If the next release has already passed, the new
    /// activation starts at once with [`flags::OVERRUN`]; if one or more whole periods
    /// passed too, their releases are skipped (counted in `skipped`, [`flags::SKIPPED`]),
    /// so the task works on the latest release instead of falling further behind.
    /// The first activation of a restarted process is the first release after it starts,
    /// with [`flags::RESTARTED`]. Returns [`Error::Stopped`] once the supervisor asks the
    /// task to stop. A task created held (not in the initial mode) waits here, before its
    /// first activation, until its mode agent starts it (the start gate of
    /// [`crate::control`]).
    ///
    /// This is the task's safe point for a system suspension: a suspend request pending
    /// here, or arriving while the task sleeps for its release, runs the suspend callback
    /// ([`Task::on_suspend`]), is acknowledged, and the task waits for the resume, so no
    /// job runs between the acknowledgement and the freeze. The first activation after a
    /// resume carries [`flags::RESUMED`]: a continuable task's is its next release on the
    /// shifted epoch (no [`flags::OVERRUN`] and no [`flags::SKIPPED`] for releases that
    /// fell while the system stopped, so no burst of catch-up jobs either); a restartable
    /// task's ([`Task::set_resume`]) is a new first release, the first one at or after the
    /// resume instant, with [`flags::RESTARTED`] too.
    pub fn wait_next_period(&mut self) -> Result<Activation> {
        self.complete();
        let restarted = !self.started && self.ctl.get().restarts.load(Acquire) > 0;
        if restarted {
            // A restarted process begins at the first release after now: the releases its
            // predecessor may have served are not run twice.
            let (base, period) = self.grid();
            self.next = now_ns().saturating_sub(base) / period + 1;
        }
        let mut slept = false;
        let (act, resume_seq) = loop {
            let Some(seen) = self.gate()? else {
                continue;
            };
            self.retime();
            let now = now_ns();
            let resume_seq = self.ctl.get().resume_seq.load(Acquire);
            let resumed = resume_seq != self.seen_resume;
            let mut act = self.plan(restarted, resumed);
            if now < act.release_ns {
                self.ctl.get().sleep_until_suspend(seen, act.release_ns);
                slept = true;
                continue;
            }
            if !slept || resumed {
                self.catch_up(&mut act, now, resumed);
            }
            break (act, resume_seq);
        };
        self.begin(act, resume_seq)
    }

    /// Makes `act` the activation in progress.
    fn begin(&mut self, act: Activation, resume_seq: u32) -> Result<Activation> {
        self.seen_resume = resume_seq;
        let c = self.ctl.get();
        self.current = Some(Current {
            act,
            start_ns: now_ns(),
            suspended_ns: self.suspended_ns(),
            resume_seq,
            cpu_ns: clock::thread_cpu_ns(),
        });
        self.next = act.index + 1;
        self.last_release_ns = Some(act.release_ns);
        self.started = true;
        c.activations.fetch_add(1, Relaxed);
        if self.stop_requested() {
            return Err(Error::Stopped);
        }
        Ok(act)
    }

    /// What every wait for an activation checks first: a stop request
    /// ([`Error::Stopped`]), the start gate, a suspend request (the safe point) and, with
    /// [`Task::ack_modes_at_once`], a pending mode request. Returns the suspend sequence
    /// number seen before the safe point (a later request wakes the release sleep), or
    /// `None` when the task waited at the gate or the safe point and the caller must check
    /// again.
    fn gate(&mut self) -> Result<Option<u32>> {
        if self.stop_requested() {
            return Err(Error::Stopped);
        }
        if self.ctl.get().held.load(Acquire) != 0 {
            self.ctl.get().wait_released();
            return Ok(None);
        }
        let seen = self.ctl.get().suspend_seq.load(Acquire);
        if self.suspend_point()? {
            return Ok(None);
        }
        if self.ack_at_once {
            if let Some(change) = self.mode_change_pending() {
                self.ack_mode(change);
            }
        }
        Ok(Some(seen))
    }

    /// Completes the current activation and waits for the next one of a *sporadic* task:
    /// a job released by the arrival of its input, not by a clock (an input-driven server,
    /// e.g. the CAN gateway's reader, which forwards each frame as it is received).
    ///
    /// `arrival(wake)` waits at most `wake.slice` for the task's input and returns the
    /// instant it arrived (CLOCK_MONOTONIC ns; the caller keeps the input itself), or
    /// `None` when none came. Between waits the task checks what
    /// [`Task::wait_next_period`] checks at its release sleep (a stop, the start gate, a
    /// suspend request, a mode request), so `slice` is the task's period, at most
    /// [`ARRIVAL_CHECK_NS`]. A wait that also ends at a change or wake-up of `wake.word`
    /// (see [`Wake`]) answers a suspend request at once, as a release sleep does; any
    /// other wait answers it within `slice`.
    ///
    /// The activation is released at the arrival (no later than now), its deadline
    /// `release + D`; indices count the task's activations (they lie on no grid, so no
    /// release is ever [`flags::SKIPPED`] or [`flags::OVERRUN`]). After a resume the first
    /// activation has [`flags::RESUMED`] (and [`flags::RESTARTED`] for a restartable task);
    /// the first of a restarted process [`flags::RESTARTED`].
    ///
    /// Under SCHED_DEADLINE the task is a constant bandwidth server (Abeni and Buttazzo,
    /// "Integrating multimedia applications in hard real-time systems", RTSS 1998, Sec. 3):
    /// each wake-up from the wait takes a new deadline and a full budget unless the
    /// remaining budget fits the current deadline (the kernel's `update_dl_entity`), so
    /// however often inputs arrive the task never uses more than its budget per period,
    /// and the other tasks see the demand of a periodic task (C, T).
    pub fn wait_arrival(
        &mut self,
        mut arrival: impl FnMut(Wake<'_>) -> std::io::Result<Option<u64>>,
    ) -> Result<Activation> {
        self.complete();
        let restarted = !self.started && self.ctl.get().restarts.load(Acquire) > 0;
        let slice = Duration::from_nanos(self.params.period_ns.clamp(1, ARRIVAL_CHECK_NS));
        let at = loop {
            let Some(seen) = self.gate()? else {
                continue;
            };
            self.retime();
            let word = &self.ctl.get().suspend_seq;
            match arrival(Wake { slice, word, seen }) {
                Ok(Some(at)) => break at,
                Ok(None) => continue,
                Err(e) => return Err(Error::io("waiting for the task's input", e)),
            }
        };
        let resume_seq = self.ctl.get().resume_seq.load(Acquire);
        let flags = self.start_flags(restarted, resume_seq != self.seen_resume);
        let release_ns = at.min(now_ns());
        let act = Activation {
            index: self.ctl.get().activations.load(Relaxed),
            release_ns,
            deadline_ns: release_ns + self.params.deadline_ns,
            flags,
            skipped: 0,
        };
        self.begin(act, resume_seq)
    }

    /// The activation to wait for: the next release on the current epoch, or after a
    /// (restartable) resume the first one from the resume instant on. `restarted`: the
    /// first activation of a restarted process.
    fn plan(&self, restarted: bool, resumed: bool) -> Activation {
        let c = self.ctl.get();
        let (epoch, period) = self.grid();
        let mut index = self.next;
        let flags = self.start_flags(restarted, resumed);
        if resumed && self.resume == Resume::Restartable {
            // A new first release: the first at or after the resume instant (the
            // supervisor puts a restartable task's epoch there).
            let since = c.resumed_at_ns.load(Acquire).saturating_sub(epoch);
            index = since.div_ceil(period);
        }
        Activation {
            index,
            release_ns: epoch + index * period,
            deadline_ns: epoch + index * period + self.timing.deadline_ns,
            flags,
            skipped: 0,
        }
    }

    /// The flags of an activation that starts a restarted process (`restarted`) or is
    /// the first after a resume (`resumed`): RESTARTED, RESUMED, and RESTARTED for a
    /// restartable task's first activation after a resume.
    fn start_flags(&self, restarted: bool, resumed: bool) -> u32 {
        let mut flags = if restarted { flags::RESTARTED } else { 0 };
        if resumed {
            flags |= flags::RESUMED;
            if self.resume == Resume::Restartable {
                flags |= flags::RESTARTED;
            }
        }
        flags
    }

    /// The grid the releases are planned on: (CLOCK_MONOTONIC time of release 0, period);
    /// release k is at `base + k * period`.
    fn grid(&self) -> (u64, u64) {
        let epoch = self.ctl.get().epoch_ns.load(Acquire);
        (epoch + self.timing.offset_ns, self.timing.period_ns)
    }

    /// Takes a timing change the mode agent published (**Timing changes** of
    /// [`crate::control`]): the new budget, period and deadline apply from the change's
    /// first release on. On a new grid (another period) the next activation is that
    /// first release, or the first one after the latest activation's release if the
    /// task already ran past it, so no release is run twice and none comes sooner than
    /// the old grid would have given it.
    fn retime(&mut self) {
        let t = self.ctl.get().timing();
        if t.seq == self.timing.seq {
            return;
        }
        let regrid = (t.period_ns, t.offset_ns) != (self.timing.period_ns, self.timing.offset_ns);
        self.timing = t;
        self.params.budget_ns = t.budget_ns;
        self.params.period_ns = t.period_ns;
        self.params.deadline_ns = t.deadline_ns;
        if !regrid {
            return;
        }
        let (base, period) = self.grid();
        self.next = match self.last_release_ns {
            Some(last) if last >= base + t.first_index() * period => (last - base) / period + 1,
            _ => t.first_index(),
        };
    }

    /// `act`'s release has passed at `now`: moves it to the latest release, counting the
    /// skipped ones and the overrun, except for releases that fell during a stop.
    fn catch_up(&self, act: &mut Activation, now: u64, resumed: bool) {
        let (epoch, period) = self.grid();
        let latest = now.saturating_sub(epoch) / period;
        if latest > act.index {
            if !resumed {
                act.skipped = (latest - act.index).min(u32::MAX as u64) as u32;
                act.flags |= flags::SKIPPED;
            }
            act.index = latest;
            act.release_ns = epoch + latest * period;
            act.deadline_ns = act.release_ns + self.timing.deadline_ns;
        }
        if self.started && !resumed {
            act.flags |= flags::OVERRUN;
        }
    }

    /// The task's safe point for a system suspension (called by
    /// [`Task::wait_next_period`]; a long job may call it too). If a suspend request is
    /// pending, runs the suspend callback with its deadline, acknowledges it and waits
    /// for the resume; returns whether it did. A request the system was already resumed
    /// from (the task was frozen before it got here) is acknowledged without the
    /// callback. Returns [`Error::Stopped`] if the supervisor asks the task to stop while
    /// it waits.
    pub fn suspend_point(&mut self) -> Result<bool> {
        let Some((seq, deadline)) = self.ctl.get().pending_suspend() else {
            return Ok(false);
        };
        if self.ctl.get().suspended() {
            if let Some(mut f) = self.on_suspend.take() {
                f(self, deadline);
                self.on_suspend = Some(f);
            }
        }
        let c = self.ctl.get();
        c.ack_suspend(seq);
        while !c.wait_resume(Some(Duration::from_millis(100))) {
            if self.stop_requested() {
                return Err(Error::Stopped);
            }
        }
        Ok(true)
    }

    /// Sets the function called at a suspend request, before the acknowledgement, with
    /// the request's acknowledgement deadline (CLOCK_MONOTONIC ns): the place to save
    /// what must survive the stop (JuMP2start Fig. 2: each domain saves its context, then
    /// acknowledges). It runs on the task's thread inside [`Task::wait_next_period`] or
    /// [`Task::suspend_point`]; past the deadline the task is frozen anyway.
    pub fn on_suspend(&mut self, f: SuspendFn) {
        self.on_suspend = Some(f);
    }

    /// Declares how the task comes back from a suspension (default: continuable).
    /// [`Task::run_restartable`] sets it.
    pub fn set_resume(&mut self, resume: Resume) {
        self.resume = resume;
    }

    /// Whether the system was suspended and resumed since the current activation started
    /// (the task was frozen in the middle of its job). A restartable task's job checks it
    /// at its checkpoints and gives up the stale job (JuMP2start 3.3: checkpoints after
    /// each basic block discard data acquired before the suspension).
    pub fn stale(&self) -> bool {
        self.current
            .is_some_and(|cur| cur.resume_seq != self.ctl.get().resume_seq.load(Acquire))
    }

    /// Total time the system has spent suspended, ns.
    pub fn suspended_ns(&self) -> u64 {
        self.ctl.get().suspended_ns.load(Acquire)
    }

    /// bulkhead's system time now: CLOCK_MONOTONIC minus the time the system spent
    /// suspended (JuMP2start 2.3, time stitching). A continuable task's releases keep
    /// their system times across a stop; it does not advance while the system is
    /// suspended.
    pub fn system_time_ns(&self) -> u64 {
        self.ctl.get().system_time_ns(now_ns())
    }

    /// The CLOCK_MONOTONIC instant at which the latest resume thawed the system (0: no
    /// resume yet). Data stamped before it is stale for a restartable task.
    pub fn resumed_at_ns(&self) -> u64 {
        self.ctl.get().resumed_at_ns.load(Acquire)
    }

    /// The stale/fresh rule for an input stamped `stamp_ns` on CLOCK_MONOTONIC (a CAN
    /// frame from a gateway channel: [`Task::fresh_can`]): a restartable task never takes data
    /// stamped before the latest resume instant. Returns whether the task may use it.
    /// A stale input is counted in the named counter `ss.stale_dropped`; the first
    /// fresh one after each resume stores the instant it was taken in
    /// `ss.first_fresh_ns`, which the supervisor logs as the task's `first_fresh_frame`,
    /// and its age then (that instant minus its stamp) in `ss.first_fresh_age_ns`: how
    /// long the input waited in the system, apart from how long it took to come.
    /// A continuable task takes everything.
    pub fn fresh(&mut self, stamp_ns: u64) -> bool {
        if self.resume != Resume::Restartable {
            return true;
        }
        let resumed_at = self.resumed_at_ns();
        if stamp_ns < resumed_at {
            if let Ok(c) = self.counter("ss.stale_dropped") {
                self.add_counter(c, 1);
            }
            return false;
        }
        if resumed_at != 0 && self.fresh_reported != resumed_at {
            self.fresh_reported = resumed_at;
            let now = now_ns();
            if let Ok(c) = self.counter("ss.first_fresh_age_ns") {
                self.set_counter(c, now.saturating_sub(stamp_ns));
            }
            if let Ok(c) = self.counter("ss.first_fresh_ns") {
                self.set_counter(c, now);
            }
        }
        true
    }

    /// The stale/fresh rule for a CAN frame from a gateway channel, whose stamp is the
    /// bus's reception time on CLOCK_REALTIME (ns of the Unix epoch, as candump logs and
    /// the virtual bus stamp frames): [`Task::fresh`] after moving the stamp to
    /// CLOCK_MONOTONIC by the offset between the two clocks now. The offset is read
    /// with two clock reads, so a frame stamped within about a microsecond of the
    /// resume instant may fall on either side; a clock step (settimeofday) between the
    /// frame's reception and this call moves it by the step.
    pub fn fresh_can(&mut self, stamp_realtime_ns: u64) -> bool {
        self.fresh(clock::realtime_to_monotonic(stamp_realtime_ns))
    }

    /// Runs a restartable task (JuMP2start Fig. 3): `setup` builds the state, which is the
    /// checkpoint ("Save Context"); then `job` runs once per activation on the working
    /// state. The first activation after a resume ([`flags::RESUMED`] and
    /// [`flags::RESTARTED`]) starts from a fresh clone of the checkpoint ("Restart Ctx"):
    /// whatever the jobs changed before the stop is dropped. Returns `Ok` when the
    /// supervisor asks the task to stop or when `job` breaks.
    ///
    /// The state must hold no data from the environment that goes stale (see
    /// docs/stop-start.md for the rules); `job` gets the task for counters,
    /// [`Task::stale`] and [`Task::resumed_at_ns`].
    pub fn run_restartable<S: Clone>(
        &mut self,
        setup: impl FnOnce(&mut Task) -> Result<S>,
        job: impl FnMut(&mut S, &mut Task, Activation) -> ControlFlow<()>,
    ) -> Result<()> {
        self.run_restartable_with(setup, Task::wait_next_period, job)
    }

    /// [`Task::run_restartable`] for a sporadic task: each activation is released at its
    /// input's arrival ([`Task::wait_arrival`], with the same `arrival`), not on a period
    /// grid. After a resume the first arrival's activation starts from the checkpoint.
    pub fn run_restartable_on_arrival<S: Clone>(
        &mut self,
        setup: impl FnOnce(&mut Task) -> Result<S>,
        mut arrival: impl FnMut(Wake<'_>) -> std::io::Result<Option<u64>>,
        job: impl FnMut(&mut S, &mut Task, Activation) -> ControlFlow<()>,
    ) -> Result<()> {
        self.run_restartable_with(setup, |t| t.wait_arrival(&mut arrival), job)
    }

    fn run_restartable_with<S: Clone>(
        &mut self,
        setup: impl FnOnce(&mut Task) -> Result<S>,
        mut wait: impl FnMut(&mut Task) -> Result<Activation>,
        mut job: impl FnMut(&mut S, &mut Task, Activation) -> ControlFlow<()>,
    ) -> Result<()> {
        self.resume = Resume::Restartable;
        let checkpoint = setup(self)?;
        let mut state = checkpoint.clone();
        loop {
            let act = match wait(self) {
                Ok(act) => act,
                Err(Error::Stopped) => return Ok(()),
                Err(e) => return Err(e),
            };
            if act.flags & flags::RESUMED != 0 {
                state = checkpoint.clone();
            }
            if job(&mut state, self, act).is_break() {
                return Ok(());
            }
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.complete();
    }
}

/// Parses `<control fd>,<trace fd>[,<wake fd>]`: three distinct open descriptors above 2.
fn parse_env(value: &str) -> Result<(i32, i32, Option<i32>)> {
    let bad = || {
        Error::NotAttached(format!(
            "{ENV}={value:?}: want `<control fd>,<trace fd>[,<wake fd>]`"
        ))
    };
    let fd = |s: &str| {
        s.trim()
            .parse::<i32>()
            .ok()
            .filter(|&fd| fd > 2)
            .ok_or_else(bad)
    };
    let fds = value.split(',').map(fd).collect::<Result<Vec<i32>>>()?;
    let (ctl, trace, wake) = match fds[..] {
        [c, t] => (c, t, None),
        [c, t, w] if w != c && w != t => (c, t, Some(w)),
        _ => return Err(bad()),
    };
    if ctl == trace {
        return Err(bad());
    }
    for fd in [ctl, trace].into_iter().chain(wake) {
        if !bulkhead_os::fd::is_open(fd) {
            return Err(Error::NotAttached(format!(
                "{ENV}: descriptor {fd} is not open"
            )));
        }
    }
    Ok((ctl, trace, wake))
}

/// Keeps the descriptor from leaking into programs the task executes.
fn set_cloexec(fd: &OwnedFd) -> Result<()> {
    use std::os::fd::AsRawFd;
    bulkhead_os::fd::set_cloexec(fd.as_raw_fd(), true).map_err(|e| Error::io("fcntl(F_SETFD)", e))
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
