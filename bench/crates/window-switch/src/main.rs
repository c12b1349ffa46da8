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
//! The alternating case is measured twice over: by wall times as above, and directly:
//! the spins run as `bulkhead-spin --gaps` and print when they stopped and resumed on
//! CLOCK_MONOTONIC, so that the CPU time each switch takes from the work (the outgoing
//! spin's last instant to the incoming one's first) is read per switch
//! ([`switch_losses`]), medians of [`ALTERNATE_RUNS`] runs, bulkhead's and DEmOS's
//! interleaved.
//!
//! Every side runs with the same wake-up latency bound: the bench holds the PM QoS
//! request that `bulkhead run` holds by default (0 µs, `bulkhead_os::cpu_latency`) for
//! its whole length, so DEmOS and the bare mechanisms get the polling idle CPUs that
//! bulkhead gets, and the ratio compares schedulers, not platform settings. With
//! `BULKHEAD_BENCH_CPU_LATENCY=off` no side has it (`bulkhead run` is then given
//! `--cpu-latency-us off`).
//!
//! Usage: bulkhead-bench-window-switch BULKHEAD SPIN [--power | --alternate | --mechanisms]
//! (`--alternate`, `--mechanisms`: that part alone). Last line: one JSON object.

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
    baseline_of(&[spin, &work.to_string()])
}

/// The wall time `spin_args` (a spin and its arguments) prints, run pinned alone on CPU 1.
pub(crate) fn baseline_of(spin_args: &[&str]) -> f64 {
    let out = Command::new("taskset")
        .args(["-c", "1"])
        .args(spin_args)
        .output()
        .expect("taskset");
    assert!(out.status.success(), "baseline run failed");
    spin_ns(&out.stdout)
}

/// Two partitions, each a spin of `work` alone in its own 1 ms window, alternating; the
/// spins report the intervals they did not run (`bulkhead-spin --gaps A|B`).
fn alternating(spin: &str, work: u64) -> TempFile {
    let path = std::env::temp_dir().join("bulkhead-bench-window-alternate.yaml");
    let window = |tag: &str| {
        format!(
            "{{length: 1, cpu: 1, be_processes: [{{cmd: {spin} --gaps {tag} {work}, budget: 1}}]}}"
        )
    };
    let yaml = format!("windows: [{}, {}]\n", window("A"), window("B"));
    std::fs::write(&path, yaml).expect("write config");
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
pub(crate) fn first_spin_ns(output: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(output);
    let times = text
        .lines()
        .filter(|l| gap(l).is_none())
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

/// The PM QoS wake-up latency request of every side (0 µs), unless
/// `BULKHEAD_BENCH_CPU_LATENCY=off`; said on stdout either way.
fn hold_cpu_latency() -> Option<bulkhead_os::cpu_latency::CpuLatency> {
    if no_latency_bound() {
        println!("CPU wake-up latency: no bound (BULKHEAD_BENCH_CPU_LATENCY=off)");
        return None;
    }
    match bulkhead_os::cpu_latency::request(0) {
        Ok(held) => {
            println!("CPU wake-up latency: bound to 0 us for every side (PM QoS)");
            Some(held)
        }
        Err(e) => {
            println!("CPU wake-up latency: no bound ({e})");
            None
        }
    }
}

fn no_latency_bound() -> bool {
    std::env::var("BULKHEAD_BENCH_CPU_LATENCY").is_ok_and(|v| v == "off")
}

/// `bulkhead run CFG`, without its own latency request when no side has one.
fn run_args(cfg: &str) -> Vec<&str> {
    let mut args = vec!["run", cfg];
    if no_latency_bound() {
        args.extend(["--cpu-latency-us", "off"]);
    }
    args
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
    let _latency = hold_cpu_latency();
    let work = calibrate(spin);
    if args.get(3).is_some_and(|a| a == "--power") {
        return power::main(bulkhead, spin, work);
    }
    if args.get(3).is_some_and(|a| a == "--mechanisms") {
        let json = mechanisms::main(spin, work);
        println!(
            "{{\"bench\":\"window-switch\",\"loadavg_1min\":{},\"mechanisms\":{{{}}}}}",
            load1(),
            json.join(",")
        );
        return;
    }
    if args.get(3).is_some_and(|a| a == "--alternate") {
        let entry = alternate_runs(bulkhead, spin, work, which("demos-sched").is_some());
        println!(
            "{{\"bench\":\"window-switch\",\"loadavg_1min\":{},\"per_switch_us\":{{{entry}}}}}",
            load1()
        );
        return;
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
                under(bulkhead, &run_args(cfg)).map(|t| per_switch(t, base))
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
    let load1 = load1();
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

/// Runs of the alternating case, bulkhead's and DEmOS's interleaved (one of each in turn,
/// after one baseline), so that a change of the machine's load meets both.
const ALTERNATE_RUNS: usize = 9;

/// One run of the alternating case: the overhead per switch from wall times (µs), and
/// from the spins' gaps ([`switch_losses`]) the median CPU time lost per switch (µs),
/// the switches seen and the overlaps.
struct Alternation {
    wall_us: f64,
    lost_us: f64,
    switches: usize,
    overlaps: usize,
}

/// Two partitions alternating in 1 ms windows: every switch freezes one spin and thaws
/// the other, under `bulkhead run` and, when installed, under DEmOS with the same
/// description (the fair comparison: neither scheduler can skip a freeze here).
fn alternate_runs(bulkhead: &str, spin: &str, work: u64, demos: bool) -> String {
    let file = alternating(spin, work);
    let cfg = file.path();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..ALTERNATE_RUNS {
        let base = baseline_of(&[spin, "--gaps", "base", &work.to_string()]);
        ours.extend(alternate_once(bulkhead, &run_args(cfg), base));
        if demos {
            theirs.extend(alternate_once("demos-sched", &["-c", cfg], base));
        }
    }
    let Some((ours_shown, ours_json)) = alternation_figures(&ours, "") else {
        println!("two partitions alternating, 1 ms: bulkhead run failed");
        return "\"alternate_1\":null".into();
    };
    print!("two partitions alternating, 1 ms windows: {ours_shown}");
    let mut entry = format!("\"alternate_1\":{{{ours_json}");
    if let Some((shown, json)) = alternation_figures(&theirs, "demos_") {
        let ratio = |f: fn(&Alternation) -> f64| {
            let (a, b) = (median_of(&ours, f), median_of(&theirs, f));
            if b > 0.0 {
                format!("{:.3}", a / b)
            } else {
                "null".into()
            }
        };
        let (lost, wall) = (ratio(|a| a.lost_us), ratio(|a| a.wall_us));
        print!("; DEmOS: {shown}; ratio {lost} (lost CPU time), {wall} (wall time)");
        entry += &format!(",{json},\"gap_ratio_to_demos\":{lost},\"ratio_to_demos\":{wall}");
    }
    println!();
    if let Some((floor, name)) = mechanisms::floor(spin, work) {
        println!("  floor: the same spins switched by this bench's own loop with bulkhead's mechanism ({name} freezer, the next thawed first and the last frozen 20 us later, the switcher on CPU 0): {floor:.2} us lost per switch");
        entry += &format!(",\"floor_gap_median_us\":{floor:.3},\"floor_mechanism\":\"{name}\"");
    }
    entry + "}"
}

fn median_of(runs: &[Alternation], f: fn(&Alternation) -> f64) -> f64 {
    median(runs.iter().map(f).collect())
}

/// The words printed and the JSON fields (names prefixed with `prefix`) of some runs of
/// the alternating case; `None` without runs.
fn alternation_figures(runs: &[Alternation], prefix: &str) -> Option<(String, String)> {
    if runs.is_empty() {
        return None;
    }
    let walls: Vec<f64> = runs.iter().map(|a| a.wall_us).collect();
    let losts: Vec<f64> = runs.iter().map(|a| a.lost_us).collect();
    let (lost_lo, lost) = (min(&losts), median(losts));
    let (wall_lo, wall) = (min(&walls), median(walls));
    let switches: usize = runs.iter().map(|a| a.switches).sum();
    let overlaps: usize = runs.iter().map(|a| a.overlaps).sum();
    let shown = format!(
        "CPU time lost per switch median {lost:.2} us (min {lost_lo:.2}; {switches} switches in {} runs, {overlaps} overlaps), wall-time overhead median {wall:.2} us (min {wall_lo:.2})",
        runs.len()
    );
    let json = format!(
        "\"{prefix}gap_median_us\":{lost:.3},\"{prefix}gap_min_us\":{lost_lo:.3},\"{prefix}switches\":{switches},\"{prefix}overlaps\":{overlaps},\"{prefix}median_us\":{wall:.3},\"{prefix}min_us\":{wall_lo:.3}"
    );
    Some((shown, json))
}

/// One run of `program args` on the alternating description against the baseline
/// `base` (ns); `None` if it failed or printed no spin time.
fn alternate_once(program: &str, args: &[&str], base: f64) -> Option<Alternation> {
    let out = Command::new(program).args(args).output().ok()?;
    // A run that printed no spin time gives no figure (not an infinite one).
    let t = Some(first_spin_ns(&out.stdout)).filter(|t| t.is_finite())?;
    if !out.status.success() {
        return None;
    }
    let (lost, overlaps) = switch_losses(&String::from_utf8_lossy(&out.stdout), 1_000_000);
    let switches = lost.len();
    // A run in which no switch was seen gives no figure.
    let lost_us =
        (switches > 0).then(|| median(lost.iter().map(|&ns| ns as f64 / 1e3).collect()))?;
    Some(Alternation {
        wall_us: (t - 2.0 * base) / (t / 1e6) / 1e3,
        lost_us,
        switches,
        overlaps,
    })
}

/// `gap TAG START END` in a line of `bulkhead-spin --gaps` (after `bulkhead run`'s
/// `NAME[i]: ` prefix, if any).
fn gap(line: &str) -> Option<(&str, u64, u64)> {
    let mut words = line.split_whitespace().skip_while(|w| *w != "gap").skip(1);
    let tag = words.next()?;
    let start = words.next()?.parse().ok()?;
    let end = words.next()?.parse().ok()?;
    Some((tag, start, end))
}

/// The CPU time each switch took from the work, ns, from the gaps two alternating spins
/// printed: each time one resumed after at least half a window away, from the other's
/// last reading before it stopped to this first reading after (the other's gap then may
/// be short: a switch made late shortens the next window). Second, the overlaps: how
/// often the other was still running then (no gap of it covers the instant; counted up
/// to the other's last resume, after which it may have ended).
pub(crate) fn switch_losses(output: &str, window_ns: u64) -> (Vec<u64>, usize) {
    let mut spins: std::collections::BTreeMap<&str, Vec<(u64, u64)>> = Default::default();
    for (tag, start, end) in output.lines().filter_map(gap) {
        spins.entry(tag).or_default().push((start, end));
    }
    let spins: Vec<&Vec<(u64, u64)>> = spins.values().collect();
    let [a, b] = spins[..] else {
        return (Vec::new(), 0);
    };
    let long = |g: &(u64, u64)| g.1 - g.0 >= window_ns / 2;
    let (mut lost, mut overlaps) = (Vec::new(), 0);
    for (me, other) in [(a, b), (b, a)] {
        let until = other.iter().map(|g| g.1).max().unwrap_or(0);
        for &(_, resumed) in me.iter().filter(|g| long(g) && g.1 <= until) {
            match other.iter().find(|o| o.0 <= resumed && resumed < o.1) {
                Some(o) => lost.push(resumed - o.0),
                None => overlaps += 1,
            }
        }
    }
    (lost, overlaps)
}

/// The load average over the last minute, as /proc/loadavg gives it.
fn load1() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace().next().unwrap_or("0").to_string()
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
        // The gaps' lines (`--gaps`) are not wall times.
        assert_eq!(
            super::first_spin_ns(b"A[0]: gap A 10 20\n2500000\n"),
            2_500_000.0
        );
    }

    /// A stops at 1000 and B resumes at 1030 (30 ns lost); B stops at 2000 and A resumes
    /// at 2010 (10 ns); at 2990 B resumes while A still runs (A's gap of 2500-2700 is
    /// over, and shorter than half a window: A's resume at 2700 is no switch): an
    /// overlap. B stops at 3900, A resumes at 4000 (100 ns). B's resume at 5000 lies in
    /// A's short gap 4950-5100 (a late switch shortened A's window): 50 ns lost. A's
    /// resume at 6500 comes after B's last resume (B may have ended): not counted.
    #[test]
    fn each_switch_loses_the_time_from_the_last_instant_of_one_to_the_first_of_the_other() {
        let out = "A[0]: gap A 1000 2010\n\
                   gap B 0 1030\n\
                   gap B 2000 2990\n\
                   gap A 2500 2700\n\
                   A[0]: gap A 3100 4000\n\
                   gap B 3900 5000\n\
                   gap A 4950 5100\n\
                   gap A 5200 6500\n";
        let (lost, overlaps) = super::switch_losses(out, 1000);
        assert_eq!(lost, vec![10, 100, 30, 50]);
        assert_eq!(overlaps, 1);
    }

    #[test]
    fn without_two_spins_no_switch_is_read() {
        assert_eq!(super::switch_losses("gap A 0 5000\n", 1000), (vec![], 0));
        assert_eq!(super::gap("gap A x 5"), None);
    }
}
