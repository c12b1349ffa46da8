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

// ---- the gateway service and the map tool -------------------------------------

use bulkhead_can::gateway::WIRE_SIZE;
use bulkhead_chan::{Channel, Spec};
use std::io::Read;
use std::sync::mpsc;

/// Named channels destroyed when dropped.
struct Chans(Vec<String>);

impl Chans {
    /// Creates a named fifo of gateway messages.
    fn fifo(&mut self, name: &str, depth: u32) -> Channel {
        let c = Channel::create_named(&Spec::fifo(name, WIRE_SIZE as u32, depth)).unwrap();
        self.0.push(name.to_string());
        c
    }
}

impl Drop for Chans {
    fn drop(&mut self) {
        for name in &self.0 {
            if let Ok(c) = Channel::open_named(name) {
                let _ = c.destroy();
            }
        }
    }
}

fn gateway(args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(["can", "gateway"]).args(args);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    cmd
}

/// Waits until the gateway process holds the sending end of `channel` (it attached
/// to the bus before opening its channels), or panics after 10 s.
fn wait_until_claimed(channel: &Channel, gateway: &mut Reaped) {
    let end = Instant::now() + Duration::from_secs(10);
    while channel.sender().is_ok() {
        assert!(
            gateway.0.try_wait().unwrap().is_none(),
            "the gateway exited early"
        );
        assert!(Instant::now() < end, "the gateway did not open its channel");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends SIGTERM and returns the exit code and stderr.
fn terminate(mut child: Reaped) -> (Option<i32>, String) {
    // SAFETY: kill(2) on our own child, which we have not reaped yet.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
    let status = child.0.wait().unwrap();
    let mut err = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code(), err)
}

#[test]
fn the_gateway_forwards_bus_frames_to_a_mapper_and_only_allowed_ids_to_the_bus() {
    let bus = unique("gw");
    let _bus = start_bus(&bus, "500000");
    let mut chans = Chans(Vec::new());
    let (to, from) = (unique("gw-to"), unique("gw-from"));
    let to_channel = chans.fifo(&to, 256);
    chans.fifo(&from, 16);
    let mut reader = Reaped(
        gateway(&["--role", "reader", "--bus", &bus, "--period", "1ms"])
            .arg(format!("--to=ctl={to}"))
            .spawn()
            .unwrap(),
    );
    let writer = Reaped(
        gateway(&["--role", "writer", "--bus", &bus, "--period", "1ms"])
            .arg(format!("--from=ctl={from}"))
            .args(["--allow", "ctl=0x123,0x1ABCDE"])
            .spawn()
            .unwrap(),
    );
    wait_until_claimed(&to_channel, &mut reader);
    // A dump node, and a node standing for the rest of the vehicle: it pings until
    // the dump shows it is attached.
    let mut dump = Reaped(
        Command::new(bin())
            .args(["can", "dump", "--bus", &bus, "--timeout", "20s"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (lines_tx, lines) = mpsc::channel();
    let dump_out = BufReader::new(dump.0.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in dump_out.lines() {
            if lines_tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let vehicle = bulkhead_can::vbus::Node::attach(&bus).unwrap();
    let ping = bulkhead_can::Frame::new(bulkhead_can::CanId::Standard(0x7FF), &[1]).unwrap();
    let mut pings = 0;
    let end = Instant::now() + Duration::from_secs(10);
    let first = loop {
        vehicle.send(&ping).unwrap();
        pings += 1;
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(50)) {
            break line;
        }
        assert!(Instant::now() < end, "the dump saw no ping");
    };
    assert!(first.ends_with(" 7FF#01"), "{first}");
    // The partition's side: the pings come through the reader, in order and all of
    // them (its channel has room); of the two frames it sends, only the allowed one
    // reaches the bus, and it comes back like any bus frame.
    let env = bulkhead_can::mapper::env_var("body bus");
    assert_eq!(env, "BULKHEAD_CAN_BODY_BUS");
    let count = (pings + 1).to_string();
    let map = Command::new(bin())
        .args(["can", "map", "--bus", "body bus", "--send", "666#22"])
        .args(["--send", "123#11", "--count", &count, "--timeout", "20s"])
        .env(&env, format!("{to},{from}"))
        .output()
        .unwrap();
    assert_eq!(map.status.code(), Some(0), "{}", text(&map.stderr));
    let got: Vec<String> = text(&map.stdout).lines().map(str::to_string).collect();
    assert_eq!(got.len(), pings + 1, "{got:?}");
    for line in &got[..pings] {
        assert!(line.ends_with(" body bus 7FF#01"), "{line}");
    }
    assert!(got[pings].ends_with(" body bus 123#11"), "{got:?}");
    // The dump: the remaining pings, then 0x123; 0x666 (sent first) never.
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.contains("123#")) {
        seen.push(
            lines
                .recv_timeout(Duration::from_secs(10))
                .expect("0x123 on the bus"),
        );
    }
    std::thread::sleep(Duration::from_millis(100));
    seen.extend(lines.try_iter());
    assert!(seen.iter().all(|l| !l.contains("666#")), "{seen:?}");
    assert!(seen.iter().any(|l| l.ends_with(" 123#11")), "{seen:?}");
    drop(dump);
    let (code, err) = terminate(writer);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("ctl.tx_sent=1 ctl.tx_denied=1 ctl.tx_malformed=0"),
        "{err}"
    );
    let (code, err) = terminate(reader);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!("ctl.rx_forwarded={}", pings + 1)),
        "{err}"
    );
}

#[test]
fn gateway_and_map_report_bad_flags_and_missing_pieces() {
    for args in [
        &["can", "gateway", "--role", "reader", "--bus", "b"][..],
        &[
            "can", "gateway", "--role", "writer", "--bus", "b", "--to", "a=x",
        ],
        &[
            "can", "gateway", "--role", "reader", "--bus", "b", "--to", "a",
        ],
        &[
            "can", "gateway", "--role", "writer", "--bus", "b", "--from", "a=x", "--allow", "b=1",
        ],
        &[
            "can", "gateway", "--role", "writer", "--bus", "b", "--from", "a=x", "--allow",
            "a=0xZZ",
        ],
        &[
            "can", "gateway", "--role", "reader", "--bus", "b", "--to", "a=x", "--period", "0ms",
        ],
        &[
            "can", "gateway", "--role", "sideways", "--bus", "b", "--to", "a=x",
        ],
        &["can", "map", "--bus", "b", "--send", "XYZ#00"],
    ] {
        let out = bulkhead(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let bus = unique("gw-missing");
    let out = bulkhead(&[
        "can", "gateway", "--role", "reader", "--bus", &bus, "--to", "a=x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no virtual CAN bus"),
        "{}",
        text(&out.stderr)
    );
    let _bus = start_bus(&bus, "500000");
    let chan = unique("gw-nochan");
    let flag = format!("a={chan}");
    let out = bulkhead(&[
        "can", "gateway", "--role", "writer", "--bus", &bus, "--from", &flag,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("--from {flag}: no channel named")),
        "{err}"
    );
    let out = Command::new(bin())
        .args(["can", "map", "--bus", "can0", "--timeout", "1s"])
        .env_remove("BULKHEAD_CAN_CAN0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("BULKHEAD_CAN_CAN0 is not set"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn under_a_supervisor_the_writer_runs_one_job_per_period_and_publishes_its_counters() {
    use bulkhead_task::supervisor::{LinkSpec, TaskLink};
    let bus = unique("gw-task");
    let _bus = start_bus(&bus, "500000");
    let mut chans = Chans(Vec::new());
    let from = unique("gw-task-from");
    let from_channel = chans.fifo(&from, 16);
    const MS: u64 = 1_000_000;
    let mut link = TaskLink::create(&LinkSpec {
        name: format!("{bus}-writer"),
        task_index: 0,
        budget_ns: MS,
        period_ns: 2 * MS,
        deadline_ns: 2 * MS,
        epoch_ns: bulkhead_task::clock::now_ns(),
        ring_depth: 4096,
    })
    .unwrap();
    let mut cmd = gateway(&["--role", "writer", "--bus", &bus, "--max-frames", "2"]);
    cmd.args([format!("--from=be={from}"), "--allow=be=0x100".into()]);
    link.prepare(&mut cmd);
    let writer = Reaped(cmd.spawn().unwrap());
    // The partition: one allowed frame, two denied, one malformed message.
    let mut tx = from_channel.sender().unwrap();
    let frame = |id| bulkhead_can::Frame::new(bulkhead_can::CanId::Standard(id), &[7]).unwrap();
    for id in [0x100, 0x101, 0x7FF] {
        tx.write(&bulkhead_can::gateway::encode(0, 0, &frame(id)).unwrap())
            .unwrap();
    }
    let mut malformed = [0u8; WIRE_SIZE];
    malformed[16 + 4] = 9; // a data length of 9
    tx.write(&malformed).unwrap();
    let want = vec![
        ("be.tx_sent".to_string(), 1),
        ("be.tx_denied".to_string(), 2),
        ("be.tx_malformed".to_string(), 1),
    ];
    let end = Instant::now() + Duration::from_secs(10);
    while link.named_counters() != want {
        assert!(Instant::now() < end, "{:?}", link.named_counters());
        std::thread::sleep(Duration::from_millis(10));
    }
    link.request_stop();
    let mut writer = writer;
    let end = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = writer.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < end, "the writer did not stop");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0));
    let mut records = Vec::new();
    link.drain(&mut records);
    // Two frames per job at most: the four messages took at least two jobs, each
    // reported complete, one per release of the 2 ms grid.
    assert!(records.len() >= 2, "{records:?}");
    for pair in records.windows(2) {
        assert!(pair[1].index > pair[0].index, "{records:?}");
        assert_eq!(
            pair[1].release_ns - pair[0].release_ns,
            (pair[1].index - pair[0].index) * 2 * MS
        );
    }
}
