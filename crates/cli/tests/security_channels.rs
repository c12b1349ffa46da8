//! Channels that a reader cannot damage, attacked from inside partitions through
//! `bulkhead run`: each attack is made by a process of a partition running as
//! a user other than root (`nobody`, or a uid bulkhead allocates), and must fail while the writer (and any other reader, and the CAN
//! gateway) goes on. Attacker programs: roles of `bulkhead-chan-peer`.

mod common;
use common::{bulkhead, exclusive_cpus_lock, Scratch};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

fn peer() -> PathBuf {
    common::built("bulkhead-chan-peer")
}

/// Runs the description `desc` (written to `dir`) for at most `timeout`; returns stderr.
fn run(dir: &Scratch, desc: &str, timeout: &str) -> String {
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let out = bulkhead()
        .args(["run", path.to_str().unwrap(), "--timeout", timeout])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    stderr
}

fn read(dir: &Scratch, name: &str) -> String {
    std::fs::read_to_string(dir.file(name)).unwrap_or_default()
}

/// The reader opens its message file read-write (through /proc/self/fd), pwrites it,
/// mprotects a read-only mapping of it to writable, ftruncates it and truncates it by
/// path: all refused; the writer sends its 20000 messages and the reader gets them all.
#[test]
#[ignore = "needs root: users and cgroups"]
fn a_reader_cannot_write_resize_or_remap_the_message_file() {
    let peer = peer();
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-reader");
    let (peer, d) = (peer.display(), dir.0.display());
    let desc = format!(
        "system: {{}}
partitions:
  - {{name: prod, cpus: 0, processes: [\"sh -c 'PEER_CHANNEL=speed exec {peer} fifo-send 20000 > {d}/writer 2>&1'\"]}}
  - {{name: cons, cpus: 1, user: nobody, processes: [\"sh -c 'PEER_CHANNEL=speed exec {peer} attack-reader 20000 > {d}/attacker 2>&1'\"]}}
channels:
  - {{name: speed, kind: fifo, message_size: 32, depth: 64, writer: prod, readers: [cons]}}
"
    );
    let stderr = run(&dir, &desc, "30s");
    let (writer, attacker) = (read(&dir, "writer"), read(&dir, "attacker"));
    for attack in [
        "open read-write",
        "pwrite",
        "mprotect to write",
        "ftruncate",
        "truncate by path",
    ] {
        assert!(
            attacker.contains(&format!("attack {attack}: refused")),
            "{attack}: {attacker}\n{stderr}"
        );
    }
    assert!(!attacker.contains("SUCCEEDED"), "{attacker}");
    assert!(
        attacker.contains("received 20000 in order"),
        "{attacker}\n{stderr}"
    );
    assert!(
        writer.starts_with("sent 20000"),
        "the writer went on: {writer}\n{stderr}"
    );
}

/// One writer, two latest channels: the reader of one writes garbage over its own
/// control words for a second while the writer publishes; the writer never fails and
/// the other reader sees every message up to the last, fresh and untorn.
#[test]
#[ignore = "needs root: users and cgroups"]
fn a_reader_scribbling_on_its_own_words_hurts_neither_the_writer_nor_another_reader() {
    let peer = peer();
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-scribble");
    let (peer, d) = (peer.display(), dir.0.display());
    let desc = format!(
        "system: {{}}
partitions:
  - {{name: prod, cpus: 0, processes: [\"sh -c 'PEER_CHANNEL=evil,good exec {peer} latest-send 40000 > {d}/writer 2>&1'\"]}}
  - {{name: evil, cpus: 1, processes: [\"sh -c 'PEER_CHANNEL=evil exec {peer} scribble 1000 > {d}/attacker 2>&1'\"]}}
  - {{name: good, cpus: 1, processes: [\"sh -c 'PEER_CHANNEL=good exec {peer} latest-recv 40000 > {d}/reader 2>&1'\"]}}
channels:
  - {{name: evil, kind: latest, message_size: 32, writer: prod, readers: [evil]}}
  - {{name: good, kind: latest, message_size: 32, writer: prod, readers: [good]}}
"
    );
    let stderr = run(&dir, &desc, "40s");
    let (writer, attacker, reader) = (
        read(&dir, "writer"),
        read(&dir, "attacker"),
        read(&dir, "reader"),
    );
    assert!(attacker.starts_with("scribbled"), "{attacker}\n{stderr}");
    assert!(
        writer.starts_with("latest sent 40000 to 2 channels"),
        "the writer went on: {writer}\n{stderr}"
    );
    assert!(
        reader.starts_with("latest reached 39999"),
        "the other reader: {reader}\n{stderr}"
    );
}

/// A child process killed on drop (the bus), even when the test fails.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A CAN client tries to truncate its two gateway channels and writes garbage over
/// all it can write of them for two seconds: the truncations are refused, the gateway
/// keeps running and the other client receives every frame sent on the bus.
#[test]
#[ignore = "needs root: users and cgroups"]
fn a_can_client_cannot_take_the_bus_from_the_others() {
    let peer = peer();
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-can");
    let bus = format!("bh-sec-{}", std::process::id());
    let _bus = Killed(bulkhead().args(["can", "bus", &bus]).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(200));
    let (exe, peer, d) = (
        env!("CARGO_BIN_EXE_bulkhead"),
        peer.display(),
        dir.0.display(),
    );
    let desc = format!(
        "system: {{}}
partitions:
  - {{name: gw, kind: rt, cpus: 0, scheduler: edf, tasks: []}}
  - name: ic
    cpus: 1
    processes: [\"{exe} can map --bus {bus} --count 3 --timeout 5s > {d}/mapped 2> {d}/map.err\"]
  - name: evil
    cpus: 1
    processes: [\"sh -c 'PEER_BUS={bus} exec {peer} attack-can 2000 > {d}/attacker 2>&1'\"]
buses:
  - name: {bus}
    gateway: gw
    period: 2ms
    reader_budget: 200us
    writer_budget: 200us
    clients:
      - {{partition: ic}}
      - {{partition: evil, allow: [0x1A0]}}
"
    );
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let run = bulkhead()
        .args(["run", path.to_str().unwrap(), "--timeout", "6s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Frames from the bus while the attacker scribbles.
    std::thread::sleep(Duration::from_millis(1200));
    let frames = dir.file("frames.log");
    std::fs::write(
        &frames,
        "(0.000000) can0 123#11\n(0.010000) can0 456#22\n(0.020000) can0 789#33\n",
    )
    .unwrap();
    let replay = bulkhead()
        .args(["can", "replay", frames.to_str().unwrap(), "--bus", &bus])
        .output()
        .unwrap();
    assert!(replay.status.success());
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let (attacker, mapped) = (read(&dir, "attacker"), read(&dir, "mapped"));
    assert!(
        attacker.starts_with("attack ftruncate: refused"),
        "{attacker}\n{stderr}"
    );
    assert!(!attacker.contains("SUCCEEDED"), "{attacker}\n{stderr}");
    assert!(attacker.contains("garbage pages written"), "{attacker}");
    for frame in ["123#11", "456#22", "789#33"] {
        assert!(
            mapped.contains(frame),
            "{frame} reaches the honest client: {mapped}\n{}\n{stderr}",
            read(&dir, "map.err")
        );
    }
}

/// A named channel that a supervisor which no longer runs left in /dev/shm (older
/// versions named their channels `c<pid>-<n>`) is removed by the next run, which says
/// so; a user's named channel of another name is left alone.
#[test]
#[ignore = "needs root: cgroups"]
fn the_next_run_removes_named_channels_a_dead_supervisor_left() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-leftover");
    let left = Path::new("/dev/shm/bulkhead-chan-c999999999-7");
    let mine = format!("/dev/shm/bulkhead-chan-user-{}", std::process::id());
    std::fs::write(left, b"left by a killed supervisor").unwrap();
    std::fs::write(&mine, b"not a channel of a run").unwrap();
    let stderr = run(
        &dir,
        "system: {}\npartitions:\n  - {name: p, cpus: 0, processes: [\"true\"]}\n",
        "5s",
    );
    let kept = Path::new(&mine).exists();
    let _ = std::fs::remove_file(&mine);
    let _ = std::fs::remove_file(left);
    assert!(
        stderr.contains(
            "removed channel left by a bulkhead that died: /dev/shm/bulkhead-chan-c999999999-7"
        ),
        "{stderr}"
    );
    assert!(kept, "a channel that is not a run's is left alone");
}
