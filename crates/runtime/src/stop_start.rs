//! Stop-start of a running system (docs/stop-start.md; JuMP2start: Golchin and West,
//! ECRTS 2024, Sec. 2.1-2.3 and Fig. 2), the Linux way: the supervisor is the master
//! power manager.
//!
//! **Suspend**: every rt task gets a suspend request in its control block at once, with
//! one acknowledgement deadline (`ack_deadline` from the request; Fig. 2 steps 2-5, the
//! task library saves its context and acknowledges), so that all reach their safe points
//! in parallel. Then, partition by partition in the description's `stop_start.order`, the
//! worker waits (futex, woken by each acknowledgement) until the partition's own tasks
//! acknowledged or the deadline passed, and freezes its cgroup whether or not all came (a
//! task that did not acknowledge is named in `partition_suspended`). The worker runs under
//! SCHED_FIFO [`WORKER_PRIORITY`], so an acknowledgement or a cgroup state is seen when it
//! comes, not when the CPUs' reservations and SCHED_OTHER load leave the worker time. Best-effort programs
//! have no control block and no way to acknowledge: they learn of the suspend and the
//! resume through the client library's read-only notice page
//! ([`bulkhead_client::stop_start`], published at the request and before the thaw) and
//! are frozen directly. Then, if asked and offered, suspend-to-RAM (`mem` into
//! `<sysfs>/power/state`).
//!
//! **Resume**, in reverse order: per partition, before thawing, each task's release grid
//! is moved (continuable: shifted by the time suspended, JuMP2start 2.2 "Update Ctx";
//! restartable: a new first release at the resume instant, "Restart Ctx") and the
//! resume published with the total time suspended (2.3: system time = CLOCK_MONOTONIC minus that total); then the cgroup is
//! thawed and its state read back.
//!
//! **Freezing.** cgroup v1 `freezer.state` or v2 `cgroup.freeze`, as detected at start,
//! through [`Freezers`] (a fake host records the worker's freezes in tests).
//! Best-effort partitions are frozen at their own freezer cgroup. rt tasks live in
//! cpuset cgroups (`bulkhead_runtime::tasks`): when the freezer is in another hierarchy (v1, or
//! v2 beside v1 controllers on a hybrid machine) each task joins a freezer cgroup of its
//! partition's when the worker starts (a restarted task at the next suspend) and stays
//! there until the worker ends; on a pure v2 machine the task's own cgroup is frozen.
//!
//! Events go to the schedule log and trace (`suspend_request`, `partition_suspended`,
//! `system_suspended`, `resume_request`, `partition_resumed`, `system_resumed`,
//! `first_fresh_frame`). A worker thread runs the protocol; the control socket only
//! checks the request against the state and hands it over, so a request that comes
//! while one is in progress is refused as busy.

use crate::links::Links;
use crate::mailbox::{self, Receiver, Recv, Sender};
use crate::modes::ModeEvents;
use crate::tasks::StopStartTask;
use crate::{leftovers, LiveTasks, RunError, RunOptions};
use bulkhead_client::stop_start::{NoticeWriter, NOTICE_VAR};
use bulkhead_control::{ErrorCode, PartitionPower, PowerOutcome, Response, Ticket};
use bulkhead_model::{Nanos, PartitionKind, Resume, StopStart, System};
use bulkhead_os::cgroup::{self, Freezers, Group, Hierarchy, HostFreezers, Version};
use bulkhead_os::clock::now_ns as monotonic_ns;
use bulkhead_os::event::Wakeup;
use bulkhead_trace::{Event, EventKind, Name};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Takes the index of a `modes.switch_when` condition that fired, for the supervisor's
/// loop (`requests::signal_fired`): a callback, so that the worker does not depend on
/// the requests' queue, which depends on the managers (this one among them). Called
/// from the worker thread; it must not block.
pub type SignalFired = Arc<dyn Fn(usize) + Send + Sync>;

/// SCHED_FIFO priority of the worker: above the supervisor's 40, below a boosted mode
/// agent's 45 and the kernel's threaded interrupts at 50. Reserved tasks preempt it (their
/// SCHED_DEADLINE, or their FIFO levels from 98 down); every SCHED_OTHER thread waits.
pub const WORKER_PRIORITY: i32 = 44;
/// How often the idle worker looks at the trigger and first-fresh-frame counters.
const WATCH_PERIOD: Duration = Duration::from_millis(1);
/// How long after a resume the worker waits for restartable tasks' first fresh frames.
const FRESH_WINDOW: Duration = Duration::from_secs(2);
/// The named counter a restartable task sets to the CLOCK_MONOTONIC instant at which it
/// processed its first frame received after the latest resume.
pub const FIRST_FRESH_FRAME: &str = "ss.first_fresh_ns";
/// The named counters of a gateway reader that count how often a trigger condition was
/// met (`stop_start.suspend_when`, `.resume_when`).
pub const SUSPEND_WHEN: &str = "ss.suspend_when";
pub const RESUME_WHEN: &str = "ss.resume_when";
/// The environment variable naming the sysfs root for suspend-to-RAM (tests).
pub const SYSFS_ROOT_VAR: &str = "BULKHEAD_SYSFS_ROOT";

/// Where the system is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Running,
    Suspending,
    Suspended,
    Resuming,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Running => "running",
            Phase::Suspending => "suspending",
            Phase::Suspended => "suspended",
            Phase::Resuming => "resuming",
        }
    }
}

/// What `status` shows.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot {
    pub phase: Phase,
    /// Completed suspend/resume cycles.
    pub cycles: u64,
    pub last_suspend_ns: Option<Nanos>,
    pub last_resume_ns: Option<Nanos>,
    /// A mode switch is in progress ([`StopStartManager::hold`]): no suspend starts
    /// until it is over (a trigger that fires meanwhile waits).
    pub held: bool,
}

enum Job {
    Suspend(Option<Ticket>, &'static str),
    Resume(Option<Ticket>, &'static str),
}

/// The stop-start manager: the worker thread and what the control socket needs of it.
pub struct StopStartManager {
    shared: Arc<Mutex<Snapshot>>,
    jobs: Option<Sender<Job>>,
    done: Receiver<(Ticket, Response)>,
    wake: Arc<Wakeup>,
    thread: Option<JoinHandle<()>>,
}

/// An rt task as the worker handles it.
struct RtTask {
    name: String,
    resume: Resume,
    ss: StopStartTask,
    /// `judged_from` before the suspend.
    judged_before: u64,
    /// `ss.first_fresh_ns` at the resume (restartable tasks).
    fresh_before: Option<u64>,
}

/// A `modes.switch_when` condition, counted in `counter` by the reader `task` of the
/// gateway partition `partition`; `last` is the value last seen.
struct SignalWatch {
    index: usize,
    partition: String,
    task: String,
    counter: String,
    last: u64,
}

/// A partition the worker freezes and thaws.
struct Part {
    name: String,
    /// A be partition: its own cgroup ([`Freezers::adopt`]). rt tasks: a cgroup of the
    /// partition's in the freezer hierarchy that they join (at the start, and again
    /// after a restart gave one a new process) and leave when the worker ends
    /// ([`Freezers::add_group`]); or, when the cpuset is in the freezer's hierarchy
    /// (pure v2), each task's own cgroup ([`Freezers::add_own`]).
    freezer: Group,
    tasks: Vec<RtTask>,
}

/// What the worker owns.
struct Worker {
    settings: StopStart,
    /// The partitions' freezers; released when the worker is dropped, however it ends.
    freezers: Box<dyn Freezers>,
    /// In suspend order, without the partitions that stay awake.
    parts: Vec<Part>,
    awake: Vec<String>,
    live: LiveTasks,
    events: ModeEvents,
    epoch_ns: u64,
    shared: Arc<Mutex<Snapshot>>,
    seq: u32,
    suspended_at: u64,
    total_suspended: u64,
    /// Resume request instant and when to stop looking for first fresh frames.
    fresh_watch: Option<(u64, Instant)>,
    /// The tasks of the partitions that stay awake (the trigger buses' gateways).
    awake_tasks: Vec<StopStartTask>,
    /// Trigger counters last seen: (index in `awake_tasks`, counter, value).
    triggers: Vec<(usize, &'static str, u64)>,
    /// `suspend_when` fired while a mode switch held suspends off: it starts after.
    pending_suspend: bool,
    /// The `modes.switch_when` counters of the gateway readers.
    switches: Vec<SignalWatch>,
    /// Where a fired `switch_when` goes (its index): to the supervisor's loop, which
    /// hands it to the mode manager; and the loop's wakeup.
    signal_fired: SignalFired,
    loop_wake: Arc<Wakeup>,
    sysfs: PathBuf,
    /// The best-effort programs' notice page.
    notice: Option<NoticeWriter>,
}

/// The inputs of [`StopStartManager::start`].
pub struct Inputs<'a> {
    pub system: &'a System,
    pub hierarchy: &'a Hierarchy,
    /// The rt tasks' stop-start ports.
    pub tasks: Vec<StopStartTask>,
    /// The unwindowed be partitions' freezer cgroups, by name.
    pub be_dirs: Vec<(String, PathBuf)>,
    /// The notice page handed to the best-effort partitions ([`hand_notice`]).
    pub notice: Option<NoticeWriter>,
    pub live: LiveTasks,
    pub events: ModeEvents,
    pub epoch_ns: u64,
    /// Where `modes.switch_when` switches go, and the wakeup of the loop that serves them.
    pub signal_fired: SignalFired,
    pub loop_wake: Arc<Wakeup>,
}

/// The sysfs root (`/sys`, or [`SYSFS_ROOT_VAR`]).
pub fn sysfs_root() -> PathBuf {
    std::env::var_os(SYSFS_ROOT_VAR).map_or_else(|| PathBuf::from("/sys"), PathBuf::from)
}

/// Creates the best-effort programs' notice page and hands it, read-only, to every
/// best-effort partition as `BULKHEAD_STOP_START=fd:N`, where the run can stop and start
/// (no windows, a control socket); `None` elsewhere.
pub fn hand_notice(
    system: &System,
    options: &RunOptions,
    links: &mut Links,
) -> Result<Option<NoticeWriter>, RunError> {
    let be = system
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Be);
    let names: Vec<&str> = be.map(|p| p.name.as_str()).collect();
    if !system.windows.is_empty() || options.control.is_none() || names.is_empty() {
        return Ok(None);
    }
    let notice = NoticeWriter::create().map_err(|e| RunError::io("stop-start notice page", e))?;
    for name in names {
        let handed = (notice.read_only_fd()).and_then(|fd| links.hand(name, NOTICE_VAR, fd));
        handed.map_err(|e| RunError::io("stop-start notice page", e))?;
    }
    Ok(Some(notice))
}

/// Refuses `stop_start.suspend_to_ram: true` where `<sysfs>/power/state` does not offer
/// `mem`, before anything starts.
pub fn check_suspend_to_ram(system: &System) -> Result<(), RunError> {
    if !system.stop_start().suspend_to_ram {
        return Ok(());
    }
    let file = sysfs_root().join("power/state");
    let offered = fs::read_to_string(&file).unwrap_or_default();
    if offered.split_whitespace().any(|s| s == "mem") {
        return Ok(());
    }
    let offered = match offered.trim() {
        "" => "nothing (it cannot be read)".to_string(),
        s => format!("`{s}`"),
    };
    Err(RunError::invalid(format!(
        "stop_start.suspend_to_ram: this machine cannot suspend to RAM: {} offers {offered}, not `mem`; \
         remove the key (partitions are still frozen) or run on a platform with S3",
        file.display()
    )))
}

impl StopStartManager {
    /// Creates the freezer cgroups and starts the worker.
    pub fn start(inputs: Inputs<'_>) -> Result<StopStartManager, RunError> {
        let shared = Arc::new(Mutex::new(Snapshot {
            phase: Phase::Running,
            cycles: 0,
            last_suspend_ns: None,
            last_resume_ns: None,
            held: false,
        }));
        let worker = Worker::new(inputs, shared.clone())?;
        let (jobs, rx) = mailbox::channel();
        let (done_tx, done) = mailbox::channel();
        let wake = Wakeup::new().map_err(|e| RunError::io("stop-start: eventfd", e))?;
        let wake = Arc::new(wake);
        let worker_wake = wake.clone();
        let thread = std::thread::Builder::new()
            .name("bulkhead-stop-start".into())
            .spawn(move || worker.run(rx, done_tx, &worker_wake))
            .map_err(|e| RunError::io("stop-start thread", e))?;
        Ok(StopStartManager {
            shared,
            jobs: Some(jobs),
            done,
            wake,
            thread: Some(thread),
        })
    }

    /// The descriptor that becomes readable when a reply is ready.
    pub fn fd(&self) -> i32 {
        self.wake.fd()
    }

    /// The state now.
    pub fn snapshot(&self) -> Snapshot {
        *self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds off suspends while a mode switch runs (`held`), atomically with the check
    /// that the system is running: `Err(phase)` when it is not, and then nothing is held.
    /// Releasing (`held` false) always succeeds. A mode switch and a stop-start thus
    /// never overlap: a switch needs every task awake to acknowledge, and a freeze in
    /// the middle of a reservation change would leave the switch waiting on frozen tasks.
    pub fn hold(&self, held: bool) -> Result<(), Phase> {
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if held && s.phase != Phase::Running {
            return Err(s.phase);
        }
        s.held = held;
        Ok(())
    }

    /// A `suspend` (`suspend`: true) or `resume` request from the control socket: an
    /// error reply now, or `None` when the worker took it (the reply comes through
    /// [`Self::collect`]).
    pub fn request(&mut self, suspend: bool, ticket: Ticket) -> Option<Response> {
        self.request_by(suspend, Some(ticket), "ctl")
    }

    /// [`Self::request`] from `by` (the events' `by`); without a ticket nothing is
    /// replied once the worker is done.
    pub fn request_by(
        &mut self,
        suspend: bool,
        ticket: Option<Ticket>,
        by: &'static str,
    ) -> Option<Response> {
        let want = if suspend {
            Phase::Running
        } else {
            Phase::Suspended
        };
        let refused = {
            let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            match (s.phase, suspend) {
                (Phase::Running, true) if s.held => Some((
                    ErrorCode::Busy,
                    "a mode switch is in progress: suspend when it is over".to_string(),
                )),
                (p, _) if p == want => {
                    s.phase = if suspend {
                        Phase::Suspending
                    } else {
                        Phase::Resuming
                    };
                    None
                }
                (Phase::Suspending | Phase::Resuming, _) => Some((
                    ErrorCode::Busy,
                    format!(
                        "a stop-start is in progress (the system is {})",
                        s.phase.name()
                    ),
                )),
                (Phase::Suspended, true) => Some((
                    ErrorCode::NotAllowed,
                    "the system is already suspended (resume it first)".to_string(),
                )),
                _ => Some((
                    ErrorCode::NotAllowed,
                    "the system is not suspended: nothing to resume".to_string(),
                )),
            }
        };
        if let Some((code, message)) = refused {
            return Some(Response::error(None, code, message));
        }
        let job = match suspend {
            true => Job::Suspend(ticket, by),
            false => Job::Resume(ticket, by),
        };
        let sent = self.jobs.as_ref().map(|j| j.send(job).is_ok());
        match sent {
            Some(true) => None,
            _ => Some(Response::error(
                None,
                ErrorCode::Internal,
                "the stop-start worker has stopped",
            )),
        }
    }

    /// The replies the worker finished since the last call.
    pub fn collect(&mut self) -> Vec<(Ticket, Response)> {
        self.wake.clear();
        self.done.drain()
    }
}

impl Drop for StopStartManager {
    /// Stops the worker; a suspended system is resumed first, and the freezer cgroups
    /// are removed, so that the run can stop its tasks.
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Worker {
    /// The worker on this machine's freezers ([`HostFreezers`]).
    fn new(inputs: Inputs<'_>, shared: Arc<Mutex<Snapshot>>) -> Result<Worker, RunError> {
        let own = own_freezers(inputs.hierarchy);
        let instance = (!own).then(leftovers::instance_name);
        let freezers = HostFreezers::create(inputs.hierarchy, instance.as_deref())
            .map_err(|e| cg_error("create", &e.path, e.source))?;
        Worker::with(inputs, shared, Box::new(freezers), own)
    }

    /// The worker on `freezers`; `own`: rt tasks are frozen in their own cgroups
    /// ([`own_freezers`]). On failure, what it created in `freezers` is released.
    fn with(
        inputs: Inputs<'_>,
        shared: Arc<Mutex<Snapshot>>,
        freezers: Box<dyn Freezers>,
        own: bool,
    ) -> Result<Worker, RunError> {
        let system = inputs.system;
        let settings = system.stop_start();
        let awake: Vec<String> = settings
            .awake(system)
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut worker = Worker {
            settings: settings.clone(),
            freezers,
            parts: Vec::new(),
            awake,
            live: inputs.live,
            events: inputs.events,
            epoch_ns: inputs.epoch_ns,
            shared,
            seq: 0,
            suspended_at: 0,
            total_suspended: 0,
            fresh_watch: None,
            awake_tasks: Vec::new(),
            triggers: Vec::new(),
            pending_suspend: false,
            switches: Vec::new(),
            signal_fired: inputs.signal_fired,
            loop_wake: inputs.loop_wake,
            sysfs: sysfs_root(),
            notice: inputs.notice,
        };
        let mut tasks = inputs.tasks;
        for (i, name) in settings.order.iter().enumerate() {
            let Some(p) = system.partition(name) else {
                continue;
            };
            if worker.awake.contains(name) {
                let kept = extract(&mut tasks, name);
                worker.awake_tasks.extend(kept);
                continue;
            }
            let mine: Vec<RtTask> = extract(&mut tasks, name)
                .into_iter()
                .map(|ss| RtTask {
                    resume: p
                        .tasks
                        .iter()
                        .find(|t| t.name == ss.task)
                        .map_or(Resume::Continuable, |t| t.resume),
                    name: ss.task.clone(),
                    ss,
                    judged_before: 0,
                    fresh_before: None,
                })
                .collect();
            let be = inputs.be_dirs.iter().find(|(n, _)| n == name);
            let freezer = match be {
                Some((_, dir)) => worker.freezers.adopt(dir),
                // Nothing of it runs (e.g. a windowed partition): nothing to freeze.
                None if mine.is_empty() => continue,
                None if own => worker.freezers.add_own(),
                None => {
                    let dir = cgroup::partition_dir_name(i, name);
                    let added = worker.freezers.add_group(&dir);
                    added.map_err(|e| cg_error("create", &e.path, e.source))?
                }
            };
            worker.parts.push(Part {
                name: name.clone(),
                freezer,
                tasks: mine,
            });
        }
        worker.watch_triggers(system);
        worker.watch_switches(system);
        for i in 0..worker.parts.len() {
            let pids = worker.pids(&worker.parts[i].name);
            worker.freezers.join(worker.parts[i].freezer, &pids);
        }
        Ok(worker)
    }

    /// The gateway readers of the trigger buses (in the awake partitions) and their
    /// counters' values now.
    fn watch_triggers(&mut self, system: &System) {
        for (key, t) in self.settings.triggers() {
            let Some(bus) = system.buses.iter().find(|b| b.name == t.bus) else {
                continue;
            };
            let counter = if key == "suspend_when" {
                SUSPEND_WHEN
            } else {
                RESUME_WHEN
            };
            let reader = bus.reader_task();
            let at = (self.awake_tasks.iter())
                .position(|s| s.partition == bus.gateway && s.task == reader);
            if let Some(i) = at {
                let value = self.awake_tasks[i].port.counter(counter).unwrap_or(0);
                self.triggers.push((i, counter, value));
            }
        }
    }

    /// The `modes.switch_when` counters of the trigger buses' readers, and their values now.
    fn watch_switches(&mut self, system: &System) {
        for bus in &system.buses {
            let switches = crate::links::switch_triggers(system, &bus.name);
            for (k, (index, _)) in switches.into_iter().enumerate() {
                let mut watch = SignalWatch {
                    index,
                    partition: bus.gateway.clone(),
                    task: bus.reader_task(),
                    counter: bulkhead_gateway_protocol::switch_when_counter(k),
                    last: 0,
                };
                watch.last = self.counter_of(&watch).unwrap_or(0);
                self.switches.push(watch);
            }
        }
    }

    /// The value of `w`'s counter in its reader's control block.
    fn counter_of(&self, w: &SignalWatch) -> Option<u64> {
        let frozen = self
            .parts
            .iter()
            .flat_map(|p| p.tasks.iter().map(|t| &t.ss));
        let mut all = self.awake_tasks.iter().chain(frozen);
        let reader = all.find(|s| s.partition == w.partition && s.task == w.task)?;
        reader.port.counter(&w.counter)
    }

    /// Hands each `switch_when` whose counter grew to the supervisor's loop.
    fn watch_switch_counters(&mut self) {
        for i in 0..self.switches.len() {
            let Some(now) = self.counter_of(&self.switches[i]) else {
                continue;
            };
            if now > self.switches[i].last {
                self.switches[i].last = now;
                (self.signal_fired)(self.switches[i].index);
                self.loop_wake.notify();
            }
        }
    }

    fn run(mut self, jobs: Receiver<Job>, done: Sender<(Ticket, Response)>, wake: &Wakeup) {
        // Held for the thread's life: SCHED_FIFO WORKER_PRIORITY, so that the worker runs
        // as soon as an acknowledgement or a cgroup state comes, even while every CPU is
        // reserved and SCHED_OTHER work (other programs, builds) is queued.
        let realtime = bulkhead_os::sched::Realtime::enter(WORKER_PRIORITY);
        if let Err(e) = &realtime {
            eprintln!(
                "bulkhead: stop-start: the worker runs without real-time priority (SCHED_FIFO {WORKER_PRIORITY}): {e}; \
                 suspend and resume wait for the CPU time reserved tasks leave"
            );
        }
        loop {
            let job = match jobs.recv_timeout(WATCH_PERIOD) {
                Recv::Item(job) => Some(job),
                Recv::Empty => self.watch(),
                Recv::Closed => break,
            };
            let Some(job) = job else { continue };
            let (ticket, response) = match job {
                Job::Suspend(t, by) => (t, self.suspend(by)),
                Job::Resume(t, by) => (t, self.resume(by)),
            };
            if let Some(ticket) = ticket {
                if done.send((ticket, response)).is_ok() {
                    wake.notify();
                }
            }
        }
        if self.phase() == Phase::Suspended {
            self.set_phase(Phase::Resuming);
            self.resume("stop");
        }
    }

    fn phase(&self) -> Phase {
        self.shared.lock().unwrap_or_else(|e| e.into_inner()).phase
    }

    fn set_phase(&self, phase: Phase) {
        self.shared.lock().unwrap_or_else(|e| e.into_inner()).phase = phase;
    }

    /// Between requests: a trigger whose counter grew starts a suspend or resume (when
    /// the state allows it); restartable tasks' first fresh frames are logged.
    fn watch(&mut self) -> Option<Job> {
        self.watch_fresh();
        self.watch_switch_counters();
        let mut fired = self.pending_suspend.then_some(SUSPEND_WHEN);
        for (i, counter, last) in &mut self.triggers {
            let now = self.awake_tasks[*i].port.counter(counter).unwrap_or(*last);
            if now > *last {
                *last = now;
                fired = fired.or(Some(*counter));
            }
        }
        let counter = fired?;
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let (job, pending) = on_trigger(counter, &mut s);
        self.pending_suspend = pending;
        job
    }

    fn watch_fresh(&mut self) {
        let Some((request, until)) = self.fresh_watch else {
            return;
        };
        let mut found = Vec::new();
        for p in &mut self.parts {
            for t in &mut p.tasks {
                let Some(before) = t.fresh_before else {
                    continue;
                };
                let now = t.ss.port.counter(FIRST_FRESH_FRAME).unwrap_or(before);
                if now != before && now >= request {
                    t.fresh_before = None;
                    found.push((p.name.clone(), t.name.clone(), now - request));
                }
            }
        }
        for (partition, task, latency_ns) in found {
            self.log(EventKind::FirstFreshFrame {
                partition: Name::from(partition),
                task: Name::from(task),
                latency_ns,
            });
        }
        if Instant::now() >= until {
            self.fresh_watch = None;
        }
    }

    fn log(&self, kind: EventKind) {
        let t = monotonic_ns().saturating_sub(self.epoch_ns);
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        events.push(Event::new(t, kind));
    }

    /// The pids of partition `name`'s rt tasks now (a restarted task has a new one).
    fn pids(&self, name: &str) -> Vec<u32> {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.iter()
            .filter(|t| t.partition == name)
            .map(|t| t.pid)
            .collect()
    }

    fn suspend(&mut self, by: &'static str) -> Response {
        let start = monotonic_ns();
        self.seq = self.seq.wrapping_add(1).max(1);
        let seq = self.seq;
        self.log(EventKind::SuspendRequest {
            seq: seq.into(),
            by: Name::from(by),
        });
        if let Some(n) = &self.notice {
            n.suspend(seq, start + self.settings.ack_deadline);
        }
        let mut outcome = PowerOutcome {
            state: "suspended".into(),
            ..PowerOutcome::default()
        };
        let mut problems = Vec::new();
        let deadline = self.request_suspend(seq, start);
        for i in 0..self.parts.len() {
            let unacked = self.wait_acks(i, seq, deadline);
            let pids = self.pids(&self.parts[i].name);
            let freezer = self.parts[i].freezer;
            self.freezers.join(freezer, &pids);
            if let Err(e) = self.freezers.set_frozen(freezer, true) {
                problems.push(format!("partition `{}`: {e}", self.parts[i].name));
            }
            let latency_ns = monotonic_ns() - start;
            let name = self.parts[i].name.clone();
            self.log(EventKind::PartitionSuspended {
                partition: Name::from(name.as_str()),
                latency_ns,
                unacknowledged: unacked.iter().map(|s| Name::from(s.as_str())).collect(),
            });
            if !unacked.is_empty() {
                eprintln!(
                    "bulkhead: stop-start: partition `{name}`: frozen without the acknowledgement of {}",
                    unacked.join(", ")
                );
            }
            outcome.partitions.push(PartitionPower {
                name,
                latency_ns,
                acknowledged: unacked.is_empty(),
            });
        }
        if self.settings.suspend_to_ram {
            let file = self.sysfs.join("power/state");
            if let Err(e) = fs::write(&file, "mem") {
                problems.push(format!("suspend-to-RAM: {}: {e}", file.display()));
            }
        }
        self.suspended_at = monotonic_ns();
        outcome.latency_ns = self.suspended_at - start;
        self.log(EventKind::SystemSuspended {
            seq: seq.into(),
            latency_ns: outcome.latency_ns,
        });
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        s.phase = Phase::Suspended;
        s.last_suspend_ns = Some(outcome.latency_ns);
        drop(s);
        match problems.is_empty() {
            true => Response::power(None, outcome),
            false => Response::error(None, ErrorCode::Internal, problems.join("; ")),
        }
    }

    /// Asks every task of every partition to suspend at once, with one acknowledgement
    /// deadline (`ack_deadline` after the request at `start`), and returns it: all tasks
    /// get to their safe points in parallel, while the partitions are still frozen one
    /// after the other in the configured order.
    fn request_suspend(&mut self, seq: u32, start: u64) -> u64 {
        let deadline = start + self.settings.ack_deadline;
        for t in self.parts.iter_mut().flat_map(|p| &mut p.tasks) {
            t.judged_before = t.ss.judged_from.swap(u64::MAX, Ordering::AcqRel);
            t.ss.port.request_suspend(seq, deadline);
        }
        deadline
    }

    /// Waits (futex, woken by each acknowledgement) until every task of part `i`
    /// acknowledged request `seq` or `deadline` passed; returns the names of those that
    /// did not acknowledge.
    fn wait_acks(&self, i: usize, seq: u32, deadline: u64) -> Vec<String> {
        let tasks = &self.parts[i].tasks;
        let unacked = tasks
            .iter()
            .filter(|t| !t.ss.port.wait_suspend_ack(seq, deadline));
        unacked.map(|t| t.name.clone()).collect()
    }

    fn resume(&mut self, by: &'static str) -> Response {
        let start = monotonic_ns();
        let seq = self.seq;
        self.log(EventKind::ResumeRequest {
            seq: seq.into(),
            by: Name::from(by),
        });
        let suspended = start.saturating_sub(self.suspended_at);
        self.total_suspended += suspended;
        if let Some(n) = &self.notice {
            // Before any thaw: no program sees the resume's number without its times.
            n.resume(seq, self.total_suspended, start);
        }
        let mut outcome = PowerOutcome {
            state: "running".into(),
            ..PowerOutcome::default()
        };
        let mut problems = Vec::new();
        for i in (0..self.parts.len()).rev() {
            self.restart_context(i, seq, start, suspended);
            if let Err(e) = self.freezers.set_frozen(self.parts[i].freezer, false) {
                problems.push(format!("partition `{}`: {e}", self.parts[i].name));
            }
            let latency_ns = monotonic_ns() - start;
            let name = self.parts[i].name.clone();
            self.log(EventKind::PartitionResumed {
                partition: Name::from(name.as_str()),
                latency_ns,
            });
            outcome.partitions.push(PartitionPower {
                name,
                latency_ns,
                acknowledged: true,
            });
        }
        outcome.latency_ns = monotonic_ns() - start;
        self.log(EventKind::SystemResumed {
            seq: seq.into(),
            latency_ns: outcome.latency_ns,
            suspended_ns: suspended,
        });
        self.fresh_watch = Some((start, Instant::now() + FRESH_WINDOW));
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        s.phase = Phase::Running;
        s.cycles += 1;
        s.last_resume_ns = Some(outcome.latency_ns);
        drop(s);
        match problems.is_empty() {
            true => Response::power(None, outcome),
            false => Response::error(None, ErrorCode::Internal, problems.join("; ")),
        }
    }

    /// Before part `i` is thawed (JuMP2start 2.2, Fig. 3): continuable tasks' release
    /// grids shift by the time suspended ("Update Ctx"), restartable tasks get a new first
    /// release at the resume instant `at` ("Restart Ctx"); then the resume is published
    /// with the total time suspended. Reservations are left alone: the thaw is a wakeup,
    /// at which the kernel renews a reservation whose deadline has passed
    /// (docs/stop-start.md: why a task does not come back throttled).
    fn restart_context(&mut self, i: usize, seq: u32, at: u64, suspended: u64) {
        let total = self.total_suspended;
        for t in &mut self.parts[i].tasks {
            match t.resume {
                Resume::Continuable => t.ss.port.set_epoch_ns(t.ss.port.epoch_ns() + suspended),
                Resume::Restartable => {
                    t.ss.port.set_epoch_ns(at);
                    t.fresh_before = Some(t.ss.port.counter(FIRST_FRESH_FRAME).unwrap_or(0));
                }
            }
            t.ss.port.publish_resume(seq, total, at);
            let judged = match t.judged_before {
                u64::MAX => u64::MAX,
                before => before.max(at),
            };
            t.ss.judged_from.store(judged, Ordering::Release);
        }
    }
}

/// What the trigger `counter` that fired starts in state `s` (whose phase it moves), and
/// whether it is a suspend that waits: a `suspend_when` that fires during a mode switch
/// (`s.held`) is passed again at each watch until the switch is over, then suspends. A
/// trigger the phase does not allow (a suspend while not running, a resume while not
/// suspended) starts nothing.
fn on_trigger(counter: &str, s: &mut Snapshot) -> (Option<Job>, bool) {
    match (counter, s.phase) {
        (SUSPEND_WHEN, Phase::Running) if s.held => (None, true),
        (SUSPEND_WHEN, Phase::Running) => {
            s.phase = Phase::Suspending;
            (Some(Job::Suspend(None, "suspend_when")), false)
        }
        (RESUME_WHEN, Phase::Suspended) => {
            s.phase = Phase::Resuming;
            (Some(Job::Resume(None, "resume_when")), false)
        }
        _ => (None, false),
    }
}

fn extract(tasks: &mut Vec<StopStartTask>, partition: &str) -> Vec<StopStartTask> {
    let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(tasks)
        .into_iter()
        .partition(|t| t.partition == partition);
    *tasks = rest;
    mine
}

fn cg_error(what: &str, path: &Path, e: std::io::Error) -> RunError {
    let what = format!("stop-start: cannot {what} cgroup {}", path.display());
    RunError::io(what, e)
}

/// Whether rt tasks are frozen in their own cgroups: the cpuset is in the freezer's
/// hierarchy (pure v2); else each rt partition gets a cgroup in the freezer hierarchy.
fn own_freezers(h: &Hierarchy) -> bool {
    h.version == Version::V2 && h.cpuset_base.is_some()
}

impl Drop for Worker {
    /// The moved tasks go back to the supervisor's own cgroup and the worker's cgroups
    /// are removed, whether the worker ran or failed half-way through [`Worker::with`].
    fn drop(&mut self) {
        self.freezers.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_cgroups::{Call, Fake};

    /// Freezes and thaws a real process in a cgroup of `base`, read back from the kernel.
    fn freeze_and_thaw(base: &Path, version: Version) {
        let dir = base.join(leftovers::instance_name());
        fs::create_dir(&dir).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        cgroup::write_file(&dir.join("cgroup.procs"), &child.id().to_string()).unwrap();
        let hierarchy = Hierarchy {
            version,
            freezer_base: base.to_path_buf(),
            cpuset_base: None,
        };
        let mut freezers = HostFreezers::create(&hierarchy, None).unwrap();
        let f = freezers.adopt(&dir);
        freezers.set_frozen(f, true).unwrap();
        assert_eq!(cgroup::is_frozen(&dir, version), Some(true));
        let state = fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        assert!(
            !state.contains("State:\tR"),
            "a frozen process does not run"
        );
        freezers.set_frozen(f, false).unwrap();
        assert_eq!(cgroup::is_frozen(&dir, version), Some(false));
        child.kill().unwrap();
        child.wait().unwrap();
        while fs::remove_dir(&dir).is_err() {
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    #[ignore = "needs root: cgroups"]
    fn the_v1_and_v2_freezers_freeze_and_thaw_read_back() {
        let v1 = Path::new("/sys/fs/cgroup/freezer");
        if v1.join("cgroup.procs").exists() {
            freeze_and_thaw(v1, Version::V1);
        }
        for v2 in ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
            if Path::new(v2).join("cgroup.freeze").exists()
                || Path::new(v2).join("cgroup.subtree_control").exists()
            {
                freeze_and_thaw(Path::new(v2), Version::V2);
                break;
            }
        }
    }

    /// Three best-effort partitions suspended in the configured order, `c`, `a`, `b`;
    /// their freezers are files of a directory of the test's (no root needed).
    const THREE: &str = "
partitions:
  - {name: a, processes: [{cmd: a}]}
  - {name: b, processes: [{cmd: b}]}
  - {name: c, processes: [{cmd: c}]}
stop_start: {order: [c, a, b]}
";

    /// A directory removed with all it holds when the test ends, passed or failed.
    struct Removed(PathBuf);

    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// The partitions named by the `PartitionSuspended` (`suspended`) or
    /// `PartitionResumed` events of `events`, in their order.
    fn order(events: &ModeEvents, suspended: bool) -> Vec<String> {
        let events = events.lock().unwrap();
        let names = events.iter().filter_map(|e| match (&e.kind, suspended) {
            (EventKind::PartitionSuspended { partition, .. }, true)
            | (EventKind::PartitionResumed { partition, .. }, false) => Some(partition.to_string()),
            _ => None,
        });
        names.collect()
    }

    /// A suspend freezes the partitions one after the other in `stop_start.order`; a
    /// resume thaws them in the reverse order; each freezer is left in its state.
    #[test]
    fn a_suspend_freezes_in_the_configured_order_and_a_resume_thaws_in_reverse() {
        let system = bulkhead_model::load_str(THREE, "three.yaml")
            .unwrap()
            .system;
        let base = std::env::temp_dir().join(leftovers::instance_name() + "-stop-start-test");
        let _removed = Removed(base.clone());
        let be_dirs: Vec<(String, PathBuf)> = ["a", "b", "c"]
            .iter()
            .map(|n| (n.to_string(), base.join(n)))
            .collect();
        for (_, dir) in &be_dirs {
            fs::create_dir_all(dir).unwrap();
            fs::write(dir.join("freezer.state"), "THAWED").unwrap();
        }
        let hierarchy = Hierarchy {
            version: Version::V1,
            freezer_base: base.clone(),
            cpuset_base: Some(base.clone()),
        };
        let events = ModeEvents::default();
        let inputs = Inputs {
            system: &system,
            hierarchy: &hierarchy,
            tasks: Vec::new(),
            be_dirs: be_dirs.clone(),
            notice: None,
            live: Default::default(),
            events: events.clone(),
            epoch_ns: 0,
            signal_fired: Arc::new(|_| {}),
            loop_wake: Arc::new(Wakeup::new().unwrap()),
        };
        let mut worker = Worker::new(inputs, Arc::new(Mutex::new(running(false)))).unwrap();
        let state = |n: &str| fs::read_to_string(base.join(n).join("freezer.state")).unwrap();
        let suspended = worker.suspend("test");
        let frozen: Vec<String> = ["a", "b", "c"].iter().map(|n| state(n)).collect();
        let resumed = worker.resume("test");
        let thawed: Vec<String> = ["a", "b", "c"].iter().map(|n| state(n)).collect();
        assert!(suspended.error.is_none() && resumed.error.is_none());
        assert_eq!(order(&events, true), ["c", "a", "b"]);
        assert_eq!(order(&events, false), ["b", "a", "c"]);
        assert_eq!(frozen, ["FROZEN"; 3]);
        assert_eq!(thawed, ["THAWED"; 3]);
    }

    /// Two rt partitions and a best-effort one, suspended in the order `nav`, `hmi`,
    /// `ctl` (none in the description's order).
    const MIXED: &str = "
system: {cpus: 0-2}
partitions:
  - {name: hmi, cpus: 1, processes: [{cmd: hmi}]}
  - name: ctl
    kind: rt
    cpus: 0
    scheduler: edf
    tasks: [{name: loop, cmd: loop, budget: 1ms, period: 10ms}]
  - name: nav
    kind: rt
    cpus: 2
    scheduler: edf
    tasks: [{name: map, cmd: map, budget: 1ms, period: 10ms}]
stop_start: {order: [nav, hmi, ctl], ack_deadline: 1ms}
";

    /// The rt tasks of [`MIXED`] as the worker gets them (real control blocks whose
    /// tasks never acknowledge), and their pids (ones no process has).
    fn mixed_tasks() -> (Vec<StopStartTask>, LiveTasks) {
        let (mut tasks, mut live) = (Vec::new(), Vec::new());
        for (i, (partition, task)) in [("ctl", "loop"), ("nav", "map")].into_iter().enumerate() {
            let spec = bulkhead_task::link::LinkSpec {
                name: task.into(),
                task_index: i as u32,
                budget_ns: 1_000_000,
                period_ns: 10_000_000,
                deadline_ns: 10_000_000,
                epoch_ns: 0,
                ring_depth: 4,
            };
            let link = bulkhead_task::link::TaskLink::create(&spec).unwrap();
            tasks.push(StopStartTask {
                partition: partition.into(),
                task: task.into(),
                port: link.stop_start_port().unwrap(),
                judged_from: Default::default(),
            });
            let pid = 1 << 30 | i as u32;
            live.push(crate::tasks::TaskSummary::new(
                partition,
                task,
                pid,
                "SCHED_DEADLINE",
            ));
        }
        (tasks, Arc::new(Mutex::new(live)))
    }

    /// The worker of [`MIXED`] on the fake host `fake`; `own`: rt tasks frozen in their
    /// own cgroups.
    fn mixed_worker(fake: &Fake, own: bool) -> Result<Worker, RunError> {
        let system = bulkhead_model::load_str(MIXED, "mixed.yaml")
            .unwrap()
            .system;
        let (tasks, live) = mixed_tasks();
        let inputs = Inputs {
            system: &system,
            hierarchy: &Hierarchy::v2_at(Path::new("/fake"), true),
            tasks,
            be_dirs: vec![("hmi".into(), PathBuf::from("/fake/hmi"))],
            notice: None,
            live,
            events: ModeEvents::default(),
            epoch_ns: 0,
            signal_fired: Arc::new(|_| {}),
            loop_wake: Arc::new(Wakeup::new().unwrap()),
        };
        let shared = Arc::new(Mutex::new(running(false)));
        Worker::with(inputs, shared, fake.freezers(), own)
    }

    /// The freezes, thaws, joins and releases among `calls`, in their order.
    fn freezer_steps(calls: &[Call]) -> Vec<String> {
        let step = |c: &Call| match c {
            Call::Join { freezer, pids } => Some(format!("join {freezer} {pids:?}")),
            Call::FreezeGroup { freezer } => Some(format!("freeze {freezer}")),
            Call::ThawGroup { freezer } => Some(format!("thaw {freezer}")),
            Call::ReleaseFreezers => Some("release".into()),
            _ => None,
        };
        calls.iter().filter_map(step).collect()
    }

    /// A suspend brings each rt partition's tasks into its freezer cgroup (a restarted
    /// task has a new pid) and freezes the partitions in `stop_start.order`, rt and
    /// best-effort alike; a resume thaws them in reverse; the end releases the cgroups.
    #[test]
    fn rt_and_be_partitions_freeze_in_the_configured_order_and_thaw_in_reverse() {
        let fake = Fake::default();
        let mut worker = mixed_worker(&fake, false).unwrap();
        let created: Vec<Call> = ["p0-nav", "/fake/hmi", "p2-ctl"]
            .map(|name| Call::AddFreezer { name: name.into() })
            .into();
        assert_eq!(fake.calls()[..3], created[..], "one freezer per partition");
        assert_eq!(fake.freezers_left(), 2, "the rt partitions' cgroups");
        let started = fake.calls().len();
        assert!(worker.suspend("test").error.is_none());
        assert!(worker.resume("test").error.is_none());
        drop(worker);
        let steps = freezer_steps(&fake.calls()[started..]);
        let (nav, ctl) = (1 << 30 | 1, 1 << 30);
        let expected = [
            format!("join p0-nav [{nav}]"),
            "freeze p0-nav".into(),
            "join /fake/hmi []".into(),
            "freeze /fake/hmi".into(),
            format!("join p2-ctl [{ctl}]"),
            "freeze p2-ctl".into(),
            "thaw p2-ctl".into(),
            "thaw /fake/hmi".into(),
            "thaw p0-nav".into(),
            "release".into(),
        ];
        assert_eq!(steps, expected);
        assert_eq!(fake.freezers_left(), 0);
    }

    /// On pure v2 the rt tasks are frozen in their own cgroups: nothing is created.
    #[test]
    fn with_the_cpuset_in_the_freezer_hierarchy_rt_tasks_freeze_in_their_own_cgroups() {
        let fake = Fake::default();
        let worker = mixed_worker(&fake, true).unwrap();
        let names: Vec<Call> = ["own", "/fake/hmi", "own"]
            .map(|name| Call::AddFreezer { name: name.into() })
            .into();
        assert_eq!(fake.calls()[..3], names[..]);
        assert_eq!(fake.freezers_left(), 0);
        drop(worker);
    }

    /// A freezer cgroup that cannot be created half-way fails the start with the
    /// cgroup named, and the cgroups created before it are released.
    #[test]
    fn a_freezer_that_cannot_be_created_releases_those_created_before() {
        let fake = Fake::failing(|c| matches!(c, Call::AddFreezer { name } if name == "p2-ctl"));
        let e = mixed_worker(&fake, false).err().expect("fails");
        assert!(
            e.to_string()
                .contains("stop-start: cannot create cgroup /fake/AddFreezer"),
            "{e}"
        );
        let steps = freezer_steps(&fake.calls());
        assert_eq!(
            steps.last().map(String::as_str),
            Some("release"),
            "{steps:?}"
        );
        assert_eq!(fake.freezers_left(), 0, "p0-nav removed");
    }

    fn running(held: bool) -> Snapshot {
        Snapshot {
            phase: Phase::Running,
            cycles: 0,
            last_suspend_ns: None,
            last_resume_ns: None,
            held,
        }
    }

    #[test]
    fn a_suspend_trigger_during_a_mode_switch_suspends_once_the_switch_is_over() {
        let mut s = running(true);
        let (job, pending) = on_trigger(SUSPEND_WHEN, &mut s);
        assert!(job.is_none() && pending, "waits for the switch");
        assert_eq!(s.phase, Phase::Running);
        // Passed again while the switch lasts, then once it is over.
        assert!(matches!(on_trigger(SUSPEND_WHEN, &mut s), (None, true)));
        s.held = false;
        let (job, pending) = on_trigger(SUSPEND_WHEN, &mut s);
        assert!(matches!(job, Some(Job::Suspend(None, "suspend_when"))) && !pending);
        assert_eq!(s.phase, Phase::Suspending);
    }

    #[test]
    fn a_trigger_the_phase_does_not_allow_starts_nothing_and_is_not_kept() {
        let mut s = running(false);
        assert!(matches!(on_trigger(RESUME_WHEN, &mut s), (None, false)));
        for phase in [Phase::Suspending, Phase::Suspended, Phase::Resuming] {
            s.phase = phase;
            assert!(matches!(on_trigger(SUSPEND_WHEN, &mut s), (None, false)));
            assert_eq!(s.phase, phase);
        }
        s.phase = Phase::Suspended;
        let (job, _) = on_trigger(RESUME_WHEN, &mut s);
        assert!(matches!(job, Some(Job::Resume(None, "resume_when"))));
        assert_eq!(s.phase, Phase::Resuming);
    }
}
