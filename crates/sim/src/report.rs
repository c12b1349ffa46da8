//! What a simulation measured (`bulkhead sim --stats-json`).

pub use crate::background::BackgroundStats;
use crate::channels::{ChainStats, ChannelStats};
pub use crate::windows::WindowStats;
use bulkhead_model::Nanos;
use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Report {
    /// Simulated system time covered.
    pub duration_ns: Nanos,
    pub seed: u64,
    /// Jobs completed, all tasks together.
    pub jobs: u64,
    pub tasks: Vec<TaskStats>,
    /// End-to-end statistics per source -> sink pair of tasks connected by channels.
    pub chains: Vec<ChainStats>,
    pub channels: Vec<ChannelStats>,
    /// The window schedule; `null` when the system has none (the key is always there).
    pub windows: Option<WindowStats>,
    /// The mode switches requested (a system with modes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<SwitchStats>,
    /// Per pipeline of the description: messages in and out, losses, end-to-end delays.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pipelines: Vec<crate::pipes::PipelineStats>,
    /// Energy per CPU of a window schedule on a description with a `power:` section.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::energy::EnergyStats>,
    /// The stop protocol's events of the suspensions, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stops: Vec<crate::stop::StopEvent>,
    /// Best-effort partitions on CPUs of non-exclusive rt partitions: the CPU time they
    /// got in the background of the rt tasks ([`crate::background`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub background: Vec<BackgroundStats>,
    /// Why a health action (`stop`, `suspend`) ended the simulation early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_ended: Option<String>,
}

/// One mode switch request and how it went.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SwitchStats {
    pub from: String,
    pub to: String,
    /// The policy it ran under (`null` when refused at once).
    pub policy: Option<String>,
    pub requested_ns: Nanos,
    /// Request to the last step (`null` when refused or not finished).
    pub latency_ns: Option<Nanos>,
    /// Why it was refused or abandoned.
    pub refused: Option<String>,
}

impl Report {
    /// The report as pretty-printed JSON (`--stats-json`).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TaskStats {
    pub partition: String,
    pub name: String,
    /// Jobs completed.
    pub jobs: u64,
    pub released: u64,
    /// Largest completion minus release over completed jobs.
    pub max_response_ns: Nanos,
    pub mean_response_ns: Option<f64>,
    /// Jobs that completed after their deadline, or had not completed at a deadline
    /// before the end of the simulation.
    pub misses: u64,
    /// Jobs discarded by a restart after a suspension, or because a mode switch
    /// stopped the task.
    pub aborted: u64,
    /// Releases dropped because the task already had [`crate::MAX_BACKLOG`] jobs
    /// queued (each also counts as a miss).
    pub dropped: u64,
    /// Jobs still queued at the end.
    pub pending: u64,
    #[serde(skip)]
    pub total_response_ns: u128,
}

impl TaskStats {
    /// A copy with the mean filled in.
    pub fn finished(&self) -> TaskStats {
        let mean = (self.jobs > 0).then(|| self.total_response_ns as f64 / self.jobs as f64);
        TaskStats {
            mean_response_ns: mean,
            ..self.clone()
        }
    }
}
