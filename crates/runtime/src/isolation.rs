//! Each partition's confinement for a run: the user its processes run as (`user:`), the
//! network namespace they see (`network:`, see [`System::network_of`]) and the
//! environment variables bulkhead gives them (e.g. their CAN channels).
//!
//! Postcondition of [`Confinements::prepare`]: one private network namespace per
//! partition that needs one, kept alive by an fd this value owns; the namespaces go away
//! with the last process in them after this value is dropped. Each SocketCAN interface of
//! a bus is moved into a namespace of its own that only that bus's gateway tasks enter
//! ([`Confinements::of_task`]); dropping this value moves the interfaces back.

use crate::RunError;
use bulkhead_model::{Network, Partition, Service, System, Task};
use bulkhead_reserve::confine::{private_netns, resolve_user, Confinement};
use bulkhead_reserve::netdev::IsolatedInterface;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Environment variables per partition name.
pub type PartitionEnv = BTreeMap<String, Vec<(String, String)>>;

/// The confinement of every partition of a run.
pub struct Confinements {
    by_partition: BTreeMap<String, Confinement>,
    _netns: Vec<OwnedFd>,
    /// The SocketCAN interface of each bus that has one, by bus name.
    interfaces: BTreeMap<String, IsolatedInterface>,
}

impl Confinements {
    /// Resolves users and creates the private network namespaces. A user that does not
    /// exist is an [`RunError::Invalid`] naming the partition.
    pub fn prepare(system: &System, env: &PartitionEnv) -> Result<Confinements, RunError> {
        let mut netns = Vec::new();
        let mut by_partition = BTreeMap::new();
        for p in &system.partitions {
            let identity = p
                .user
                .as_deref()
                .map(resolve_user)
                .transpose()
                .map_err(|e| RunError::Invalid(format!("partition `{}`: {e}", p.name)))?;
            let ns = match system.network_of(p) {
                Network::Host => None,
                Network::Private => {
                    let fd = private_netns().map_err(|e| {
                        RunError::Spawn(format!(
                            "partition `{}`: a private network namespace: {e} (needs CAP_SYS_ADMIN)",
                            p.name
                        ))
                    })?;
                    let raw = fd.as_raw_fd();
                    netns.push(fd);
                    Some(raw)
                }
            };
            let c = Confinement {
                identity,
                netns: ns,
                env: env.get(&p.name).cloned().unwrap_or_default(),
                pass_fds: Vec::new(),
            };
            by_partition.insert(p.name.clone(), c);
        }
        Ok(Confinements {
            by_partition,
            _netns: netns,
            interfaces: isolate_interfaces(system)?,
        })
    }

    /// Gives each partition's processes the descriptors `fds` (by partition name) to
    /// keep open across exec ([`Confinement::pass_fds`]).
    pub fn pass_fds(&mut self, fds: &BTreeMap<String, Vec<RawFd>>) {
        for (name, c) in &mut self.by_partition {
            c.pass_fds = fds.get(name).cloned().unwrap_or_default();
        }
    }

    /// The confinement of partition `name` (none if unknown).
    pub fn of(&self, name: &str) -> Confinement {
        self.by_partition.get(name).cloned().unwrap_or_default()
    }

    /// The confinement of task `task` of partition `p`: the partition's, except that the
    /// gateway tasks of a bus with a SocketCAN interface run in the interface's namespace.
    pub fn of_task(&self, p: &Partition, task: &Task) -> Confinement {
        let mut c = self.of(&p.name);
        let bus = match &task.service {
            Some(Service::CanReader { bus } | Service::CanWriter { bus }) => bus,
            Some(Service::ModeAgent) | None => return c,
        };
        if let Some(iface) = self.interfaces.get(bus) {
            c.netns = Some(iface.netns());
        }
        c
    }
}

/// Moves every bus's SocketCAN interface into a namespace of its own (DriveOS 3.3.2: the
/// gateway alone holds the bus). A missing interface is an error naming the bus.
fn isolate_interfaces(system: &System) -> Result<BTreeMap<String, IsolatedInterface>, RunError> {
    let mut taken = BTreeMap::new();
    for bus in &system.buses {
        if let Some(iface) = &bus.interface {
            let held = IsolatedInterface::take(iface)
                .map_err(|e| RunError::Spawn(format!("bus `{}`: {e}", bus.name)))?;
            taken.insert(bus.name.clone(), held);
        }
    }
    Ok(taken)
}
