//! Modes from the command line: `analyze` per mode and per switch, `sim --mode-switch`
//! and its schedule log, `run` refusing what it does not execute yet.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bulkhead(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(args)
        .output()
        .expect("bulkhead runs")
}

fn example() -> String {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/modes.yaml");
    path.display().to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Temp {
        let dir =
            std::env::temp_dir().join(format!("bulkhead-cli-modes-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Temp(dir)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn analyze_reports_every_mode_and_switch() {
    let out = bulkhead(&["analyze", &example()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for line in [
        "mode parking: ok",
        "mode highway: ok",
        "switch urban -> highway (greedy): safe",
        "switch highway -> urban (boost): safe",
        "adas request (boost)",
    ] {
        assert!(stdout.contains(line), "`{line}` in {stdout}");
    }
    let json = bulkhead(&["analyze", &example(), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["modes"]["transitions"].as_array().unwrap().len(), 4);
    // The boost reserve of the pool: the agents of adas and nav, 100 us every 100 ms each.
    assert_eq!(doc["modes"]["pools"][0]["reserve_ppm"], 2_000);
}

#[test]
fn an_unsafe_switch_fails_the_analysis() {
    let dir = Temp::new("unsafe");
    let file = dir.path("u.yaml");
    std::fs::write(&file, include_str!("../../modes/tests/data/unsafe.yaml")).unwrap();
    let out = bulkhead(&["analyze", &file]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout.contains("switch a -> b (boost): REFUSED: at step 0 (interface_change of `nav`)"),
        "{stdout}"
    );
}

#[test]
fn sim_mode_switch_writes_the_steps_to_the_schedule_log() {
    let dir = Temp::new("sim");
    let log = dir.path("log.jsonl");
    let out = bulkhead(&[
        "sim",
        &example(),
        "--for",
        "1s",
        "--mode-switch",
        "200ms:urban",
        "--mode-switch",
        "600ms:highway",
        "--mode-switch",
        "800ms:urban",
        "--schedule-log",
        &log,
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("mode switch parking -> urban at 200ms (batch): done in"),
        "{stdout}"
    );
    assert!(
        stdout.contains("mode switch highway -> urban at 800ms (boost): done in 300us"),
        "{stdout}"
    );
    let log = std::fs::read_to_string(&log).unwrap();
    let steps: Vec<String> = log
        .lines()
        .filter(|l| l.contains("\"t_ns\":800"))
        .filter_map(|l| {
            let event = l.split("\"event\":\"").nth(1)?.split('"').next()?;
            let who = l
                .split("\"partition\":\"")
                .nth(1)
                .map(|p| p.split('"').next().unwrap_or(""));
            matches!(
                event,
                "mode_request" | "interface_change" | "agent_request" | "agent_ack" | "mode_done"
            )
            .then(|| format!("{event} {}", who.unwrap_or("")).trim().to_string())
        })
        .collect();
    // The order `bulkhead analyze` prints for highway -> urban (boost).
    assert_eq!(
        steps,
        [
            "mode_request",
            "agent_request adas",
            "agent_ack adas",
            "interface_change adas",
            "agent_request chassis",
            "agent_ack chassis",
            "interface_change nav",
            "agent_request nav",
            "agent_ack nav",
            "mode_done"
        ]
    );
}

#[test]
fn a_bad_mode_switch_is_an_error() {
    let out = bulkhead(&["sim", &example(), "--mode-switch", "1ms:nowhere"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--mode-switch nowhere: no mode `nowhere`"));
    let out = bulkhead(&["sim", &example(), "--mode-switch", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `run` refuses what it cannot hold with reservations, naming the key's place and why;
/// the example itself runs (crates/cli/tests/run_modes.rs).
#[test]
fn run_refuses_modes_it_cannot_hold_with_reservations() {
    let dir = Temp::new("refuse");
    let refused = |name: &str, edit: &dyn Fn(String) -> String| {
        let file = dir.path(name);
        std::fs::write(&file, edit(std::fs::read_to_string(example()).unwrap())).unwrap();
        let out = bulkhead(&["run", &file]);
        assert_eq!(out.status.code(), Some(1));
        text(&out.stderr)
    };
    let fp = refused("fp.yaml", &|s| s.replacen("    scheduler: edf\n", "", 1));
    assert!(
        fp.contains(
            "fp.yaml:12:5: partitions[0].scheduler: partition `chassis` is listed by `modes`"
        ) && fp.contains("needs `scheduler: edf`"),
        "{fp}"
    );
    // Only chassis, on both CPUs (a CPU 2 the machine may lack is refused before this).
    let cpus = refused("cpus.yaml", &|_| {
        "system: {cpus: 0-1}\npartitions:\n  - name: chassis\n    kind: rt\n    scheduler: edf\n    \
         cpus: 0-1\n    tasks:\n      - {name: can_rx, cmd: bulkhead-periodic, budget: 200us, period: 1ms}\n\
         modes:\n  initial: parking\n  table:\n    - {name: parking, partitions: {chassis: {tasks: [can_rx]}}}\n\
         \x20   - {name: urban, partitions: {chassis: {tasks: []}}}\n"
            .to_string()
    });
    assert!(
        cpus.contains(
            "cpus.yaml:6:11: partitions[0].cpus: partition `chassis` is listed by `modes` and owns 2 CPUs"
        ),
        "{cpus}"
    );
}
