//! The Linux CPUFreq sysfs interface (DEmOS thesis 2.7, 2.7.1, 4.8.1; DEmOS
//! `PowerManager` and `CpufreqPolicy`), rooted at a directory that is `/sys` on a real
//! machine and may be a tree imitating it (`--cpufreq-root`), for tests and machines
//! without CPUFreq.
//!
//! Under `<root>/devices/system/cpu/`: `cpufreq/policy<N>/` per cluster with
//! `affected_cpus`, `cpuinfo_min_freq`, `cpuinfo_max_freq`, `scaling_governor`,
//! `scaling_max_freq`, `scaling_setspeed` and (except with `intel_pstate`)
//! `scaling_available_frequencies`; and `intel_pstate/status` on Intel CPUs.
//!
//! Taking control (as DEmOS): `intel_pstate` in `active` mode is switched to `passive`
//! (`off` is refused: another driver is in use); every cluster gets the `userspace`
//! governor, and `scaling_max_freq` is raised to `cpuinfo_max_freq` where it was lower.
//! Frequencies are then written to `scaling_setspeed` through a descriptor kept open.
//!
//! Restoring: every file is put back to its original text when [`Cpufreq`] is dropped,
//! in reverse order (governors before `intel_pstate`, which DEmOS's own FIXME asks for).
//! Before changing anything the originals are written to a record under
//! [`RECORD_DIR`], whose first line names the owner (pid and start time): after a
//! SIGKILL the next bulkhead finds the record of a dead owner and restores it
//! ([`restore_stale`]), as it removes other leftovers.

use crate::RunError;
use bulkhead_model::CpuSet;
use bulkhead_power::Cluster;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

/// Where CPUFreq records live, one file per controlling bulkhead.
pub const RECORD_DIR: &str = "/run/bulkhead/cpufreq";
/// `statfs` magic of sysfs: its attribute files are rewritten by each write.
const SYSFS_MAGIC: i64 = 0x6265_6572;

/// Why CPUFreq cannot be taken over or written; each names its file.
#[derive(Debug)]
pub enum CpufreqError {
    /// No `cpufreq/policy0/scaling_governor`: no frequency scaling here.
    Missing { probe: PathBuf },
    /// `intel_pstate/status` is `off`: another driver is in use.
    PstateOff { status: PathBuf },
    /// A file cannot be read.
    Read { path: PathBuf, source: io::Error },
    /// A file that holds a frequency (or a list of them) holds something else.
    NotKhz {
        path: PathBuf,
        text: String,
        list: bool,
    },
    /// A file cannot be opened for writing.
    Open { path: PathBuf, source: io::Error },
    /// A file cannot be written.
    Write {
        path: PathBuf,
        text: String,
        source: io::Error,
    },
    /// A directory cannot be made or listed (`list`).
    Dir {
        path: PathBuf,
        list: bool,
        source: io::Error,
    },
    /// The record of the originals cannot be written.
    Record { path: PathBuf, source: io::Error },
    /// A path or original text with a tab or newline, which the record cannot hold.
    Unrecordable { path: PathBuf },
}

impl std::fmt::Display for CpufreqError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpufreqError::Missing { probe } => write!(
                f,
                "CPUFreq: {} does not exist: this kernel (or the tree under --cpufreq-root) \
                 offers no CPU frequency scaling; run without --power-policy",
                probe.display()
            ),
            CpufreqError::PstateOff { status } => write!(
                f,
                "CPUFreq: {} is `off`: an Intel CPU with a driver other than intel_pstate; \
                 switch to intel_pstate or run without --power-policy",
                status.display()
            ),
            CpufreqError::Read { path, source } => {
                write!(f, "CPUFreq: cannot read {}: {source}", path.display())
            }
            CpufreqError::NotKhz { path, text, list } => write!(
                f,
                "CPUFreq: {}: `{text}` is not {} in kHz",
                path.display(),
                if *list {
                    "a list of frequencies"
                } else {
                    "a frequency"
                }
            ),
            CpufreqError::Open { path, source } => write!(
                f,
                "CPUFreq: cannot open {} for writing: {source}",
                path.display()
            ),
            CpufreqError::Write { path, text, source } => write!(
                f,
                "CPUFreq: cannot write `{text}` to {}: {source}",
                path.display()
            ),
            CpufreqError::Dir { path, list, source } => write!(
                f,
                "CPUFreq: cannot {} {}: {source}",
                if *list { "list" } else { "create" },
                path.display()
            ),
            CpufreqError::Record { path, source } => write!(
                f,
                "CPUFreq: cannot write the record {}: {source}",
                path.display()
            ),
            CpufreqError::Unrecordable { path } => {
                write!(f, "CPUFreq: {}: unexpected tab or newline", path.display())
            }
        }
    }
}

impl std::error::Error for CpufreqError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CpufreqError::Read { source, .. }
            | CpufreqError::Open { source, .. }
            | CpufreqError::Write { source, .. }
            | CpufreqError::Dir { source, .. }
            | CpufreqError::Record { source, .. } => Some(source),
            _ => None,
        }
    }
}

type Result<T> = std::result::Result<T, CpufreqError>;

/// One cluster under control.
#[derive(Debug)]
struct Policy {
    cluster: Cluster,
    /// `scaling_setspeed`, open for writing.
    setspeed: File,
    /// On a plain file system (an imitation tree) a write must also truncate.
    truncate: bool,
}

/// CPUFreq under our control; dropping it restores what it changed.
#[derive(Debug)]
pub struct Cpufreq {
    policies: Vec<Policy>,
    /// Files changed, with their original text, in the order changed.
    changes: Vec<(PathBuf, String)>,
    record: PathBuf,
}

/// A file's text, trimmed; the error names the file.
fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|source| CpufreqError::Read {
            path: path.to_path_buf(),
            source,
        })
}

fn read_khz(path: &Path) -> Result<u64> {
    let text = read(path)?;
    text.parse().map_err(|_| CpufreqError::NotKhz {
        path: path.to_path_buf(),
        text,
        list: false,
    })
}

fn write(path: &Path, text: &str) -> Result<()> {
    let mut file = open_for_writing(path, true)?;
    file.write_all(text.as_bytes())
        .map_err(|source| CpufreqError::Write {
            path: path.to_path_buf(),
            text: text.to_string(),
            source,
        })
}

fn open_for_writing(path: &Path, truncate: bool) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .truncate(truncate)
        .open(path)
        .map_err(|source| CpufreqError::Open {
            path: path.to_path_buf(),
            source,
        })
}

fn on_sysfs(file: &File) -> bool {
    bulkhead_os::host::fs_type(file) == Some(SYSFS_MAGIC)
}

impl Cpufreq {
    /// Takes control of CPUFreq under `root` (normally `/sys`), recording the originals
    /// in `record_dir/<instance>` first. Errors name the file that is missing, unreadable
    /// or not writable; whatever was changed before an error is restored.
    pub fn take(root: &Path, record_dir: &Path, instance: &str) -> Result<Cpufreq> {
        let cpu = root.join("devices/system/cpu");
        let probe = cpu.join("cpufreq/policy0/scaling_governor");
        if !probe.exists() {
            return Err(CpufreqError::Missing { probe });
        }
        fs::create_dir_all(record_dir).map_err(|source| CpufreqError::Dir {
            path: record_dir.to_path_buf(),
            list: false,
            source,
        })?;
        let mut me = Cpufreq {
            policies: Vec::new(),
            changes: Vec::new(),
            record: record_dir.join(instance),
        };
        let pstate = cpu.join("intel_pstate/status");
        if pstate.exists() {
            match read(&pstate)?.as_str() {
                "off" => return Err(CpufreqError::PstateOff { status: pstate }),
                "active" => me.change(&pstate, "passive")?,
                _ => {}
            }
        }
        for dir in policy_dirs(&cpu.join("cpufreq"))? {
            me.take_policy(&dir)?;
        }
        Ok(me)
    }

    /// The clusters, in policy number order.
    pub fn clusters(&self) -> Vec<Cluster> {
        self.policies.iter().map(|p| p.cluster.clone()).collect()
    }

    /// Sets cluster `index` to `khz` (one write to its `scaling_setspeed`).
    pub fn set(&self, index: usize, khz: u64) -> std::result::Result<(), RunError> {
        let p = &self.policies[index];
        let text = khz.to_string();
        p.setspeed
            .write_all_at(text.as_bytes(), 0)
            .and_then(|()| {
                if p.truncate {
                    p.setspeed.set_len(text.len() as u64)
                } else {
                    Ok(())
                }
            })
            .map_err(|source| RunError::Cpufreq {
                cluster: p.cluster.name.clone(),
                khz,
                source,
            })
    }

    fn take_policy(&mut self, dir: &Path) -> Result<()> {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let affected = read(&dir.join("affected_cpus"))?;
        let cpus = CpuSet::from_cpus(affected.split_whitespace().filter_map(|c| c.parse().ok()));
        let Some(cpus) = cpus else {
            // All its CPUs are offline: nothing to control (DEmOS: an inactive policy).
            return Ok(());
        };
        let min_khz = read_khz(&dir.join("cpuinfo_min_freq"))?;
        let max_khz = read_khz(&dir.join("cpuinfo_max_freq"))?;
        let available = dir.join("scaling_available_frequencies");
        let available_khz = if available.exists() {
            let text = read(&available)?;
            let mut list = text
                .split_whitespace()
                .map(|f| f.parse::<u64>())
                .collect::<std::result::Result<Vec<u64>, _>>()
                .map_err(|_| CpufreqError::NotKhz {
                    path: available.clone(),
                    text: text.clone(),
                    list: true,
                })?;
            list.sort_unstable();
            Some(list)
        } else {
            None
        };
        let governor = dir.join("scaling_governor");
        let setspeed_path = dir.join("scaling_setspeed");
        if read(&governor)? == "userspace" {
            // Restore the frequency another user chose, too.
            let current = read(&setspeed_path)?;
            self.note(&setspeed_path, current)?;
        } else {
            self.change(&governor, "userspace")?;
        }
        let scaling_max = dir.join("scaling_max_freq");
        if scaling_max.exists() && read_khz(&scaling_max)? != max_khz {
            self.change(&scaling_max, &max_khz.to_string())?;
        }
        let setspeed = open_for_writing(&setspeed_path, false)?;
        let truncate = !on_sysfs(&setspeed);
        self.policies.push(Policy {
            cluster: Cluster {
                name,
                cpus,
                min_khz,
                max_khz,
                available_khz,
            },
            setspeed,
            truncate,
        });
        Ok(())
    }

    /// Writes `text` to `path` after recording its original text.
    fn change(&mut self, path: &Path, text: &str) -> Result<()> {
        let original = read(path)?;
        self.note(path, original)?;
        write(path, text)
    }

    /// Records that `path` is to be restored to `original`, in the record file first.
    fn note(&mut self, path: &Path, original: String) -> Result<()> {
        let shown = path.display().to_string();
        if shown.contains(['\t', '\n']) || original.contains(['\t', '\n']) {
            return Err(CpufreqError::Unrecordable {
                path: path.to_path_buf(),
            });
        }
        self.changes.push((path.to_path_buf(), original));
        let me = std::process::id();
        let start = crate::leftovers::start_time(me).unwrap_or(0);
        let mut text = format!("owner {me} {start}\n");
        for (p, o) in &self.changes {
            text.push_str(&format!("{}\t{o}\n", p.display()));
        }
        fs::write(&self.record, text).map_err(|source| CpufreqError::Record {
            path: self.record.clone(),
            source,
        })
    }
}

impl Drop for Cpufreq {
    fn drop(&mut self) {
        for (path, original) in self.changes.iter().rev() {
            if let Err(e) = write(path, original) {
                eprintln!("bulkhead: restoring CPUFreq: {e}");
            }
        }
        let _ = fs::remove_file(&self.record);
    }
}

/// The `policy<N>` directories under `dir`, by N.
fn policy_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = fs::read_dir(dir).map_err(|source| CpufreqError::Dir {
        path: dir.to_path_buf(),
        list: true,
        source,
    })?;
    let mut dirs: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix("policy")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    dirs.sort();
    Ok(dirs.into_iter().map(|(_, p)| p).collect())
}

/// Restores what CPUFreq records of dead owners under `record_dir` name; one line per
/// file restored or failed, for the warnings.
pub fn restore_stale(record_dir: &Path) -> Vec<String> {
    let mut report = Vec::new();
    for entry in fs::read_dir(record_dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let mut lines = text.lines();
        let owner: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
        let (Some(pid), Some(start)) = (
            owner.get(1).and_then(|p| p.parse::<u32>().ok()),
            owner.get(2).and_then(|s| s.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if owner[0] != "owner" || crate::leftovers::start_time(pid) == Some(start) {
            continue;
        }
        let changes: Vec<(&str, &str)> = lines.filter_map(|l| l.split_once('\t')).collect();
        for (file, original) in changes.iter().rev() {
            report.push(match write(Path::new(file), original) {
                Ok(()) => format!(
                    "restored CPUFreq {file} to `{original}` (left by a bulkhead that died)"
                ),
                Err(e) => {
                    format!("could not restore a CPUFreq setting left by a bulkhead that died: {e}")
                }
            });
        }
        let _ = fs::remove_file(&path);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Intel-like tree: `intel_pstate` active, one policy without a frequency list.
    fn intel_tree(dir: &Path) {
        let cpu = dir.join("devices/system/cpu");
        let policy = cpu.join("cpufreq/policy0");
        fs::create_dir_all(&policy).unwrap();
        fs::create_dir_all(cpu.join("intel_pstate")).unwrap();
        fs::write(cpu.join("intel_pstate/status"), "active\n").unwrap();
        for (name, text) in [
            ("affected_cpus", "0 1"),
            ("cpuinfo_min_freq", "400000"),
            ("cpuinfo_max_freq", "3000000"),
            ("scaling_governor", "powersave"),
            ("scaling_max_freq", "3000000"),
            ("scaling_setspeed", "<unsupported>"),
        ] {
            fs::write(policy.join(name), format!("{text}\n")).unwrap();
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("bulkhead-cpufreq-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn intel_pstate_goes_passive_and_back_and_a_dead_owner_s_record_is_restored() {
        let dir = scratch("intel");
        intel_tree(&dir);
        let records = dir.join("records");
        let status = dir.join("devices/system/cpu/intel_pstate/status");
        let governor = dir.join("devices/system/cpu/cpufreq/policy0/scaling_governor");
        {
            let c = Cpufreq::take(&dir, &records, "bulkhead-1-1-0").unwrap();
            let clusters = c.clusters();
            assert_eq!(clusters[0].available_khz, None);
            assert_eq!(clusters[0].cpus.to_string(), "0-1");
            assert_eq!(read(&status).unwrap(), "passive");
            assert_eq!(read(&governor).unwrap(), "userspace");
            c.set(0, 1_234_000).unwrap();
            let record = fs::read_to_string(records.join("bulkhead-1-1-0")).unwrap();
            assert!(
                record.starts_with(&format!("owner {} ", std::process::id())),
                "{record}"
            );
            // A live owner's record is left alone.
            assert!(restore_stale(&records).is_empty());
        }
        assert_eq!(read(&status).unwrap(), "active");
        assert_eq!(read(&governor).unwrap(), "powersave");
        assert!(
            fs::read_dir(&records).unwrap().next().is_none(),
            "record removed"
        );
        // A record whose owner is gone (no pid 999999999) is restored, last change first.
        fs::write(&governor, "userspace").unwrap();
        fs::write(&status, "passive").unwrap();
        fs::write(
            records.join("x"),
            format!(
                "owner 999999999 1\n{}\tactive\n{}\tpowersave\n",
                status.display(),
                governor.display()
            ),
        )
        .unwrap();
        let report = restore_stale(&records);
        assert_eq!(report.len(), 2, "{report:?}");
        assert!(report[0].contains("scaling_governor"), "{report:?}");
        assert_eq!(read(&status).unwrap(), "active");
        assert_eq!(read(&governor).unwrap(), "powersave");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn intel_pstate_off_is_refused_naming_the_file() {
        let dir = scratch("off");
        intel_tree(&dir);
        let status = dir.join("devices/system/cpu/intel_pstate/status");
        fs::write(&status, "off\n").unwrap();
        let e = Cpufreq::take(&dir, &dir.join("records"), "r").unwrap_err();
        assert!(matches!(e, CpufreqError::PstateOff { .. }), "{e}");
        assert!(
            e.to_string().contains("intel_pstate/status is `off`"),
            "{e}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
