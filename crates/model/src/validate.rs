//! Whole-system checks that need every partition known: names, references, CPU
//! exclusivity, channels; and warnings that do not make a description invalid.

use crate::health::{Action, Member};
use crate::normalize::{err, overlap, Normalized, PathError, Result};
use crate::types::*;
use std::collections::HashMap;

/// Partition index by name.
type Names<'a> = HashMap<&'a str, usize>;

/// Checks a normalized description; returns its warnings. Linear in the size of the
/// description (hash lookups by name), so 10000 partitions validate in milliseconds.
pub fn validate(n: &Normalized) -> Result<Vec<PathError>> {
    let names = partition_names(n)?;
    check_name_lengths(n)?;
    check_references(n, &names)?;
    check_tasks(n)?;
    check_pids(n)?;
    check_cpus(n)?;
    check_users(n)?;
    check_listen(n)?;
    crate::bridge::validate(&n.system)?;
    check_channels(&n.system, &names)?;
    check_buses(n, &names)?;
    crate::modes::validate(&n.system, &n.partition_paths)?;
    check_health(&n.system, &n.health_paths)?;
    Ok(warnings(n, &names))
}

fn partition_names(n: &Normalized) -> Result<Names<'_>> {
    let mut names = Names::new();
    for (i, (p, path)) in n
        .system
        .partitions
        .iter()
        .zip(&n.partition_paths)
        .enumerate()
    {
        if let Some(first) = names.insert(&p.name, i) {
            let other = &n.partition_paths[first];
            return err(
                path,
                format!(
                    "duplicate partition name `{}` (first defined at {other})",
                    p.name
                ),
            );
        }
    }
    Ok(names)
}

/// The longest name of a partition, task or channel, in bytes. Names become parts of
/// cgroup directory names (`p<i>-<name>`, `<name>-cpu<N>`) and memfd names
/// (`bulkhead-task-<name>`, `bulkhead-chan-<name>-writer-lock`), which Linux bounds at
/// 255 (NAME_MAX) and 249 bytes; 200 leaves room for what bulkhead adds.
pub const MAX_NAME: usize = 200;

/// Every partition, task and channel name fits [`MAX_NAME`]: `run` failed on a longer
/// one with a bare EINVAL from `memfd_create` or ENAMETOOLONG from `mkdir`.
fn check_name_lengths(n: &Normalized) -> Result<()> {
    let sys = &n.system;
    let partitions = sys
        .partitions
        .iter()
        .zip(&n.partition_paths)
        .flat_map(|(p, path)| {
            let tasks = p.tasks.iter().enumerate();
            let tasks = tasks.map(move |(i, t)| (&t.name, format!("{path}.tasks[{i}].name")));
            std::iter::once((&p.name, format!("{path}.name"))).chain(tasks)
        });
    let channels = sys
        .channels
        .iter()
        .enumerate()
        .map(|(i, c)| (&c.name, format!("channels[{i}].name")));
    match partitions
        .chain(channels)
        .find(|(name, _)| name.len() > MAX_NAME)
    {
        Some((name, path)) => err(
            path,
            format!(
                "a name of {} bytes: at most {MAX_NAME} (it becomes part of cgroup \
                 directory and memfd names, which Linux bounds at 255 bytes)",
                name.len()
            ),
        ),
        None => Ok(()),
    }
}

/// The pids a partition's programs take when they start: one per rt task (its bus
/// gateway tasks included), one per process, and two more per process of a be
/// partition in a pid namespace of its own (its monitor and init, docs/security.md).
fn pids_needed(sys: &System, p: &Partition) -> usize {
    let gateway_tasks = 2 * sys.buses.iter().filter(|b| b.gateway == p.name).count()
        + crate::bridge::tasks_in(sys, &p.name);
    let per_process = match p.kind == PartitionKind::Be && p.sandbox.pid_namespace {
        true => 3,
        false => 1,
    };
    p.tasks.len() + gateway_tasks + per_process * p.processes.len()
}

/// A `pids` limit leaves room to start the partition's programs: below it, a process
/// could not start (its monitor could not fork the init and exited 127) and `run`
/// went on with a warning.
fn check_pids(n: &Normalized) -> Result<()> {
    for (p, path) in n.system.partitions.iter().zip(&n.partition_paths) {
        let needed = pids_needed(&n.system, p);
        match p.pids {
            Some(limit) if (limit as usize) < needed => {
                let why = match p.kind == PartitionKind::Be && p.sandbox.pid_namespace {
                    true => "each process takes 3 (its program, and the monitor and init of its pid namespace)",
                    false => "one per process and rt task",
                };
                return err(
                    format!("{path}.pids"),
                    format!(
                        "{limit} pids cannot start the partition's programs, which take at \
                         least {needed}: {why}"
                    ),
                );
            }
            _ => {}
        }
    }
    Ok(())
}

/// One identity per partition: two partitions naming the same `user` have no boundary
/// between them (signals, /proc/PID/mem, each other's files), so both must say
/// `shared_user: true`. Linear: one hash lookup per partition.
fn check_users(n: &Normalized) -> Result<()> {
    let mut first: HashMap<(u32, u32), usize> = HashMap::new();
    for (i, p) in n.system.partitions.iter().enumerate() {
        let Some(user) = &p.user else { continue };
        let Ok(ids) = crate::users::resolve(user) else {
            continue;
        };
        let Some(&j) = first.get(&ids) else {
            first.insert(ids, i);
            continue;
        };
        let other = &n.system.partitions[j];
        if !(p.shared_user && other.shared_user) {
            return err(
                format!("{}.user", n.partition_paths[i]),
                format!(
                    "partition `{}` runs as the same user as partition `{}` ({}.user): they could signal and read each other; give each its own user (omit `user:` for one allocated by bulkhead) or set `shared_user: true` on both",
                    p.name, other.name, n.partition_paths[j]
                ),
            );
        }
    }
    Ok(())
}

/// No two partitions listen on one port of one address (the second bind would fail at
/// run time), counting a wildcard address (`0.0.0.0`, `[::]`) as every address of its
/// family; and no port 0, which listens on a port chosen at run time that no client can
/// know. Quadratic in the listening partitions, which are few.
fn check_listen(n: &Normalized) -> Result<()> {
    let listening: Vec<(usize, std::net::SocketAddr)> = (n.system.partitions.iter())
        .enumerate()
        .filter_map(|(i, p)| Some((i, p.listen?)))
        .collect();
    for (k, &(i, addr)) in listening.iter().enumerate() {
        let path = format!("{}.listen", n.partition_paths[i]);
        if addr.port() == 0 {
            return err(
                path,
                "port 0 would listen on a port chosen at run time: give one",
            );
        }
        let clash = |&&(_, other): &&(usize, std::net::SocketAddr)| {
            let same_family = addr.is_ipv4() == other.is_ipv4();
            let any = addr.ip().is_unspecified() || other.ip().is_unspecified();
            other.port() == addr.port() && (other.ip() == addr.ip() || (same_family && any))
        };
        if let Some(&(j, other)) = listening[..k].iter().find(clash) {
            return err(
                path,
                format!(
                    "`{addr}` clashes with `{other}` of partition `{}` ({}.listen): one port, one partition",
                    n.system.partitions[j].name, n.partition_paths[j]
                ),
            );
        }
    }
    Ok(())
}

fn check_references(n: &Normalized, names: &Names) -> Result<()> {
    for r in &n.references {
        let partition = names
            .get(r.name.as_str())
            .map(|&i| (&n.system.partitions[i], &n.partition_paths[i]));
        if let Some((p, path)) = partition {
            if let Some(i) = p.processes.iter().position(|q| q.budget == 0) {
                return err(
                    format!("{path}.processes[{i}]"),
                    format!("missing `budget` (partition `{}` runs in windows)", p.name),
                );
            }
            if let Some(i) = p.processes.iter().position(|q| q.restart.is_some()) {
                return err(
                    format!("{path}.processes[{i}].restart"),
                    format!("partition `{}` runs in windows, where a process is not restarted: `restart` applies to processes of a partition in no window", p.name),
                );
            }
        }
        match partition.map(|(p, _)| p) {
            None => return err(&r.path, format!("unknown partition `{}`", r.name)),
            Some(p) if p.kind == PartitionKind::Rt => {
                return err(
                    &r.path,
                    format!(
                        "`{}` is an rt partition: its tasks run under reservations, not in windows",
                        r.name
                    ),
                )
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn check_tasks(n: &Normalized) -> Result<()> {
    for (p, path) in n.system.partitions.iter().zip(&n.partition_paths) {
        if p.kind == PartitionKind::Rt && p.cpus.is_none() {
            return err(
                path,
                "an rt partition needs `cpus` (the CPUs it owns exclusively)",
            );
        }
        let mut seen = std::collections::HashSet::new();
        for (i, t) in p.tasks.iter().enumerate() {
            if !seen.insert(t.name.as_str()) {
                return err(
                    format!("{path}.tasks[{i}].name"),
                    format!("duplicate task name `{}` in partition `{}`", t.name, p.name),
                );
            }
        }
    }
    Ok(())
}

/// CPUs (the supervisor's `demos_cpu` too) within `system.cpus`; rt partitions own
/// theirs exclusively.
fn check_cpus(n: &Normalized) -> Result<()> {
    let sys = &n.system;
    let all_cpus = sys
        .partitions
        .iter()
        .zip(&n.partition_paths)
        .map(|(p, path)| (p.cpus.as_ref(), format!("{path}.cpus")));
    let slice_cpus = sys
        .windows
        .iter()
        .zip(&n.slice_paths)
        .flat_map(|(w, paths)| {
            w.slices
                .iter()
                .zip(paths)
                .map(|(s, path)| (Some(&s.cpus), format!("{path}.cpu")))
        });
    if let (Some(allowed), Some(set)) = (&sys.cpus, &sys.supervisor_cpus) {
        if !set.is_subset(allowed) {
            return err(
                "demos_cpu",
                format!("CPUs {set} are not all in system.cpus ({allowed})"),
            );
        }
    }
    if let Some(allowed) = &sys.cpus {
        for (cpus, path) in all_cpus.chain(slice_cpus) {
            if let Some(Cpus::Set(set)) = cpus {
                if !set.is_subset(allowed) {
                    return err(
                        path,
                        format!("CPUs {set} are not all in system.cpus ({allowed})"),
                    );
                }
            }
        }
    }
    let rt: Vec<usize> = (0..sys.partitions.len())
        .filter(|&i| sys.partitions[i].kind == PartitionKind::Rt)
        .collect();
    for (i, p) in sys.partitions.iter().enumerate() {
        let Some(cpus) = &p.cpus else { continue };
        let others: Box<dyn Iterator<Item = usize>> = if p.kind == PartitionKind::Rt {
            Box::new(0..i)
        } else {
            Box::new(rt.iter().copied().filter(|&o| o < i))
        };
        let clash = others
            .map(|o| &sys.partitions[o])
            .find(|o| o.cpus.as_ref().is_some_and(|c| overlap(c, cpus)))
            .filter(|o| !crate::modes::same_pool(o, p) && !below(o, p));
        if let Some(o) = clash {
            let path = format!("{}.cpus", n.partition_paths[i]);
            let rt = if o.kind == PartitionKind::Rt { o } else { p };
            let why = match (o.interface.is_some() && p.interface.is_some(), o.kind == p.kind) {
                (true, _) => "partitions scheduled as servers share CPUs only as a whole pool: give both the same `cpus`",
                (false, true) => "an rt partition owns its CPUs exclusively unless both have an `interface` (`exclusive: false` lets best-effort partitions share them, not rt ones)",
                (false, false) if !rt.exclusive => "a best-effort partition on the CPUs of a non-exclusive rt partition must name only CPUs of it",
                (false, false) => "an rt partition owns its CPUs exclusively (declare `exclusive: false` on it to let best-effort partitions run below its reservations)",
            };
            return err(
                path,
                format!("overlaps the CPUs of partition `{}`; {why}", o.name),
            );
        }
    }
    Ok(())
}

/// Whether one of `a` and `b` is a best-effort partition whose CPUs all belong to the
/// other, an rt partition with `exclusive: false`: it runs there below the reservations.
fn below(a: &Partition, b: &Partition) -> bool {
    let (rt, be) = match (a.kind, b.kind) {
        (PartitionKind::Rt, PartitionKind::Be) => (a, b),
        (PartitionKind::Be, PartitionKind::Rt) => (b, a),
        _ => return false,
    };
    match (&rt.cpus, &be.cpus) {
        (Some(Cpus::Set(r)), Some(Cpus::Set(e))) => !rt.exclusive && e.is_subset(r),
        _ => false,
    }
}

/// Channel names are unique, and so are the environment variables they become
/// (`a-b` and `a_b` are both `BULKHEAD_CHAN_A_B`); one pass with hash maps.
fn check_channels(sys: &System, names: &Names) -> Result<()> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut vars: HashMap<String, usize> = HashMap::new();
    for (i, c) in sys.channels.iter().enumerate() {
        let path = format!("channels[{i}]");
        if seen.insert(c.name.as_str(), i).is_some() {
            return err(
                format!("{path}.name"),
                format!("duplicate channel name `{}`", c.name),
            );
        }
        if let Some(j) = vars.insert(channel_var(&c.name), i) {
            let other = &sys.channels[j].name;
            return err(
                format!("{path}.name"),
                format!(
                    "channels `{other}` ({{at channels[{j}].name}}) and `{}` both become the \
                     variable {}: rename one",
                    c.name,
                    channel_var(&c.name)
                ),
            );
        }
        check_channel_ends(sys, c, names, &path)?;
    }
    Ok(())
}

/// `BULKHEAD_CHAN_<NAME>`, as `bulkhead_chan::env_var` makes it: uppercase, every
/// character other than A-Z and 0-9 replaced by `_`.
fn channel_var(name: &str) -> String {
    let upper: String = name
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_uppercase(),
            false => '_',
        })
        .collect();
    format!("BULKHEAD_CHAN_{upper}")
}

fn check_channel_ends(sys: &System, c: &Channel, names: &Names, path: &str) -> Result<()> {
    if !names.contains_key(c.writer.as_str()) {
        return err(
            format!("{path}.writer"),
            format!("unknown partition `{}`", c.writer),
        );
    }
    if c.readers.len() != 1 {
        return err(
            format!("{path}.readers"),
            "a channel has exactly one reader (fifo and four-slot are single-reader): declare one channel per reader",
        );
    }
    for (j, r) in c.readers.iter().enumerate() {
        if !names.contains_key(r.as_str()) {
            return err(
                format!("{path}.readers[{j}]"),
                format!("unknown partition `{r}`"),
            );
        }
    }
    let ends = std::iter::once((&c.writer, &c.writer_task, format!("{path}.writer")));
    let readers = (c.readers.iter().zip(&c.reader_tasks).enumerate())
        .map(|(j, (r, t))| (r, t, format!("{path}.readers[{j}]")));
    for (p, task, at) in ends.chain(readers) {
        let Some(task) = task else { continue };
        let partition = &sys.partitions[names[p.as_str()]];
        if !partition.tasks.iter().any(|t| &t.name == task) {
            return err(
                at,
                format!("partition `{p}` has no task `{task}` (an endpoint `partition/task` names one of its rt tasks)"),
            );
        }
    }
    Ok(())
}

/// Largest 29-bit CAN identifier.
const MAX_EXTENDED_ID: u32 = 0x1FFF_FFFF;

fn check_buses(n: &Normalized, names: &Names) -> Result<()> {
    for (i, b) in n.system.buses.iter().enumerate() {
        let path = format!("buses[{i}]");
        if n.system.buses[..i].iter().any(|o| o.name == b.name) {
            return err(
                format!("{path}.name"),
                format!("duplicate bus name `{}`", b.name),
            );
        }
        if !b
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return err(
                format!("{path}.name"),
                "a bus name uses only letters, digits, `-`, `_` and `.`",
            );
        }
        check_interface(b, &path)?;
        let gateway = match names.get(b.gateway.as_str()) {
            None => {
                return err(
                    format!("{path}.gateway"),
                    format!("unknown partition `{}`", b.gateway),
                )
            }
            Some(&g) => (&n.system.partitions[g], &n.partition_paths[g]),
        };
        check_gateway(b, gateway, &path)?;
        for (j, c) in b.clients.iter().enumerate() {
            check_client(b, c, names, &format!("{path}.clients[{j}]"))?;
            if b.clients[..j].iter().any(|o| o.partition == c.partition) {
                return err(
                    format!("{path}.clients[{j}].partition"),
                    format!(
                        "partition `{}` is already a client of this bus",
                        c.partition
                    ),
                );
            }
        }
    }
    Ok(())
}

/// `ARPHRD_CAN` of `linux/if_arp.h`: the link type of CAN interfaces (`can0`, `vcan0`).
const ARPHRD_CAN: u32 = 280;

/// A bus's interface must be a CAN interface unless the bus says `allow_non_can`:
/// `bulkhead run` takes the interface away from every other process for the run, so a
/// typo such as `eth0` would cut the machine off its network. This is the one fact of
/// the host the model reads (`/sys/class/net/IFACE/type`); an interface that is not
/// there (checking on another machine) is not judged, and `run` reports it missing.
fn check_interface(b: &Bus, path: &str) -> Result<()> {
    let key = format!("{path}.interface");
    if let Some(iface) = &b.interface {
        if !is_interface_name(iface) {
            return err(
                key,
                format!(
                    "`{}` cannot be a network interface name: 1 to 15 bytes, no `/` or `:`, no \
                     whitespace, not `.` or `..`",
                    iface.escape_debug()
                ),
            );
        }
    }
    match (&b.interface, b.allow_non_can) {
        (None, true) => err(
            format!("{path}.allow_non_can"),
            "applies to a bus with an `interface` only",
        ),
        (Some(iface), false) => match link_type(iface) {
            Some(kind) if kind != ARPHRD_CAN => err(
                key,
                format!(
                    "`{iface}` is not a CAN interface (link type {kind}{}, CAN is {ARPHRD_CAN}): \
                     `bulkhead run` would take it away from the machine for the run; name a CAN \
                     interface, or set `allow_non_can: true` on the bus",
                    link_name(kind)
                ),
            ),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// The link type of network interface `iface` of this machine, if it has one by that
/// name (a name that could not be an interface name is not looked up).
fn link_type(iface: &str) -> Option<u32> {
    if !is_interface_name(iface) {
        return None;
    }
    let text = std::fs::read_to_string(format!("/sys/class/net/{iface}/type")).ok()?;
    text.trim().parse().ok()
}

/// What Linux accepts as an interface name (`dev_valid_name`: at most IFNAMSIZ - 1 bytes).
fn is_interface_name(iface: &str) -> bool {
    !iface.is_empty()
        && iface.len() <= 15
        && iface != "."
        && iface != ".."
        && !iface.contains(['/', ':', '\0'])
        && !iface.chars().any(char::is_whitespace)
}

fn link_name(kind: u32) -> &'static str {
    match kind {
        1 => ", Ethernet",
        772 => ", loopback",
        _ => "",
    }
}

fn check_gateway(b: &Bus, (p, p_path): (&Partition, &String), path: &str) -> Result<()> {
    if p.network == Some(Network::Private) {
        return err(
            format!("{p_path}.network"),
            format!(
                "the gateway of bus `{}` must reach the bus: it cannot have a private network",
                b.name
            ),
        );
    }
    if p.kind != PartitionKind::Rt {
        return err(
            format!("{path}.gateway"),
            format!(
                "`{}` is not an rt partition: the gateway runs as reserved tasks",
                p.name
            ),
        );
    }
    for (t, budget) in [
        (b.reader_task(), b.reader_budget),
        (b.writer_task(), b.writer_budget),
    ] {
        if p.tasks.iter().any(|o| o.name == t) {
            return err(
                format!("{p_path}.tasks"),
                format!(
                    "task name `{t}` is taken by the gateway of bus `{}`",
                    b.name
                ),
            );
        }
        if budget > b.period {
            let key = if t.ends_with("reader") {
                "reader_budget"
            } else {
                "writer_budget"
            };
            return err(format!("{path}.{key}"), "exceeds the period");
        }
    }
    Ok(())
}

fn check_client(b: &Bus, c: &BusClient, names: &Names, path: &str) -> Result<()> {
    if !names.contains_key(c.partition.as_str()) {
        return err(
            format!("{path}.partition"),
            format!("unknown partition `{}`", c.partition),
        );
    }
    if c.partition == b.gateway {
        return err(
            format!("{path}.partition"),
            "the gateway's own partition holds the bus; it is not a client",
        );
    }
    if let Some(k) = c.allow.iter().position(|&id| id > MAX_EXTENDED_ID) {
        return err(
            format!("{path}.allow[{k}]"),
            format!("{:#x} is not a CAN id (at most 0x1FFFFFFF)", c.allow[k]),
        );
    }
    let limits = [
        (
            "rate",
            c.rate,
            MAX_CLIENT_RATE,
            "frames per second: a CAN bus carries fewer than 22000",
        ),
        ("queue", c.queue, MAX_CLIENT_QUEUE, "frames"),
    ];
    for (key, value, most, unit) in limits {
        let Some(n) = value else { continue };
        let key = format!("{path}.{key}");
        if c.allow.is_empty() {
            return err(
                key,
                "the partition may send no id (`allow` is empty): nothing to limit",
            );
        }
        if n == 0 || n > most {
            return err(key, format!("{n}: give 1 to {most} ({unit})"));
        }
    }
    Ok(())
}

/// The most frames per second a bus client's `rate` may give.
pub const MAX_CLIENT_RATE: u32 = 100_000;
/// The most frames a bus client's `queue` may give.
pub const MAX_CLIENT_QUEUE: u32 = 4096;

fn warnings(n: &Normalized, names: &Names) -> Vec<PathError> {
    let mut out = Vec::new();
    for (w, paths) in n.system.windows.iter().zip(&n.slice_paths) {
        for (s, path) in w.slices.iter().zip(paths) {
            let Some(&i) = s.sc_partition.as_deref().and_then(|name| names.get(name)) else {
                continue;
            };
            let p = &n.system.partitions[i];
            let worst: Nanos = p.processes.iter().map(|q| q.budget + q.jitter / 2).sum();
            if worst > w.length {
                out.push(PathError {
                    path: path.clone(),
                    message: format!(
                        "SC partition `{}` needs up to {} per window but the window is {} long: its processes cannot all complete",
                        p.name,
                        crate::units::format_duration(worst),
                        crate::units::format_duration(w.length)
                    ),
                });
            }
        }
    }
    for (i, c) in n.system.channels.iter().enumerate() {
        if let Some(reader) = rt_writer_waits_on_best_effort(&n.system, names, c) {
            out.push(PathError {
                path: format!("channels[{i}].overflow"),
                message: format!(
                    "channel `{}`: its writer in rt partition `{}` waits while the fifo is full, that is on best-effort partition `{reader}`, which may be starved or frozen for any time: use `overflow: drop_newest` or `drop_oldest` (counted), or `kind: latest`",
                    c.name, c.writer
                ),
            });
        }
    }
    for (p, path) in n.system.partitions.iter().zip(&n.partition_paths) {
        let root = matches!(p.user.as_deref(), Some("root" | "0"));
        if root && p.kind == PartitionKind::Be && !p.sandbox.private_users {
            out.push(PathError {
                path: format!("{path}.sandbox.private_users"),
                message: format!("partition `{}` runs as the host's root: without capabilities it still owns the host's files, cgroups and kernel settings that are not read-only to it", p.name),
            });
        }
        let gateway = n.system.buses.iter().any(|b| b.gateway == p.name);
        if !n.system.buses.is_empty() && !gateway && p.network == Some(Network::Host) {
            out.push(PathError {
                path: format!("{path}.network"),
                message: format!("partition `{}` shares the host network: it can reach the buses without their gateway", p.name),
            });
        }
    }
    out
}

/// The best-effort reader of `c` if `c` is a fifo whose writer, in an rt partition,
/// waits for room ([`Overflow::Block`]): the rt partition then waits on a partition that
/// nothing guarantees time to.
fn rt_writer_waits_on_best_effort<'a>(
    sys: &System,
    names: &Names,
    c: &'a Channel,
) -> Option<&'a str> {
    let kind = |p: &str| names.get(p).map(|&i| sys.partitions[i].kind);
    let blocks = c.kind == ChannelKind::Fifo && c.overflow == Overflow::Block;
    if !blocks || kind(&c.writer) != Some(PartitionKind::Rt) {
        return None;
    }
    c.readers
        .iter()
        .find(|r| kind(r) == Some(PartitionKind::Be))
        .map(String::as_str)
}

/// Checks every `health:` key against the system (`paths` parallel to
/// `system.health`): `on_miss` and `on_overrun` only on rt tasks; `restart` of a process
/// only in a partition in no window (a windowed process is not restarted); a `mode:`
/// action needs `modes:`, the mode, and a transition into it; `suspend` needs a system
/// without windows (stop-start runs there only).
fn check_health(system: &System, paths: &[String]) -> Result<()> {
    let windowed = system.windowed_partitions();
    for (s, path) in system.health.iter().zip(paths) {
        if let Member::Process(_) = s.member {
            for (key, given) in [
                ("on_miss", s.health.on_miss.is_some()),
                ("on_overrun", s.health.on_overrun.is_some()),
            ] {
                if given {
                    return err(
                        format!("{path}.{key}"),
                        "applies to rt tasks (a best-effort process has no deadline or budget to supervise)",
                    );
                }
            }
        }
        for (key, escalation) in s.health.escalations() {
            let steps = escalation.steps.iter().enumerate();
            for (i, step) in steps {
                let at = format!("{path}.{key}{}.action", ".then".repeat(i));
                check_action(system, &step.action, &at, &s.partition, &windowed)?;
            }
        }
    }
    Ok(())
}

fn check_action(
    system: &System,
    action: &Action,
    path: &str,
    partition: &str,
    windowed: &std::collections::HashSet<&str>,
) -> Result<()> {
    match action {
        Action::Restart | Action::RestartPartition if windowed.contains(partition) => err(
            path,
            format!(
                "partition `{partition}` runs in windows, where a process is not restarted: restarts apply to partitions in no window"
            ),
        ),
        Action::Suspend if !system.windows.is_empty() => err(
            path,
            "a system with a window schedule is not suspended (stop-start runs without windows)",
        ),
        Action::Mode(name) => {
            let Some(modes) = &system.modes else {
                return err(path, "a mode switch needs a `modes:` section");
            };
            if modes.mode(name).is_none() {
                let names: Vec<&str> = modes.table.iter().map(|m| m.name.as_str()).collect();
                return err(
                    format!("{path}.mode"),
                    format!("unknown mode `{name}` (modes: {})", names.join(", ")),
                );
            }
            if !modes.allowed().iter().any(|(_, to, _)| to == name) {
                return err(
                    format!("{path}.mode"),
                    format!("no transition in `modes.transitions` leads to `{name}`"),
                );
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
