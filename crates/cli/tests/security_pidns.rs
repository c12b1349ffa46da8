//! The pid namespace of be partitions, tried from inside through `bulkhead run`: a be
//! process sees only its partition's processes, and a process that left its session and
//! parent (`setsid` and a double fork) dies with a SIGKILLed supervisor; with
//! `sandbox: {pid_namespace: false}` both attacks succeed, which shows they are real
//! (docs/security.md). Needs root (partition users, cgroups, namespaces).

mod common;
use common::{bulkhead, exclusive_cpus_lock, run_probe, Scratch};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The pids of the running (not zombie) processes whose command line is `cmdline`.
fn running(cmdline: &str) -> Vec<i32> {
    let out = Command::new("pgrep")
        .args(["-x", "-f", cmdline])
        .output()
        .unwrap()
        .stdout;
    String::from_utf8_lossy(&out)
        .split_whitespace()
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
            stat.is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").starts_with(" Z"))
        })
        .filter_map(|pid| pid.parse().ok())
        .collect()
}

/// Kills, when dropped (also when a test fails), the supervisor and every process
/// running `cmdline`, and runs bulkhead once more so that it removes the cgroups a
/// killed supervisor left.
struct Cleanup {
    supervisor: Option<Child>,
    cmdline: String,
    quick: std::path::PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(mut s) = self.supervisor.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        for pid in running(&self.cmdline) {
            // SAFETY: kill(2) has no memory preconditions; the pid runs our marker.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = std::fs::write(
            &self.quick,
            "system: {}\npartitions: [{name: a, cpus: 1, processes: [/bin/true]}]\n",
        );
        let _ = bulkhead()
            .args(["run", self.quick.to_str().unwrap(), "--timeout", "1s"])
            .output();
    }
}

/// Runs partition `ivi` (extra keys `keys`) whose process lists `/proc` while partition
/// `other` runs `marker`; returns the report: how many processes it saw, and whether
/// one of them was `other`'s.
fn look(dir: &Scratch, keys: &str, marker: &str) -> String {
    let d = dir.0.display().to_string();
    // `[.]` keeps the probe's own grep from matching the marker.
    let pattern = marker.replace('.', "[.]");
    let probe = format!(
        "sleep 0.5; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo procs=$n > {d}/report.tmp; \
         echo other=$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c '{pattern}') >> {d}/report.tmp; \
         mv {d}/report.tmp {d}/report"
    );
    let desc = format!(
        "system: {{}}\npartitions:\n  - {{name: other, cpus: 0, processes: [\"{marker}\"]}}\n  - {{name: ivi, cpus: 1{keys}, processes: [\"sh {d}/probe.sh\"]}}\n"
    );
    run_probe(dir, &desc, &probe).0
}

fn number(report: &str, name: &str) -> Option<usize> {
    let prefix = format!("{name}=");
    let line = report.lines().find(|l| l.starts_with(&prefix))?;
    line[prefix.len()..].trim().parse().ok()
}

#[test]
#[ignore = "needs root: users and cgroups"]
fn a_be_process_sees_only_its_own_partitions_processes() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-pidns-proc");
    let marker = format!("sleep 1000.{}", std::process::id());
    let _cleanup = Cleanup {
        supervisor: None,
        cmdline: marker.clone(),
        quick: dir.file("quick.yaml"),
    };

    let report = look(&dir, "", &marker);
    assert_eq!(number(&report, "other"), Some(0), "{report}");
    // Its init, its shell and the shell's pipeline at most.
    let seen = number(&report, "procs").expect(&report);
    assert!((2..=8).contains(&seen), "{report}");

    let report = look(&dir, ", sandbox: {pid_namespace: false}", &marker);
    assert_eq!(number(&report, "other"), Some(1), "{report}");
    assert!(number(&report, "procs").expect(&report) > 8, "{report}");
}

/// Starts a supervisor whose be process leaves behind a `setsid`, double-forked
/// `marker`, kills it with SIGKILL, and returns whether `marker` still runs 3 s later.
fn orphan_survives(dir: &Scratch, keys: &str, marker: &str, cleanup: &mut Cleanup) -> bool {
    let d = dir.0.display().to_string();
    let probe = format!("setsid sh -c '{marker} &'; touch {d}/started; exec sleep 60\n");
    std::fs::write(dir.file("probe.sh"), probe).unwrap();
    let desc = format!(
        "system: {{}}\npartitions:\n  - {{name: ivi, cpus: 1{keys}, processes: [\"sh {d}/probe.sh\"]}}\n"
    );
    survives(dir, &desc, marker, cleanup)
}

/// Runs `desc`, whose processes run `{dir}/probe.sh` (which starts `marker` and then
/// touches `{dir}/started`), kills the supervisor with SIGKILL once `marker` runs,
/// and returns whether `marker` still runs 3 s later.
fn survives(dir: &Scratch, desc: &str, marker: &str, cleanup: &mut Cleanup) -> bool {
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let _ = std::fs::remove_file(dir.file("started"));
    let supervisor = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(["run", path.to_str().unwrap(), "--timeout", "60s"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    cleanup.supervisor = Some(supervisor);
    let deadline = Instant::now() + Duration::from_secs(10);
    while (!dir.file("started").exists() || running(marker).is_empty()) && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(running(marker).len(), 1, "the orphan started");
    // Its janitor would kill what is left in its cgroups at once: without it, what kills
    // the orphan is the pid namespace alone (or nothing until the next start).
    let janitors = common::kill_janitor(cleanup.supervisor.as_ref().unwrap().id());
    let mut supervisor = cleanup.supervisor.take().unwrap();
    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
    assert_eq!(janitors, 1, "the run's janitor");
    let deadline = Instant::now() + Duration::from_secs(3);
    while !running(marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    !running(marker).is_empty()
}

#[test]
#[ignore = "needs root: users and cgroups"]
fn a_setsid_double_forked_process_dies_with_a_killed_supervisor() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-pidns-orphan");
    let marker = format!("sleep 1001.{}", std::process::id());
    let mut cleanup = Cleanup {
        supervisor: None,
        cmdline: marker.clone(),
        quick: dir.file("quick.yaml"),
    };
    assert!(!orphan_survives(&dir, "", &marker, &mut cleanup));

    let relaxed = ", sandbox: {pid_namespace: false}";
    assert!(orphan_survives(&dir, relaxed, &marker, &mut cleanup));
    // The next start removes it with the cgroup the killed supervisor left.
    let quick = dir.file("quick.yaml");
    std::fs::write(
        &quick,
        "system: {}\npartitions: [{name: a, cpus: 1, processes: [/bin/true]}]\n",
    )
    .unwrap();
    let out = bulkhead()
        .args(["run", quick.to_str().unwrap(), "--timeout", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let deadline = Instant::now() + Duration::from_secs(3);
    while !running(&marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(running(&marker), Vec::<i32>::new());
}

#[test]
#[ignore = "needs root: users and cgroups"]
fn a_be_process_killed_by_a_signal_is_reported_with_that_signal() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-pidns-signal");
    let path = dir.file("system.yaml");
    std::fs::write(
        &path,
        "system: {}\npartitions:\n  - {name: ivi, cpus: 1, processes: [\"sh -c 'kill -USR1 $$'\", \"sh -c 'exit 3'\"]}\n",
    )
    .unwrap();
    let out = bulkhead()
        .args(["run", path.to_str().unwrap(), "--timeout", "2s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("process 0 (`sh -c 'kill -USR1 $$'`) exited: signal: 10"),
        "{stderr}"
    );
    assert!(
        stderr.contains("process 1 (`sh -c 'exit 3'`) exited: exit status: 3"),
        "{stderr}"
    );
}

/// `bulkhead-chan-peer`, built next to `bulkhead` (the channel ends of the tests below).
fn peer() -> std::path::PathBuf {
    let peer = common::bin("bulkhead-chan-peer");
    assert!(peer.exists(), "{} is not built", peer.display());
    peer
}

/// A writer partition whose process starts a background job (`marker`, a grandchild
/// of the process bulkhead starts) and a reader partition, joined by a channel.
fn channel_partitions(dir: &Scratch, keys: &str, marker: &str) -> String {
    let (d, peer) = (dir.0.display(), peer().display().to_string());
    let probe = format!(
        "{marker} &\ntouch {d}/started\nPEER_CHANNEL=speed exec {peer} fifo-send 1000000000\n"
    );
    std::fs::write(dir.file("probe.sh"), probe).unwrap();
    format!(
        "system: {{}}
partitions:
  - {{name: prod, cpus: 1{keys}, processes: [\"sh {d}/probe.sh\"]}}
  - {{name: cons, cpus: 1{keys}, processes: [\"sh -c 'PEER_CHANNEL=speed exec {peer} fifo-recv 1000000000'\"]}}
channels:
  - {{name: speed, kind: fifo, message_size: 32, depth: 64, writer: prod, readers: [cons]}}
"
    )
}

#[test]
#[ignore = "needs root: users and cgroups"]
fn a_background_job_of_a_process_with_channels_dies_with_a_killed_supervisor() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-pidns-chan-orphan");
    let marker = format!("sleep 1002.{}", std::process::id());
    let mut cleanup = Cleanup {
        supervisor: None,
        cmdline: marker.clone(),
        quick: dir.file("quick.yaml"),
    };
    let desc = channel_partitions(&dir, "", &marker);
    assert!(!survives(&dir, &desc, &marker, &mut cleanup));

    let desc = channel_partitions(&dir, ", sandbox: {pid_namespace: false}", &marker);
    assert!(survives(&dir, &desc, &marker, &mut cleanup));
}

/// Both ends run in pid namespaces of their own: the writer's process is killed with
/// SIGKILL by its own shell while the reader waits in a blocking read, and the reader
/// gets its peer-died error (the writer's lock went with its process), not a hang
/// until the read's 30 s timeout nor a false death while the writer lived.
#[test]
#[ignore = "needs root: users and cgroups"]
fn a_reader_in_a_pid_namespace_learns_that_its_writer_was_killed() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-pidns-chan-died");
    let (d, peer) = (dir.0.display(), peer().display().to_string());
    let desc = format!(
        "system: {{}}
partitions:
  - {{name: prod, cpus: 1, processes: [\"sh -c 'PEER_CHANNEL=speed {peer} fifo-send 1000000000 & sleep 1; kill -9 $!; echo killed > {d}/writer'\"]}}
  - {{name: cons, cpus: 1, processes: [\"sh -c 'PEER_CHANNEL=speed exec {peer} fifo-recv 1000000000 2> {d}/reader'\"]}}
channels:
  - {{name: speed, kind: fifo, message_size: 32, depth: 64, writer: prod, readers: [cons]}}
"
    );
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let started = Instant::now();
    let out = bulkhead()
        .args(["run", path.to_str().unwrap(), "--timeout", "20s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reader = std::fs::read_to_string(dir.file("reader")).unwrap_or_default();
    let writer = std::fs::read_to_string(dir.file("writer")).unwrap_or_default();
    assert_eq!(writer.trim(), "killed", "{stderr}");
    assert!(
        reader.contains("fifo-recv: read ") && reader.contains(" died"),
        "the reader: {reader}\n{stderr}"
    );
    let read: u64 = reader
        .split("read ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(read > 0, "the channel carried messages first: {reader}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the run ended when both processes had: {stderr}"
    );
}

/// What the attacker of the test below runs (as the reader partition's own user): it
/// takes a lock on the writer's byte of the message file it was handed (which is how
/// ends held their liveness locks before they had lock files of their own), tries to
/// lock and to reopen the writer's lock file, writes down what the kernel said, and
/// then becomes the channel's reader (the lock it took survives the exec).
const LOCK_ATTACK: &str = r#"
import fcntl, os, sys
report, peer = sys.argv[1], sys.argv[2]
fds = [int(n) for n in os.environ["BULKHEAD_CHAN_SPEED"][len("fd:"):].split(":")]
out = []
fcntl.lockf(fds[0], fcntl.LOCK_SH | fcntl.LOCK_NB, 1, os.sysconf("SC_PAGE_SIZE"))
out.append("locked the writer's byte of the message file")
if len(fds) > 2:
    try:
        fcntl.lockf(fds[2], fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 0)
        out.append("lock the writer's lock file: SUCCEEDED")
    except OSError as e:
        out.append("lock the writer's lock file: refused (errno %d)" % e.errno)
    try:
        os.open("/proc/self/fd/%d" % fds[2], os.O_RDONLY)
        out.append("reopen the writer's lock file: SUCCEEDED")
    except OSError as e:
        out.append("reopen the writer's lock file: refused (errno %d)" % e.errno)
with open(report, "w") as f:
    f.write("\n".join(out) + "\n")
os.environ["PEER_CHANNEL"] = "speed"
os.execv(peer, [peer, "fifo-recv", "2000"])
"#;

/// A reader partition (a user of its own, a pid namespace of its own) holds locks on
/// everything it can lock before its writer attaches (the writer starts once the
/// attacker's report, written after its locks, exists): the writer attaches anyway and
/// sends all its messages, which the reader receives. Before each end had a lock file
/// that only its own user can open, the reader's lock on the writer's byte of the
/// message file made the writer's attach fail with "held by live process".
#[test]
#[ignore = "needs root: users and cgroups"]
fn a_reader_cannot_keep_its_writer_from_attaching() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-pidns-chan-lock");
    let (d, peer) = (dir.0.display(), peer().display().to_string());
    std::fs::write(dir.file("attack.py"), LOCK_ATTACK).unwrap();
    let desc = format!(
        "system: {{}}
partitions:
  - {{name: prod, cpus: 0, processes: [\"sh -c 'until [ -e {d}/attacker ]; do sleep 0.05; done; PEER_CHANNEL=speed exec {peer} fifo-send 2000 > {d}/writer 2>&1'\"]}}
  - {{name: cons, cpus: 1, processes: [\"sh -c 'exec /usr/bin/python3 {d}/attack.py {d}/attacker {peer} > {d}/reader 2>&1'\"]}}
channels:
  - {{name: speed, kind: fifo, message_size: 32, depth: 64, writer: prod, readers: [cons]}}
"
    );
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let out = bulkhead()
        .args(["run", path.to_str().unwrap(), "--timeout", "20s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let read = |name: &str| std::fs::read_to_string(dir.file(name)).unwrap_or_default();
    let (attacker, writer, reader) = (read("attacker"), read("writer"), read("reader"));
    assert!(
        writer.starts_with("sent 2000"),
        "the writer attached: {writer}\n{stderr}"
    );
    assert!(
        attacker.contains("locked the writer's byte"),
        "{attacker}\n{reader}\n{stderr}"
    );
    assert!(!attacker.contains("SUCCEEDED"), "{attacker}");
    // EBADF: a descriptor with no access cannot take a lock; EACCES: mode 0400 of
    // another user.
    assert!(
        attacker.contains("lock the writer's lock file: refused (errno 9)")
            && attacker.contains("reopen the writer's lock file: refused (errno 13)"),
        "{attacker}\n{stderr}"
    );
    assert!(reader.contains("received 2000 in order"), "{reader}");
}

/// A child process killed on drop (the virtual bus), even when the test fails.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Replays three frames on `bus` until the client has mapped them all, then waits for
/// the rt writer's report (in `dir`), until `deadline`.
fn replay_until_mapped(dir: &Scratch, bus: &str, deadline: Instant) {
    let log = dir.file("frames.log");
    std::fs::write(
        &log,
        "(0.000000) can0 123#11\n(0.010000) can0 456#22\n(0.020000) can0 789#33\n",
    )
    .unwrap();
    // The client waits for frames once it has written `started`; replay until
    // it has mapped three (a frame sent before it listened is not kept).
    while !std::fs::read_to_string(dir.file("mapped")).is_ok_and(|m| m.contains("789#33"))
        && Instant::now() < deadline
    {
        let replay = bulkhead()
            .args(["can", "replay", log.to_str().unwrap(), "--bus", bus])
            .output()
            .unwrap();
        assert!(replay.status.success());
        std::thread::sleep(Duration::from_millis(300));
    }
    let sent = || std::fs::read_to_string(dir.file("writer")).unwrap_or_default();
    while sent().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a CAN client partition (extra keys `keys`) on a gateway of `bus`: its process
/// leaves a `setsid`, double-forked `marker` behind, counts the processes it sees, maps
/// 3 frames of the bus to `{dir}/mapped` and stays. With `peers`, a second be partition
/// is also a client of the bus and the reader of a latest channel from an rt task; it
/// SIGKILLs its client and its reader before the frames are replayed. Then the
/// supervisor is SIGKILLed. Returns the reports and whether `marker` still ran 10 s
/// after the kill.
fn can_client(
    dir: &Scratch,
    bus: &str,
    keys: &str,
    peers: bool,
    cleanup: &mut Cleanup,
) -> (String, bool) {
    let (d, exe, marker, peer) = (
        dir.0.display(),
        env!("CARGO_BIN_EXE_bulkhead"),
        cleanup.cmdline.clone(),
        peer().display().to_string(),
    );
    for f in ["mapped", "evil", "writer"] {
        let _ = std::fs::remove_file(dir.file(f));
    }
    let probe = format!(
        "setsid sh -c '{marker} &'\nsleep 0.3\nn=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo procs=$n > {d}/report\n\
         touch {d}/started\n{exe} can map --bus {bus} --count 3 --timeout 20s > {d}/mapped 2> {d}/map.err\nexec sleep 60\n"
    );
    std::fs::write(dir.file("probe.sh"), probe).unwrap();
    let evil = format!(
        "PEER_CHANNEL=pos {peer} latest-recv 1000000000 > /dev/null 2>&1 &\nr=$!\n\
         {exe} can map --bus {bus} --count 1000000 --timeout 30s > /dev/null 2>&1 &\nc=$!\n\
         sleep 0.5\nkill -9 $r $c\nwait\necho killed > {d}/evil\nexec sleep 60\n"
    );
    std::fs::write(dir.file("evil.sh"), evil).unwrap();
    let (tasks, extra, clients) = match peers {
        true => (
            format!("{{name: w, cmd: \"sh -c 'PEER_CHANNEL=pos {peer} latest-send 30000 > {d}/writer 2>&1; exec sleep 60'\", budget: 2ms, period: 10ms}}"),
            format!(
                "  - {{name: evil, cpus: 1, processes: [\"sh {d}/evil.sh\"]}}
channels:
  - {{name: pos, kind: latest, message_size: 32, writer: gw, readers: [evil]}}
"
            ),
            ", {partition: evil}",
        ),
        false => (String::new(), String::new(), ""),
    };
    let desc = format!(
        "system: {{}}
partitions:
  - {{name: gw, kind: rt, cpus: 0, scheduler: edf, tasks: [{tasks}]}}
  - {{name: ic, cpus: 1{keys}, processes: [\"sh {d}/probe.sh\"]}}
{extra}buses:
  - {{name: {bus}, gateway: gw, period: 2ms, reader_budget: 200us, writer_budget: 200us, clients: [{{partition: ic}}{clients}]}}
"
    );
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let _ = std::fs::remove_file(dir.file("started"));
    let supervisor = bulkhead()
        .args(["run", path.to_str().unwrap(), "--timeout", "60s"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    cleanup.supervisor = Some(supervisor);
    let deadline = Instant::now() + Duration::from_secs(15);
    let ready = || {
        dir.file("started").exists()
            && !running(&marker).is_empty()
            && (!peers || dir.file("evil").exists())
    };
    while !ready() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(running(&marker).len(), 1, "the orphan started");
    if peers {
        replay_until_mapped(dir, bus, deadline);
    }
    // Without the janitor, as in `survives`.
    let janitors = common::kill_janitor(cleanup.supervisor.as_ref().unwrap().id());
    let mut supervisor = cleanup.supervisor.take().unwrap();
    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
    assert_eq!(janitors, 1, "the run's janitor");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !running(&marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let report = std::fs::read_to_string(dir.file("report")).unwrap_or_default();
    let mapped = std::fs::read_to_string(dir.file("mapped")).unwrap_or_default();
    let err = std::fs::read_to_string(dir.file("map.err")).unwrap_or_default();
    let writer = std::fs::read_to_string(dir.file("writer")).unwrap_or_default();
    let evil = std::fs::read_to_string(dir.file("evil")).unwrap_or_default();
    (
        format!("{report}mapped:\n{mapped}map.err:\n{err}writer: {writer}\nevil: {evil}"),
        !running(&marker).is_empty(),
    )
}

/// A CAN client in a pid namespace of its own (the default): it gets the frames of the
/// bus through its gateway channels (so it judged the gateway alive, though the
/// gateway's pids are not in its namespace), sees only its own processes, and a
/// process it left behind (`setsid`, double fork) is dead within 10 s of a `kill -9` of
/// the supervisor. Another be partition, a client of the same bus and the reader of an
/// rt task's channel, has its client and its reader SIGKILLed first: the gateway goes
/// on (the frames reach the first client) and so does the rt writer (it sends all its
/// messages). With `sandbox: {pid_namespace: false}` (what every process given
/// channels had before channel ends stopped recording pids) the same client sees every
/// process of the host and its orphan survives the supervisor.
#[test]
#[ignore = "needs root: users and cgroups"]
fn a_can_client_in_its_own_pid_namespace_gets_frames_and_dies_with_the_supervisor() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-pidns-can");
    let bus = format!("bh-pidns-{}", std::process::id());
    let _bus = Killed(bulkhead().args(["can", "bus", &bus]).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(200));
    let mut cleanup = Cleanup {
        supervisor: None,
        cmdline: format!("sleep 1003.{}", std::process::id()),
        quick: dir.file("quick.yaml"),
    };
    let (report, survived) = can_client(&dir, &bus, "", true, &mut cleanup);
    for frame in ["123#11", "456#22", "789#33"] {
        assert!(
            report.contains(frame),
            "{frame} reaches the client: {report}"
        );
    }
    assert!(report.contains("evil: killed"), "{report}");
    assert!(
        report.contains("writer: latest sent 30000 to 1 channels"),
        "the rt writer went on: {report}"
    );
    let seen = number(&report, "procs").expect(&report);
    assert!((2..=8).contains(&seen), "{report}");
    assert!(!survived, "the orphan died with the supervisor: {report}");

    let relaxed = ", sandbox: {pid_namespace: false}";
    let (report, survived) = can_client(&dir, &bus, relaxed, false, &mut cleanup);
    assert!(number(&report, "procs").expect(&report) > 8, "{report}");
    assert!(
        survived,
        "without the namespace the orphan survives: {report}"
    );
}
