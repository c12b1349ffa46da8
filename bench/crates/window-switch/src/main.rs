//! Window-switch overhead of `bulkhead run` (DEmOS thesis 5.5).
//!
//! A fixed-work CPU-bound program (`bulkhead-spin WORK`, which prints its own wall
//! time) runs pinned alone on CPU 1 (baseline), then under `bulkhead run` in one
//! repeating window of 100, 10, 5, 2 and 1 ms on CPU 1 with a budget of the whole
//! window, so that it is frozen and thawed at every window boundary. Overhead per
//! switch = (time under the scheduler - baseline) / switches, switches = time
//! under the scheduler / window length, each scheduled run paired with a baseline
//! run just before it. Min and median of 5 runs. With
//! `demos-sched` on PATH the same workload runs under DEmOS too. Then two partitions
//! alternating in 1 ms windows (each switch freezes one spin and thaws another), and
//! the stop/resume mechanisms alone ([`mechanisms`]).
//!
//! With `--power`, the effect of CPU frequency changes on the switch instead
//! ([`power`]).
//!
//! Usage: bulkhead-bench-window-switch BULKHEAD SPIN [--power]. Last line: one JSON
//! object.

use std::process::Command;

mod mechanisms;
mod power;

const RUNS: usize = 5;
const WINDOWS_MS: [u64; 5] = [100, 10, 5, 2, 1];

pub(crate) fn spin_ns(output: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(output);
    let line = text
        .lines()
        .rev()
        // `bulkhead run` prefixes a process's lines with its name (`NAME[i]: `).
        .find_map(|l| l.split_whitespace().last()?.parse::<f64>().ok());
    line.unwrap_or_else(|| panic!("no elapsed time in output: {text}"))
}

pub(crate) fn baseline(spin: &str, work: u64) -> f64 {
    let out = Command::new("taskset")
        .args(["-c", "1", spin, &work.to_string()])
        .output()
        .expect("taskset");
    assert!(out.status.success(), "baseline run failed");
    spin_ns(&out.stdout)
}

/// Two partitions, each a spin of `work` alone in its own 1 ms window, alternating.
fn alternating(spin: &str, work: u64) -> TempFile {
    let path = std::env::temp_dir().join("bulkhead-bench-window-alternate.yaml");
    let window =
        format!("{{length: 1, cpu: 1, be_processes: [{{cmd: {spin} {work}, budget: 1}}]}}");
    std::fs::write(&path, format!("windows: [{window}, {window}]\n")).expect("write config");
    TempFile(path)
}

/// A description the bench wrote, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The wall time of the first of several spins to finish (the smallest printed; under
/// `bulkhead run` each line is prefixed with its process's name, `NAME[i]: `).
fn first_spin_ns(output: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(output);
    let times = text
        .lines()
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok());
    times.fold(f64::INFINITY, f64::min)
}

fn config(spin: &str, work: u64, window_ms: u64) -> TempFile {
    let path = std::env::temp_dir().join(format!("bulkhead-bench-window-{window_ms}.yaml"));
    // A best-effort process: its exit is no error (that of an SC process fails the run).
    let yaml = format!("windows: [{{length: {window_ms}, cpu: 1, be_processes: [{{cmd: {spin} {work}, budget: {window_ms}}}]}}]\n");
    std::fs::write(&path, yaml).expect("write config");
    TempFile(path)
}

pub(crate) fn under(program: &str, args: &[&str]) -> Option<f64> {
    let out = Command::new(program).args(args).output().ok()?;
    if !out.status.success() {
        eprintln!("{program} failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    Some(spin_ns(&out.stdout)).filter(|t| t.is_finite())
}

/// The work (million iterations) that takes about 300 ms pinned alone.
fn calibrate(spin: &str) -> u64 {
    let probe = baseline(spin, 20);
    ((20.0 * 300e6 / probe).round() as u64).max(1)
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub(crate) fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // Absolute paths: the description's processes run in its directory (set_cwd).
    let absolute = |p: &str| {
        std::fs::canonicalize(p)
            .expect("program exists")
            .display()
            .to_string()
    };
    let (bulkhead, spin) = (&absolute(&args[1]), &absolute(&args[2]));
    let work = calibrate(spin);
    if args.get(3).is_some_and(|a| a == "--power") {
        return power::main(bulkhead, spin, work);
    }
    let base: Vec<f64> = (0..RUNS).map(|_| baseline(spin, work)).collect();
    let base_ns = median(base.clone());
    println!(
        "work: {work}M iterations; baseline pinned alone: min {:.1} ms, median {:.1} ms",
        min(&base) / 1e6,
        base_ns / 1e6
    );
    let demos = which("demos-sched");
    let mut json = Vec::new();
    for w in WINDOWS_MS {
        let file = config(spin, work, w);
        let cfg = file.path();
        let per_switch = |t: f64, base: f64| (t - base) / (t / (w as f64 * 1e6)) / 1e3;
        // Each run is paired with a baseline run just before it, so that a change
        // of the machine's load between runs does not count as overhead.
        let ours: Vec<f64> = (0..RUNS)
            .filter_map(|_| {
                let base = baseline(spin, work);
                under(bulkhead, &["run", cfg]).map(|t| per_switch(t, base))
            })
            .collect();
        if ours.is_empty() {
            println!("window {w:>3} ms: bulkhead run failed");
            continue;
        }
        let (lo, med) = (min(&ours), median(ours.clone()));
        print!("window {w:>3} ms: overhead per switch min {lo:8.2} us, median {med:8.2} us");
        let mut entry = format!("\"{w}\":{{\"min_us\":{lo:.3},\"median_us\":{med:.3}");
        if demos.is_some() {
            let theirs: Vec<f64> = (0..RUNS)
                .filter_map(|_| {
                    let base = baseline(spin, work);
                    under("demos-sched", &["-c", cfg]).map(|t| per_switch(t, base))
                })
                .collect();
            if !theirs.is_empty() {
                let (shown, fields) = beside_demos(med, median(theirs));
                print!("{shown}");
                entry += &fields;
            }
        }
        println!();
        entry.push('}');
        json.push(entry);
    }
    if demos.is_none() {
        println!("demos-sched is not on PATH: no DEmOS comparison");
    }
    json.push(alternate_runs(bulkhead, spin, work, demos.is_some()));
    let mechanisms = mechanisms::main(spin, work);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load1 = load.split_whitespace().next().unwrap_or("0").to_string();
    println!(
        "load average (1 min) at the end: {load1} (other work on the CPUs inflates every figure)"
    );
    println!(
        "{{\"bench\":\"window-switch\",\"loadavg_1min\":{load1},\"baseline_ns\":{base_ns:.0},\"work_million_iterations\":{work},\"per_switch_us\":{{{}}},\"target_us_at_1ms\":15,\"target_ratio_to_demos\":0.25,\"demos_installed\":{},\"mechanisms\":{{{}}}}}",
        json.join(","),
        demos.is_some(),
        mechanisms.join(",")
    );
}

/// DEmOS's median overhead beside ours: the words printed and the JSON fields, the
/// ratio `null` unless DEmOS's median is positive (a ratio to 0 or less means nothing).
fn beside_demos(ours: f64, theirs: f64) -> (String, String) {
    let ratio = (theirs > 0.0).then(|| ours / theirs);
    let shown = ratio.map_or("-".to_string(), |r| format!("{r:.2}"));
    let json = ratio.map_or("null".to_string(), |r| format!("{r:.3}"));
    (
        format!("; DEmOS median {theirs:8.2} us (ratio {shown})"),
        format!(",\"demos_median_us\":{theirs:.3},\"ratio_to_demos\":{json}"),
    )
}

/// Two partitions alternating in 1 ms windows: every switch freezes one spin and thaws
/// the other, under `bulkhead run` and, when installed, under DEmOS with the same
/// description (the fair comparison: neither scheduler can skip a freeze here).
fn alternate_runs(bulkhead: &str, spin: &str, work: u64, demos: bool) -> String {
    let file = alternating(spin, work);
    let cfg = file.path();
    let Some((lo, med)) = alternate_under(bulkhead, &["run", cfg], spin, work) else {
        println!("two partitions alternating, 1 ms: bulkhead run failed");
        return "\"alternate_1\":null".into();
    };
    print!("two partitions alternating, 1 ms windows: overhead per switch min {lo:8.2} us, median {med:8.2} us");
    let mut entry = format!("\"alternate_1\":{{\"min_us\":{lo:.3},\"median_us\":{med:.3}");
    if let Some((_, theirs)) = demos
        .then(|| alternate_under("demos-sched", &["-c", cfg], spin, work))
        .flatten()
    {
        let (shown, fields) = beside_demos(med, theirs);
        print!("{shown}");
        entry += &fields;
    }
    println!();
    entry + "}"
}

/// Min and median overhead per switch of `program args` running the alternating
/// description, each run against a baseline taken just before it.
fn alternate_under(program: &str, args: &[&str], spin: &str, work: u64) -> Option<(f64, f64)> {
    let us: Vec<f64> = (0..RUNS)
        .filter_map(|_| {
            let base = baseline(spin, work);
            let out = Command::new(program).args(args).output().ok()?;
            // A run that printed no spin time gives no figure (not an infinite one).
            let t = Some(first_spin_ns(&out.stdout)).filter(|t| t.is_finite())?;
            out.status
                .success()
                .then(|| (t - 2.0 * base) / (t / 1e6) / 1e3)
        })
        .collect();
    (!us.is_empty()).then(|| (min(&us), median(us)))
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    /// `bulkhead run` prefixes the spins' lines; DEmOS does not: both are read.
    #[test]
    fn the_first_spin_is_read_with_or_without_the_process_prefix() {
        let ours = b"spin[0]: 2500000\nspin[1]: 2400000\n";
        assert_eq!(super::first_spin_ns(ours), 2_400_000.0);
        assert_eq!(super::first_spin_ns(b"2500000\n2600000\n"), 2_500_000.0);
    }
}
