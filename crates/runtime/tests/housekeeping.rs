//! Housekeeping isolation on the real machine (root): what `isolate` moves off CPU 0 is
//! really off it, and every setting is back exactly as before after the drop, and after a
//! SIGKILL of the isolating process once `restore_stale` ran. Skips with a reason where the
//! files are not writable or the machine has one CPU.

use bulkhead_model::CpuSet;
use bulkhead_runtime::housekeeping::{Housekeeping, RECORD_DIR};
use std::fs;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// Both tests change the same machine-wide settings: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Every setting `isolate` may change: (file or kernel thread, value).
fn snapshot() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut files = vec![
        "/sys/devices/virtual/workqueue/cpumask".to_string(),
        "/proc/irq/default_smp_affinity".to_string(),
    ];
    for e in fs::read_dir("/proc/irq").unwrap().flatten() {
        if e.path().is_dir() {
            files.push(format!("{}/smp_affinity_list", e.path().display()));
        }
    }
    for f in files {
        out.push((f.clone(), fs::read_to_string(&f).unwrap_or_default()));
    }
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.parse::<u32>().is_err() {
            continue;
        }
        let status = fs::read_to_string(e.path().join("status")).unwrap_or_default();
        let kthread = status.lines().any(|l| l == "PPid:\t2") || name == "2";
        if let Some(l) = status.lines().find(|l| l.starts_with("Cpus_allowed_list")) {
            if kthread {
                out.push((format!("kthread {name}"), l.to_string()));
            }
        }
    }
    out.sort();
    out
}

/// Whether the machine lets this test isolate CPU 0, or why not.
/// Asserts `after` equals `before` for every setting present in both (kernel workers come
/// and go meanwhile).
fn assert_restored(before: &[(String, String)], after: &[(String, String)], what: &str) {
    let common = |a: &[(String, String)], b: &[(String, String)]| -> Vec<(String, String)> {
        a.iter()
            .filter(|(k, _)| b.iter().any(|(k2, _)| k2 == k))
            .cloned()
            .collect()
    };
    assert_eq!(common(after, before), common(before, after), "{what}");
}

/// Why the tests (ignored without root) cannot run on this machine, if it legitimately
/// lacks what they need; panics if the workqueue mask, which root may write, is not writable.
fn skip_reason() -> Option<String> {
    let online = fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    // A root CI machine may have one CPU: there is no other CPU to isolate CPU 0 from.
    if CpuSet::parse(online.trim()).map_or(0, |s| s.len()) < 2 {
        return Some("needs two online CPUs".into());
    }
    // As root the workqueue mask is writable: a failure, not a skip, when it is not.
    let wq = "/sys/devices/virtual/workqueue/cpumask";
    let value = fs::read_to_string(wq).unwrap_or_default();
    if let Err(e) = fs::write(wq, value.trim()) {
        panic!("needs root and a writable {wq}: {e}");
    }
    // Another bulkhead running on this machine (a benchmark, another suite) may hold
    // the machine's isolation; this test must not undo it.
    let live = fs::read_dir(RECORD_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("housekeeping-"));
    live.then(|| format!("another process holds an isolation record in {RECORD_DIR}"))
}

fn cpu0() -> CpuSet {
    CpuSet::parse("0").unwrap()
}

/// Checks that nothing `isolate` listed as changed still allows CPU 0.
fn assert_off_cpu0(hk: &Housekeeping) {
    assert!(
        !hk.changed().is_empty(),
        "nothing was changed: {:?}",
        hk.warnings()
    );
    let wq = fs::read_to_string("/sys/devices/virtual/workqueue/cpumask").unwrap();
    let bits = u32::from_str_radix(wq.trim().rsplit(',').next().unwrap(), 16).unwrap();
    assert_eq!(
        bits & 1,
        0,
        "unbound workqueues still allowed on CPU 0: {wq}"
    );
    for line in hk.changed() {
        let path = line.split(' ').next().unwrap();
        if path.ends_with("smp_affinity_list") {
            let now = CpuSet::parse(fs::read_to_string(path).unwrap().trim()).unwrap();
            assert!(!now.contains(0), "{path} still allows CPU 0: {now}");
        }
    }
    let moved = hk
        .changed()
        .into_iter()
        .filter(|l| l.starts_with("kernel thread"));
    for line in moved {
        let pid = line.split(' ').nth(2).unwrap();
        let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if let Some(l) = status.lines().find(|l| l.starts_with("Cpus_allowed_list")) {
            let cpus = CpuSet::parse(l.split('\t').nth(1).unwrap()).unwrap();
            assert!(!cpus.contains(0), "kernel thread {pid} still on CPU 0: {l}");
        }
    }
}

#[test]
#[ignore = "needs root: IRQ affinities and workqueue masks"]
fn isolates_and_restores_exactly() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason() {
        eprintln!("skipping isolates_and_restores_exactly: {why}");
        return;
    }
    let before = snapshot();
    let hk = Housekeeping::isolate(&cpu0()).expect("isolate");
    for w in hk.warnings() {
        eprintln!("warning: {w}");
    }
    assert_off_cpu0(&hk);
    let record = format!("{RECORD_DIR}/housekeeping-{}", std::process::id());
    let text = fs::read_to_string(&record).expect("record written");
    assert!(text.starts_with(&format!("owner {} ", std::process::id())));
    assert_eq!(text.lines().count(), hk.changed().len() + 1);
    let me = std::process::id();
    assert!(
        bulkhead_os::cpu_latency::held_by(me),
        "no CPU latency request held while isolated"
    );
    drop(hk);
    assert!(
        !bulkhead_os::cpu_latency::held_by(me),
        "the CPU latency request outlived the isolation"
    );
    assert_restored(
        &before,
        &snapshot(),
        "settings not restored exactly by the drop",
    );
    assert!(
        !std::path::Path::new(&record).exists(),
        "record left behind"
    );
}

/// Runs only as the child of `a_killed_isolation_is_restored_by_restore_stale`.
#[test]
#[ignore = "the child process of another test, run by it"]
fn isolating_child() {
    if std::env::var_os("BULKHEAD_HK_CHILD").is_none() {
        return;
    }
    let hk = Housekeeping::isolate(&cpu0()).expect("isolate");
    println!("isolated {}", hk.changed().len());
    std::thread::sleep(std::time::Duration::from_secs(30));
}

#[test]
#[ignore = "needs root: IRQ affinities and workqueue masks"]
fn a_killed_isolation_is_restored_by_restore_stale() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason() {
        eprintln!("skipping a_killed_isolation_is_restored_by_restore_stale: {why}");
        return;
    }
    let before = snapshot();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "isolating_child", "--ignored", "--nocapture"])
        .env("BULKHEAD_HK_CHILD", "1")
        .stdout(Stdio::piped())
        .spawn()
        .expect("child test");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let isolated = lines.find(|l| l.as_ref().is_ok_and(|l| l.starts_with("isolated ")));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(isolated.is_some(), "the child did not isolate");
    let killed = snapshot();
    let wq = |s: &[(String, String)]| {
        s.iter()
            .find(|(k, _)| k.ends_with("workqueue/cpumask"))
            .cloned()
    };
    assert_ne!(
        wq(&killed),
        wq(&before),
        "SIGKILL should leave the settings changed"
    );
    let report = Housekeeping::restore_stale();
    assert!(
        report.iter().all(|l| l.starts_with("restored ")),
        "{report:?}"
    );
    assert_restored(
        &before,
        &snapshot(),
        "restore_stale did not restore exactly",
    );
    let record = format!("{RECORD_DIR}/housekeeping-{}", child.id());
    assert!(!std::path::Path::new(&record).exists(), "stale record left");
}
