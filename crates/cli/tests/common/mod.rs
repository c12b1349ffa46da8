//! Helpers shared by the `bulkhead run` test suites (each suite uses some of them).
#![allow(dead_code)]

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// The events of the schedule log at `path`, one JSON object per line (none if the
/// run wrote no log); a line that is not JSON fails the test, naming it.
pub fn log_events(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let event = |l: &str| {
        serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: `{l}`: {e}", path.display()))
    };
    text.lines().map(event).collect()
}

/// A program built next to `bulkhead` (e.g. `bulkhead-periodic` of bulkhead-workloads).
pub fn bin(name: &str) -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_bulkhead")).with_file_name(name)
}

pub fn bulkhead() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bulkhead"))
}

/// Serializes the suites that take CPUs exclusively (as bulkhead-runtime's reservation tests do).
pub fn exclusive_cpus_lock() -> std::fs::File {
    bulkhead_os::lock::exclusive_cpus().expect("the lock of the rt test suites")
}

/// A scratch directory every user may write (partitions run as `nobody`), removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("bulkhead-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        Command::new("chmod")
            .arg("1777")
            .arg(&dir)
            .status()
            .unwrap();
        Scratch(dir)
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The children of process `pid`, whichever of its threads cloned them (a run's
/// partitions are cloned by its spawner thread, not its main one).
pub fn children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
    tasks
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Whether process `pid` is a `bulkhead janitor` (a run's child that is no partition's).
fn is_janitor(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    cmdline.split(|&b| b == 0).any(|w| w == b"janitor")
}

/// The children of run `pid` that partitions run (all but its janitor).
pub fn partition_children(pid: u32) -> Vec<u32> {
    children(pid)
        .into_iter()
        .filter(|&c| !is_janitor(c))
        .collect()
}

/// Program `name` built next to `bulkhead`, for a test that needs root: the test fails
/// without it (`scripts/test.sh` builds every program before it runs those tests).
pub fn built(name: &str) -> PathBuf {
    let path = bin(name);
    assert!(
        path.exists(),
        "{} is not built (cargo build --workspace)",
        path.display()
    );
    path
}

/// For a test of rt tasks (`#[ignore = "needs root: ..."]`): `bulkhead-periodic`, which
/// must be built, and the exclusive-CPU lock.
pub fn rt_test_setup() -> (PathBuf, std::fs::File) {
    (built("bulkhead-periodic"), exclusive_cpus_lock())
}

/// SIGKILLs the janitor of supervisor `pid` (its child `bulkhead janitor --watch PID`),
/// so that a test of what the *next* run cleans up does not race the janitor; returns
/// how many it killed (one, once the run has started).
pub fn kill_janitor(pid: u32) -> usize {
    let janitors: Vec<u32> = children(pid)
        .into_iter()
        .filter(|&c| is_janitor(c))
        .collect();
    for &j in &janitors {
        // SAFETY: kill has no memory preconditions; `j` is our grandchild, which
        // cannot be reaped (and its pid reused) while its parent, our child, lives.
        unsafe { libc::kill(j as i32, libc::SIGKILL) };
    }
    janitors.len()
}

/// `chrt -p PID` as printed.
pub fn chrt(pid: u32) -> String {
    let out = Command::new("chrt")
        .args(["-p", &pid.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `chrt -p` of the supervisor's SCHED_DEADLINE children once `n` of them run (at most
/// `within`).
pub fn deadline_children(run: &Child, n: usize, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    let mut shown = Vec::new();
    while shown.len() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        shown = children(run.id())
            .into_iter()
            .map(chrt)
            .filter(|s| s.contains("SCHED_DEADLINE"))
            .collect();
    }
    shown
}

/// cgroups named after supervisor `pid`, in every v1 controller and the unified tree.
pub fn cgroups_of(pid: u32) -> Vec<String> {
    let mut found = Vec::new();
    for ctrl in ["cpuset", "freezer", "memory", "pids", "unified"] {
        if let Ok(entries) = std::fs::read_dir(format!("/sys/fs/cgroup/{ctrl}")) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(&format!("bulkhead-{pid}-")) {
                    found.push(format!("{ctrl}/{name}"));
                }
            }
        }
    }
    found
}

/// Names in /dev/shm starting with `prefix`.
pub fn shm_objects(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Removes, when dropped (also when a test fails), what supervisors that no longer run
/// left behind, as the janitor of a killed run does (`bulkhead janitor` given a pid that
/// is not its parent cleans up at once): for tests that kill a run and its janitor.
pub struct CleanLeftovers;

impl Drop for CleanLeftovers {
    fn drop(&mut self) {
        let _ = bulkhead()
            .args(["janitor", "--watch", "1"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// A `bulkhead run` stopped on drop if a test fails before it ends (SIGTERM, so that it
/// stops its tasks and removes its cgroups).
pub struct Running(pub Option<Child>);

impl Running {
    /// Waits for the run to end by itself, which it must do with status 0 (else the test
    /// fails showing its stderr); its stderr, empty unless piped.
    pub fn ended(&mut self) -> String {
        let out = self.0.take().unwrap().wait_with_output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        stderr
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            // SAFETY: signalling our own child, not yet reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

/// `bulkhead run FILE --timeout TIMEOUT --control SOCKET`, to be given its outputs (and
/// any further flags) and spawned.
pub fn run_with_control(file: &Path, timeout: &str, socket: &Path) -> Command {
    let mut run = bulkhead();
    run.arg("run")
        .arg(file)
        .args(["--timeout", timeout, "--control"])
        .arg(socket);
    run
}

/// `bulkhead ctl --control SOCKET ARGS...`, run to its end.
pub fn ctl(socket: &Path, args: &[&str]) -> Output {
    bulkhead()
        .arg("ctl")
        .arg("--control")
        .arg(socket)
        .args(args)
        .output()
        .unwrap()
}

/// [`ctl`] that must succeed: exit 0, or the test fails showing the command's stderr.
pub fn ctl_ok(socket: &Path, args: &[&str]) -> Output {
    let out = ctl(socket, args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "ctl {args:?}: {err}");
    out
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Waits (at most 10 s) until the control socket at `path` accepts connections.
pub fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(path).is_err() {
        assert!(
            Instant::now() < deadline,
            "no control socket at {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value after `name=` in a report (`None` if the line is missing).
pub fn value<'a>(report: &'a str, name: &str) -> Option<&'a str> {
    let prefix = format!("{name}=");
    let line = report.lines().find(|l| l.starts_with(&prefix))?;
    Some(line[prefix.len()..].trim())
}

/// Writes `probe` to `probe.sh` and `desc` to `system.yaml` in `dir`, runs the system for
/// 3 s (it must exit 0) and returns what the probe left in `dir/report` (empty if
/// nothing) and the run's stderr. A probe writes `report.tmp` and renames it, so a
/// report is whole or absent.
pub fn run_probe(dir: &Scratch, desc: &str, probe: &str) -> (String, String) {
    std::fs::write(dir.file("probe.sh"), probe).unwrap();
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let _ = std::fs::remove_file(dir.file("report"));
    let out = bulkhead()
        .args(["run", path.to_str().unwrap(), "--timeout", "3s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report = std::fs::read_to_string(dir.file("report")).unwrap_or_default();
    (report, stderr)
}
