//! Why a power policy cannot be read ([`PolicyError`]) or carried out on this machine's
//! clusters for this schedule ([`PowerError`]). The messages are DEmOS's checks in words.

use std::fmt;

/// A `-p` text that names no policy bulkhead knows, or gives it wrong arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
    /// A policy without arguments was given some.
    TakesNoArguments { name: String },
    /// `fixed` or `alternating` without its indices.
    NeedsIndices { name: String },
    /// An argument that is not a frequency index.
    NotAnIndex { name: String, arg: String },
    /// An `imx8_*` policy with other than its exact count of indices.
    ArgumentCount {
        name: String,
        got: usize,
        expected: usize,
    },
    /// `alternating` with an odd number of indices.
    OddIndices { name: String, got: usize },
    /// No such policy.
    Unknown { name: String },
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::TakesNoArguments { name } => {
                write!(f, "power policy `{name}` takes no arguments")
            }
            PolicyError::NeedsIndices { name } => write!(
                f,
                "power policy `{name}` needs frequency indices: `{name}:I,I,...`"
            ),
            PolicyError::NotAnIndex { name, arg } => write!(
                f,
                "power policy `{name}`: `{arg}` is not a frequency index (0 = the lowest)"
            ),
            PolicyError::ArgumentCount {
                name,
                got,
                expected,
            } => write!(
                f,
                "incorrect number of parameters for the `{name}` power policy; got {got}, \
                 expected {expected}"
            ),
            PolicyError::OddIndices { name, got } => write!(
                f,
                "power policy `{name}` takes two frequency indices per cluster, got {got}"
            ),
            PolicyError::Unknown { name } => write!(
                f,
                "unknown power policy `{name}`; available policies: {}",
                crate::NAMES
            ),
        }
    }
}

impl std::error::Error for PolicyError {}

/// The message, for the layers that report in text (DEmOS's command line).
impl From<PolicyError> for String {
    fn from(e: PolicyError) -> String {
        e.to_string()
    }
}

/// A cluster that does not offer a frequency asked of it: its name, its CPUs and what
/// it offers, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub cluster: String,
    pub cpus: String,
    pub offer: String,
}

/// A policy these clusters cannot carry out for this schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PowerError {
    /// A policy other than `none` on a machine without CPUFreq clusters.
    NoCluster,
    /// A frequency chosen by index on a cluster that lists none (intel_pstate).
    NoFrequencyList { cluster: String },
    /// A frequency index past the cluster's list (`offered`: the list in words).
    IndexOutOfRange {
        cluster: String,
        count: usize,
        offered: String,
        index: usize,
    },
    /// Indices for another number of clusters than the machine has.
    ClusterCount { given: usize, clusters: Vec<String> },
    /// A process's `frequency` that a cluster of its slice does not offer.
    ProcessFrequency {
        cmd: String,
        partition: String,
        khz: u64,
        offer: Box<Offer>,
    },
    /// A slice's `frequency` that a cluster of its CPUs does not offer.
    SliceFrequency {
        slice: usize,
        window: usize,
        khz: u64,
        offer: Box<Offer>,
    },
    /// Two slices of one window asking one cluster for different frequencies.
    SlicesDisagree {
        window: usize,
        cpus: String,
        cluster: String,
        first_khz: u64,
        second_khz: u64,
    },
    /// Two processes running at once asking one cluster for different frequencies.
    ProcessesDisagree {
        cpus: String,
        cluster: String,
        other_khz: u64,
        other_cmd: String,
        khz: u64,
        cmd: String,
    },
}

impl fmt::Display for PowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PowerError::NoCluster => write!(f, "no CPUFreq cluster to control"),
            PowerError::NoFrequencyList { cluster } => write!(
                f,
                "cluster {cluster} lists no available frequencies (the intel_pstate driver \
                 does not), so frequencies cannot be chosen by index"
            ),
            PowerError::IndexOutOfRange {
                cluster,
                count,
                offered,
                index,
            } => write!(
                f,
                "cluster {cluster} has {count} frequencies ({offered}), index {index} is out \
                 of range"
            ),
            PowerError::ClusterCount { given, clusters } => write!(
                f,
                "the power policy gives frequencies for {given} clusters, this machine has {} \
                 ({})",
                clusters.len(),
                clusters.join(", ")
            ),
            PowerError::ProcessFrequency {
                cmd,
                partition,
                khz,
                offer,
            } => write!(
                f,
                "process `{cmd}` of partition `{partition}` asks for {khz} kHz, which {offer}"
            ),
            PowerError::SliceFrequency {
                slice,
                window,
                khz,
                offer,
            } => write!(
                f,
                "slice {slice} of window {window} asks for {khz} kHz, which {offer}"
            ),
            PowerError::SlicesDisagree {
                window,
                cpus,
                cluster,
                first_khz,
                second_khz,
            } => write!(
                f,
                "slices of window {window} ask for different frequencies on the CPUs {cpus} of \
                 cluster {cluster}: {first_khz} kHz and {second_khz} kHz"
            ),
            PowerError::ProcessesDisagree {
                cpus,
                cluster,
                other_khz,
                other_cmd,
                khz,
                cmd,
            } => write!(
                f,
                "processes running at the same time ask for different frequencies on the CPUs \
                 {cpus} of cluster {cluster}: {other_khz} kHz (`{other_cmd}`) and {khz} kHz \
                 (`{cmd}`)"
            ),
        }
    }
}

impl std::error::Error for PowerError {}

impl fmt::Display for Offer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Offer {
            cluster,
            cpus,
            offer,
        } = self;
        write!(f, "cluster {cluster} (CPUs {cpus}) does not offer: {offer}")
    }
}
