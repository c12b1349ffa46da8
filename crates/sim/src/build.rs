//! From a loaded system description to a [`Spec`].

use crate::energy::TaskScaling;
pub use crate::error::BuildError;
use crate::spec::*;
use crate::windows::{Behaviour, WindowsSpec};
use bulkhead_analysis::system::Placement;
use bulkhead_model::{CpuSet, Cpus, Partition, PartitionKind, Scheduler, System, Task, TaskServer};
use bulkhead_trace::Name;
use bulkhead_windows::Schedule;

/// Choices the description leaves to the simulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOptions {
    /// The reservation every rt task runs under (budget = its budget, period = its
    /// period); `None`: each task's `server:` declaration (no reservation without one).
    pub server: Option<ServerKind>,
    pub exec: ExecModel,
    pub arrivals: Arrivals,
    /// Which tasks write and read each channel.
    pub links: Vec<Link>,
    /// What windowed processes do when they run, by command (others are busy).
    pub behaviours: Vec<(String, Behaviour)>,
    /// The CPUs a slice with `cpu: all` gets when the description has no `system.cpus`.
    pub all_cpus: CpuSet,
    /// Per-task servers overriding `server`: `(task or partition/task, choice)`.
    pub task_servers: Vec<(String, ServerChoice)>,
    /// The power policy of a window schedule (`--power-policy`); `None`: `none`.
    pub power_policy: Option<bulkhead_power::Policy>,
}

/// The server of one task (`--task-server TASK=KIND`, a task's `server:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerChoice {
    /// A server with the task's budget and period.
    Kind(ServerKind),
    /// A Quest I/O server for the task: budget `permille/1000 * T` of its period T
    /// (DriveOS 4.1: the device class's utilization times the waiting task's period).
    Io { permille: u32 },
}

impl ServerChoice {
    /// Parses `none`, `sporadic`, `deferrable`, `cbs` or `io:PERMILLE` (1..=1000), the
    /// syntax of a description's `server:`.
    pub fn parse(text: &str) -> Result<ServerChoice, bulkhead_model::TaskServerError> {
        TaskServer::parse(text).map(ServerChoice::from)
    }
}

impl From<TaskServer> for ServerChoice {
    fn from(server: TaskServer) -> ServerChoice {
        match server {
            TaskServer::None => ServerChoice::Kind(ServerKind::Unlimited),
            TaskServer::Sporadic => ServerChoice::Kind(ServerKind::Sporadic),
            TaskServer::Deferrable => ServerChoice::Kind(ServerKind::Deferrable),
            TaskServer::Cbs => ServerChoice::Kind(ServerKind::Cbs),
            TaskServer::Io { permille } => ServerChoice::Io { permille },
        }
    }
}

impl BuildOptions {
    /// The server of `partition`/`task`: its entry in `task_servers` (the last match
    /// wins), else `server`, else the task's `server:` declaration, else none.
    fn task_server(&self, partition: &str, task: &Task) -> ServerChoice {
        self.task_servers
            .iter()
            .rev()
            .find(|(name, _)| names_task(name, partition, &task.name))
            .map(|&(_, choice)| choice)
            .or(self.server.map(ServerChoice::Kind))
            .or(task.server.map(ServerChoice::from))
            .unwrap_or(ServerChoice::Kind(ServerKind::Unlimited))
    }
}

/// Whether `name` (`task` or `partition/task`) names `partition`/`task`.
fn names_task(name: &str, partition: &str, task: &str) -> bool {
    match name.split_once('/') {
        Some((p, t)) => p == partition && t == task,
        None => name == task,
    }
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            server: None,
            exec: ExecModel::Wcet,
            arrivals: Arrivals::Periodic,
            links: Vec::new(),
            behaviours: Vec::new(),
            all_cpus: CpuSet::from_cpus([0, 1]).expect("two CPUs"),
            task_servers: Vec::new(),
            power_policy: None,
        }
    }
}

/// Execution time of each job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecModel {
    /// Every job runs for exactly its task's budget.
    Wcet,
    /// Uniform in `[min_pct, max_pct]` percent of the budget (above 100 overruns it).
    Uniform { min_pct: u32, max_pct: u32 },
}

/// Release pattern of every task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    /// Every period (plus the task's release jitter, drawn in `[0, J]`).
    Periodic,
    /// Gaps of the period plus up to `max_extra_pct` percent of it.
    Sporadic { max_extra_pct: u32 },
}

/// Binds a channel to tasks: `writer` is a task of the channel's writer partition,
/// `readers` tasks of its reader partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub channel: String,
    pub writer: String,
    pub readers: Vec<String>,
}

/// A `--link` text that is not `CHANNEL=WRITER>READER[,READER...]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}`: expected CHANNEL=WRITER_TASK>READER_TASK[,READER_TASK...]")]
pub struct LinkSyntax(pub String);

impl Link {
    /// Parses `CHANNEL=WRITER>READER[,READER...]`.
    pub fn parse(text: &str) -> Result<Link, LinkSyntax> {
        let usage = || LinkSyntax(text.into());
        let (channel, rest) = text.split_once('=').ok_or_else(usage)?;
        let (writer, readers) = rest.split_once('>').ok_or_else(usage)?;
        let readers: Vec<String> = readers.split(',').map(|r| r.trim().to_string()).collect();
        if channel.trim().is_empty()
            || writer.trim().is_empty()
            || readers.iter().any(String::is_empty)
        {
            return Err(usage());
        }
        Ok(Link {
            channel: channel.trim().into(),
            writer: writer.trim().into(),
            readers,
        })
    }
}

/// The budget and period per CPU of a partition scheduled as a server on `n` CPUs.
pub(crate) type InterfaceOf<'a> = dyn Fn(&Partition, usize) -> (Nanos, Nanos) + 'a;

/// Where the analysis placed task `task` (by name) of partition `partition`.
pub(crate) type PlacementOf<'a> = dyn Fn(&str, &str) -> Placement + 'a;

/// The scheduling domains of rt partition `p` on `cpus` and the tasks (by index) in
/// each, as the analysis placed them (the placement `run` reserves): one domain per CPU
/// for partitioned scheduling (fixed priority on several CPUs: first-fit decreasing),
/// one over several CPUs for global scheduling (`edf` on several CPUs). A task the
/// analysis could place nowhere (it refuses the system then) runs on the first CPU.
fn domains_of(p: &Partition, cpus: &[u32], placement: &PlacementOf) -> Vec<(Vec<u32>, Vec<usize>)> {
    let mut domains: Vec<(Vec<u32>, Vec<usize>)> = Vec::new();
    for (k, task) in p.tasks.iter().enumerate() {
        let on = match placement(&p.name, &task.name) {
            Placement::Cpu(cpu) => vec![cpu],
            Placement::Global(set) => set,
            Placement::Unplaced => vec![cpus[0]],
        };
        match domains.iter_mut().find(|(c, _)| *c == on) {
            Some((_, tasks)) => tasks.push(k),
            None => domains.push((on, vec![k])),
        }
    }
    domains
}

/// [`crate::from_system`] with the interfaces of the partitions scheduled as servers given.
pub(crate) fn build(
    system: &System,
    options: &BuildOptions,
    interface: &InterfaceOf,
    placement: &PlacementOf,
) -> Result<Spec, BuildError> {
    let mut spec = Spec::default();
    let mut pools = crate::pools::Pools::default();
    let mut first_task: Vec<Option<usize>> = Vec::new();
    for p in &system.partitions {
        first_task
            .push((p.kind == PartitionKind::Rt && !p.tasks.is_empty()).then_some(spec.tasks.len()));
        if p.kind != PartitionKind::Rt || p.tasks.is_empty() {
            continue;
        }
        let cpus: Vec<u32> = match (&p.cpus, &system.cpus) {
            (Some(Cpus::Set(set)), _) | (Some(Cpus::All), Some(set)) => set.iter().collect(),
            _ => return Err(BuildError::AllCpus(p.name.clone())),
        };
        let partition: Name = p.name.as_str().into();
        if p.interface.is_some() {
            let n = cpus.len();
            let servers = pools.add(&mut spec, p, cpus, interface(p, n));
            let ranks = priority_ranks(&p.tasks);
            for ((task, rank), server) in p.tasks.iter().zip(ranks).zip(servers) {
                let t = task_spec(system, p, task, server, options);
                spec.tasks.push(TaskSpec {
                    priority: rank,
                    ..t
                });
            }
            continue;
        }
        let policy = match p.scheduler {
            Scheduler::FixedPriority => Policy::FixedPriority,
            Scheduler::Edf => Policy::Edf,
        };
        let domains = domains_of(p, &cpus, placement);
        let first_domain = spec.domains.len();
        for (cpus, _) in &domains {
            spec.domains.push(Domain {
                name: partition.clone(),
                cpus: cpus.clone(),
                policy,
            });
        }
        let ranks = priority_ranks(&p.tasks);
        for (k, (task, rank)) in p.tasks.iter().zip(ranks).enumerate() {
            let group = domains.iter().position(|(_, tasks)| tasks.contains(&k));
            let domain = first_domain + group.expect("every task is in a domain");
            let server = match options.task_server(&p.name, task) {
                ServerChoice::Io { permille } => Server::io(domain, permille, task.period, rank),
                ServerChoice::Kind(kind) => Server {
                    domain,
                    kind,
                    budget: task.budget,
                    period: task.period,
                    priority: rank,
                },
            };
            spec.servers.push(server);
            let server = spec.servers.len() - 1;
            spec.tasks.push(task_spec(system, p, task, server, options));
        }
    }
    for (name, _) in &options.task_servers {
        if !spec
            .tasks
            .iter()
            .any(|t| names_task(name, &t.partition, &t.name))
        {
            return Err(BuildError::TaskServer(name.clone()));
        }
    }
    link_channels(system, options, &first_task, &mut spec)?;
    crate::pipes::link_pipelines(system, &mut spec)?;
    spec.windows = windows(system, options)?;
    spec.background = crate::background::of_system(system);
    if let Some(power) = spec.windows.as_mut().and_then(|w| w.power.as_mut()) {
        power.tasks = scalings(system);
        debug_assert_eq!(power.tasks.len(), spec.tasks.len());
    }
    spec.validate().map_err(BuildError::Spec)?;
    Ok(spec)
}

/// The window schedule, if the description has one, with the processes' behaviours.
fn windows(system: &System, options: &BuildOptions) -> Result<Option<WindowsSpec>, BuildError> {
    if system.windows.is_empty() {
        return Ok(None);
    }
    let schedule = Schedule::from_system(system, &options.all_cpus)?;
    for (cmd, _) in &options.behaviours {
        if !schedule.processes.iter().any(|p| &p.cmd == cmd) {
            return Err(BuildError::Process(cmd.clone()));
        }
    }
    let behaviours = schedule
        .processes
        .iter()
        .map(|p| {
            options
                .behaviours
                .iter()
                .rev()
                .find(|(cmd, _)| cmd == &p.cmd)
                .map_or(Behaviour::Busy, |&(_, b)| b)
        })
        .collect();
    let policy = options.power_policy.clone();
    let power = match (&system.power, policy) {
        (Some(model), policy) => Some(crate::energy::PowerSpec {
            policy: policy.unwrap_or(bulkhead_power::Policy::None),
            clusters: model.clusters.clone(),
            tasks: Vec::new(),
        }),
        (None, None | Some(bulkhead_power::Policy::None)) => None,
        (None, Some(_)) => return Err(BuildError::NoPowerModel),
    };
    Ok(Some(WindowsSpec {
        schedule,
        behaviours,
        power,
    }))
}

/// The default length of a simulation: one hyperperiod of the rt tasks and the
/// major frame; `None` when it overflows or there is nothing periodic.
pub fn hyperperiod(spec: &Spec) -> Option<Nanos> {
    let periods = spec.tasks.iter().filter_map(|t| match t.release {
        Release::Periodic { period, .. } => Some(period),
        Release::Sporadic { min_gap, .. } => Some(min_gap),
        Release::At(_) => None,
    });
    let frame = spec
        .windows
        .as_ref()
        .map(|w| w.schedule.major_frame())
        .filter(|&f| f > 0);
    periods
        .chain(frame)
        .try_fold(None, |acc: Option<Nanos>, p| match acc {
            None => Some(Some(p)),
            Some(a) => lcm(a, p).map(Some),
        })?
}

fn lcm(a: Nanos, b: Nanos) -> Option<Nanos> {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    (a / x).checked_mul(b)
}

/// Fixed priorities, 1 = highest, in the one order of [`bulkhead_model::priority::ranks`]
/// (the order `analyze` analyses and `run` gives the kernel).
pub fn priority_ranks(tasks: &[Task]) -> Vec<u32> {
    let ranks = bulkhead_model::priority::ranks(tasks);
    ranks.into_iter().map(|r| r as u32 + 1).collect()
}

/// The simulated task of `task`, alone on its `server`.
fn task_spec(
    system: &System,
    p: &Partition,
    task: &Task,
    server: usize,
    options: &BuildOptions,
) -> TaskSpec {
    let partition: Name = p.name.as_str().into();
    TaskSpec {
        partition,
        name: task.name.as_str().into(),
        server,
        priority: 1,
        deadline: task.deadline,
        release: release(task, options.arrivals),
        exec: exec(system, p.cpus.as_ref(), task, options.exec),
        resume: task.resume,
        inputs: Vec::new(),
        outputs: Vec::new(),
    }
}

fn release(task: &Task, arrivals: Arrivals) -> Release {
    match arrivals {
        Arrivals::Periodic => Release::Periodic {
            period: task.period,
            offset: task.offset,
            jitter: task.release_jitter,
        },
        Arrivals::Sporadic { max_extra_pct } => {
            let max_extra = (task.period as u128 * max_extra_pct as u128 / 100) as Nanos;
            Release::Sporadic {
                min_gap: task.period,
                offset: task.offset,
                max_extra,
            }
        }
    }
}

/// Execution times of `task` in the simulation: its WCET at the top frequency of the
/// slowest cluster its partition's CPUs meet ([`Task::wcet_at`]; clusters run at their
/// top frequency outside windows), its budget without a `power:` section.
pub(crate) fn exec(system: &System, cpus: Option<&Cpus>, task: &Task, model: ExecModel) -> Exec {
    let wcet = system
        .power
        .iter()
        .flat_map(|power| power.clusters_of(cpus.and_then(set_of)))
        .map(|c| {
            let top = c.points.last().expect("a cluster has operating points").khz;
            task.wcet_at(top, top)
        })
        .max()
        .unwrap_or(task.budget);
    match model {
        ExecModel::Wcet => Exec::Fixed(wcet),
        ExecModel::Uniform { min_pct, max_pct } => {
            let pct = |p: u32| ((wcet as u128 * p as u128 / 100) as Nanos).max(1);
            Exec::Uniform {
                min: pct(min_pct),
                max: pct(max_pct),
            }
        }
    }
}

/// Per simulated rt task (in [`build`]'s order: the tasks of the rt partitions with
/// tasks), how its execution scales with the frequencies of its partition's clusters;
/// the clusters as [`exec`] takes them.
fn scalings(system: &System) -> Vec<Option<TaskScaling>> {
    let Some(power) = &system.power else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in &system.partitions {
        if p.kind != PartitionKind::Rt {
            continue;
        }
        let cpus = p.cpus.as_ref().and_then(set_of);
        for task in &p.tasks {
            let clusters: Vec<(usize, u64)> = power
                .clusters
                .iter()
                .enumerate()
                .filter(|(_, c)| cpus.is_none_or(|s| s.intersects(&c.cpus)))
                .map(|(i, c)| {
                    let top = c.points.last().expect("a cluster has operating points").khz;
                    (i, task.wcet_khz.unwrap_or(top))
                })
                .collect();
            out.push((!clusters.is_empty()).then_some(TaskScaling {
                memory_bound_ppm: task.memory_bound_ppm,
                clusters,
            }));
        }
    }
    out
}

fn set_of(cpus: &Cpus) -> Option<&bulkhead_model::CpuSet> {
    match cpus {
        Cpus::Set(set) => Some(set),
        Cpus::All => None,
    }
}

fn link_channels(
    system: &System,
    options: &BuildOptions,
    first_task: &[Option<usize>],
    spec: &mut Spec,
) -> Result<(), BuildError> {
    for link in &options.links {
        if !system.channels.iter().any(|c| c.name == link.channel) {
            return Err(BuildError::LinkChannel(link.channel.clone()));
        }
    }
    for channel in &system.channels {
        let index = spec.channels.len();
        spec.channels.push(ChannelSpec {
            name: channel.name.as_str().into(),
            kind: channel.kind,
            depth: channel.depth.max(1),
            overflow: channel.overflow,
            per_read: channel.reads.most(),
            pipeline: false,
        });
        let link = options.links.iter().find(|l| l.channel == channel.name);
        let writer = match link {
            Some(l) => Some(find_task(
                spec,
                &[channel.writer.as_str()],
                &l.writer,
                &channel.name,
            )?),
            None => match &channel.writer_task {
                Some(t) => Some(find_task(spec, &[&channel.writer], t, &channel.name)?),
                None => system
                    .partition_index(&channel.writer)
                    .and_then(|p| first_task[p]),
            },
        };
        let readers: Vec<usize> = match link {
            Some(l) => {
                let partitions: Vec<&str> = channel.readers.iter().map(String::as_str).collect();
                l.readers
                    .iter()
                    .map(|r| find_task(spec, &partitions, r, &channel.name))
                    .collect::<Result<_, _>>()?
            }
            None => {
                let mut readers = Vec::new();
                for (r, task) in channel.readers.iter().zip(&channel.reader_tasks) {
                    match task {
                        Some(t) => readers.push(find_task(spec, &[r], t, &channel.name)?),
                        None => {
                            readers.extend(system.partition_index(r).and_then(|p| first_task[p]))
                        }
                    }
                }
                readers
            }
        };
        if let Some(w) = writer {
            spec.tasks[w].outputs.push(index);
        }
        for r in readers {
            spec.tasks[r].inputs.push(index);
        }
    }
    Ok(())
}

/// Warnings about channels bound by default to the first task of a partition that
/// has several (`--link` names the tasks instead).
pub fn link_warnings(system: &System, options: &BuildOptions) -> Vec<String> {
    let tasks_of = |name: &str| {
        system
            .partition(name)
            .filter(|p| p.kind == PartitionKind::Rt)
            .map_or(0, |p| p.tasks.len())
    };
    let first = |name: &str| {
        system
            .partition(name)
            .and_then(|p| p.tasks.first())
            .map_or("", |t| t.name.as_str())
            .to_string()
    };
    let mut warnings = Vec::new();
    for channel in system
        .channels
        .iter()
        .filter(|c| !options.links.iter().any(|l| l.channel == c.name))
    {
        let ends = std::iter::once((&channel.writer, &channel.writer_task))
            .chain(channel.readers.iter().zip(&channel.reader_tasks));
        for partition in ends.filter(|(_, t)| t.is_none()).map(|(p, _)| p) {
            let n = tasks_of(partition);
            if n > 1 {
                warnings.push(format!(
                    "channel `{}`: partition `{partition}` has {n} tasks; the simulation binds its first, `{}` (choose with --link)",
                    channel.name,
                    first(partition)
                ));
            }
        }
    }
    warnings
}

/// The task named `name` (`task` or `partition/task`) in one of `partitions`.
fn find_task(
    spec: &Spec,
    partitions: &[&str],
    name: &str,
    channel: &str,
) -> Result<usize, BuildError> {
    let (partition, task) = name
        .split_once('/')
        .map_or((None, name), |(p, t)| (Some(p), t));
    spec.tasks
        .iter()
        .position(|t| {
            partitions.contains(&&*t.partition)
                && partition.is_none_or(|p| p == &*t.partition)
                && &*t.name == task
        })
        .ok_or_else(|| BuildError::LinkTask {
            channel: channel.to_string(),
            task: name.to_string(),
            partitions: partitions.iter().map(|p| p.to_string()).collect(),
        })
}
