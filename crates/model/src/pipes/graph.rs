//! A pipeline's types: its stages, edges, endpoints and QoS once loaded ([`super`] reads,
//! validates and writes them), apart from the system that holds them, so that the
//! system's types name them without importing the section's reader.

use crate::buffering::{ChannelKind, Overflow};
use crate::units::Nanos;
use std::fmt;

/// A pipeline of tuned pipes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    pub name: String,
    /// The expression as written.
    pub spec: String,
    /// `Fifo` for a spec starting with `*` (lossless), `Latest` (four-slot) otherwise.
    pub buffering: ChannelKind,
    pub qos: Qos,
    /// Stages in the order the spec first names them.
    pub stages: Vec<Stage>,
    /// Producer -> consumer, as indices into `stages`; each pair once, in spec order.
    pub edges: Vec<(usize, usize)>,
    /// What a write to a full fifo of this pipeline does (`overflow:`, default
    /// [`Overflow::Block`], Boomerang III-B's `RT_FIFO`).
    pub overflow: Overflow,
    /// The buffer of each edge (in `edges` order) once solved: what `sim` and `run`
    /// build. Empty in a description; `bulkhead_analysis::pipes::apply` fills it.
    pub buffers: Vec<EdgeBuffer>,
}

/// The solved buffer of one edge: the one lowering `sim` and `run` both use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeBuffer {
    pub kind: ChannelKind,
    /// Messages a fifo holds; 1 for `latest`.
    pub depth: u32,
    pub overflow: Overflow,
}

/// The end-to-end requirement (Boomerang III-D); every part is optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Qos {
    /// FIFO pipelines: messages per second leaving the slowest final stage.
    pub throughput_per_s: Option<u64>,
    /// Four-slot pipelines: the tolerated fraction of lost messages, in millionths.
    pub loss_ppm: Option<u32>,
    /// The delay along the longest path.
    pub delay: Option<Nanos>,
}

/// One tuned pipe: a task of an rt partition whose reservation the solver derives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// Also the name of the task it becomes in `partition`.
    pub name: String,
    pub partition: String,
    /// The program; empty when not given (analysis and simulation need none).
    pub cmd: String,
    /// Worst-case execution time to take in, process and forward one message.
    pub wcet: Nanos,
    /// A device or task endpoint the stage reads, besides its producers in the spec.
    pub input: Option<Endpoint>,
    /// A device or task endpoint the stage writes, besides its consumers in the spec.
    pub output: Option<Endpoint>,
    /// A period fixed by the description (the solver keeps it); `None` = solved.
    pub period: Option<Nanos>,
    /// A budget fixed by the description (a multiple of `wcet`); `None` = solved.
    pub budget: Option<Nanos>,
    /// The task's explicit fixed priority (1 = highest); `None` = deadline monotonic.
    pub priority: Option<u32>,
}

/// An endpoint a stage connects to (Boomerang II-B's `host:sandbox:as:ep` registry as
/// bulkhead names it: the supervisor is the registry).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `can:BUS[:ID,...]`: the CAN gateway's reader (as input) or writer (as output) of
    /// the bus. `ids` are the CAN ids the stage declares (above 0x7FF = 29-bit): an input
    /// takes in the frames of these ids, an output sends them (the gateway's allowlist
    /// for the stage). Without ids the stage exchanges no frames: the device path is
    /// sampled at the stage's release and only its timing (the gateway's tasks) counts.
    Can { bus: String, ids: Vec<u32> },
    /// `zenoh:CHANNEL`: a channel bridged to another machine over Zenoh (docs/zenoh.md),
    /// whose local reader (as input: a subscribed channel) or writer (as output: a
    /// published one) the stage's partition is. The hop crosses the bridge's task and
    /// the network: `solve` adds the task's period and WCRT and the bridge's declared
    /// `latency` and `loss` to the pipeline's bounds.
    Zenoh { channel: String },
    /// `partition/task/endpoint`: an endpoint of another task.
    Task {
        partition: String,
        task: String,
        endpoint: String,
    },
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Can { bus, ids } if ids.is_empty() => write!(f, "can:{bus}"),
            Endpoint::Can { bus, ids } => {
                let ids: Vec<String> = ids.iter().map(|id| format!("{id:#x}")).collect();
                write!(f, "can:{bus}:{}", ids.join(","))
            }
            Endpoint::Zenoh { channel } => write!(f, "zenoh:{channel}"),
            Endpoint::Task {
                partition,
                task,
                endpoint,
            } => write!(f, "{partition}/{task}/{endpoint}"),
        }
    }
}

/// Why a stage's `input` or `output` is not an endpoint, or one its partition may not
/// reach.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("`can:` needs a bus name, e.g. `can:rav4`")]
    NoBusName,
    #[error("`{0}` is not a CAN id: want hex (0x1A0) or decimal, at most 29 bits")]
    CanId(String),
    #[error("`zenoh:` needs a channel name, e.g. `zenoh:speed`")]
    NoChannelName,
    #[error(
        "`{0}` is not an endpoint: use `can:BUS`, `zenoh:CHANNEL` or `partition/task/endpoint`"
    )]
    Syntax(String),
    #[error("no bus `{0}` in `buses`")]
    NoBus(String),
    #[error("partition `{partition}` is neither the gateway nor a client of bus `{bus}`")]
    NotOnBus { partition: String, bus: String },
    #[error("no partition `{0}`")]
    NoPartition(String),
    #[error("no channel `{0}` with a `bridge` in `channels`")]
    NoBridge(String),
    #[error("channel `{channel}` is {direction}: a stage's {key} is a channel {want}")]
    BridgeDirection {
        channel: String,
        direction: &'static str,
        key: &'static str,
        want: &'static str,
    },
    #[error("partition `{partition}` is not the channel's local {end}: the stage would not reach `{channel}`")]
    NotOnBridge {
        partition: String,
        channel: String,
        end: &'static str,
    },
}

impl Endpoint {
    /// Parses `can:BUS`, `can:BUS:ID,ID,...`, `zenoh:CHANNEL` or `partition/task/endpoint`.
    pub fn parse(text: &str) -> Result<Endpoint, EndpointError> {
        if let Some(channel) = text.strip_prefix("zenoh:") {
            return match channel.is_empty() {
                true => Err(EndpointError::NoChannelName),
                false => Ok(Endpoint::Zenoh {
                    channel: channel.into(),
                }),
            };
        }
        if let Some(rest) = text.strip_prefix("can:") {
            let (bus, ids) = rest.split_once(':').unwrap_or((rest, ""));
            if bus.is_empty() {
                return Err(EndpointError::NoBusName);
            }
            let ids = match ids.is_empty() {
                true => Vec::new(),
                false => ids.split(',').map(can_id).collect::<Result<_, _>>()?,
            };
            return Ok(Endpoint::Can {
                bus: bus.into(),
                ids,
            });
        }
        let parts: Vec<&str> = text.split('/').collect();
        match parts[..] {
            [p, t, e] if !p.is_empty() && !t.is_empty() && !e.is_empty() => Ok(Endpoint::Task {
                partition: p.into(),
                task: t.into(),
                endpoint: e.into(),
            }),
            _ => Err(EndpointError::Syntax(text.into())),
        }
    }
}

/// A CAN id, hex (`0x1A0`) or decimal, of at most 29 bits.
fn can_id(text: &str) -> Result<u32, EndpointError> {
    let t = text.trim();
    let n = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => t.parse(),
    };
    match n {
        Ok(id) if id <= 0x1FFF_FFFF => Ok(id),
        _ => Err(EndpointError::CanId(t.into())),
    }
}

impl Pipeline {
    /// Index of the stage named `name`.
    pub fn stage_index(&self, name: &str) -> Option<usize> {
        self.stages.iter().position(|s| s.name == name)
    }

    /// Stages no other stage feeds.
    pub fn sources(&self) -> Vec<usize> {
        (0..self.stages.len())
            .filter(|&i| !self.edges.iter().any(|&(_, c)| c == i))
            .collect()
    }

    /// Stages that feed no other stage.
    pub fn sinks(&self) -> Vec<usize> {
        (0..self.stages.len())
            .filter(|&i| !self.edges.iter().any(|&(p, _)| p == i))
            .collect()
    }

    /// Stages in an order where every producer comes before its consumers (the graph
    /// is acyclic once loaded).
    pub fn topological_order(&self) -> Vec<usize> {
        topological(self.stages.len(), &self.edges).unwrap_or_default()
    }
}

/// Kahn's algorithm: an order, or the nodes left on cycles.
pub(super) fn topological(n: usize, edges: &[(usize, usize)]) -> Result<Vec<usize>, Vec<usize>> {
    let mut indegree = vec![0usize; n];
    for &(_, c) in edges {
        indegree[c] += 1;
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).rev().collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop() {
        order.push(i);
        for &(_, c) in edges.iter().filter(|&&(p, _)| p == i) {
            indegree[c] -= 1;
            if indegree[c] == 0 {
                ready.push(c);
            }
        }
    }
    match order.len() == n {
        true => Ok(order),
        false => Err((0..n).filter(|&i| indegree[i] > 0).collect()),
    }
}
