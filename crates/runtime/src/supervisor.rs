//! The supervisor: spawns the processes into their cgroups and drives the window
//! state machine ([`bulkhead_windows::Machine`]) from a timerfd in the one event loop
//! ([`crate::event_loop`]).

use crate::control::Control;
use crate::event_loop::{EventLoop, Wake};
use crate::health::{lock, Health, Managers, SharedHealth};
use crate::isolation::Confinements;
use crate::limits;
use crate::links::Links;
use crate::modes::ModeManager;
use crate::output::{Output, Relay};
use crate::requests::SharedRequests;
use crate::rt::{self, RtRun};
use crate::spawn::{self, Environment, Prepared};
use crate::tasks::TaskSummary;
use crate::unwindowed::{UnwindowedKeeper, UnwindowedRun};
use crate::wake::Wakers;
use crate::{leftovers, CgroupsUnusable, RunError, RunOptions, Unrunnable};
use bulkhead_model::{CpuSet, Nanos, System};
use bulkhead_os::cgroup::{self, CgroupManager, Hierarchy, Partition, Process};
use bulkhead_os::clock::now_ns as monotonic_ns;
use bulkhead_os::event::{self, Timer, Wakeup};
use bulkhead_os::sched::Realtime;
use bulkhead_plan::programs::{Host, Programs, Site};
use bulkhead_trace::{Event as TraceEvent, EventKind, GrantEnd as TraceStop};
use bulkhead_windows::{Action, Config, Event, Grant, Machine, Phase, Schedule, StopReason};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub reason: StopReason,
    /// Grants made (schedule-log `run` lines).
    pub grants: u64,
    /// Windows started.
    pub windows: u64,
    /// From the start of [`crate::run`] to schedule time 0 (after the init phase).
    pub startup: Duration,
    /// File descriptors the supervisor held at schedule start beyond those it had before.
    pub fds_held: usize,
    /// Non-fatal problems (leftovers removed, processes that failed, ...).
    pub warnings: Vec<String>,
    /// Exits that fail the run: a process of an SC partition or a `required` process
    /// that ended before the stop (rt tasks report theirs in [`Outcome::rt_tasks`]).
    pub errors: Vec<String>,
    /// Per-task figures of the rt partitions (jobs, worst response, misses).
    pub rt_tasks: Vec<TaskSummary>,
}

struct Proc {
    pid: i32,
    cgroup: Process,
    /// The supervisor's end of the channel; `None` once the other end closed.
    channel: Option<OwnedFd>,
    /// What a v1 child reads until it execs (shared memory): freed after it died.
    memory: Option<spawn::ChildMemory>,
    /// Blocked in the client library after a completion: release it at its next thaw.
    blocked: bool,
    reaped: bool,
    /// Its wait status once reaped.
    status: Option<i32>,
    exited: bool,
}

/// Everything a run owns; dropping it kills the processes and removes the cgroups.
///
/// Field order matters: `Drop` first waits until every process is dead; the
/// commands and environments (`plans`, `envs`) and each process's spawn memory,
/// which a v1 child reads until it execs, are freed only after that.
struct Run {
    cgroups: Box<dyn CgroupManager>,
    procs: Vec<Proc>,
    partitions: Vec<Partition>,
    plans: Vec<Prepared>,
    envs: Vec<Environment>,
    /// Per partition: the cgroup directory holding its memory limit, if it has one.
    memory: Vec<Option<PathBuf>>,
}

impl Drop for Run {
    fn drop(&mut self) {
        for p in &mut self.procs {
            p.channel = None;
        }
        self.cgroups.kill_all();
        // Wait until every process cgroup is empty; kill again what is still
        // populated now and then (a member may have forked while being killed).
        // Thousands of killed processes take seconds to exit (their cgroups and
        // memory are released by kernel workers): wait as long as they keep
        // dying, and give up only after STALL without one more dead.
        let mut busy: Vec<usize> = (0..self.procs.len()).collect();
        let mut progress = Instant::now();
        let mut killed = Instant::now();
        while !busy.is_empty() && progress.elapsed() < STALL {
            let before = busy.len();
            let (procs, cgroups) = (&mut self.procs, &self.cgroups);
            // A process not reaped yet is alive: its cgroup is read (for what it forked)
            // only once it is gone, not thousands of files every millisecond.
            busy.retain(|&i| {
                reap(&mut procs[i]);
                !procs[i].reaped || !cgroups.pids(procs[i].cgroup).is_empty()
            });
            if busy.len() < before {
                progress = Instant::now();
            }
            if killed.elapsed() > KILL_AGAIN {
                let procs = &self.procs;
                let again = kill_again(&busy, |i| procs[i].reaped, progress.elapsed());
                for i in again {
                    self.cgroups.kill(self.procs[i].cgroup);
                }
                killed = Instant::now();
            }
            if !busy.is_empty() {
                std::thread::sleep(poll_pause(busy.len()));
            }
        }
        for p in &mut self.procs {
            reap(p);
        }
        if !busy.is_empty() {
            // Not confirmed dead: what they may still read must never be freed.
            for &i in &busy {
                std::mem::forget(self.procs[i].memory.take());
            }
            std::mem::forget(std::mem::take(&mut self.plans));
            std::mem::forget(std::mem::take(&mut self.envs));
        }
        self.procs.clear();
        // A cgroup whose last process died stays busy until the kernel released
        // it: retry as long as cgroups keep going away.
        let mut progress = Instant::now();
        let mut left = self.cgroups.cgroups_left();
        while let Err(e) = self.cgroups.remove() {
            if self.cgroups.cgroups_left() < left {
                left = self.cgroups.cgroups_left();
                progress = Instant::now();
            }
            if progress.elapsed() > STALL {
                eprintln!("bulkhead: warning: {e}");
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// How often the teardown kills again the cgroups of [`kill_again`].
const KILL_AGAIN: Duration = Duration::from_millis(500);

/// Which of the `busy` processes (indices) the teardown kills again, `since_death` after
/// the last one was confirmed dead: those `reaped` whose cgroup still has members
/// (something they forked as they were killed) and, only once none died for
/// [`KILL_AGAIN`], every one still busy. A process not reaped yet got its SIGKILL,
/// which it can neither catch nor ignore: killing its cgroup again while thousands are
/// still exiting (on v1 a freeze, a read of its members and a thaw each) made the
/// teardown of 10,000 partitions redo the whole kill every 500 ms.
fn kill_again(busy: &[usize], reaped: impl Fn(usize) -> bool, since_death: Duration) -> Vec<usize> {
    let stalled = since_death >= KILL_AGAIN;
    busy.iter()
        .copied()
        .filter(|&i| stalled || reaped(i))
        .collect()
}

/// The pause between two looks at `busy` processes in the teardown: 1 ms, longer with
/// many (a look is a `waitpid` each), so that the supervisor's looks take no more than
/// about a tenth of a CPU from the thousands of processes it waits for to exit.
fn poll_pause(busy: usize) -> Duration {
    Duration::from_micros((busy as u64 * 20).clamp(1_000, 50_000))
}

/// How long the teardown waits for one more process to die or cgroup to go away
/// before it gives up.
const STALL: Duration = Duration::from_secs(5);

fn reap(p: &mut Proc) {
    if !p.reaped {
        let r = bulkhead_os::proc::try_wait(p.pid);
        p.reaped = !matches!(r, Ok(None));
        p.status = r.ok().flatten();
    }
}

fn count_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The CPUs this process may run on.
fn own_cpus() -> CpuSet {
    CpuSet::from_cpus(bulkhead_os::sched::own_cpus())
        .unwrap_or_else(|| CpuSet::parse("0").expect("valid"))
}

/// Removes what supervisors that no longer run left behind (killed by SIGKILL, as a
/// run's teardown removes its own): their cgroups with any process still in them, their
/// named channels, the rt partitions' shields, interfaces and workqueue masks, and the
/// CPUFreq settings of their power policies. What belongs to a supervisor that runs is
/// kept (owners are recognised by pid and start time). Without a `hierarchy` (none
/// could be detected) the cgroups are left and the rest is done. Returns one line per
/// thing removed or restored, and per failure.
pub fn clean_leftovers(hierarchy: Option<&Hierarchy>) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(hierarchy) = hierarchy {
        let (removed, failed) = leftovers::clean(hierarchy);
        for dir in removed {
            warnings.push(format!(
                "removed cgroups left by a bulkhead that died: {}",
                dir.display()
            ));
        }
        warnings.extend(failed);
    }
    // After the cgroups (their processes may hold a copy of a dead system's listening
    // socket), before what may wait for another run's lock.
    let sockets = bulkhead_control::remove_stale(Path::new(bulkhead_control::SOCKET_DIR));
    for socket in sockets {
        warnings.push(format!(
            "removed the control socket of a bulkhead that died: {}",
            socket.display()
        ));
    }
    let (channels, failed) = leftovers::clean_channels();
    for name in channels {
        warnings.push(format!(
            "removed channel left by a bulkhead that died: /dev/shm/{}{name}",
            bulkhead_chan::PREFIX
        ));
    }
    warnings.extend(failed);
    warnings.extend(rt::clean_leftovers());
    warnings.extend(crate::power::clean_leftovers());
    warnings
}

/// The descriptors a run of `system` holds at most: four per process or task (a
/// process's channel and freeze file; a task's control block and trace ring, both ends),
/// 64 for the run itself, and what was open before.
fn fds_wanted(system: &System, before: usize) -> u64 {
    let per_partition = system.partitions.iter();
    let programs: usize = per_partition
        .map(|p| p.processes.len() + p.tasks.len())
        .sum();
    4 * programs as u64 + 64 + before as u64
}

/// The descriptors a run of `system` cannot do without: per be process its channel and,
/// through the output relay, the reading ends of its two pipes; 64 for the run itself,
/// and what was open before.
fn fds_needed(system: &System, before: usize, relay: bool) -> u64 {
    let processes: usize = system.partitions.iter().map(|p| p.processes.len()).sum();
    let per_process = if relay { 3 } else { 1 };
    per_process * processes as u64 + 64 + before as u64
}

/// Refuses, before anything starts, a run whose descriptors cannot fit `limit` (the
/// limit [`bulkhead_os::sched::raise_fd_limit`] left in force): it would fail only once
/// the spawning reached the limit, minutes in for 10,000 processes.
fn check_fd_limit(system: &System, before: usize, limit: u64, relay: bool) -> Result<(), RunError> {
    let needed = fds_needed(system, before, relay);
    if needed <= limit {
        return Ok(());
    }
    let processes: usize = system.partitions.iter().map(|p| p.processes.len()).sum();
    let how = match relay {
        true => "a channel and two output pipes each",
        false => "a channel each",
    };
    let raw = match relay && fds_needed(system, before, false) <= limit {
        true => ", or run without the output relay (`bulkhead run --raw-output`: one each)",
        false => "",
    };
    Err(RunError::invalid(format!(
        "{processes} processes need at least {needed} file descriptors ({how}), and the \
         descriptor limit (RLIMIT_NOFILE) is {limit}: raise the hard limit (ulimit -Hn, \
         or run with CAP_SYS_RESOURCE){raw}"
    )))
}

/// The plan's name of the cgroup hierarchy `version`.
pub fn plan_version(version: cgroup::Version) -> bulkhead_plan::CgroupVersion {
    match version {
        cgroup::Version::V1 => bulkhead_plan::CgroupVersion::V1,
        cgroup::Version::V2 => bulkhead_plan::CgroupVersion::V2,
    }
}

/// This machine's cgroups and programs, after every check that refuses `system` before
/// anything starts: the plan's (the cgroups can hold its partitions, its programs
/// resolve, `run` carries out its keys), its CPUs and its suspend-to-RAM trigger.
fn refusals(system: &System, options: &RunOptions) -> Result<(Hierarchy, Host), RunError> {
    let hierarchy = match &options.hierarchy {
        Some(h) => h.clone(),
        None => Hierarchy::detect().map_err(|m| RunError::Cgroups(CgroupsUnusable::Detect(m)))?,
    };
    bulkhead_plan::cgroups::check(system, plan_version(hierarchy.version))
        .map_err(|e| RunError::Invalid(Unrunnable::Unplaceable(e)))?;
    bulkhead_plan::scope::check(system).map_err(|e| RunError::invalid(e.to_string()))?;
    let host = Host::current(&options.workdir);
    resolve_programs(system, &host)?;
    crate::affinity::check(system, &own_cpus())?;
    crate::stop_start::check_suspend_to_ram(system)?;
    Ok((hierarchy, host))
}

/// Runs `system`'s window schedule; see [`crate::run`].
pub fn run(system: &System, options: &RunOptions) -> Result<Outcome, RunError> {
    let launch = Instant::now();
    let fds_before = count_fds();
    let fd_limit = bulkhead_os::sched::raise_fd_limit(fds_wanted(system, fds_before));
    check_fd_limit(system, fds_before, fd_limit, !options.raw_output)?;
    let (hierarchy, host) = refusals(system, options)?;
    let wakers = Wakers::new()?;
    let health = Health::start(system, options.control.is_some(), &wakers)?;
    crate::requests::check_switch_when(system, options.control.is_some())?;
    let mut warnings = clean_leftovers(Some(&hierarchy));
    let mut control = options
        .control
        .as_deref()
        .map(|path| Control::bind(path, &options.name, system))
        .transpose()?;
    let exe = std::env::current_exe().map_err(|e| RunError::io("the path of this program", e))?;
    let mut links = Links::create(system, &exe)?;
    let notice = crate::stop_start::hand_notice(system, options, &mut links)?;
    links.listen(system)?;
    if let Some(c) = control.as_mut() {
        if let Some(h) = &health {
            c.supervise(h.clone());
        }
        c.count_channels(links.described());
        c.hand_status(system, &mut links)?;
    }
    let system = &links.with_commands(system);
    let programs = resolve_programs(system, &host)?;
    let mut confinements = Confinements::prepare(system, &links.env, &programs)?;
    // Dropped after every process is gone: the partitions' last lines come before the
    // caller's summary.
    let relay = (!options.raw_output)
        .then(Relay::start)
        .transpose()
        .map_err(|e| RunError::io("the output relay", e))?;
    links.own_ends(|p| confinements.of(p).identity)?;
    confinements.pass_fds(&links.fds);
    let (mut sink, shared) = outputs(system, options)?;
    sink.health = health.clone();
    sink.wakeup = Some(wakers.drain.clone());
    let mut rt = rt::start(
        system,
        options,
        &programs,
        hierarchy.cpuset_base.as_deref(),
        &confinements,
        sink,
        &mut warnings,
    )?;
    if let (Some(c), Some(rt)) = (&mut control, &mut rt) {
        c.follow(rt.live.clone());
        if let Some(modes) = rt.modes.take() {
            c.manage(modes);
        }
    }
    let own = own_cpus();
    let output = relay.as_ref().map(Relay::output);
    let events = rt.as_ref().map(|rt| (rt.events.clone(), rt.epoch_ns));
    let requests = crate::requests::start(system, events);
    let inputs = crate::unwindowed::Inputs {
        confinements: &confinements,
        programs: &programs,
        output: output.as_ref(),
        workdir: &options.workdir,
        health: health.as_ref(),
        requests: Some(&requests),
        rt_cpusets: rt.as_ref().map_or(&[], |rt| rt.cpusets.as_slice()),
    };
    let unwindowed = UnwindowedRun::start(system, &hierarchy, &own, &inputs)?;
    if let (Some(c), Some(f)) = (&mut control, &unwindowed) {
        c.measure_memory(f.memory_dirs());
    }
    let keep = |u| UnwindowedKeeper::keep(u, wakers.keeper.clone());
    let unwindowed = unwindowed.map(keep).transpose()?;
    let started = Started {
        rt,
        unwindowed,
        launch,
        fds_before,
        control,
        health,
        requests,
        wakers,
    };
    if system.windows.is_empty() {
        let stop_start = (&hierarchy, notice);
        return run_windowless(system, started, stop_start, options, warnings);
    }
    let windowed = Windowed {
        hierarchy: &hierarchy,
        programs: &programs,
        confinements: &confinements,
        output: output.as_ref(),
        own: &own,
        fd_limit,
        shared: shared.expect("a run with windows shares its outputs"),
    };
    run_windowed(system, started, windowed, options, warnings)
}

/// A system without windows, its rt and unwindowed be partitions `started`: pins the
/// supervisor, hands the control socket its stop-start manager and runs the services.
fn run_windowless(
    system: &System,
    mut started: Started,
    (hierarchy, notice): (
        &Hierarchy,
        Option<bulkhead_client::stop_start::NoticeWriter>,
    ),
    options: &RunOptions,
    mut warnings: Vec<String>,
) -> Result<Outcome, RunError> {
    crate::affinity::pin(system, &mut warnings);
    if let Some(c) = &mut started.control {
        let (rt, unwindowed) = (started.rt.as_mut(), started.unwindowed.as_ref());
        let loop_side = (started.requests.clone(), started.wakers.services.clone());
        let manager = stop_start(system, hierarchy, rt, unwindowed, notice, loop_side)?;
        c.stop_start(manager);
    }
    run_services(started, options, warnings)
}

/// What the window schedule's processes are started with besides the system.
struct Windowed<'a> {
    hierarchy: &'a Hierarchy,
    programs: &'a Programs,
    confinements: &'a Confinements,
    output: Option<&'a Output>,
    /// The CPUs this process may use.
    own: &'a CpuSet,
    /// The descriptors this process may hold.
    fd_limit: u64,
    /// The schedule log and trace the supervisor writes.
    shared: Shared,
}

/// A system with windows, its rt and unwindowed be partitions `started`: starts the
/// window schedule's processes frozen and drives the schedule until it stops.
fn run_windowed(
    system: &System,
    started: Started,
    w: Windowed<'_>,
    options: &RunOptions,
    mut warnings: Vec<String>,
) -> Result<Outcome, RunError> {
    // In the order `run` made them: dropped in reverse (unwindowed, rt, control).
    let Started {
        launch,
        fds_before,
        health: _,
        requests: _,
        wakers: _,
        mut control,
        rt,
        unwindowed,
    } = started;
    let schedule = Schedule::from_system(system, w.own)
        .map_err(|e| RunError::Invalid(Unrunnable::Schedule(e)))?;
    check_cpus(&schedule)?;
    let plans = plan_commands(&schedule, w.programs, options, w.confinements, w.output)?;
    let mut run = Run {
        plans,
        envs: environments(&schedule, w.confinements),
        cgroups: cgroup::create(
            w.hierarchy,
            &leftovers::instance_name(),
            Some(&schedule_cpus(&schedule).to_string()),
        )
        .map_err(RunError::Cgroup)?,
        procs: Vec::new(),
        partitions: Vec::new(),
        memory: Vec::new(),
    };
    // The freeze file of each process kept open when it fits beside what `run` checked
    // (channel and output pipes); else it is opened at each switch.
    let needed = fds_needed(system, fds_before, w.output.is_some());
    let keep_open = needed + schedule.processes.len() as u64 <= w.fd_limit;
    let power = match &options.power {
        Some(p) => crate::power::Power::start(p, &schedule, &mut warnings)?,
        None => None,
    };
    spawn_all(&mut run, system, &schedule, keep_open, &mut spawn_process)?;
    if let Some(c) = &mut control {
        let names = schedule.partitions.iter().map(|p| p.name.clone());
        let dirs = names.zip(&run.memory);
        c.measure_memory(dirs.filter_map(|(n, m)| Some((n, m.clone()?))));
        c.follow_windows(&schedule);
    }
    crate::affinity::pin(system, &mut warnings);
    crate::affinity::start_apart(system, &schedule_cpus(&schedule));
    let _realtime = options
        .realtime_priority
        .map(|p| enter_realtime(p, &mut warnings));
    let must_run = must_run(system, &schedule);
    let mut sup = Supervisor::new(schedule, options, run, control, w.shared)?;
    sup.must_run = must_run;
    sup.power = power;
    let fds_held = count_fds().saturating_sub(fds_before);
    let reason = sup.run_loop(launch)?;
    if let Some(c) = &mut sup.control {
        c.stop_modes();
    }
    let rt_tasks = rt.map(|rt| rt.finish().summaries).unwrap_or_default();
    sup.finish()?;
    let mut errors = std::mem::take(&mut sup.errors);
    if let Some(unwindowed) = unwindowed {
        let (w, e) = unwindowed.finish();
        warnings.extend(w);
        errors.extend(e);
    }
    if let Some(c) = &mut sup.control {
        sup.warnings.extend(c.take_refused());
    }
    warnings.extend(sup.warnings);
    Ok(Outcome {
        reason,
        grants: sup.grants,
        windows: sup.windows,
        startup: sup.startup,
        fds_held,
        warnings,
        errors,
        rt_tasks,
    })
}

/// Per process of `schedule`: whether its end before the stop fails the run, because
/// its partition is the SC partition of a slice or the process is `required`.
fn must_run(system: &System, schedule: &Schedule) -> Vec<bool> {
    let slices = schedule.windows.iter().flat_map(|w| &w.slices);
    let sc: std::collections::HashSet<usize> = slices.filter_map(|s| s.sc).collect();
    let required = |p: &bulkhead_windows::ProcessSpec| {
        let model = schedule.partitions[p.partition].model_index;
        system.partitions[model].processes[p.index].required
    };
    let must = |p: &bulkhead_windows::ProcessSpec| sc.contains(&p.partition) || required(p);
    schedule.processes.iter().map(must).collect()
}

/// The stop-start manager of a system without windows, over its rt tasks and its
/// unwindowed be partitions.
fn stop_start(
    system: &System,
    hierarchy: &Hierarchy,
    rt: Option<&mut RtRun>,
    unwindowed: Option<&UnwindowedKeeper>,
    notice: Option<bulkhead_client::stop_start::NoticeWriter>,
    (requests, loop_wake): (SharedRequests, Arc<bulkhead_os::event::Wakeup>),
) -> Result<crate::stop_start::StopStartManager, RunError> {
    let (tasks, live, events, epoch_ns) = match rt {
        Some(rt) => (
            std::mem::take(&mut rt.stop_start),
            rt.live.clone(),
            rt.events.clone(),
            rt.epoch_ns,
        ),
        None => (
            Vec::new(),
            Default::default(),
            Default::default(),
            monotonic_ns(),
        ),
    };
    crate::stop_start::StopStartManager::start(crate::stop_start::Inputs {
        system,
        hierarchy,
        tasks,
        be_dirs: unwindowed.map(|f| f.dirs.clone()).unwrap_or_default(),
        notice,
        live,
        events,
        epoch_ns,
        signal_fired: Arc::new(move |index| crate::requests::signal_fired(&requests, index)),
        loop_wake,
    })
}

/// What a system without windows started: rt partitions and unwindowed be partitions.
struct Started {
    rt: Option<RtRun>,
    unwindowed: Option<UnwindowedKeeper>,
    launch: Instant,
    fds_before: usize,
    control: Option<Control>,
    health: Option<SharedHealth>,
    requests: SharedRequests,
    /// Wake the threads of the run on a health decision for them.
    wakers: Wakers,
}

/// A system without windows: runs its rt and best-effort partitions until the timeout,
/// a signal or the exit of every task and process.
fn run_services(
    mut s: Started,
    options: &RunOptions,
    mut warnings: Vec<String>,
) -> Result<Outcome, RunError> {
    if s.rt.is_none() && s.unwindowed.is_none() {
        return Err(RunError::invalid(
            "nothing to run: no windows, no rt tasks and no best-effort processes",
        ));
    }
    let startup = s.launch.elapsed();
    let fds_held = count_fds().saturating_sub(s.fds_before);
    // Without a control socket, the mode manager serves the health monitor alone.
    let mut modes = s.rt.as_mut().and_then(|rt| rt.modes.take());
    let served = Served {
        health: s.health.as_ref(),
        requests: &s.requests,
        modes: modes.as_mut(),
        wakeup: &s.wakers.services,
    };
    let mut all_exited = || {
        s.rt.as_ref().is_none_or(|rt| rt.all_exited())
            && s.unwindowed.as_ref().is_none_or(|f| f.all_exited())
    };
    // The control socket's requests (a resume, a mode change) are served from this
    // loop: under SCHED_FIFO, as the windowed supervisor, they do not wait behind
    // best-effort work on the CPU.
    let realtime = options
        .realtime_priority
        .map(|p| enter_realtime(p, &mut warnings));
    let reason = wait_services(
        &mut all_exited,
        options.timeout,
        options.handle_signals,
        s.control.as_mut(),
        served,
    )?;
    drop(realtime);
    drop(modes);
    if let Some(c) = &mut s.control {
        c.stop_stop_start();
        c.stop_modes();
        warnings.extend(c.take_refused());
    }
    let (w, mut errors) = s
        .unwindowed
        .map(UnwindowedKeeper::finish)
        .unwrap_or_default();
    warnings.extend(w);
    if let Some(why) = s
        .health
        .as_ref()
        .and_then(|h| lock(h).stopped().map(str::to_string))
    {
        errors.push(why);
    }
    let drained = s.rt.map(RtRun::finish);
    let summaries = match drained {
        Some(d) => {
            if let (Some(e), Some(path)) = (d.log_error, &options.schedule_log) {
                return Err(output_error("--schedule-log", path, e));
            }
            if let (Some(e), Some(path)) = (d.trace_error, &options.trace) {
                return Err(output_error("--trace", path, e));
            }
            d.summaries
        }
        None => {
            // No rt drain thread streamed the outputs: the health monitor's events are
            // all there is to write.
            let events = s.health.as_ref().map(|h| lock(h).take_events());
            write_unstreamed(options, &events.unwrap_or_default())?;
            Vec::new()
        }
    };
    Ok(Outcome {
        reason,
        grants: 0,
        windows: 0,
        startup,
        fds_held,
        warnings,
        errors,
        rt_tasks: summaries,
    })
}

/// A window run's outputs and its schedule time 0 on CLOCK_MONOTONIC (0 until the
/// schedule starts), shared with the rt drain thread.
type Shared = (rt::SharedOutputs, Arc<AtomicU64>);

/// The schedule log and trace of a run, created before anything starts, and where the
/// rt partitions' job events go: without windows they are the whole log and trace,
/// streamed by the drain thread; with windows the drain thread streams them into the
/// supervisor's outputs (returned with schedule time 0, set when the schedule starts).
fn outputs(system: &System, options: &RunOptions) -> Result<(rt::Sink, Option<Shared>), RunError> {
    let create = |flag: &str, path: Option<&Path>| {
        path.map(|path| File::create(path).map_err(|e| output_error(flag, path, e)))
            .transpose()
    };
    let log = create("--schedule-log", options.schedule_log.as_deref())?;
    let trace = create("--trace", options.trace.as_deref())?;
    let outputs = rt::Outputs::new(log, trace).map_err(|e| {
        let path = options.trace.as_deref().unwrap_or(Path::new(""));
        output_error("--trace", path, e)
    })?;
    if system.windows.is_empty() {
        return Ok((rt::Sink::own(outputs), None));
    }
    let shared = Arc::new(Mutex::new(outputs));
    let origin = Arc::new(AtomicU64::new(0));
    let sink = rt::Sink::shared(shared.clone(), origin.clone());
    Ok((sink, Some((shared, origin))))
}

/// The error of the output file `path` given to option `flag`.
fn output_error(flag: &str, path: &Path, source: std::io::Error) -> RunError {
    RunError::Output {
        flag: flag.to_string(),
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `events` to `path` as a Perfetto trace, flushed: every write error is returned.
/// The outputs of a run without rt tasks: `events` (the health monitor's) in the
/// schedule log, created empty before the start, and in the trace.
fn write_unstreamed(options: &RunOptions, events: &[TraceEvent]) -> Result<(), RunError> {
    if let Some(path) = &options.schedule_log {
        let err = |e| output_error("--schedule-log", path, e);
        let file = std::fs::OpenOptions::new().append(true).open(path);
        let mut log = bulkhead_trace::schedule_log::ScheduleLogWriter::new(BufWriter::new(
            file.map_err(err)?,
        ));
        for e in events {
            log.write(e).map_err(err)?;
        }
        log.into_inner().flush().map_err(err)?;
    }
    match &options.trace {
        Some(path) => write_trace(path, events),
        None => Ok(()),
    }
}

fn write_trace(path: &Path, events: &[TraceEvent]) -> Result<(), RunError> {
    let err = |e| output_error("--trace", path, e);
    let mut out = BufWriter::new(File::create(path).map_err(err)?);
    bulkhead_trace::perfetto::write(events, &mut out)
        .and_then(|()| out.flush())
        .map_err(err)
}

/// Every CPU a slice of the schedule uses.
fn schedule_cpus(schedule: &Schedule) -> CpuSet {
    let cpus = schedule
        .windows
        .iter()
        .flat_map(|w| &w.slices)
        .flat_map(|s| s.cpus.iter());
    CpuSet::from_cpus(cpus).unwrap_or_else(own_cpus)
}

fn check_cpus(schedule: &Schedule) -> Result<(), RunError> {
    let online = bulkhead_os::host::cpus_online().unwrap_or_default();
    let Ok(online) = CpuSet::parse(&online) else {
        return Ok(());
    };
    for (w, window) in schedule.windows.iter().enumerate() {
        for (s, slice) in window.slices.iter().enumerate() {
            if !slice.cpus.is_subset(&online) {
                return Err(RunError::invalid(format!(
                    "windows[{w}].slices[{s}]: CPUs {} are not all online on this machine (online: {online})",
                    slice.cpus
                )));
            }
        }
    }
    Ok(())
}

/// Resolves the program of every rt task and every process of `system` (before anything
/// is created, so that a missing program is reported with its partition and key path up
/// front; a bulkhead service's task whose command is not set yet is skipped).
fn resolve_programs(system: &System, host: &Host) -> Result<Programs, RunError> {
    Programs::resolve(system, host).map_err(|e| RunError::Invalid(Unrunnable::Program(e)))
}

/// The prepared program of every window process, in the schedule's order.
fn plan_commands(
    schedule: &Schedule,
    programs: &Programs,
    options: &RunOptions,
    confinements: &Confinements,
    output: Option<&Output>,
) -> Result<Vec<Prepared>, RunError> {
    schedule
        .processes
        .iter()
        .map(|p| {
            let partition = &schedule.partitions[p.partition];
            let where_ = || {
                format!(
                    "partition `{}`, process {} (`{}`)",
                    partition.name, p.index, p.cmd
                )
            };
            let site = Site::Process {
                partition: partition.model_index,
                process: p.index,
            };
            let exec = programs
                .get(site)
                .ok_or_else(|| RunError::invalid(format!("{}: the command is empty", where_())))?;
            let plan = Prepared::new(exec, Some(&options.workdir)).map_err(|source| {
                let what = where_();
                RunError::Invalid(Unrunnable::Exec { what, source })
            })?;
            let plan = plan.confined(&confinements.of(&partition.name));
            Ok(plan.labelled(output, &partition.name, p.index))
        })
        .collect()
}

/// Per schedule partition, the environments of its processes without and with an init
/// phase (index `2 * partition + init`).
fn environments(schedule: &Schedule, confinements: &Confinements) -> Vec<Environment> {
    let env = |p: &str, init| Environment::demos(init, &confinements.of(p));
    let per = |p: &bulkhead_windows::PartitionSpec| [env(&p.name, false), env(&p.name, true)];
    schedule.partitions.iter().flat_map(per).collect()
}

/// Spawns process `id` of the schedule with environment `env` into its (frozen) process
/// cgroup `cg`.
type Spawn<'a> = dyn FnMut(&mut Run, usize, usize, Process) -> std::io::Result<spawn::Child> + 'a;

/// Creates the cgroups of the schedule's partitions, in the schedule's order, each with
/// its limits; then, process by process, its frozen cgroup and the process in it
/// (`spawn`). On an error the caller drops `run`, which kills and removes what was made.
fn spawn_all(
    run: &mut Run,
    system: &System,
    schedule: &Schedule,
    keep_open: bool,
    spawn: &mut Spawn<'_>,
) -> Result<(), RunError> {
    for (i, partition) in schedule.partitions.iter().enumerate() {
        let dir_name = cgroup::partition_dir_name(i, &partition.name);
        let cpus = partition.widest_cpus.to_string();
        let cg = run
            .cgroups
            .add_partition(&dir_name, &cpus)
            .map_err(RunError::Cgroup)?;
        let model = &system.partitions[partition.model_index];
        run.memory
            .push(limits::apply(run.cgroups.as_mut(), model, cg)?);
        run.partitions.push(cg);
    }
    for (id, process) in schedule.processes.iter().enumerate() {
        let partition = run.partitions[process.partition];
        let cg = run
            .cgroups
            .add_process(partition, process.index, keep_open)
            .map_err(RunError::Cgroup)?;
        let env = 2 * process.partition + usize::from(process.init);
        let child = spawn(run, id, env, cg).map_err(|source| RunError::Spawn {
            what: format!("`{}`", process.cmd),
            source,
        })?;
        run.procs.push(Proc {
            pid: child.pid,
            cgroup: cg,
            channel: Some(child.channel),
            memory: child.memory,
            blocked: false,
            reaped: false,
            status: None,
            exited: false,
        });
    }
    Ok(())
}

/// Spawns process `id` of `run` with its command and environment `env`.
fn spawn_process(
    run: &mut Run,
    id: usize,
    env: usize,
    cg: Process,
) -> std::io::Result<spawn::Child> {
    let (plan, env) = (&run.plans[id], &run.envs[env]);
    spawn::spawn_into(plan, env, run.cgroups.as_mut(), cg)
}

/// How often a run without windows looks whether its tasks and processes all exited.
const SERVICES_TICK: Duration = Duration::from_millis(10);

/// What the loop of a run without windows serves besides the control socket: the
/// health monitor, the requests from inside, and the mode manager they use when there
/// is no control socket.
struct Served<'a> {
    health: Option<&'a SharedHealth>,
    requests: &'a SharedRequests,
    modes: Option<&'a mut ModeManager>,
    /// Notified by the health monitor when it queues a decision for the loop.
    wakeup: &'a Wakeup,
}

impl Served<'_> {
    /// The managers health actions and requests are carried out with: the control
    /// socket's, else the run's own mode manager.
    fn managers<'m>(&'m mut self, control: Option<&'m mut Control>) -> Managers<'m> {
        match control {
            Some(c) => c.managers(),
            None => Managers {
                modes: self.modes.as_deref_mut(),
                stop_start: None,
            },
        }
    }
}

/// A system without windows: waits in the event loop for `timeout`, SIGINT/SIGTERM
/// (when `signals`), a health action's stop or until `all_exited` (every task and
/// process exited), serving the control socket and the health monitor (its watchdogs,
/// woken by a timer at the next expiry, and the mode switches, suspends and stops its
/// actions request, woken by its wakeup) and, at least every tick, the requests from
/// inside, with the control socket's managers, else the mode manager in `served`.
fn wait_services(
    all_exited: &mut dyn FnMut() -> bool,
    timeout: Option<Duration>,
    signals: bool,
    mut control: Option<&mut Control>,
    mut served: Served<'_>,
) -> Result<StopReason, RunError> {
    let mut events = EventLoop::new(signals, control.as_deref())?;
    let watchdogs = Timer::new().map_err(|e| RunError::io("timerfd", e))?;
    events.watch_timer(watchdogs.fd())?;
    events.watch_health(served.wakeup.fd())?;
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        watchdogs.clear();
        served.wakeup.clear();
        if let Some(h) = served.health {
            if crate::health::serve(h, served.managers(control.as_deref_mut())) {
                return Ok(StopReason::Requested);
            }
            let expiry = lock(h).next_expiry();
            watchdogs
                .set(expiry)
                .map_err(|e| RunError::io("timerfd", e))?;
        }
        let requests = served.requests;
        crate::requests::serve(requests, served.managers(control.as_deref_mut()));
        if all_exited() {
            return Ok(StopReason::AllExited);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(StopReason::Timeout);
        }
        let wakes = events.wait(SERVICES_TICK.as_millis() as i32)?;
        if wakes.contains(&Wake::Stop) {
            return Ok(StopReason::Requested);
        }
        if let Some(c) = control
            .as_deref_mut()
            .filter(|_| wakes.contains(&Wake::Control))
        {
            c.poll()?;
        }
    }
}

struct Supervisor {
    machine: Machine,
    run: Run,
    events: EventLoop,
    timer: Timer,
    armed: Option<Nanos>,
    t0: Option<u64>,
    options: RunOptions,
    /// The schedule log and the trace, shared with the rt drain thread.
    outputs: rt::SharedOutputs,
    /// Schedule time 0 on CLOCK_MONOTONIC for the drain thread (0 until it starts).
    origin: Arc<AtomicU64>,
    /// The power policy in force (restores CPUFreq on drop).
    power: Option<crate::power::Power>,
    /// Per process: the grant it runs under (for trace stop events).
    granted: Vec<Option<Grant>>,
    lingering: Vec<usize>,
    actions: Vec<Action>,
    grants: u64,
    windows: u64,
    startup: Duration,
    warnings: Vec<String>,
    stop_reason: Option<StopReason>,
    control: Option<Control>,
    /// Per process: its end before the stop fails the run (an SC or `required` process).
    must_run: Vec<bool>,
    /// Such ends, reported.
    errors: Vec<String>,
}

impl Supervisor {
    fn new(
        schedule: Schedule,
        options: &RunOptions,
        run: Run,
        control: Option<Control>,
        (outputs, origin): Shared,
    ) -> Result<Supervisor, RunError> {
        let events = EventLoop::new(options.handle_signals, control.as_ref())?;
        let timer = Timer::new().map_err(|e| RunError::io("event loop", e))?;
        events.watch_timer(timer.fd())?;
        for (i, p) in run.procs.iter().enumerate() {
            let fd = p.channel.as_ref().expect("just spawned").as_raw_fd();
            events.watch_channel(i, fd)?;
        }
        let n = schedule.processes.len();
        let stop_at = options.timeout.map(|d| d.as_nanos() as Nanos);
        Ok(Supervisor {
            machine: Machine::new(
                schedule,
                Config {
                    seed: options.seed,
                    stop_at,
                    jitter: options.jitter,
                },
            ),
            run,
            events,
            timer,
            armed: None,
            t0: None,
            options: options.clone(),
            outputs,
            origin,
            power: None,
            granted: vec![None; n],
            lingering: Vec::new(),
            actions: Vec::new(),
            grants: 0,
            windows: 0,
            startup: Duration::ZERO,
            warnings: Vec::new(),
            stop_reason: None,
            control,
            must_run: vec![false; n],
            errors: Vec::new(),
        })
    }

    fn now(&self) -> Nanos {
        self.t0.map_or(0, |t0| monotonic_ns().saturating_sub(t0))
    }

    fn run_loop(&mut self, launch: Instant) -> Result<StopReason, RunError> {
        self.machine.start(&mut self.actions);
        self.execute(None, launch)?;
        let init_deadline = self.options.timeout.map(|d| Instant::now() + d);
        loop {
            if let Some(reason) = self.stopped() {
                return Ok(reason);
            }
            let mut wait_ms: i32 = -1;
            if !self.lingering.is_empty() {
                wait_ms = 10;
            }
            if self.machine.phase() == Phase::Init {
                if let Some(deadline) = init_deadline {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        self.warnings
                            .push("--timeout reached during the init phase".into());
                        let t = self.now();
                        self.machine.handle(Event::Stop { t }, &mut self.actions);
                        self.execute(None, launch)?;
                        continue;
                    }
                    let ms = left.as_millis().min(i32::MAX as u128) as i32 + 1;
                    wait_ms = if wait_ms < 0 { ms } else { wait_ms.min(ms) };
                }
            }
            // Timers first (DEmOS gives them priority), then signals, then processes.
            for wake in self.events.wait(wait_ms)? {
                self.on_wake(wake, launch)?;
            }
            self.check_lingering(launch)?;
        }
    }

    fn stopped(&self) -> Option<StopReason> {
        // The last Stop action tells why; the machine is then in Phase::Stopped.
        (self.machine.phase() == Phase::Stopped)
            .then_some(self.stop_reason.unwrap_or(StopReason::Requested))
    }

    fn on_wake(&mut self, wake: Wake, launch: Instant) -> Result<(), RunError> {
        match wake {
            Wake::Timer => self.on_timer(launch),
            Wake::Stop => {
                let t = self.now();
                self.machine.handle(Event::Stop { t }, &mut self.actions);
                self.execute(None, launch)
            }
            Wake::Control => self.control.as_mut().map_or(Ok(()), Control::poll),
            // Not watched: a run with windows has no health monitor (`health::check`).
            Wake::Health => Ok(()),
            Wake::Channel { index, hung_up } => self.on_channel(index, hung_up, launch),
        }
    }

    /// The timer's expiration is consumed by arming it again (`timerfd_settime` resets
    /// its count, [`Timer::set`]): a switch reads the timer only when nothing is next.
    fn on_timer(&mut self, launch: Instant) -> Result<(), RunError> {
        if let Some(t) = self.armed.take() {
            if self.now() >= t {
                self.machine.handle(Event::Timer { t }, &mut self.actions);
            }
            // `armed` is `None`: arms the timer whenever a next time exists.
            self.execute(None, launch)?;
        }
        if self.armed.is_none() {
            self.timer.clear();
        }
        Ok(())
    }

    /// A process wrote completions, or closed its end.
    fn on_channel(&mut self, i: usize, hung_up: bool, launch: Instant) -> Result<(), RunError> {
        let Some(fd) = self.run.procs[i].channel.as_ref().map(|c| c.as_raw_fd()) else {
            return Ok(());
        };
        let mut buf = [0u8; 64];
        let n = event::recv_nonblocking(fd, &mut buf);
        if let Ok(n @ 1..) = n {
            for _ in 0..(n / 8).max(1) {
                self.run.procs[i].blocked = true;
                let t = self.now();
                self.machine
                    .handle(Event::Completed { process: i, t }, &mut self.actions);
                self.execute(Some(TraceStop::Yield), launch)?;
            }
            return Ok(());
        }
        if matches!(n, Ok(0)) || hung_up {
            self.events.unwatch(fd);
            self.run.procs[i].channel = None;
            if !self.lingering.contains(&i) {
                self.lingering.push(i);
            }
        }
        Ok(())
    }

    /// Processes whose channel closed: exited once reaped and their cgroup is empty.
    /// Reaped first: a process leaves its cgroup before it becomes a zombie
    /// (`cgroup_exit` precedes `exit_notify` in the kernel's `do_exit`), so an empty
    /// cgroup alone would report an exit whose status cannot be had yet.
    fn check_lingering(&mut self, launch: Instant) -> Result<(), RunError> {
        let mut k = 0;
        while k < self.lingering.len() {
            let i = self.lingering[k];
            let p = &mut self.run.procs[i];
            reap(p);
            if p.reaped && self.run.cgroups.pids(p.cgroup).is_empty() {
                self.lingering.swap_remove(k);
                self.run.procs[i].exited = true;
                self.report_exit(i);
                let t = self.now();
                self.machine
                    .handle(Event::Exited { process: i, t }, &mut self.actions);
                self.execute(Some(TraceStop::Exit), launch)?;
            } else {
                k += 1;
            }
        }
        Ok(())
    }

    /// Reports the exit of process `i` (before the stop): an error when it must run
    /// until the stop, else a warning when its status is not 0.
    fn report_exit(&mut self, i: usize) {
        let status = std::process::ExitStatus::from_raw(self.run.procs[i].status.unwrap_or(0));
        let schedule = self.machine.schedule();
        let spec = &schedule.processes[i];
        let what = format!(
            "partition `{}`, process {} (`{}`)",
            schedule.partitions[spec.partition].name, spec.index, spec.cmd
        );
        if self.must_run[i] && self.machine.phase() != Phase::Stopped {
            self.errors
                .push(format!("{what} ended before the stop: {status}"));
        } else if !status.success() {
            self.warnings.push(format!("{what} exited: {status}"));
        }
    }

    /// Carries out the machine's actions, then re-arms the timer.
    fn execute(&mut self, cause: Option<TraceStop>, launch: Instant) -> Result<(), RunError> {
        let actions = std::mem::take(&mut self.actions);
        let window_ended = actions
            .iter()
            .any(|a| matches!(a, Action::WindowEnd { .. }));
        // The instant's cgroup writes first, the bookkeeping after: the time between
        // stopping one partition and resuming the next is taken from the work (issue
        // 36). The machine's order (a window's freezes before the next one's thaws),
        // except that a handoff of one CPU thaws first ([`Self::hands_over_one_cpu`]) and
        // freezes [`HANDOVER_FREEZE_DELAY`] later. `runs_on[k]`: see [`Self::write`].
        let runs_on: Vec<bool> = (0..actions.len())
            .map(|k| matches!(&actions[k], Action::Freeze { process } if thawed_again(&actions[k + 1..], *process)))
            .collect();
        let handover = self.hands_over_one_cpu(&actions, &runs_on);
        let mut order: Vec<usize> = (0..actions.len()).collect();
        if handover {
            // A stable sort: the thaws keep their order, each after its CPU change.
            order.sort_by_key(|&k| matches!(actions[k], Action::Freeze { .. }));
        }
        let mut waited = !handover;
        for k in order {
            if !waited && matches!(actions[k], Action::Freeze { .. }) && !runs_on[k] {
                bulkhead_os::clock::spin_for(HANDOVER_FREEZE_DELAY);
                waited = true;
            }
            self.write(&actions[k], runs_on[k])?;
        }
        for action in &actions {
            self.act(action, cause, window_ended, launch)?;
        }
        self.actions = actions;
        self.actions.clear();
        self.arm()
    }

    /// Whether `actions` (one instant's) freeze and thaw processes that all run on the
    /// same single CPU, the freezes written (not `runs_on`, see [`Self::write`]): the
    /// switch hands that CPU from the processes it stops to those it starts. Their
    /// writes are then made thaws first: the thawed process waits on that CPU's run
    /// queue behind the one still running (or preempts it) and takes the CPU the
    /// moment the freeze stops the other, so the CPU is never idle in between (an idle
    /// vCPU halts, and waking it costs a round trip through the host). On one CPU the
    /// two never run at the same instant; a switch that involves other CPUs keeps the
    /// machine's order, so that nothing of the next window runs on one CPU while the
    /// last window still runs on another.
    fn hands_over_one_cpu(&self, actions: &[Action], runs_on: &[bool]) -> bool {
        // Per freeze written and per thaw (its grant follows it): `true` for a freeze,
        // and the CPUs the process runs on.
        let switched: Vec<(bool, Option<&CpuSet>)> = (actions.iter().enumerate())
            .filter_map(|(k, action)| match action {
                Action::Freeze { process } if !runs_on[k] => {
                    Some((true, self.granted[*process].as_ref().map(|g| &g.cpus)))
                }
                Action::Grant(g) => Some((false, Some(&g.cpus))),
                _ => None,
            })
            .collect();
        let Some((_, Some(cpus))) = switched.first() else {
            return false;
        };
        cpus.len() == 1
            && switched.iter().all(|(_, c)| *c == Some(*cpus))
            && switched.iter().any(|(freeze, _)| *freeze)
            && switched.iter().any(|(freeze, _)| !*freeze)
    }

    /// The cgroup writes of `action`: thaws, freezes and CPU changes. `runs_on`: a
    /// freeze of a process granted again at the same instant, which is then left
    /// running (its grant still ends in the trace).
    fn write(&mut self, action: &Action, runs_on: bool) -> Result<(), RunError> {
        let cg_err = RunError::Cgroup;
        match action {
            Action::InitStart { processes } => {
                for &p in processes {
                    self.thaw(p).map_err(cg_err)?;
                }
            }
            Action::SetCpus { partition, cpus } => {
                let p = self.run.partitions[*partition];
                let cpus = cpus.to_string();
                self.run.cgroups.set_cpus(p, &cpus).map_err(cg_err)?
            }
            Action::Thaw { process } => self.thaw(*process).map_err(cg_err)?,
            Action::Freeze { process } if !runs_on => {
                let cg = self.run.procs[*process].cgroup;
                self.run.cgroups.set_frozen(cg, true).map_err(cg_err)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Carries out the rest of `action` (after [`Self::write`]): the schedule log, the
    /// trace, messages, control and power.
    fn act(
        &mut self,
        action: &Action,
        cause: Option<TraceStop>,
        window_ended: bool,
        launch: Instant,
    ) -> Result<(), RunError> {
        match action {
            Action::InitStart { .. }
            | Action::SetCpus { .. }
            | Action::Thaw { .. }
            | Action::BeStart { .. } => {}
            Action::ScheduleStart => {
                let t0 = monotonic_ns();
                self.t0 = Some(t0);
                self.origin.store(t0, Ordering::Release);
                self.startup = launch.elapsed();
            }
            Action::FrameStart { .. } => {
                if let Some(m) = &self.options.frame_message {
                    print_line(m, &self.options.messages);
                }
            }
            Action::WindowStart { t, window } => {
                self.windows += 1;
                if let Some(c) = &mut self.control {
                    c.window_started(*window);
                }
                if let Some(m) = &self.options.window_message {
                    print_line(m, &self.options.messages);
                }
                let length_ns = self.machine.schedule().windows[*window].length;
                self.trace(
                    *t,
                    EventKind::WindowStart {
                        window: *window as u32,
                        length_ns,
                    },
                );
            }
            Action::WindowEnd { t, window } => self.trace(
                *t,
                EventKind::WindowEnd {
                    window: *window as u32,
                },
            ),
            Action::Freeze { process } => {
                let reason = cause.unwrap_or(if window_ended {
                    TraceStop::WindowEnd
                } else {
                    TraceStop::Budget
                });
                self.end_grant(*process, reason);
            }
            Action::Grant(g) => {
                self.grants += 1;
                let event = bulkhead_windows::run_event(self.machine.schedule(), g);
                self.outputs().put(&event);
                self.granted[g.process] = Some(g.clone());
            }
            Action::Stop { reason, .. } => {
                for p in 0..self.granted.len() {
                    let why = if self.run.procs[p].exited {
                        TraceStop::Exit
                    } else {
                        TraceStop::WindowEnd
                    };
                    self.end_grant(p, why);
                }
                self.stop_reason = Some(*reason);
            }
        }
        self.power_action(action)
    }

    /// The power policy's frequency changes for `action` (after it was carried out, as
    /// DEmOS calls its policy after starting the partitions), logged and traced.
    fn power_action(&mut self, action: &Action) -> Result<(), RunError> {
        let Some(power) = &mut self.power else {
            return Ok(());
        };
        let events = power.on_action(self.machine.schedule(), action)?;
        let mut outputs = self.outputs();
        events.iter().for_each(|e| outputs.put(e));
        Ok(())
    }

    fn end_grant(&mut self, process: usize, reason: TraceStop) {
        let Some(g) = self.granted[process].take() else {
            return;
        };
        let schedule = self.machine.schedule();
        let kind = EventKind::Stop {
            cpus: g.cpus.clone(),
            partition: schedule.partitions[g.partition].name.as_str().into(),
            cmd: schedule.processes[process].cmd.as_str().into(),
            reason,
        };
        let t = self.now();
        self.trace(t, kind);
    }

    fn trace(&mut self, t: Nanos, kind: EventKind) {
        let mut outputs = self.outputs();
        if outputs.tracing() {
            outputs.trace(&TraceEvent::new(t, kind));
        }
    }

    /// The outputs, locked (the drain thread writes them too).
    fn outputs(&self) -> std::sync::MutexGuard<'_, rt::Outputs> {
        self.outputs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Releases a process blocked in the client library, then thaws its cgroup.
    fn thaw(&mut self, process: usize) -> cgroup::Result<()> {
        let p = &mut self.run.procs[process];
        if p.blocked {
            p.blocked = false;
            if let Some(channel) = &p.channel {
                // A process that is gone makes this fail with EPIPE (no signal).
                let _ = event::send_nonblocking(channel.as_raw_fd(), &1u64.to_ne_bytes());
            }
        }
        let cg = p.cgroup;
        self.run.cgroups.set_frozen(cg, false)
    }

    fn arm(&mut self) -> Result<(), RunError> {
        let next = self.machine.next_timer();
        if next == self.armed {
            return Ok(());
        }
        self.armed = next;
        let abs = next.map(|t| self.t0.expect("timers only while running") + t);
        // A planned time of 0 (schedule start) is in the past: fires at once.
        self.timer
            .set(abs)
            .map_err(|e| RunError::io("timerfd_settime", e))
    }

    /// Flushes the schedule log and ends the trace (the drain thread, if any, has
    /// stopped): an error names the output's flag.
    fn finish(&mut self) -> Result<(), RunError> {
        let empty = Arc::new(Mutex::new(rt::Outputs::new(None, None).expect("no trace")));
        let shared = std::mem::replace(&mut self.outputs, empty);
        let outputs = match Arc::try_unwrap(shared) {
            Ok(outputs) => outputs.into_inner().unwrap_or_else(|e| e.into_inner()),
            Err(_) => {
                return Err(RunError::io(
                    "finishing the outputs",
                    std::io::Error::other("the rt drain thread still runs"),
                ))
            }
        };
        let (log_error, trace_error) = outputs.finish();
        let path = |p: &Option<std::path::PathBuf>| p.clone().unwrap_or_default();
        if let Some(e) = log_error {
            return Err(output_error(
                "--schedule-log",
                &path(&self.options.schedule_log),
                e,
            ));
        }
        if let Some(e) = trace_error {
            return Err(output_error("--trace", &path(&self.options.trace), e));
        }
        Ok(())
    }
}

/// How long a handoff of one CPU (`Supervisor::hands_over_one_cpu`) waits between its
/// thaws and its freezes. The thaw's wake-up preempts the outgoing process on that
/// CPU through an interrupt (a reschedule IPI); a freeze written while the outgoing
/// process still runs there sends a second one (the kernel's `freeze_task` kicks a
/// running task), and on this project's VM each IPI stops the partitions' vCPU for
/// about 10 µs of the host's time (docs/runtime.md, *One interrupt per handoff*). Written
/// once the incoming process has taken the CPU, the freeze finds the outgoing one
/// preempted and needs no interrupt: it is frozen before it next runs. The window-switch
/// benchmark's `resume first` switches wait the same.
pub const HANDOVER_FREEZE_DELAY: std::time::Duration = std::time::Duration::from_micros(20);

/// Whether `later` (the rest of a batch of actions, all at one instant) thaws
/// `process` again: a process whose window ends when its next grant starts (a
/// partition alone in consecutive windows, or in back-to-back slots) need not be
/// frozen and thawed in between (the thaw is then a no-op: the cgroup is thawed).
fn thawed_again(later: &[Action], process: usize) -> bool {
    later
        .iter()
        .any(|a| matches!(a, Action::Thaw { process: p } if *p == process))
}

/// Enters SCHED_FIFO at `priority` (see [`Realtime`]); a refusal becomes a warning.
fn enter_realtime(priority: i32, warnings: &mut Vec<String>) -> Option<Realtime> {
    Realtime::enter(priority)
        .map_err(|e| {
            warnings.push(format!(
                "the supervisor runs without real-time priority (SCHED_FIFO {priority}): {e}"
            ))
        })
        .ok()
}

/// Prints a synchronization message as one line, flushed at once (DEmOS -m/-M).
fn print_line(message: &str, to: &Option<crate::Messages>) {
    if let Some(buffer) = to {
        let mut buffer = buffer.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(buffer, "{message}");
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{message}");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_cgroups::{Call, Fake};

    /// Partition A (two processes) in window 0 on CPUs 0-1, partition B in window 1 on
    /// CPU 1 and A again in window 2 on CPU 1 alone; A has a memory limit.
    const TWO: &str = "
partitions:
  - name: A
    memory: 1048576
    processes: [{cmd: a0, budget: 5}, {cmd: a1, budget: 5}]
  - name: B
    processes: [{cmd: b0, budget: 5}]
windows:
  - {length: 10, slices: [{cpu: 0-1, be_partition: A}]}
  - {length: 10, cpu: 1, be_partition: B}
  - {length: 10, cpu: 1, be_partition: A}
";

    fn system() -> System {
        bulkhead_model::load_str(TWO, "two.yaml")
            .expect("valid")
            .system
    }

    fn schedule(system: &System) -> Schedule {
        Schedule::from_system(system, &CpuSet::parse("0-1").unwrap()).expect("windows")
    }

    /// A run of `system` on `fake`'s cgroups, its processes started by the fake.
    fn started(system: &System, fake: &Fake) -> (Run, Result<(), RunError>) {
        let mut run = Run {
            cgroups: fake.cgroups(),
            procs: Vec::new(),
            partitions: Vec::new(),
            plans: Vec::new(),
            envs: Vec::new(),
            memory: Vec::new(),
        };
        let spawner = fake.clone();
        let mut spawn = |_: &mut Run, _, _, cg| spawner.spawn(cg);
        let r = spawn_all(&mut run, system, &schedule(system), true, &mut spawn);
        (run, r)
    }

    /// The partitions' cgroups come first (each with its limits), then each process's
    /// frozen cgroup right before the process is started in it; nothing is thawed.
    #[test]
    fn partitions_then_each_process_in_a_frozen_cgroup_of_its_own() {
        let (system, fake) = (system(), Fake::default());
        let (run, r) = started(&system, &fake);
        r.unwrap();
        let part = |name: &str, cpus: &str| Call::AddPartition {
            name: name.into(),
            cpus: cpus.into(),
        };
        let memory = Call::Limit {
            partition: 0,
            controller: bulkhead_os::cgroup::Controller::Memory,
            value: 1 << 20,
        };
        let proc_ = |partition, index| Call::AddProcess { partition, index };
        let spawn = |process| Call::Spawn { process };
        let expected = [
            part("p0-A", "0-1"),
            memory,
            part("p1-B", "1"),
            proc_(0, 0),
            spawn(0),
            proc_(0, 1),
            spawn(1),
            proc_(1, 0),
            spawn(2),
        ];
        assert_eq!(fake.calls(), expected);
        assert_eq!(run.memory, [Some("/fake/p0-A".into()), None]);
        drop(run);
        assert_eq!(fake.left(), (0, 0));
    }

    /// A run that fails half-way (the second process's cgroup cannot be made) leaves
    /// nothing: what was started is killed, then every cgroup removed.
    #[test]
    fn a_start_that_fails_half_way_leaves_nothing() {
        let system = system();
        let fake = Fake::failing(|c| {
            *c == Call::AddProcess {
                partition: 0,
                index: 1,
            }
        });
        let (run, r) = started(&system, &fake);
        let e = r.expect_err("the second process cannot start");
        assert!(matches!(e, RunError::Cgroup(_)), "{e}");
        assert_eq!(fake.left(), (4, 1), "instance, 2 partitions, 1 process");
        drop(run);
        let calls = fake.calls();
        assert_eq!(calls[calls.len() - 2..], [Call::KillAll, Call::Remove]);
        assert_eq!(fake.left(), (0, 0));
    }

    /// Drives the supervisor of a started run through its windows until `until`
    /// (schedule time), then stops it; returns the calls made from the schedule's start.
    fn drive(fake: &Fake, run: Run, schedule: Schedule, until: Nanos) -> Vec<Call> {
        drive_with(fake, run, schedule, until, RunOptions::default())
    }

    /// [`drive`] with `options`.
    fn drive_with(
        fake: &Fake,
        run: Run,
        schedule: Schedule,
        until: Nanos,
        options: RunOptions,
    ) -> Vec<Call> {
        let (_, shared) = outputs(&system(), &options).unwrap();
        let mut sup = Supervisor::new(schedule, &options, run, None, shared.unwrap()).unwrap();
        let from = fake.calls().len();
        let launch = Instant::now();
        sup.machine.start(&mut sup.actions);
        sup.execute(None, launch).unwrap();
        while let Some(t) = sup.machine.next_timer().filter(|&t| t <= until) {
            sup.machine.handle(Event::Timer { t }, &mut sup.actions);
            sup.execute(None, launch).unwrap();
        }
        sup.machine
            .handle(Event::Stop { t: until }, &mut sup.actions);
        sup.execute(None, launch).unwrap();
        drop(sup);
        fake.calls().split_off(from)
    }

    /// At each window's end its processes are frozen before the next window's are
    /// thawed (`a1` on CPUs 0-1 before `b0` on CPU 1), except where a switch hands one
    /// CPU from one process to another (`a0`'s budget ends on CPU 1 at 25 ms, `a1`
    /// follows there): then the next is thawed first. A partition is given the CPUs
    /// of its slice before it is thawed on them; at the stop (in a grant of `a1`)
    /// everything is killed, then removed.
    #[test]
    fn windows_freeze_before_they_thaw_unless_one_cpu_is_handed_over() {
        let (system, fake) = (system(), Fake::default());
        let (run, r) = started(&system, &fake);
        r.unwrap();
        let calls = drive(&fake, run, schedule(&system), 25_000_000);
        let thaw = |process| Call::Thaw { process };
        let freeze = |process| Call::Freeze { process };
        let expected = [
            thaw(0),
            freeze(0),
            thaw(1),
            freeze(1),
            thaw(2),
            freeze(2),
            Call::SetCpus {
                partition: 0,
                cpus: "1".into(),
            },
            thaw(0),
            thaw(1),
            freeze(0),
            Call::KillAll,
            Call::Remove,
        ];
        assert_eq!(calls, expected);
        assert_eq!(fake.left(), (0, 0));
    }

    /// While processes keep dying, the teardown kills again only the cgroups of those
    /// reaped that still have members (what they forked); once none died for
    /// KILL_AGAIN, every one still busy.
    #[test]
    fn the_teardown_kills_again_only_what_forked_until_the_deaths_stall() {
        let busy = [0, 3, 5, 8];
        let reaped = |i: usize| i == 3 || i == 8;
        assert_eq!(kill_again(&busy, reaped, Duration::ZERO), [3, 8]);
        assert_eq!(kill_again(&busy, reaped, KILL_AGAIN / 2), [3, 8]);
        assert_eq!(kill_again(&busy, reaped, KILL_AGAIN), busy);
        assert_eq!(kill_again(&busy, |_| false, Duration::ZERO), [0usize; 0]);
    }

    /// At an instant the cgroup writes come before the bookkeeping (issue 36: nothing
    /// between stopping one partition and resuming the next): when a window's first
    /// process is thawed, that window's start message (DEmOS `-m`) is not printed yet.
    /// Thaws at 0 (window 0), 5 (a1, same window), 10 (window 1), 20 (window 2), 25.
    #[test]
    fn a_window_is_thawed_before_its_start_is_announced() {
        thread_local! {
            static LINES: std::cell::RefCell<Option<crate::Messages>> = const { std::cell::RefCell::new(None) };
            static AT_THAWS: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let messages = crate::Messages::default();
        LINES.set(Some(messages.clone()));
        // Never fails: notes how many messages were printed at each thaw.
        let fake = Fake::failing(|call| {
            if matches!(call, Call::Thaw { .. }) {
                let printed = LINES.with_borrow(|m| {
                    let m = m.as_ref().expect("set").lock().unwrap();
                    m.iter().filter(|&&b| b == b'\n').count()
                });
                AT_THAWS.with_borrow_mut(|v| v.push(printed));
            }
            false
        });
        let system = system();
        let (run, r) = started(&system, &fake);
        r.unwrap();
        let options = RunOptions {
            window_message: Some("window".into()),
            messages: Some(messages.clone()),
            ..RunOptions::default()
        };
        drive_with(&fake, run, schedule(&system), 25_000_000, options);
        assert_eq!(AT_THAWS.take(), [0, 1, 1, 2, 3]);
        assert_eq!(
            messages.lock().unwrap().as_slice(),
            b"window\nwindow\nwindow\n"
        );
    }

    /// The batch of one window end: process 0 is granted again at that instant (left
    /// running), process 1 is not (frozen).
    #[test]
    fn a_process_granted_again_at_its_window_end_is_not_frozen() {
        let batch = [
            Action::Freeze { process: 0 },
            Action::Freeze { process: 1 },
            Action::WindowEnd { t: 10, window: 0 },
            Action::WindowStart { t: 10, window: 1 },
            Action::Thaw { process: 0 },
            Action::Thaw { process: 2 },
        ];
        assert!(thawed_again(&batch[1..], 0));
        assert!(!thawed_again(&batch[2..], 1));
        assert!(!thawed_again(&batch[5..], 0), "only later thaws count");
    }

    /// A be partition on a non-exclusive rt partition's CPUs on a cgroup v2 host: the
    /// plan refuses it before anything starts (no rt task, no cgroup, no leftover
    /// cleanup in the hierarchy).
    #[test]
    fn a_be_partition_below_rt_cpus_on_v2_is_refused_before_anything_starts() {
        let yaml = "system: {cpus: 0-1}\npartitions:\n  - {name: r, kind: rt, cpus: 1, exclusive: false, tasks: [{name: t, cmd: sleep 1, budget: 1ms, period: 10ms}]}\n  - {name: b, cpus: 1, processes: [{cmd: sleep 1}]}\n";
        let system = bulkhead_model::load_str(yaml, "shared.yaml")
            .expect("valid")
            .system;
        let base =
            std::env::temp_dir().join(format!("bulkhead-v2-refusal-{}-absent", std::process::id()));
        let options = RunOptions {
            hierarchy: Some(Hierarchy::v2_at(&base, true)),
            workdir: std::env::temp_dir(),
            ..RunOptions::default()
        };
        let e = run(&system, &options).expect_err("refused");
        let RunError::Invalid(Unrunnable::Unplaceable(why)) = &e else {
            panic!("not the plan's refusal: {e}");
        };
        assert_eq!(why.key_path, "partitions[1].cpus");
        assert!(e.to_string().starts_with("partitions[1].cpus: partition `b` runs on CPUs 1 of the non-exclusive rt partition `r`"), "{e}");
        assert!(!base.exists());
    }
}
