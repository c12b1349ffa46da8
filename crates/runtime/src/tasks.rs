//! rt partitions of a system description, started and watched for the supervisor
//! (`bulkhead run`). This is the hook the window supervisor calls:
//!
//! ```text
//! let rt = RtPartitions::start(&system, &RtOptions { instance, epoch, .. })?; // admit, spawn
//! loop { ...; rt.drain(&mut |event| log(event)); ... }                          // each tick
//! let summary = rt.stop(&mut |event| log(event));                                // at the end
//! ```
//!
//! * Admission: the plan's verdict ([`bulkhead_plan::admit`]) with the machine's
//!   SCHED_DEADLINE bandwidth; a refusal names the first failing task and the test that
//!   failed (or the CPU and its binding constraint), and nothing is started.
//! * Each CPU of an rt partition becomes an exclusive cpuset root domain
//!   (`<instance>/<partition>-cpu<N>`, [`crate::cpuset::ExclusiveDomain`]); each task runs
//!   on the CPU the analysis placed it on.
//! * `scheduler: edf` partitions run their tasks under SCHED_DEADLINE (runtime C, deadline
//!   min(D, T), period T); `fixed-priority` partitions, and EDF partitions where
//!   SCHED_DEADLINE is unavailable (then re-admitted as fixed priority), run under
//!   SCHED_FIFO at their RM/DM priority ([`crate::prio`]) with a budget enforcer per CPU
//!   ([`crate::enforce`]).
//! * Each task process gets its control block and trace ring (`bulkhead-task`); it joins
//!   its domain and takes its reservation before `exec`, so the program starts reserved.
//! * Release 0 (the epoch) is fixed once every task has attached ([`Epoch`]): each task
//!   is created held at its start gate, so however long its program takes to start under
//!   its reservation, its first job is release 0 on the same grid as everyone's.
//! * [`RtPartitions::drain`] turns the tasks' records into trace events (job release,
//!   start, completion, deadline miss) on the schedule's time line (ns since `epoch_ns`).

use crate::confine::Confinement;
use crate::enforce::{Budgeted, Enforcer};
use crate::prio;
use bulkhead_analysis::report::Options;
use bulkhead_analysis::system::{Placement, Report};
use bulkhead_model::{CpuSet, Cpus, Partition, PartitionKind, Resume, Scheduler, System, Task};
use bulkhead_os::cpuset::{self, CpusetMount, Cpusets, Domain, HostCpusets, Shield};
use bulkhead_os::launch::{self, Env, Fds, Join, Launch, Program};
use bulkhead_os::limit::V1Limit;
use bulkhead_os::sched::{detect, DeadlineParams, Policy};
use bulkhead_os::Error;
use bulkhead_plan::admission::{admit, Refusal};
use bulkhead_plan::programs::{Exec, Programs, Site};
use bulkhead_plan::FairServer;
use bulkhead_task::link::{LinkSpec, ModePort, StopStartPort, TaskLink};
use bulkhead_task::{flags, Record, Timing};
use bulkhead_trace::{Event, EventKind, Name};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Why the rt partitions cannot be started or watched.
#[derive(Debug)]
pub enum RtError {
    /// The analysis refuses the system on this machine (the plan's verdict).
    Refused(Box<Refusal>),
    /// A task's words shared with the task library (its control block and trace ring,
    /// its mode or stop-start words) cannot be made or mapped.
    Link {
        task: String,
        what: &'static str,
        source: bulkhead_task::Error,
    },
    /// A reservation, cpuset or limit cannot be set up (or the description asks for one
    /// that cannot exist here).
    Os(Error),
}

/// A result of the rt partitions' start.
pub type Result<T> = std::result::Result<T, RtError>;

impl From<Error> for RtError {
    fn from(e: Error) -> RtError {
        RtError::Os(e)
    }
}

impl std::fmt::Display for RtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RtError::Refused(r) => write!(f, "{r}"),
            RtError::Link { task, what, source } => write!(f, "task `{task}`: {what}: {source}"),
            RtError::Os(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RtError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RtError::Refused(r) => Some(r.as_ref()),
            RtError::Link { source, .. } => Some(source),
            RtError::Os(e) => Some(e),
        }
    }
}

impl RtError {
    /// Whether the description, not the machine, is at fault: a refusal or an
    /// impossible request (`run` reports it as invalid input).
    pub fn is_invalid(&self) -> bool {
        matches!(self, RtError::Refused(_) | RtError::Os(Error::Invalid(_)))
    }
}

/// An admitted system, as [`RtPartitions::start_on`] starts it.
struct Start<'a> {
    system: &'a System,
    report: &'a Report,
    /// The machine's analysis options it was admitted with ([`machine_options`]).
    machine: Options,
    hierarchy: &'a CpusetMount,
    plans: &'a [Exec],
}

/// How to start the rt partitions.
#[derive(Debug, Clone)]
pub struct RtOptions {
    /// The instance's cgroup name under the cpuset mount (contains "bulkhead"); the
    /// partitions' domains are created below it.
    pub instance: PathBuf,
    /// Where every task's release 0 (the schedule start) is put.
    pub epoch: Epoch,
    /// Working directory of the task processes.
    pub workdir: PathBuf,
    /// The programs of the system's tasks, resolved ([`Programs::resolve`]).
    pub programs: Programs,
    /// Trace ring capacity per task, in records.
    pub ring_depth: u32,
    /// Move every other process of the top cpuset off the rt CPUs while the partitions
    /// run ([`crate::cpuset::Shield`], cgroup v1). Off by default: it affects the whole
    /// machine.
    pub shield: bool,
}

/// Where [`RtPartitions::start`] puts release 0 (the epoch), once it has spawned every
/// task: at the first multiple of `grid_ns` on CLOCK_MONOTONIC at least `after_attach_ns`
/// after the last task (of the initial mode) attached to the task library. A task starts
/// (exec, loading, its program's set-up) under its own reservation, which for a small one
/// (100 µs per 2 ms) takes tens of milliseconds; an epoch fixed before that would find its
/// first releases passed (skipped, missed) and its reservation in debt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch {
    /// The least time from the last attach to release 0: room to store the epoch in every
    /// control block, open the gates and start the enforcers, and for a reservation to
    /// repay what its start-up overran.
    pub after_attach_ns: u64,
    /// Release 0 is a multiple of this (1: anywhere).
    pub grid_ns: u64,
    /// The longest the supervisor waits for every task to attach; then it fixes the
    /// epoch without the tasks still missing ([`RtPartitions::unattached`]).
    pub attach_within: Duration,
}

/// The program of every rt task, in start order, as `programs` resolved it. A task
/// without one (a description without `cmd`, which analysis and simulation accept) is
/// an [`Error::Invalid`] naming its partition, the task and its key path.
fn task_programs(system: &System, programs: &Programs) -> Result<Vec<Exec>> {
    let mut plans = Vec::new();
    for (pi, p) in system.partitions.iter().enumerate() {
        if p.kind != PartitionKind::Rt {
            continue;
        }
        for (ti, task) in p.tasks.iter().enumerate() {
            let site = Site::Task {
                partition: pi,
                task: ti,
            };
            let exec = programs.get(site).ok_or_else(|| {
                Error::Invalid(format!(
                    "partition `{}`, task `{}` (partitions[{pi}].tasks[{ti}].cmd): the task has no command to run",
                    p.name, task.name
                ))
            })?;
            plans.push(exec.clone());
        }
    }
    Ok(plans)
}

/// A task's process id, shared by the rt drain thread and the task's mode agent. Each
/// holds the lock while it acts on the process (the agent to stop, continue or reserve
/// it, a restart to kill, reap and replace it), so that the agent never acts on a
/// process a restart reaped, nor on a new one before its pid is stored; the pid read
/// under the lock is the task's live (or not yet reaped) process.
pub type SharedPid = Arc<Mutex<u32>>;

/// Locks `pid`, whatever a panicking holder left (the value is one store).
pub fn lock_pid(pid: &SharedPid) -> MutexGuard<'_, u32> {
    pid.lock().unwrap_or_else(|e| e.into_inner())
}

/// One running task.
struct Running {
    partition: Name,
    task: Name,
    cpu: u32,
    /// The task's timings seen so far, each with the CLOCK_MONOTONIC time of its first
    /// release (0 for the first), oldest first; a mode agent changes them.
    timings: Vec<(u64, Timing)>,
    policy: Policy,
    link: TaskLink,
    child: TaskChild,
    /// The child's pid, as its mode agent sees it.
    pid: SharedPid,
    /// Started parked (stopped, SCHED_OTHER): its task is not in the initial mode.
    parked: bool,
    /// Whether its partition reclaims (SCHED_FLAG_RECLAIM) when it runs under EDF.
    reclaim: bool,
    /// Releases before this CLOCK_MONOTONIC time are not judged (the task was parked by
    /// its mode agent, which moves it: `u64::MAX` while parked, the start time after).
    judged_from: Arc<AtomicU64>,
    /// When its mode agent last saw it stopped (CLOCK_MONOTONIC, 0: never parked): a job
    /// released before and completed after was cut by the park.
    parked_at: Arc<AtomicU64>,
    exited: bool,
    /// What a restart starts it with again: its program, cgroups, confinement, and
    /// whether it continues on its release grid or begins a new one.
    exec: Exec,
    cgroups: Vec<PathBuf>,
    confinement: Confinement,
    resume: Resume,
    /// Records its last process wrote that a restart drained, reported at the next drain.
    leftover: Vec<Record>,
    /// Next job index whose release was not yet reported.
    reported: u64,
    /// Message events the task dropped, as last reported.
    msg_dropped: u64,
    /// Jobs reported over their budget ([`flags::OVER_BUDGET`]) since the last
    /// [`RtPartitions::take_overruns`].
    overruns: u32,
    stats: TaskSummary,
}

/// Per-task figures of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSummary {
    pub partition: String,
    pub task: String,
    pub pid: u32,
    /// The reservation, as `chrt` names the policy.
    pub policy: &'static str,
    pub jobs: u64,
    pub max_response_ns: u64,
    /// Response time of the last job judged.
    pub last_response_ns: u64,
    /// The named counters at the last drain.
    pub counters: Vec<(String, u64)>,
    /// Jobs completed after their deadline plus releases skipped.
    pub misses: u64,
    /// Trace records the task could not write (ring full).
    pub dropped: u64,
    /// For a SCHED_FIFO task, the periods in which its budget enforcer demoted it to
    /// SCHED_IDLE (it used its budget before its job ended); `None` for other policies.
    /// Known once the partitions stopped.
    pub throttled: Option<u64>,
    /// How the task ended if it ended on its own, before it was asked to stop
    /// (`exit status: 1`, `signal: 9 (SIGKILL)`); `None` if it ran until the stop.
    pub ended_early: Option<String>,
}

impl TaskSummary {
    /// The figures of task `task` of `partition`, process `pid` under `policy`, before
    /// its first job.
    pub fn new(partition: &str, task: &str, pid: u32, policy: &'static str) -> TaskSummary {
        TaskSummary {
            partition: partition.to_string(),
            task: task.to_string(),
            pid,
            policy,
            jobs: 0,
            max_response_ns: 0,
            last_response_ns: 0,
            counters: Vec::new(),
            misses: 0,
            dropped: 0,
            throttled: None,
            ended_early: None,
        }
    }
}

/// A task as its partition's mode agent sees it ([`RtPartitions::mode_ports`]).
pub struct TaskPort {
    pub partition: String,
    pub task: String,
    /// Hold it while acting on the process (a restart replaces it).
    pub pid: SharedPid,
    /// Stopped and without a reservation: not in the initial mode.
    pub parked: bool,
    /// Its reservation reclaims (`SCHED_FLAG_RECLAIM`, the partition's `reclaim`).
    pub reclaim: bool,
    pub port: ModePort,
    /// Releases before this CLOCK_MONOTONIC time are not deadline misses: the agent
    /// stores `u64::MAX` when it parks the task and the time it starts it again.
    pub judged_from: Arc<AtomicU64>,
    /// The agent stores the time it saw the task stopped when it parks it.
    pub parked_at: Arc<AtomicU64>,
}

/// A task as the supervisor's stop-start sees it ([`RtPartitions::stop_start_ports`]).
pub struct StopStartTask {
    pub partition: String,
    pub task: String,
    pub port: StopStartPort,
    /// As [`TaskPort::judged_from`]: releases before this time are not deadline misses.
    pub judged_from: Arc<AtomicU64>,
}

/// The rt partitions of a running system.
pub struct RtPartitions {
    epoch_ns: u64,
    /// Set by [`RtPartitions::stop`]: exits from then on were asked for.
    stopping: bool,
    tasks: Vec<Running>,
    enforcers: Vec<Enforcer>,
    /// Where the domains are made ([`HostCpusets`]; a fake host in tests).
    cpusets: Box<dyn Cpusets>,
    /// One domain per (partition, CPU), removed in reverse order of creation.
    domains: Vec<Domain>,
    /// The instance's cpuset on every rt CPU, created first and removed last when this
    /// run created it (the window supervisor may own it instead).
    instance: Option<Domain>,
    shield: Option<Shield>,
    /// The machine's analysis options the system was admitted with.
    machine: Options,
    /// v1 memory and pids cgroups of partitions with a memory or pids limit.
    limits: Vec<V1Limit>,
    /// Working directory of the task processes (of a restarted one too).
    workdir: PathBuf,
    /// The tasks that had not attached when the epoch was fixed.
    unattached: Vec<String>,
    /// Tasks seen to end on their own since the last [`Self::take_exits`]: (partition,
    /// task, how it ended).
    exits: Vec<(String, String, String)>,
}

/// The analysis options of this machine's kernel, as admission counts them: its
/// SCHED_DEADLINE cap (`/proc/sys/kernel/sched_rt_*`) and its fair servers (debugfs; the
/// kernel's defaults where they cannot be read, as under lockdown). Read once per run by
/// [`admit_here`]: [`RtPartitions::start_confined`] admits with them and keeps them for
/// the mode agents' table ([`RtPartitions::machine_options`]).
fn machine_options() -> Result<Options> {
    let cap = bulkhead_os::bandwidth::cap(Path::new(bulkhead_os::bandwidth::SYSCTL_DIR))?;
    let fair_server = FairServer::read(bulkhead_os::bandwidth::fair_servers(Path::new(
        bulkhead_os::bandwidth::FAIR_SERVER_DIR,
    )));
    Ok(Options {
        deadline_cap: cap,
        sensitivity: false,
        fair_server,
    })
}

/// Admits `system` as this machine's kernel will ([`machine_options`]): its report and
/// the options it was admitted with.
pub fn admit_here(system: &System) -> Result<(Report, Options)> {
    let machine = machine_options()?;
    let report = admit(system, &machine).map_err(|r| RtError::Refused(Box::new(r)))?;
    Ok((report, machine))
}

impl RtPartitions {
    /// Admits `system`, creates the domains and starts every rt task. On error everything
    /// started so far is stopped and removed.
    pub fn start(system: &System, options: &RtOptions) -> Result<RtPartitions> {
        RtPartitions::start_confined(system, options, &|_, _| Confinement::default())
    }

    /// [`RtPartitions::start`], each task confined by `confine(partition, task)`
    /// (user, network namespace, environment; none where absent).
    pub fn start_confined(
        system: &System,
        options: &RtOptions,
        confine: &dyn Fn(&Partition, &Task) -> Confinement,
    ) -> Result<RtPartitions> {
        let mut system = system.clone();
        // Only a kernel without SCHED_DEADLINE or a supervisor without CAP_SYS_NICE makes
        // EDF partitions fall back; a busy or affinity-restricted probe says nothing about
        // the tasks' own exclusive domains.
        if let Some(why) = detect::deadline().err().filter(|u| u.is_permanent()) {
            if system.modes.is_some() {
                return Err(RtError::Os(Error::Invalid(format!(
                    "modes are executed with SCHED_DEADLINE reservations: {why}"
                ))));
            }
            for p in system
                .partitions
                .iter_mut()
                .filter(|p| p.scheduler == Scheduler::Edf)
            {
                eprintln!(
                    "bulkhead: partition `{}`: {why}; using SCHED_FIFO with budget enforcement",
                    p.name
                );
                p.scheduler = Scheduler::FixedPriority;
                p.reclaim = false;
            }
        }
        let plans = task_programs(&system, &options.programs)?;
        let (report, machine) = admit_here(&system)?;
        let hierarchy = cpuset::detect()?;
        let cpusets = Box::new(HostCpusets::new(&hierarchy));
        let start = Start {
            system: &system,
            report: &report,
            machine,
            hierarchy: &hierarchy,
            plans: &plans,
        };
        RtPartitions::start_on(start, cpusets, options, confine)
    }

    /// [`RtPartitions::start_confined`] of an admitted system, its domains made in
    /// `cpusets`. On error everything started so far is stopped and removed.
    fn start_on(
        start: Start<'_>,
        cpusets: Box<dyn Cpusets>,
        options: &RtOptions,
        confine: &dyn Fn(&Partition, &Task) -> Confinement,
    ) -> Result<RtPartitions> {
        let Start {
            system,
            report,
            machine,
            hierarchy,
            plans,
        } = start;
        let mut rt = RtPartitions {
            epoch_ns: 0,
            stopping: false,
            tasks: Vec::new(),
            enforcers: Vec::new(),
            cpusets,
            domains: Vec::new(),
            instance: None,
            shield: None,
            machine,
            limits: Vec::new(),
            workdir: options.workdir.clone(),
            unattached: Vec::new(),
            exits: Vec::new(),
        };
        let dir = hierarchy.mount().join(&options.instance);
        if let (false, Some(cpus)) = (dir.exists(), rt_cpus(system, report)?) {
            let instance = rt
                .cpusets
                .add_domain(&options.instance, &cpus.to_string())?;
            rt.instance = Some(instance);
        }
        if options.shield {
            rt.shield = Some(shield(hierarchy, system, report, options)?);
        }
        rt.spawn_all(system, report, hierarchy, options, plans, confine)?;
        rt.unattached = rt.await_attach(options.epoch.attach_within);
        rt.fix_epoch(&options.epoch);
        rt.start_enforcers()?;
        rt.open_gates();
        Ok(rt)
    }

    /// The machine's analysis options the system was admitted with: the mode agents'
    /// table ([`crate::modes::ModeManager::start`]) counts bandwidth as admission did.
    pub fn machine_options(&self) -> &Options {
        &self.machine
    }

    /// CLOCK_MONOTONIC time of every task's release 0, as [`Epoch`] fixed it.
    pub fn epoch_ns(&self) -> u64 {
        self.epoch_ns
    }

    /// The tasks (`partition/task`) that had not attached when the epoch was fixed:
    /// programs that do not use the task library (a health watchdog notices them), or
    /// that took longer than [`Epoch::attach_within`].
    pub fn unattached(&self) -> &[String] {
        &self.unattached
    }

    /// Waits until every task of the initial mode has attached to its control block or
    /// ended (one not in the initial mode is stopped at spawn and attaches in its mode
    /// agent's warm-up), at most `within`. Returns the tasks still waited for then.
    fn await_attach(&mut self, within: Duration) -> Vec<String> {
        let until = Instant::now() + within;
        loop {
            let waiting: Vec<String> = self
                .tasks
                .iter_mut()
                .filter(|t| !t.parked && !t.link.attached())
                .filter_map(|t| match t.child.try_wait() {
                    Ok(Some(_)) => None,
                    _ => Some(format!("{}/{}", t.partition, t.task)),
                })
                .collect();
            if waiting.is_empty() || Instant::now() >= until {
                return waiting;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Puts release 0 where `rule` says, from now (the last attach), in every task's
    /// control block. Precondition: every task is held at its start gate, so none has
    /// planned a release on the epoch it was created with.
    fn fix_epoch(&mut self, rule: &Epoch) {
        let after = bulkhead_task::clock::now_ns() + rule.after_attach_ns;
        self.epoch_ns = after.next_multiple_of(rule.grid_ns.max(1));
        for t in &self.tasks {
            t.link.set_epoch_ns(self.epoch_ns);
        }
    }

    /// Opens the start gate of every task of the initial mode (the others' agents open
    /// theirs when their mode starts them). Postcondition: each such task plans its
    /// releases on the epoch [`Self::fix_epoch`] stored (the gate's Release store orders
    /// it before).
    fn open_gates(&self) {
        for t in self.tasks.iter().filter(|t| !t.parked) {
            t.link.release();
        }
    }

    /// The index in `self.domains` of the exclusive domain `name` (first CPU `cpu`, CPUs
    /// `set`) of partition `p`, created the first time a task needs it; `domains` maps a
    /// domain's name and first CPU to its index.
    fn domain(
        &mut self,
        domains: &mut BTreeMap<(String, u32), usize>,
        (name, cpu, set): (String, u32, &CpuSet),
        p: &Partition,
        h: &CpusetMount,
        options: &RtOptions,
    ) -> Result<usize> {
        let key = (name, cpu);
        if let Some(&d) = domains.get(&key) {
            return Ok(d);
        }
        let rel = options.instance.join(&key.0);
        let domain = self.cpusets.add_domain(&rel, &set.to_string())?;
        if matches!(h, CpusetMount::V2(_)) {
            limit_v2(self.cpusets.dir(domain), p)?;
        }
        self.domains.push(domain);
        domains.insert(key, self.domains.len() - 1);
        Ok(self.domains.len() - 1)
    }

    fn spawn_all(
        &mut self,
        system: &System,
        report: &Report,
        h: &CpusetMount,
        options: &RtOptions,
        plans: &[Exec],
        confine: &dyn Fn(&Partition, &Task) -> Confinement,
    ) -> Result<()> {
        let mut domains: BTreeMap<(String, u32), usize> = BTreeMap::new();
        let mut index = 0u32;
        let initial = initial_view(system);
        for p in system
            .partitions
            .iter()
            .filter(|p| p.kind == PartitionKind::Rt)
        {
            let fifo = match p.scheduler {
                Scheduler::FixedPriority => fifo_levels(report, p)?,
                Scheduler::Edf => Vec::new(),
            };
            let joins = self.v1_limits(p, h, options)?;
            let running = initial.partitions.iter().find(|v| v.name == p.name);
            for (ti, task) in p.tasks.iter().enumerate() {
                let now = running.and_then(|v| v.tasks.iter().find(|t| t.name == task.name));
                let verdict = verdict(report, &p.name, &task.name).ok_or_else(|| {
                    Error::Invalid(format!("no analysis verdict for task `{}`", task.name))
                })?;
                let (cpu, set, name) = cpus_of(system, p, &task.name, &verdict.placement)?;
                let d = self.domain(&mut domains, (name, cpu, &set), p, h, options)?;
                let policy = initial_policy(now, p, &fifo, ti)?;
                let link = task_link(task, index, options)?;
                let cgroups: Vec<PathBuf> = std::iter::once(self.cpusets.dir(self.domains[d]))
                    .chain(joins.iter().map(PathBuf::as_path))
                    .map(Path::to_path_buf)
                    .collect();
                let confinement = confine(p, task);
                let target = Target {
                    cgroups: &cgroups,
                    policy,
                    workdir: &options.workdir,
                    confine: &confinement,
                };
                // No job before the epoch is fixed ([`Self::open_gates`]), nor, for a task
                // not in the initial mode, before its mode agent starts it, however late
                // the SIGSTOP below lands.
                link.hold();
                let child = spawn(&plans[index as usize], &link, &target).map_err(|e| {
                    Error::os(
                        format!("starting task `{}` ({})", task.name, task.cmd),
                        e,
                        "",
                    )
                })?;
                if now.is_none() {
                    signal(child.id(), bulkhead_os::proc::SIGSTOP);
                }
                self.tasks.push(Running {
                    partition: Arc::from(p.name.as_str()),
                    task: Arc::from(task.name.as_str()),
                    cpu,
                    timings: vec![(0, link.timing())],
                    policy,
                    link,
                    stats: TaskSummary::new(&p.name, &task.name, child.id(), policy.name()),
                    msg_dropped: 0,
                    overruns: 0,
                    pid: Arc::new(Mutex::new(child.id())),
                    child,
                    parked: now.is_none(),
                    reclaim: p.reclaim,
                    judged_from: Arc::new(AtomicU64::new(match now {
                        Some(_) => 0,
                        None => u64::MAX,
                    })),
                    parked_at: Arc::new(AtomicU64::new(0)),
                    exited: false,
                    exec: plans[index as usize].clone(),
                    cgroups,
                    confinement,
                    resume: task.resume,
                    leftover: Vec::new(),
                    reported: 0,
                });
                index += 1;
            }
        }
        Ok(())
    }

    /// cgroup v1: a memory and a pids cgroup of partition `p`'s own (for the limits it
    /// has), which its tasks join besides their cpuset; their `cgroup.procs` directories.
    fn v1_limits(
        &mut self,
        p: &Partition,
        h: &CpusetMount,
        options: &RtOptions,
    ) -> Result<Vec<PathBuf>> {
        if !matches!(h, CpusetMount::V1(_)) {
            return Ok(Vec::new());
        }
        let name = format!("{}-{}", options.instance.display(), p.name);
        let mut joins = Vec::new();
        for (controller, value, _, file) in wanted_limits(p) {
            let Some(value) = value else { continue };
            let limit = V1Limit::create(controller, &name, file, value)?;
            joins.push(limit.dir().to_path_buf());
            self.limits.push(limit);
        }
        Ok(joins)
    }

    fn start_enforcers(&mut self) -> Result<()> {
        let mut per_cpu: BTreeMap<u32, Vec<Budgeted>> = BTreeMap::new();
        for t in &self.tasks {
            if let Policy::Fifo { priority } = t.policy {
                per_cpu.entry(t.cpu).or_default().push(Budgeted {
                    pid: t.child.id() as i32,
                    priority,
                    budget: t.link.spec().budget_ns,
                    period: t.link.spec().period_ns,
                    first_release: t.link.epoch_ns() + t.link.release_offset_ns(),
                });
            }
        }
        for (cpu, tasks) in per_cpu {
            self.enforcers.push(Enforcer::start(Some(cpu), tasks)?);
        }
        Ok(())
    }

    /// The CPUs the tasks run on.
    pub fn cpus(&self) -> Option<CpuSet> {
        CpuSet::from_cpus(self.tasks.iter().map(|t| t.cpu))
    }

    /// The cpusets of the rt CPUs, smallest first: each task domain, then the instance
    /// over all of them (v1: a best-effort partition on CPUs of a non-exclusive rt
    /// partition gets its cpuset under the smallest that holds its CPUs, since no
    /// sibling of an exclusive cpuset may use its CPUs).
    pub fn cpusets(&self) -> Vec<(CpuSet, PathBuf)> {
        let mut all: Vec<(CpuSet, PathBuf)> = self
            .domains
            .iter()
            .chain(&self.instance)
            .map(|&d| (self.cpusets.cpus(d), self.cpusets.dir(d)))
            .filter_map(|(cpus, dir)| Some((CpuSet::parse(cpus).ok()?, dir.to_path_buf())))
            .collect();
        all.sort_by_key(|(cpus, _)| cpus.iter().count());
        all
    }

    /// What a mode agent needs of every task, in declaration order: its pid, whether it
    /// starts parked, and a mapping of its mode words.
    pub fn mode_ports(&self) -> Result<Vec<TaskPort>> {
        self.tasks
            .iter()
            .map(|t| {
                Ok(TaskPort {
                    partition: t.partition.to_string(),
                    task: t.task.to_string(),
                    pid: t.pid.clone(),
                    parked: t.parked,
                    reclaim: t.reclaim,
                    judged_from: t.judged_from.clone(),
                    parked_at: t.parked_at.clone(),
                    port: t.link.mode_port().map_err(|source| RtError::Link {
                        task: t.task.to_string(),
                        what: "mode words",
                        source,
                    })?,
                })
            })
            .collect()
    }

    /// What the supervisor's stop-start needs of every task, in declaration order.
    pub fn stop_start_ports(&self) -> Result<Vec<StopStartTask>> {
        self.tasks
            .iter()
            .map(|t| {
                Ok(StopStartTask {
                    partition: t.partition.to_string(),
                    task: t.task.to_string(),
                    judged_from: t.judged_from.clone(),
                    port: t.link.stop_start_port().map_err(|source| RtError::Link {
                        task: t.task.to_string(),
                        what: "stop-start words",
                        source,
                    })?,
                })
            })
            .collect()
    }

    /// The descriptors that become readable when a task reports a late job (each task
    /// link's wake eventfd, the same across restarts).
    pub fn wake_fds(&self) -> Vec<i32> {
        self.tasks.iter().map(|t| t.link.wake_fd()).collect()
    }

    /// Consumes the tasks' late-job notifications.
    pub fn clear_wakes(&self) {
        self.tasks.iter().for_each(|t| t.link.clear_wake());
    }

    /// The task processes' pids, in declaration order.
    pub fn pids(&self) -> Vec<u32> {
        self.tasks.iter().map(|t| t.child.id()).collect()
    }

    /// The pids of the task processes not yet seen to exit (by [`Self::all_exited`]).
    pub fn running_pids(&self) -> Vec<u32> {
        let running = self.tasks.iter().filter(|t| !t.exited);
        running.map(|t| t.child.id()).collect()
    }

    /// Per-task figures so far (jobs, worst response, misses), in declaration order.
    pub fn summaries(&self) -> Vec<TaskSummary> {
        self.tasks.iter().map(|t| t.stats.clone()).collect()
    }

    /// Whether every task process has exited. A task seen to exit before [`Self::stop`]
    /// asked it to has ended early: its summary says how.
    pub fn all_exited(&mut self) -> bool {
        for t in self.tasks.iter_mut().filter(|t| !t.exited) {
            if let Ok(Some(status)) = t.child.try_wait() {
                t.exited = true;
                if !self.stopping {
                    t.stats.ended_early = Some(status.to_string());
                    let (p, task) = (t.partition.to_string(), t.task.to_string());
                    self.exits.push((p, task, status.to_string()));
                }
            }
        }
        self.tasks.iter().all(|t| t.exited)
    }

    /// The tasks seen to end on their own since the last call: (partition, task, how it
    /// ended).
    pub fn take_exits(&mut self) -> Vec<(String, String, String)> {
        std::mem::take(&mut self.exits)
    }

    /// The tasks with jobs reported over their budget since the last call (the task
    /// library's budget accounting, [`flags::OVER_BUDGET`]): (partition, task, how many).
    pub fn take_overruns(&mut self) -> Vec<(String, String, u32)> {
        let over = self.tasks.iter_mut().filter(|t| t.overruns > 0);
        let take = |t: &mut Running| {
            let n = std::mem::take(&mut t.overruns);
            (t.partition.to_string(), t.task.to_string(), n)
        };
        over.map(take).collect()
    }

    /// Starts again the tasks `names` of `partition` (every task of it when `names` is
    /// empty), running or not, through the same launcher, cgroups, confinement and
    /// reservation as at the start (JuMP2start 2.2: a continuable task goes on at the
    /// first release of its grid after the restart, a restartable one begins a new grid
    /// at the restart instant; the new process's first activation carries `RESTARTED`).
    /// Releases before the restart are not judged. SCHED_FIFO budget enforcers are
    /// started again for the new pids. In a system with modes, a task restarts as its
    /// mode agent left it: parked (held at its start gate, stopped, SCHED_OTHER) when
    /// its mode does not run it, else under the reservation of its timing now
    /// ([`Running::respawn`]). Returns the restarted tasks' names; on error the tasks
    /// restarted before it stay running.
    pub fn restart(
        &mut self,
        partition: &str,
        names: &[&str],
    ) -> std::result::Result<Vec<String>, String> {
        let chosen = |t: &Running| {
            &*t.partition == partition && (names.is_empty() || names.contains(&&*t.task))
        };
        let fifo = self
            .tasks
            .iter()
            .any(|t| chosen(t) && matches!(t.policy, Policy::Fifo { .. }));
        // Stopped before the pids change, so that what they throttled is counted.
        if fifo {
            self.stop_enforcers();
        }
        let mut restarted = Vec::new();
        let workdir = &self.workdir;
        let respawned = self
            .tasks
            .iter_mut()
            .filter(|t| chosen(t))
            .try_for_each(|t| {
                t.respawn(workdir)?;
                restarted.push(t.task.to_string());
                Ok(())
            });
        if fifo {
            self.start_enforcers().map_err(|e| e.to_string())?;
        }
        respawned.map(|()| restarted)
    }

    /// Stops the budget enforcers, adding what they throttled to the tasks' figures.
    fn stop_enforcers(&mut self) {
        for stats in self.enforcers.drain(..).flat_map(Enforcer::stop) {
            let pid = stats.pid as u32;
            if let Some(t) = self.tasks.iter_mut().find(|t| t.stats.pid == pid) {
                *t.stats.throttled.get_or_insert(0) += stats.throttled;
            }
        }
    }

    /// Moves the tasks' new records into `sink` as trace events, and each named counter
    /// whose value changed since the last drain as a `counter` event (at the drain time).
    pub fn drain(&mut self, sink: &mut impl FnMut(Event)) {
        let epoch = self.epoch_ns;
        let now = bulkhead_task::clock::now_ns().saturating_sub(epoch);
        for t in &mut self.tasks {
            let mut recs = std::mem::take(&mut t.leftover);
            t.link.drain(&mut recs);
            for r in recs {
                t.report(&r, epoch, sink);
            }
            t.report_messages(epoch, now, sink);
            t.report_counters(now, sink);
        }
    }

    /// Asks every task to stop, waits up to 1 s, kills what remains, drains the last
    /// records, stops the enforcers and removes the domains. Returns per-task figures.
    pub fn stop(mut self, sink: &mut impl FnMut(Event)) -> Vec<TaskSummary> {
        self.all_exited();
        self.stopping = true;
        for t in &self.tasks {
            t.link.request_stop();
            // A task parked by its mode agent must run to see the request.
            signal(t.child.id(), bulkhead_os::proc::SIGCONT);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while !self.all_exited() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        self.drain(sink);
        self.shutdown();
        self.tasks.iter().map(|t| t.stats.clone()).collect()
    }

    fn shutdown(&mut self) {
        for t in &mut self.tasks {
            t.child.kill(t.parked_by_agent());
            t.child.wait();
            t.stats.dropped = t.link.counters().dropped;
        }
        self.stop_enforcers();
        // The domains kill what the tasks left (their children) as they go; the limit
        // cgroups those children are in can be removed only after that.
        while let Some(d) = self.domains.pop() {
            if let Err(e) = self.cpusets.remove(d) {
                eprintln!("bulkhead: {e}");
            }
        }
        self.limits.clear();
        self.shield = None;
        if let Some(Err(e)) = self.instance.take().map(|d| self.cpusets.remove(d)) {
            eprintln!("bulkhead: {e}");
        }
    }
}

impl Drop for RtPartitions {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Running {
    /// Kills and reaps its process if it runs, and starts it again (see
    /// [`RtPartitions::restart`]).
    /// Kills, reaps and starts again the task's process, holding its [`SharedPid`]
    /// throughout: its mode agent waits, then acts on the new process. A task its agent
    /// parked (`judged_from` is `u64::MAX`) starts parked again, held at its start gate
    /// and stopped, for the agent to start when its mode comes.
    fn respawn(&mut self, workdir: &Path) -> std::result::Result<(), String> {
        let shared = self.pid.clone();
        let mut pid = lock_pid(&shared);
        self.child.kill(self.parked_by_agent());
        self.child.wait();
        self.link
            .restart(&mut self.leftover)
            .map_err(|e| format!("task `{}`: a new trace ring: {e}", self.task))?;
        let now = bulkhead_task::clock::now_ns();
        if self.resume == Resume::Restartable {
            self.link.set_epoch_ns(now);
        }
        self.judged_from.fetch_max(now, Ordering::AcqRel);
        let parked = self.parked_by_agent();
        if parked {
            self.link.hold();
        }
        let target = Target {
            cgroups: &self.cgroups,
            policy: self.restart_policy(parked)?,
            workdir,
            confine: &self.confinement,
        };
        let child = spawn(&self.exec, &self.link, &target)
            .map_err(|e| format!("restarting task `{}`: {e}", self.task))?;
        if parked {
            signal(child.id(), bulkhead_os::proc::SIGSTOP);
        }
        *pid = child.id();
        self.stats.pid = child.id();
        self.stats.ended_early = None;
        self.child = child;
        self.exited = false;
        Ok(())
    }

    /// Whether its mode agent parked it (`judged_from` is `u64::MAX`; stable while the
    /// task's pid lock is held, under which the agent parks and starts it).
    fn parked_by_agent(&self) -> bool {
        self.judged_from.load(Ordering::Acquire) == u64::MAX
    }

    /// The policy a restart starts the task under, as its mode agent left it: parked,
    /// SCHED_OTHER; at its SCHED_FIFO level; else the SCHED_DEADLINE reservation of its
    /// timing now (a mode switch may have changed it since the start, and a task started
    /// parked got its reservation from its agent).
    fn restart_policy(&self, parked: bool) -> std::result::Result<Policy, String> {
        if parked {
            return Ok(Policy::Other { nice: 0 });
        }
        if matches!(self.policy, Policy::Fifo { .. }) {
            return Ok(self.policy);
        }
        let t = self.link.timing();
        DeadlineParams::for_task(t.budget_ns, t.deadline_ns, t.period_ns)
            .map(|p| Policy::Deadline(p.reclaiming(self.reclaim)))
            .map_err(|e| format!("restarting task `{}`: {e}", self.task))
    }

    /// Emits a `message` event per message the task finished (a pipeline's sink), and
    /// the count of those it dropped, as the counter `msg_dropped`, when it grew. Takes
    /// at most 16 rings' worth: a task that keeps the ring full cannot hold the drain.
    fn report_messages(&mut self, epoch: u64, t_ns: u64, sink: &mut impl FnMut(Event)) {
        let mut messages = Vec::new();
        for _ in 0..16 {
            if self.link.take_messages(&mut messages) < bulkhead_task::control::MESSAGE_EVENTS {
                break;
            }
        }
        for (id, origin_ns, done_ns) in messages {
            sink(Event::new(
                done_ns.saturating_sub(epoch),
                EventKind::Message {
                    partition: self.partition.clone(),
                    task: self.task.clone(),
                    id,
                    e2e_ns: done_ns.saturating_sub(origin_ns),
                },
            ));
        }
        let dropped = self.link.messages_dropped();
        if dropped > self.msg_dropped {
            self.msg_dropped = dropped;
            sink(Event::new(
                t_ns,
                EventKind::Counter {
                    partition: self.partition.clone(),
                    task: self.task.clone(),
                    name: Arc::from("msg_dropped"),
                    value: dropped,
                },
            ));
        }
    }

    fn report_counters(&mut self, t_ns: u64, sink: &mut impl FnMut(Event)) {
        let now = self.link.named_counters();
        for (name, value) in &now {
            let seen = self.stats.counters.iter().find(|(n, _)| n == name);
            if seen.is_some_and(|(_, v)| v == value) {
                continue;
            }
            sink(Event::new(
                t_ns,
                EventKind::Counter {
                    partition: self.partition.clone(),
                    task: self.task.clone(),
                    name: Arc::from(name.as_str()),
                    value: *value,
                },
            ));
        }
        self.stats.counters = now;
    }

    /// The timing the task's release at `release_ns` (CLOCK_MONOTONIC) was made under:
    /// the latest one seen whose first release is not after it. A mode agent changes a
    /// task's timing at most once per agent period and the supervisor drains records
    /// far more often; a timing made and replaced between two drains is not seen, and
    /// its releases are judged by the one before.
    fn timing_at(&mut self, release_ns: u64) -> Timing {
        let now = self.link.timing();
        if self.timings.last().is_some_and(|(_, t)| t.seq != now.seq) {
            self.timings.push((self.link.epoch_ns() + now.from_ns, now));
            if self.timings.len() > 4 {
                self.timings.remove(0);
            }
        }
        let at = self
            .timings
            .iter()
            .rev()
            .find(|(from, _)| *from <= release_ns);
        at.unwrap_or(&self.timings[0]).1
    }

    /// Whether the job of `r` was in progress (released, not completed) when its mode
    /// agent parked the task: it completed only once the task was continued (at a later
    /// start, or to stop at the end of the run), so it is aborted, as `sim` aborts the
    /// jobs of a task that leaves at the acknowledgement.
    fn cut_by_park(&self, r: &Record) -> bool {
        let at = self.parked_at.load(Ordering::Acquire);
        at != 0 && r.release_ns < at && r.end_ns > at
    }

    /// Emits release/start/complete (and miss) events for one record; a job cut by a
    /// park ([`Running::cut_by_park`]) is aborted instead of completed.
    fn report(&mut self, r: &Record, epoch: u64, sink: &mut impl FnMut(Event)) {
        let timing = self.timing_at(r.release_ns);
        let (p, task, cpu, d) = (
            self.partition.clone(),
            self.task.clone(),
            self.cpu,
            timing.deadline_ns,
        );
        let rel = |t: u64| t.saturating_sub(epoch);
        if r.index < self.reported {
            // A new grid (another period, or a restartable task's resume) numbers its
            // releases afresh.
            self.reported = r.index.saturating_sub(r.skipped as u64);
        }
        // Releases skipped before this job, on the job's own grid: each is a missed
        // deadline, unless the task was parked then.
        let judged = self.judged_from.load(Ordering::Acquire);
        for job in self.reported.max(r.index.saturating_sub(r.skipped as u64))..r.index {
            let back = (r.index - job).saturating_mul(timing.period_ns);
            let release = r.release_ns.saturating_sub(back);
            if release < judged {
                continue;
            }
            sink(Event::new(
                rel(release + d),
                EventKind::DeadlineMiss {
                    cpu,
                    partition: p.clone(),
                    task: task.clone(),
                    job,
                    deadline_ns: rel(release + d),
                },
            ));
            self.stats.misses += 1;
        }
        let job = r.index;
        let deadline_ns = rel(r.release_ns + d);
        sink(Event::new(
            rel(r.release_ns),
            EventKind::JobRelease {
                cpu,
                partition: p.clone(),
                task: task.clone(),
                job,
                deadline_ns,
            },
        ));
        let cut = self.cut_by_park(r);
        let at = self.parked_at.load(Ordering::Acquire);
        if !cut || r.start_ns < at {
            sink(Event::new(
                rel(r.start_ns),
                EventKind::JobStart {
                    cpu,
                    partition: p.clone(),
                    task: task.clone(),
                    job,
                },
            ));
        }
        if cut {
            let kind = EventKind::JobAbort {
                cpu,
                partition: p,
                task,
                job,
            };
            sink(Event::new(rel(at), kind));
            self.reported = job + 1;
            return;
        }
        if r.flags & flags::OVER_BUDGET != 0 && r.release_ns >= judged {
            self.overruns += 1;
        }
        if r.missed(d) && r.release_ns >= judged {
            sink(Event::new(
                deadline_ns,
                EventKind::DeadlineMiss {
                    cpu,
                    partition: p.clone(),
                    task: task.clone(),
                    job,
                    deadline_ns,
                },
            ));
            self.stats.misses += 1;
        }
        let response_ns = r.response_ns();
        sink(Event::new(
            rel(r.end_ns),
            EventKind::JobComplete {
                cpu,
                partition: p,
                task,
                job,
                response_ns,
            },
        ));
        self.stats.jobs += 1;
        self.stats.max_response_ns = self.stats.max_response_ns.max(response_ns);
        self.stats.last_response_ns = response_ns;
        self.reported = job + 1;
    }
}

/// Moves everything else to the online CPUs no rt task uses.
fn shield(
    h: &CpusetMount,
    system: &System,
    report: &Report,
    options: &RtOptions,
) -> Result<Shield> {
    let online = fs::read_to_string("/sys/devices/system/cpu/online")
        .map_err(|e| Error::os("reading /sys/devices/system/cpu/online", e, ""))?;
    let online = CpuSet::parse(online.trim()).map_err(|e| Error::Invalid(e.into()))?;
    let rt = rt_cpus(system, report)?;
    let rest = CpuSet::from_cpus(
        online
            .iter()
            .filter(|c| !rt.as_ref().is_some_and(|r| r.contains(*c))),
    )
    .ok_or_else(|| {
        Error::Invalid("no CPU is left outside the rt partitions for the shield".into())
    })?;
    let name = format!("{}-shield", options.instance.display());
    let (shield, moved) = Shield::create(h, &name, &rest.to_string())?;
    eprintln!("bulkhead: shield: moved {moved} processes to CPUs {rest}");
    Ok(shield)
}

/// Every CPU an rt task was placed on; `None` when there are no rt tasks.
fn rt_cpus(system: &System, report: &Report) -> Result<Option<CpuSet>> {
    let mut cpus = Vec::new();
    for p in system
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Rt)
    {
        if let Some(pool) = pool_cpus(system, p) {
            cpus.extend(pool.iter());
            continue;
        }
        for v in report.tasks.iter().filter(|v| v.partition == p.name) {
            cpus.extend(domain_of(p, &v.name, &v.placement)?.1.iter());
        }
    }
    Ok(CpuSet::from_cpus(cpus))
}

/// The system as it starts: in its initial mode (tasks of other modes are parked), or
/// as described when it has no modes.
fn initial_view(system: &System) -> System {
    let initial = system.modes.as_ref().map(|m| m.initial.as_str());
    initial
        .and_then(|name| system.in_mode(name))
        .unwrap_or_else(|| system.clone())
}

/// The SCHED_FIFO priority of each task of the fixed-priority partition `p`: from its
/// position on the CPU the analysis placed it on (the rate/deadline-monotonic rank where
/// the verdict has none), the levels of one CPU distinct ([`prio::fifo_priorities_per_cpu`]).
fn fifo_levels(report: &Report, p: &Partition) -> Result<Vec<u32>> {
    let ranks = bulkhead_model::priority::ranks(&p.tasks);
    let mut placed = Vec::with_capacity(p.tasks.len());
    for (task, &rank) in p.tasks.iter().zip(&ranks) {
        let v = verdict(report, &p.name, &task.name).ok_or_else(|| {
            Error::Invalid(format!("no analysis verdict for task `{}`", task.name))
        })?;
        placed.push((
            v.cpu.as_str(),
            v.priority.map_or(rank, |r| r.saturating_sub(1)),
        ));
    }
    prio::fifo_priorities_per_cpu(&placed, prio::TOP)
        .map_err(|e| RtError::Os(Error::Invalid(format!("partition `{}`: {e}", p.name))))
}

/// The analysis verdict on a task: in the initial mode, else in the first mode that
/// runs it (a task is placed on the same CPU in every mode: see docs/modes.md).
fn verdict<'a>(
    report: &'a Report,
    partition: &str,
    task: &str,
) -> Option<&'a bulkhead_analysis::system::TaskVerdict> {
    let modes = report.modes.iter().flat_map(|m| &m.modes);
    std::iter::once(&report.tasks)
        .chain(modes.map(|m| &m.report.tasks))
        .flat_map(|tasks| tasks.iter())
        .find(|v| v.partition == partition && v.name == task)
}

/// The CPUs of a partition scheduled as a server: its pool, one exclusive domain that
/// all the pool's partitions share (the kernel's SCHED_DEADLINE admission holds the
/// pool's capacity); `None` for a partition that owns its CPUs.
fn pool_cpus(system: &System, p: &Partition) -> Option<CpuSet> {
    p.interface?;
    match &p.cpus {
        Some(Cpus::Set(set)) => Some(set.clone()),
        _ => system.cpus.clone(),
    }
}

/// Sends `sig` to process `pid` (a task child of this process, not yet reaped).
fn signal(pid: u32, sig: i32) {
    let _ = bulkhead_os::proc::kill(pid as i32, sig);
}

/// The control block and trace ring of `task`, the `index`th rt task, released from
/// the run's epoch at the task's offset.
fn task_link(task: &Task, index: u32, options: &RtOptions) -> Result<TaskLink> {
    let spec = LinkSpec {
        name: task.name.clone(),
        task_index: index,
        budget_ns: task.budget,
        period_ns: task.period,
        deadline_ns: task.deadline,
        // Fixed once every task attached (`RtPartitions::fix_epoch`), before any plans.
        epoch_ns: 0,
        ring_depth: options.ring_depth,
    };
    let link = TaskLink::create(&spec).map_err(|source| RtError::Link {
        task: task.name.clone(),
        what: "control block and trace ring",
        source,
    })?;
    link.set_release_offset_ns(task.offset);
    Ok(link)
}

/// Where `task` of `p` runs: its CPU, the CPUs of its exclusive domain and the domain's
/// name (a pool's shared CPUs, or the domain its placement decided).
fn cpus_of(
    system: &System,
    p: &Partition,
    task: &str,
    placement: &Placement,
) -> Result<(u32, CpuSet, String)> {
    match pool_cpus(system, p) {
        Some(pool) => {
            let first = pool.iter().next().expect("a non-empty pool");
            Ok((first, pool, format!("pool-cpu{first}")))
        }
        None => domain_of(p, task, placement),
    }
}

/// The policy the `ti`-th task of `p` starts under: `now`, its parameters in the initial
/// mode (none: parked, SCHED_OTHER), under SCHED_DEADLINE or at its level of `fifo`.
fn initial_policy(now: Option<&Task>, p: &Partition, fifo: &[u32], ti: usize) -> Result<Policy> {
    Ok(match (now, p.scheduler) {
        (None, _) => Policy::Other { nice: 0 },
        (Some(now), Scheduler::Edf) => Policy::Deadline(
            DeadlineParams::for_task(now.budget, now.deadline, now.period)?.reclaiming(p.reclaim),
        ),
        (Some(_), Scheduler::FixedPriority) => Policy::Fifo { priority: fifo[ti] },
    })
}

/// The CPU the analysis placed a task on, resolving `all` against the system's CPUs.
/// The exclusive cpuset a task runs in, as the analysis placed it: its CPU's own
/// (`<partition>-cpu<N>`), or one over several CPUs (`<partition>-cpus<LIST>`) whose
/// SCHED_DEADLINE tasks the kernel schedules by global EDF, none of them pinned. Returns
/// the domain's first CPU, its CPUs and its name.
fn domain_of(p: &Partition, task: &str, placement: &Placement) -> Result<(u32, CpuSet, String)> {
    match placement {
        Placement::Cpu(cpu) => {
            let set = CpuSet::from_cpus([*cpu]).expect("one CPU");
            Ok((*cpu, set, format!("{}-cpu{cpu}", p.name)))
        }
        Placement::Global(cpus) => {
            let set = CpuSet::from_cpus(cpus.iter().copied())
                .ok_or_else(|| Error::Invalid(format!("task `{task}` is placed on no CPU")))?;
            let first = set.iter().next().expect("a non-empty set");
            Ok((first, set.clone(), format!("{}-cpus{set}", p.name)))
        }
        Placement::Unplaced => Err(RtError::Os(Error::Invalid(format!(
            "cannot place task `{task}` of partition `{}` on a CPU: give the partition `cpus`",
            p.name
        )))),
    }
}

/// Where and how a task process starts.
struct Target<'a> {
    cgroups: &'a [PathBuf],
    policy: Policy,
    workdir: &'a Path,
    confine: &'a Confinement,
}

/// Starts `exec` (resolved by [`Programs::resolve`]) through the one launcher
/// ([`bulkhead_os::launch`]): in its cgroups (written before exec, the cpuset first, so
/// the reservation is set inside the exclusive domain), under its policy and
/// confinement, with the task link's descriptors, its partition's passed descriptors
/// and stdin from `/dev/null`, and no other descriptor of the supervisor's (not even one
/// the supervisor inherited without close-on-exec). Returns
/// once the program runs; a step that failed in the child is the error.
fn spawn(exec: &Exec, link: &TaskLink, target: &Target) -> std::io::Result<TaskChild> {
    let program = Program::new(&exec.path, &exec.argv, Some(target.workdir))?.needing(&exec.needs);
    let confine = target.confine;
    let mut vars = crate::confine::partition_env(&confine.env, confine.sandbox.clean_env);
    let (key, value) = link.env();
    vars.retain(|(k, _)| k != key);
    vars.push((key.to_string(), value));
    let env = Env::new(vars);
    let procs: Vec<PathBuf> = target
        .cgroups
        .iter()
        .map(|dir| bulkhead_os::cgroup::procs_file(dir))
        .collect();
    let keep: Vec<i32> = link
        .fds()
        .into_iter()
        .chain(confine.pass_fds.iter().copied())
        .collect();
    let child = launch::spawn(Launch {
        program: &program,
        env: &env,
        join: Join::Write(&procs),
        sched: Some(target.policy.to_attr()),
        confine: confine.launch(false),
        fds: Fds {
            channel: None,
            keep: &keep,
            close_others: true,
            null_stdin: true,
            output: None,
        },
        wait_exec: true,
    })?;
    Ok(TaskChild {
        pid: child.pid,
        status: None,
    })
}

/// A task process this run started (a child of the calling thread), and how it ended
/// once reaped.
struct TaskChild {
    pid: i32,
    status: Option<ExitStatus>,
}

impl TaskChild {
    fn id(&self) -> u32 {
        self.pid as u32
    }

    /// How it ended, reaping it if it has; `None` while it runs.
    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            let ended = bulkhead_os::proc::try_wait(self.pid)?;
            self.status = ended.map(ExitStatus::from_raw);
        }
        Ok(self.status)
    }

    /// SIGKILL, unless it was reaped (its pid may be another process's by now). A task
    /// its mode agent parked (`parked`) may sleep frozen in its park cgroup, where it
    /// would not die until thawed ([`thaw_park_of`]): thawed after the
    /// signal, it dies without running its program again.
    fn kill(&self, parked: bool) {
        if self.status.is_none() {
            let _ = bulkhead_os::proc::kill(self.pid, bulkhead_os::proc::SIGKILL);
            if parked {
                thaw_park_of(self.pid as u32);
            }
        }
    }

    /// Waits until it has ended and reaps it.
    fn wait(&mut self) {
        if self.status.is_none() {
            self.status = bulkhead_os::proc::wait(self.pid)
                .ok()
                .map(ExitStatus::from_raw);
        }
    }
}

/// Thaws the park cgroup process `pid` is in, if it is in one of this run's: a task
/// frozen by its mode agent's park does not die of SIGKILL until thawed (v1 freezer), so
/// a restart or the run's stop, which reap the task after its SIGKILL, calls this after
/// the signal (the agents' `ParkFreezers` name the cgroups). Does nothing for a process
/// in no park cgroup.
pub(crate) fn thaw_park_of(pid: u32) {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return;
    };
    let Some(rel) = bulkhead_os::cgroup::own_cgroup_in(&text, Some("freezer")) else {
        return;
    };
    // `bulkhead-PID-START-N-park-MEMBER/TASK` (`park_cgroup_name`), PID this process's.
    let top = rel.split('/').next().unwrap_or_default();
    let ours = top.starts_with(&format!("bulkhead-{}-", std::process::id()));
    if !(ours && top.contains("-park-")) {
        return;
    }
    let mounts = bulkhead_os::cgroup::Mounts::read().ok();
    if let Some(root) = mounts.as_ref().and_then(|m| m.v1("freezer")) {
        let _ = bulkhead_os::cgroup::set_frozen(
            &root.join(rel),
            bulkhead_os::cgroup::Version::V1,
            false,
        );
    }
}

/// The `memory` and `pids` limits of partition `p`: (controller, value, v2 file, v1 file).
fn wanted_limits(p: &Partition) -> [(&'static str, Option<u64>, &'static str, &'static str); 2] {
    [
        ("memory", p.memory, "memory.max", "memory.limit_in_bytes"),
        ("pids", p.pids.map(u64::from), "pids.max", "pids.max"),
    ]
}

/// cgroup v2: the memory and pids limits go on the task's one cgroup, the domain (one
/// per CPU of the partition, so a limit holds per CPU).
fn limit_v2(domain: &Path, p: &Partition) -> Result<()> {
    for (controller, value, file, _) in wanted_limits(p) {
        let Some(value) = value else { continue };
        let file = domain.join(file);
        fs::write(&file, value.to_string()).map_err(|e| {
            Error::os(
                format!("writing {value} to {}", file.display()),
                e,
                format!(
                    "enable the {controller} controller in the parent's cgroup.subtree_control"
                ),
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_cgroups::{Call, Fake};

    /// An rt partition on CPU 0 (one task).
    const CTL: &str = "
system: {cpus: 0-1}
partitions:
  - name: ctl
    kind: rt
    cpus: 0
    scheduler: edf
    tasks: [{name: loop, cmd: loop, budget: 1ms, period: 10ms}]
";

    /// The partitions of `CTL` started on the fake host `fake` (no task can start: the
    /// domains are the first thing that fails there).
    fn start_on(fake: &Fake) -> Result<RtPartitions> {
        let system = bulkhead_model::load_str(CTL, "ctl.yaml").unwrap().system;
        let machine = Options::default();
        let report = admit(&system, &machine).unwrap();
        let options = RtOptions {
            instance: PathBuf::from("bulkhead-fake"),
            epoch: Epoch {
                after_attach_ns: 0,
                grid_ns: 1,
                attach_within: Duration::ZERO,
            },
            workdir: PathBuf::from("/"),
            programs: Programs::default(),
            ring_depth: 4,
            shield: false,
        };
        let start = Start {
            system: &system,
            report: &report,
            machine,
            hierarchy: &CpusetMount::V1(PathBuf::from("/nonexistent-bulkhead-fake")),
            plans: &[],
        };
        RtPartitions::start_on(start, fake.cpusets(), &options, &|_, _| {
            Confinement::default()
        })
    }

    /// The instance's cpuset is made first, on every rt CPU; when a partition's domain
    /// cannot be made after it, the start fails with its error and the instance is
    /// removed: nothing is left.
    #[test]
    fn a_domain_that_cannot_be_made_removes_the_instance_made_before_it() {
        let fake =
            Fake::failing(|c| matches!(c, Call::AddDomain { rel, .. } if rel != "bulkhead-fake"));
        let e = start_on(&fake).err().expect("fails");
        assert!(e.to_string().contains("/fake/AddDomain"), "{e}");
        let instance = "bulkhead-fake".to_string();
        let expected = [
            Call::AddDomain {
                rel: instance.clone(),
                cpus: "0".into(),
            },
            Call::RemoveDomain { rel: instance },
        ];
        assert_eq!(fake.calls(), expected);
        assert_eq!(fake.domains_left(), 0);
    }
}
