//! `bulkhead can` observed from outside: real processes, a virtual bus, real data.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_bulkhead")
}

fn bulkhead(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("bulkhead runs")
}

fn data(name: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../can/tests/data");
    dir.join(name).to_string_lossy().into_owned()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const LOG: &str = "comma2k19_rav4_seg40_excerpt.log.gz";
const DBC: &str = "toyota_new_mc_pt_generated.dbc";

/// A child process that is killed and reaped when dropped (even if a test fails).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bulkhead can bus NAME` and waits until it listens.
fn start_bus(name: &str, bitrate: &str) -> Reaped {
    let mut child = Command::new(bin())
        .args(["can", "bus", name, "--bitrate", bitrate])
        .stderr(Stdio::piped())
        .spawn()
        .expect("bus starts");
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("virtual CAN bus"), "bus said {line:?}");
    Reaped(child)
}

fn unique(tag: &str) -> String {
    format!("clitest-{tag}-{}", std::process::id())
}

#[test]
fn decode_prints_one_json_line_per_decodable_frame_and_counts_the_rest() {
    let out = bulkhead(&["can", "decode", "--dbc", &data(DBC), &data(LOG)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let mut speeds = Vec::new();
    for line in stdout.lines() {
        // Exactly the shape, keys in its order.
        let keys = [
            "{\"t\":",
            ",\"iface\":\"",
            ",\"id\":",
            ",\"message\":\"",
            ",\"signals\":{",
        ];
        let mut at = 0;
        for key in keys {
            let found = line[at..]
                .find(key)
                .unwrap_or_else(|| panic!("{key} in {line}"));
            at += found + key.len();
        }
        assert!(line.ends_with("}}"), "{line}");
        if line.contains(",\"message\":\"SPEED\",") && line.contains("\"iface\":\"can0\"") {
            assert!(line.contains(",\"id\":180,"), "{line}");
            let value = line.split("\"SPEED\":").nth(1).unwrap();
            let value: f64 = value.split([',', '}']).next().unwrap().parse().unwrap();
            speeds.push(value);
        }
    }
    assert!(speeds.len() > 200);
    assert!(speeds.iter().all(|s| (29.38..=73.05).contains(s)));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("undecodable"), "{stderr}");
}

#[test]
fn decode_reports_bad_inputs_with_exit_1() {
    let out = bulkhead(&["can", "decode", "--dbc", "/nonexistent.dbc", &data(LOG)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent.dbc"));
    let out = bulkhead(&["can", "decode", "--dbc", &data("README.md"), &data(LOG)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not a valid DBC"));
    let dir = std::env::temp_dir().join(unique("bad-log"));
    std::fs::write(&dir, "(1.0) can0 0B4#000000001D0B7A5E\ngarbage\n").unwrap();
    let out = bulkhead(&["can", "decode", "--dbc", &data(DBC), dir.to_str().unwrap()]);
    let _ = std::fs::remove_file(&dir);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout).lines().count(), 1);
    assert!(
        text(&out.stderr).contains("1 malformed lines"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        &["can", "bus", "bad name"][..],
        &["can", "bus", "ok", "--bitrate", "2000000"],
        &["can", "dump", "--bus", "x", "--timeout", "3 parsecs"],
        &["can", "replay", "log", "--bus", "x", "--speed", "-1"],
    ] {
        assert_eq!(bulkhead(args).status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn missing_buses_are_reported_clearly() {
    let out = bulkhead(&["can", "dump", "--bus", &unique("none"), "--timeout", "1s"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no virtual CAN bus"));
    let out = bulkhead(&["can", "dump", "--bus", "socketcan:bulkheadnone0"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no SocketCAN support") || stderr.contains("no network interface"),
        "{stderr}"
    );
}

#[test]
fn a_second_bus_of_the_same_name_is_refused() {
    let name = unique("dup");
    let _bus = start_bus(&name, "500000");
    let out = bulkhead(&["can", "bus", &name]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("already being served"));
}

#[test]
fn replayed_log_arrives_at_a_dumping_node_in_order_of_arbitration_and_time() {
    let name = unique("replay");
    let _bus = start_bus(&name, "500000");
    let out_path = std::env::temp_dir().join(unique("dump-out"));
    let out_file = std::fs::File::create(&out_path).unwrap();
    let mut dump = Reaped(
        Command::new(bin())
            .args([
                "can",
                "dump",
                "--bus",
                &name,
                "--count",
                "500",
                "--timeout",
                "20s",
            ])
            .stdout(out_file)
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let replay = bulkhead(&[
        "can",
        "replay",
        &data(LOG),
        "--bus",
        &name,
        "--iface",
        "can0",
        "--speed",
        "4",
    ]);
    let replay_time = t0.elapsed();
    assert_eq!(replay.status.code(), Some(0), "{}", text(&replay.stderr));
    assert!(
        text(&replay.stderr).contains("replayed 6619 frames"),
        "{}",
        text(&replay.stderr)
    );
    // 6 s of log at 4x: about 1.5 s, never much faster.
    assert!(replay_time > Duration::from_millis(1300), "{replay_time:?}");
    let status = dump.0.wait().unwrap();
    let dumped = std::fs::read_to_string(&out_path).unwrap();
    let _ = std::fs::remove_file(&out_path);
    assert_eq!(status.code(), Some(0));
    let lines: Vec<&str> = dumped.lines().collect();
    assert_eq!(lines.len(), 500);
    let mut last_t = 0u64;
    for line in &lines {
        let r = bulkhead_can::candump::parse_line(line, 0).unwrap();
        assert_eq!(r.iface, name);
        assert!(r.t_ns > last_t, "timestamps increase: {line}");
        last_t = r.t_ns;
    }
    // The excerpt's first can0 frame is the first on the bus.
    let first_logged = text(
        &Command::new("sh")
            .arg("-c")
            .arg(format!("zcat {} | grep ' can0 ' | head -1", data(LOG)))
            .output()
            .unwrap()
            .stdout,
    );
    let first_id = first_logged.split_whitespace().nth(2).unwrap();
    assert!(lines[0].ends_with(first_id), "{} vs {first_id}", lines[0]);
}

#[test]
fn dump_times_out_with_exit_1_when_fewer_frames_came() {
    let name = unique("quiet");
    let _bus = start_bus(&name, "125000");
    let t0 = Instant::now();
    let out = bulkhead(&[
        "can",
        "dump",
        "--bus",
        &name,
        "--count",
        "1",
        "--timeout",
        "300ms",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(text(&out.stderr).contains("received 0 of 1"));
}
