//! From the file as written ([`crate::raw`]) to the model ([`crate::types`]):
//! units, defaults, DEmOS simplified forms expanded to the canonical form.
//!
//! DEmOS rules implemented here (DEmOS thesis, Appendix 2 and `config.cpp`):
//! a window without `slices` is one slice on `cpu` (default `all`); partitions
//! defined inline in a slice are appended to the partition list, named
//! `anonymous_N` when unnamed (one counter for the whole file); `xx_processes`
//! defines an anonymous partition; a missing process budget defaults to
//! `0.6 * length / count` in an SC slot and `length / count` in a BE slot, where
//! `count` is the number of processes of that list; a window with only `length` is
//! idle; a bare number is milliseconds. Computed in integer nanoseconds (DEmOS
//! truncates to whole milliseconds).
//!
//! Unlike DEmOS, these are errors: a non-list where a list is required, both
//! `processes` and `cmd` in one partition, an empty command, a window length <= 0.

use crate::cpuset::CpuSet;
use crate::raw::*;
use crate::types::*;
use crate::units::{parse_duration, parse_size};

pub use crate::path_error::{err, PathError, Result};

/// A partition referenced by name from a slice, checked once all partitions are known.
#[derive(Debug, Clone)]
pub struct Reference {
    pub name: String,
    pub path: String,
}

/// The model plus where each of its parts was written, for validation messages.
#[derive(Debug, Default)]
pub struct Normalized {
    pub system: System,
    /// Path of each partition's definition, parallel to `system.partitions`.
    pub partition_paths: Vec<String>,
    /// Path of each window's slices, parallel to `system.windows[i].slices`.
    pub slice_paths: Vec<Vec<String>>,
    /// Slice references by name.
    pub references: Vec<Reference>,
    /// Path of each `health:` key, parallel to `system.health`.
    pub health_paths: Vec<String>,
}

const MS: u64 = 1_000_000;

/// Frames each gateway channel holds when a bus gives no `depth`.
pub const DEFAULT_BUS_DEPTH: u32 = 256;

/// Normalizes a whole file. DEmOS-style files (no `system` section) read bare numbers as milliseconds.
pub fn normalize(raw: RawFile) -> Result<Normalized> {
    let mut n = Normalizer {
        bare_unit: raw.system.is_none().then_some(MS),
        anonymous: 0,
        out: Normalized::default(),
    };
    n.out.system.set_cwd = raw.set_cwd.unwrap_or(true);
    let (cpus, user_range, search) = raw
        .system
        .map_or((None, None, None), |s| (s.cpus, s.user_range, s.path));
    n.out.system.path = search.map(|p| search_path(p, "system.path")).transpose()?;
    n.out.system.cpus = opt_cpuset(cpus, "system.cpus")?;
    n.out.system.user_range = user_range
        .map(|r| crate::users::range(&r).or_else(|e| err("system.user_range", e.to_string())))
        .transpose()?;
    // DEmOS's default `demos_cpu: all` (what DEmOS's own `-d` prints) pins nothing.
    let demos_cpu = raw.demos_cpu.filter(|c| c.trim() != "all");
    n.out.system.supervisor_cpus = opt_cpuset(demos_cpu, "demos_cpu")?;
    n.out.system.power = crate::power::normalize(raw.power)?;
    n.out.system.platform = crate::platform::normalize(raw.platform)?;
    for (i, spec) in raw.partitions.unwrap_or_default().into_iter().enumerate() {
        n.top_level_partition(spec, &format!("partitions[{i}]"))?;
    }
    if let Some(windows) = raw.windows {
        if windows.is_empty() {
            return err(
                "windows",
                "must not be empty (omit `windows` for a system without a window schedule)",
            );
        }
        for (i, w) in windows.into_iter().enumerate() {
            n.window(w, &format!("windows[{i}]"))?;
        }
    }
    let partitions: std::collections::HashSet<String> = n
        .out
        .system
        .partitions
        .iter()
        .map(|p| p.name.clone())
        .collect();
    let end = |text: &str| match partitions.contains(text) {
        true => (text.to_string(), None),
        false => endpoint(text),
    };
    for (i, mut c) in raw.channels.unwrap_or_default().into_iter().enumerate() {
        let path = format!("channels[{i}]");
        let bridge = c.bridge.take();
        let bridge = bridge.map(|b| crate::bridge::normalize(b, &c.writer, &path, n.bare_unit));
        let channel = channel(c, &path, &end, bridge.transpose()?)?;
        n.out.system.channels.push(channel);
    }
    for (i, b) in raw.buses.unwrap_or_default().into_iter().enumerate() {
        let bus = n.bus(b, &format!("buses[{i}]"))?;
        n.out.system.buses.push(bus);
    }
    n.out.system.modes = crate::modes::normalize(raw.modes, &n.out.system.buses, n.bare_unit)?;
    n.out.system.stop_start =
        crate::stop_start::normalize(raw.stop_start, &n.out.system, n.bare_unit)?;
    Ok(n.out)
}

struct Normalizer {
    bare_unit: Option<u64>,
    anonymous: usize,
    out: Normalized,
}

/// Which slot of a slice a partition fills; decides default process budgets.
#[derive(Clone, Copy)]
enum Slot {
    Sc,
    Be,
}

impl Normalizer {
    fn duration(&self, text: &str, path: &str) -> Result<Nanos> {
        parse_duration(text, self.bare_unit).or_else(|e| err(path, e))
    }

    fn positive_duration(&self, text: &str, path: &str) -> Result<Nanos> {
        match self.duration(text, path)? {
            0 => err(path, "must be a positive duration"),
            ns => Ok(ns),
        }
    }

    /// `nonpreemptible: 200us`, of best-effort partitions only: the bound on the kernel
    /// sections their processes make rt tasks beside them wait for.
    fn nonpreemptible(
        &self,
        value: Option<String>,
        kind: PartitionKind,
        path: &str,
    ) -> Result<Option<Nanos>> {
        let key = child(path, "nonpreemptible");
        match value {
            Some(_) if kind == PartitionKind::Rt => err(
                key,
                "applies to best-effort partitions only (it bounds what their processes \
                 make the rt tasks beside them wait for)",
            ),
            Some(text) => self.duration(&text, &key).map(Some),
            None => Ok(None),
        }
    }

    fn top_level_partition(&mut self, spec: PartitionEntry, path: &str) -> Result<()> {
        match spec {
            PartitionEntry::Name(name) => {
                err(path, format!("expected a partition definition (a mapping with name and processes), found `{name}`"))
            }
            spec => self.define_partition(spec, path, None).map(drop),
        }
    }

    /// Adds the partition `spec` defines; returns its name. `default_budget` is the
    /// total budget shared by processes without one (`None`: budgets are required).
    fn define_partition(
        &mut self,
        spec: PartitionEntry,
        path: &str,
        default_budget: Option<Nanos>,
    ) -> Result<String> {
        let partition = match spec {
            PartitionEntry::Name(name) => return Ok(name),
            PartitionEntry::Processes(list) => Partition {
                name: self.anonymous_name(),
                kind: PartitionKind::Be,
                cpus: None,
                exclusive: true,
                cpu: None,
                nonpreemptible: None,
                scheduler: Scheduler::FixedPriority,
                reclaim: false,
                memory: None,
                pids: None,
                tasks: Vec::new(),
                processes: self.processes(list, path, default_budget)?,
                user: None,
                shared_user: false,
                monitor: false,
                network: None,
                listen: None,
                interface: None,
                sandbox: Sandbox::default(),
                path: None,
            },
            PartitionEntry::Def(def) => self.partition(*def, path, default_budget)?,
        };
        let name = partition.name.clone();
        self.out.system.partitions.push(partition);
        self.out.partition_paths.push(path.to_string());
        Ok(name)
    }

    fn partition(
        &mut self,
        mut def: RawPartition,
        path: &str,
        default_budget: Option<Nanos>,
    ) -> Result<Partition> {
        let name = match def.name.take() {
            Some(name) => path_safe_name(name, &format!("{path}.name"))?,
            None => self.anonymous_name(),
        };
        let kind = def.kind.unwrap_or(if def.tasks.is_some() {
            PartitionKind::Rt
        } else {
            PartitionKind::Be
        });
        self.take_health(&name, &mut def, path)?;
        let processes = self.partition_processes(
            def.processes,
            def.cmd,
            def.budget,
            def.jitter,
            def.init,
            path,
            default_budget,
        )?;
        let has_interface = def.interface.is_some();
        let raw_tasks = def.tasks.as_deref().unwrap_or_default();
        let server = servers(def.server.as_deref(), raw_tasks, has_interface, kind, path)?;
        let tasks = self.tasks(def.tasks.unwrap_or_default(), path, server)?;
        check_kind(kind, &tasks, &processes, def.scheduler.is_some(), path)?;
        let scheduler = def.scheduler.unwrap_or(Scheduler::FixedPriority);
        let reclaim = check_reclaim(def.reclaim, kind, scheduler, path)?;
        Ok(Partition {
            name,
            kind,
            cpus: def
                .cpus
                .map(|c| cpus(&c, &format!("{path}.cpus")))
                .transpose()?,
            exclusive: exclusive(def.exclusive, kind, path)?,
            cpu: be_cpu(def.cpu, kind, path)?,
            nonpreemptible: self.nonpreemptible(def.nonpreemptible, kind, path)?,
            scheduler,
            reclaim,
            memory: def
                .memory
                .map(|m| memory(&m, &format!("{path}.memory")))
                .transpose()?,
            pids: match def.pids {
                Some(0) => return err(format!("{path}.pids"), "must be at least 1"),
                n => n,
            },
            tasks,
            processes,
            user: def
                .user
                .map(|u| user(u, &format!("{path}.user")))
                .transpose()?,
            shared_user: def.shared_user.unwrap_or(false),
            monitor: match def.monitor {
                Some(true) if kind == PartitionKind::Rt => {
                    return err(
                        child(path, "monitor"),
                        "only a best-effort partition may monitor the system: an rt task \
                         must not wait on the supervisor's socket",
                    )
                }
                m => m.unwrap_or(false),
            },
            network: def.network,
            listen: match def.listen {
                Some(_) if kind == PartitionKind::Rt => {
                    return err(
                        child(path, "listen"),
                        "only a best-effort partition may listen: an rt task must not wait \
                         on the network",
                    )
                }
                Some(text) => Some(listen_address(&text, &child(path, "listen"))?),
                None => None,
            },
            interface: crate::modes::interface(
                def.interface,
                self.bare_unit,
                &child(path, "interface"),
            )?,
            sandbox: def.sandbox.map_or_else(Sandbox::default, sandbox),
            path: def
                .path
                .map(|p| search_path(p, &child(path, "path")))
                .transpose()?,
        })
    }

    /// Moves the `health:` keys of the tasks and processes of partition `name` into
    /// `system.health`, each with its path.
    fn take_health(&mut self, name: &str, def: &mut RawPartition, path: &str) -> Result<()> {
        use crate::health::{Member, Supervised};
        let tasks = def.tasks.iter_mut().flatten().enumerate();
        let tasks = tasks.map(|(i, t)| {
            let member = Member::Task(t.name.clone());
            (format!("{path}.tasks[{i}].health"), member, t.health.take())
        });
        let mut found: Vec<_> = tasks.collect();
        let processes = def.processes.iter_mut().flatten().enumerate();
        found.extend(processes.filter_map(|(i, p)| match p {
            ProcessSpec::Def(raw) => Some((
                format!("{path}.processes[{i}].health"),
                Member::Process(i),
                raw.health.take(),
            )),
            ProcessSpec::Cmd(_) => None,
        }));
        for (at, member, raw) in found {
            let Some(raw) = raw else { continue };
            let health = crate::health::parse(*raw, &at, self.bare_unit)?;
            self.out.system.health.push(Supervised {
                partition: name.to_string(),
                member,
                health,
            });
            self.out.health_paths.push(at);
        }
        Ok(())
    }

    /// A `frequency` key; with a `power:` section it must be an operating point of every
    /// cluster a slice's CPUs meet (`Some(None)`: `cpu: all`), or of some cluster for a
    /// process (`None`), whose slices come later.
    fn frequency(
        &self,
        mhz: Option<f64>,
        cpus: Option<Option<&CpuSet>>,
        path: &str,
    ) -> Result<Option<u64>> {
        let khz = frequency(mhz, path)?;
        let (Some(khz), Some(power)) = (khz, &self.out.system.power) else {
            return Ok(khz);
        };
        let missing = match cpus {
            Some(set) => power.clusters_of(set).find(|c| !c.offers(khz)),
            None if power.clusters.iter().any(|c| c.offers(khz)) => None,
            None => power.clusters.first(),
        };
        match missing {
            Some(c) => {
                let list: Vec<String> = c.points.iter().map(|p| crate::power::mhz(p.khz)).collect();
                err(
                    path,
                    format!(
                        "{} MHz is not an operating point of cluster `{}` ({} MHz)",
                        crate::power::mhz(khz),
                        c.name,
                        list.join(", ")
                    ),
                )
            }
            None => Ok(Some(khz)),
        }
    }

    fn anonymous_name(&mut self) -> String {
        let name = format!("anonymous_{}", self.anonymous);
        self.anonymous += 1;
        name
    }

    /// Processes from `processes`, or the single process given by `cmd` etc. in the partition mapping.
    #[allow(clippy::too_many_arguments)]
    fn partition_processes(
        &self,
        list: Option<Vec<ProcessSpec>>,
        cmd: Option<String>,
        budget: Option<String>,
        jitter: Option<String>,
        init: Option<bool>,
        path: &str,
        default_budget: Option<Nanos>,
    ) -> Result<Vec<Process>> {
        let inline = cmd.is_some() || budget.is_some() || jitter.is_some() || init.is_some();
        match (list, inline) {
            (Some(_), true) => err(
                path,
                "give either `processes` or a single process (`cmd`, `budget`...), not both",
            ),
            (Some(list), false) => {
                self.processes(list, &format!("{path}.processes"), default_budget)
            }
            (None, true) => {
                let single = ProcessSpec::Def(RawProcess {
                    cmd,
                    budget,
                    jitter,
                    init,
                    ..RawProcess::default()
                });
                Ok(vec![self.process(single, path, default_budget)?])
            }
            (None, false) => Ok(Vec::new()),
        }
    }

    fn processes(
        &self,
        list: Vec<ProcessSpec>,
        path: &str,
        total_budget: Option<Nanos>,
    ) -> Result<Vec<Process>> {
        let each = total_budget.map(|total| total / list.len().max(1) as u64);
        list.into_iter()
            .enumerate()
            .map(|(i, p)| self.process(p, &format!("{path}[{i}]"), each))
            .collect()
    }

    fn process(
        &self,
        spec: ProcessSpec,
        path: &str,
        default_budget: Option<Nanos>,
    ) -> Result<Process> {
        let raw = match spec {
            ProcessSpec::Cmd(cmd) => RawProcess {
                cmd: Some(cmd),
                ..RawProcess::default()
            },
            ProcessSpec::Def(raw) => raw,
        };
        if raw.health.is_some() {
            return err(
                child(path, "health"),
                "applies to a process of a named partition (give the partition a `name`)",
            );
        }
        let cmd = match raw.cmd.clone() {
            None => return err(path, "missing `cmd`"),
            Some(cmd) => {
                check_command(&cmd, &child(path, "cmd"))?;
                cmd
            }
        };
        let budget = match (&raw.budget, default_budget) {
            (Some(b), _) => self.positive_duration(b, &child(path, "budget"))?,
            (None, Some(0)) => {
                return err(
                    path,
                    "the default budget (a share of the window length) is zero: give `budget`",
                )
            }
            (None, Some(d)) => d,
            (None, None) => 0,
        };
        let jitter = raw
            .jitter
            .as_ref()
            .map(|j| self.duration(j, &child(path, "jitter")))
            .transpose()?
            .unwrap_or(0);
        if jitter > 2 * budget {
            return err(
                child(path, "jitter"),
                "must be at most twice the budget (budget - jitter/2 must not be negative)",
            );
        }
        Ok(Process {
            cmd,
            budget,
            jitter,
            init: raw.init.unwrap_or(false),
            frequency_khz: self.frequency(raw.frequency, None, &child(path, "frequency"))?,
            restart: self.restart(&raw, path)?,
            required: raw.required.unwrap_or(false),
        })
    }

    /// A process's restart policy (`restart`, `restart_delay`, `start_limit_*`).
    fn restart(&self, raw: &RawProcess, path: &str) -> Result<Option<Restart>> {
        let when = match raw.restart.as_deref() {
            None | Some("no") => None,
            Some("on-failure") => Some(RestartWhen::OnFailure),
            Some("always") => Some(RestartWhen::Always),
            Some(other) => {
                return err(
                    child(path, "restart"),
                    format!("`{other}`: must be `no`, `on-failure` or `always`"),
                )
            }
        };
        let tuning = [
            ("restart_delay", raw.restart_delay.is_some()),
            ("start_limit_burst", raw.start_limit_burst.is_some()),
            ("start_limit_interval", raw.start_limit_interval.is_some()),
        ];
        let Some(when) = when else {
            return match tuning.iter().find(|(_, given)| *given) {
                Some((key, _)) => err(
                    child(path, key),
                    "applies to a restarted process: give `restart: on-failure` or `restart: always`",
                ),
                None => Ok(None),
            };
        };
        let delay = match &raw.restart_delay {
            Some(d) => self.duration(d, &child(path, "restart_delay"))?,
            None => Restart::DEFAULT_DELAY,
        };
        let interval = match &raw.start_limit_interval {
            Some(d) => self.positive_duration(d, &child(path, "start_limit_interval"))?,
            None => Restart::DEFAULT_INTERVAL,
        };
        let burst = raw.start_limit_burst.unwrap_or(Restart::DEFAULT_BURST);
        if burst == 0 {
            return err(
                child(path, "start_limit_burst"),
                "must be at least 1 (the first start counts)",
            );
        }
        Ok(Some(Restart {
            when,
            delay,
            burst,
            interval,
        }))
    }

    /// A partition's tasks; an I/O task (`serves`) gets its reservation from the task it
    /// serves, which must be a task of the same partition with its own budget.
    fn tasks(
        &self,
        raw: Vec<RawTask>,
        path: &str,
        server: Option<TaskServer>,
    ) -> Result<Vec<Task>> {
        let paths: Vec<String> = (0..raw.len())
            .map(|i| format!("{path}.tasks[{i}]"))
            .collect();
        let periods: Vec<(String, Option<String>)> = raw
            .iter()
            .map(|t| (t.name.clone(), t.period.clone()))
            .collect();
        raw.into_iter()
            .zip(&paths)
            .map(|(t, path)| {
                let reservation = match (&t.serves, t.io_utilization) {
                    (None, None) => self.reservation(&t, path)?,
                    (Some(served), Some(u)) => self.io_reservation(served, u, &periods, path)?,
                    (Some(_), None) => return err(path.as_str(), "missing `io_utilization` (an I/O task's budget is U_io x T of the task it serves)"),
                    (None, Some(_)) => return err(path.as_str(), "missing `serves` (the task whose period the I/O task takes)"),
                };
                let mut task = self.task(t, path, reservation)?;
                task.server = task.server.or(server);
                Ok(task)
            })
            .collect()
    }

    /// (budget, period) of an ordinary task.
    fn reservation(&self, t: &RawTask, path: &str) -> Result<(Nanos, Nanos)> {
        let (Some(budget), Some(period)) = (&t.budget, &t.period) else {
            let key = if t.budget.is_none() {
                "budget"
            } else {
                "period"
            };
            return err(path, format!("missing `{key}`"));
        };
        Ok((
            self.positive_duration(budget, &child(path, "budget"))?,
            self.positive_duration(period, &child(path, "period"))?,
        ))
    }

    /// The reservation of an I/O task serving `served` with I/O utilization `u`:
    /// budget U_io x T, period T, where T is the served task's period (DriveOS section
    /// 4.1, "Real-time I/O in Quest": the bottom-half thread gets the period of the task
    /// it serves and the device class's utilization times that period as budget; USB-CAN
    /// at 10% serving a 1 ms task gets 0.1 ms every 1 ms).
    fn io_reservation(
        &self,
        served: &str,
        u: f64,
        periods: &[(String, Option<String>)],
        path: &str,
    ) -> Result<(Nanos, Nanos)> {
        if !(u > 0.0 && u <= 1.0) {
            return err(child(path, "io_utilization"), "must be in (0, 1]");
        }
        let period = match periods.iter().find(|(name, _)| name == served) {
            Some((_, Some(period))) => self.positive_duration(period, &child(path, "serves"))?,
            _ => {
                return err(
                    child(path, "serves"),
                    format!("no task `{served}` with a period in this partition"),
                )
            }
        };
        let budget = (u * period as f64).round() as Nanos;
        if budget == 0 {
            return err(child(path, "io_utilization"), "gives a zero budget");
        }
        Ok((budget, period))
    }

    fn task(&self, t: RawTask, path: &str, (budget, period): (Nanos, Nanos)) -> Result<Task> {
        path_safe_name(t.name.clone(), &child(path, "name"))?;
        if let Some(cmd) = &t.cmd {
            check_command(cmd, &child(path, "cmd"))?;
        }
        if t.serves.is_some() && t.budget.is_some() {
            return err(
                child(path, "budget"),
                "an I/O task takes its budget from `io_utilization`",
            );
        }
        if t.serves.is_some() && t.period.is_some() {
            return err(
                child(path, "period"),
                "an I/O task takes the period of the task it serves",
            );
        }
        let deadline = match t.deadline {
            Some(d) => self.positive_duration(&d, &child(path, "deadline"))?,
            None => period,
        };
        if t.priority == Some(0) {
            return err(
                child(path, "priority"),
                "must be at least 1 (1 is the highest priority)",
            );
        }
        let optional = |v: Option<String>, key: &str| {
            v.map(|v| self.duration(&v, &child(path, key))).transpose()
        };
        let server = t
            .server
            .as_deref()
            .map(|s| TaskServer::parse(s).or_else(|e| err(child(path, "server"), e.to_string())))
            .transpose()?;
        let offset = optional(t.offset, "offset")?.unwrap_or(0);
        if offset >= period {
            return err(
                child(path, "offset"),
                "must be less than the period (an offset moves the task's releases within it)",
            );
        }
        Ok(Task {
            name: t.name,
            cmd: t.cmd.unwrap_or_default(),
            budget,
            period,
            deadline,
            priority: t.priority,
            release_jitter: optional(t.release_jitter, "release_jitter")?.unwrap_or(0),
            offset,
            blocking: optional(t.blocking, "blocking")?.unwrap_or(0),
            resume: t.resume.unwrap_or_default(),
            wcet_khz: self.frequency(t.wcet_frequency, None, &child(path, "wcet_frequency"))?,
            memory_bound_ppm: memory_bound(t.memory_bound, &child(path, "memory_bound"))?,
            service: None,
            server,
        })
    }

    fn bus(&self, b: RawBus, path: &str) -> Result<Bus> {
        let clients = b
            .clients
            .unwrap_or_default()
            .into_iter()
            .map(|c| BusClient {
                partition: c.partition,
                allow: c.allow.unwrap_or_default(),
                rate: c.rate,
                queue: c.queue,
            });
        Ok(Bus {
            name: non_empty(b.name, &child(path, "name"))?,
            interface: b
                .interface
                .map(|i| non_empty(i, &child(path, "interface")))
                .transpose()?,
            allow_non_can: b.allow_non_can.unwrap_or(false),
            dbc: b
                .dbc
                .map(|d| non_empty(d, &child(path, "dbc")))
                .transpose()?,
            gateway: b.gateway,
            period: self.positive_duration(&b.period, &child(path, "period"))?,
            reader_budget: self
                .positive_duration(&b.reader_budget, &child(path, "reader_budget"))?,
            writer_budget: self
                .positive_duration(&b.writer_budget, &child(path, "writer_budget"))?,
            depth: match b.depth {
                Some(0) => return err(child(path, "depth"), "must be at least 1"),
                Some(d) if d > MAX_FIFO_DEPTH => {
                    let msg = format!("{d} frames: at most {MAX_FIFO_DEPTH}");
                    return err(child(path, "depth"), msg);
                }
                d => d.unwrap_or(DEFAULT_BUS_DEPTH),
            },
            clients: clients.collect(),
        })
    }

    fn window(&mut self, mut w: RawWindow, path: &str) -> Result<()> {
        let length = self.positive_duration(&w.length, &child(path, "length"))?;
        if w.slices.is_some() && w.has_inline_slice() {
            return err(
                path,
                "give either `slices` or one slice inline (`cpu`, `sc_partition`...), not both",
            );
        }
        let inline = w.has_inline_slice();
        let raw_slices = match w.slices.take() {
            Some(list) => list,
            None if inline => {
                let mut slice = w.take_inline_slice();
                slice.cpu.get_or_insert_with(|| "all".to_string());
                vec![slice]
            }
            None => Vec::new(),
        };
        let slice_path = |j| {
            if inline {
                path.to_string()
            } else {
                format!("{path}.slices[{j}]")
            }
        };
        let mut slices = Vec::new();
        let mut paths = Vec::new();
        for (j, s) in raw_slices.into_iter().enumerate() {
            let spath = slice_path(j);
            slices.push(self.slice(s, &spath, length)?);
            paths.push(spath);
        }
        check_slices(&slices, &paths)?;
        self.out.system.windows.push(Window { length, slices });
        self.out.slice_paths.push(paths);
        Ok(())
    }

    fn slice(&mut self, s: RawSlice, path: &str, length: Nanos) -> Result<Slice> {
        let Some(cpu) = s.cpu else {
            return err(
                path,
                "missing `cpu` (the CPUs of this slice, e.g. 0, 0-2 or all)",
            );
        };
        let cpus = cpus(&cpu, &child(path, "cpu"))?;
        let set = match &cpus {
            Cpus::Set(set) => Some(set),
            Cpus::All => None,
        };
        let frequency_khz = self.frequency(s.frequency, Some(set), &child(path, "frequency"))?;
        Ok(Slice {
            cpus,
            sc_partition: self.slot(s.sc_partition, s.sc_processes, Slot::Sc, path, length)?,
            be_partition: self.slot(s.be_partition, s.be_processes, Slot::Be, path, length)?,
            frequency_khz,
        })
    }

    /// The partition filling one slot of a slice, given as `xx_partition` or `xx_processes`.
    fn slot(
        &mut self,
        partition: Option<PartitionEntry>,
        processes: Option<Vec<ProcessSpec>>,
        slot: Slot,
        path: &str,
        length: Nanos,
    ) -> Result<Option<String>> {
        let (prefix, total) = match slot {
            Slot::Sc => ("sc", length / 5 * 3 + length % 5 * 3 / 5),
            Slot::Be => ("be", length),
        };
        let (spec, key) = match (partition, processes) {
            (Some(_), Some(_)) => {
                return err(
                    path,
                    format!("give either `{prefix}_partition` or `{prefix}_processes`, not both"),
                )
            }
            (Some(p), None) => (p, format!("{prefix}_partition")),
            (None, Some(list)) => (
                PartitionEntry::Processes(list),
                format!("{prefix}_processes"),
            ),
            (None, None) => return Ok(None),
        };
        let spath = child(path, &key);
        if let PartitionEntry::Name(name) = &spec {
            self.out.references.push(Reference {
                name: name.clone(),
                path: spath.clone(),
            });
        }
        if let PartitionEntry::Processes(list) = &spec {
            if list.is_empty() {
                return err(spath, "must list at least one process");
            }
        }
        self.define_partition(spec, &spath, Some(total)).map(Some)
    }
}

/// A `listen` address: `PORT` or `localhost:PORT` (this machine only: 127.0.0.1),
/// `IPV4:PORT` or `[IPV6]:PORT`.
fn listen_address(text: &str, path: &str) -> Result<std::net::SocketAddr> {
    let local = text.strip_prefix("localhost:").unwrap_or(text);
    if let Ok(port) = local.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().or_else(|_| {
        err(
            path,
            format!(
                "`{text}` is not an address to listen on: want PORT (on 127.0.0.1), \
                 IPV4:PORT or [IPV6]:PORT"
            ),
        )
    })
}

/// A `path` key: a search path like `PATH`'s, directories separated by `:`, each
/// absolute (a relative one would depend on the directory a program happens to run in).
fn search_path(text: String, path: &str) -> Result<String> {
    if text.is_empty() {
        return err(path, "must name at least one directory");
    }
    match text.split(':').find(|dir| !dir.starts_with('/')) {
        Some(dir) => err(
            path,
            format!("`{dir}` is not an absolute directory: every entry of a search path must start with `/`"),
        ),
        None => Ok(text),
    }
}

fn child(path: &str, key: &str) -> String {
    crate::de::child_path(path, key)
}

/// A partition's `server` (the default of its tasks). A partition scheduled as a server
/// itself (`interface`) takes its reservation from the interface, so neither it nor its
/// tasks may declare one; a be partition has no tasks.
fn servers(
    text: Option<&str>,
    tasks: &[RawTask],
    has_interface: bool,
    kind: PartitionKind,
    path: &str,
) -> Result<Option<TaskServer>> {
    let task_server = tasks.iter().position(|t| t.server.is_some());
    if has_interface {
        let at = match (text, task_server) {
            (Some(_), _) => child(path, "server"),
            (None, Some(i)) => format!("{path}.tasks[{i}].server"),
            (None, None) => return Ok(None),
        };
        return err(
            at,
            "the partition is scheduled as a server (`interface`): its tasks take their reservation from it",
        );
    }
    let Some(text) = text else { return Ok(None) };
    if kind == PartitionKind::Be {
        return err(child(path, "server"), "applies to rt partitions only");
    }
    TaskServer::parse(text)
        .map(Some)
        .or_else(|e| err(child(path, "server"), e.to_string()))
}

fn check_kind(
    kind: PartitionKind,
    tasks: &[Task],
    processes: &[Process],
    has_scheduler: bool,
    path: &str,
) -> Result<()> {
    match kind {
        PartitionKind::Rt if !processes.is_empty() => err(
            path,
            "an rt partition runs periodic `tasks`; windowed `processes` belong to be partitions",
        ),
        PartitionKind::Be if !tasks.is_empty() => {
            err(child(path, "tasks"), "periodic tasks need `kind: rt`")
        }
        PartitionKind::Be if has_scheduler => {
            err(child(path, "scheduler"), "applies to rt partitions only")
        }
        _ => Ok(()),
    }
}

/// `reclaim` is a SCHED_DEADLINE flag: it needs an rt partition with `scheduler: edf`.
fn check_reclaim(
    reclaim: Option<bool>,
    kind: PartitionKind,
    scheduler: Scheduler,
    path: &str,
) -> Result<bool> {
    match reclaim {
        Some(_) if kind != PartitionKind::Rt => {
            err(child(path, "reclaim"), "applies to rt partitions only")
        }
        Some(true) if scheduler != Scheduler::Edf => err(
            child(path, "reclaim"),
            "needs `scheduler: edf` (SCHED_FLAG_RECLAIM is a SCHED_DEADLINE flag)",
        ),
        r => Ok(r.unwrap_or(false)),
    }
}

/// Within one window: no partition twice, no CPU in two slices.
fn check_slices(slices: &[Slice], paths: &[String]) -> Result<()> {
    let mut seen: Vec<&str> = Vec::new();
    for (slice, path) in slices.iter().zip(paths) {
        for name in [&slice.sc_partition, &slice.be_partition]
            .into_iter()
            .flatten()
        {
            if seen.contains(&name.as_str()) {
                return err(
                    path,
                    format!("partition `{name}` appears twice in this window"),
                );
            }
            seen.push(name);
        }
    }
    for (j, a) in slices.iter().enumerate() {
        for b in &slices[..j] {
            if overlap(&a.cpus, &b.cpus) {
                return err(
                    child(&paths[j], "cpu"),
                    "overlaps the CPUs of another slice of this window",
                );
            }
        }
    }
    Ok(())
}

/// True if two CPU specifications share a CPU (`all` shares every CPU).
pub fn overlap(a: &Cpus, b: &Cpus) -> bool {
    match (a, b) {
        (Cpus::Set(a), Cpus::Set(b)) => a.intersects(b),
        _ => true,
    }
}

fn cpus(text: &str, path: &str) -> Result<Cpus> {
    if text.trim() == "all" {
        return Ok(Cpus::All);
    }
    CpuSet::parse(text).map(Cpus::Set).or_else(|e| err(path, e))
}

/// Adds each bus's reader and writer tasks to its gateway partition (after validation:
/// the partition exists, is rt, and has no task of those names).
pub fn add_gateway_tasks(system: &mut System) {
    for b in &system.buses {
        let Some(p) = system.partitions.iter_mut().find(|p| p.name == b.gateway) else {
            continue;
        };
        let services = [
            (
                b.reader_task(),
                b.reader_budget,
                Service::CanReader {
                    bus: b.name.clone(),
                },
            ),
            (
                b.writer_task(),
                b.writer_budget,
                Service::CanWriter {
                    bus: b.name.clone(),
                },
            ),
        ];
        for (name, budget, service) in services {
            p.tasks.push(Task::service(name, budget, b.period, service));
        }
    }
}

/// A `user:` that names an account of this machine, or a uid that `setuid` can take.
fn user(text: String, path: &str) -> Result<String> {
    let text = non_empty(text, path)?;
    crate::users::check(&text).or_else(|e| err(path, e.to_string()))?;
    Ok(text)
}

/// A partition or task name: it becomes part of cgroup directory names and of
/// `partition/task` endpoints, so it is not empty, has no `/`, NUL or control
/// character, and is not `.` or `..`.
fn path_safe_name(text: String, path: &str) -> Result<String> {
    let text = non_empty(text, path)?;
    if text == "." || text == ".." {
        return err(path, format!("`{text}` is not a name"));
    }
    if let Some(c) = text.chars().find(|&c| c == '/' || c.is_control()) {
        return err(
            path,
            format!("{c:?} is not allowed in a name (names become cgroup directories and `partition/task` endpoints)"),
        );
    }
    Ok(text)
}

fn non_empty(text: String, path: &str) -> Result<String> {
    if text.trim().is_empty() {
        return err(path, "must not be empty");
    }
    Ok(text)
}

fn opt_cpuset(text: Option<String>, path: &str) -> Result<Option<CpuSet>> {
    text.map(|t| CpuSet::parse(&t).or_else(|e| err(path, e)))
        .transpose()
}

/// `exclusive:`, of rt partitions only (default: they own their CPUs).
fn exclusive(value: Option<bool>, kind: PartitionKind, path: &str) -> Result<bool> {
    match value {
        Some(_) if kind != PartitionKind::Rt => err(
            child(path, "exclusive"),
            "applies to rt partitions only (a best-effort partition never owns its CPUs)",
        ),
        e => Ok(e.unwrap_or(true)),
    }
}

/// `cpu: N%`, the CFS bandwidth of best-effort partitions only.
fn be_cpu(value: Option<String>, kind: PartitionKind, path: &str) -> Result<Option<u32>> {
    match value {
        Some(_) if kind == PartitionKind::Rt => err(
            child(path, "cpu"),
            "applies to best-effort partitions only (rt tasks have reservations)",
        ),
        Some(text) => cpu_percent(&text, &child(path, "cpu")).map(Some),
        None => Ok(None),
    }
}

/// The sandbox a `sandbox:` key describes: every part on unless relaxed by name.
fn sandbox(s: RawSandbox) -> Sandbox {
    Sandbox {
        clean_env: s.clean_env.unwrap_or(true),
        no_new_privs: s.no_new_privs.unwrap_or(true),
        no_capabilities: s.no_capabilities.unwrap_or(true),
        seccomp: s.seccomp.unwrap_or(true),
        private_tmp: s.private_tmp.unwrap_or(true),
        pid_namespace: s.pid_namespace.unwrap_or(true),
        private_users: s.private_users.unwrap_or(true),
        protect_system: s.protect_system.unwrap_or(true),
        protect_kernel: s.protect_kernel.unwrap_or(true),
        protect_cgroups: s.protect_cgroups.unwrap_or(true),
        hide_runtime_dir: s.hide_runtime_dir.unwrap_or(true),
        private_ipc: s.private_ipc.unwrap_or(true),
        remove_ipc: s.remove_ipc.unwrap_or(true),
    }
}

/// `cpu: 30%`: a whole percentage of one CPU, 1 to 100 per CPU of a 1024-CPU machine.
fn cpu_percent(text: &str, path: &str) -> Result<u32> {
    let number = text.trim().strip_suffix('%').map(str::trim);
    match number.and_then(|n| n.parse::<u32>().ok()) {
        Some(n @ 1..=102_400) => Ok(n),
        Some(_) => err(path, "must be between 1% and 102400% (100% is one CPU)"),
        None => err(
            path,
            format!("`{text}` is not a percentage of one CPU (e.g. `30%`; 100% is one CPU)"),
        ),
    }
}

fn memory(text: &str, path: &str) -> Result<u64> {
    match parse_size(text) {
        Ok(0) => err(path, "must be a positive size"),
        Ok(bytes) => Ok(bytes),
        Err(e) => err(path, e),
    }
}

/// A command must say something and cannot hold a NUL byte (no program argument can).
fn check_command(cmd: &str, path: &str) -> Result<()> {
    if cmd.trim().is_empty() {
        return err(path, "must not be an empty command");
    }
    if cmd.contains('\0') {
        return err(path, "must not contain a NUL byte (no command line can)");
    }
    Ok(())
}

/// The largest channel message, as the channel library allows (`bulkhead_chan::layout`).
pub const MAX_MESSAGE_SIZE: u32 = 1 << 24;

/// The deepest fifo, as the channel library allows (`bulkhead_chan::fifo::MAX_DEPTH`).
pub const MAX_FIFO_DEPTH: u32 = 1 << 24;

/// The largest message area of one channel (slots of 8-byte-aligned messages).
const MAX_MESSAGE_AREA: u64 = 1 << 32;

/// Message size and depth must make a channel the library can create: `check` says no
/// where `run` would.
fn check_capacity(message_size: u32, depth: u32, path: &str) -> Result<()> {
    if message_size > MAX_MESSAGE_SIZE {
        let msg = format!("{message_size} bytes: at most {MAX_MESSAGE_SIZE} (16 MiB)");
        return err(child(path, "message_size"), msg);
    }
    if depth > MAX_FIFO_DEPTH {
        let msg = format!("{depth} messages: at most {MAX_FIFO_DEPTH}");
        return err(child(path, "depth"), msg);
    }
    let slots = if depth == 1 { 4 } else { u64::from(depth) };
    let area = u64::from(message_size).div_ceil(8) * 8 * slots;
    if area > MAX_MESSAGE_AREA {
        let msg = format!(
            "{depth} messages of {message_size} bytes need {area} bytes: a channel holds at most 4 GiB"
        );
        return err(child(path, "depth"), msg);
    }
    Ok(())
}

/// A channel's `reads:`: a count of at least 1 or `all`, on a fifo only.
fn reads(kind: ChannelKind, text: Option<&str>, path: &str) -> Result<Reads> {
    let Some(text) = text else {
        return Ok(Reads::ONE);
    };
    let key = child(path, "reads");
    if kind == ChannelKind::Latest {
        let msg = "a `latest` channel's reader takes the newest message: omit reads";
        return err(key, msg);
    }
    match text.trim() {
        "all" => Ok(Reads::All),
        n => match n.parse::<u32>() {
            Ok(0) => err(key, "must be at least 1"),
            Ok(n) => Ok(Reads::Count(n)),
            Err(_) => err(key, format!("`{n}`: a number of messages, or `all`")),
        },
    }
}

/// A channel; `end` splits an endpoint into partition and task. A bridged channel's end
/// across the bridge becomes the bridge's partition.
fn channel(
    c: RawChannel,
    path: &str,
    end: &dyn Fn(&str) -> (String, Option<String>),
    bridge: Option<Bridge>,
) -> Result<Channel> {
    if c.name.trim().is_empty() {
        return err(child(path, "name"), "must not be empty");
    }
    if c.message_size == 0 {
        return err(child(path, "message_size"), "must be at least 1 byte");
    }
    let depth = match (c.kind, c.depth) {
        (ChannelKind::Fifo, None) => {
            return err(path, "missing `depth` (ring capacity in messages)")
        }
        (ChannelKind::Fifo, Some(0)) => return err(child(path, "depth"), "must be at least 1"),
        (ChannelKind::Fifo, Some(d)) => d,
        (ChannelKind::Latest, None | Some(1)) => 1,
        (ChannelKind::Latest, Some(_)) => {
            return err(
                child(path, "depth"),
                "a `latest` channel holds one message (four-slot): omit depth",
            )
        }
    };
    check_capacity(c.message_size, depth, path)?;
    if c.kind == ChannelKind::Latest && c.overflow.is_some() {
        return err(
            child(path, "overflow"),
            "a `latest` channel never fills (four-slot: the newest message replaces the last): omit overflow",
        );
    }
    let reads = reads(c.kind, c.reads.as_deref(), path)?;
    let (writer, readers) = bridged_ends(&c, path, bridge.as_ref())?;
    Ok(Channel {
        name: c.name,
        kind: c.kind,
        message_size: c.message_size,
        depth,
        overflow: c.overflow.unwrap_or_default(),
        reads,
        writer: end(&writer).0,
        writer_task: end(&writer).1,
        readers: readers.iter().map(|r| end(r).0).collect(),
        reader_tasks: readers.iter().map(|r| end(r).1).collect(),
        bridge,
    })
}

/// The writer and readers of channel `c`: as written, with the bridge's partition at the
/// end across a bridge (the readers of a published channel, the writer `zenoh` of a
/// subscribed one).
fn bridged_ends(
    c: &RawChannel,
    path: &str,
    bridge: Option<&Bridge>,
) -> Result<(String, Vec<String>)> {
    let zenoh = crate::bridge::ZENOH_WRITER;
    let Some(b) = bridge else {
        if c.writer == zenoh {
            let msg =
                format!("writer `{zenoh}` receives from a Zenoh key: the channel needs a `bridge`");
            return err(child(path, "writer"), msg);
        }
        return match &c.readers {
            Some(r) => Ok((c.writer.clone(), r.clone())),
            None => err(path, "missing `readers`"),
        };
    };
    match (b.direction, &c.readers) {
        (BridgeDirection::Publish, Some(_)) => err(
            child(path, "readers"),
            "the reader of a published channel is its bridge: omit readers (or set `writer: zenoh` to receive from the key)",
        ),
        (BridgeDirection::Publish, None) => Ok((c.writer.clone(), vec![b.partition.clone()])),
        (BridgeDirection::Subscribe, Some(r)) => Ok((b.partition.clone(), r.clone())),
        (BridgeDirection::Subscribe, None) => err(
            path,
            "missing `readers` (the local partition that reads what the bridge receives)",
        ),
    }
}

/// A DEmOS `frequency` (MHz, may have decimals: `345.6`) in kHz, as CPUFreq counts.
/// A `memory_bound` fraction in [0, 1], in millionths (0 when absent).
fn memory_bound(fraction: Option<f64>, path: &str) -> Result<u32> {
    let Some(f) = fraction else { return Ok(0) };
    if !(0.0..=1.0).contains(&f) {
        return err(
            path,
            "must be a fraction between 0 and 1 (the part of the budget that does not scale with frequency)",
        );
    }
    Ok((f * 1e6).round() as u32)
}

fn frequency(mhz: Option<f64>, path: &str) -> Result<Option<u64>> {
    let Some(mhz) = mhz else { return Ok(None) };
    let khz = (mhz * 1000.0).round();
    if !mhz.is_finite() || !(1.0..=1e9).contains(&khz) {
        return err(
            path,
            "must be a positive frequency in MHz (e.g. 1200 or 345.6), at most 1000000",
        );
    }
    Ok(Some(khz as u64))
}
