//! The `run` executor: `bulkhead run` on the real machine (root), with real task
//! programs, read back from the schedule log it writes, the pipeline totals it prints
//! and a probe beside it.
//!
//! The workload is the scenario's: an rt task without a program runs
//! `bulkhead-periodic --exec-us` of the scenario's share of its budget, a pipeline
//! stage without one `bulkhead stage` (as `run` gives it), a window process
//! `bulkhead-spin` (busy), an `init` one `bulkhead-probe` (initializes at once). Mode
//! switches and suspensions go to the run's control socket (`bulkhead ctl`) at their
//! schedule times, counted from when its `status` first shows a job ([`schedule_start`];
//! the checks then simulate the stimuli when the run logged them). Beside the
//! tasks, `bulkhead probe` at SCHED_FIFO 99 (above every task) samples each of their
//! CPUs every millisecond for the whole run: its longest latency per CPU is the
//! platform's floor in this run ([`Observation::floor`]).

use crate::observation::{Observation, PipelineTotals};
use crate::scenario::{Scenario, ScenarioError};
use crate::{ExecuteError, Executor};
use bulkhead_model::{Nanos, PartitionKind, System, TaskServer};
use bulkhead_trace::{Event, EventKind, LogError};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a run gets beyond the schedule time compared and its tail: `run`'s timeout
/// counts from the start, and release 0 comes once every task attached and 200 ms
/// later, on a 10 ms grid (docs/rt.md); then room for the last jobs' wake-ups on a
/// loaded machine.
pub const START: Duration = Duration::from_millis(500);

/// How much later than their schedule times a run may receive the scenario's stimuli
/// (each a `bulkhead ctl` started and answered on a loaded machine) and still go on long
/// enough after the last one.
const STIMULI_LATE: Duration = Duration::from_secs(1);

/// How long a run may take to start its tasks (their Start-of-Task handshake), on a
/// loaded machine.
const STARTING: Duration = Duration::from_secs(10);

/// What a run may take beyond its timeout before it counts as hung.
const GRACE: Duration = Duration::from_secs(30);

/// Why `run` could not execute a scenario, or cannot run here.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("bulkhead run needs root (cgroups, SCHED_DEADLINE, cpusets)")]
    NotRoot,
    #[error("no bulkhead and bulkhead-periodic in {}: cargo build --release", target.display())]
    NoPrograms { target: PathBuf },
    #[error("{} is not built", path.display())]
    NotBuilt { path: PathBuf },
    /// A file or directory of the run (its scratch directory, description, log, lock).
    #[error("{}: {source}", path.display())]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Wait(std::io::Error),
    #[error("still running {within:?} after it should have ended")]
    Hung { within: Duration },
    #[error("bulkhead run exited with {status:?}:\n{stderr}")]
    RunExited { status: Option<i32>, stderr: String },
    #[error("bulkhead probe exited with {status:?}")]
    ProbeExited { status: Option<i32> },
    #[error("bulkhead probe --json: {0}")]
    ProbeJson(serde_json::Error),
    #[error("bulkhead probe --json: no cpus")]
    ProbeNoCpus,
    #[error("a power policy needs the description's power: section")]
    NoPower,
    #[error("no task of the run at {} released a job within {STARTING:?}", socket.display())]
    NoStart { socket: PathBuf },
    #[error("bulkhead ctl: {0}")]
    Ctl(std::io::Error),
    /// The requests the run refused, one line each (`ctl ARGS: WHY`).
    #[error("{}", refused.join("\n"))]
    Refused { refused: Vec<String> },
    /// The stimuli failed: why, and the run's stderr.
    #[error("{source}\n{stderr}")]
    Stimuli {
        source: Box<RunError>,
        stderr: String,
    },
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
}

/// `source` on `path` as a [`RunError::File`].
fn file_error(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::File {
        path: path.to_path_buf(),
        source,
    }
}

/// The programs a run executes, from the directory `bulkhead` was built in.
#[derive(Debug, Clone)]
pub struct Programs {
    pub bulkhead: PathBuf,
    pub periodic: PathBuf,
    pub spin: PathBuf,
    pub probe: PathBuf,
}

impl Programs {
    /// The programs of `target/release` (else `target/debug`) of this workspace.
    pub fn find() -> Result<Programs, RunError> {
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
        let dir = ["release", "debug"]
            .iter()
            .map(|p| target.join(p))
            .find(|d| d.join("bulkhead").exists() && d.join("bulkhead-periodic").exists())
            .ok_or_else(|| RunError::NoPrograms {
                target: target.clone(),
            })?;
        let program = |name: &str| {
            let path = dir.join(name);
            match path.exists() {
                true => Ok(path.canonicalize().unwrap_or(path)),
                false => Err(RunError::NotBuilt { path }),
            }
        };
        Ok(Programs {
            bulkhead: program("bulkhead")?,
            periodic: program("bulkhead-periodic")?,
            spin: program("bulkhead-spin")?,
            probe: program("bulkhead-probe")?,
        })
    }
}

/// The flags of `bulkhead stage` for task `name` (`partition/task`) when it writes or
/// reads channels of the description: a writer is a source (a new message stamped
/// with its job's release at each job), a reader a sink (it reports each message it
/// finishes, as the simulation's reader reads it).
fn channel_words(channels: &[bulkhead_model::Channel], name: &str) -> Option<String> {
    let mut words = String::new();
    for c in channels {
        if c.writer_task
            .as_ref()
            .map(|t| format!("{}/{t}", c.writer))
            .as_deref()
            == Some(name)
        {
            words += &format!(" --source 0 --output {}", c.name);
        }
        let mut readers = c.readers.iter().zip(&c.reader_tasks);
        if readers.any(|(p, t)| t.as_ref().is_some_and(|t| format!("{p}/{t}") == name)) {
            words += &format!(" --sink --input {}", c.name);
        }
    }
    (!words.is_empty()).then_some(words)
}

/// `bulkhead run`.
pub struct Run {
    programs: Programs,
    scratch: PathBuf,
}

impl Run {
    /// The executor, or why it cannot run here (it needs root and the built programs).
    pub fn new() -> Result<Run, RunError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(RunError::NotRoot);
        }
        let programs = Programs::find()?;
        let scratch = std::env::temp_dir().join(format!("bulkhead-conform-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).map_err(file_error(&scratch))?;
        open_to_all(&scratch)?;
        Ok(Run { programs, scratch })
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// Lets every user write `dir` (partitions run as users of their own).
fn open_to_all(dir: &Path) -> Result<(), RunError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777)).map_err(file_error(dir))
}

impl Executor for Run {
    fn name(&self) -> &'static str {
        "run"
    }

    fn cannot(&self, s: &Scenario) -> Option<String> {
        if let Some(why) = &s.run_cannot {
            return Some(why.clone());
        }
        let system = match s.system() {
            Ok(system) => system,
            Err(e) => return Some(e.to_string()),
        };
        if s.header.is_timed_by_processes() {
            return Some("a real process yields or exits after its own CPU time, which a loaded machine gives it late".into());
        }
        let sim_servers = rt_tasks(&system).any(|t| {
            matches!(
                t.server,
                Some(TaskServer::Sporadic | TaskServer::Deferrable | TaskServer::Io { .. })
            )
        });
        if sim_servers {
            return Some("run reserves every task with SCHED_DEADLINE (a CBS) or SCHED_FIFO: sporadic, deferrable and I/O servers are sim's".into());
        }
        let unnamed = system
            .channels
            .iter()
            .any(|c| c.writer_task.is_none() || c.reader_tasks.iter().any(Option::is_none));
        if unnamed {
            return Some("a channel's writer or reader is a partition, not a task: the workload's tasks read and write channels".into());
        }
        None
    }

    fn execute(&self, s: &Scenario) -> Result<Observation, ExecuteError> {
        Ok(self.run(s)?)
    }
}

impl Run {
    /// [`Executor::execute`]: runs `s` and reads back what the run showed.
    fn run(&self, s: &Scenario) -> Result<Observation, RunError> {
        let dir = self.scratch.join(&s.name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(file_error(&dir))?;
        open_to_all(&dir)?;
        let system = self.runnable(s)?;
        let file = dir.join("system.yaml");
        write(&file, &bulkhead_model::to_canonical_yaml(&system))?;
        let _buses: Vec<Stopping> = system
            .buses
            .iter()
            .map(|b| self.virtual_bus(&b.name))
            .collect::<Result<_, _>>()?;
        let timeout = timeout(s, &system);
        let probe = self.probe(s, timeout)?;
        let log = dir.join("log.jsonl");
        let socket = dir.join("control.sock");
        let mut run = Command::new(&self.programs.bulkhead);
        run.arg("run")
            .arg(&file)
            .arg("--timeout")
            .arg(format!("{}us", timeout.as_micros()))
            .arg("--seed")
            .arg(s.header.seed.to_string())
            .arg("--schedule-log")
            .arg(&log)
            .arg("--control")
            .arg(&socket);
        if let Some(policy) = &s.power_policy {
            let root = cpufreq_tree(&dir, &system)?;
            run.arg("--power-policy")
                .arg(policy)
                .arg("--cpufreq-root")
                .arg(root);
        }
        let run = Stopping::spawn(run, Capture::Stderr)?;
        let stimuli = self.stimuli(s, &socket);
        let (stderr, status) = run.finish(timeout + GRACE)?;
        if status != Some(0) {
            return Err(RunError::RunExited { status, stderr });
        }
        let mut o = self.observe(s, &log, &stderr)?;
        o.floor = match probe {
            Some(probe) => platform_floor(floor(probe)?, &s.solved()?),
            None => Vec::new(),
        };
        if let Err(e) = stimuli {
            let source = Box::new(e);
            return Err(RunError::Stimuli { source, stderr });
        }
        Ok(o)
    }
}

/// The rt tasks of `system`.
fn rt_tasks(system: &System) -> impl Iterator<Item = &bulkhead_model::Task> {
    system
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Rt)
        .flat_map(|p| &p.tasks)
}

/// The run's `--timeout`: the compared time, the tail in which the last jobs complete,
/// the start and the suspensions (wall-clock time the schedule does not count), and
/// the time a Start-of-Task handshake takes.
fn timeout(s: &Scenario, system: &System) -> Duration {
    if rt_tasks(system).next().is_none() && system.pipelines.is_empty() {
        // A window schedule alone stops at its timeout after what it plans for that
        // instant, as the corpus's logs end; its init phase is not counted.
        let slack = match s.header.has_init_phase() {
            true => Duration::from_secs(2),
            false => Duration::ZERO,
        };
        return Duration::from_nanos(s.header.until) + slack;
    }
    let suspended: Nanos = s.suspensions.iter().map(|x| x.duration).sum();
    let pipes = match system.pipelines.is_empty() {
        true => 0,
        false => 200_000_000,
    };
    let start = START.as_nanos() as Nanos;
    let late = match s.mode_switches.is_empty() && s.suspensions.is_empty() {
        true => 0,
        false => STIMULI_LATE.as_nanos() as Nanos,
    };
    Duration::from_nanos(
        s.header.until + crate::sim::tail(system) + suspended + start + pipes + late,
    )
}

impl Run {
    /// `s`'s system with the scenario's workload as its programs (a best-effort
    /// partition outside the window schedule keeps its own), and every file it names
    /// absolute (the description is written elsewhere).
    fn runnable(&self, s: &Scenario) -> Result<System, RunError> {
        let mut system = s.system()?;
        let channels = system.channels.clone();
        let windowed: Vec<String> = system
            .windows
            .iter()
            .flat_map(|w| &w.slices)
            .flat_map(|s| s.sc_partition.iter().chain(&s.be_partition))
            .cloned()
            .collect();
        let p = &self.programs;
        for part in &mut system.partitions {
            if part.kind == PartitionKind::Rt {
                for t in part
                    .tasks
                    .iter_mut()
                    .filter(|t| t.cmd.is_empty() && t.service.is_none())
                {
                    let name = format!("{}/{}", part.name, t.name);
                    let exec_ns = t.budget * u64::from(s.exec_pct_of(&name)) / 100;
                    t.cmd = match channel_words(&channels, &name) {
                        Some(words) => format!(
                            "{} stage --pipeline {name} --stage {} --work {exec_ns}{words}",
                            p.bulkhead.display(),
                            t.name
                        ),
                        None => format!("{} --exec-us {}", p.periodic.display(), exec_ns / 1000),
                    };
                }
            }
            if !windowed.contains(&part.name) {
                continue;
            }
            for process in &mut part.processes {
                process.cmd = match process.init {
                    true => format!("{} /dev/null #{}", p.probe.display(), process.cmd),
                    false => format!("{} #{}", p.spin.display(), process.cmd),
                };
            }
        }
        for bus in &mut system.buses {
            if let Some(dbc) = &mut bus.dbc {
                *dbc = crate::scenario::dir().join(&*dbc).display().to_string();
            }
        }
        Ok(system)
    }

    /// `bulkhead can bus NAME`, the virtual bus a description's bus stands for.
    fn virtual_bus(&self, name: &str) -> Result<Stopping, RunError> {
        let mut bus = Command::new(&self.programs.bulkhead);
        bus.args(["can", "bus", name]);
        let bus = Stopping::spawn(bus, Capture::Nothing)?;
        std::thread::sleep(Duration::from_millis(200));
        Ok(bus)
    }

    /// `bulkhead probe` on the CPUs of the rt tasks for `long`, if there are any.
    fn probe(&self, s: &Scenario, long: Duration) -> Result<Option<Stopping>, RunError> {
        let bounds = crate::Bounds::of(&s.solved()?);
        let mut cpus: Vec<u32> = bounds
            .tasks
            .iter()
            .flat_map(|t| t.cpus.iter().copied())
            .collect();
        cpus.sort_unstable();
        cpus.dedup();
        if cpus.is_empty() {
            return Ok(None);
        }
        let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
        let mut probe = Command::new(&self.programs.bulkhead);
        probe
            .args(["probe", "--json", "--interval", "1ms", "--priority", "99"])
            .arg("--for")
            .arg(format!("{}ms", long.as_millis()))
            .arg("--cpus")
            .arg(list.join(","));
        Stopping::spawn(probe, Capture::Stdout).map(Some)
    }

    /// Sends the scenario's mode switches and suspensions to the run's control socket
    /// at their schedule times.
    fn stimuli(&self, s: &Scenario, socket: &Path) -> Result<(), RunError> {
        let mut timeline: Vec<(Nanos, Vec<String>)> = Vec::new();
        for m in &s.mode_switches {
            timeline.push((m.at, vec!["mode".into(), m.mode.clone()]));
        }
        let mut suspended = 0;
        for x in &s.suspensions {
            timeline.push((x.at + suspended, vec!["suspend".into()]));
            timeline.push((x.at + suspended + x.duration, vec!["resume".into()]));
            suspended += x.duration;
        }
        if timeline.is_empty() {
            return Ok(());
        }
        timeline.sort();
        // Each stimulus as long after the one before was answered as the scenario has
        // them apart (a run refuses a switch sooner than the agent period after the
        // last, which a loaded machine may answer late); the checks simulate them when
        // the run received them.
        let mut previous = (schedule_start(socket)?, 0);
        let mut refused = Vec::new();
        for (at, args) in timeline {
            let when = previous.0 + Duration::from_nanos(at - previous.1);
            std::thread::sleep(when.saturating_duration_since(Instant::now()));
            let out = Command::new(&self.programs.bulkhead)
                .arg("ctl")
                .arg("--control")
                .arg(socket)
                .args(&args)
                .output()
                .map_err(RunError::Ctl)?;
            previous = (Instant::now(), at);
            if !out.status.success() {
                let why = String::from_utf8_lossy(&out.stderr);
                refused.push(format!("ctl {}: {}", args.join(" "), why.trim()));
            }
        }
        match refused.is_empty() {
            true => Ok(()),
            false => Err(RunError::Refused { refused }),
        }
    }

    /// What the run's schedule log and summary show.
    fn observe(&self, s: &Scenario, log: &Path, stderr: &str) -> Result<Observation, RunError> {
        let file = std::fs::File::open(log).map_err(file_error(log))?;
        let events = bulkhead_trace::read_schedule_log(std::io::BufReader::new(file))?;
        let events: Vec<Event> = events.into_iter().map(scenario_command).collect();
        let mut o = Observation::from_events(&events, s.header.until);
        o.pipelines = stderr.lines().filter_map(pipeline_totals).collect();
        Ok(o)
    }
}

/// When the run at `socket` started its schedule, within the 10 ms its `status` is
/// refreshed in and a job: the first instant its `status` shows a task that released a
/// job (the socket appears before the tasks' Start-of-Task handshake, which a loaded
/// machine may take hundreds of milliseconds over).
fn schedule_start(socket: &Path) -> Result<Instant, RunError> {
    use std::io::{BufRead, Write};
    let given_up = Instant::now() + STARTING;
    while Instant::now() < given_up {
        std::thread::sleep(Duration::from_millis(5));
        let Ok(mut stream) = std::os::unix::net::UnixStream::connect(socket) else {
            continue;
        };
        if stream
            .write_all(b"{\"id\":1,\"request\":\"status\"}\n")
            .is_err()
        {
            continue;
        }
        let mut line = String::new();
        if std::io::BufReader::new(&stream)
            .read_line(&mut line)
            .is_err()
        {
            continue;
        }
        if released(&line) {
            return Ok(Instant::now());
        }
    }
    Err(RunError::NoStart {
        socket: socket.to_path_buf(),
    })
}

/// Whether a `status` reply shows a task with a job.
fn released(reply: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(reply) else {
        return false;
    };
    let partitions = v["status"]["partitions"].as_array().into_iter().flatten();
    let mut tasks = partitions.flat_map(|p| p["tasks"].as_array().into_iter().flatten());
    tasks.any(|t| t["jobs"].as_u64().is_some_and(|j| j > 0))
}

/// A grant of a window process as the scenario names it: the command after the `#` of
/// `SPIN #CMD` ([`Run::runnable`]).
fn scenario_command(mut e: Event) -> Event {
    if let EventKind::Run { cmd, .. } = &mut e.kind {
        if let Some((_, name)) = cmd.split_once(" #") {
            *cmd = name.into();
        }
    }
    e
}

/// A `pipeline-stats {json}` line of `run`'s summary.
fn pipeline_totals(line: &str) -> Option<PipelineTotals> {
    let json = line.trim().strip_prefix("pipeline-stats ")?;
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    Some(PipelineTotals {
        name: v["name"].as_str()?.to_string(),
        messages_in: v["messages_in"].as_u64()?,
        messages_out: v["messages_out"].as_u64()?,
        lost: v["lost"].as_u64()?,
        max_e2e_ns: v["max_e2e_ns"].as_u64(),
    })
}

/// Per CPU, the longest latency of the probe's JSON report.
fn floor(probe: Stopping) -> Result<Vec<(u32, Nanos)>, RunError> {
    let (stdout, status) = probe.finish(GRACE)?;
    if status != Some(0) {
        return Err(RunError::ProbeExited { status });
    }
    let v: serde_json::Value = serde_json::from_str(&stdout).map_err(RunError::ProbeJson)?;
    let cpus = v["cpus"].as_array().ok_or(RunError::ProbeNoCpus)?;
    Ok(cpus
        .iter()
        .filter_map(|c| {
            let max_us = c["max_us"].as_f64()?;
            Some((c["cpu"].as_u64()? as u32, (max_us * 1e3) as Nanos))
        })
        .collect())
}

/// The platform's share of the probe's latencies: on a CPU of SCHED_DEADLINE tasks,
/// which the kernel runs before any SCHED_FIFO thread, a latency counts their work
/// too, so the platform stalled at least the latency less their longest busy period
/// there ([`deadline_busy`]); on other CPUs the probe ran above every task. At least
/// 1 ns: a floor of 0 stands for no probe (the simulation, [`crate::check::margin`]),
/// and a real run keeps the margin of a real job's own wake-up and bookkeeping where
/// its tasks' busy period explains every latency the probe saw (`edf-one-cpu`, whose
/// jobs were 0.6-0.7 ms late with a floor of 0, disagreed).
fn platform_floor(latencies: Vec<(u32, Nanos)>, system: &System) -> Vec<(u32, Nanos)> {
    latencies
        .into_iter()
        .map(|(cpu, l)| (cpu, l.saturating_sub(deadline_busy(system, cpu)).max(1)))
        .collect()
}

/// The longest busy period of the SCHED_DEADLINE tasks (`edf` partitions) that may run
/// on `cpu`: `L = ⌈Σ ⌈L/T⌉ C / m⌉` from `L = Σ C`, `m` the CPUs they share (the
/// synchronous busy period, Spuri 1996, spread over a global partition's CPUs); the
/// whole run when it does not converge.
pub fn deadline_busy(system: &System, cpu: u32) -> Nanos {
    let mut tasks: Vec<(Nanos, Nanos)> = Vec::new();
    let mut m: u64 = 1;
    for p in &system.partitions {
        let set = p.cpus.as_ref().and_then(|c| match c {
            bulkhead_model::Cpus::Set(set) => Some(set),
            bulkhead_model::Cpus::All => None,
        });
        let on_cpu = set.is_none_or(|set| set.contains(cpu));
        if p.kind != PartitionKind::Rt || p.scheduler != bulkhead_model::Scheduler::Edf || !on_cpu {
            continue;
        }
        m = m.max(set.map_or(1, |s| s.iter().count() as u64));
        tasks.extend(p.tasks.iter().map(|t| (t.budget, t.period.max(1))));
    }
    let demand = |l: Nanos| -> Nanos {
        let work: Nanos = tasks.iter().map(|&(c, t)| l.div_ceil(t) * c).sum();
        work.div_ceil(m)
    };
    let mut l = demand(1);
    for _ in 0..1000 {
        let next = demand(l);
        if next == l {
            return l;
        }
        l = next;
    }
    Nanos::MAX
}

/// A tree imitating CPUFreq (`run --cpufreq-root`) with a policy per cluster of the
/// description's `power:` section, under the kernel's own governor at first.
fn cpufreq_tree(dir: &Path, system: &System) -> Result<PathBuf, RunError> {
    let root = dir.join("sys");
    let power = system.power.as_ref().ok_or(RunError::NoPower)?;
    for (i, c) in power.clusters.iter().enumerate() {
        let policy = root.join(format!("devices/system/cpu/cpufreq/policy{i}"));
        std::fs::create_dir_all(&policy).map_err(file_error(&policy))?;
        let khz: Vec<String> = c.points.iter().map(|p| p.khz.to_string()).collect();
        let cpus: Vec<String> = c.cpus.iter().map(|c| c.to_string()).collect();
        let files = [
            ("affected_cpus", cpus.join(" ")),
            ("cpuinfo_min_freq", khz[0].clone()),
            ("cpuinfo_max_freq", khz[khz.len() - 1].clone()),
            ("scaling_available_frequencies", khz.join(" ")),
            ("scaling_governor", "schedutil".into()),
            ("scaling_max_freq", khz[khz.len() - 1].clone()),
            ("scaling_setspeed", "<unsupported>".into()),
        ];
        for (name, text) in files {
            write(&policy.join(name), &format!("{text}\n"))?;
        }
    }
    Ok(root)
}

fn write(path: &Path, text: &str) -> Result<(), RunError> {
    std::fs::write(path, text).map_err(file_error(path))
}

/// Which output of a child is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Capture {
    Stdout,
    Stderr,
    Nothing,
}

/// A child stopped with SIGTERM when dropped (a run then stops its tasks and removes
/// its cgroups), also when a check fails first; the output it keeps is read as it
/// comes, so that the child never waits on a full pipe.
struct Stopping {
    child: Option<Child>,
    output: Option<std::thread::JoinHandle<String>>,
}

impl Stopping {
    fn spawn(mut command: Command, capture: Capture) -> Result<Stopping, RunError> {
        let piped = |yes: bool| match yes {
            true => Stdio::piped(),
            false => Stdio::null(),
        };
        command
            .stdin(Stdio::null())
            .stdout(piped(capture == Capture::Stdout))
            .stderr(piped(capture == Capture::Stderr));
        let mut child = command.spawn().map_err(|source| RunError::Spawn {
            program: command.get_program().to_string_lossy().into_owned(),
            source,
        })?;
        let stream: Option<Box<dyn std::io::Read + Send>> = match capture {
            Capture::Stdout => child.stdout.take().map(|s| Box::new(s) as _),
            Capture::Stderr => child.stderr.take().map(|s| Box::new(s) as _),
            Capture::Nothing => None,
        };
        let output = stream.map(|mut stream| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stream.read_to_string(&mut text);
                text
            })
        });
        Ok(Stopping {
            child: Some(child),
            output,
        })
    }

    /// Waits at most `within` for the child's end: the output it kept and its exit code.
    fn finish(mut self, within: Duration) -> Result<(String, Option<i32>), RunError> {
        let deadline = Instant::now() + within;
        let child = self.child.as_mut().expect("running until finished");
        let status = loop {
            if let Some(status) = child.try_wait().map_err(RunError::Wait)? {
                break status;
            }
            if Instant::now() > deadline {
                return Err(RunError::Hung { within });
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.child = None;
        let output = self.output.take().map(|o| o.join().unwrap_or_default());
        Ok((output.unwrap_or_default(), status.code()))
    }
}

impl Drop for Stopping {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signalling our own child, which is not reaped yet.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// edf-one-cpu's tasks keep CPU 1 busy for longer than the probe's worst latency
    /// in a quiet run: the platform's share is none, but the run is still real, so its
    /// jobs keep a margin (a tie) that the simulation's do not.
    #[test]
    fn a_real_run_whose_probe_saw_only_deadline_work_keeps_a_margin() {
        let s = Scenario::load(&crate::scenario::dir(), "edf-one-cpu").unwrap();
        let system = s.solved().unwrap();
        let busy = deadline_busy(&system, 1);
        assert!(busy > 1_000_000, "{busy}");
        let floor = platform_floor(vec![(1, busy / 2), (0, 300_000)], &system);
        assert_eq!(floor, [(1, 1), (0, 300_000)]);
        assert!(crate::check::margin(floor[0].1) >= crate::check::TIE);
        assert_eq!(crate::check::margin(0), 0);
    }
}
