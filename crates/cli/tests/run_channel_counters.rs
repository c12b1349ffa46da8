//! `bulkhead ctl status` of a real `bulkhead run` reports each channel of the
//! description with what its ends counted (messages written and read, lost) and the
//! state of each end (docs/control.md).

mod common;
use common::{exclusive_cpus_lock, Running, Scratch};
use serde_json::Value;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn status(socket: &Path, json: bool) -> String {
    let mut cmd = common::bulkhead();
    cmd.arg("ctl").arg("--control").arg(socket).arg("status");
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `bulkhead run FILE` with a control socket at `socket`, its stderr piped.
fn start(file: &Path, socket: &Path) -> Running {
    Running(Some(
        common::bulkhead()
            .arg("run")
            .arg(file)
            .args(["--timeout", "20s", "--control"])
            .arg(socket)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ))
}

/// The channels of `ctl status --json` once `settled` holds of them, within 15 s.
fn channels_once(socket: &Path, what: &str, settled: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
        if UnixStream::connect(socket).is_err() {
            continue;
        }
        let doc: Value = serde_json::from_str(&status(socket, true)).unwrap();
        let channels = doc["status"]["channels"].clone();
        if settled(&channels) {
            return channels;
        }
    }
}

/// The channel peer program, which must be built, and the exclusive CPUs' lock. The
/// tests that call it need root.
fn peer_and_cpus() -> (std::path::PathBuf, std::fs::File) {
    (common::built("bulkhead-chan-peer"), exclusive_cpus_lock())
}

#[test]
#[ignore = "needs root: the partitions' cpusets"]
fn status_reports_each_channels_counters_and_ends() {
    let (peer, _lock) = peer_and_cpus();
    let dir = Scratch::new("chan-counters");
    let file = dir.file("car.yaml");
    let socket = dir.file("car.sock");
    let peer = peer.display();
    // prod writes 300 messages to `speed` and then 50 to `pos`; cons reads the 300 and
    // then stays attached to `pos`, reading its latest message over and over.
    std::fs::write(
        &file,
        format!(
            "system: {{cpus: 0-1}}
partitions:
  - {{name: prod, cpus: 0, processes: [\"sh -c 'PEER_CHANNEL=speed {peer} fifo-send 300 && PEER_CHANNEL=pos {peer} latest-send 50 && exec sleep 60'\"]}}
  - {{name: cons, cpus: 1, processes: [\"sh -c 'PEER_CHANNEL=speed {peer} fifo-recv 300 && PEER_CHANNEL=pos exec {peer} latest-recv 1000000'\"]}}
channels:
  - {{name: speed, kind: fifo, message_size: 32, depth: 64, writer: prod, readers: [cons]}}
  - {{name: pos, kind: latest, message_size: 32, writer: prod, readers: [cons]}}
"
        ),
    )
    .unwrap();
    let mut run = start(&file, &socket);
    let channels = channels_once(&socket, "the counters never settled", |c| {
        c[1]["written"] == 50 && c[1]["read"].as_u64() > Some(0)
    });
    let (speed, pos) = (&channels[0], &channels[1]);
    assert_eq!(
        (&speed["name"], &speed["kind"], &speed["writer"]),
        (&"speed".into(), &"fifo".into(), &"prod".into()),
        "{channels}"
    );
    assert_eq!(speed["readers"][0], "cons");
    assert_eq!(
        (&speed["written"], &speed["read"]),
        (&300.into(), &300.into())
    );
    assert_eq!((&speed["lost"], &speed["dropped"]), (&0.into(), &0.into()));
    // Both ends of `speed` are done with it; cons holds `pos`, whose writer is done.
    assert_eq!(speed["writer_end"]["state"], "closed", "{channels}");
    assert_eq!(
        speed["reader_end"],
        serde_json::json!({"state": "closed", "pid": null})
    );
    assert_eq!(pos["kind"], "latest");
    assert_eq!(pos["writer_end"]["state"], "closed", "{channels}");
    assert_eq!(pos["reader_end"]["state"], "attached", "{channels}");
    assert!(pos["reader_end"]["pid"].as_u64().unwrap() > 1);
    // The reader saw the last message; the ones it never saw were overwritten.
    let overwritten = pos["overwritten"].as_u64().unwrap();
    assert!(overwritten <= 49, "{channels}");
    assert_eq!(
        (&pos["lost"], &pos["dropped"]),
        (&overwritten.into(), &0.into())
    );

    let text = status(&socket, false);
    assert!(
        text.contains("channel speed (fifo): prod -> cons, 300 written, 300 read, 0 lost (0 dropped, 0 overwritten); writer closed, reader closed"),
        "{text}"
    );
    assert!(
        text.contains("channel pos (latest): prod -> cons, 50 written, ")
            && text.contains("; writer closed, reader attached (pid "),
        "{text}"
    );
    drop(run.0.take().map(|mut c| {
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        c.wait()
    }));
}

/// The description's `overflow:` rule of a fifo is what `run`'s channel does when it is
/// full (as `sim` does, crates/sim/tests/platform.rs): prod writes 300 messages to a
/// fifo of 4 while cons waits 2 s before it reads. `drop_newest` keeps the first 4 and
/// counts 296 dropped at the writer, `drop_oldest` keeps the last 4 and counts 296
/// overwritten at the reader, `block` holds the writer and loses nothing.
#[test]
#[ignore = "needs root: the partitions' cpusets"]
fn a_full_fifo_follows_its_overflow_rule() {
    let (peer, _lock) = peer_and_cpus();
    let cases = [
        (
            "drop_newest",
            "drained 4 in order, first Some(0), last Some(3)",
            296,
            0,
        ),
        (
            "drop_oldest",
            "drained 4 in order, first Some(296), last Some(299)",
            0,
            296,
        ),
        (
            "block",
            "drained 300 in order, first Some(0), last Some(299)",
            0,
            0,
        ),
    ];
    for (rule, drained, dropped, overwritten) in cases {
        let dir = Scratch::new(&format!("overflow-{rule}"));
        let file = dir.file("o.yaml");
        let socket = dir.file("o.sock");
        let peer = peer.display();
        std::fs::write(
            &file,
            format!(
                "system: {{cpus: 0-1}}
partitions:
  - {{name: prod, cpus: 0, processes: [\"sh -c 'PEER_CHANNEL=speed {peer} fifo-send 300; exec sleep 60'\"]}}
  - {{name: cons, cpus: 1, processes: [\"sh -c 'sleep 2; PEER_CHANNEL=speed {peer} fifo-drain 0 >&2; exec sleep 60'\"]}}
channels:
  - {{name: speed, kind: fifo, message_size: 32, depth: 4, overflow: {rule}, writer: prod, readers: [cons]}}
"
            ),
        )
        .unwrap();
        let mut run = Running(Some(
            common::bulkhead()
                .arg("run")
                .arg(&file)
                .args(["--timeout", "20s", "--control"])
                .arg(&socket)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ));
        let deadline = Instant::now() + Duration::from_secs(15);
        let speed = loop {
            assert!(Instant::now() < deadline, "{rule}: the writer never closed");
            std::thread::sleep(Duration::from_millis(100));
            if UnixStream::connect(&socket).is_err() {
                continue;
            }
            let doc: Value = serde_json::from_str(&status(&socket, true)).unwrap();
            let speed = doc["status"]["channels"][0].clone();
            if speed["writer_end"]["state"] == "closed" && speed["reader_end"]["state"] == "closed"
            {
                break speed;
            }
        };
        assert_eq!(speed["written"], 300 - dropped, "{rule}: {speed}");
        assert_eq!(
            (&speed["dropped"], &speed["overwritten"]),
            (&dropped.into(), &overwritten.into()),
            "{rule}: {speed}"
        );
        let child = run.0.take().unwrap();
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(drained), "{rule}: {stderr}");
    }
}
