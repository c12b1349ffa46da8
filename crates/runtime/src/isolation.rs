//! Each partition's confinement for a run: the user its processes run as (`user:`, else
//! a uid of its own from `system.user_range`, see [`Identities`]), the
//! network namespace they see (`network:`, see [`System::network_of`]) and the
//! environment variables bulkhead gives them (their `PATH`, as the plan decided it,
//! and e.g. their CAN channels).
//!
//! Postcondition of [`Confinements::prepare`]: one private network namespace per
//! partition that needs one, kept alive by an fd this value owns; the namespaces go away
//! with the last process in them after this value is dropped. Each SocketCAN interface of
//! a bus is moved into a namespace of its own that only that bus's gateway tasks enter
//! ([`Confinements::of_task`]); dropping this value moves the interfaces back.

use crate::confine::{resolve_user, Confinement};
use crate::{RunError, Unrunnable};
use bulkhead_model::{Network, Partition, PartitionKind, Service, System, Task};
use bulkhead_os::lock::Kind;
use bulkhead_os::netdev::private_netns;
use bulkhead_os::netdev::IsolatedInterface;
use bulkhead_plan::Programs;
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

/// Environment variables per partition name.
pub type PartitionEnv = BTreeMap<String, Vec<(String, String)>>;

/// The confinement of every partition of a run.
pub struct Confinements {
    by_partition: BTreeMap<String, Confinement>,
    _netns: Vec<OwnedFd>,
    _identities: Identities,
    /// The SocketCAN interface of each bus that has one, by bus name.
    interfaces: BTreeMap<String, IsolatedInterface>,
}

impl Confinements {
    /// Resolves users and creates the private network namespaces. A user that does not
    /// exist is an [`RunError::Invalid`] naming the partition.
    pub fn prepare(
        system: &System,
        env: &PartitionEnv,
        programs: &Programs,
    ) -> Result<Confinements, RunError> {
        let mut netns = Vec::new();
        let mut by_partition = BTreeMap::new();
        let mut identities = Identities::new(system.user_range());
        for (i, p) in system.partitions.iter().enumerate() {
            let gateway = system.buses.iter().any(|b| b.gateway == p.name);
            let invalid = |source| {
                RunError::Invalid(Unrunnable::Identity {
                    partition: p.name.clone(),
                    source,
                })
            };
            let remove_ipc = p.sandbox.remove_ipc;
            let identity = match p.user.as_deref() {
                Some(user) => Some(resolve_user(user).map_err(IdentityError::from)),
                // bulkhead's own gateway service reaches the bus as the supervisor does.
                None if gateway => None,
                None => identities.allocate(remove_ipc).transpose(),
            }
            .transpose()
            .map_err(invalid)?;
            // `user: root` of a be partition: root of a user namespace, mapped to a uid
            // of its own (none when this supervisor may not change uids).
            let root = identity.is_some_and(|(uid, _)| uid == 0);
            let mapped = match p.kind == PartitionKind::Be && p.sandbox.private_users && root {
                true => identities.allocate(remove_ipc).map_err(invalid)?,
                false => None,
            };
            let identity = mapped.or(identity);
            let ns = match system.network_of(p) {
                Network::Host => None,
                Network::Private => {
                    let fd = private_netns().map_err(|source| RunError::Netns {
                        partition: p.name.clone(),
                        source,
                    })?;
                    let raw = fd.as_raw_fd();
                    netns.push(fd);
                    Some(raw)
                }
            };
            // Its PATH first: bulkhead's variables for it may not set one.
            let path = programs
                .env_path(i)
                .map(|v| ("PATH".to_string(), v.to_string()));
            let own = env.get(&p.name).into_iter().flatten().cloned();
            let c = Confinement {
                identity,
                netns: ns,
                env: path.into_iter().chain(own).collect(),
                pass_fds: Vec::new(),
                sandbox: p.sandbox,
                bulkhead_own: false,
                user_namespace: mapped.is_some(),
            };
            by_partition.insert(p.name.clone(), c);
        }
        Ok(Confinements {
            by_partition,
            _netns: netns,
            _identities: identities,
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
    /// gateway tasks of a bus, bulkhead's own, keep the supervisor's OOM protection, and
    /// with a SocketCAN interface run in the interface's namespace.
    pub fn of_task(&self, p: &Partition, task: &Task) -> Confinement {
        let mut c = self.of(&p.name);
        let bus = match &task.service {
            Some(Service::CanReader { bus } | Service::CanWriter { bus }) => bus,
            Some(Service::Bridge { .. } | Service::ModeAgent) | None => return c,
        };
        c.bulkhead_own = true;
        if let Some(iface) = self.interfaces.get(bus) {
            c.netns = Some(iface.netns());
        }
        c
    }
}

/// The uids (gid = uid) bulkhead gives partitions without `user:` (as systemd's
/// DynamicUser does): each uid of the range that names no account and no group is
/// taken by holding an exclusive lock on byte `uid` of `/run/bulkhead/uids.lock` for the
/// run (an open-file-description lock, `F_OFD_SETLK`), so two bulkheads running at once
/// never give the same uid to two partitions; a supervisor that dies releases its locks
/// with its descriptor. One descriptor holds every uid of a run: a lock file per uid
/// cost a descriptor per partition, and 10,000 partitions then passed the descriptor
/// limit. Only a supervisor that may change its uid (root) allocates; another runs
/// every partition as itself.
///
/// The lock file has mode 0600: a partition's process cannot open it, so it cannot
/// hold locks on it that keep other runs from taking uids (and `/run/bulkhead` is
/// hidden from be partitions besides). A uid allocated with `remove_ipc` has what it
/// owns in the host's shared places removed ([`bulkhead_os::ipc`]) when it is taken
/// (an earlier run may have been killed) and when it is released (on drop, before the
/// lock).
struct Identities {
    next: u32,
    last: u32,
    enabled: bool,
    path: &'static str,
    locks: Option<std::fs::File>,
    /// The uids to clean when released.
    cleaned: Vec<u32>,
}

/// Where the uid locks live.
const LOCK_FILE: &str = "/run/bulkhead/uids.lock";

/// Why a partition has no identity: its `user:` names none, or no uid of
/// `system.user_range` can be taken.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(transparent)]
    User(#[from] bulkhead_model::users::UserError),
    /// The uid lock file cannot be opened or locked.
    #[error("{path}: {source}")]
    Lock {
        path: &'static str,
        source: std::io::Error,
    },
    #[error(
        "no free uid left in system.user_range (up to {last}): other partitions and running \
         bulkheads hold them; widen the range"
    )]
    Exhausted { last: u32 },
}

impl Identities {
    fn new((first, last): (u32, u32)) -> Identities {
        let enabled = bulkhead_os::proc::euid() == 0;
        Identities {
            next: first,
            last,
            enabled,
            path: LOCK_FILE,
            locks: None,
            cleaned: Vec::new(),
        }
    }

    /// The next free uid as (uid, gid), what it owns removed first with `remove_ipc`;
    /// `Ok(None)` when not enabled.
    fn allocate(&mut self, remove_ipc: bool) -> Result<Option<(u32, u32)>, IdentityError> {
        if !self.enabled {
            return Ok(None);
        }
        self.open_lock_file()?;
        let (file, path) = (self.locks.as_ref().expect("opened"), self.path);
        while self.next <= self.last {
            let uid = self.next;
            self.next += 1;
            if bulkhead_model::users::is_taken(uid) {
                continue;
            }
            if lock_byte(file, uid).map_err(|source| IdentityError::Lock { path, source })? {
                if remove_ipc {
                    remove_leftovers(&BTreeSet::from([uid]));
                    self.cleaned.push(uid);
                }
                return Ok(Some((uid, uid)));
            }
        }
        Err(IdentityError::Exhausted { last: self.last })
    }

    /// Opens the lock file on first use (its directory created).
    fn open_lock_file(&mut self) -> Result<(), IdentityError> {
        if self.locks.is_none() {
            let path = self.path;
            let io = |source| IdentityError::Lock { path, source };
            let dir = std::path::Path::new(self.path)
                .parent()
                .expect("a directory");
            std::fs::create_dir_all(dir).map_err(io)?;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(self.path)
                .map_err(io)?;
            // A file an earlier version made readable to all.
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(io)?;
            self.locks = Some(file);
        }
        Ok(())
    }
}

impl Drop for Identities {
    fn drop(&mut self) {
        // One pass for all of them: one per uid was seconds for thousands of partitions.
        if !self.cleaned.is_empty() {
            remove_leftovers(&self.cleaned.iter().copied().collect());
        }
    }
}

/// Removes what `uids` left in the host's shared places, naming what it could not.
fn remove_leftovers(uids: &BTreeSet<u32>) {
    for line in bulkhead_os::ipc::remove_owned_by(uids) {
        eprintln!("bulkhead: warning: removing what a partition left: {line}");
    }
}

/// Takes an exclusive open-file-description lock on byte `at` of `file` without waiting;
/// whether it got it (false: another open description holds it).
fn lock_byte(file: &std::fs::File, at: u32) -> std::io::Result<bool> {
    bulkhead_os::lock::try_lock_byte(file.as_fd(), u64::from(at), Kind::Write)
}

/// Moves every bus's SocketCAN interface into a namespace of its own (DriveOS 3.3.2: the
/// gateway alone holds the bus). A missing interface is an error naming the bus.
fn isolate_interfaces(system: &System) -> Result<BTreeMap<String, IsolatedInterface>, RunError> {
    let mut taken = BTreeMap::new();
    for bus in &system.buses {
        if let Some(iface) = &bus.interface {
            let held = IsolatedInterface::take(iface)
                .map_err(|e| RunError::reserve(format!("bus `{}`", bus.name), e))?;
            taken.insert(bus.name.clone(), held);
        }
    }
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two runs at once (two open descriptions of the lock file) never get the same uid,
    /// a run holds all of its uids on one descriptor, and a run's uids are free again
    /// once it ended (its descriptor closed).
    #[test]
    fn two_runs_at_once_get_different_uids_on_one_descriptor_each() {
        let path = std::env::temp_dir().join(format!("bulkhead-uids-{}.lock", std::process::id()));
        let path: &'static str = Box::leak(path.to_string_lossy().into_owned().into_boxed_str());
        let identities = || Identities {
            next: 4_000_000,
            last: 4_000_999,
            enabled: true,
            path,
            locks: None,
            cleaned: Vec::new(),
        };
        let (mut a, mut b) = (identities(), identities());
        let take = |ids: &mut Identities, n: usize| -> Vec<u32> {
            (0..n)
                .map(|_| ids.allocate(false).unwrap().unwrap().0)
                .collect()
        };
        let first = take(&mut a, 3);
        let second = take(&mut b, 3);
        assert_eq!(first, [4_000_000, 4_000_001, 4_000_002]);
        assert_eq!(second, [4_000_003, 4_000_004, 4_000_005]);
        drop(a);
        // An OFD lock ends when the last descriptor of its open file description closes:
        // a child another test of this binary forks meanwhile holds a copy until its
        // exec, so a's uids are free once that is gone too (at most a moment).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let freed = loop {
            let got = take(&mut identities(), 1);
            if got == [4_000_000] || std::time::Instant::now() > deadline {
                break got;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(freed, [4_000_000], "a's uids are free once it ended");
        std::fs::remove_file(path).unwrap();
    }

    /// A range with no uid left, and a lock file that cannot be made, are errors that
    /// say so (the latter keeping the system's error as its source).
    #[test]
    fn no_uid_left_and_no_lock_file_are_typed_errors() {
        let path =
            std::env::temp_dir().join(format!("bulkhead-uids-none-{}.lock", std::process::id()));
        let path: &'static str = Box::leak(path.to_string_lossy().into_owned().into_boxed_str());
        let mut none_left = Identities {
            next: 5,
            last: 4,
            enabled: true,
            path,
            locks: None,
            cleaned: Vec::new(),
        };
        let e = none_left.allocate(false).unwrap_err();
        assert!(matches!(e, IdentityError::Exhausted { last: 4 }), "{e:?}");
        assert!(e
            .to_string()
            .starts_with("no free uid left in system.user_range (up to 4)"));
        std::fs::remove_file(path).unwrap();
        let mut no_file = Identities {
            next: 5,
            last: 4,
            enabled: true,
            path: "/proc/bulkhead-no-such-dir/uids.lock",
            locks: None,
            cleaned: Vec::new(),
        };
        let e = no_file.allocate(false).unwrap_err();
        assert!(matches!(e, IdentityError::Lock { .. }), "{e:?}");
        assert!(std::error::Error::source(&e).is_some());
        assert!(
            e.to_string()
                .starts_with("/proc/bulkhead-no-such-dir/uids.lock: "),
            "{e}"
        );
    }
}
