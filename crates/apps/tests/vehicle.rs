//! `bulkhead run examples/driveos.yaml` in closed loop (root): every program of the
//! example runs, the car follows the set point, the controller meets its deadlines,
//! and a best-effort program that sends an ACC_CONTROL frame through its own gateway
//! channel is refused by mhydra_tx's allowlist and counted.
//!
//! The example is run as it is, with two changes: `bulkhead-app` is this build's (the
//! example expects it on PATH), and the adas partition gets one more process, the
//! attacker: `send-frame --to adas_raw_tx 343#... x3 2E4#...` (three ACC commands,
//! one STEERING_LKA frame, which its allowlist permits).

use std::path::{Path, PathBuf};
use std::process::Command;

fn app() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bulkhead-app"))
}

/// `bulkhead` of the same build (`cargo build -p bulkhead-cli`, or a workspace build).
fn bulkhead() -> PathBuf {
    let path = app().with_file_name("bulkhead");
    assert!(
        path.exists(),
        "{} is missing: build it first (cargo build -p bulkhead-cli, with --release for a release test run)",
        path.display()
    );
    path
}

/// Serializes the suites that take CPUs exclusively (as crates/cli's do).
fn exclusive_cpus_lock() -> std::fs::File {
    bulkhead_os::lock::exclusive_cpus().expect("the lock of the rt test suites")
}

const TASKS: [&str; 10] = [
    "usb_bh",
    "mhydra_rx",
    "ivi_read_mapper",
    "ivi_write_mapper",
    "adas_read_mapper",
    "adas_write_mapper",
    "long_controller",
    "aml_read",
    "aml_write",
    "mhydra_tx",
];

const ATTACK: &str = "      - {cmd: \"APP send-frame --to adas_raw_tx 343#FF38000000000000 343#FF38000000000000 343#FF38000000000000 2E4#0000000000\"}\n";

/// The example with this build's `bulkhead-app`, after `edit`, written into `dir`.
fn description(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("examples/driveos.yaml")).unwrap();
    let text = edit(text).replace("bulkhead-app ", &format!("{} ", app().display()));
    let path = dir.join("driveos.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The repository's directory, without `..`: a be partition under a private /tmp sees a
/// file the command names at its real path only (the directories around it are hidden).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The example with the attacker in the adas partition.
fn with_attacker(text: String) -> String {
    let anchor = "      - {cmd: bulkhead-app openpilot}\n";
    assert!(
        text.contains(anchor),
        "the example changed: update this test"
    );
    text.replace(anchor, &format!("{anchor}{ATTACK}"))
        .replace("APP ", "bulkhead-app ")
}

/// What `bulkhead run` of a description printed: exit code, stdout, stderr, schedule log.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    log: String,
}

fn run(name: &str, edit: impl Fn(String) -> String) -> Run {
    let dir = std::env::temp_dir().join(format!("bulkhead-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let yaml = description(&dir, edit);
    let log = dir.join("schedule.jsonl");
    let out = Command::new(bulkhead())
        .arg("run")
        .arg(&yaml)
        .args(["--timeout", "10s", "--schedule-log"])
        .arg(&log)
        .output()
        .unwrap();
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        log,
    }
}

/// The plant's `(t s, v km/h)` lines (the plant is process 0 of partition `hil`, whose
/// lines bulkhead labels `hil[0]: `).
fn speeds(stdout: &str) -> Vec<(f64, f64)> {
    let field = |line: &str, key: &str| -> Option<f64> {
        let rest = line.split(key).nth(1)?;
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))?;
        rest[..end].parse().ok()
    };
    stdout
        .lines()
        .filter(|l| l.starts_with("hil[0]: plant t="))
        .filter_map(|l| Some((field(l, "t=")?, field(l, "v=")?)))
        .collect()
}

/// `(jobs, misses)` of task `name` from bulkhead run's summary.
fn jobs_and_misses(stderr: &str, name: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains(&format!("task `{name}`")))
        .unwrap_or_else(|| panic!("no summary for {name}:\n{stderr}"));
    assert!(!line.contains("ended on its own"), "{line}");
    let number_before = |word: &str| -> u64 {
        let head = line.split(word).next().unwrap();
        head.rsplit(|c: char| !c.is_ascii_digit())
            .find(|s| !s.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    };
    (number_before(" jobs"), number_before(" misses"))
}

/// The last value of counter `name` in the schedule log.
fn counter(log: &str, name: &str) -> Option<u64> {
    let number = |l: &str| {
        let rest = l.split("\"value\":").nth(1)?;
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    log.lines()
        .rev()
        .filter(|l| {
            l.contains("\"event\":\"counter\"") && l.contains(&format!("\"name\":\"{name}\""))
        })
        .find_map(number)
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn the_vehicle_runs_in_closed_loop_and_the_allowlist_holds() {
    let _lock = exclusive_cpus_lock();
    let Run {
        code,
        stdout,
        stderr,
        log,
    } = run("vehicle", with_attacker);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");

    // Every program ran: the rt tasks until the stop, the be ones printed.
    for t in TASKS {
        let (jobs, _) = jobs_and_misses(&stderr, t);
        assert!(jobs > 1000, "{t}: {jobs} jobs\n{stderr}");
    }
    for who in ["plant t=", "openpilot: t=", "instrument-cluster: speed"] {
        assert!(stdout.contains(who), "no `{who}` line:\n{stdout}");
    }
    // K and L forwarded: K sent an UPDATE in most of its jobs, L read the controller's
    // outputs back and passed them on as commands (F's ACC_CONTROL frames below).
    for who in ["aml-read: stopped", "aml-write: stopped"] {
        assert!(stderr.contains(who), "no `{who}` line:\n{stderr}");
    }
    let sent = counter(&log, "updates_sent").unwrap_or(0);
    let answered = counter(&log, "answered").unwrap_or(0);
    let unanswered = counter(&log, "unanswered").unwrap_or(0);
    assert!(sent > 1000, "K sent {sent} UPDATEs");
    assert!(answered > 1000, "L read {answered} outputs");
    assert!(unanswered * 10 <= answered, "{unanswered} of {answered}");
    // The controller answered UPDATEs and refused nothing. Its misses are 0 on an idle
    // machine with release builds (docs/vehicle.md, bench/vehicle measures them); this
    // test runs debug builds on a shared VM, whose host stalls CPU 0 for milliseconds
    // (a lone 50 us probe missed 2.5% of its jobs in the hour this bound was set, and
    // 10% was exceeded by 9e11c62 and later commits alike), so it only catches a
    // controller that falls apart: at most a quarter of its jobs missed.
    let line = stderr
        .lines()
        .find(|l| l.starts_with("long-controller: stopped"))
        .unwrap();
    assert!(
        line.contains("inits=1") && line.contains("rejected=0"),
        "{line}"
    );
    let (jobs, misses) = jobs_and_misses(&stderr, "long_controller");
    eprintln!("long_controller: {jobs} jobs, {misses} misses");
    assert!(
        misses * 4 <= jobs,
        "{misses} misses of {jobs} jobs\n{stderr}"
    );

    // Closed loop: the set point steps from 72 to 90 km/h at 2 s. The planner ramps the
    // target at 1.5 m/s^2 (5 m/s in 3.3 s), the powertrain lags 0.3 s, the PI settles
    // in about a second: from 8 s on the speed stays within 2 km/h of 90 km/h (a tenth
    // of the step; the plant starts a few ms before the ADAS mapper's clock).
    let v = speeds(&stdout);
    assert!(v.iter().any(|&(t, _)| t >= 9.0), "{stdout}");
    let before = v.iter().filter(|&&(t, _)| t <= 1.5);
    assert!(before.clone().count() >= 2);
    for &(t, kmh) in before {
        assert!(
            (kmh - 72.0).abs() < 2.0,
            "at {t} s: {kmh} km/h before the step"
        );
    }
    for &(t, kmh) in v.iter().filter(|&&(t, _)| t >= 8.0) {
        assert!((kmh - 90.0).abs() <= 2.0, "at {t} s: {kmh} km/h\n{stdout}");
    }

    // The pipeline delay (bus -> ... -> bus): the plant's tag came back in ACC_CONTROL
    // frames, for most SPEED frames (41.45 Hz over 10 s; the first ones precede INIT).
    let pipeline = stdout
        .lines()
        .rfind(|l| l.starts_with("hil[0]: plant: pipeline: "))
        .unwrap_or_else(|| panic!("no pipeline figures:\n{stdout}"));
    eprintln!("{pipeline}");
    let frames: u64 = pipeline.split(' ').nth(3).unwrap().parse().unwrap();
    assert!(frames > 200, "{pipeline}");

    // The allowlist: the three ACC commands from the be partition were refused and
    // counted, the steering frame went out; the ADAS write mapper's ACC frames went out.
    assert_eq!(counter(&log, "adas_raw_tx.tx_denied"), Some(3), "{log}");
    assert_eq!(counter(&log, "adas_raw_tx.tx_sent"), Some(1));
    assert!(counter(&log, "adas_can_tx.tx_sent").unwrap_or(0) > 100);
    assert_eq!(counter(&log, "adas_can_tx.tx_denied"), Some(0));
}

/// HIL replay (DriveOS 6.1): the plant replays the RAV4 log's powertrain bus (6 s,
/// 6,619 frames) instead of simulating; the cluster shows speeds within the log's
/// range (29.38 .. 73.05 km/h over the whole segment; crates/can/tests/data/README.md)
/// and every frame taken from the bus reaches both read mappers; the controller runs
/// open loop.
#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn the_rav4_log_replayed_reaches_the_instrument_cluster() {
    let _lock = exclusive_cpus_lock();
    let log = repo().join("crates/can/tests/data/comma2k19_rav4_seg40_excerpt.log.gz");
    let replay = format!("plant --bus car --replay {} --iface can0", log.display());
    let Run {
        code,
        stdout,
        stderr,
        log,
    } = run("replay", |t| t.replace("plant --bus car --v0 72", &replay));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("plant: replayed 6619 frames of can0"),
        "{stdout}"
    );
    let speeds: Vec<f64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("infotainment[1]: instrument-cluster: speed "))
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(speeds.len() >= 4, "{stdout}");
    for kmh in &speeds {
        assert!((29.38..=73.05).contains(kmh), "{kmh} km/h\n{stdout}");
    }
    // usb_bh took every frame of the log, or nearly (it attaches within a few jobs
    // after the bus exists; the plant waits 0.5 s before replaying). Each frame it passed on
    // reached each read mapper's channel or was counted as dropped (a gateway or mapper
    // behind on a loaded machine: a channel was full), but for at most one usb_rx ring
    // (64 frames) still on its way at the stop; most of them reached it.
    // `rx` counts the frames usb_bh wrote into usb_rx, `rx_dropped` those it took from
    // the bus but found usb_rx full for.
    let rx = counter(&log, "rx").unwrap();
    let taken = rx + counter(&log, "rx_dropped").unwrap_or(0);
    assert!((6550..=6619).contains(&taken), "usb_bh took {taken} frames");
    let passed = rx;
    for c in ["ivi_can_rx", "adas_can_rx"] {
        let forwarded = counter(&log, &format!("{c}.rx_forwarded")).unwrap();
        let dropped = counter(&log, &format!("{c}.rx_dropped")).unwrap_or(0);
        let accounted = forwarded + dropped;
        assert!(
            (passed.saturating_sub(64)..=passed).contains(&accounted),
            "{c}: {forwarded} forwarded, {dropped} dropped of {rx}"
        );
        assert!(forwarded >= rx / 2, "{c}: {forwarded} forwarded of {rx}");
    }
    for t in TASKS {
        assert!(jobs_and_misses(&stderr, t).0 > 1000, "{t}\n{stderr}");
    }
}

/// A babbling node on the car's bus: one more process of the hil partition (the car)
/// sends frames of id 0 as fast as the bus takes them from 2 s on, so every frame of
/// usb_bh loses arbitration and its transmit queue stays full. The rt partition does
/// not wait on it: usb_bh holds the frame the bus does not take and goes on with its
/// job (`tx_full` counts those jobs), and every rt task keeps its jobs and deadlines.
/// The margins are the closed-loop test's (debug builds on a shared VM).
#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn a_babbling_node_on_the_bus_does_not_stall_the_rt_partition() {
    let _lock = exclusive_cpus_lock();
    let anchor = "      - {cmd: bulkhead-app plant --bus car --v0 72}\n";
    let babbler = format!(
        "      - {{cmd: \"sh -c 'sleep 2; exec {} can gen car -g 0ms -I 000 -D 0000000000000000'\"}}\n",
        bulkhead().display()
    );
    let Run {
        code,
        stdout,
        stderr,
        log,
    } = run("babble", |text| {
        assert!(
            text.contains(anchor),
            "the example changed: update this test"
        );
        text.replace(anchor, &format!("{anchor}{babbler}"))
    });
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let full = counter(&log, "tx_full").unwrap_or(0);
    assert!(
        full > 1000,
        "usb_bh found the bus full in {full} jobs: no babbling\n{stderr}"
    );
    for t in TASKS {
        let (jobs, misses) = jobs_and_misses(&stderr, t);
        let expected = if t.ends_with("mapper") { 5000 } else { 10000 };
        assert!(
            jobs * 2 > expected,
            "{t}: {jobs} jobs of {expected}\n{stderr}"
        );
        assert!(
            misses * 4 <= jobs,
            "{t}: {misses} misses of {jobs} jobs\n{stderr}"
        );
    }
}
