//! The CAN buses of a run (DriveOS 6.4.1, Programs 3-5): for each bus and each client
//! partition, two named fifo channels of gateway messages (gateway to partition, partition
//! to gateway) that the supervisor creates before anything starts and destroys at the end;
//! the gateway's reader and writer tasks (`bulkhead can gateway`) with their command
//! lines; and each client's environment variable naming its two channels
//! ([`bulkhead_can::mapper::env_var`]).
//!
//! Only the gateway partition keeps the host network: the others run in private network
//! namespaces ([`crate::isolation`]), so the channels are their only way to a bus.

use crate::isolation::{Confinements, PartitionEnv};
use crate::RunError;
use bulkhead_can::gateway::WIRE_SIZE;
use bulkhead_can::mapper::env_var;
use bulkhead_chan::{Channel, Spec};
use bulkhead_model::{Bus, System};
use std::collections::BTreeMap;
use std::path::Path;

/// The channels of a run's buses; dropping it destroys them.
pub struct BusChannels {
    channels: Vec<Channel>,
    /// (shm path, client partition) of every channel.
    owners: Vec<(String, String)>,
    /// Per client partition: `BULKHEAD_CAN_<BUS>=<to partition>,<from partition>`.
    pub env: PartitionEnv,
    /// Command line of each gateway task, by (partition, task).
    pub commands: BTreeMap<(String, String), String>,
}

impl BusChannels {
    /// Creates the channels of every bus of `system` and the gateway commands running
    /// `exe can gateway ...`.
    pub fn create(system: &System, exe: &Path) -> Result<BusChannels, RunError> {
        let mut out = BusChannels {
            channels: Vec::new(),
            owners: Vec::new(),
            env: PartitionEnv::new(),
            commands: BTreeMap::new(),
        };
        for (b, bus) in system.buses.iter().enumerate() {
            let mut reader = gateway_command(exe, bus, "reader");
            let mut writer = gateway_command(exe, bus, "writer");
            for (k, client) in bus.clients.iter().enumerate() {
                let p = &client.partition;
                let to = out.channel(b, k, "to", bus, p)?;
                let from = out.channel(b, k, "from", bus, p)?;
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

    /// Creates channel `bulkhead-chan-can<pid>-<bus>-<client>-<dir>` (short: a partition
    /// name may be long or contain any character).
    fn channel(
        &mut self,
        bus: usize,
        k: usize,
        dir: &str,
        def: &Bus,
        client: &str,
    ) -> Result<String, RunError> {
        let name = format!("can{}-{bus}-{k}-{dir}", std::process::id());
        let spec = Spec::fifo(&name, WIRE_SIZE as u32, def.depth);
        let channel = Channel::create_named(&spec)
            .map_err(|e| RunError::Spawn(format!("bus `{}`: channel {name}: {e}", def.name)))?;
        self.channels.push(channel);
        let path = format!("/dev/shm/{}{name}", bulkhead_chan::PREFIX);
        self.owners.push((path, client.to_string()));
        Ok(name)
    }

    /// Gives each client's channels to the user its partition runs as (the gateway, as
    /// root, opens them all).
    pub fn give_to_clients(&self, confinements: &Confinements) -> Result<(), RunError> {
        for (path, partition) in &self.owners {
            if let Some((uid, gid)) = confinements.of(partition).identity {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))
                    .map_err(|e| RunError::Io(format!("chown {path}: {e}")))?;
            }
        }
        Ok(())
    }
}

impl Drop for BusChannels {
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
