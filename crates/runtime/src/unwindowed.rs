//! Best-effort partitions in no window: their processes run for the whole run as
//! ordinary Linux processes, never frozen, confined to the partition's cgroups (CPUs,
//! memory limit), user and network namespace. An unwindowed partition with `cpus: all`
//! (or none) gets every CPU the system may use except the rt partitions'.
//!
//! Postcondition of dropping a [`UnwindowedRun`]: every process it started is dead and every
//! cgroup it created is removed.

use crate::health::{lock, SharedHealth};
use crate::isolation::Confinements;
use crate::limits;
use crate::output::Output;
use crate::requests::{Asker, SharedRequests};
use crate::spawn::{self, Environment, Prepared};
use crate::wake::Waiter;
use crate::{leftovers, RunError, Unrunnable};
use bulkhead_client::request::{Decoder, Message};
use bulkhead_model::health::monitor::{Decision, Evidence};
use bulkhead_model::health::{Action, Member};
use bulkhead_model::units::format_duration;
use bulkhead_model::{CpuSet, Cpus, Partition, PartitionKind, Restart, RestartWhen, System};
use bulkhead_os::cgroup::{self, CgroupManager, Hierarchy, Process};
use bulkhead_os::event::Wakeup;
use bulkhead_plan::programs::{Programs, Site};
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

struct UnwindowedProc {
    pid: i32,
    cgroup: Process,
    /// Its partition's cgroup: whom a `restart_partition` restarts with it.
    partition: cgroup::Partition,
    /// The index of its command in [`UnwindowedRun::plans`] and of its environment in
    /// [`UnwindowedRun::envs`]: what a restart needs.
    plan: usize,
    env: usize,
    /// The DEmOS channel's supervisor end: the process's heartbeats
    /// (`bulkhead_heartbeat()`) and requests from inside (`bulkhead_request_mode()`)
    /// arrive on it; only the replies to its requests are sent on it.
    channel: OwnedFd,
    /// Splits what arrives on the channel into messages (new with each channel).
    decoder: Decoder,
    /// Its partition's name and its index there: who a request on its channel is from.
    partition_name: String,
    index: usize,
    /// What a v1 child reads until it execs; freed only after it is dead.
    memory: Option<spawn::ChildMemory>,
    state: State,
    /// `partition `P`, process K (`CMD`)`, for the report of its exit.
    what: String,
    restart: Option<Restart>,
    required: bool,
    /// When it was started, within the last start-limit interval.
    starts: VecDeque<Instant>,
    /// How often it was restarted, and the status of its last exit.
    restarts: u64,
    last_status: Option<ExitStatus>,
    /// Its index in the health monitor, if it has a `health:` key.
    supervised: Option<usize>,
    /// The health decision a pending restart carries out.
    healing: Option<Decision>,
    /// Its channel's peer closed it (nothing more can arrive on it).
    hung_up: bool,
    /// What the keeper watches of it while it runs ([`UnwindowedRun::watch`]).
    watched: Option<Watched>,
}

/// A running process as the keeper's epoll set watches it: its end (a pidfd) and, until
/// it hangs up, its channel.
struct Watched {
    pid: i32,
    _exit: bulkhead_os::proc::Process,
    channel: Option<RawFd>,
}

/// Where a process is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    /// Exited; started again at this time.
    Restarting(Instant),
    /// Exited for good.
    Ended,
}

/// The running unwindowed best-effort partitions.
///
/// Field order matters: processes are killed in `Drop` before the commands and
/// environments they may still read (v1, before exec) are freed.
pub struct UnwindowedRun {
    cgroups: Box<dyn CgroupManager>,
    /// Each partition's name and freezer cgroup.
    dirs: Vec<(String, PathBuf)>,
    procs: Vec<UnwindowedProc>,
    /// Per partition: the cgroup directory holding its memory limit, if it has one.
    memory: Vec<Option<PathBuf>>,
    plans: Vec<Prepared>,
    envs: Vec<Environment>,
    /// Exits reported so far: warnings, and errors that fail the run.
    warnings: Vec<String>,
    errors: Vec<String>,
    health: Option<SharedHealth>,
    /// Where the requests from inside go.
    requests: Option<SharedRequests>,
}

/// What starting the partitions takes besides the system: each partition's
/// confinement, the resolved programs, the relay of their output and the directory they
/// start in.
pub struct Inputs<'a> {
    pub confinements: &'a Confinements,
    pub programs: &'a Programs,
    /// Where the processes' output lines go, labelled with their partition; `None`:
    /// straight to the supervisor's streams ([`crate::RunOptions::raw_output`]).
    pub output: Option<&'a Output>,
    pub workdir: &'a Path,
    /// The run's health monitor, if any process or task has a `health:` key.
    pub health: Option<&'a SharedHealth>,
    /// Where the requests from inside go ([`crate::requests`]).
    pub requests: Option<&'a SharedRequests>,
    /// The rt CPUs' cpusets, smallest first ([`crate::rt::RtRun::cpusets`]): a partition
    /// on CPUs of a non-exclusive rt partition gets its cpuset under one of them.
    pub rt_cpusets: &'a [(CpuSet, PathBuf)],
}

impl UnwindowedRun {
    /// Each partition with a memory limit: its name and the cgroup directory holding it.
    pub fn memory_dirs(&self) -> Vec<(String, PathBuf)> {
        let dirs = self.dirs.iter().zip(&self.memory);
        dirs.filter_map(|((name, _), m)| Some((name.clone(), m.clone()?)))
            .collect()
    }
    /// Starts every unwindowed best-effort partition of `system`; `None` when there is
    /// none. `own_cpus`: the CPUs this process may use. On error nothing is left running.
    pub fn start(
        system: &System,
        hierarchy: &Hierarchy,
        own_cpus: &CpuSet,
        inputs: &Inputs<'_>,
    ) -> Result<Option<UnwindowedRun>, RunError> {
        let unwindowed = bulkhead_plan::cgroups::unwindowed(system);
        if unwindowed.is_empty() {
            return Ok(None);
        }
        let cpus: Vec<CpuSet> = unwindowed
            .iter()
            .map(|(_, p)| partition_cpus(system, p, own_cpus))
            .collect::<Result<_, _>>()?;
        let apart = cpus
            .iter()
            .filter(|c| rt_cpuset(c, inputs.rt_cpusets).is_none());
        let all = CpuSet::from_cpus(apart.flat_map(|c| c.iter())).map(|all| all.to_string());
        let cgroups = cgroup::create(hierarchy, &leftovers::instance_name(), all.as_deref())
            .map_err(RunError::Cgroup)?;
        let mut run = UnwindowedRun {
            cgroups,
            dirs: Vec::new(),
            procs: Vec::new(),
            memory: Vec::new(),
            plans: Vec::new(),
            envs: Vec::new(),
            warnings: Vec::new(),
            errors: Vec::new(),
            health: inputs.health.cloned(),
            requests: inputs.requests.cloned(),
        };
        for (i, ((model, p), cpus)) in unwindowed.iter().zip(&cpus).enumerate() {
            run.start_partition((i, *model), p, cpus, inputs)?;
        }
        Ok(Some(run))
    }

    /// Starts partition `p`, the `index.0`th started here and `index.1`th of the system.
    fn start_partition(
        &mut self,
        index: (usize, usize),
        p: &Partition,
        cpus: &CpuSet,
        inputs: &Inputs<'_>,
    ) -> Result<(), RunError> {
        let (index, model) = index;
        let Inputs {
            confinements,
            programs,
            output,
            workdir,
            health,
            rt_cpusets,
            requests: _,
        } = inputs;
        let dir_name = cgroup::partition_dir_name(index, &p.name);
        let cpus_text = cpus.to_string();
        let cg = match rt_cpuset(cpus, rt_cpusets) {
            None => self.cgroups.add_partition(&dir_name, &cpus_text),
            Some(parent) => self
                .cgroups
                .add_partition_below(&dir_name, &cpus_text, parent),
        }
        .map_err(RunError::Cgroup)?;
        let dir = self.cgroups.partition_dir(cg).to_path_buf();
        self.dirs.push((p.name.clone(), dir));
        self.memory
            .push(limits::apply(self.cgroups.as_mut(), p, cg)?);
        let confine = confinements.of(&p.name);
        self.envs.push(Environment::unwindowed(&confine));
        for (k, process) in p.processes.iter().enumerate() {
            let where_ = || format!("partition `{}`, process {k} (`{}`)", p.name, process.cmd);
            let site = Site::Process {
                partition: model,
                process: k,
            };
            let exec = programs
                .get(site)
                .ok_or_else(|| RunError::invalid(format!("{}: the command is empty", where_())))?;
            let plan = Prepared::new(exec, Some(workdir))
                .map_err(|source| {
                    let what = where_();
                    RunError::Invalid(Unrunnable::Exec { what, source })
                })?
                .confined(&confine)
                .labelled(*output, &p.name, k);
            self.plans.push(plan);
            let pcg = self
                .cgroups
                .add_process(cg, k, false)
                .map_err(RunError::Cgroup)?;
            let (plan, env) = (self.plans.len() - 1, self.envs.len() - 1);
            let mut files = Files {
                plans: &self.plans,
                envs: &self.envs,
                cgroups: self.cgroups.as_mut(),
            };
            let child = files
                .spawn(plan, env, pcg)
                .map_err(|source| RunError::Spawn {
                    what: where_(),
                    source,
                })?;
            self.procs.push(UnwindowedProc {
                pid: child.pid,
                cgroup: pcg,
                partition: cg,
                plan,
                env,
                channel: child.channel,
                decoder: Decoder::default(),
                partition_name: p.name.clone(),
                index: k,
                memory: child.memory,
                state: State::Running,
                what: where_(),
                restart: process.restart,
                required: process.required,
                starts: VecDeque::from([Instant::now()]),
                restarts: 0,
                last_status: None,
                supervised: health.and_then(|h| lock(h).find(&p.name, &Member::Process(k))),
                healing: None,
                hung_up: false,
                watched: None,
            });
        }
        Ok(())
    }

    /// Reaps the processes that exited, reports their exits, and (when `restart`)
    /// starts again those whose restart time came.
    pub fn poll(&mut self, restart: bool) {
        let now = Instant::now();
        if restart {
            self.restart_decided(now);
        }
        for i in 0..self.procs.len() {
            self.read_channel(i);
            match self.procs[i].state {
                State::Running => self.reap(i, restart, now),
                State::Restarting(at) if restart && at <= now => self.restart(i),
                _ => {}
            }
        }
    }

    fn reap(&mut self, i: usize, restart: bool, now: Instant) {
        let p = &mut self.procs[i];
        let status = match bulkhead_os::proc::try_wait(p.pid) {
            Ok(None) => return,
            Ok(Some(status)) => status,
            Err(_) => 0,
        };
        // The child's memory is no longer read (it exec'd or died).
        p.memory = None;
        let status = ExitStatus::from_raw(status);
        p.last_status = Some(status);
        if restart && self.heal(i, now) {
            return;
        }
        let p = &mut self.procs[i];
        let wanted = match p.restart.map(|r| r.when) {
            Some(RestartWhen::Always) => true,
            Some(RestartWhen::OnFailure) => !status.success(),
            None => false,
        };
        if wanted && restart {
            let r = p.restart.expect("wanted");
            while p
                .starts
                .front()
                .is_some_and(|&t| now.duration_since(t).as_nanos() as u64 >= r.interval)
            {
                p.starts.pop_front();
            }
            if (p.starts.len() as u64) < u64::from(r.burst) {
                self.cgroups.kill(p.cgroup);
                p.state = State::Restarting(now + Duration::from_nanos(r.delay));
                return;
            }
            let text = format!(
                "{} exited: {status}; not restarted: it was started {} times within {} (start_limit_burst, start_limit_interval)",
                p.what,
                r.burst,
                format_duration(r.interval)
            );
            p.state = State::Ended;
            return self.report(i, text);
        }
        p.state = State::Ended;
        let p = &self.procs[i];
        if p.required {
            let text = format!("{} exited before the stop: {status}", p.what);
            self.report(i, text);
        } else if !status.success() {
            let text = format!("{} exited: {status}", p.what);
            self.report(i, text);
        }
    }

    /// Reads what process `i` sent since the last call: its heartbeats go to the
    /// health monitor, its requests to [`crate::requests::receive`] (other messages are
    /// dropped: nothing waits for them here).
    fn read_channel(&mut self, i: usize) {
        let p = &mut self.procs[i];
        let mut messages = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            // SAFETY: reading into a valid buffer of its length, without blocking.
            let n = unsafe {
                libc::recv(
                    p.channel.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n == 0 {
                p.hung_up = true;
            }
            if n <= 0 {
                break;
            }
            messages.extend(p.decoder.push(&buf[..n as usize]));
        }
        let beat = messages.contains(&Message::Heartbeat);
        if let (true, Some(h), Some(health)) = (beat, p.supervised, &self.health) {
            lock(health).observe(h, Evidence::Heartbeat);
        }
        let asker = Asker {
            partition: &p.partition_name,
            process: p.index,
            channel: p.channel.as_fd(),
        };
        for m in messages {
            if let (Message::Request(want), Some(r)) = (m, &self.requests) {
                crate::requests::receive(r, &asker, want);
            }
        }
    }

    /// Carries out the restarts the monitor decided for processes (a watchdog's, or a
    /// `restart_partition`): each process concerned (the member, or every process of its
    /// partition) is killed if it runs, reaped (the kill of its whole cgroup ends it at
    /// once) and started again at the next poll; the decision is done when the member's
    /// new process starts.
    fn restart_decided(&mut self, now: Instant) {
        let Some(health) = &self.health else { return };
        let decisions = lock(health).take_be_restarts();
        for d in decisions {
            let Some(m) = self
                .procs
                .iter()
                .position(|p| p.supervised == Some(d.member))
            else {
                continue;
            };
            let whole = d.action == Action::RestartPartition;
            let partition = self.procs[m].partition;
            for p in &mut self.procs {
                let chosen = match whole {
                    true => p.partition == partition,
                    false => p.supervised == Some(d.member),
                };
                if chosen && !matches!(p.state, State::Restarting(_)) {
                    p.end_for_restart(self.cgroups.as_mut(), now);
                }
            }
            self.procs[m].healing = Some(d);
        }
    }

    /// Feeds the exit of process `i` to the health monitor; true when its `on_exit`
    /// decided what follows (instead of `restart:` and the exit's report): a restart now,
    /// or its end with the action routed ([`crate::health::Health::route`]).
    fn heal(&mut self, i: usize, now: Instant) -> bool {
        let (Some(health), Some(h)) = (&self.health, self.procs[i].supervised) else {
            return false;
        };
        let mut health = lock(health);
        let Some(d) = health.observe(h, Evidence::Exit) else {
            return false;
        };
        let p = &mut self.procs[i];
        if d.action == Action::Restart {
            self.cgroups.kill(p.cgroup);
            p.state = State::Restarting(now);
            p.healing = Some(d);
            return true;
        }
        let status = p.last_status.map(|s| s.to_string()).unwrap_or_default();
        let why = format!("{} exited: {status}; health action: stop", p.what);
        p.state = State::Ended;
        health.route(d, why);
        true
    }

    /// Reports an exit of process `i`: an error when it is required, else a warning.
    fn report(&mut self, i: usize, text: String) {
        let required = self.procs[i].required;
        let text = if required {
            format!("{text} (required: the run fails)")
        } else {
            text
        };
        match required {
            true => self.errors.push(text),
            false => self.warnings.push(text),
        }
    }

    /// Starts process `i` again once what its last run left in its cgroup is gone.
    fn restart(&mut self, i: usize) {
        let p = &mut self.procs[i];
        if !self.cgroups.pids(p.cgroup).is_empty() {
            self.cgroups.kill(p.cgroup);
            return;
        }
        let mut files = Files {
            plans: &self.plans,
            envs: &self.envs,
            cgroups: self.cgroups.as_mut(),
        };
        let result = files.spawn(p.plan, p.env, p.cgroup);
        match result {
            Ok(child) => {
                p.pid = child.pid;
                p.channel = child.channel;
                p.decoder = Decoder::default();
                p.hung_up = false;
                p.memory = child.memory;
                p.state = State::Running;
                p.starts.push_back(Instant::now());
                p.restarts += 1;
                if let (Some(s), Some(h)) = (p.supervised, &self.health) {
                    let mut h = lock(h);
                    h.observe(s, Evidence::Heartbeat);
                    if let Some(d) = p.healing.take() {
                        h.done(&d, Ok(()));
                    }
                }
            }
            Err(e) => {
                p.state = State::Ended;
                if let (Some(d), Some(h)) = (p.healing.take(), &self.health) {
                    lock(h).done(&d, Err(e.to_string()));
                }
                let text = format!("{} could not be restarted: {e}", p.what);
                self.report(i, text);
            }
        }
    }

    /// Keeps the keeper's epoll set (`waiter`) on what can change a running process:
    /// its end (a pidfd) and its channel until it hangs up. A process that stopped
    /// running, or that a restart replaced, is no longer watched (closing its pidfd
    /// removes it from the set). A process whose pidfd cannot be opened is seen at the
    /// next look ([`LOOK_AT_LEAST`]).
    fn watch(&mut self, waiter: &Waiter) {
        for p in &mut self.procs {
            let running = p.state == State::Running;
            if let Some(w) = p.watched.take_if(|w| !running || w.pid != p.pid) {
                w.channel.into_iter().for_each(|fd| waiter.unwatch(fd));
            }
            if !running {
                continue;
            }
            if let Some(w) = &mut p.watched {
                if p.hung_up {
                    w.channel
                        .take()
                        .into_iter()
                        .for_each(|fd| waiter.unwatch(fd));
                }
                continue;
            }
            let Ok(Some(exit)) = bulkhead_os::proc::Process::open(p.pid as u32) else {
                continue;
            };
            if waiter.watch(exit.fd()).is_err() {
                continue;
            }
            let channel = p.channel.as_raw_fd();
            let channel = (!p.hung_up && waiter.watch(channel).is_ok()).then_some(channel);
            p.watched = Some(Watched {
                pid: p.pid,
                _exit: exit,
                channel,
            });
        }
    }

    /// How long the keeper may wait for an event before its next look: until the
    /// earliest pending restart (at least 1 ms: a restart waiting for its cgroup to
    /// empty tries again then), at most [`LOOK_AT_LEAST`].
    fn next_look(&self, now: Instant) -> Duration {
        let restarts = self.procs.iter().filter_map(|p| match p.state {
            State::Restarting(at) => Some(at.saturating_duration_since(now)),
            _ => None,
        });
        let first = restarts.min().unwrap_or(LOOK_AT_LEAST);
        first.clamp(Duration::from_millis(1), LOOK_AT_LEAST)
    }

    /// True once every process has exited for good.
    pub fn all_exited(&mut self) -> bool {
        self.procs.iter().all(|p| p.state == State::Ended)
    }

    /// The reports of the exits so far: warnings, and errors that fail the run (a
    /// `required` process that exited, or that exhausted its start limit). A restarted
    /// process is reported once, with its number of restarts and its last status.
    pub fn reports(&self) -> (Vec<String>, Vec<String>) {
        let mut warnings = self.warnings.clone();
        for p in self.procs.iter().filter(|p| p.restarts > 0) {
            let last = p
                .last_status
                .map_or_else(String::new, |s| format!("; its last exit: {s}"));
            warnings.push(format!(
                "{} was restarted {} times{last}",
                p.what, p.restarts
            ));
        }
        (warnings, self.errors.clone())
    }
}

/// What a (re)start reads and where it starts: the commands, environments and
/// cgroups of a [`UnwindowedRun`].
struct Files<'a> {
    plans: &'a [Prepared],
    envs: &'a [Environment],
    cgroups: &'a mut dyn CgroupManager,
}

impl UnwindowedProc {
    /// Kills it (its whole cgroup) and reaps it if it runs; started again at the next
    /// poll after `now`.
    fn end_for_restart(&mut self, cgroups: &mut dyn CgroupManager, now: Instant) {
        if self.state == State::Running {
            cgroups.kill(self.cgroup);
            let mut status = 0;
            // SAFETY: waitpid on our own child, killed above, with a valid status pointer.
            unsafe { libc::waitpid(self.pid, &mut status, 0) };
            self.memory = None;
            self.last_status = Some(ExitStatus::from_raw(status));
        }
        self.state = State::Restarting(now);
    }
}

impl Files<'_> {
    /// Spawns command `plan` with environment `env` into the (frozen) process cgroup
    /// `pcg`, and thaws it.
    fn spawn(&mut self, plan: usize, env: usize, pcg: Process) -> std::io::Result<spawn::Child> {
        let cgroups = &mut *self.cgroups;
        cgroups
            .set_frozen(pcg, true)
            .map_err(std::io::Error::other)?;
        let child = spawn::spawn_into(&self.plans[plan], &self.envs[env], cgroups, pcg)?;
        cgroups
            .set_frozen(pcg, false)
            .map_err(std::io::Error::other)?;
        Ok(child)
    }
}

/// A [`UnwindowedRun`] owned by a thread of its own that reaps and restarts its processes
/// while the supervisor runs the rest. The thread waits for an event: a process's exit
/// (its pidfd), a message on its channel (a heartbeat, a request), a restart the health
/// monitor routed to it, a pending restart's time, or the run's stop.
pub struct UnwindowedKeeper {
    /// Each partition's name and freezer cgroup.
    pub dirs: Vec<(String, PathBuf)>,
    stop: Arc<AtomicBool>,
    /// Wakes the keeper thread (to stop).
    wakeup: Arc<Wakeup>,
    all_exited: Arc<AtomicBool>,
    thread: Option<JoinHandle<Reports>>,
}

/// What [`UnwindowedKeeper::finish`] returns: warnings, and errors that fail the run.
pub type Reports = (Vec<String>, Vec<String>);

/// The keeper looks at its processes at least this often, whatever woke it (or not):
/// what no event reports (a process whose pidfd could not be opened) is seen then.
const LOOK_AT_LEAST: Duration = Duration::from_millis(100);

/// A [`UnwindowedRun`] handed to the keeper thread.
struct Owned(UnwindowedRun);

// SAFETY: the raw pointers inside a UnwindowedRun (commands, environments, child stacks) point
// into allocations the UnwindowedRun itself owns; nothing else refers to them from this
// process, so moving the whole UnwindowedRun to another thread, which then owns it alone, is
// sound.
unsafe impl Send for Owned {}

impl UnwindowedKeeper {
    /// Hands `run` to a thread that keeps it until [`UnwindowedKeeper::finish`]. Processes it
    /// restarts are that thread's children, whose parent-death signal fires when it
    /// ends: it ends only after its last look, when the run stops them anyway.
    /// `wakeup` is the keeper's (the health monitor notifies it for a restart).
    ///
    /// The thread runs at the normal policy, not under SCHED_FIFO as the supervisor's
    /// loop does. Under SCHED_FIFO, about one process in two that it restarted never ran
    /// its program and the keeper made no restart after it
    /// (`run_health::a_silent_process_is_restarted_by_its_watchdog`: 2 to 5 starts for 5
    /// or 6 restarts in 2 s; at the normal policy 7 starts for 6 restarts, 14 runs of 14).
    /// The likely cause, not pinned down: the keeper spawns into a frozen process cgroup
    /// and thaws it once the child (at the normal policy) has joined it, and a keeper
    /// under SCHED_FIFO waiting for that keeps the child off the CPU.
    pub fn keep(run: UnwindowedRun, wakeup: Arc<Wakeup>) -> Result<UnwindowedKeeper, RunError> {
        let stop = Arc::new(AtomicBool::new(false));
        let all_exited = Arc::new(AtomicBool::new(false));
        let (s, a) = (stop.clone(), all_exited.clone());
        let dirs = run.dirs.clone();
        let owned = Owned(run);
        let waiter = Waiter::new(wakeup.clone()).map_err(|e| RunError::io("epoll", e))?;
        let thread = std::thread::Builder::new()
            .name("bulkhead-be-keeper".into())
            .spawn(move || {
                let mut owned = owned;
                keep_until_stopped(&mut owned.0, waiter, &s, &a)
            })
            .map_err(|e| RunError::io("best-effort keeper thread", e))?;
        Ok(UnwindowedKeeper {
            dirs,
            stop,
            wakeup,
            all_exited,
            thread: Some(thread),
        })
    }

    /// True once every process has exited for good.
    pub fn all_exited(&self) -> bool {
        self.all_exited.load(Ordering::Acquire)
    }

    /// Takes a last look, kills every process, removes the cgroups and returns the
    /// reports of the exits.
    pub fn finish(mut self) -> Reports {
        self.join()
    }

    fn join(&mut self) -> Reports {
        self.stop.store(true, Ordering::Release);
        self.wakeup.notify();
        let thread = self.thread.take();
        thread.and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for UnwindowedKeeper {
    fn drop(&mut self) {
        self.join();
    }
}

fn keep_until_stopped(
    run: &mut UnwindowedRun,
    mut waiter: Waiter,
    stop: &AtomicBool,
    all_exited: &AtomicBool,
) -> Reports {
    while !stop.load(Ordering::Acquire) {
        run.poll(true);
        all_exited.store(run.all_exited(), Ordering::Release);
        run.watch(&waiter);
        waiter.wait(run.next_look(Instant::now()));
    }
    run.poll(false);
    run.reports()
}

impl Drop for UnwindowedRun {
    fn drop(&mut self) {
        self.cgroups.kill_all();
        let deadline = Instant::now() + Duration::from_secs(5);
        let cgroups: Vec<Process> = self.procs.iter().map(|p| p.cgroup).collect();
        let populated = |c: &dyn CgroupManager, p: &Process| !c.pids(*p).is_empty();
        while Instant::now() < deadline && cgroups.iter().any(|p| populated(&*self.cgroups, p)) {
            for p in &cgroups {
                if populated(&*self.cgroups, p) {
                    self.cgroups.kill(*p);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let alive = cgroups.iter().any(|p| populated(&*self.cgroups, p));
        self.poll(false);
        if alive {
            // Not confirmed dead: what they may still read must never be freed.
            for p in &mut self.procs {
                std::mem::forget(p.memory.take());
            }
            std::mem::forget(std::mem::take(&mut self.plans));
            std::mem::forget(std::mem::take(&mut self.envs));
        }
        self.procs.clear();
        if let Err(e) = self.cgroups.remove() {
            eprintln!("bulkhead: warning: {e}");
        }
    }
}

/// The rt cpuset a partition on `cpus` goes under: the smallest of `rt` holding them
/// all; `None` when `cpus` are no rt partition's.
fn rt_cpuset<'a>(cpus: &CpuSet, rt: &'a [(CpuSet, PathBuf)]) -> Option<&'a Path> {
    rt.iter()
        .find(|(set, _)| cpus.is_subset(set))
        .map(|(_, dir)| dir.as_path())
}

/// The CPUs of an unwindowed partition: its own set, or (`all`, none) the system's CPUs
/// (else this process's) that no rt partition owns.
fn partition_cpus(system: &System, p: &Partition, own: &CpuSet) -> Result<CpuSet, RunError> {
    if let Some(Cpus::Set(set)) = &p.cpus {
        return Ok(set.clone());
    }
    let rt: Vec<u32> = system
        .partitions
        .iter()
        .filter(|o| o.kind == PartitionKind::Rt)
        .filter_map(|o| match &o.cpus {
            Some(Cpus::Set(s)) => Some(s.iter().collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    let base = system.cpus.as_ref().unwrap_or(own);
    CpuSet::from_cpus(base.iter().filter(|c| !rt.contains(c))).ok_or_else(|| {
        RunError::invalid(format!(
            "partition `{}`: every CPU belongs to an rt partition; give it `cpus`",
            p.name
        ))
    })
}
