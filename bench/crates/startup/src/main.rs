//! Startup of `bulkhead run` with N = 100, 1000, 10000 partitions of one process
//! each (DEmOS thesis 5.3): time from launch to schedule start,
//! peak memory of the supervisor, file descriptors it holds per process. Baseline
//! in the same invocation: spawning the same N processes (`sleep 3600`, which the
//! description runs too) with `std::process::Command`, without cgroups or
//! scheduling: the floor of the cost.
//!
//! Each N runs in a child process of this program (`--one N`), so that its peak
//! memory is its own. Usage: bulkhead-bench-startup. Last line: one JSON object.

use std::process::Command;
use std::time::{Duration, Instant};

const SIZES: [usize; 3] = [100, 1000, 10000];
/// The process of every partition (and of the baseline): blocks, costs no CPU.
const PROGRAM: &str = "sleep";
const ARG: &str = "3600";

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
    let mut yaml = String::from("partitions:\n");
    for i in 0..n {
        yaml += &format!("  - {{name: p{i}, processes: [{{cmd: {PROGRAM} {ARG}, budget: 1}}]}}\n");
    }
    yaml += "windows:\n";
    for i in 0..n {
        yaml += &format!("  - {{length: 1, cpu: 0, sc_partition: p{i}}}\n");
    }
    yaml
}

fn one(n: usize) {
    let system = bulkhead_model::load_str(&description(n), "startup.yaml")
        .expect("valid")
        .system;
    let options = bulkhead_runtime::RunOptions {
        timeout: Some(Duration::from_millis(1)),
        workdir: std::env::temp_dir(),
        ..Default::default()
    };
    let outcome = bulkhead_runtime::run(&system, &options).expect("run");
    println!(
        "{{\"n\":{n},\"startup_s\":{:.4},\"peak_kb\":{},\"fds_per_process\":{:.3}}}",
        outcome.startup.as_secs_f64(),
        peak_kb(),
        outcome.fds_held as f64 / n as f64
    );
}

/// Spawning N processes without bulkhead, then killing them.
fn baseline(n: usize) -> f64 {
    let start = Instant::now();
    let mut children: Vec<_> = (0..n)
        .map(|_| Command::new(PROGRAM).arg(ARG).spawn().expect("spawn"))
        .collect();
    let elapsed = start.elapsed().as_secs_f64();
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    elapsed
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--one") {
        one(args[2].parse().expect("N"));
        return;
    }
    let me = std::env::current_exe().expect("own path");
    let mut rows = Vec::new();
    for n in SIZES {
        let out = Command::new(&me)
            .args(["--one", &n.to_string()])
            .output()
            .expect("run child");
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(row) = text.lines().rev().find(|l| l.starts_with('{')) else {
            println!(
                "N = {n:>5}: failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            continue;
        };
        let base = baseline(n);
        let field = |key: &str| -> f64 {
            let at = row.find(&format!("\"{key}\":")).expect("field") + key.len() + 3;
            row[at..].split([',', '}']).next().unwrap().parse().unwrap()
        };
        println!(
            "N = {n:>5}: launch to schedule start {:7.3} s (plain spawn of N processes: {base:7.3} s, ratio {:5.2}), peak memory {:8.0} KiB, {:.2} fds per process",
            field("startup_s"),
            field("startup_s") / base,
            field("peak_kb"),
            field("fds_per_process")
        );
        rows.push(format!(
            "{},\"baseline_spawn_s\":{base:.4}}}",
            row.trim_end_matches('}')
        ));
    }
    println!(
        "{{\"bench\":\"startup\",\"runs\":[{}],\"targets\":{{\"1000_s\":0.5,\"10000_s\":5,\"fds_per_process\":2}}}}",
        rows.join(",")
    );
}
