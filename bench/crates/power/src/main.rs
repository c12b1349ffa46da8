//! Power policies: (1) the cost of one frequency write through the CPUFreq backend
//! (`bulkhead_runtime::cpufreq`, a descriptor kept open, as DEmOS does), against the
//! in-run baseline of opening, writing and closing `scaling_setspeed` for each write;
//! on an imitation tree in a temporary directory, or under `CPUFREQ_ROOT` (e.g. `/sys`,
//! as root, on a machine with CPUFreq). (2) Energy per policy in simulation on the
//! DEmOS examples with an i.MX8-like power section (DEmOS thesis 5.4: A53 at 0.6-1.2
//! GHz), and `--min-energy` on the DriveOS example. Usage: `bulkhead-bench-power [WRITES]`.
//! Last line: one JSON object.

use bulkhead_power::Policy;
use bulkhead_runtime::cpufreq::Cpufreq;
use bulkhead_sim::{from_system, simulate, BuildOptions, Options};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// An i.MX8-like power model on CPUs 0 and 1 (one cluster each; powers illustrative).
const POWER: &str = "
power:
  clusters:
    - {cpus: 0, idle_power: 0.05, operating_points: [{frequency: 600, power: 0.15}, {frequency: 896, power: 0.25}, {frequency: 1104, power: 0.36}, {frequency: 1200, power: 0.42}]}
    - {cpus: 1, idle_power: 0.05, operating_points: [{frequency: 600, power: 0.15}, {frequency: 896, power: 0.25}, {frequency: 1104, power: 0.36}, {frequency: 1200, power: 0.42}]}
";

fn imitation_tree(dir: &Path) {
    let policy = dir.join("devices/system/cpu/cpufreq/policy0");
    std::fs::create_dir_all(&policy).unwrap();
    for (name, text) in [
        ("affected_cpus", "0"),
        ("cpuinfo_min_freq", "600000"),
        ("cpuinfo_max_freq", "1200000"),
        (
            "scaling_available_frequencies",
            "600000 896000 1104000 1200000",
        ),
        ("scaling_governor", "schedutil"),
        ("scaling_max_freq", "1200000"),
        ("scaling_setspeed", "<unsupported>"),
    ] {
        std::fs::write(policy.join(name), format!("{text}\n")).unwrap();
    }
}

/// Nanoseconds per write: (kept descriptor, open-write-close each time).
fn write_cost(root: &Path, records: &Path, writes: u32) -> (f64, f64) {
    let cpufreq = Cpufreq::take(root, records, "bench").expect("CPUFreq under the root");
    let clusters = cpufreq.clusters();
    let list = clusters[0]
        .available_khz
        .clone()
        .unwrap_or(vec![clusters[0].min_khz, clusters[0].max_khz]);
    let (low, high) = (list[0], *list.last().unwrap());
    let started = Instant::now();
    for i in 0..writes {
        cpufreq.set(0, if i % 2 == 0 { low } else { high }).unwrap();
    }
    let kept = started.elapsed().as_nanos() as f64 / writes as f64;
    let path = root.join("devices/system/cpu/cpufreq/policy0/scaling_setspeed");
    let started = Instant::now();
    for i in 0..writes {
        let khz = if i % 2 == 0 { low } else { high };
        std::fs::write(&path, khz.to_string()).unwrap();
    }
    let reopened = started.elapsed().as_nanos() as f64 / writes as f64;
    (kept, reopened)
}

fn energy(file: &str, policy: &str) -> f64 {
    let text = std::fs::read_to_string(file).unwrap() + POWER;
    let system = bulkhead_model::load_str(&text, file).unwrap().system;
    let options = BuildOptions {
        power_policy: Some(Policy::parse(policy).unwrap()),
        ..BuildOptions::default()
    };
    let spec = from_system(&system, &options).unwrap();
    let mut events = Vec::new();
    let report = simulate(&spec, Options::until(10_000_000_000), &mut events).unwrap();
    report.energy.unwrap().total_joules
}

fn main() {
    let writes: u32 = std::env::args()
        .nth(1)
        .map_or(2_000, |a| a.parse().expect("WRITES"));
    let scratch = std::env::temp_dir().join(format!("bulkhead-bench-power-{}", std::process::id()));
    let records = scratch.join("records");
    let root = match std::env::var_os("CPUFREQ_ROOT") {
        Some(root) => PathBuf::from(root),
        None => {
            imitation_tree(&scratch);
            scratch.clone()
        }
    };
    let (kept, reopened) = write_cost(&root, &records, writes);
    println!("frequency write, descriptor kept open: {kept:.0} ns; open-write-close: {reopened:.0} ns ({writes} writes, root {})", root.display());
    let mut policies = serde_json::Map::new();
    for file in [
        "examples/demos-window-schedule.yaml",
        "examples/demos-simplified.yaml",
    ] {
        let mut per = serde_json::Map::new();
        for policy in ["none", "high", "low", "minbe"] {
            let joules = energy(file, policy);
            println!("{file}: {policy}: {joules:.3} J in 10 s of simulated time");
            per.insert(policy.into(), joules.into());
        }
        policies.insert(file.into(), per.into());
    }
    let text = std::fs::read_to_string("examples/driveos.yaml").unwrap() + POWER;
    let system = bulkhead_model::load_str(&text, "driveos.yaml")
        .unwrap()
        .system;
    let found = bulkhead_analysis::energy::min_energy(&system, &Default::default()).unwrap();
    let chosen: Vec<Option<u64>> = found.clusters.iter().map(|c| c.frequency_hz).collect();
    println!(
        "examples/driveos.yaml --min-energy: {chosen:?} Hz, {:.6} J saved per {} ns hyperperiod",
        found.saved_joules, found.hyperperiod_ns
    );
    let _ = std::fs::remove_dir_all(&scratch);
    println!(
        "{}",
        serde_json::json!({
            "write_ns_kept_fd": kept,
            "write_ns_reopen_baseline": reopened,
            "sim_energy_joules": policies,
            "driveos_min_energy_hz": chosen,
            "driveos_saved_joules": found.saved_joules,
        })
    );
}
