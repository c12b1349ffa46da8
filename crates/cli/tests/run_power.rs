//! `bulkhead run --power-policy` on a tree imitating CPUFreq (`--cpufreq-root`): the
//! frequencies each policy writes at window and slice boundaries (schedule log), the
//! files' final contents (restored), restoring after a SIGKILL, clear errors.

mod common;
use common::Scratch;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;

/// The tests of this file share the CPUFreq records directory: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn bulkhead(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(args)
        .output()
        .unwrap()
}

/// Two clusters imitating an i.MX8's: `policy0` (CPU 0, A53-like, governor `schedutil`,
/// `scaling_max_freq` lowered to 1104 MHz) and `policy1` (CPU 1, A72-like, already under
/// the `userspace` governor at 1056 MHz).
fn cpufreq_tree(dir: &Path) -> PathBuf {
    let root = dir.join("sys");
    let policy = |n: u32, files: &[(&str, &str)]| {
        let p = root.join(format!("devices/system/cpu/cpufreq/policy{n}"));
        std::fs::create_dir_all(&p).unwrap();
        for (name, text) in files {
            std::fs::write(p.join(name), format!("{text}\n")).unwrap();
        }
    };
    policy(
        0,
        &[
            ("affected_cpus", "0"),
            ("cpuinfo_min_freq", "600000"),
            ("cpuinfo_max_freq", "1200000"),
            (
                "scaling_available_frequencies",
                "600000 896000 1104000 1200000",
            ),
            ("scaling_governor", "schedutil"),
            ("scaling_max_freq", "1104000"),
            ("scaling_setspeed", "<unsupported>"),
        ],
    );
    policy(
        1,
        &[
            ("affected_cpus", "1"),
            ("cpuinfo_min_freq", "600000"),
            ("cpuinfo_max_freq", "1500000"),
            (
                "scaling_available_frequencies",
                "600000 1056000 1296000 1500000",
            ),
            ("scaling_governor", "userspace"),
            ("scaling_max_freq", "1500000"),
            ("scaling_setspeed", "1056000"),
        ],
    );
    root
}

fn file(root: &Path, policy: u32, name: &str) -> String {
    let p = root.join(format!("devices/system/cpu/cpufreq/policy{policy}/{name}"));
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

/// `(ms, cpu, kHz)` of the `cpu_frequency` lines of a schedule log.
fn frequencies(log: &Path) -> Vec<(u64, u32, u64)> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == "cpu_frequency")
        .map(|e| {
            let n = |k: &str| e[k].as_u64().unwrap();
            (n("t_ns") / MS, n("cpu") as u32, n("khz"))
        })
        .collect()
}

/// Runs `yaml` under `policy` on a fresh tree; returns the tree, the log's frequency
/// lines and the run's stderr.
fn run(
    name: &str,
    policy: &str,
    yaml: &str,
    timeout: &str,
) -> (Scratch, PathBuf, Vec<(u64, u32, u64)>, String) {
    let dir = Scratch::new(name);
    let root = cpufreq_tree(&dir.0);
    let desc = dir.file("system.yaml");
    std::fs::write(&desc, yaml).unwrap();
    let log = dir.file("log.jsonl");
    let out = bulkhead(&[
        "run",
        desc.to_str().unwrap(),
        "--power-policy",
        policy,
        "--cpufreq-root",
        root.to_str().unwrap(),
        "--timeout",
        timeout,
        "--schedule-log",
        log.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let changes = frequencies(&log);
    (dir, root, changes, stderr)
}

fn assert_restored(root: &Path) {
    assert_eq!(file(root, 0, "scaling_governor"), "schedutil");
    assert_eq!(file(root, 0, "scaling_max_freq"), "1104000");
    assert_eq!(file(root, 1, "scaling_governor"), "userspace");
    assert_eq!(
        file(root, 1, "scaling_setspeed"),
        "1056000",
        "the frequency another user set"
    );
}

const SC_BE: &str = "windows: [{length: 100, cpu: 0, sc_processes: [{cmd: sleep 30, budget: 40}], be_processes: [{cmd: sleep 30, budget: 100}]}]\n";

#[test]
#[ignore = "needs root: cgroups"]
fn minbe_switches_at_each_window_and_be_start_and_restores() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, root, changes, _) = run("power-minbe", "minbe", SC_BE, "350ms");
    let mut expected = Vec::new();
    for window in 0..4 {
        let t = window * 100;
        expected.extend([(t, 0, 1_200_000), (t, 1, 1_500_000)]);
        expected.extend([(t + 40, 0, 600_000), (t + 40, 1, 600_000)]);
    }
    assert_eq!(changes, expected);
    assert_restored(&root);
    // policy0's scaling_max_freq was raised to cpuinfo_max_freq for the run, then put
    // back; its scaling_setspeed keeps the last write (sysfs would read `<unsupported>`
    // again once the original governor is back).
    assert_eq!(file(&root, 0, "scaling_setspeed"), "600000");
}

#[test]
#[ignore = "needs root: cgroups"]
fn high_and_low_write_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, root, changes, _) = run("power-low", "low", SC_BE, "250ms");
    assert_eq!(changes, [(0, 0, 600_000), (0, 1, 600_000)]);
    assert_restored(&root);
    let (_dir, root, changes, _) = run("power-high", "HIGH", SC_BE, "250ms");
    assert_eq!(changes, [(0, 0, 1_200_000), (0, 1, 1_500_000)]);
    assert_restored(&root);
}

/// Two 100 ms windows; each slice asks for its own frequency (DEmOS
/// `per_slice_power_policy.yaml`, on CPUs 0 and 1 and fifteen times shorter).
const PER_SLICE: &str = "
partitions:
  - {name: SC1, processes: [{cmd: sleep 30, budget: 40}]}
  - {name: BE, processes: [{cmd: sleep 31, budget: 100}]}
windows:
  - length: 100
    slices:
      - {cpu: 0, sc_partition: SC1, frequency: 1200}
      - {cpu: 1, be_partition: BE, frequency: 600}
  - length: 100
    slices:
      - {cpu: 0, sc_partition: SC1, frequency: 896}
      - {cpu: 1, be_partition: BE, frequency: 1296}
";

#[test]
#[ignore = "needs root: cgroups"]
fn per_slice_writes_each_window_s_slice_frequencies_and_restores() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, root, changes, _) = run("power-ps", "per_slice", PER_SLICE, "350ms");
    assert_eq!(
        changes,
        [
            (0, 0, 1_200_000),
            (0, 1, 600_000),
            (100, 0, 896_000),
            (100, 1, 1_296_000),
            (200, 0, 1_200_000),
            (200, 1, 600_000),
            (300, 0, 896_000),
            (300, 1, 1_296_000)
        ]
    );
    assert_restored(&root);
    // The last frequency written stays in policy0's plain file.
    assert_eq!(file(&root, 0, "scaling_setspeed"), "896000");
}

#[test]
#[ignore = "needs root: cgroups"]
fn fixed_and_alternating_write_the_indexed_frequencies_and_restore() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, root, changes, _) = run("power-fixed", "imx8_fixed:1,2", SC_BE, "250ms");
    assert_eq!(changes, [(0, 0, 896_000), (0, 1, 1_296_000)]);
    assert_restored(&root);
    assert_eq!(file(&root, 0, "scaling_setspeed"), "896000");
    // Cluster 1's pair is equal: fixed from the start; cluster 0 alternates per window.
    let (_dir, root, changes, _) = run("power-alt", "alternating:0,3,1,1", SC_BE, "250ms");
    assert_eq!(
        changes,
        [
            (0, 1, 1_056_000),
            (0, 0, 600_000),
            (100, 0, 1_200_000),
            (200, 0, 600_000)
        ]
    );
    assert_restored(&root);
}

/// DEmOS `test_config/per_process_power_policy2.yaml`, on CPUs 0 and 1 and ten times
/// shorter.
const PER_PROCESS2: &str = "
partitions:
  - name: SC1
    processes:
      - {cmd: sleep 30, budget: 50, frequency: 1200}
  - name: BE
    processes:
      - {cmd: sleep 31, budget: 100, frequency: 600}
      - {cmd: sleep 32, budget: 100, frequency: 1296}
windows:
  - length: 150
    slices:
      - {cpu: 0, sc_partition: SC1}
      - {cpu: 1, be_partition: BE}
  - length: 150
    slices:
      - {cpu: 1, be_partition: BE}
";

#[test]
#[ignore = "needs root: cgroups"]
fn per_process_uses_the_frequencies_of_a_demos_config() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, root, changes, _) = run("power-pp", "per_process", PER_PROCESS2, "420ms");
    // As in bulkhead-power's policies test: SC1 at 1200 MHz on CPU 0; the BE processes
    // take turns on CPU 1 (600, 1296, 600 again with a leftover, 1296).
    assert_eq!(
        changes,
        [
            (0, 0, 1_200_000),
            (50, 1, 600_000),
            (150, 1, 1_296_000),
            (250, 1, 600_000),
            (400, 1, 1_296_000)
        ]
    );
    assert_restored(&root);
    assert_eq!(file(&root, 1, "scaling_governor"), "userspace");
}

#[test]
#[ignore = "needs root: cgroups"]
fn a_killed_run_s_settings_are_restored_by_the_next_run() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _clean = common::CleanLeftovers;
    let dir = Scratch::new("power-kill");
    let root = cpufreq_tree(&dir.0);
    let desc = dir.file("system.yaml");
    std::fs::write(&desc, SC_BE).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args([
            "run",
            desc.to_str().unwrap(),
            "-p",
            "low",
            "--timeout",
            "20s",
        ])
        .args(["--cpufreq-root", root.to_str().unwrap()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while file(&root, 0, "scaling_setspeed") != "600000" {
        assert!(Instant::now() < deadline, "the run never set the frequency");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Without its janitor (which restores them when the run dies), the next run does.
    let janitors = common::kill_janitor(child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(janitors, 1, "the run's janitor");
    assert_eq!(
        file(&root, 0, "scaling_governor"),
        "userspace",
        "left changed"
    );
    assert_eq!(file(&root, 1, "scaling_setspeed"), "600000", "left changed");
    let out = bulkhead(&["run", desc.to_str().unwrap(), "--timeout", "50ms"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("restored CPUFreq") && stderr.contains("policy0/scaling_governor"),
        "{stderr}"
    );
    assert_restored(&root);
}

#[test]
#[ignore = "needs root: cgroups"]
fn missing_or_unwritable_cpufreq_is_a_clear_error_and_changes_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Scratch::new("power-missing");
    let desc = dir.file("system.yaml");
    std::fs::write(&desc, SC_BE).unwrap();
    let empty = dir.file("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = bulkhead(&[
        "run",
        desc.to_str().unwrap(),
        "-p",
        "minbe",
        "--cpufreq-root",
        empty.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("empty/devices/system/cpu/cpufreq/policy0/scaling_governor does not exist"),
        "{stderr}"
    );
    // policy0's scaling_setspeed cannot be opened for writing: the governor changed
    // before is put back.
    let root = cpufreq_tree(&dir.0);
    let setspeed = root.join("devices/system/cpu/cpufreq/policy0/scaling_setspeed");
    std::fs::remove_file(&setspeed).unwrap();
    std::fs::create_dir(&setspeed).unwrap();
    let out = bulkhead(&[
        "run",
        desc.to_str().unwrap(),
        "-p",
        "minbe",
        "--cpufreq-root",
        root.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot open") && stderr.contains("policy0/scaling_setspeed"),
        "{stderr}"
    );
    assert_eq!(file(&root, 0, "scaling_governor"), "schedutil");
    assert_eq!(file(&root, 0, "scaling_max_freq"), "1104000");
    // A frequency the cluster does not offer.
    let root = cpufreq_tree(&dir.file("again"));
    let yaml = "windows: [{length: 100, slices: [{cpu: 0, frequency: 700, sc_processes: [{cmd: sleep 1, budget: 40}]}]}]\n";
    std::fs::write(&desc, yaml).unwrap();
    let out = bulkhead(&[
        "run",
        desc.to_str().unwrap(),
        "-p",
        "per_slice",
        "--cpufreq-root",
        root.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("700000 kHz") && stderr.contains("600000, 896000"),
        "{stderr}"
    );
    assert_restored(&root);
}

#[test]
fn an_unknown_policy_is_a_usage_error_naming_the_flag() {
    let out = bulkhead(&["run", "x.yaml", "--power-policy", "turbo"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--power-policy") && stderr.contains("minbe"),
        "{stderr}"
    );
}

#[test]
fn sim_reports_energy_per_cpu_in_stats_json() {
    let dir = Scratch::new("power-sim");
    let desc = dir.file("system.yaml");
    std::fs::write(
        &desc,
        "power:\n  clusters:\n    - {cpus: 0, idle_power: 0.1, operating_points: [{frequency: 600, power: 0.2}, {frequency: 1200, power: 0.8}]}\n\
         windows: [{length: 10, cpu: 0, sc_processes: [{cmd: sc, budget: 4}], be_processes: [{cmd: be, budget: 3}]}]\n",
    )
    .unwrap();
    let stats = dir.file("stats.json");
    let joules = |policy: &str| {
        let out = bulkhead(&[
            "sim",
            desc.to_str().unwrap(),
            "--for",
            "20ms",
            "--power-policy",
            policy,
            "--stats-json",
            stats.to_str().unwrap(),
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        let energy = &json["energy"];
        assert_eq!(energy["cpus"][0]["cpu"], 0);
        assert!(energy["cpus"][0]["mean_frequency_hz"].as_f64().unwrap() > 0.0);
        energy["total_joules"].as_f64().unwrap()
    };
    // 14 ms busy and 6 ms idle: 14 x 0.2 + 6 x 0.1 mJ at 600 MHz, 14 x 0.8 + 6 x 0.1 at 1200.
    let (low, high) = (joules("low"), joules("high"));
    assert!(
        (low - 0.0034).abs() < 1e-9 && (high - 0.0118).abs() < 1e-9,
        "{low} {high}"
    );
}

#[test]
fn analyze_min_energy_prints_the_chosen_frequency_and_the_saving() {
    let dir = Scratch::new("power-analyze");
    let desc = dir.file("system.yaml");
    std::fs::write(
        &desc,
        "system: {cpus: 0-1}\npower:\n  clusters:\n    - {cpus: 0, idle_power: 0.1, operating_points: [{frequency: 500, power: 0.5}, {frequency: 550, power: 0.6}, {frequency: 600, power: 0.7}, {frequency: 1000, power: 2}]}\n\
         partitions:\n  - {name: ctl, kind: rt, cpus: 0, tasks: [{name: t, cmd: ./t, budget: 5ms, period: 10ms, deadline: 9.5ms}]}\n",
    )
    .unwrap();
    let out = bulkhead(&["analyze", desc.to_str().unwrap(), "--min-energy", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = &json["min_energy"];
    assert_eq!(found["clusters"][0]["frequency_hz"], 550_000_000u64);
    assert!(found["saved_joules"].as_f64().unwrap() > 0.0049);
    let out = bulkhead(&["analyze", desc.to_str().unwrap(), "--min-energy"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cluster0 (CPUs 0): 550 MHz of 1000 MHz"),
        "{text}"
    );
}
