//! Instances left behind by a supervisor that died (SIGKILL, crash, power loss of
//! a container): their cgroups and the processes still in them, and the named
//! channels older versions created in `/dev/shm`.
//!
//! An instance directory is named `bulkhead-<pid>-<start>-<n>` (see [`instance_name`]).
//! It is left over when no process `<pid>` with start time `<start>` runs: the
//! supervisor is gone, even if the pid was reused since. A live instance is never
//! touched.

use bulkhead_os::cgroup::{kill_cgroup, procs, Hierarchy, Version};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The start time (clock ticks since boot) of process `pid`, if it runs.
pub use bulkhead_os::proc::start_time;

/// A new instance name for the calling process: `bulkhead-<pid>-<start>-<n>`, `n`
/// counting the runs of this process (a library user may run several at once).
pub fn instance_name() -> String {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pid = std::process::id();
    format!("bulkhead-{pid}-{}-{n}", start_time(pid).unwrap_or(0))
}

/// Whether an instance name belongs to a supervisor that no longer runs.
pub fn is_leftover(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("bulkhead-") else {
        return false;
    };
    let mut fields = rest.split('-');
    let (Some(pid), Some(start)) = (fields.next(), fields.next()) else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    start_time(pid) != Some(start)
}

/// Removes every leftover instance under the hierarchy's bases (and, on v1, the
/// limit cgroups `<instance>-<partition>` at the root of the memory, pids and cpu
/// hierarchies, the mode agents' park cgroups `<instance>-park-<n>` at the root of
/// the freezer's, [`crate::modes`], and on a hybrid host the instances at the root of
/// its cgroup2 mount, where runs on the v2 path and `bench/window-switch` make them):
/// kills the processes in its cgroups and removes the cgroups. Returns the removed
/// directories; failures are reported as warnings in the second list.
pub fn clean(hierarchy: &Hierarchy) -> (Vec<PathBuf>, Vec<String>) {
    let mut removed = Vec::new();
    let mut warnings = Vec::new();
    let (limits, unified) = match hierarchy.version {
        Version::V1 => (
            ["memory", "pids", "cpu", "freezer"].map(bulkhead_os::limit::v1_mount),
            bulkhead_os::cgroup::Mounts::read()
                .map(|m| m.v2().map(Path::to_path_buf).collect())
                .unwrap_or_default(),
        ),
        Version::V2 => ([None, None, None, None], Vec::new()),
    };
    let bases = hierarchy.bases().into_iter().map(Path::to_path_buf);
    let bases = bases.chain(limits.into_iter().flatten());
    let bases = bases
        .map(|b| (b, hierarchy.version))
        .chain(unified.into_iter().map(|b| (b, Version::V2)));
    for (base, version) in bases {
        let Ok(entries) = fs::read_dir(&base) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !entry.path().is_dir() || !is_leftover(&name) {
                continue;
            }
            match remove_tree(&entry.path(), version) {
                Ok(()) => removed.push(entry.path()),
                Err(e) => warnings.push(format!(
                    "cannot remove leftover cgroup {}: {e}",
                    entry.path().display()
                )),
            }
        }
    }
    (removed, warnings)
}

/// Removes the named channels (`/dev/shm/bulkhead-chan-c<pid>-*` and `...-can<pid>-*`)
/// that a bulkhead which no longer runs created (older versions named their channels;
/// a killed one left them behind), and every other stale named channel
/// ([`bulkhead_chan::cleanup_stale`]). Returns the removed names; failures are warnings.
pub fn clean_channels() -> (Vec<String>, Vec<String>) {
    let (mut removed, mut warnings) = (Vec::new(), Vec::new());
    let Ok(dir) = fs::read_dir("/dev/shm") else {
        return (removed, warnings);
    };
    for entry in dir.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(name) = file.strip_prefix(bulkhead_chan::PREFIX) else {
            continue;
        };
        if !run_channel_of_dead_supervisor(name) {
            continue;
        }
        match fs::remove_file(entry.path()) {
            Ok(()) => removed.push(name.to_string()),
            Err(e) => warnings.push(format!(
                "cannot remove leftover channel {}: {e}",
                entry.path().display()
            )),
        }
    }
    match bulkhead_chan::cleanup_stale() {
        Ok(names) => removed.extend(names),
        Err(e) => warnings.push(format!("cleaning stale channels: {e}")),
    }
    (removed, warnings)
}

/// Whether `name` is a run's channel (`c<pid>-<n>` or `can<pid>-...`) whose
/// supervisor `<pid>` no longer runs.
fn run_channel_of_dead_supervisor(name: &str) -> bool {
    let rest = name.strip_prefix("can").or_else(|| name.strip_prefix('c'));
    let Some((pid, _)) = rest.and_then(|r| r.split_once('-')) else {
        return false;
    };
    match pid.parse::<u32>() {
        Ok(pid) => start_time(pid).is_none(),
        Err(_) => false,
    }
}

/// Kills the members of every cgroup under `dir` and removes them, deepest first.
fn remove_tree(dir: &Path, version: Version) -> std::io::Result<()> {
    // A supervisor killed while the system was suspended left it frozen: thaw it first,
    // or nothing below it could die (v1) or be removed.
    let _ = bulkhead_os::cgroup::set_frozen(dir, version, false);
    let children: Vec<PathBuf> = fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    for child in &children {
        remove_tree(child, version)?;
    }
    let has_freezer = dir.join("freezer.state").exists() || dir.join("cgroup.freeze").exists();
    if has_freezer {
        kill_cgroup(dir, version);
    } else {
        // A cpuset-only (v1) cgroup: its members are killed through the freezer
        // tree; signal any that are left directly.
        for pid in procs(dir) {
            let _ = bulkhead_os::proc::kill(pid, bulkhead_os::proc::SIGKILL);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e)
                if e.raw_os_error() == Some(bulkhead_os::errno::EBUSY)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_instance_is_live() {
        let name = instance_name();
        assert!(name.starts_with(&format!("bulkhead-{}-", std::process::id())));
        assert!(!is_leftover(&name));
    }

    #[test]
    fn dead_or_reused_pids_are_leftovers() {
        let pid = std::process::id();
        let start = start_time(pid).unwrap();
        assert!(
            is_leftover(&format!("bulkhead-{pid}-{}-0", start + 1)),
            "pid reused by another process"
        );
        assert!(is_leftover("bulkhead-999999999-1-0"), "no such pid");
        assert!(!is_leftover("other-123-4"), "not ours");
        assert!(!is_leftover("bulkhead-abc"), "not an instance name");
    }

    /// A mode agent's park cgroup of a supervisor killed mid-run (at the freezer's root,
    /// its anchor frozen) is removed by the next clean.
    #[test]
    #[ignore = "needs root: cgroups"]
    fn a_dead_supervisors_park_cgroups_are_removed() {
        let hierarchy = Hierarchy::detect().unwrap();
        if hierarchy.version != Version::V1 {
            return;
        }
        let root = bulkhead_os::limit::v1_mount("freezer").unwrap();
        let dir = root.join(crate::modes::park_cgroup_name("bulkhead-999999999-1-0", 0));
        let anchor = dir.join("anchor");
        fs::create_dir_all(&anchor).unwrap();
        bulkhead_os::cgroup::set_frozen(&anchor, Version::V1, true).unwrap();
        let (removed, warnings) = clean(&hierarchy);
        let left = dir.exists();
        let _ = fs::remove_dir(&anchor);
        let _ = fs::remove_dir(&dir);
        assert!(!left, "{removed:?} {warnings:?}");
        assert!(removed.contains(&dir), "{removed:?}");
    }

    #[test]
    fn channels_of_dead_supervisors_are_recognised() {
        let me = std::process::id();
        assert!(run_channel_of_dead_supervisor("c999999999-0"));
        assert!(run_channel_of_dead_supervisor("can999999999-0-1-to"));
        assert!(!run_channel_of_dead_supervisor(&format!("c{me}-0")));
        assert!(!run_channel_of_dead_supervisor(&format!(
            "can{me}-0-0-from"
        )));
        assert!(
            !run_channel_of_dead_supervisor("101"),
            "a user's named channel"
        );
        assert!(!run_channel_of_dead_supervisor("cache-1"));
    }
}
