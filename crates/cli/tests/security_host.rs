//! What a partition could reach of the supervisor and of other runs, attacked from
//! inside through `bulkhead run`: descriptors the supervisor was handed, its control
//! socket, the uid allocator's lock file; and what a killed supervisor leaves behind
//! for them (its control socket). Needs root (partition users, cgroups, namespaces).

mod common;
use common::{bulkhead, exclusive_cpus_lock, rt_test_setup, text, Scratch};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `bulkhead run x.yaml 7<secret 900<secret`: the rt task's shell tries to read
/// descriptors 7 and 900 (below and above the descriptors it is handed).
#[test]
#[ignore = "needs root: SCHED_DEADLINE, cgroups and cpusets"]
fn rt_tasks_get_none_of_the_supervisors_inherited_descriptors() {
    let (periodic, _lock) = rt_test_setup();
    let dir = Scratch::new("sec-host-fds");
    let d = dir.0.display().to_string();
    std::fs::write(dir.file("secret"), "the supervisor's secret\n").unwrap();
    let task = format!(
        "sh -c 'cat /proc/self/fd/7 /proc/self/fd/900 > {d}/leak 2>&1; echo $? >> {d}/leak; exec {} --exec-us 100'",
        periodic.display()
    );
    let desc = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: ctl\n    kind: rt\n    cpus: 0\n    scheduler: edf\n    tasks:\n      - {{name: a, cmd: \"{task}\", budget: 2ms, period: 20ms}}\n"
    );
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec '{}' run '{}' --timeout 2s 7<'{d}/secret' 900<'{d}/secret'",
            env!("CARGO_BIN_EXE_bulkhead"),
            path.display()
        ))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let leak = std::fs::read_to_string(dir.file("leak")).unwrap_or_default();
    assert!(!leak.is_empty(), "the task did not run: {stderr}");
    assert!(!leak.contains("secret"), "the rt task read fd 7: {leak}");
    assert_ne!(leak.lines().last(), Some("0"), "{leak}");
}

/// A be partition running as the host's root (the user namespace relaxed, its runtime
/// directory visible) asks the run's control socket for its status: refused because
/// the peer is in a partition's cgroup; the same request from outside is answered.
/// The partition's process stays until the host's request was answered: its run ends
/// when it exits, which came first on a loaded machine (the host's `ctl` read "the
/// system stopped before answering", before that "Connection reset by peer").
#[test]
#[ignore = "needs root: users and cgroups"]
fn a_partition_cannot_control_the_system_even_as_the_hosts_root() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-host-ctl");
    let d = dir.0.display().to_string();
    let socket = dir.file("sys.sock");
    let bulkhead_bin = env!("CARGO_BIN_EXE_bulkhead");
    let attack = format!(
        "sh -c 'while [ ! -S {d}/sys.sock ]; do sleep 0.05; done; {bulkhead_bin} ctl --control {d}/sys.sock status > {d}/ctl.tmp 2>&1; echo exit=$? >> {d}/ctl.tmp; mv {d}/ctl.tmp {d}/ctl; while [ ! -e {d}/host-done ]; do sleep 0.05; done'"
    );
    let desc = format!(
        "system: {{}}\npartitions:\n  - {{name: ivi, cpus: 1, user: root, sandbox: {{private_users: false, hide_runtime_dir: false}}, processes: [\"{attack}\"]}}\n"
    );
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let run = bulkhead()
        .args([
            "run",
            path.to_str().unwrap(),
            "--timeout",
            "4s",
            "--control",
        ])
        .arg(&socket)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = common::Running(Some(run));
    common::wait_for(&socket);
    let from_host = common::ctl(&socket, &["status"]);
    std::fs::write(dir.file("host-done"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while !dir.file("ctl").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = running.0.take().unwrap().wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    let report = std::fs::read_to_string(dir.file("ctl")).unwrap_or_default();
    assert_eq!(
        from_host.status.code(),
        Some(0),
        "{}",
        text(&from_host.stderr)
    );
    assert!(
        report.contains("exit=") && !report.contains("exit=0"),
        "{report}\n{stderr}"
    );
    assert!(report.contains("runs in a partition"), "{report}");
    assert!(
        stderr.contains("control socket: refused a peer (uid 0"),
        "{stderr}"
    );
}

/// A be partition tries to open the uid allocator's lock file (a read lock on it kept
/// every other run from taking uids): hidden with the runtime directory, and mode 0600
/// when the directory is not hidden. The cpuset lock file (`flock`, which any open
/// descriptor may take) is mode 0600 as well.
#[test]
#[ignore = "needs root: users and cgroups"]
fn a_partition_cannot_open_the_uid_lock_file() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-host-lock");
    let probe = r#"
exec > @D@/report.tmp 2>&1
test -e /run/bulkhead/uids.lock; echo seen=$?
(exec 3</run/bulkhead/uids.lock); echo open=$?
(exec 3</run/bulkhead-cpuset.lock); echo cpuset=$?
mv @D@/report.tmp @D@/report
"#;
    let d = dir.0.display().to_string();
    for (keys, seen) in [("", "1"), (", sandbox: {hide_runtime_dir: false}", "0")] {
        let desc = format!(
            "system: {{}}\npartitions:\n  - {{name: ivi, cpus: 1{keys}, processes: [\"sh {d}/probe.sh\"]}}\n"
        );
        let (report, stderr) = common::run_probe(&dir, &desc, &probe.replace("@D@", &d));
        assert!(
            report.contains(&format!("seen={seen}")),
            "{keys}: {report}\n{stderr}"
        );
        for lock in ["open", "cpuset"] {
            let opened = report.contains(&format!("{lock}=0"));
            let tried = report.contains(&format!("{lock}="));
            assert!(tried && !opened, "{lock}, {keys}: {report}\n{stderr}");
        }
    }
}

/// A supervisor killed by SIGKILL: its janitor removes its control socket in
/// `/run/bulkhead`, which `ctl` would otherwise count as a running system.
#[test]
#[ignore = "needs root: cgroups"]
fn a_killed_supervisors_janitor_removes_its_control_socket() {
    let _lock = exclusive_cpus_lock();
    let _clean = common::CleanLeftovers;
    let dir = Scratch::new("sec-host-janitor");
    let name = format!("bulkhead-sec-janitor-{}", std::process::id());
    let path = dir.file(&format!("{name}.yaml"));
    let desc = "system: {}\npartitions:\n  - {name: ivi, cpus: 1, processes: [\"sleep 30\"]}\n";
    std::fs::write(&path, desc).unwrap();
    let socket = std::path::Path::new("/run/bulkhead").join(format!("{name}.sock"));
    let run = bulkhead()
        .args(["run", path.to_str().unwrap(), "--timeout", "20s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for(&socket);
    // SAFETY: kill has no memory preconditions; `run` is our unreaped child.
    unsafe { libc::kill(run.id() as i32, libc::SIGKILL) };
    let mut run = run;
    let _ = run.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = socket.exists();
    let _ = std::fs::remove_file(&socket);
    assert!(!left, "{} was left", socket.display());
}

/// A be partition prints a fake summary of an rt task to its standard error and a line
/// without an end to its output: both reach the run's streams labelled with the
/// partition and process, so no line of the partition's starts as the supervisor's do.
#[test]
#[ignore = "needs root: users and cgroups"]
fn a_partitions_output_cannot_pass_for_the_supervisors() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-host-output");
    let fake =
        "  task `a` of `ctl` (SCHED_DEADLINE, pid 1): 100 jobs, max response 0.1 ms, 0 misses";
    std::fs::write(
        dir.file("fake.sh"),
        format!("echo '{fake}' >&2; printf 'no end'"),
    )
    .unwrap();
    let desc = format!(
        "system: {{}}\npartitions:\n  - {{name: ivi, cpus: 1, processes: [\"sh {}/fake.sh\"]}}\n",
        dir.0.display()
    );
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let out = bulkhead()
        .args(["run", path.to_str().unwrap(), "--timeout", "3s"])
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.lines().any(|l| l.starts_with("  task ")),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("ivi[0]: {fake}\n")), "{stderr}");
    assert_eq!(stdout, "ivi[0]: no end\n");
}
