//! The file as written: serde structures mirroring both the native form and every
//! DEmOS form (canonical and simplified, DEmOS thesis Appendix 2). Durations, sizes
//! and CPU lists stay text here; [`crate::normalize`] interprets them.
//!
//! Every struct denies unknown keys.

use crate::types::{ChannelKind, Network, PartitionKind, Resume, Scheduler};
use serde::de::{
    self, value::MapAccessDeserializer, value::SeqAccessDeserializer, Deserializer, Visitor,
};
use serde::Deserialize;
use std::fmt;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawFile {
    pub system: Option<RawSystem>,
    pub set_cwd: Option<bool>,
    pub demos_cpu: Option<String>,
    pub partitions: Option<Vec<PartitionEntry>>,
    pub windows: Option<Vec<RawWindow>>,
    pub channels: Option<Vec<RawChannel>>,
    pub buses: Option<Vec<RawBus>>,
    pub modes: Option<crate::modes::RawModes>,
    pub power: Option<crate::power::RawPower>,
    pub pipelines: Option<Vec<crate::pipes::RawPipeline>>,
    pub stop_start: Option<crate::stop_start::RawStopStart>,
    pub platform: Option<crate::platform::RawPlatform>,
}

/// Top-level sections reserved for later capabilities; using one is an error, never ignored.
pub const RESERVED_SECTIONS: [&str; 0] = [];

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSystem {
    pub cpus: Option<String>,
    pub user_range: Option<String>,
    pub path: Option<String>,
}

/// A partition where one is defined or referenced: a name (a reference, only inside
/// windows), a list of processes (an anonymous partition), or a mapping.
#[derive(Debug)]
pub enum PartitionEntry {
    Name(String),
    Processes(Vec<ProcessSpec>),
    Def(Box<RawPartition>),
}

/// A partition mapping. `cmd`/`budget`/`jitter`/`init` define a single-process
/// partition inline (a DEmOS simplified form).
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawPartition {
    pub name: Option<String>,
    pub kind: Option<PartitionKind>,
    pub cpus: Option<String>,
    pub exclusive: Option<bool>,
    pub cpu: Option<String>,
    pub nonpreemptible: Option<String>,
    pub scheduler: Option<Scheduler>,
    pub reclaim: Option<bool>,
    pub memory: Option<String>,
    pub pids: Option<u32>,
    pub user: Option<String>,
    pub shared_user: Option<bool>,
    pub monitor: Option<bool>,
    pub network: Option<Network>,
    pub listen: Option<String>,
    pub interface: Option<crate::modes::RawInterface>,
    /// The `server` of every task of the partition that names none.
    pub server: Option<String>,
    pub sandbox: Option<RawSandbox>,
    pub path: Option<String>,
    pub tasks: Option<Vec<RawTask>>,
    #[serde(default, deserialize_with = "processes")]
    pub processes: Option<Vec<ProcessSpec>>,
    pub cmd: Option<String>,
    pub budget: Option<String>,
    pub jitter: Option<String>,
    pub init: Option<bool>,
}

/// `sandbox:` of a partition: the parts to relax (an omitted key keeps its part).
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSandbox {
    pub clean_env: Option<bool>,
    pub no_new_privs: Option<bool>,
    pub no_capabilities: Option<bool>,
    pub seccomp: Option<bool>,
    pub private_tmp: Option<bool>,
    pub pid_namespace: Option<bool>,
    pub private_users: Option<bool>,
    pub protect_system: Option<bool>,
    pub protect_kernel: Option<bool>,
    pub protect_cgroups: Option<bool>,
    pub hide_runtime_dir: Option<bool>,
    pub private_ipc: Option<bool>,
    pub remove_ipc: Option<bool>,
}

/// A process: a command string, or a mapping.
#[derive(Debug)]
pub enum ProcessSpec {
    Cmd(String),
    Def(RawProcess),
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawProcess {
    pub cmd: Option<String>,
    pub budget: Option<String>,
    pub jitter: Option<String>,
    pub init: Option<bool>,
    /// DEmOS: the CPU frequency in MHz this process asks for (`per_process` power policy).
    pub frequency: Option<f64>,
    /// `no`, `on-failure` or `always` (systemd's `Restart=`).
    pub restart: Option<String>,
    /// systemd's `RestartSec=`.
    pub restart_delay: Option<String>,
    /// systemd's `StartLimitBurst=`.
    pub start_limit_burst: Option<u32>,
    /// systemd's `StartLimitIntervalSec=`.
    pub start_limit_interval: Option<String>,
    pub required: Option<bool>,
    /// Supervisions and their actions (`crate::health`).
    pub health: Option<Box<crate::health::RawHealth>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawTask {
    pub name: String,
    /// Optional: `check`, `analyze` and `sim` need no program; `run` requires one.
    pub cmd: Option<String>,
    pub budget: Option<String>,
    pub period: Option<String>,
    /// An I/O task: the task of the same partition it serves ...
    pub serves: Option<String>,
    /// ... and its I/O utilization U_io; budget = U_io x T, period = T of that task.
    pub io_utilization: Option<f64>,
    pub deadline: Option<String>,
    pub priority: Option<u32>,
    pub release_jitter: Option<String>,
    /// Release offset: released at `epoch + offset + k * period` (less than the period).
    pub offset: Option<String>,
    pub blocking: Option<String>,
    pub resume: Option<Resume>,
    /// The frequency in MHz the budget (WCET) was measured at.
    pub wcet_frequency: Option<f64>,
    /// The fraction of the budget that does not scale with frequency, in [0, 1].
    pub memory_bound: Option<f64>,
    /// The reservation `sim` models: none, sporadic, deferrable, cbs or io:PERMILLE.
    pub server: Option<String>,
    /// Supervisions and their actions (`crate::health`).
    pub health: Option<Box<crate::health::RawHealth>>,
}

/// A window: canonical (`slices`) or simplified (one slice given inline).
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawWindow {
    pub length: String,
    pub slices: Option<Vec<RawSlice>>,
    pub cpu: Option<String>,
    pub sc_partition: Option<PartitionEntry>,
    pub be_partition: Option<PartitionEntry>,
    #[serde(default, deserialize_with = "processes")]
    pub sc_processes: Option<Vec<ProcessSpec>>,
    #[serde(default, deserialize_with = "processes")]
    pub be_processes: Option<Vec<ProcessSpec>>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSlice {
    pub cpu: Option<String>,
    /// DEmOS: the CPU frequency in MHz this slice asks for (`per_slice` power policy).
    pub frequency: Option<f64>,
    pub sc_partition: Option<PartitionEntry>,
    pub be_partition: Option<PartitionEntry>,
    #[serde(default, deserialize_with = "processes")]
    pub sc_processes: Option<Vec<ProcessSpec>>,
    #[serde(default, deserialize_with = "processes")]
    pub be_processes: Option<Vec<ProcessSpec>>,
}

impl RawWindow {
    /// True if the window defines a slice inline (any slice key at window level).
    pub fn has_inline_slice(&self) -> bool {
        self.cpu.is_some()
            || self.sc_partition.is_some()
            || self.be_partition.is_some()
            || self.sc_processes.is_some()
            || self.be_processes.is_some()
    }

    /// Moves the inline slice keys out into a slice.
    pub fn take_inline_slice(&mut self) -> RawSlice {
        RawSlice {
            cpu: self.cpu.take(),
            frequency: None,
            sc_partition: self.sc_partition.take(),
            be_partition: self.be_partition.take(),
            sc_processes: self.sc_processes.take(),
            be_processes: self.be_processes.take(),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawChannel {
    pub name: String,
    pub kind: ChannelKind,
    pub message_size: u32,
    pub depth: Option<u32>,
    pub overflow: Option<crate::types::Overflow>,
    /// `reads: N` or `reads: all` (fifo).
    pub reads: Option<String>,
    pub writer: String,
    /// Absent on a published channel (its reader is the bridge).
    pub readers: Option<Vec<String>>,
    pub bridge: Option<RawBridge>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawBridge {
    pub partition: Option<String>,
    pub period: Option<String>,
    pub budget: Option<String>,
    pub latency: Option<String>,
    pub loss: Option<String>,
    pub zenoh: RawZenoh,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawZenoh {
    pub key: String,
    pub listen: Option<Vec<String>>,
    pub connect: Option<Vec<String>>,
    pub mode: Option<crate::types::ZenohMode>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawBus {
    pub name: String,
    pub interface: Option<String>,
    pub allow_non_can: Option<bool>,
    pub dbc: Option<String>,
    pub gateway: String,
    pub period: String,
    pub reader_budget: String,
    pub writer_budget: String,
    pub depth: Option<u32>,
    pub clients: Option<Vec<RawBusClient>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawBusClient {
    pub partition: String,
    pub allow: Option<Vec<u32>>,
    pub rate: Option<u32>,
    pub queue: Option<u32>,
}

impl<'de> Deserialize<'de> for PartitionEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(PartitionEntryVisitor)
    }
}

struct PartitionEntryVisitor;

impl<'de> Visitor<'de> for PartitionEntryVisitor {
    type Value = PartitionEntry;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a partition name, a list of processes or a partition mapping")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(PartitionEntry::Name(v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(PartitionEntry::Name(v.to_string()))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Vec::deserialize(SeqAccessDeserializer::new(seq)).map(PartitionEntry::Processes)
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        RawPartition::deserialize(MapAccessDeserializer::new(map))
            .map(|p| PartitionEntry::Def(Box::new(p)))
    }
}

impl<'de> Deserialize<'de> for ProcessSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ProcessSpecVisitor)
    }
}

struct ProcessSpecVisitor;

impl<'de> Visitor<'de> for ProcessSpecVisitor {
    type Value = ProcessSpec;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a command string or a process mapping {cmd, budget, jitter, init}")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(ProcessSpec::Cmd(v.to_string()))
    }

    scalar_commands!(|text| ProcessSpec::Cmd(text));

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        RawProcess::deserialize(MapAccessDeserializer::new(map)).map(ProcessSpec::Def)
    }
}

/// A scalar of another type where a command is expected (`sc_partition: [true]`) is the
/// command its text names, as DEmOS reads every scalar there as a string (`as<string>()`).
macro_rules! scalar_commands {
    (|$text:ident| $value:expr) => {
        scalar_commands!(@each |$text| $value; visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64);
    };
    (@each |$text:ident| $value:expr; $($visit:ident: $ty:ty),*) => {
        $(
            fn $visit<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
                let $text = v.to_string();
                Ok($value)
            }
        )*
    };
}
use scalar_commands;

/// A list of processes as DEmOS's `normalize_processes` reads it: a list, or one
/// process alone (a command string or a process mapping).
fn processes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<ProcessSpec>>, D::Error> {
    d.deserialize_any(ProcessesVisitor)
}

struct ProcessesVisitor;

impl<'de> Visitor<'de> for ProcessesVisitor {
    type Value = Option<Vec<ProcessSpec>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of processes, a command string or a process mapping")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(vec![ProcessSpec::Cmd(v.to_string())]))
    }

    scalar_commands!(|text| Some(vec![ProcessSpec::Cmd(text)]));

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let one = RawProcess::deserialize(MapAccessDeserializer::new(map))?;
        Ok(Some(vec![ProcessSpec::Def(one)]))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Vec::deserialize(SeqAccessDeserializer::new(seq)).map(Some)
    }
}
