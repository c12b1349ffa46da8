//! python-can and cantools, installed unchanged from the package registry into `.venv`
//! (scripts/setup.sh, pinned in python/requirements-test.txt), on a bulkhead bus through
//! `bulkhead can bus NAME --socketcand`: frames both ways in order and without loss at
//! the bus's full rate, candump logs read both ways, and cantools decoding what the bus
//! carries as bulkhead does. The Python side is tests/python/can_peer.py.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_bulkhead")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The test environment's Python, or None (the test then says how to make it).
fn python() -> Option<PathBuf> {
    let python = repo().join(".venv/bin/python");
    if python.exists() {
        return Some(python);
    }
    eprintln!(
        "skipping: no Python test environment at {} (scripts/setup.sh creates it; \
         `bash scripts/test.sh` runs it)",
        python.display()
    );
    None
}

fn peer(python: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(python);
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/can_peer.py"))
        .args(args);
    cmd
}

/// The last line of a peer's output, as JSON; panics with its stderr when it failed.
fn result(out: std::process::Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python peer failed: {}{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap()
}

/// A child killed and reaped when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `bulkhead can bus NAME --bitrate RATE --socketcand 0`, and the port it chose.
fn socketcand_bus(name: &str, bitrate: u64) -> (Reaped, String) {
    let mut child = Command::new(bin())
        .args(["can", "bus", name, "--socketcand", "0", "--bitrate"])
        .arg(bitrate.to_string())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut port = None;
    for line in lines.by_ref().take(2) {
        let line = line.unwrap();
        if let Some(addr) = line.strip_prefix("socketcand on 127.0.0.1:") {
            port = addr.split_whitespace().next().map(str::to_string);
        }
    }
    let port = port.expect("the bus names its socketcand port");
    (Reaped(child), port)
}

fn unique(tag: &str) -> String {
    format!("sc-{tag}-{}", std::process::id())
}

/// A file in the temporary directory; `name` ends with the suffix python-can goes by.
fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sc-{}-{name}", std::process::id()))
}

/// Waits for the line `ready` from a peer.
fn wait_ready(out: &mut BufReader<ChildStdout>) {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the peer did not connect");
}

/// Frames of the bus's full rate: 8-byte standard frames of 135 bits (Davis et al. 2007,
/// Eq. 1), back to back.
fn full_rate(bitrate: u64) -> f64 {
    bitrate as f64 / 135.0
}

const FRAMES: usize = 10_000;
const BITRATE: u64 = 1_000_000;

#[test]
fn python_can_frames_reach_a_dump_in_order_at_the_buss_full_rate() {
    let Some(python) = python() else {
        return;
    };
    let name = unique("to-dump");
    let (_bus, port) = socketcand_bus(&name, BITRATE);
    let log = scratch("to-dump.log");
    let mut dump = Reaped(
        Command::new(bin())
            .args(["can", "dump", "-L", &name, "--timeout", "120s"])
            .stdout(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    // The dump is attached once it shows a frame.
    let end = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(&log).unwrap().len() == 0 {
        assert!(Instant::now() < end, "the dump never attached");
        Command::new(bin())
            .args(["can", "send", &name, "7FF#"])
            .status()
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let sent = result(
        peer(&python, &["send", &port, &name, &FRAMES.to_string()])
            .output()
            .unwrap(),
    );
    assert_eq!(sent["sent"], FRAMES);
    // Every frame, in order: the peer's frames queue in its node, so the bus carries
    // them back to back.
    let end = Instant::now() + Duration::from_secs(60);
    let records = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        let records: Vec<_> = text
            .lines()
            .map(|l| bulkhead_can::candump::parse_line(l, 0).unwrap())
            .filter(|r| r.frame.id().raw() == 0x123)
            .collect();
        if records.len() >= FRAMES || Instant::now() > end {
            break records;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = dump.0.kill();
    let seqs: Vec<u32> = records
        .iter()
        .map(|r| u32::from_le_bytes(r.frame.data()[..4].try_into().unwrap()))
        .collect();
    assert_eq!(seqs, (0..FRAMES as u32).collect::<Vec<_>>());
    let span = (records[FRAMES - 1].t_ns - records[0].t_ns) as f64 / 1e9;
    let rate = (FRAMES - 1) as f64 / span;
    eprintln!(
        "python-can -> bulkhead: {FRAMES} frames in {span:.3} s of bus time: {rate:.0} frames/s \
         ({:.0}% of the {:.0} frames/s of a full bus at {BITRATE} bit/s); the peer sent for {:.3} s",
        100.0 * rate / full_rate(BITRATE),
        full_rate(BITRATE),
        sent["seconds"].as_f64().unwrap()
    );
    assert!(rate > 0.5 * full_rate(BITRATE), "{rate} frames/s");
    // python-can's own LogReader reads the dump's candump log.
    let read = result(
        peer(
            &python,
            &["readlog", log.to_str().unwrap(), &FRAMES.to_string()],
        )
        .output()
        .unwrap(),
    );
    assert_eq!(read["read"], FRAMES);
    let _ = std::fs::remove_file(&log);
}

#[test]
fn bulkhead_frames_reach_python_can_in_order_and_bulkhead_reads_its_logger_output() {
    let Some(python) = python() else {
        return;
    };
    let name = unique("to-python");
    let (_bus, port) = socketcand_bus(&name, BITRATE);
    let log = scratch("python-logger.log");
    let mut receiver = Reaped(
        peer(
            &python,
            &[
                "receive",
                &port,
                &name,
                &FRAMES.to_string(),
                log.to_str().unwrap(),
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let mut out = BufReader::new(receiver.0.stdout.take().unwrap());
    wait_ready(&mut out);
    let gen = Command::new(bin())
        .args([
            "can", "gen", &name, "-g", "0ms", "-I", "123", "-L", "8", "-D", "i",
        ])
        .args(["-n", &FRAMES.to_string()])
        .output()
        .unwrap();
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let status = receiver.0.wait().unwrap();
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    let mut err = String::new();
    receiver
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{text}{err}");
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["received"], FRAMES);
    let span = summary["last"].as_f64().unwrap() - summary["first"].as_f64().unwrap();
    let rate = (FRAMES - 1) as f64 / span;
    eprintln!(
        "bulkhead -> python-can: {FRAMES} frames in {span:.3} s of bus time: {rate:.0} frames/s \
         ({:.0}% of a full bus)",
        100.0 * rate / full_rate(BITRATE)
    );
    assert!(rate > 0.5 * full_rate(BITRATE), "{rate} frames/s");
    // bulkhead reads python-can's can.Logger output (it marks each frame ` R`).
    let input = bulkhead_can::candump::open_log(&log).unwrap();
    let records: Vec<_> = bulkhead_can::candump::Reader::new(input)
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(records.len(), FRAMES);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.iface, name);
        assert_eq!(r.frame.data()[..4], (i as u32).to_le_bytes(), "{r}");
    }
    let _ = std::fs::remove_file(&log);
}

#[test]
fn cantools_decodes_the_replayed_rav4_log_as_bulkhead_decodes_python_cans_log_of_it() {
    let Some(python) = python() else {
        return;
    };
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../can/tests/data");
    let dbc = data.join("toyota_new_mc_pt_generated.dbc");
    let name = unique("rav4");
    let (_bus, port) = socketcand_bus(&name, 500_000);
    let (log, decoded) = (scratch("rav4.log"), scratch("rav4-cantools.jsonl"));
    let mut decoder = Reaped(
        peer(
            &python,
            &[
                "decode",
                &port,
                &name,
                dbc.to_str().unwrap(),
                log.to_str().unwrap(),
                decoded.to_str().unwrap(),
            ],
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let mut out = BufReader::new(decoder.0.stdout.take().unwrap());
    wait_ready(&mut out);
    let excerpt = data.join("comma2k19_rav4_seg40_excerpt.log.gz");
    let replay = Command::new(bin())
        .args(["can", "replay", excerpt.to_str().unwrap(), "--bus", &name])
        .args(["--iface", "can0", "--speed", "4"])
        .output()
        .unwrap();
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    assert!(decoder.0.wait().unwrap().success());
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["received"], 6619, "every can0 frame of the excerpt");
    // bulkhead decodes python-can's log of the bus with the same DBC.
    let ours = Command::new(bin())
        .args([
            "can",
            "decode",
            "--dbc",
            dbc.to_str().unwrap(),
            log.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        ours.status.success(),
        "{}",
        String::from_utf8_lossy(&ours.stderr)
    );
    let key = |v: &serde_json::Value| {
        let t = (v["t"].as_f64().unwrap() * 1e6).round() as u64;
        (t, v["id"].as_u64().unwrap())
    };
    let bulkhead: std::collections::HashMap<_, serde_json::Value> =
        String::from_utf8_lossy(&ours.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .map(|v: serde_json::Value| (key(&v), v))
            .collect();
    let theirs = std::fs::read_to_string(&decoded).unwrap();
    let mut compared = 0;
    for line in theirs.lines() {
        let want: serde_json::Value = serde_json::from_str(line).unwrap();
        let got = &bulkhead[&key(&want)];
        assert_eq!(got["message"], want["message"], "{line}");
        let (ours, theirs) = (
            got["signals"].as_object().unwrap(),
            want["signals"].as_object().unwrap(),
        );
        assert_eq!(ours.len(), theirs.len(), "{line}");
        for (signal, value) in theirs {
            let (a, b) = (ours[signal].as_f64().unwrap(), value.as_f64().unwrap());
            assert!(
                (a - b).abs() <= 1e-9 * b.abs().max(1.0),
                "{signal}: {a} vs cantools {b}"
            );
        }
        compared += 1;
    }
    assert!(compared > 4_000, "{compared} frames compared");
    assert_eq!(compared, summary["decoded"].as_u64().unwrap() as usize);
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&decoded);
}

/// socketcand has no authentication: the bus serves it on loopback unless told otherwise,
/// and refuses another address without `--socketcand-remote`, before binding anything.
#[test]
fn socketcand_listens_only_on_loopback_by_default() {
    let name = unique("loopback");
    let (_bus, port) = socketcand_bus(&name, 500_000);
    assert!(port.parse::<u16>().is_ok_and(|p| p > 0), "{port}");
    let out = Command::new(bin())
        .args(["can", "bus", &unique("remote"), "--socketcand", "0.0.0.0:0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("--socketcand-remote"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("socketcand on"),
        "nothing may listen: {stderr}"
    );
}
