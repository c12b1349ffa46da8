//! Why a description cannot be simulated.

use bulkhead_power::PowerError;
use bulkhead_windows::ScheduleError;
use std::fmt;

/// A check a hand-built [`crate::Spec`] fails ([`crate::Spec::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("domain {index} (`{name}`) has no CPUs")]
    NoCpus { index: usize, name: String },
    #[error("server {server}: no domain {domain}")]
    NoDomain { server: usize, domain: usize },
    #[error("server {0}: needs 0 < budget <= period")]
    Budget(usize),
    /// `task` is `PARTITION/TASK`.
    #[error("task {task}: no server {server}")]
    NoServer { task: String, server: usize },
    #[error("task {task}: no channel {channel}")]
    NoChannel { task: String, channel: usize },
    #[error("task {0}: period must be positive")]
    Period(String),
    #[error("task {0}: arrival times must be sorted")]
    Arrivals(String),
    #[error("task {0}: execution time range is empty")]
    Exec(String),
    #[error("channel `{0}`: depth must be positive")]
    Depth(String),
}

/// Why a spec cannot be simulated with the given options ([`crate::Sim::new`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The power policy refuses the clusters or the window schedule.
    #[error("power policy: {0}")]
    Power(#[source] PowerError),
    /// `--mode-switch` to a description without modes (the mode asked for).
    #[error("--mode-switch {0}: the description has no modes")]
    NoModes(String),
    /// `--mode-switch` to a mode the description does not have.
    #[error("--mode-switch {0}: no mode `{0}`")]
    NoMode(String),
    /// `--inject-miss` or `--inject-exit` names no rt task.
    #[error("injected fault on `{0}`: no rt task of that name (NAME or PARTITION/NAME)")]
    NoTask(String),
    /// `--inject-miss` or `--inject-exit` names a task of several partitions.
    #[error("injected fault on `{0}`: several partitions have a task of that name; write PARTITION/NAME")]
    AmbiguousTask(String),
}

/// The message, for the layers that report in text (the conformance suite).
impl From<SimError> for String {
    fn from(e: SimError) -> String {
        e.to_string()
    }
}

/// Why a system description cannot be simulated with the given options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// This rt partition has `cpus: all` and the description no `system.cpus`.
    AllCpus(String),
    /// `--task-server` names no rt task.
    TaskServer(String),
    /// `--link` names no channel of the description.
    LinkChannel(String),
    /// A channel's writer or reader task (named by `--link` or the description) is not
    /// a task of its partitions.
    LinkTask {
        channel: String,
        task: String,
        partitions: Vec<String>,
    },
    /// A pipeline stage is not a task: the pipeline was not solved.
    Unsolved { pipeline: String, stage: String },
    /// The window schedule cannot run.
    Schedule(ScheduleError),
    /// `--process` names no command of a windowed process.
    Process(String),
    /// A power policy for a description without `power:`.
    NoPowerModel,
    /// The built simulation fails [`crate::Spec::validate`].
    Spec(SpecError),
}

impl From<ScheduleError> for BuildError {
    fn from(e: ScheduleError) -> BuildError {
        BuildError::Schedule(e)
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::AllCpus(p) => write!(
                f,
                "partition `{p}`: `cpus: all` needs `system.cpus` to be simulated"
            ),
            BuildError::TaskServer(name) => {
                write!(f, "--task-server {name}: no rt task `{name}`")
            }
            BuildError::LinkChannel(c) => write!(f, "--link {c}: no channel `{c}`"),
            BuildError::LinkTask {
                channel,
                task,
                partitions,
            } => write!(
                f,
                "--link {channel}: no task `{task}` in partition(s) {}",
                partitions.join(", ")
            ),
            BuildError::Unsolved { pipeline, stage } => write!(
                f,
                "pipeline `{pipeline}`: stage `{stage}` is not a task (not solved)"
            ),
            BuildError::Schedule(e) => write!(f, "{e}"),
            BuildError::Process(cmd) => {
                write!(f, "--process {cmd}: no windowed process has this command")
            }
            BuildError::NoPowerModel => f.write_str(
                "a power policy needs the description's `power:` section (the clusters' operating points) to simulate",
            ),
            BuildError::Spec(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Schedule(e) => Some(e),
            BuildError::Spec(e) => Some(e),
            _ => None,
        }
    }
}
