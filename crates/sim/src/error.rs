//! Why a description cannot be simulated.

use bulkhead_windows::ScheduleError;
use std::fmt;

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
    Spec(String),
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
            BuildError::Spec(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Schedule(e) => Some(e),
            _ => None,
        }
    }
}
