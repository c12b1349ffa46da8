//! The effect of CPU frequency changes on the window switch (DEmOS thesis 4.8, 5.5):
//! `bulkhead run --power-policy` on a tree imitating CPUFreq (`--cpufreq-root`, two
//! clusters, CPUs 0 and 1, in a temporary directory; `CPUFREQ_ROOT=/sys` as root on a
//! machine with CPUFreq), each policy paired with `none` on the same description, run
//! just before it, so that a change of the machine's load does not count.
//!
//! - `per_slice`: two windows of W ms on CPU 1, the spin their SC process, their slices
//!   at 600 and 1200 MHz: one frequency write at every window switch. Overhead per
//!   switch against the spin pinned alone, as in the main benchmark, under `none` and
//!   `per_slice`, and their ratio.
//! - `minbe`: one window of W ms on CPU 1, SC process `true` (its slot lasts its budget
//!   of W/5), the spin its BE process for the remaining 4W/5: the highest frequency at
//!   each window start and the lowest at each BE start, on both clusters. Added time per
//!   window = the spin's extra wall time under `minbe` against `none`, per window, times
//!   the spin's share of a window (the extra windows needed hold 4W/5 of work each).
//!
//! Writes per window are counted from the schedule log and the windows reported by
//! `bulkhead run`, so the added time per write is measured, not assumed.

use crate::{baseline, median, min, spin_ns};
use std::path::{Path, PathBuf};
use std::process::Command;

const RUNS: usize = 7;
const WINDOWS_MS: [u64; 2] = [10, 1];

/// Two clusters (`policy0`: CPU 0, `policy1`: CPU 1) at 600 and 1200 MHz.
fn imitation_tree(root: &Path) {
    for n in 0..2 {
        let policy = root.join(format!("devices/system/cpu/cpufreq/policy{n}"));
        std::fs::create_dir_all(&policy).expect("create the imitation tree");
        for (name, text) in [
            ("affected_cpus", n.to_string()),
            ("cpuinfo_min_freq", "600000".into()),
            ("cpuinfo_max_freq", "1200000".into()),
            ("scaling_available_frequencies", "600000 1200000".into()),
            ("scaling_governor", "schedutil".into()),
            ("scaling_max_freq", "1200000".into()),
            ("scaling_setspeed", "<unsupported>".into()),
        ] {
            std::fs::write(policy.join(name), format!("{text}\n")).expect("write the tree");
        }
    }
}

/// One measured `bulkhead run`: the spin's wall time, the windows run and the
/// frequency writes (schedule log lines).
struct Run {
    ns: f64,
    windows: f64,
    writes: f64,
}

fn run(bulkhead: &str, config: &Path, policy: &str, root: &Path, log: &Path) -> Option<Run> {
    let _ = std::fs::remove_file(log);
    let out = Command::new(bulkhead)
        .arg("run")
        .arg(config)
        .args(["--power-policy", policy, "--cpufreq-root"])
        .arg(root)
        .arg("--schedule-log")
        .arg(log)
        .output()
        .ok()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        eprintln!("bulkhead run -p {policy} failed: {stderr}");
        return None;
    }
    // "bulkhead run: every process exited after N windows and M grants"
    let windows = stderr
        .split_once(" after ")
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse::<f64>().ok())?;
    let text = std::fs::read_to_string(log).ok()?;
    let writes = text.matches("\"cpu_frequency\"").count() as f64;
    Some(Run {
        ns: spin_ns(&out.stdout),
        windows,
        writes,
    })
}

/// `per_slice`: the spin alone in two alternating windows of `w` ms.
fn per_slice_config(dir: &Path, spin: &str, work: u64, w: u64) -> PathBuf {
    let path = dir.join(format!("per-slice-{w}.yaml"));
    let yaml = format!(
        "partitions: [{{name: spin, processes: [{{cmd: {spin} {work}, budget: {w}}}]}}]\n\
         windows:\n\
         \x20 - {{length: {w}, slices: [{{cpu: 1, sc_partition: spin, frequency: 600}}]}}\n\
         \x20 - {{length: {w}, slices: [{{cpu: 1, sc_partition: spin, frequency: 1200}}]}}\n"
    );
    std::fs::write(&path, yaml).expect("write config");
    path
}

/// `minbe`: SC `true` for `w`/5 ms, then the spin as BE for the rest of each window.
fn minbe_config(dir: &Path, spin: &str, work: u64, w: u64) -> PathBuf {
    let path = dir.join(format!("minbe-{w}.yaml"));
    let sc = w as f64 / 5.0;
    let yaml = format!(
        "windows: [{{length: {w}, cpu: 1, sc_processes: [{{cmd: \"true\", budget: {sc}}}], be_processes: [{{cmd: {spin} {work}, budget: {w}}}]}}]\n"
    );
    std::fs::write(&path, yaml).expect("write config");
    path
}

/// Figures of one policy at one window length, printed and as a JSON member.
struct Figures {
    none_us: Vec<f64>,
    policy_us: Vec<f64>,
    /// Per pair: the policy's overhead minus `none`'s.
    added_us: Vec<f64>,
    writes_per_window: f64,
}

impl Figures {
    fn json(&self, key: &str) -> String {
        let (none, policy) = (median(self.none_us.clone()), median(self.policy_us.clone()));
        let added = median(self.added_us.clone());
        let per_write = added / self.writes_per_window.max(f64::MIN_POSITIVE);
        println!(
            "  none {none:8.2} us, with writes {policy:8.2} us (min {:.2} / {:.2}); ratio {:.2}; \
             {:.2} writes per window; added (median of pairs) {added:.2} us per window, {per_write:.2} us per write",
            min(&self.none_us),
            min(&self.policy_us),
            policy / none,
            self.writes_per_window
        );
        format!(
            "\"{key}\":{{\"none_median_us\":{none:.3},\"policy_median_us\":{policy:.3},\"ratio\":{:.3},\"writes_per_window\":{:.3},\"added_us_per_window\":{added:.3},\"added_us_per_write\":{per_write:.3}}}",
            policy / none,
            self.writes_per_window
        )
    }
}

/// Paired runs of `policy` and `none` on `config`; `overhead(run, base)` turns a run
/// (and the pinned baseline just before it) into µs per window.
fn measure(
    bulkhead: &str,
    spin: &str,
    work: u64,
    config: &Path,
    policy: &str,
    root: &Path,
    overhead: &dyn Fn(&Run, f64) -> f64,
) -> Option<Figures> {
    let log = config.with_extension("jsonl");
    let mut figures = Figures {
        none_us: Vec::new(),
        policy_us: Vec::new(),
        added_us: Vec::new(),
        writes_per_window: 0.0,
    };
    let mut writes = Vec::new();
    for _ in 0..RUNS {
        let base = baseline(spin, work);
        let none = run(bulkhead, config, "none", root, &log)?;
        let with = run(bulkhead, config, policy, root, &log)?;
        writes.push(with.writes / with.windows);
        let (none, with) = (overhead(&none, base), overhead(&with, base));
        figures.none_us.push(none);
        figures.policy_us.push(with);
        figures.added_us.push(with - none);
    }
    figures.writes_per_window = median(writes);
    Some(figures)
}

pub fn main(bulkhead: &str, spin: &str, work: u64) {
    let scratch = std::env::temp_dir().join(format!(
        "bulkhead-bench-window-power-{}",
        std::process::id()
    ));
    let root = match std::env::var_os("CPUFREQ_ROOT") {
        Some(root) => PathBuf::from(root),
        None => {
            imitation_tree(&scratch.join("sys"));
            scratch.join("sys")
        }
    };
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    println!(
        "work: {work}M iterations; CPUFreq root {}; {RUNS} paired runs (none, then the policy)",
        root.display()
    );
    let mut json = Vec::new();
    for w in WINDOWS_MS {
        let w_us = w as f64 * 1e3;
        // The spin runs the whole window: time lost per window (= per switch).
        let whole = move |r: &Run, base: f64| (r.ns - base) / (r.ns / (w_us * 1e3)) / 1e3;
        let config = per_slice_config(&scratch, spin, work, w);
        println!("window {w} ms, per_slice (overhead per switch):");
        if let Some(f) = measure(bulkhead, spin, work, &config, "per_slice", &root, &whole) {
            json.push(f.json(&format!("per_slice_{w}ms")));
        }
        // The spin runs 4/5 of each window: lost work per window is the extra windows'
        // share of it.
        let share = move |r: &Run, base: f64| {
            let windows = r.ns / (w_us * 1e3);
            (r.ns - base / 0.8) / windows / 1e3 * 0.8
        };
        let config = minbe_config(&scratch, spin, work, w);
        println!("window {w} ms, minbe (overhead per window of two switches):");
        if let Some(f) = measure(bulkhead, spin, work, &config, "minbe", &root, &share) {
            json.push(f.json(&format!("minbe_{w}ms")));
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load1 = load.split_whitespace().next().unwrap_or("0").to_string();
    println!(
        "load average (1 min) at the end: {load1} (other work on the CPUs inflates every figure)"
    );
    println!(
        "{{\"bench\":\"window-switch-power\",\"loadavg_1min\":{load1},\"work_million_iterations\":{work},\"cpufreq_root\":\"{}\",{}}}",
        root.display(),
        json.join(",")
    );
}
