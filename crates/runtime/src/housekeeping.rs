//! Housekeeping isolation: kernel work that can run elsewhere is moved off the rt CPUs while
//! rt partitions run, the run-time part of what `isolcpus=`/`nohz_full=`/`irqaffinity=` do
//! at boot (Documentation/admin-guide/kernel-per-CPU-kthreads.rst, "Reducing OS jitter"):
//!
//! * device IRQs: `/proc/irq/N/smp_affinity_list` of every IRQ allowed on an rt CPU, and
//!   `/proc/irq/default_smp_affinity` for IRQs set up later (managed and per-CPU IRQs
//!   refuse; they are reported as warnings);
//! * unbound workqueues: `/sys/devices/virtual/workqueue/cpumask` (their `kworker/uN:M`
//!   workers run, e.g., ext4 I/O completion and writeback for whole milliseconds, not
//!   preemptible on a `PREEMPT_NONE` kernel: measured on this machine, docs/rt.md);
//! * unbound kernel threads (kthreadd, whose affinity new kthreads inherit, and every
//!   kthread without `PF_NO_SETAFFINITY`, e.g. `kdamond`, `kswapd`, `khugepaged`);
//! * a CPU latency request of 0 µs on `/dev/cpu_dma_latency` (PM QoS; keeps idle CPUs out
//!   of deep C-states where a cpuidle driver exists), held open while isolated.
//!
//! Every changed setting is restored exactly on drop. Before changing anything, the
//! originals are written to a record under [`RECORD_DIR`]: after a SIGKILL the settings stay
//! changed (Drop cannot run), and [`Housekeeping::restore_stale`] (called by a later
//! bulkhead's leftover cleanup) puts them back. The latency request needs no record: the
//! kernel drops it when the descriptor closes, also on SIGKILL.

use bulkhead_model::CpuSet;
use bulkhead_os::owner::{self, stat_fields};
use bulkhead_os::{Error, Result};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Where isolation records live, one file per isolating process.
pub const RECORD_DIR: &str = "/run/bulkhead";
const WORKQUEUE_MASK: &str = "/sys/devices/virtual/workqueue/cpumask";
const DEFAULT_IRQ_MASK: &str = "/proc/irq/default_smp_affinity";
const PF_KTHREAD: u64 = 0x0020_0000;
const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// One setting changed, with what it was.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// A sysfs/procfs file and its original text.
    File { path: PathBuf, original: String },
    /// A kernel thread (pid, start time, so a reused pid is left alone) and its original
    /// affinity.
    Affinity {
        pid: i32,
        start: u64,
        original: CpuSet,
    },
}

/// The isolation in force. Dropping it restores every setting it changed.
#[derive(Debug)]
pub struct Housekeeping {
    changes: Vec<Change>,
    warnings: Vec<String>,
    record: Option<PathBuf>,
    /// The 0 µs CPU latency request, withdrawn when dropped.
    _latency: Option<bulkhead_os::cpu_latency::CpuLatency>,
}

impl Housekeeping {
    /// Moves IRQs, unbound workqueues and unbound kernel threads off `rt_cpus` and asks for
    /// 0 µs CPU wake-up latency, after restoring what a killed owner left changed
    /// ([`Housekeeping::restore_stale`], reported among the warnings). What cannot be changed (missing file, managed IRQ, not root)
    /// becomes a warning, never an error; the error cases are: no CPU would be left for the
    /// housekeeping work, or the record cannot be written (then nothing is changed).
    pub fn isolate(rt_cpus: &CpuSet) -> Result<Housekeeping> {
        let online = read("/sys/devices/system/cpu/online")
            .and_then(|s| CpuSet::parse(&s).map_err(|e| Error::Invalid(e.into())))?;
        let rest = CpuSet::from_cpus(online.iter().filter(|c| !rt_cpus.contains(*c))).ok_or_else(
            || {
                Error::Invalid(format!(
                    "housekeeping: no online CPU outside the rt CPUs {rt_cpus} is left for it"
                ))
            },
        )?;
        let mut hk = Housekeeping {
            changes: Vec::new(),
            warnings: Vec::new(),
            record: None,
            _latency: None,
        };
        // A killed owner's changes first: they would otherwise be recorded as originals.
        hk.warnings.extend(
            Self::restore_stale()
                .into_iter()
                .map(|l| format!("housekeeping: leftover of a killed run: {l}")),
        );
        if let Some(owner) = live_owner() {
            hk.warnings.push(format!(
                "housekeeping: already isolated by process {owner}; left as it is"
            ));
            return Ok(hk);
        }
        let plan = plan(rt_cpus, &rest, &mut hk.warnings);
        let record = write_record(plan.iter().map(|(c, _)| c))?;
        hk.record = Some(record);
        for (change, new) in plan {
            match apply(&change, &new) {
                Ok(()) => hk.changes.push(change),
                Err(e) => hk.warnings.push(format!("housekeeping: {e}")),
            }
        }
        // Only what really changed is left to restore after a SIGKILL.
        if let Err(e) = write_record(hk.changes.iter()) {
            hk.warnings.push(format!("housekeeping: {e}"));
        }
        hk._latency = request_zero_latency(&mut hk.warnings);
        Ok(hk)
    }

    /// What could not be changed, one line each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The settings changed, one line each (`/proc/irq/41/smp_affinity_list: 0-1 -> 1`
    /// style originals), for logs.
    pub fn changed(&self) -> Vec<String> {
        self.changes.iter().map(describe).collect()
    }

    /// Restores the settings recorded by processes that died without restoring them
    /// (SIGKILL), and removes their records. Returns what it restored or could not, one line
    /// each. Call it at start-up with the other leftover cleanup.
    pub fn restore_stale() -> Vec<String> {
        let mut report = Vec::new();
        for entry in fs::read_dir(RECORD_DIR).into_iter().flatten().flatten() {
            let path = entry.path();
            let Some(owner) = owner::of_record(&path) else {
                continue;
            };
            if owner::alive(owner) {
                continue;
            }
            let text = fs::read_to_string(&path).unwrap_or_default();
            let changes: Vec<Change> = text.lines().skip(1).filter_map(parse_change).collect();
            for c in changes.iter().rev() {
                report.push(match restore(c) {
                    Ok(()) => format!("restored {}", describe(c)),
                    Err(e) => format!("could not restore {}: {e}", describe(c)),
                });
            }
            let _ = fs::remove_file(&path);
        }
        report
    }
}

impl Drop for Housekeeping {
    fn drop(&mut self) {
        for c in self.changes.iter().rev() {
            if let Err(e) = restore(c) {
                eprintln!("bulkhead: housekeeping: restoring {}: {e}", describe(c));
            }
        }
        if let Some(r) = &self.record {
            let _ = fs::remove_file(r);
        }
    }
}

/// Every change to make, with its new value (a cpulist, or a hex mask for mask files).
fn plan(rt: &CpuSet, rest: &CpuSet, warnings: &mut Vec<String>) -> Vec<(Change, String)> {
    let mut plan = Vec::new();
    let mut file = |path: PathBuf, hex: bool| {
        let original = match read(&path) {
            Ok(v) => v,
            Err(e) => return warnings.push(format!("housekeeping: {e}")),
        };
        let current = if hex {
            parse_mask(&original)
        } else {
            CpuSet::parse(&original).ok()
        };
        let Some(current) = current.filter(|c| c.intersects(rt)) else {
            return;
        };
        let new = without(&current, rt).unwrap_or_else(|| rest.clone());
        let new = if hex { mask(&new) } else { new.to_string() };
        plan.push((Change::File { path, original }, new));
    };
    file(PathBuf::from(WORKQUEUE_MASK), true);
    file(PathBuf::from(DEFAULT_IRQ_MASK), true);
    for irq in irq_dirs() {
        file(irq.join("smp_affinity_list"), false);
    }
    for (pid, start, original) in movable_kthreads(rt) {
        let new = without(&original, rt).expect("not bound to rt CPUs only");
        plan.push((
            Change::Affinity {
                pid,
                start,
                original,
            },
            new.to_string(),
        ));
    }
    plan
}

fn irq_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<(u32, PathBuf)> = fs::read_dir("/proc/irq")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
        .collect();
    dirs.sort();
    dirs.into_iter().map(|(_, p)| p).collect()
}

/// Kernel threads that may change CPUs (no `PF_NO_SETAFFINITY`) and are allowed on an rt
/// CPU and on some other CPU: (pid, start time, affinity).
fn movable_kthreads(rt: &CpuSet) -> Vec<(i32, u64, CpuSet)> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Some((ppid, flags, start)) = stat_fields(pid) else {
            continue;
        };
        let kthread = flags & PF_KTHREAD != 0 && (pid == 2 || ppid == 2);
        if !kthread || flags & PF_NO_SETAFFINITY != 0 {
            continue;
        }
        if let Some(aff) = affinity(pid).filter(|a| a.intersects(rt) && !a.is_subset(rt)) {
            out.push((pid, start, aff));
        }
    }
    out
}

fn affinity(pid: i32) -> Option<CpuSet> {
    CpuSet::from_cpus(bulkhead_os::sched::affinity(pid).ok()?)
}

fn set_affinity(pid: i32, cpus: &CpuSet) -> std::io::Result<()> {
    bulkhead_os::sched::set_affinity(pid, cpus.iter())
}

fn apply(change: &Change, new: &str) -> Result<()> {
    match change {
        Change::File { path, .. } => write(path, new),
        Change::Affinity { pid, .. } => {
            let cpus = CpuSet::parse(new).map_err(|e| Error::Invalid(e.into()))?;
            set_affinity(*pid, &cpus)
                .map_err(|e| Error::os(format!("moving kernel thread {pid} to CPUs {new}"), e, ""))
        }
    }
}

fn restore(change: &Change) -> Result<()> {
    match change {
        Change::File { path, original } => write(path, original),
        Change::Affinity {
            pid,
            start,
            original,
        } => {
            if stat_fields(*pid).map(|f| f.2) != Some(*start) {
                return Ok(()); // the thread is gone; its pid may belong to another now
            }
            set_affinity(*pid, original).map_err(|e| {
                Error::os(
                    format!("restoring kernel thread {pid}'s CPUs {original}"),
                    e,
                    "",
                )
            })
        }
    }
}

fn describe(c: &Change) -> String {
    match c {
        Change::File { path, original } => format!("{} (was {original})", path.display()),
        Change::Affinity { pid, original, .. } => {
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            format!("kernel thread {pid} {} (was CPUs {original})", comm.trim())
        }
    }
}

/// Writes (replaces) this process's record: the owner, then one change per line.
fn write_record<'a>(changes: impl Iterator<Item = &'a Change>) -> Result<PathBuf> {
    fs::create_dir_all(RECORD_DIR)
        .map_err(|e| Error::os(format!("creating {RECORD_DIR}"), e, "run as root"))?;
    let path = Path::new(RECORD_DIR).join(format!("housekeeping-{}", std::process::id()));
    let mut text = owner::line();
    for c in changes {
        text.push_str(&match c {
            Change::File { path, original } => format!("file {}\t{original}\n", path.display()),
            Change::Affinity {
                pid,
                start,
                original,
            } => format!("affinity {pid} {start} {original}\n"),
        });
    }
    // Written aside and renamed, so a record is never seen half-written.
    let tmp = path.with_extension("tmp");
    fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
        .and_then(|()| fs::rename(&tmp, &path))
        .map_err(|e| Error::os(format!("writing {}", path.display()), e, "run as root"))?;
    Ok(path)
}

fn parse_change(line: &str) -> Option<Change> {
    if let Some(rest) = line.strip_prefix("file ") {
        let (path, original) = rest.split_once('\t')?;
        return Some(Change::File {
            path: PathBuf::from(path),
            original: original.to_string(),
        });
    }
    let mut f = line.strip_prefix("affinity ")?.split_whitespace();
    Some(Change::Affinity {
        pid: f.next()?.parse().ok()?,
        start: f.next()?.parse().ok()?,
        original: CpuSet::parse(f.next()?).ok()?,
    })
}

/// Another live process's isolation, if any.
fn live_owner() -> Option<i32> {
    fs::read_dir(RECORD_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| owner::of_record(&e.path()))
        .find(|o| owner::alive(*o))
        .map(|o| o.0)
}

fn request_zero_latency(
    warnings: &mut Vec<String>,
) -> Option<bulkhead_os::cpu_latency::CpuLatency> {
    bulkhead_os::cpu_latency::request(0)
        .map_err(|e| warnings.push(format!("housekeeping: /dev/cpu_dma_latency: {e}")))
        .ok()
}

/// `set` minus `remove`, `None` if nothing is left.
fn without(set: &CpuSet, remove: &CpuSet) -> Option<CpuSet> {
    CpuSet::from_cpus(set.iter().filter(|c| !remove.contains(*c)))
}

/// A kernel hex CPU mask (`3`, `ff,00000001`) as a set; `None` if empty or malformed.
fn parse_mask(text: &str) -> Option<CpuSet> {
    let mut cpus = Vec::new();
    for (i, word) in text.trim().rsplit(',').enumerate() {
        let bits = u32::from_str_radix(word, 16).ok()?;
        cpus.extend(
            (0..32)
                .filter(|b| bits >> b & 1 == 1)
                .map(|b| i as u32 * 32 + b),
        );
    }
    CpuSet::from_cpus(cpus)
}

/// A set as a kernel hex CPU mask, 32-bit words separated by commas.
fn mask(set: &CpuSet) -> String {
    let top = set.iter().max().unwrap_or(0) / 32;
    (0..=top)
        .rev()
        .map(|w| {
            let bits = set
                .iter()
                .filter(|c| c / 32 == w)
                .fold(0u32, |m, c| m | 1 << (c % 32));
            if w == top {
                format!("{bits:x}")
            } else {
                format!("{bits:08x}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn read(path: impl AsRef<Path>) -> Result<String> {
    let path = path.as_ref();
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| Error::os(format!("reading {}", path.display()), e, ""))
}

fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value)
        .map_err(|e| Error::os(format!("writing `{value}` to {}", path.display()), e, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> CpuSet {
        CpuSet::parse(s).unwrap()
    }

    #[test]
    fn hex_masks_round_trip() {
        assert_eq!(parse_mask("3"), Some(set("0-1")));
        assert_eq!(parse_mask("ff,00000001"), Some(set("0,32-39")));
        assert_eq!(parse_mask("0"), None);
        assert_eq!(parse_mask("xyz"), None);
        assert_eq!(mask(&set("1")), "2");
        assert_eq!(mask(&set("0,32-39")), "ff,00000001");
    }

    #[test]
    fn records_parse_back() {
        let file = Change::File {
            path: PathBuf::from("/proc/irq/41/smp_affinity_list"),
            original: "0-1".into(),
        };
        let aff = Change::Affinity {
            pid: 71,
            start: 1234,
            original: set("0-1"),
        };
        assert_eq!(
            parse_change("file /proc/irq/41/smp_affinity_list\t0-1"),
            Some(file)
        );
        assert_eq!(parse_change("affinity 71 1234 0-1"), Some(aff));
        assert_eq!(parse_change("affinity 71 x 0-1"), None);
        assert_eq!(without(&set("0-3"), &set("0,2")), Some(set("1,3")));
        assert_eq!(without(&set("0"), &set("0")), None);
    }
}
