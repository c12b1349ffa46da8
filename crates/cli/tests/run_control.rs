//! The control socket of a real `bulkhead run`: `ctl status` shows the live partitions
//! and tasks with the reservations the kernel holds; malformed, over-long and unknown
//! requests get errors; a peer of another user is refused and logged; the system keeps
//! running through all of it.

mod common;
use common::{ctl, ctl_ok, exclusive_cpus_lock, text, wait_for, Running};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A scratch directory with the description and the socket, removed on drop.
struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Sends raw bytes as one request line and returns the reply line.
fn raw(path: &Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line
}

/// Bad requests to the running system's `socket`: error replies, nothing else.
fn refuses_bad_requests(socket: &Path) {
    assert!(raw(socket, b"status\n").contains("\"code\":\"malformed\""));
    assert!(raw(socket, b"{\"request\":\"reboot\"}\n").contains("unknown_request"));
    let mut long = vec![b'x'; 100_000];
    long.push(b'\n');
    assert!(raw(socket, &long).contains("too_long"));
    let no_modes = ctl(socket, &["mode", "highway"]);
    assert_eq!(no_modes.status.code(), Some(1));
    assert!(
        text(&no_modes.stderr).contains("not_allowed"),
        "{}",
        text(&no_modes.stderr)
    );
}

/// Another user: kept out of `socket` by the file mode, then by SO_PEERCRED.
fn refuses_other_users(socket: &Path) {
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let other = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_bulkhead"))
        .args(["ctl", "--control", socket.to_str().unwrap(), "status"])
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(1));
    assert!(
        text(&other.stderr).contains("permission_denied"),
        "{}",
        text(&other.stderr)
    );
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn ctl_talks_to_a_running_system_and_bad_peers_do_not_disturb_it() {
    let periodic = common::built("bulkhead-periodic");
    let _lock = exclusive_cpus_lock();
    let dir = Dir(std::env::temp_dir().join(format!("bulkhead-ctlrun-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = dir.0.join("car.yaml");
    let socket = dir.0.join("car.sock");
    std::fs::write(
        &file,
        format!(
            "system: {{cpus: 0-1}}\npartitions:\n  - name: ctl\n    kind: rt\n    cpus: 0\n    scheduler: edf\n    tasks:\n      - {{name: a, cmd: {} --exec-us 300, budget: 2ms, period: 10ms}}\n",
            periodic.display()
        ),
    )
    .unwrap();
    let mut run = Running(Some(
        common::run_with_control(&file, "6s", &socket)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    wait_for(&socket);
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");

    // Status: the task with the reservation the kernel holds.
    let status = ctl_ok(&socket, &["status", "--json"]);
    // The loop serving the socket (the process's main thread, which just answered) is
    // SCHED_FIFO 40, so a request does not wait behind best-effort work.
    let pid = run.0.as_ref().unwrap().id();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    assert_eq!(
        (fields[38], fields[37]),
        ("1", "40"),
        "policy, rt_priority: {stat}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let s = &doc["status"];
    assert_eq!(s["system"], "car");
    assert_eq!(s["state"], "running");
    let task = &s["partitions"][0]["tasks"][0];
    assert_eq!(s["partitions"][0]["name"], "ctl");
    assert_eq!(task["name"], "a");
    assert_eq!(task["policy"], "deadline");
    assert_eq!(task["budget_ns"], 2_000_000);
    assert_eq!(task["period_ns"], 10_000_000);
    let pid = task["pid"].as_u64().unwrap();
    let chrt = common::chrt(pid as u32);
    assert!(chrt.contains("2000000/10000000/10000000"), "{chrt}");

    refuses_bad_requests(&socket);
    refuses_other_users(&socket);

    // Still running, still answering, and its jobs go on.
    std::thread::sleep(Duration::from_millis(300));
    let again = ctl(&socket, &["status", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    let jobs = doc["status"]["partitions"][0]["tasks"][0]["jobs"]
        .as_u64()
        .unwrap();
    assert!(jobs > 0, "{doc}");
    let human = ctl(&socket, &["status"]);
    assert!(
        text(&human.stdout).contains("partition ctl (rt, CPUs 0)"),
        "{}",
        text(&human.stdout)
    );

    let stderr = run.ended();
    assert!(stderr.contains("timeout reached"), "{stderr}");
    assert!(
        stderr.contains("refused a peer (uid 65534")
            && stderr.contains("root or its own user only"),
        "{stderr}"
    );
    assert!(!socket.exists(), "the socket is removed at the end");
}

#[test]
#[ignore = "needs root: cgroups"]
fn a_window_schedule_serves_the_socket_between_its_windows() {
    // CPU 0 is the other test's exclusive rt CPU: not at the same time.
    let _lock = exclusive_cpus_lock();
    let dir = Dir(std::env::temp_dir().join(format!("bulkhead-ctlwin-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("demo.yaml");
    let socket = dir.0.join("demo.sock");
    std::fs::write(
        &file,
        "windows:\n  - length: 20\n    slices:\n      - {cpu: 0, sc_partition: SC1}\npartitions:\n  - name: SC1\n    processes:\n      - {budget: 5, cmd: sleep 30}\n",
    )
    .unwrap();
    let mut run = Running(Some(
        common::run_with_control(&file, "3s", &socket)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    wait_for(&socket);
    let status = ctl_ok(&socket, &["status", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(doc["status"]["system"], "demo");
    assert_eq!(doc["status"]["partitions"][0]["name"], "SC1");
    assert_eq!(doc["status"]["mode"], serde_json::Value::Null);
    // A flood of bad requests on one connection: each gets its error reply.
    let mut s = UnixStream::connect(&socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for _ in 0..200 {
        s.write_all(b"{\"request\":\n").unwrap();
    }
    let mut reader = BufReader::new(s);
    for _ in 0..200 {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(line.contains("\"code\":\"malformed\""), "{line}");
    }
    let stderr = run.ended();
    // 3 s of 20 ms windows: about 150; wide margin for a loaded machine.
    let windows: u64 = stderr
        .split(" after ")
        .nth(1)
        .and_then(|s| s.split(" windows").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(windows >= 50, "{stderr}");
    assert!(!socket.exists());
}
