//! What connects the partitions of a run: named shared-memory channels that the
//! supervisor creates before anything starts and destroys at the end, and the environment
//! variables that tell each partition's processes their names.
//!
//! * Each channel of the description (`channels:`; DriveOS 5, shmcomm) becomes a named
//!   channel; its writer and reader partitions get `BULKHEAD_CHAN_<NAME>` naming it
//!   ([`bulkhead_chan::env_var`], [`bulkhead_chan::Channel::open_env`]).
//! * Each bus (DriveOS 6.4.1, Programs 3-5) gets, per client partition, two fifo channels
//!   of gateway messages (gateway to partition, partition to gateway); the client gets
//!   `BULKHEAD_CAN_<BUS>` naming both ([`bulkhead_can::mapper::env_var`]); the gateway's
//!   reader and writer tasks get their command lines (`bulkhead can gateway`). Only the
//!   gateway partition keeps the host network: the others run in private network
//!   namespaces ([`crate::isolation`]), so the channels are their only way to a bus.
//!
//! A channel belongs to its writer's user and its reader's group (mode 0660), so that
//! partitions running as different users can both map it.

use crate::isolation::{Confinements, PartitionEnv};
use crate::RunError;
use bulkhead_can::gateway::WIRE_SIZE;
use bulkhead_can::mapper::env_var;
use bulkhead_chan::{Channel, Spec};
use bulkhead_model::{Bus, Channel as ModelChannel, ChannelKind, System};
use std::collections::BTreeMap;
use std::path::Path;

/// The channels of a run; dropping it destroys them.
pub struct Links {
    channels: Vec<Channel>,
    /// (shm path, writer partition, reader partition) of every channel.
    owners: Vec<(String, String, String)>,
    /// Per partition: the variables naming its channels.
    pub env: PartitionEnv,
    /// Command line of each gateway task, by (partition, task).
    pub commands: BTreeMap<(String, String), String>,
}

impl Links {
    /// Creates the channels of `system` and of its buses, and the gateway commands running
    /// `exe can gateway ...`.
    pub fn create(system: &System, exe: &Path) -> Result<Links, RunError> {
        let mut out = Links {
            channels: Vec::new(),
            owners: Vec::new(),
            env: PartitionEnv::new(),
            commands: BTreeMap::new(),
        };
        for (i, c) in system.channels.iter().enumerate() {
            out.add_channel(i, c)?;
        }
        for (b, bus) in system.buses.iter().enumerate() {
            let mut reader = gateway_command(exe, bus, "reader");
            let mut writer = gateway_command(exe, bus, "writer");
            for (k, client) in bus.clients.iter().enumerate() {
                let p = &client.partition;
                let to = out.bus_channel(b, k, "to", bus, p)?;
                let from = out.bus_channel(b, k, "from", bus, p)?;
                reader.push(format!("--to={p}={to}"));
                writer.push(format!("--from={p}={from}"));
                let ids: Vec<String> = client.allow.iter().map(|id| format!("{id:#x}")).collect();
                if !ids.is_empty() {
                    writer.push(format!("--allow={p}={}", ids.join(",")));
                }
                let vars = out.env.entry(p.clone()).or_default();
                vars.push((env_var(&bus.name), format!("{to},{from}")));
            }
            let gw = bus.gateway.clone();
            out.commands
                .insert((gw.clone(), bus.reader_task()), shell_words(&reader));
            out.commands
                .insert((gw, bus.writer_task()), shell_words(&writer));
        }
        Ok(out)
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

    /// Creates the description's channel `c` as `c<pid>-<index>` (short and valid: a
    /// channel name of the description may be long or contain any character).
    fn add_channel(&mut self, index: usize, c: &ModelChannel) -> Result<(), RunError> {
        let name = format!("c{}-{index}", std::process::id());
        let spec = match c.kind {
            ChannelKind::Fifo => Spec::fifo(&name, c.message_size, c.depth),
            ChannelKind::Latest => Spec::latest(&name, c.message_size),
        };
        let what = format!("channel `{}`", c.name);
        self.create_named(&spec, &what, &c.writer, &c.readers[0])?;
        for p in [&c.writer, &c.readers[0]] {
            let vars = self.env.entry(p.clone()).or_default();
            vars.push((bulkhead_chan::env_var(&c.name), name.clone()));
        }
        Ok(())
    }

    /// Creates channel `can<pid>-<bus>-<client>-<dir>` between a bus's gateway and client.
    fn bus_channel(
        &mut self,
        bus: usize,
        k: usize,
        dir: &str,
        def: &Bus,
        client: &str,
    ) -> Result<String, RunError> {
        let name = format!("can{}-{bus}-{k}-{dir}", std::process::id());
        let spec = Spec::fifo(&name, WIRE_SIZE as u32, def.depth);
        let what = format!("bus `{}`", def.name);
        self.create_named(&spec, &what, client, client)?;
        Ok(name)
    }

    fn create_named(
        &mut self,
        spec: &Spec,
        what: &str,
        writer: &str,
        reader: &str,
    ) -> Result<(), RunError> {
        let channel = Channel::create_named(spec)
            .map_err(|e| RunError::Spawn(format!("{what}: channel {}: {e}", spec.name)))?;
        self.channels.push(channel);
        let path = format!("/dev/shm/{}{}", bulkhead_chan::PREFIX, spec.name);
        self.owners
            .push((path, writer.to_string(), reader.to_string()));
        Ok(())
    }

    /// Gives each channel to its writer's user and its reader's group, mode 0660 (the
    /// supervisor and the gateway, as root, open them all).
    pub fn give_to_partitions(&self, confinements: &Confinements) -> Result<(), RunError> {
        use std::os::unix::fs::PermissionsExt;
        for (path, writer, reader) in &self.owners {
            let uid = confinements.of(writer).identity.map(|(uid, _)| uid);
            let gid = confinements.of(reader).identity.map(|(_, gid)| gid);
            let io = |e: std::io::Error| RunError::Io(format!("{path}: {e}"));
            std::os::unix::fs::chown(path, uid, gid).map_err(io)?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(io)?;
        }
        Ok(())
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        for c in self.channels.drain(..) {
            if let Err(e) = c.destroy() {
                eprintln!("bulkhead: warning: destroying a bus channel: {e}");
            }
        }
    }
}

/// `exe can gateway --role ROLE --bus SPEC` (a SocketCAN interface or the virtual bus).
fn gateway_command(exe: &Path, bus: &Bus, role: &str) -> Vec<String> {
    let spec = match &bus.interface {
        Some(i) => format!("socketcan:{i}"),
        None => bus.name.clone(),
    };
    vec![
        exe.display().to_string(),
        "can".into(),
        "gateway".into(),
        format!("--role={role}"),
        format!("--bus={spec}"),
    ]
}

/// The words as one command line: a word with characters the shell treats specially is
/// single-quoted (the task spawner runs such lines through `/bin/sh -c`).
fn shell_words(words: &[String]) -> String {
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
