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

/// Devices and directories are refused, not read until memory runs out; a DBC above
/// `--max-input-size` names the limit and the flag.
#[test]
fn decode_refuses_special_files_and_bounds_the_dbc() {
    for (dbc, log, expect) in [
        (
            "/dev/zero",
            data(LOG),
            "/dev/zero: cannot read: a character device",
        ),
        ("/tmp", data(LOG), "/tmp: cannot read: a directory"),
        (
            &data(DBC),
            "/dev/zero".into(),
            "/dev/zero: cannot read: a character device, not a regular file",
        ),
    ] {
        let out = bulkhead(&["can", "decode", "--dbc", dbc, &log]);
        assert_eq!(out.status.code(), Some(1), "{dbc} {log}");
        assert!(text(&out.stderr).contains(expect), "{}", text(&out.stderr));
    }
    let out = bulkhead(&[
        "can",
        "decode",
        "--max-input-size",
        "1KiB",
        "--dbc",
        &data(DBC),
        &data(LOG),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(
            "larger than the input size limit of 1024 bytes; raise it with --max-input-size"
        ),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        &["can", "bus", "bad name"][..],
        &["can", "bus", "ok", "--bitrate", "2000000"],
        &["can", "dump", "x", "--timeout", "3 parsecs"],
        &["can", "replay", "log", "--bus", "x", "--speed", "-1"],
    ] {
        assert_eq!(bulkhead(args).status.code(), Some(2), "{args:?}");
    }
}

/// `--speed 1e-300` made the due time of the second record infinite, and replay
/// panicked; a speed out of range is now a usage error naming the flag.
#[test]
fn a_replay_speed_out_of_range_is_a_usage_error_naming_the_flag() {
    let name = unique("speed");
    let _bus = start_bus(&name, "500000");
    let log = std::env::temp_dir().join(unique("speed.log"));
    std::fs::write(&log, "(1.0) can0 123#00\n(2.0) can0 123#01\n").unwrap();
    for speed in ["1e-300", "1e300", "0", "-1", "NaN", "inf"] {
        let out = bulkhead(&[
            "can",
            "replay",
            log.to_str().unwrap(),
            "--bus",
            &name,
            "--speed",
            speed,
        ]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--speed {speed}: {stderr}");
        assert!(
            stderr.contains(&format!("invalid value '{speed}' for '--speed <SPEED>'"))
                && stderr.contains("want a number from 0.001"),
            "--speed {speed}: {stderr}"
        );
    }
    let _ = std::fs::remove_file(&log);
}

#[test]
fn missing_buses_are_reported_clearly() {
    let out = bulkhead(&["can", "dump", &unique("none"), "--timeout", "1s"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no virtual CAN bus"));
    let out = bulkhead(&["can", "dump", "socketcan:bulkheadnone0"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no SocketCAN support") || stderr.contains("no network interface"),
        "{stderr}"
    );
}

/// candump and cansend both take the interface positionally; `can dump` took
/// `--bus`. Both forms now dump the bus; giving both, or none, is a usage error.
#[test]
fn dump_takes_the_bus_as_candump_does_and_still_by_the_bus_flag() {
    let name = unique("positional");
    let _bus = start_bus(&name, "500000");
    for form in [&[name.as_str()][..], &["--bus", &name]] {
        let mut dump = Reaped(
            Command::new(bin())
                .args(["can", "dump", "-L", "--count", "1", "--timeout", "10s"])
                .args(form)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(Duration::from_millis(300));
        let send = bulkhead(&["can", "send", &name, "123#C0FFEE"]);
        assert_eq!(send.status.code(), Some(0), "{}", text(&send.stderr));
        let mut dumped = String::new();
        let stdout = dump.0.stdout.take().unwrap();
        std::io::Read::read_to_string(&mut BufReader::new(stdout), &mut dumped).unwrap();
        assert_eq!(dump.0.wait().unwrap().code(), Some(0), "{form:?}");
        assert!(dumped.contains("123#C0FFEE"), "{form:?}: {dumped}");
    }
    for args in [
        &["can", "dump", "a", "--bus", "b"][..],
        &["can", "dump", "-L"],
    ] {
        assert_eq!(bulkhead(args).status.code(), Some(2), "{args:?}");
    }
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
                "-L",
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
    let out = bulkhead(&["can", "dump", &name, "--count", "1", "--timeout", "300ms"]);
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
/// to the bus before opening its channels), or panics after 10 s. It reads the
/// writer's pid from the control words: attaching as the writer to find out would
/// hold the end for a moment and refuse the gateway ("held by live process").
fn wait_until_claimed(channel: &Channel, gateway: &mut Reaped) {
    let end = Instant::now() + Duration::from_secs(10);
    while channel.counters().unwrap().writer.pid == 0 {
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

/// Asks the gateway task under `link` to stop and checks that `child` exits 0 within 5 s.
fn stop_task(link: &bulkhead_task::link::TaskLink, child: &mut Reaped, role: &str) {
    link.request_stop();
    let end = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < end, "the {role} did not stop");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0));
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
            .args(["can", "dump", "-L", &bus, "--timeout", "20s"])
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
    use bulkhead_task::link::{LinkSpec, TaskLink};
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
    let mut writer = Reaped(cmd.spawn().unwrap());
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
        ("be.tx_dropped".to_string(), 0),
    ];
    let end = Instant::now() + Duration::from_secs(10);
    while link.named_counters() != want {
        assert!(Instant::now() < end, "{:?}", link.named_counters());
        std::thread::sleep(Duration::from_millis(10));
    }
    stop_task(&link, &mut writer, "writer");
    let mut records = Vec::new();
    link.drain(&mut records);
    // The jobs, each reported complete, one per release of the 2 ms grid.
    assert!(records.len() >= 2, "{records:?}");
    for pair in records.windows(2) {
        assert!(pair[1].index > pair[0].index, "{records:?}");
        assert_eq!(
            pair[1].release_ns - pair[0].release_ns,
            (pair[1].index - pair[0].index) * 2 * MS
        );
    }
}

/// The reader decodes SPEED of the replayed RAV4 log (3x) with the DBC and publishes the
/// stop-start triggers as named counters: `SPEED<68` held 0.3 s of log time and then
/// `SPEED<66`, once each (the speed falls from 69.6 to 65 km/h at the end of the log).
#[test]
fn under_a_supervisor_the_reader_publishes_the_stop_start_triggers_of_the_replayed_log() {
    use bulkhead_task::link::{LinkSpec, TaskLink};
    let bus = unique("gw-trig");
    let _bus = start_bus(&bus, "500000");
    let mut chans = Chans(Vec::new());
    let to = unique("gw-trig-to");
    let to_channel = chans.fifo(&to, 64);
    const MS: u64 = 1_000_000;
    let link = TaskLink::create(&LinkSpec {
        name: format!("{bus}-reader"),
        task_index: 0,
        budget_ns: MS,
        period_ns: 2 * MS,
        deadline_ns: 2 * MS,
        epoch_ns: bulkhead_task::clock::now_ns(),
        ring_depth: 4096,
    })
    .unwrap();
    let mut cmd = gateway(&["--role", "reader", "--bus", &bus, "--max-frames", "256"]);
    cmd.args([
        format!("--to=ctl={to}"),
        format!("--dbc={}", data(DBC)),
        "--suspend-when=SPEED<68@100000000".into(),
        "--resume-when=SPEED<66".into(),
    ]);
    link.prepare(&mut cmd);
    let mut reader = Reaped(cmd.spawn().unwrap());
    wait_until_claimed(&to_channel, &mut reader);
    let counters = |name: &str| {
        let named = link.named_counters();
        named.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    };
    // Published at attach, before the first job.
    let end = Instant::now() + Duration::from_secs(10);
    while counters("ss.resume_when").is_none() {
        assert!(Instant::now() < end, "{:?}", link.named_counters());
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(counters("ss.suspend_when"), Some(0));
    let replay = bulkhead(&[
        "can",
        "replay",
        &data(LOG),
        "--bus",
        &bus,
        "--iface",
        "can0",
        "--speed",
        "3",
    ]);
    assert_eq!(replay.status.code(), Some(0), "{}", text(&replay.stderr));
    let end = Instant::now() + Duration::from_secs(10);
    while counters("ss.resume_when") != Some(1) {
        assert!(Instant::now() < end, "{:?}", link.named_counters());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(counters("ss.suspend_when"), Some(1));
    stop_task(&link, &mut reader, "reader");
}

/// Under a supervisor the reader forwards each frame on its reception, not at its next
/// periodic release: with a 10 s period, three frames sent one after the other (each once
/// the previous one is in the client's channel) pass within the first period, each by an
/// activation of its own released at the frame's reception and complete before the next
/// frame is sent. A reader polled every period would forward none of them before its
/// second release, 10 s after the first.
#[test]
fn under_a_supervisor_the_reader_forwards_each_frame_on_reception() {
    use bulkhead_task::link::{LinkSpec, TaskLink};
    let bus = unique("gw-rx");
    let _bus = start_bus(&bus, "500000");
    let mut chans = Chans(Vec::new());
    let to = unique("gw-rx-to");
    let to_channel = chans.fifo(&to, 16);
    const MS: u64 = 1_000_000;
    const PERIOD: u64 = 10_000 * MS;
    let epoch = bulkhead_task::clock::now_ns();
    let mut link = TaskLink::create(&LinkSpec {
        name: format!("{bus}-reader"),
        task_index: 0,
        budget_ns: MS,
        period_ns: PERIOD,
        deadline_ns: PERIOD,
        epoch_ns: epoch,
        ring_depth: 64,
    })
    .unwrap();
    let mut cmd = gateway(&["--role", "reader", "--bus", &bus]);
    cmd.arg(format!("--to=ctl={to}"));
    link.prepare(&mut cmd);
    let mut reader = Reaped(cmd.spawn().unwrap());
    wait_until_claimed(&to_channel, &mut reader);
    let node = bulkhead_can::vbus::Node::attach(&bus).unwrap();
    let mut rx = to_channel.receiver().unwrap();
    let mut sent = Vec::new();
    for id in [0x101u32, 0x102, 0x103] {
        sent.push(bulkhead_task::clock::now_ns());
        let frame =
            bulkhead_can::Frame::new(bulkhead_can::CanId::Standard(id as u16), &[1]).unwrap();
        node.send(&frame).unwrap();
        let mut msg = [0u8; WIRE_SIZE];
        let end = Instant::now() + Duration::from_secs(20);
        while rx.try_read(&mut msg).is_err() {
            assert!(Instant::now() < end, "frame {id:#x} was not forwarded");
            std::thread::sleep(Duration::from_millis(1));
        }
        let (_, seq, got) = bulkhead_can::gateway::decode(&msg).unwrap();
        assert_eq!((seq, got.id().raw()), (sent.len() as u64 - 1, id));
    }
    sent.push(bulkhead_task::clock::now_ns());
    stop_task(&link, &mut reader, "reader");
    let mut records = Vec::new();
    link.drain(&mut records);
    // One activation per frame, and no other: the reader has no periodic job.
    assert_eq!(records.len(), 3, "{records:?}");
    for (k, r) in records.iter().enumerate() {
        assert_eq!(r.index, k as u64, "{records:?}");
        // Released at the frame's reception (its bus stamp, moved to CLOCK_MONOTONIC,
        // with a millisecond for the two clocks' reading), done before the next was sent,
        // all in the first period.
        assert!(r.release_ns + MS >= sent[k], "{k}: {r:?} sent {sent:?}");
        assert!(r.end_ns <= sent[k + 1], "{k}: {r:?} sent {sent:?}");
        assert!(r.release_ns < epoch + PERIOD, "{k}: {r:?}");
    }
}

#[test]
fn gateway_triggers_need_a_reader_a_dbc_and_a_signal_of_it() {
    for args in [
        &[
            "--role",
            "reader",
            "--bus",
            "b",
            "--to",
            "a=x",
            "--suspend-when",
            "SPEED<1",
        ][..],
        &[
            "--role",
            "writer",
            "--bus",
            "b",
            "--from",
            "a=x",
            "--dbc",
            "d",
            "--resume-when",
            "SPEED>1",
        ],
        &[
            "--role",
            "reader",
            "--bus",
            "b",
            "--to",
            "a=x",
            "--dbc",
            "d",
            "--suspend-when",
            "SPEED",
        ],
    ] {
        let out = gateway(args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let bus = unique("gw-trig-bad");
    let _bus = start_bus(&bus, "500000");
    let mut chans = Chans(Vec::new());
    let to = unique("gw-trig-bad-to");
    chans.fifo(&to, 4);
    let flag = format!("ctl={to}");
    let dbc = data(DBC);
    let args = [
        "--role",
        "reader",
        "--bus",
        &bus,
        "--to",
        &flag,
        "--dbc",
        &dbc,
        "--suspend-when",
        "NO_SUCH<1",
    ];
    let out = gateway(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("--suspend-when NO_SUCH<1@0: no message of the DBC has signal NO_SUCH"),
        "{err}"
    );
}

/// Every DBC of `tests/invalid-dbc` ends with `CM_ "expect: KIND LINE: FRAGMENT";`:
/// KIND `error` is rejected with or without `--strict`, `warning` is a warning (exit 0)
/// that `--strict` makes an error; both name the file and the DBC line.
#[test]
fn every_bad_dbc_of_the_corpus_is_reported_with_its_line() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/invalid-dbc");
    let log = std::env::temp_dir().join(unique("corpus-log"));
    std::fs::write(&log, "(1.0) can0 064#00\n").unwrap();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for file in files {
        let src = text(&std::fs::read(&file).unwrap());
        let expect = src
            .lines()
            .last()
            .and_then(|l| l.strip_prefix("CM_ \"expect: "))
            .and_then(|l| l.strip_suffix("\";"))
            .unwrap_or_else(|| panic!("{}: expect line", file.display()));
        let (kind, rest) = expect.split_once(' ').unwrap();
        let (line, fragment) = rest.split_once(": ").unwrap();
        let run = |strict: bool| {
            let mut args = vec!["can", "decode", "--dbc", file.to_str().unwrap()];
            if strict {
                args.push("--strict");
            }
            args.push(log.to_str().unwrap());
            bulkhead(&args)
        };
        let located = format!("{}:{line}: ", file.display());
        for strict in [false, true] {
            let out = run(strict);
            let stderr = text(&out.stderr);
            let (code, word) = match (kind, strict) {
                ("warning", false) => (0, "warning"),
                _ => (1, "error"),
            };
            assert_eq!(
                out.status.code(),
                Some(code),
                "{}: {stderr}",
                file.display()
            );
            let shown = stderr
                .lines()
                .find(|l| l.starts_with(&format!("{word}: {located}")))
                .unwrap_or_else(|| {
                    panic!("{}: no `{word}: {located}` in {stderr}", file.display())
                });
            assert!(shown.contains(fragment), "{}: {shown}", file.display());
            assert!(
                stderr
                    .chars()
                    .all(|c| c == '\n' || (' '..='~').contains(&c)),
                "{}: only printable ASCII on stderr: {stderr:?}",
                file.display()
            );
            assert!(
                stderr.len() < 2000,
                "{}: {} bytes",
                file.display(),
                stderr.len()
            );
        }
    }
    let _ = std::fs::remove_file(&log);
}

#[test]
fn decode_shows_a_huge_malformed_line_escaped_and_short() {
    let path = std::env::temp_dir().join(unique("huge-line"));
    let mut content = format!("(1.0) can0 064#{}\n", "A".repeat(30 << 20)).into_bytes();
    content.extend_from_slice(b"(2.0) can0 0B4#\x1b[2J\xff\n");
    std::fs::write(&path, content).unwrap();
    let out = bulkhead(&["can", "decode", "--dbc", &data(DBC), path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("2 malformed lines"), "{stderr}");
    assert!(stderr.len() < 2000, "{} bytes of stderr", stderr.len());
    assert!(
        stderr.contains("line 1: line longer than 4096 bytes"),
        "{stderr}"
    );
    assert!(stderr.contains("\\u{1b}[2J"), "{stderr}");
    assert!(
        !out.stderr.contains(&0x1b),
        "no raw escape byte reaches the terminal"
    );
}

// ---- the can-utils tools: replay (canplayer), dump (candump), send, gen -------------

/// A dump of `bus` running in the background; `lines()` ends it and returns its output.
struct Dump(Reaped);

impl Dump {
    fn start(bus: &str, extra: &[&str]) -> Dump {
        let child = Command::new(bin())
            .args(["can", "dump", bus, "--timeout", "20s"])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // The dump attaches to the bus within this time; frames sent before are not its.
        std::thread::sleep(Duration::from_millis(300));
        Dump(Reaped(child))
    }

    /// Waits `settle` for frames in flight, then ends the dump and returns its lines.
    fn lines(mut self, settle: Duration) -> Vec<String> {
        std::thread::sleep(settle);
        let _ = self.0 .0.kill();
        let mut out = String::new();
        self.0
             .0
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        out.lines().map(str::to_string).collect()
    }
}

fn write_log(tag: &str, content: &str) -> PathBuf {
    let path = std::env::temp_dir().join(unique(tag));
    std::fs::write(&path, content).unwrap();
    path
}

/// Runs `bulkhead can replay LOG ARGS...` (then removes LOG), expecting success;
/// returns its stderr and how long it took.
fn replay_timed(log: PathBuf, args: &[&str]) -> (String, Duration) {
    let t0 = Instant::now();
    let out = Command::new(bin())
        .args(["can", "replay"])
        .arg(&log)
        .args(args)
        .output()
        .unwrap();
    let took = t0.elapsed();
    let _ = std::fs::remove_file(&log);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    (stderr, took)
}

#[test]
fn replay_skips_fd_records_and_long_gaps_and_restarts_time_on_backward_steps() {
    let name = unique("replay-odd");
    let _bus = start_bus(&name, "500000");
    let dump = Dump::start(&name, &["-L"]);
    // A valid CAN FD record, a 9e9 s jump, and a step back of 9e9 s after which two
    // records keep their 400 ms spacing.
    let log = write_log(
        "odd.log",
        "(1.000000) can0 025##100\n(1.001000) can0 101#01\n(9000000001.0) can0 102#02\n\
         (2.000000) can0 103#03\n(2.400000) can0 104#04\nnot a record\n",
    );
    let (stderr, took) = replay_timed(log, &["--bus", &name]);
    assert!(stderr.contains("replayed 4 frames"), "{stderr}");
    assert!(stderr.contains("1 CAN FD records skipped"), "{stderr}");
    assert!(
        stderr.contains("1 gaps longer than 10s skipped (the first before line 3"),
        "{stderr}"
    );
    assert!(stderr.contains("the first at line 4"), "{stderr}");
    assert!(stderr.contains("first malformed: line 6:"), "{stderr}");
    assert!(
        took >= Duration::from_millis(390) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let lines = dump.lines(Duration::from_millis(200));
    let ids: Vec<&str> = lines.iter().map(|l| &l[l.len() - 6..l.len() - 3]).collect();
    assert_eq!(ids, ["101", "102", "103", "104"], "{lines:?}");
    let t = |l: &str| bulkhead_can::candump::parse_line(l, 0).unwrap().t_ns;
    let spacing = t(&lines[3]) - t(&lines[2]);
    assert!(
        spacing >= 390_000_000,
        "103 and 104 keep their spacing: {spacing} ns"
    );
}

#[test]
fn replay_maps_interfaces_to_buses_loops_and_ignores_timestamps_on_request() {
    let (a, b) = (unique("map-a"), unique("map-b"));
    let (_bus_a, _bus_b) = (start_bus(&a, "500000"), start_bus(&b, "500000"));
    let (dump_a, dump_b) = (Dump::start(&a, &["-L"]), Dump::start(&b, &["-L"]));
    let log = write_log(
        "two-ifaces.log",
        "(0.0) can0 100#00\n(50.0) can1 200#00\n(100.0) can2 300#00\n(150.0) can0 101#00\n",
    );
    let assign = (format!("{a}=can0"), format!("{b}=can1"));
    let args = [assign.0.as_str(), &assign.1, "-t", "-g", "20ms", "-l", "3"];
    let (stderr, took) = replay_timed(log, &args);
    assert!(stderr.contains("replayed 9 frames"), "{stderr}");
    assert!(stderr.contains("3 of other interfaces skipped"), "{stderr}");
    assert!(stderr.contains("3 loops played"), "{stderr}");
    // 150 s of log time with -t: 9 frames 20 ms apart (the first of each loop at once).
    assert!(took < Duration::from_secs(5), "{took:?}");
    let settle = Duration::from_millis(200);
    let on_a: Vec<String> = dump_a
        .lines(settle)
        .iter()
        .map(|l| l[l.len() - 6..].to_string())
        .collect();
    let on_b: Vec<String> = dump_b
        .lines(settle)
        .iter()
        .map(|l| l[l.len() - 6..].to_string())
        .collect();
    assert_eq!(on_a, ["100#00", "101#00"].repeat(3));
    assert_eq!(on_b, ["200#00"].repeat(3));
}

#[test]
fn dump_filters_ids_and_prints_candumps_table_or_log() {
    let name = unique("filters");
    let _bus = start_bus(&name, "500000");
    let table = Dump::start(&name, &["-f", "100:700", "-f", "1ABCDEF0:1FFFFFFF"]);
    let inverted = Dump::start(&name, &["--filter", "100~700", "-L"]);
    let out = bulkhead(&[
        "can",
        "send",
        &name,
        "123#1122",
        "1ABCDEF0#FF",
        "234#",
        "1FF#R2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let settle = Duration::from_millis(300);
    // Sorted: the order on the bus is the arbitration's, which depends on when each
    // frame reached the bus.
    let mut shown = table.lines(settle);
    shown.sort();
    assert_eq!(
        shown,
        [
            format!("  {name}  123   [2]  11 22"),
            format!("  {name}  1ABCDEF0   [1]  FF"),
            format!("  {name}  1FF   [2]  remote request"),
        ]
    );
    let mut logged: Vec<String> = inverted
        .lines(settle)
        .iter()
        .map(|l| l.split_once(") ").unwrap().1.to_string())
        .collect();
    logged.sort();
    assert_eq!(
        logged,
        [format!("{name} 1ABCDEF0#FF"), format!("{name} 234#")]
    );
}

#[test]
fn gen_sends_frames_at_its_gap_as_cangen_does() {
    let name = unique("gen");
    let _bus = start_bus(&name, "1000000");
    let dump = Dump::start(&name, &["-L"]);
    let t0 = Instant::now();
    let out = bulkhead(&[
        "can", "gen", &name, "-g", "10ms", "-I", "i", "-D", "i", "-L", "2", "-n", "20",
    ]);
    let took = t0.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        took >= Duration::from_millis(190),
        "20 frames 10 ms apart: {took:?}"
    );
    let lines = dump.lines(Duration::from_millis(200));
    let want: Vec<String> = (0..20u32).map(|i| format!("{i:03X}#{:02X}00", i)).collect();
    let got: Vec<String> = lines
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(got, want);
    let random = bulkhead(&[
        "can", "gen", &name, "-g", "0ms", "-e", "-n", "50", "-v", "--seed", "9",
    ]);
    let shown = text(&random.stdout);
    assert_eq!(shown.lines().count(), 50, "{shown}");
    assert!(
        shown
            .lines()
            .all(|l| l.len() > 8 + name.len() && l.contains("   [")),
        "{shown}"
    );
    assert_eq!(
        random.stdout,
        bulkhead(&["can", "gen", &name, "-g", "0ms", "-e", "-n", "50", "-v", "--seed", "9"]).stdout
    );
}

#[test]
fn durations_need_a_unit_as_in_run_and_bad_tool_flags_are_usage_errors() {
    let run = bulkhead(&["run", "x.yaml", "--timeout", "1"]);
    let dump = bulkhead(&["can", "dump", "b", "--timeout", "1"]);
    assert_eq!((run.status.code(), dump.status.code()), (Some(2), Some(2)));
    let needs_unit = "`1` needs a unit, e.g. 500us, 2ms, 1s";
    assert!(
        text(&run.stderr).contains(needs_unit),
        "{}",
        text(&run.stderr)
    );
    assert!(
        text(&dump.stderr).contains(needs_unit),
        "{}",
        text(&dump.stderr)
    );
    for args in [
        &["can", "map", "--bus", "b", "--timeout", "2"][..],
        &[
            "can", "gateway", "--role", "reader", "--bus", "b", "--to", "a=x", "--period", "2",
        ],
        &["can", "replay", "log"],
        &["can", "replay", "log", "--bus", "b", "b=can0"],
        &["can", "replay", "log", "x=can0", "y=can0"],
        &["can", "replay", "log", "--bus", "b", "-g", "5ms"],
        &["can", "replay", "log", "--bus", "b", "-l", "0"],
        &["can", "replay", "log", "--bus", "b", "-s", "0s"],
        &["can", "dump", "b", "-f", "123"],
        &["can", "dump", "b", "-j"],
        &["can", "send", "b"],
        &["can", "send", "b", "123#0"],
        &["can", "send", "b", "123##1001122"],
        &["can", "gen", "b", "-I", "800"],
        &["can", "gen", "b", "-L", "9"],
        &["can", "gen", "b", "-D", "11", "-L", "2"],
        &["can", "gen", "b", "-g", "5"],
    ] {
        let out = bulkhead(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}
