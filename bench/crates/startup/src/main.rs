//! Startup of `bulkhead run` with N = 100, 1000, 10000 partitions of one process
//! each (DEmOS thesis 5.3): time from launch to schedule start,
//! peak memory of the supervisor, file descriptors it holds per process. Baseline
//! in the same invocation: spawning the same N processes (`sleep 3600`, which the
//! description runs too) with `std::process::Command`, without cgroups or
//! scheduling: the floor of the cost.
//!
//! Each N runs in a child process of this program (`--one N`), so that its peak
//! memory is its own. After `run` returns, that child also looks for what the run
//! left behind: processes still in a cgroup of its instance (`/proc/*/cgroup`) or
//! still its children, and cgroups of its instance in the hierarchy; a run that left
//! anything counts as dirty.
//!
//! Usage: bulkhead-bench-startup [--runs K] [--sizes N,N,..] [--raw-output] (default: one
//! run of 100, 1000, 10000, through the output relay). Also prints the time from schedule start to the return of
//! `run` (the teardown: kill, wait, remove the cgroups). Last line: one JSON object.

use std::process::Command;
use std::time::{Duration, Instant};

const SIZES: [usize; 3] = [100, 1000, 10000];
/// The process of every partition (and of the baseline): blocks, costs no CPU.
const PROGRAM: &str = "sleep";
const ARG: &str = "3600";
/// `run --raw-output`: the partitions write to the supervisor's stdout and stderr
/// directly, without the output relay, whose two pipes per process (four descriptors
/// per process in all) do not fit 10000 processes under a hard limit of 20000.
const RAW: &str = "--raw-output";

fn peak_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// N partitions, each alone in a 1 ms window on CPU 0.
fn description(n: usize) -> String {
    // One uid per partition: the default range (systemd's DynamicUser range) has
    // fewer than 10000.
    let mut yaml = String::from("system: {user_range: 100000-199999}\npartitions:\n");
    for i in 0..n {
        yaml +=
            &format!("  - {{name: p{i}, processes: [{{cmd: {PROGRAM} {ARG}, budget: 1ms}}]}}\n");
    }
    yaml += "windows:\n";
    for i in 0..n {
        yaml += &format!("  - {{length: 1ms, cpu: 0, sc_partition: p{i}}}\n");
    }
    yaml
}

fn one(n: usize, raw: bool) {
    let system = bulkhead_model::load_str(&description(n), "startup.yaml")
        .expect("valid")
        .system;
    let options = bulkhead_runtime::RunOptions {
        timeout: Some(Duration::from_millis(1)),
        workdir: std::env::temp_dir(),
        raw_output: raw,
        ..Default::default()
    };
    let start = Instant::now();
    let outcome = match bulkhead_runtime::run(&system, &options) {
        Ok(outcome) => outcome,
        Err(e) => {
            // A refusal (e.g. the descriptor limit without --raw-output) is the row's
            // failure, printed by `measure`, not a panic.
            eprintln!("{e} (bench/startup: {RAW} runs without the output relay)");
            std::process::exit(1);
        }
    };
    let teardown = start.elapsed().saturating_sub(outcome.startup);
    let (processes, cgroups) = left_behind();
    println!(
        "{{\"n\":{n},\"startup_s\":{:.4},\"teardown_s\":{:.4},\"peak_kb\":{},\"fds_per_process\":{:.3},\"left_processes\":{processes},\"left_cgroups\":{cgroups}}}",
        outcome.startup.as_secs_f64(),
        teardown.as_secs_f64(),
        peak_kb(),
        outcome.fds_held as f64 / n as f64
    );
}

/// What a run of this process left: processes (in a cgroup of one of its instances,
/// or children not yet exited) and instance cgroups (`bulkhead-<own pid>-*`).
fn left_behind() -> (usize, usize) {
    let me = std::process::id();
    let prefix = format!("bulkhead-{me}-");
    let mut processes = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // After the command's closing parenthesis: state, ppid.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let mut fields = rest.split_whitespace();
        let (state, ppid) = (fields.next().unwrap_or("Z"), fields.next().unwrap_or("0"));
        let child = ppid == me.to_string() && state != "Z";
        if pid != me && (cgroup.contains(&prefix) || child) {
            processes += 1;
        }
    }
    let hierarchy = bulkhead_runtime::Hierarchy::detect().expect("cgroups");
    let cgroups = hierarchy
        .bases()
        .into_iter()
        .flat_map(|base| std::fs::read_dir(base).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .count();
    (processes, cgroups)
}

/// Spawning N processes without bulkhead, then killing them: the seconds each took
/// (the kill is one SIGKILL and one wait per process).
fn baseline(n: usize) -> (f64, f64) {
    let start = Instant::now();
    let mut children: Vec<_> = (0..n)
        .map(|_| Command::new(PROGRAM).arg(ARG).spawn().expect("spawn"))
        .collect();
    let spawned = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for c in &mut children {
        let _ = c.kill();
    }
    for c in &mut children {
        let _ = c.wait();
    }
    (spawned, start.elapsed().as_secs_f64())
}

/// The 1-minute load average now (what else the machine runs meanwhile).
fn loadavg() -> f64 {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1.0)
}

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let raw = args.iter().any(|a| a == RAW);
    args.retain(|a| a != RAW);
    if args.get(1).map(String::as_str) == Some("--one") {
        one(args[2].parse().expect("N"), raw);
        return;
    }
    let mut runs = 1;
    let mut sizes = SIZES.to_vec();
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        let value = rest.next().expect("a value after the option");
        match arg.as_str() {
            "--runs" => runs = value.parse().expect("--runs: a number"),
            "--sizes" => {
                sizes = value
                    .split(',')
                    .map(|n| n.parse().expect("--sizes: numbers"))
                    .collect()
            }
            _ => panic!("usage: bulkhead-bench-startup [--runs K] [--sizes N,N,..] [{RAW}]"),
        }
    }
    let me = std::env::current_exe().expect("own path");
    let mut rows = Vec::new();
    let mut clean = 0;
    for n in sizes {
        for _ in 0..runs {
            let Some(row) = measure(&me, n, raw) else {
                continue;
            };
            clean += usize::from(row.contains("\"left_processes\":0,\"left_cgroups\":0"));
            rows.push(row);
        }
    }
    println!("runs that left nothing behind: {clean} of {}", rows.len());
    println!(
        "{{\"bench\":\"startup\",\"runs\":[{}],\"clean_runs\":{clean},\"targets\":{{\"1000_s\":0.5,\"10000_s\":5,\"fds_per_process\":2}}}}",
        rows.join(",")
    );
}

/// One run of N partitions in a child process, with its baseline; the JSON row.
fn measure(me: &std::path::Path, n: usize, raw: bool) -> Option<String> {
    let load = loadavg();
    let out = Command::new(me)
        .args(["--one", &n.to_string()])
        .args(raw.then_some(RAW))
        .output()
        .expect("run child");
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(row) = text.lines().rev().find(|l| l.starts_with('{')) else {
        println!(
            "N = {n:>5}: failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    };
    let (base, base_teardown) = baseline(n);
    let field = |key: &str| -> f64 {
        let at = row.find(&format!("\"{key}\":")).expect("field") + key.len() + 3;
        row[at..].split([',', '}']).next().unwrap().parse().unwrap()
    };
    println!(
        "N = {n:>5}: launch to schedule start {:7.3} s (plain spawn of N processes: {base:7.3} s, ratio {:5.2}), teardown {:7.3} s (plain kill and wait: {base_teardown:7.3} s), peak memory {:8.0} KiB, {:.2} fds per process, left behind: {} processes, {} cgroups",
        field("startup_s"),
        field("startup_s") / base,
        field("teardown_s"),
        field("peak_kb"),
        field("fds_per_process"),
        field("left_processes"),
        field("left_cgroups"),
    );
    println!("        load average before the run: {load:.2}");
    Some(format!(
        "{},\"baseline_spawn_s\":{base:.4},\"baseline_teardown_s\":{base_teardown:.4},\"loadavg_1min\":{load:.2}}}",
        row.trim_end_matches('}')
    ))
}
