//! Channels bridged to other machines over Zenoh (issue 40; docs/zenoh.md): the
//! `bridge:` key of a channel, its checks, and the bridge tasks added to the bridge
//! partitions.
//!
//! ```yaml
//! channels:
//!   - {name: speed, kind: fifo, message_size: 16, depth: 64, writer: ctl,
//!      bridge: {zenoh: {key: vehicle/speed, listen: ["tcp/0.0.0.0:7447"]}}}
//!   - {name: remote, kind: fifo, message_size: 16, depth: 64, writer: zenoh, readers: [log],
//!      bridge: {partition: net, period: 5ms, budget: 500us,
//!               zenoh: {key: vehicle/speed, connect: ["tcp/10.0.0.1:7447"], mode: client}}}
//! ```
//!
//! A bridge may declare its hop across the network, `latency: 2ms` (the one-way delay)
//! and `loss: 0.5%` (the messages it may lose): `solve` adds them to the bounds of a
//! pipeline whose stage reads or writes the channel (`input`/`output: zenoh:CHANNEL`).
//!
//! A published channel (one that names a local writer) has the bridge as its reader; a
//! subscribed one (`writer: zenoh`) has it as its writer. Normalization puts the bridge's
//! partition at that end, so analysis, `sim` and `run` see a channel between two
//! partitions; [`add_tasks`] names the bridge's task there once validation has passed.

use crate::path_error::{err, Result};
use crate::raw::{RawBridge, RawZenoh};
use crate::types::{
    Bridge, BridgeDirection, Channel, Nanos, Network, PartitionKind, Service, System, Task, Zenoh,
    ZenohMode,
};
use crate::units::{parse_duration, percent_ppm};

/// The writer a subscribed channel names.
pub const ZENOH_WRITER: &str = "zenoh";
/// The partition of a bridge that names none.
pub const DEFAULT_PARTITION: &str = "bridge";
/// A bridge's reservation when the description gives none: 1 ms every 10 ms.
const DEFAULT_PERIOD: Nanos = 10_000_000;
const DEFAULT_BUDGET: Nanos = 1_000_000;

/// The `bridge:` of the channel at `path`, whose writer is `writer` as written.
pub fn normalize(
    raw: RawBridge,
    writer: &str,
    path: &str,
    bare_unit: Option<Nanos>,
) -> Result<Bridge> {
    let path = format!("{path}.bridge");
    let duration = |text: Option<String>, key: &str, default: Nanos| match text {
        None => Ok(default),
        Some(t) => match parse_duration(&t, bare_unit) {
            Ok(0) => err(format!("{path}.{key}"), "must be positive"),
            Ok(d) => Ok(d),
            Err(e) => err(format!("{path}.{key}"), e),
        },
    };
    let bridge = Bridge {
        partition: raw.partition.unwrap_or_else(|| DEFAULT_PARTITION.into()),
        direction: match writer == ZENOH_WRITER {
            true => BridgeDirection::Subscribe,
            false => BridgeDirection::Publish,
        },
        period: duration(raw.period, "period", DEFAULT_PERIOD)?,
        budget: duration(raw.budget, "budget", DEFAULT_BUDGET)?,
        latency: match raw.latency {
            None => 0,
            Some(t) => {
                parse_duration(&t, bare_unit).or_else(|e| err(format!("{path}.latency"), e))?
            }
        },
        loss_ppm: match raw.loss {
            None => 0,
            Some(t) => loss(&t).or_else(|m| err(format!("{path}.loss"), m.to_string()))?,
        },
        zenoh: zenoh(raw.zenoh, &format!("{path}.zenoh"))?,
    };
    if bridge.budget > bridge.period {
        return err(format!("{path}.budget"), "must not exceed the period");
    }
    Ok(bridge)
}

/// What is wrong with a value of a bridge's keys (`loss`, `zenoh.key`, an endpoint).
#[derive(Debug, thiserror::Error)]
enum BadValue {
    #[error("`{0}`: a loss rate is a percentage from 0% to below 100%, e.g. `0.5%`")]
    Loss(String),
    #[error("must not be empty")]
    EmptyKey,
    #[error("`{0}`: a key has no empty chunk (no leading, trailing or double `/`)")]
    EmptyChunk(String),
    #[error(
        "`{key}`: `{reserved}` is reserved by Zenoh (a bridge's key names one key, no wildcards)"
    )]
    Reserved { key: String, reserved: char },
    #[error("`{0}`: want tcp/HOST:PORT (e.g. tcp/0.0.0.0:7447, tcp/[::1]:7447)")]
    Endpoint(String),
}

/// `loss: 0.5%`: the hop's loss rate, a percentage below 100%, in millionths.
fn loss(text: &str) -> std::result::Result<u32, BadValue> {
    let ppm = text.strip_suffix('%').and_then(|n| percent_ppm(n.trim()));
    match ppm {
        Some(ppm) if ppm < 1_000_000 => Ok(ppm),
        _ => Err(BadValue::Loss(text.to_string())),
    }
}

fn zenoh(raw: RawZenoh, path: &str) -> Result<Zenoh> {
    check_key(&raw.key).or_else(|m| err(format!("{path}.key"), m.to_string()))?;
    let endpoints = |list: Option<Vec<String>>, key: &str| -> Result<Vec<String>> {
        let list = list.unwrap_or_default();
        for (i, e) in list.iter().enumerate() {
            check_endpoint(e).or_else(|m| err(format!("{path}.{key}[{i}]"), m.to_string()))?;
        }
        Ok(list)
    };
    let out = Zenoh {
        key: raw.key,
        listen: endpoints(raw.listen, "listen")?,
        connect: endpoints(raw.connect, "connect")?,
        mode: raw.mode.unwrap_or(ZenohMode::Peer),
    };
    if out.mode == ZenohMode::Client && out.connect.is_empty() {
        return err(
            format!("{path}.connect"),
            "a client connects to a router or peer: name at least one endpoint",
        );
    }
    Ok(out)
}

/// A Zenoh key without wildcards: chunks separated by `/`, none empty, none of the
/// characters Zenoh reserves (`*`, `$`, `#`, `?`).
fn check_key(key: &str) -> std::result::Result<(), BadValue> {
    if key.is_empty() {
        return Err(BadValue::EmptyKey);
    }
    if key.split('/').any(str::is_empty) {
        return Err(BadValue::EmptyChunk(key.to_string()));
    }
    match key.chars().find(|c| "*$#?".contains(*c)) {
        Some(reserved) => Err(BadValue::Reserved {
            key: key.to_string(),
            reserved,
        }),
        None => Ok(()),
    }
}

/// `tcp/HOST:PORT`: TCP is the one transport the bridge is built with.
fn check_endpoint(endpoint: &str) -> std::result::Result<(), BadValue> {
    let address = endpoint.strip_prefix("tcp/");
    match address.and_then(|a| a.rsplit_once(':')) {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(()),
        _ => Err(BadValue::Endpoint(endpoint.to_string())),
    }
}

/// The bridges' partitions exist, are rt partitions on the machine's network, and are
/// neither end of their channels here; their task names are free; and no two bridges
/// share a channel name's task.
pub fn validate(sys: &System) -> Result<()> {
    for (i, c) in sys.channels.iter().enumerate() {
        let Some(b) = &c.bridge else { continue };
        let path = format!("channels[{i}].bridge");
        let at = |key: &str| format!("{path}.{key}");
        if !c
            .name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
        {
            return err(
                format!("channels[{i}].name"),
                "a bridged channel's name uses only letters, digits, `-`, `_` and `.` (it names the bridge's task)",
            );
        }
        let Some(p) = sys.partitions.iter().find(|p| p.name == b.partition) else {
            return err(
                at("partition"),
                format!(
                    "unknown partition `{}` (a bridge runs in an rt partition of its own; `{DEFAULT_PARTITION}` unless named)",
                    b.partition
                ),
            );
        };
        if p.kind != PartitionKind::Rt {
            return err(
                at("partition"),
                format!(
                    "`{}` is not an rt partition: the bridge runs as a reserved task",
                    p.name
                ),
            );
        }
        if p.network == Some(Network::Private) {
            return err(
                at("partition"),
                format!(
                    "`{}` has a private network: the bridge must reach the other machines",
                    p.name
                ),
            );
        }
        let (local, key) = match b.direction {
            BridgeDirection::Publish => (Some(&c.writer), "writer"),
            BridgeDirection::Subscribe => (c.readers.first(), "readers[0]"),
        };
        if local == Some(&b.partition) {
            return err(
                format!("channels[{i}].{key}"),
                format!("`{}` runs the bridge: a bridge never runs in its channel's writer's or reader's partition", b.partition),
            );
        }
        let task = Channel::bridge_task(&c.name);
        if p.tasks.iter().any(|t| t.name == task) {
            return err(
                at("partition"),
                format!(
                    "task name `{task}` is taken by the bridge of channel `{}`",
                    c.name
                ),
            );
        }
    }
    Ok(())
}

/// The bridge tasks partition `partition` will run (before [`add_tasks`]).
pub fn tasks_in(sys: &System, partition: &str) -> usize {
    let bridges = sys.channels.iter().filter_map(|c| c.bridge.as_ref());
    bridges.filter(|b| b.partition == partition).count()
}

/// Adds each bridge's task to its partition and names it as the channel's end there
/// (after validation).
pub fn add_tasks(system: &mut System) {
    for c in &mut system.channels {
        let Some(b) = &c.bridge else { continue };
        let Some(p) = system.partitions.iter_mut().find(|p| p.name == b.partition) else {
            continue;
        };
        let name = Channel::bridge_task(&c.name);
        match b.direction {
            BridgeDirection::Publish => c.reader_tasks = vec![Some(name.clone())],
            BridgeDirection::Subscribe => c.writer_task = Some(name.clone()),
        }
        let service = Service::Bridge {
            channel: c.name.clone(),
        };
        p.tasks
            .push(Task::service(name, b.budget, b.period, service));
    }
}
