//! What connects the partitions of a run: split shared-memory channels (sealed memfds)
//! that the supervisor creates before anything starts and holds until the end, the
//! descriptors each partition's processes inherit, and the environment variables that
//! tell them which descriptors are which channel.
//!
//! * Each channel of the description (`channels:`; DriveOS 5, shmcomm) becomes a split
//!   channel ([`Channel::create_split`]); its writer and reader partitions get their ends
//!   with least rights ([`Channel::handover`]: the reader the message file read-only) and
//!   `BULKHEAD_CHAN_<NAME>=fd:<data>:<region>:<writer lock>:<reader lock>` ([`bulkhead_chan::env_var`],
//!   [`bulkhead_chan::Channel::open_env`]).
//! * Each bus (DriveOS 6.4.1, Programs 3-5) gets, per client partition, two fifo channels
//!   of gateway messages (gateway to partition, partition to gateway); the client gets
//!   `BULKHEAD_CAN_<BUS>` with both ([`bulkhead_gateway_protocol::env_var`]); the gateway's
//!   reader and writer tasks get their command lines (`bulkhead can gateway`,
//!   [`GatewayArgs`]: the writer each client's allowlist, its `rate` and `queue` where the
//!   description sets them, and the bus's DBC, whose cycle times give the others). A
//!   pipeline stage with a `can:BUS:IDS` endpoint gets a link of its own: one fifo
//!   channel from the gateway's reader (an input) or to its writer (an output,
//!   allowlisted to the stage's ids), named in [`stage_var`]`(BUS, PIPELINE, STAGE)`. Only the
//!   gateway partition keeps the host network: the others run in private network
//!   namespaces ([`crate::isolation`]), so the channels are their only way to a bus.
//! * Each best-effort partition with `listen` gets a TCP socket the supervisor binds and
//!   puts in the listening state in its own (the host's) network namespace:
//!   `BULKHEAD_LISTEN=fd:N` ([`LISTEN_VAR`]). A socket keeps the namespace it was made
//!   in, so the partition accepts connections from the host's network while its own
//!   namespace stays private: on that descriptor it can accept, and nothing else (a
//!   listening socket neither connects nor sends; other sockets it opens are in its
//!   private namespace).
//!
//! Nothing is named in `/dev/shm`: a channel exists only as descriptors, and goes away
//! with the last process holding one.

use crate::isolation::PartitionEnv;
use crate::RunError;
use bulkhead_chan::{Channel, End, Spec};
use bulkhead_gateway_protocol::{env_var, CanId, GatewayArgs, Role, SOCKETCAN_PREFIX, WIRE_SIZE};
use bulkhead_model::{
    Bridge, BridgeDirection, Bus, Channel as ModelChannel, ChannelKind, Endpoint, System, Trigger,
};
use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Arc;

/// The variable naming a partition's listening socket ([`Links::listen`]).
pub const LISTEN_VAR: &str = "BULKHEAD_LISTEN";

/// The channels of a run; dropping it closes the supervisor's descriptors of them.
pub struct Links {
    channels: Vec<Arc<Channel>>,
    /// The description's channels, in its order (shared with the control socket, which
    /// reports their counters).
    described: Vec<Arc<Channel>>,
    /// The descriptors handed to partitions, held until their processes have exec'd.
    handed: Vec<OwnedFd>,
    /// Which end of which of `channels` each partition was handed (see [`Links::own_ends`]).
    ends: Vec<(String, usize, End)>,
    /// Per partition: the variables naming its channels.
    pub env: PartitionEnv,
    /// Per partition: the descriptors its processes inherit.
    pub fds: BTreeMap<String, Vec<RawFd>>,
    /// Command line of each gateway task, by (partition, task).
    pub commands: BTreeMap<(String, String), String>,
}

impl Links {
    /// Creates the channels of `system` and of its buses, and the gateway commands running
    /// `exe can gateway ...`.
    pub fn create(system: &System, exe: &Path) -> Result<Links, RunError> {
        let mut out = Links {
            channels: Vec::new(),
            described: Vec::new(),
            handed: Vec::new(),
            ends: Vec::new(),
            env: PartitionEnv::new(),
            fds: BTreeMap::new(),
            commands: BTreeMap::new(),
        };
        for (i, c) in system.channels.iter().enumerate() {
            out.add_channel(i, c)?;
            if let Some(b) = &c.bridge {
                let task = ModelChannel::bridge_task(&c.name);
                let command = bridge_command(exe, c, b);
                out.commands.insert((b.partition.clone(), task), command);
            }
        }
        for (b, bus) in system.buses.iter().enumerate() {
            let mut reader = GatewayArgs::new(Role::Reader, &bus_spec(bus));
            let mut writer = GatewayArgs::new(Role::Writer, &bus_spec(bus));
            for (k, client) in bus.clients.iter().enumerate() {
                let p = &client.partition;
                let gw = &bus.gateway;
                let (to_gw, to) = out.bus_channel(b, k, "to", bus, gw, p)?;
                let (from_gw, from) = out.bus_channel(b, k, "from", bus, p, gw)?;
                reader.to.push((p.clone(), to_gw));
                writer.from.push((p.clone(), from_gw));
                // The model checked the ids (at most 29 bits).
                let ids: Vec<CanId> = client
                    .allow
                    .iter()
                    .filter_map(|&id| CanId::from_raw(id))
                    .collect();
                if !ids.is_empty() {
                    writer.allow.push((p.clone(), ids));
                }
                writer.rate.extend(client.rate.map(|n| (p.clone(), n)));
                writer.queue.extend(client.queue.map(|n| (p.clone(), n)));
                let vars = out.env.entry(p.clone()).or_default();
                vars.push((env_var(&bus.name), format!("{to},{from}")));
            }
            for (k, link) in stage_links(system, bus).into_iter().enumerate() {
                let k = bus.clients.len() + k;
                out.stage_link(b, k, bus, link, &mut reader, &mut writer)?;
            }
            triggers(system, bus, &mut reader)?;
            // The default limits of the clients come from the messages' cycle times.
            writer.dbc = bus.dbc.clone();
            let gw = bus.gateway.clone();
            out.commands.insert(
                (gw.clone(), bus.reader_task()),
                gateway_command(exe, &reader),
            );
            out.commands
                .insert((gw, bus.writer_task()), gateway_command(exe, &writer));
        }
        Ok(out)
    }

    /// Binds each `listen` address of `system` here, in the supervisor's network
    /// namespace, and hands the listening socket to its partition as [`LISTEN_VAR`].
    /// Fails, naming the partition and the key, when an address cannot be bound.
    pub fn listen(&mut self, system: &System) -> Result<(), RunError> {
        for (i, p) in system.partitions.iter().enumerate() {
            let Some(addr) = p.listen else { continue };
            let listener = std::net::TcpListener::bind(addr).map_err(|e| RunError::Io {
                what: format!(
                    "partition `{}` (partitions[{i}].listen `{addr}`): cannot listen",
                    p.name
                ),
                source: e,
            })?;
            let handed = self.hand(&p.name, LISTEN_VAR, OwnedFd::from(listener));
            handed.map_err(|e| {
                RunError::io(format!("partition `{}`: listening socket", p.name), e)
            })?;
        }
        Ok(())
    }

    /// `system` with the command lines of its gateway tasks filled in.
    pub fn with_commands(&self, system: &System) -> System {
        let mut system = system.clone();
        for p in &mut system.partitions {
            for t in p.tasks.iter_mut().filter(|t| t.service.is_some()) {
                if let Some(cmd) = self.commands.get(&(p.name.clone(), t.name.clone())) {
                    t.cmd = cmd.clone();
                }
            }
        }
        system
    }

    /// Hands `fd` to partition `partition`'s processes as `var=fd:N`, held until they
    /// have started; `N` is a duplicate's number, above the descriptors the launcher
    /// moves into place in the child (a channel becomes fd 3).
    pub fn hand(&mut self, partition: &str, var: &str, fd: OwnedFd) -> std::io::Result<()> {
        let fd = bulkhead_os::fd::dup_for_handing(fd.as_fd())?;
        let vars = self.env.entry(partition.to_string()).or_default();
        vars.push((var.to_string(), format!("fd:{}", fd.as_raw_fd())));
        let fds = self.fds.entry(partition.to_string()).or_default();
        fds.push(fd.as_raw_fd());
        self.handed.push(fd);
        Ok(())
    }

    /// Creates the description's channel `c` as `c<pid>-<index>` (short and valid: a
    /// channel name of the description may be long or contain any character).
    fn add_channel(&mut self, index: usize, c: &ModelChannel) -> Result<(), RunError> {
        let name = format!("c{}-{index}", std::process::id());
        let spec = match c.kind {
            ChannelKind::Fifo => {
                Spec::fifo(&name, c.message_size, c.depth).with_overflow(overflow(c.overflow))
            }
            ChannelKind::Latest => Spec::latest(&name, c.message_size),
        };
        let what = format!("channel `{}`", c.name);
        let handed = self.create_split(&spec, &what, &c.writer, &c.readers[0])?;
        for (p, value) in handed {
            let vars = self.env.entry(p).or_default();
            vars.push((bulkhead_chan::env_var(&c.name), value));
        }
        let channel = self.channels.last().expect("the channel just created");
        self.described.push(channel.clone());
        Ok(())
    }

    /// The description's channels, in its order (for their counters).
    pub fn described(&self) -> Vec<Arc<Channel>> {
        self.described.clone()
    }

    /// Creates channel `can<pid>-<bus>-<client>-<dir>` from `writer` to `reader` (the
    /// gateway and a client); returns the values telling each of them their end.
    fn bus_channel(
        &mut self,
        bus: usize,
        k: usize,
        dir: &str,
        def: &Bus,
        writer: &str,
        reader: &str,
    ) -> Result<(String, String), RunError> {
        let name = format!("can{}-{bus}-{k}-{dir}", std::process::id());
        let spec = Spec::fifo(&name, WIRE_SIZE as u32, def.depth);
        let what = format!("bus `{}`", def.name);
        let handed = self.create_split(&spec, &what, writer, reader)?;
        let value = |p: &str| {
            handed
                .iter()
                .find(|(q, _)| q == p)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let (gateway, client) = match dir {
            "to" => (writer, reader),
            _ => (reader, writer),
        };
        Ok((value(gateway), value(client)))
    }

    /// Connects a pipeline stage to the gateway of bus `def`: a channel from its reader
    /// (input, forwarded the stage's ids and no others) or to its writer (output,
    /// allowed the stage's ids and no others).
    fn stage_link(
        &mut self,
        bus: usize,
        k: usize,
        def: &Bus,
        link: StageLink,
        reader: &mut GatewayArgs,
        writer: &mut GatewayArgs,
    ) -> Result<(), RunError> {
        let (gw, p) = (def.gateway.as_str(), link.partition.as_str());
        let (gateway, stage) = match link.input {
            true => self.bus_channel(bus, k, "to", def, gw, p)?,
            false => self.bus_channel(bus, k, "from", def, p, gw)?,
        };
        let ids = link
            .ids
            .iter()
            .filter_map(|&id| CanId::from_raw(id))
            .collect();
        match link.input {
            true => {
                reader.only.push((link.label.clone(), ids));
                reader.to.push((link.label, gateway));
            }
            false => {
                writer.allow.push((link.label.clone(), ids));
                writer.from.push((link.label, gateway));
            }
        }
        let vars = self.env.entry(link.partition).or_default();
        vars.push((link.var, stage));
        Ok(())
    }

    /// Gives each channel end's lock file to the user its partition runs as (`user_of`,
    /// `None` for the supervisor's own), so that no other partition's user can fake or
    /// block that end's liveness ([`Channel::own_end`]).
    pub fn own_ends(&self, user_of: impl Fn(&str) -> Option<(u32, u32)>) -> Result<(), RunError> {
        for (partition, index, end) in &self.ends {
            let Some((uid, gid)) = user_of(partition) else {
                continue;
            };
            let channel = &self.channels[*index];
            channel
                .own_end(*end, uid, gid)
                .map_err(|source| RunError::Channel {
                    what: format!("partition {partition}: channel {}", channel.meta().name),
                    source,
                })?;
        }
        Ok(())
    }

    /// Creates a split channel and hands its ends to `writer` and `reader` (both ends
    /// to a partition that is both); returns each partition's handover value.
    fn create_split(
        &mut self,
        spec: &Spec,
        what: &str,
        writer: &str,
        reader: &str,
    ) -> Result<Vec<(String, String)>, RunError> {
        let failed = |source: bulkhead_chan::OpenError| RunError::Channel {
            what: format!("{what}: channel {}", spec.name),
            source,
        };
        let channel = Channel::create_split(spec).map_err(failed)?;
        let ends = match writer == reader {
            true => vec![(writer, End::Both)],
            false => vec![(writer, End::Writer), (reader, End::Reader)],
        };
        let mut values = Vec::new();
        for (p, end) in ends {
            let handed = channel.handover(end).map_err(failed)?;
            values.push((p.to_string(), handed.value()));
            let fds = handed.into_fds();
            let raw = self.fds.entry(p.to_string()).or_default();
            raw.extend(fds.iter().map(|f| f.as_raw_fd()));
            self.handed.extend(fds);
            self.ends.push((p.to_string(), self.channels.len(), end));
        }
        self.channels.push(Arc::new(channel));
        Ok(values)
    }
}

/// A pipeline stage's end of a bus.
struct StageLink {
    partition: String,
    /// Its name at the gateway: `PARTITION/PIPELINE.STAGE`.
    label: String,
    /// The variable naming its channel in the stage's partition.
    var: String,
    /// From the gateway's reader (an `input`), else to its writer.
    input: bool,
    ids: Vec<u32>,
}

/// The stages of `system`'s pipelines with a `can:` endpoint on `bus` that declares ids
/// (one without ids exchanges no frames).
fn stage_links(system: &System, bus: &Bus) -> Vec<StageLink> {
    let mut out = Vec::new();
    for p in &system.pipelines {
        for s in &p.stages {
            for (e, input) in [(&s.input, true), (&s.output, false)] {
                let Some(Endpoint::Can { bus: b, ids }) = e else {
                    continue;
                };
                if b != &bus.name || ids.is_empty() {
                    continue;
                }
                out.push(StageLink {
                    partition: s.partition.clone(),
                    label: format!("{}/{}.{}", s.partition, p.name, s.name),
                    var: stage_var(b, &p.name, &s.name),
                    input,
                    ids: ids.clone(),
                });
            }
        }
    }
    out
}

/// The variable naming the channel between the gateway of `bus` and stage `stage` of
/// pipeline `pipeline`: `BULKHEAD_CAN_<BUS>_<PIPELINE>_<STAGE>`, the value one
/// [`Channel::open_handed`] name.
pub fn stage_var(bus: &str, pipeline: &str, stage: &str) -> String {
    env_var(&format!("{bus}.{pipeline}.{stage}"))
}

/// The bus spec of `bus`: its SocketCAN interface or the virtual bus of its name.
fn bus_spec(bus: &Bus) -> String {
    match &bus.interface {
        Some(i) => format!("{SOCKETCAN_PREFIX}{i}"),
        None => bus.name.clone(),
    }
}

/// The command line `exe can gateway ARGS`.
fn gateway_command(exe: &Path, args: &GatewayArgs) -> String {
    let words = [exe.display().to_string(), "can".into(), "gateway".into()];
    shell_words(&[&words[..], &args.to_argv()].concat())
}

/// The command line of channel `c`'s bridge `b`: `bulkhead-bridge` beside `exe`
/// (`bulkhead-bridge publish|subscribe --channel NAME --key KEY ...`, docs/zenoh.md).
fn bridge_command(exe: &Path, c: &ModelChannel, b: &Bridge) -> String {
    let direction = match b.direction {
        BridgeDirection::Publish => "publish",
        BridgeDirection::Subscribe => "subscribe",
    };
    let mut words = vec![
        exe.with_file_name(BRIDGE_PROGRAM).display().to_string(),
        direction.into(),
    ];
    let flags = [
        ("--channel", &c.name),
        ("--key", &b.zenoh.key),
        ("--mode", &b.zenoh.mode.name().to_string()),
    ];
    for (flag, value) in flags {
        words.extend([flag.to_string(), value.clone()]);
    }
    for (flag, list) in [
        ("--listen", &b.zenoh.listen),
        ("--connect", &b.zenoh.connect),
    ] {
        for e in list {
            words.extend([flag.to_string(), e.clone()]);
        }
    }
    shell_words(&words)
}

/// The program of a channel's Zenoh bridge, installed beside `bulkhead` (a crate of its
/// own, so that only it links Zenoh).
pub const BRIDGE_PROGRAM: &str = "bulkhead-bridge";

/// The words as one command line: a word with characters the shell treats specially is
/// single-quoted (the task spawner runs such lines through `/bin/sh -c`).
pub fn shell_words(words: &[String]) -> String {
    let plain = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@".contains(c))
    };
    let quoted: Vec<String> = words
        .iter()
        .map(|w| match plain(w) {
            true => w.clone(),
            false => format!("'{}'", w.replace('\'', r"'\''")),
        })
        .collect();
    quoted.join(" ")
}

/// The triggers watched on `bus`: its reader decodes the signal with the bus's DBC and
/// counts the condition in `ss.suspend_when` / `ss.resume_when` (docs/stop-start.md) and
/// `mode.switch_when.K` for the bus's K-th `modes.switch_when` ([`switch_triggers`];
/// docs/modes.md).
fn triggers(system: &System, bus: &Bus, reader: &mut GatewayArgs) -> Result<(), RunError> {
    let stop_start = system.stop_start.iter().flat_map(|ss| ss.triggers());
    let stop_start = stop_start.map(|(key, t)| (format!("stop_start.{key}"), key, t));
    let switches = switch_triggers(system, &bus.name).into_iter();
    let switches = switches.map(|(i, t)| (format!("modes.switch_when[{i}]"), "switch_when", t));
    for (path, key, t) in stop_start
        .chain(switches)
        .filter(|(_, _, t)| t.bus == bus.name)
    {
        let Some(dbc) = &bus.dbc else {
            return Err(RunError::invalid(format!(
                "{path}: bus `{}` has no `dbc` to decode signal `{}` with",
                bus.name, t.signal
            )));
        };
        reader.dbc = Some(dbc.clone());
        let trigger = bulkhead_gateway_protocol::parse_trigger(&t.spec())
            .map_err(|e| RunError::invalid(format!("{path}: {e}")))?;
        match key {
            "suspend_when" => reader.suspend_when = Some(trigger),
            "resume_when" => reader.resume_when = Some(trigger),
            _ => reader.switch_when.push(trigger),
        }
    }
    Ok(())
}

/// The `modes.switch_when` entries watched on bus `bus`, each with its index in the
/// list; the K-th of them is counted by the bus's reader in `mode.switch_when.K`.
pub fn switch_triggers<'a>(system: &'a System, bus: &str) -> Vec<(usize, &'a Trigger)> {
    let switches = system.modes.iter().flat_map(|m| m.switch_when.iter());
    (switches.enumerate())
        .filter(|(_, s)| s.when.bus == bus)
        .map(|(i, s)| (i, &s.when))
        .collect()
}

/// The description's overflow rule as the channel's header carries it: the rule a
/// full fifo follows in `run`, as in `sim`.
fn overflow(o: bulkhead_model::Overflow) -> bulkhead_chan::Overflow {
    match o {
        bulkhead_model::Overflow::Block => bulkhead_chan::Overflow::Block,
        bulkhead_model::Overflow::DropNewest => bulkhead_chan::Overflow::DropNewest,
        bulkhead_model::Overflow::DropOldest => bulkhead_chan::Overflow::DropOldest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_needing_the_shell_are_quoted() {
        let words = ["/bin/x", "--to=a b=c", "it's", "--allow=p=0x1a0,0x2b0"].map(String::from);
        assert_eq!(
            shell_words(&words),
            r"/bin/x '--to=a b=c' 'it'\''s' --allow=p=0x1a0,0x2b0"
        );
    }
}
