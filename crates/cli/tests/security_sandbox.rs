//! The sandbox of be partitions, attacked from inside through `bulkhead run`: each attack
//! fails with the default sandbox and succeeds once the partition relaxes the part that
//! stops it (`sandbox: {...: false}`), which shows the attack is real and the part is what
//! holds (docs/security.md). Needs root (partition users, cgroups, namespaces).

mod common;
use common::{bulkhead, exclusive_cpus_lock, run_probe, value, Scratch};

/// Runs one be partition on CPU 1 whose process runs `script` (with `@D@` the scratch
/// directory) with the extra partition keys `keys`; returns what the script wrote to
/// `@D@/report` and bulkhead's stderr.
fn run_be(dir: &Scratch, keys: &str, script: &str) -> (String, String) {
    let d = dir.0.display().to_string();
    let desc = format!(
        "system: {{}}\npartitions:\n  - {{name: ivi, cpus: 1{keys}, processes: [\"sh {d}/probe.sh\"]}}\n"
    );
    run_probe(dir, &desc, &script.replace("@D@", &d))
}

/// As [`run_be`], for a windowed partition (the BE slot of a 20 ms window on CPU 1; an
/// SC process that ends before the stop would fail the run).
fn run_windowed(dir: &Scratch, keys: &str, script: &str) -> (String, String) {
    let d = dir.0.display().to_string();
    let desc = format!(
        "windows:\n  - length: 20\n    slices:\n      - {{cpu: 1, be_partition: ivi}}\npartitions:\n  - {{name: ivi{keys}, processes: [{{budget: 5, cmd: \"sh {d}/probe.sh\"}}]}}\n"
    );
    run_probe(dir, &desc, &script.replace("@D@", &d))
}

/// As root in its partition: the capability bounding set, a switch of its shell to
/// SCHED_FIFO, a change of its affinity (to its own CPU 1), an I/O priority in the
/// real-time class; then, through perl's `syscall`, an io_uring instance, locked memory
/// (`mlock` of an unmapped page: ENOMEM when the call is let through) and the size of
/// the kernel's log (`syslog`, which needs CAP_SYSLOG) and a global expedited memory
/// barrier (`membarrier`, an interrupt to every CPU running a registered process): each
/// prints its result and errno. `@IO_URING_SETUP@`, `@MLOCK@`, `@SYSLOG@`,
/// `@MEMBARRIER@`: the calls' numbers.
const PRIVILEGED: &str = r#"
exec > @D@/report.tmp 2>&1
echo capbnd=$(grep ^CapBnd: /proc/self/status | cut -f2)
echo capeff=$(grep ^CapEff: /proc/self/status | cut -f2)
chrt -f -p 10 $$ >/dev/null 2>&1; echo chrt=$?
chrt -o -p 0 $$ >/dev/null 2>&1
taskset -p 2 $$ >/dev/null 2>&1; echo taskset=$?
ionice -c 1 -p $$ >/dev/null 2>&1; echo ionice=$?
perl -e '$p = "\0" x 120; $r = syscall(@IO_URING_SETUP@, 1, $p); print "io_uring=", $r < 0 ? $!+0 : 0, "\n"'
perl -e '$r = syscall(@MLOCK@, 0, 4096); print "mlock=", $r < 0 ? $!+0 : 0, "\n"'
perl -e '$r = syscall(@SYSLOG@, 10, 0, 0); print "syslog=", $r < 0 ? $!+0 : 0, "\n"'
perl -e '$r = syscall(@MEMBARRIER@, 2, 0); print "membarrier=", $r < 0 ? $!+0 : 0, "\n"'
mv @D@/report.tmp @D@/report
"#;

/// [`PRIVILEGED`] with the system call numbers of this machine.
fn privileged() -> String {
    PRIVILEGED
        .replace("@IO_URING_SETUP@", &libc::SYS_io_uring_setup.to_string())
        .replace("@MLOCK@", &libc::SYS_mlock.to_string())
        .replace("@SYSLOG@", &libc::SYS_syslog.to_string())
        .replace("@MEMBARRIER@", &libc::SYS_membarrier.to_string())
}

/// The errno of each system call [`PRIVILEGED`] makes when the seccomp filter refuses
/// it, and when it lets it through (io_uring and syslog succeed, `mlock` of an unmapped
/// page fails with ENOMEM).
const CALLS: [(&str, i32, i32); 4] = [
    ("io_uring", libc::EPERM, 0),
    ("mlock", libc::EPERM, libc::ENOMEM),
    ("syslog", libc::EPERM, 0),
    ("membarrier", libc::EPERM, 0),
];

/// Whether each call of [`CALLS`] got the errno it gets with the filter (`filtered`) or
/// without.
fn assert_calls(report: &str, filtered: bool, ctx: &str) {
    for (call, refused, allowed) in CALLS {
        let expected = if filtered { refused } else { allowed };
        assert_eq!(
            value(report, call),
            Some(expected.to_string().as_str()),
            "{call}: {ctx}"
        );
    }
}

#[test]
#[ignore = "needs root: users and cgroups"]
fn a_be_partition_has_no_capabilities_and_may_not_take_real_time_scheduling() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-sandbox-caps");
    let zero = "0000000000000000";

    // Even as root, the default sandbox leaves no capability and refuses every attempt.
    let (report, stderr) = run_be(&dir, ", user: root", &privileged());
    let ctx = format!("{report}\n{stderr}");
    assert_eq!(value(&report, "capbnd"), Some(zero), "{ctx}");
    assert_eq!(value(&report, "capeff"), Some(zero), "{ctx}");
    for attack in ["chrt", "taskset", "ionice"] {
        assert_ne!(value(&report, attack), Some("0"), "{attack}: {ctx}");
        assert!(value(&report, attack).is_some(), "{attack}: {ctx}");
    }

    // With the host root's capabilities back, the seccomp filter alone still refuses
    // them.
    let keys = ", user: root, sandbox: {no_capabilities: false, private_users: false}";
    let (report, stderr) = run_be(&dir, keys, &privileged());
    let ctx = format!("{report}\n{stderr}");
    assert_ne!(value(&report, "capbnd"), Some(zero), "{ctx}");
    for attack in ["chrt", "taskset", "ionice"] {
        assert_eq!(value(&report, attack), Some("1"), "{attack}: {ctx}");
    }
    assert_calls(&report, true, &ctx);

    // Without either, every attack succeeds: the two parts are what refused them.
    let keys =
        ", user: root, sandbox: {no_capabilities: false, seccomp: false, private_users: false}";
    let (report, stderr) = run_be(&dir, keys, &privileged());
    let ctx = format!("{report}\n{stderr}");
    for attack in ["chrt", "taskset", "ionice"] {
        assert_eq!(value(&report, attack), Some("0"), "{attack}: {ctx}");
    }
    assert_calls(&report, false, &ctx);
}

/// A windowed process of a be partition gets the same sandbox as an unwindowed one.
#[test]
#[ignore = "needs root: users and cgroups"]
fn a_windowed_be_process_gets_the_same_sandbox() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-sandbox-windowed");
    let (report, stderr) = run_windowed(&dir, ", user: root", &privileged());
    let ctx = format!("{report}\n{stderr}");
    assert_eq!(value(&report, "capbnd"), Some("0000000000000000"), "{ctx}");
    for attack in ["chrt", "taskset"] {
        assert_eq!(value(&report, attack), Some("1"), "{attack}: {ctx}");
    }
    let keys =
        ", user: root, sandbox: {no_capabilities: false, seccomp: false, private_users: false}";
    let (report, stderr) = run_windowed(&dir, keys, &privileged());
    let ctx = format!("{report}\n{stderr}");
    assert_ne!(value(&report, "capbnd"), Some("0000000000000000"), "{ctx}");
    assert_eq!(value(&report, "chrt"), Some("0"), "{ctx}");
}

/// Removes the files a test may have left on the host, even when it fails.
struct HostFiles(Vec<std::path::PathBuf>);

impl Drop for HostFiles {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Partition `w` writes `name` in `/tmp` and `/dev/shm`, then stays 2 s; partition `r`
/// then looks for both. Returns whether the host saw the files while `w` ran, whether
/// it still sees them after the run, and `r`'s report.
fn leak(dir: &Scratch, keys: &str, name: &str) -> (bool, bool, String) {
    let d = dir.0.display().to_string();
    let writer = format!(
        "sh -c 'echo secret > /tmp/{name} && echo secret > /dev/shm/{name}; echo $? > {d}/w.tmp; mv {d}/w.tmp {d}/w; sleep 2'"
    );
    let reader = format!(
        "sh -c 'while [ ! -s {d}/w ]; do sleep 0.05; done; test -e /tmp/{name}; echo tmp=$? > {d}/r.tmp; test -e /dev/shm/{name}; echo shm=$? >> {d}/r.tmp; mv {d}/r.tmp {d}/r'"
    );
    let desc = format!(
        "system: {{}}\npartitions:\n  - {{name: w, cpus: 1{keys}, processes: [\"{writer}\"]}}\n  - {{name: r, cpus: 1{keys}, processes: [\"{reader}\"]}}\n"
    );
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    for f in ["w", "r"] {
        let _ = std::fs::remove_file(dir.file(f));
    }
    let on_host = || {
        std::path::Path::new(&format!("/tmp/{name}")).exists()
            || std::path::Path::new(&format!("/dev/shm/{name}")).exists()
    };
    let run = bulkhead()
        .args(["run", path.to_str().unwrap(), "--timeout", "5s"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !dir.file("w").exists() && start.elapsed() < std::time::Duration::from_secs(4) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let during = on_host();
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let written = std::fs::read_to_string(dir.file("w")).unwrap_or_default();
    assert_eq!(written.trim(), "0", "the writer could not write: {stderr}");
    let report = std::fs::read_to_string(dir.file("r")).unwrap_or_default();
    (during, on_host(), report)
}

#[test]
#[ignore = "needs root: users, cgroups and namespaces"]
fn files_a_be_partition_writes_in_tmp_and_dev_shm_stay_in_its_own_mount_namespace() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-sandbox-tmp");
    let name = format!("bulkhead-sec-leak-{}", std::process::id());
    let _cleanup = HostFiles(vec![
        format!("/tmp/{name}").into(),
        format!("/dev/shm/{name}").into(),
    ]);

    // Default: neither the host (during and after the run) nor the other partition sees
    // the files; the writer's working directory under /tmp (the scratch directory) is
    // the host's, so its report arrives.
    let (during, after, report) = leak(&dir, "", &name);
    assert!(
        !during && !after,
        "the host saw the files: {during} {after}"
    );
    assert_eq!(value(&report, "tmp"), Some("1"), "{report}");
    assert_eq!(value(&report, "shm"), Some("1"), "{report}");

    // Relaxed: the host and the other partition see them (and, without the removal
    // of what the partition's uid left, the host after the run).
    let keys = ", sandbox: {private_tmp: false, remove_ipc: false}";
    let (during, after, report) = leak(&dir, keys, &name);
    assert!(
        during && after,
        "the host did not see the files: {during} {after}"
    );
    assert_eq!(value(&report, "tmp"), Some("0"), "{report}");
    assert_eq!(value(&report, "shm"), Some("0"), "{report}");
}
