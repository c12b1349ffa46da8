//! `bulkhead run` confining partitions: best-effort partitions in no window run
//! for the whole run in their cgroups, as their user, in their own network namespace;
//! I/O tasks get the derived reservation; a killed supervisor's processes die with it
//! and its cgroups (memory ones included) are removed by the next run. Observed from inside the processes (what they
//! write about themselves) and from outside (`chrt`, cgroupfs).

mod common;
use common::{
    cgroups_of, deadline_children, exclusive_cpus_lock, kill_janitor, shm_objects, CleanLeftovers,
    Running, Scratch,
};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bulkhead(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(args)
        .output()
        .unwrap()
}

/// A script reporting about its process (uid, network interfaces, cgroups, CPUs) into
/// the file `$1`, then sleeping.
const REPORT: &str = "(id -u; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; cat /proc/self/cgroup; grep Cpus_allowed_list /proc/self/status) > \"$1\"\nexec sleep 30\n";

#[test]
#[ignore = "needs root: cgroups, users and namespaces"]
fn an_unwindowed_be_partition_runs_confined_for_the_whole_run() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("free");
    let out = dir.file("report");
    let script = dir.file("report.sh");
    std::fs::write(&script, REPORT).unwrap();
    let desc = dir.file("system.yaml");
    std::fs::write(
        &desc,
        format!(
            "system: {{}}\npartitions:\n  - name: ic\n    cpus: 1\n    user: nobody\n    network: private\n    memory: 64MiB\n    processes: [\"sh {} {}\"]\n",
            script.display(),
            out.display()
        ),
    )
    .unwrap();
    let started = Instant::now();
    let run = bulkhead(&["run", desc.to_str().unwrap(), "--timeout", "1500ms"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "ran to the timeout"
    );
    let report = std::fs::read_to_string(&out).expect("the process ran and reported");
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines[0], "65534", "runs as nobody: {report}");
    assert_eq!(
        lines[1], "lo",
        "only a loopback in its network namespace: {report}"
    );
    assert_eq!(
        lines.last().copied(),
        Some("Cpus_allowed_list:\t1"),
        "{report}"
    );
    let freezer = lines
        .iter()
        .find(|l| l.contains(":freezer:") || l.starts_with("0::/bulkhead"));
    assert!(
        freezer.is_some_and(|l| l.contains("/bulkhead-")),
        "{report}"
    );
    let v1_memory = Path::new("/sys/fs/cgroup/memory/tasks").exists();
    if v1_memory {
        let memory = lines.iter().find(|l| l.contains(":memory:")).unwrap();
        assert!(
            memory.contains("/bulkhead-"),
            "in a memory cgroup of the run: {report}"
        );
    }
    assert!(
        !Command::new("pgrep")
            .args(["-f", &script.display().to_string()])
            .status()
            .unwrap()
            .success(),
        "the partition's process is left running"
    );
}

/// DriveOS 4.1: a bottom-half I/O thread at 10% serving a task of period T gets 0.1 T
/// every T. Here the served task has a 10 ms period: the I/O task's reservation must be
/// 1 ms every 10 ms, as the kernel reports it.
#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn an_io_task_runs_with_the_derived_reservation() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("io");
    let desc = dir.file("system.yaml");
    // rt task programs attach to the task library (the run waits for that before
    // release 0).
    let periodic = common::bin("bulkhead-periodic");
    std::fs::write(
        &desc,
        format!("system: {{}}\npartitions:\n  - name: ctl\n    kind: rt\n    cpus: 0\n    scheduler: edf\n    tasks:\n      - {{name: main, cmd: {p} --exec-us 100, budget: 2ms, period: 10ms}}\n      - {{name: can-bh, cmd: {p} --exec-us 100, serves: main, io_utilization: 0.1}}\n", p = periodic.display()),
    )
    .unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(["run", desc.to_str().unwrap(), "--timeout", "2s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let shown = deadline_children(&run, 2, Duration::from_secs(2));
    let out = run.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        shown
            .iter()
            .any(|s| s.contains("1000000/10000000/10000000")),
        "the I/O task's runtime/deadline/period: {shown:?}"
    );
    assert!(
        shown
            .iter()
            .any(|s| s.contains("2000000/10000000/10000000")),
        "the served task's: {shown:?}"
    );
}

/// Processes running `sleep` (zombies, killed but not yet reaped, run nothing).
fn running(sleep: &str) -> usize {
    let out = Command::new("pgrep")
        .args(["-x", "-f", sleep])
        .output()
        .unwrap()
        .stdout;
    let out = String::from_utf8_lossy(&out).into_owned();
    out.split_whitespace()
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
            stat.is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").starts_with(" Z"))
        })
        .count()
}

fn memory_cgroups(c: &[String]) -> usize {
    c.iter().filter(|c| c.starts_with("memory/")).count()
}

/// Starts a run of an rt and a be partition with 32 MiB memory limits, each running a
/// sleep no other process on the machine runs; returns the run and that sleep once
/// both partitions' memory cgroups exist and both sleeps run.
fn run_to_kill(dir: &Scratch) -> (Running, String) {
    let desc = dir.file("system.yaml");
    let sleep = format!("sleep 1000.{}", std::process::id());
    std::fs::write(
        &desc,
        format!("system: {{}}\npartitions:\n  - {{name: ivi, cpus: 1, memory: 32MiB, processes: [{sleep}]}}\n  - name: ctl\n    kind: rt\n    cpus: 0\n    memory: 32MiB\n    scheduler: edf\n    tasks:\n      - {{name: t, cmd: {sleep}, budget: 1ms, period: 10ms}}\n"),
    )
    .unwrap();
    let run = Running(Some(
        Command::new(env!("CARGO_BIN_EXE_bulkhead"))
            .args(["run", desc.to_str().unwrap(), "--timeout", "60s"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let pid = run.0.as_ref().unwrap().id();
    let deadline = Instant::now() + Duration::from_secs(3);
    while (memory_cgroups(&cgroups_of(pid)) < 2 || running(&sleep) < 2) && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let cgroups = cgroups_of(pid);
    assert_eq!(
        memory_cgroups(&cgroups),
        2,
        "rt and be partitions': {cgroups:?}"
    );
    assert_eq!(running(&sleep), 2, "the rt task and the be process run");
    (run, sleep)
}

/// Waits up to `secs` for `done`.
fn within(secs: u64, done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// Whether the cgroup v1 memory controller is mounted (says so if not).
fn cgroup_v1_memory() -> bool {
    if !Path::new("/sys/fs/cgroup/memory/tasks").exists() {
        eprintln!("skipping: needs the cgroup v1 memory controller");
        return false;
    }
    true
}

/// SIGKILL of the supervisor: its janitor (a child in a session of its own) removes its
/// cgroups at once, with no other run; its processes die with it.
#[test]
#[ignore = "needs root: memory cgroups"]
fn a_killed_supervisors_janitor_removes_its_cgroups_and_processes() {
    if !cgroup_v1_memory() {
        return;
    }
    let _lock = exclusive_cpus_lock();
    let _clean = CleanLeftovers;
    let dir = Scratch::new("killed-janitor");
    let (mut run, sleep) = run_to_kill(&dir);
    let mut victim = run.0.take().unwrap();
    let pid = victim.id();
    victim.kill().unwrap();
    victim.wait().unwrap();
    assert!(
        within(10, || running(&sleep) == 0),
        "partition processes outlived the supervisor"
    );
    assert!(
        within(10, || cgroups_of(pid).is_empty()),
        "left: {:?}",
        cgroups_of(pid)
    );
}

/// SIGKILL of the supervisor and of its janitor: the processes still die with the
/// supervisor, and the next run removes the cgroups.
#[test]
#[ignore = "needs root: memory cgroups"]
fn a_killed_supervisors_processes_die_with_it_and_the_next_run_removes_its_cgroups() {
    if !cgroup_v1_memory() {
        return;
    }
    let _lock = exclusive_cpus_lock();
    let _clean = CleanLeftovers;
    let dir = Scratch::new("killed");
    let (mut run, sleep) = run_to_kill(&dir);
    let mut victim = run.0.take().unwrap();
    let pid = victim.id();
    let before = cgroups_of(pid);
    let janitors = kill_janitor(pid);
    victim.kill().unwrap();
    victim.wait().unwrap();
    assert_eq!(janitors, 1, "the run's janitor");
    assert_eq!(cgroups_of(pid), before, "SIGKILL leaves them");
    // Both die with the supervisor (parent-death signal), not at the next run.
    assert!(
        within(10, || running(&sleep) == 0),
        "partition processes outlived the supervisor"
    );

    let quick = dir.file("quick.yaml");
    std::fs::write(
        &quick,
        "system: {}\npartitions: [{name: a, cpus: 1, processes: [/bin/true]}]\n",
    )
    .unwrap();
    let next = bulkhead(&["run", quick.to_str().unwrap(), "--timeout", "1s"]);
    let stderr = String::from_utf8_lossy(&next.stderr);
    assert_eq!(next.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("removed cgroups left by a bulkhead that died"),
        "{stderr}"
    );
    assert_eq!(cgroups_of(pid), Vec::<String>::new(), "{stderr}");
    assert_eq!(running(&sleep), 0);
}

/// A channel of the description (DriveOS 5, shmcomm) between two partitions running as
/// different users: `run` creates it, names it to both in `BULKHEAD_CHAN_SPEED`, and
/// destroys it at the end; 100000 messages arrive in order.
#[test]
#[ignore = "needs root: cgroups and users"]
fn a_described_channel_connects_two_partitions() {
    let peer = common::built("bulkhead-chan-peer");
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("chan");
    let (desc, got) = (dir.file("system.yaml"), dir.file("received"));
    let peer = peer.display();
    std::fs::write(
        &desc,
        format!(
            "system: {{}}
partitions:
  - {{name: prod, cpus: 0, processes: [env PEER_CHANNEL=speed {peer} fifo-send 100000]}}
  - {{name: cons, cpus: 1, user: nobody, processes: [\"sh -c 'PEER_CHANNEL=speed exec {peer} fifo-recv 100000 > {}'\"]}}
channels:
  - {{name: speed, kind: fifo, message_size: 32, depth: 64, writer: prod, readers: [cons]}}
",
            got.display()
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(["run", desc.to_str().unwrap(), "--timeout", "60s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let run = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("every process exited"), "{stderr}");
    let got = std::fs::read_to_string(&got).unwrap_or_default();
    assert!(
        got.starts_with("received 100000 in order"),
        "{got}\n{stderr}"
    );
    let left = shm_objects(&format!("bulkhead-chan-c{pid}-"));
    assert_eq!(
        left,
        Vec::<String>::new(),
        "the run's channel is left behind"
    );
}

#[test]
fn an_unknown_user_is_refused_before_anything_starts() {
    let dir = Scratch::new("nouser");
    let desc = dir.file("system.yaml");
    std::fs::write(
        &desc,
        "system: {}\npartitions: [{name: ic, cpus: 1, user: no-such-user-bulkhead, processes: [sleep 5]}]\n",
    )
    .unwrap();
    let out = bulkhead(&["run", desc.to_str().unwrap(), "--timeout", "5s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .contains("2:40: partitions[0].user: no user `no-such-user-bulkhead` on this machine"),
        "{stderr}"
    );
}

/// One identity per partition: two partitions without `user:` run under two different
/// uids of the default range (systemd's DynamicUser range), each with the same gid.
#[test]
#[ignore = "needs root: change users"]
fn partitions_without_a_user_get_uids_of_their_own() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("identity");
    let desc = dir.file("system.yaml");
    let d = dir.0.display();
    std::fs::write(
        &desc,
        format!("system: {{}}\npartitions:\n  - {{name: a, cpus: 1, processes: [\"sh -c 'id -u; id -g' > {d}/a\"]}}\n  - {{name: b, cpus: 1, processes: [\"sh -c 'id -u; id -g' > {d}/b\"]}}\n"),
    )
    .unwrap();
    let out = bulkhead(&["run", desc.to_str().unwrap(), "--timeout", "3s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ids = |name: &str| -> Vec<u32> {
        let text = std::fs::read_to_string(dir.file(name)).unwrap_or_default();
        text.lines().filter_map(|l| l.trim().parse().ok()).collect()
    };
    let (a, b) = (ids("a"), ids("b"));
    assert_eq!(a.len(), 2, "{stderr}");
    assert_eq!(b.len(), 2, "{stderr}");
    assert_eq!(a[0], a[1], "gid = uid");
    assert_ne!(a[0], b[0], "one uid per partition");
    for uid in [a[0], b[0]] {
        assert!((61184..=65519).contains(&uid), "uid {uid} in the range");
    }
}
