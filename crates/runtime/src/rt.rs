//! The rt partitions of a run: admitted by analysis, started with their
//! reservations of `bulkhead-os` (`tasks`), and drained by a thread of their own while
//! the window supervisor (or [`wait`], for a system without windows) runs.
//!
//! Preconditions: root (or CAP_SYS_NICE and a writable cpuset hierarchy). Postcondition
//! of [`RtRun::finish`] and of dropping an [`RtRun`]: every task process has been killed
//! and every cgroup it used removed.

use crate::health::SharedHealth;
use crate::housekeeping::Housekeeping;
use crate::isolation::Confinements;
use crate::modes::{ModeEvents, ModeManager};
use crate::tasks::{Epoch, RtOptions, RtPartitions, StopStartTask, TaskSummary};
use crate::wake::Waiter;
use crate::{leftovers, CgroupsUnusable, LiveTasks, RunError, RunOptions, Unrunnable};
use bulkhead_model::{CpuSet, Partition, PartitionKind, System, Task};
use bulkhead_os::cpuset;
use bulkhead_os::event::Wakeup;
use bulkhead_os::netdev::IsolatedInterface;
use bulkhead_os::proc::Process;
use bulkhead_plan::Programs;
use bulkhead_trace::schedule_log::ScheduleLogWriter;
use bulkhead_trace::{perfetto, Event};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the tasks' trace rings are drained. The drain thread is woken sooner by
/// the exit of a task process (its pidfd), a late job its task library reports (the
/// task link's wake eventfd) and a health decision for it (its wakeup).
const DRAIN_PERIOD: Duration = Duration::from_millis(10);
/// The least time between two drains: a task that notifies its wake eventfd over and
/// over (it holds the descriptor) makes the drain thread run at most this often.
const DRAIN_GAP: Duration = Duration::from_millis(1);
/// Release 0 of every task lies at least this far after the last task attached to the
/// task library ([`Epoch::after_attach_ns`]): room for a reservation to repay what its
/// start-up overran. With 50 ms the gateway writer of `stop-start-triggers` (100 µs per
/// 2 ms) still missed one of its first 11 jobs by 6-32 ms in 6 of 9 conformance runs on
/// a loaded machine (a SCHED_DEADLINE task overruns by up to a tick and repays it at its
/// bandwidth); with 200 ms in none of 8.
const START_DELAY_NS: u64 = 200_000_000;
/// The longest the tasks are given to attach ([`Epoch::attach_within`]): a program
/// starts under its own reservation (a gateway writer of 100 µs per 2 ms took up to
/// 230 ms on a loaded machine); one that does not use the task library delays the
/// start by this much.
const ATTACH_WITHIN: Duration = Duration::from_secs(2);
/// Release 0 of every task is a multiple of this on CLOCK_MONOTONIC (10 ms: a multiple
/// of the periods of 1, 2, 2.5 and 5 ms), so that an input from outside the system, such
/// as a CAN frame generator on a grid of its own (`bulkhead can gen --phase`), can keep
/// a known phase to the tasks' releases. A pipeline's four-slot source that samples an
/// input of its own rate loses a message whenever the input's jitter moves a frame
/// across the source's release; the phase decides how much jitter that takes.
const EPOCH_GRID_NS: u64 = 10_000_000;

/// What the drain thread ended with: per-task figures, and the errors of the schedule
/// log and the trace when it owned them (a run without windows).
pub struct Drained {
    pub summaries: Vec<TaskSummary>,
    pub log_error: Option<std::io::Error>,
    pub trace_error: Option<std::io::Error>,
}

/// The schedule log and the Perfetto trace of a run, written as events come: by the
/// drain thread alone (a run without windows), or by it and the window supervisor
/// (behind a [`SharedOutputs`] mutex). The memory they hold is the trace's open
/// slices, not the events.
pub struct Outputs {
    log: Option<ScheduleLogWriter<BufWriter<File>>>,
    trace: Option<perfetto::Writer<BufWriter<File>>>,
    /// The first write error of the log; later log writes are skipped.
    log_error: Option<std::io::Error>,
}

/// The outputs of a run with windows, shared by the supervisor and the drain thread.
pub type SharedOutputs = Arc<Mutex<Outputs>>;

impl Outputs {
    /// Writes to the schedule log `log` and the trace `trace` (if given). Fails if the
    /// start of the trace cannot be written.
    pub fn new(log: Option<File>, trace: Option<File>) -> std::io::Result<Outputs> {
        Ok(Outputs {
            log: log.map(|f| ScheduleLogWriter::new(BufWriter::new(f))),
            trace: trace
                .map(|f| perfetto::Writer::new(BufWriter::new(f)))
                .transpose()?,
            log_error: None,
        })
    }

    /// Writes `event` to each output; an error is kept for [`Outputs::finish`].
    pub fn put(&mut self, event: &Event) {
        self.log(event);
        self.trace(event);
    }

    /// Writes `event` to the schedule log only.
    pub fn log(&mut self, event: &Event) {
        if let (Some(log), None) = (&mut self.log, &self.log_error) {
            if let Err(e) = log.write(event) {
                self.log_error = Some(e);
            }
        }
    }

    /// Adds `event` to the trace only.
    pub fn trace(&mut self, event: &Event) {
        if let Some(trace) = &mut self.trace {
            trace.add(event);
        }
    }

    /// Whether a trace is written (events for it only need not be made otherwise).
    pub fn tracing(&self) -> bool {
        self.trace.is_some()
    }

    /// Flushes the log and ends the trace: the errors of the log and of the trace.
    pub fn finish(mut self) -> (Option<std::io::Error>, Option<std::io::Error>) {
        if let (Some(log), None) = (&mut self.log, &self.log_error) {
            self.log_error = log.flush().err();
        }
        let trace_error = self.trace.and_then(|t| t.finish().err());
        (self.log_error, trace_error)
    }
}

/// Where the drain thread puts job events as it drains them: its own outputs (a run
/// without windows, whose outputs hold only these events, on the tasks' time axis), or
/// the window supervisor's, on the schedule's time axis: event times are moved from
/// release 0 (`epoch_ns`) to schedule time 0 (`origin`, CLOCK_MONOTONIC ns, set by the
/// supervisor when the schedule starts). Events drained before the schedule started
/// wait in `pending` (they are few: the schedule starts once the processes are spawned
/// and initialized). Memory stays flat over a run.
pub struct Sink {
    outputs: Target,
    epoch_ns: u64,
    pending: Vec<Event>,
    /// The run's health monitor: fed the drained misses, its events written here.
    pub health: Option<SharedHealth>,
    /// Wakes the drain thread: a restart the monitor decided, the run's stop.
    pub wakeup: Option<Arc<Wakeup>>,
}

enum Target {
    Own(Box<Outputs>),
    Shared {
        outputs: SharedOutputs,
        origin: Arc<AtomicU64>,
    },
}

impl Sink {
    /// A sink writing to outputs of its own.
    pub fn own(outputs: Outputs) -> Sink {
        Sink {
            outputs: Target::Own(Box::new(outputs)),
            epoch_ns: 0,
            pending: Vec::new(),
            health: None,
            wakeup: None,
        }
    }

    /// A sink writing to the window supervisor's `outputs`, once `origin` (schedule
    /// time 0 on CLOCK_MONOTONIC, 0 until then) is known.
    pub fn shared(outputs: SharedOutputs, origin: Arc<AtomicU64>) -> Sink {
        Sink {
            outputs: Target::Shared { outputs, origin },
            epoch_ns: 0,
            pending: Vec::new(),
            health: None,
            wakeup: None,
        }
    }

    fn put(&mut self, event: Event) {
        match &mut self.outputs {
            Target::Own(outputs) => outputs.put(&event),
            Target::Shared { outputs, origin } => {
                let origin = origin.load(Ordering::Acquire);
                self.pending.push(event);
                if origin == 0 {
                    return;
                }
                let mut outputs = outputs.lock().unwrap_or_else(|e| e.into_inner());
                for mut e in self.pending.drain(..) {
                    e.t_ns = (e.t_ns + self.epoch_ns).saturating_sub(origin);
                    outputs.put(&e);
                }
            }
        }
    }

    fn finish(mut self, summaries: Vec<TaskSummary>) -> Drained {
        let (log_error, trace_error) = match self.outputs {
            Target::Own(outputs) => outputs.finish(),
            Target::Shared { outputs, origin } => {
                // A schedule that never started: the events keep the tasks' time axis.
                let origin = match origin.load(Ordering::Acquire) {
                    0 => self.epoch_ns,
                    t => t,
                };
                let mut outputs = outputs.lock().unwrap_or_else(|e| e.into_inner());
                for mut e in self.pending.drain(..) {
                    e.t_ns = (e.t_ns + self.epoch_ns).saturating_sub(origin);
                    outputs.put(&e);
                }
                (None, None)
            }
        };
        Drained {
            summaries,
            log_error,
            trace_error,
        }
    }
}

/// Running rt partitions and the thread that drains them.
pub struct RtRun {
    /// CLOCK_MONOTONIC time of release 0; event times count from it.
    pub epoch_ns: u64,
    stop: Arc<AtomicBool>,
    /// Wakes the drain thread (to stop).
    wakeup: Arc<Wakeup>,
    all_exited: Arc<AtomicBool>,
    /// Per-task figures, refreshed at each drain (for the control socket's `status`).
    pub live: LiveTasks,
    /// The mode manager of a system with modes, until the control socket takes it.
    pub modes: Option<ModeManager>,
    /// Every task's stop-start words, until the stop-start manager takes them.
    pub stop_start: Vec<StopStartTask>,
    /// The mode and stop-start events, which the drain thread moves to the outputs.
    pub events: ModeEvents,
    /// The rt CPUs' cpusets, smallest first ([`crate::tasks::RtPartitions::cpusets`]).
    pub cpusets: Vec<(CpuSet, PathBuf)>,
    thread: Option<JoinHandle<Drained>>,
    /// Kernel work moved off the rt CPUs; restored when this is dropped, after the
    /// drain thread stopped the tasks.
    _housekeeping: Option<Housekeeping>,
}

/// True if `system` has rt partitions with tasks.
pub fn has_rt(system: &System) -> bool {
    system
        .partitions
        .iter()
        .any(|p| p.kind == PartitionKind::Rt && !p.tasks.is_empty())
}

/// Repairs what a killed bulkhead left: CAN interfaces in its namespaces, housekeeping
/// settings, and on the cpuset hierarchy (v1) processes confined off rt CPUs by a shield
/// and a top cpuset without load balancing. Returns warnings.
pub fn clean_leftovers() -> Vec<String> {
    let mut warnings = IsolatedInterface::restore_stale();
    warnings.extend(Housekeeping::restore_stale());
    let Ok(h) = cpuset::detect() else {
        return warnings;
    };
    warnings.extend(cpuset::release_stale_shields(h.mount()));
    if let Err(e) = cpuset::restore_root_if_unused(h.mount()) {
        warnings.push(format!("restoring the top cpuset: {e}"));
    }
    warnings
}

/// Admits `system`'s rt partitions and starts them (`RtPartitions::start` does both: a
/// failing task is an [`RunError::Invalid`] naming it and the test, and nothing is left
/// started); `None` when the system has none.
pub fn start(
    system: &System,
    options: &RunOptions,
    programs: &Programs,
    cpuset_base: Option<&Path>,
    confinements: &Confinements,
    mut sink: Sink,
    warnings: &mut Vec<String>,
) -> Result<Option<RtRun>, RunError> {
    if !has_rt(system) {
        return Ok(None);
    }
    let workdir = &options.workdir;
    let hierarchy = cpuset::detect().map_err(|e| RunError::Cgroups(CgroupsUnusable::Cpuset(e)))?;
    let rt_options = RtOptions {
        instance: instance_path(hierarchy.mount(), cpuset_base)?,
        epoch: Epoch {
            after_attach_ns: START_DELAY_NS,
            grid_ns: EPOCH_GRID_NS,
            attach_within: ATTACH_WITHIN,
        },
        workdir: workdir.to_path_buf(),
        programs: programs.clone(),
        ring_depth: 4096,
        shield: false,
    };
    let confine = |p: &Partition, t: &Task| confinements.of_task(p, t);
    let rt = RtPartitions::start_confined(system, &rt_options, &confine).map_err(|e| {
        match e.is_invalid() {
            true => RunError::Invalid(Unrunnable::Reserve(e)),
            false => RunError::reserve("rt partitions", e),
        }
    })?;
    warnings.extend(rt.unattached().iter().map(|t| {
        format!(
            "task `{t}` did not attach to the task library within {} s: release 0 was \
             fixed without it (its program runs, but no job of it is seen)",
            ATTACH_WITHIN.as_secs()
        )
    }));
    let epoch_ns = rt.epoch_ns();
    sink.epoch_ns = epoch_ns;
    if let Some(h) = &sink.health {
        crate::health::lock(h).set_epoch(epoch_ns);
    }
    let housekeeping = match options.isolate_housekeeping {
        true => Some(isolate_housekeeping(
            &rt.cpus(),
            options.housekeeping_cpus.as_ref(),
            warnings,
        )?),
        false => None,
    };
    let mode_events = ModeEvents::default();
    let modes = match system.modes {
        Some(_) => {
            let ports = rt
                .mode_ports()
                .map_err(|e| RunError::reserve("mode agents", e))?;
            let analysis = rt.machine_options();
            let cpus = rt.cpus();
            let events = mode_events.clone();
            let manager =
                ModeManager::start(system, analysis, ports, epoch_ns, cpus.as_ref(), events)
                    .map_err(|e| RunError::io("mode agents", e))?;
            Some(manager)
        }
        None => None,
    };
    let stop_start = rt
        .stop_start_ports()
        .map_err(|e| RunError::reserve("stop-start", e))?;
    let events = mode_events.clone();
    let cpusets = rt.cpusets();
    let stop = Arc::new(AtomicBool::new(false));
    let all_exited = Arc::new(AtomicBool::new(false));
    let live = LiveTasks::new(Mutex::new(rt.summaries()));
    let wakeup = match sink.wakeup.clone() {
        Some(w) => w,
        None => Arc::new(Wakeup::new().map_err(|e| RunError::io("eventfd", e))?),
    };
    let waiter = Waiter::new(wakeup.clone()).map_err(|e| RunError::io("epoll", e))?;
    let (s, a, l) = (stop.clone(), all_exited.clone(), live.clone());
    let thread = std::thread::Builder::new()
        .name("bulkhead-rt-drain".into())
        .spawn(move || {
            let flags = Flags {
                stop: &s,
                all_exited: &a,
            };
            drain_until_stopped(rt, sink, waiter, &mode_events, flags, &l)
        })
        .map_err(|e| RunError::io("rt drain thread", e))?;
    Ok(Some(RtRun {
        epoch_ns,
        stop,
        wakeup,
        all_exited,
        live,
        modes,
        stop_start,
        events,
        cpusets,
        thread: Some(thread),
        _housekeeping: housekeeping,
    }))
}

/// Moves kernel work off `only` (every rt CPU when `None`), which must be rt CPUs; what
/// could not be moved becomes a warning.
fn isolate_housekeeping(
    rt_cpus: &Option<CpuSet>,
    only: Option<&CpuSet>,
    warnings: &mut Vec<String>,
) -> Result<Housekeeping, RunError> {
    let rt_cpus = rt_cpus
        .as_ref()
        .ok_or_else(|| RunError::invalid("housekeeping isolation: no rt CPU"))?;
    let cpus = only.unwrap_or(rt_cpus);
    if let Some(c) = cpus.iter().find(|c| !rt_cpus.contains(*c)) {
        return Err(RunError::invalid(format!(
            "housekeeping isolation: CPU {c} is not an rt partition's CPU (those are {rt_cpus})"
        )));
    }
    let hk = Housekeeping::isolate(cpus)
        .map_err(|e| RunError::Invalid(Unrunnable::Reserve(e.into())))?;
    warnings.extend(hk.warnings().iter().cloned());
    Ok(hk)
}

/// The rt instance: nested under bulkhead's own cpuset cgroup (`cpuset_base`; at the
/// top of the cpuset mount when the windows have no cpuset), named like the window
/// instance so that leftover cleanup recognises it. A `cpuset_base` outside the
/// cpuset mount the reservations use (the two cgroup detectors disagree) is an error.
fn instance_path(mount: &Path, cpuset_base: Option<&Path>) -> Result<PathBuf, RunError> {
    let parent = match cpuset_base {
        None => Path::new(""),
        Some(b) => b.strip_prefix(mount).map_err(|_| {
            RunError::Cgroups(CgroupsUnusable::Outside {
                base: b.to_path_buf(),
                mount: mount.to_path_buf(),
            })
        })?,
    };
    Ok(parent.join(leftovers::instance_name()))
}

/// What the drain thread shares with the run: the run's stop, and whether every task
/// exited.
struct Flags<'a> {
    stop: &'a AtomicBool,
    all_exited: &'a AtomicBool,
}

/// Drains the tasks every [`DRAIN_PERIOD`], and at once (but [`DRAIN_GAP`] apart at
/// least) when a task process exits, a task reports a late job, or the health monitor
/// routes a restart to the thread (`waiter`), until the run stops.
fn drain_until_stopped(
    mut rt: RtPartitions,
    mut sink: Sink,
    mut waiter: Waiter,
    mode_events: &ModeEvents,
    Flags { stop, all_exited }: Flags<'_>,
    live: &LiveTasks,
) -> Drained {
    let health = sink.health.clone();
    let mut exits = Vec::new();
    for fd in rt.wake_fds() {
        // Not watched: the task's late jobs are seen at the next drain.
        let _ = waiter.watch(fd);
    }
    let mut last = Instant::now();
    while !stop.load(Ordering::Acquire) {
        watch_exits(&rt, &waiter, &mut exits);
        waiter.wait(DRAIN_PERIOD);
        std::thread::sleep(DRAIN_GAP.saturating_sub(last.elapsed()));
        last = Instant::now();
        rt.clear_wakes();
        rt.drain(&mut |e| {
            if let Some(h) = &health {
                crate::health::job_event(h, &e);
            }
            sink.put(e)
        });
        put_mode_steps(mode_events, &mut sink);
        if let Some(h) = &health {
            // Reaps first, so that the exits reach the monitor and a restart it decides
            // comes before the run looks whether every task exited.
            rt.all_exited();
            crate::health::serve_rt(h, &mut rt);
            let events = crate::health::lock(h).take_events();
            events.into_iter().for_each(|e| sink.put(e));
        }
        *live.lock().unwrap_or_else(|e| e.into_inner()) = rt.summaries();
        if rt.all_exited() {
            all_exited.store(true, Ordering::Release);
        }
    }
    put_mode_steps(mode_events, &mut sink);
    let summaries = rt.stop(&mut |e| sink.put(e));
    sink.finish(summaries)
}

/// Keeps `watched` (a pidfd per task process, watched by `waiter`) the running task
/// processes of `rt`: a process seen to exit (reaped) or replaced by a restart is
/// dropped, a new one opened. A process that cannot be opened is seen at the next
/// drain.
fn watch_exits(rt: &RtPartitions, waiter: &Waiter, watched: &mut Vec<(u32, Process)>) {
    let running = rt.running_pids();
    // Closing a pidfd removes it from the epoll set.
    watched.retain(|(pid, _)| running.contains(pid));
    for pid in running {
        if watched.iter().any(|(p, _)| *p == pid) {
            continue;
        }
        if let Ok(Some(process)) = Process::open(pid) {
            if waiter.watch(process.fd()).is_ok() {
                watched.push((pid, process));
            }
        }
    }
}

/// Moves the mode manager's steps recorded since the last drain into `sink`, so that
/// they reach a streamed schedule log (near their time) as well as a trace.
fn put_mode_steps(mode_events: &ModeEvents, sink: &mut Sink) {
    let steps = std::mem::take(&mut *mode_events.lock().unwrap_or_else(|e| e.into_inner()));
    steps.into_iter().for_each(|e| sink.put(e));
}

impl RtRun {
    /// True once every task process has exited.
    pub fn all_exited(&self) -> bool {
        self.all_exited.load(Ordering::Acquire)
    }

    /// Stops every task, removes the cgroups, and returns what was drained.
    /// The mode manager (its agents) stops first, so that no agent acts on a task
    /// being stopped.
    pub fn finish(mut self) -> Drained {
        self.modes = None;
        self.join().unwrap_or_else(|| Drained {
            summaries: Vec::new(),
            log_error: None,
            trace_error: Some(std::io::Error::other("the rt drain thread failed")),
        })
    }

    fn join(&mut self) -> Option<Drained> {
        self.stop.store(true, Ordering::Release);
        self.wakeup.notify();
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for RtRun {
    fn drop(&mut self) {
        self.modes = None;
        self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rt_instance_nests_under_bulkheads_cpuset_cgroup() {
        let mount = Path::new("/sys/fs/cgroup/cpuset");
        let path = instance_path(mount, Some(&mount.join("system.slice/x"))).unwrap();
        assert!(
            path.to_string_lossy()
                .starts_with("system.slice/x/bulkhead-"),
            "{path:?}"
        );
        let top = instance_path(mount, None).unwrap();
        assert!(top.to_string_lossy().starts_with("bulkhead-"), "{top:?}");
    }

    #[test]
    fn a_cpuset_cgroup_outside_the_reservations_mount_is_an_error() {
        let mount = Path::new("/sys/fs/cgroup/cpuset");
        let e = instance_path(mount, Some(Path::new("/sys/fs/cgroup/unified/x"))).unwrap_err();
        assert!(
            e.to_string().contains("/sys/fs/cgroup/unified/x")
                && e.to_string().contains("/sys/fs/cgroup/cpuset"),
            "{e}"
        );
    }
}
