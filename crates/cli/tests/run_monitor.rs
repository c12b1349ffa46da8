//! A partition with `monitor: true` gets a read-only status connection to its
//! supervisor (`BULKHEAD_STATUS=fd:N`): from inside the partition, `status` is
//! answered and a mode switch or a suspension is refused as "read-only connection"
//! (and logged); a partition without the key gets no such descriptor.

mod common;
use common::{exclusive_cpus_lock, Running, Scratch};
use serde_json::Value;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Writes three requests on the inherited status descriptor and prints each reply.
const PROBE: &str = r#"n=${BULKHEAD_STATUS#fd:}; printf '%s\n' '{"id":1,"request":"status"}' '{"id":2,"request":"mode","name":"highway"}' '{"id":3,"request":"suspend"}' >&$n; for i in 1 2 3; do IFS= read -r -t 5 line <&$n; echo "reply: $line"; done"#;

#[test]
#[ignore = "needs root: cgroups and namespaces"]
fn a_monitor_partition_may_read_the_status_and_nothing_else() {
    // Its partitions may use every CPU: not while another test owns CPU 0.
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("monitor");
    let file = dir.file("watch.yaml");
    let socket = dir.file("watch.sock");
    let probe = dir.file("probe.sh");
    std::fs::write(&probe, PROBE).unwrap();
    let yaml = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: watch\n    kind: be\n    monitor: true\n    processes:\n      - {{cmd: /bin/bash {}}}\n  - name: other\n    kind: be\n    processes:\n      - {{cmd: \"/bin/sh -c 'echo other: status=${{BULKHEAD_STATUS:-none}}'\"}}\n",
        probe.display()
    );
    std::fs::write(&file, yaml).unwrap();
    let mut run = Running(Some(
        common::run_with_control(&file, "3s", &socket)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let out = run.0.take().unwrap().wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let all = format!("{stdout}\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{all}");
    let replies: Vec<&str> = all.lines().filter(|l| l.contains("reply: ")).collect();
    assert_eq!(replies.len(), 3, "{all}");
    assert!(
        replies[0].contains(r#""id":1,"ok":true,"status""#) && replies[0].contains("watch"),
        "{all}"
    );
    for (reply, id) in replies[1..].iter().zip([2, 3]) {
        assert!(
            reply.contains(&format!(r#""id":{id},"ok":false"#))
                && reply.contains("permission_denied")
                && reply.contains("read-only connection"),
            "{all}"
        );
    }
    assert!(stderr.contains("refused Mode"), "{stderr}");
    assert!(stderr.contains("refused Suspend"), "{stderr}");
    assert!(all.contains("other: status=none"), "{all}");
}

/// Asks the running system for `status` until `done` holds for it (at most 15 s).
fn status_until(socket: &std::path::Path, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut last = Value::Null;
    loop {
        assert!(
            Instant::now() < deadline,
            "the status never showed it: {last}"
        );
        std::thread::sleep(Duration::from_millis(100));
        if !socket.exists() {
            continue;
        }
        let out = common::ctl(socket, &["status", "--json"]);
        if let Ok(doc) = serde_json::from_slice::<Value>(&out.stdout) {
            if done(&doc["status"]) {
                return doc["status"].clone();
            }
            last = doc;
        }
    }
}

fn partition<'a>(status: &'a Value, name: &str) -> &'a Value {
    let all = status["partitions"].as_array().unwrap();
    all.iter().find(|p| p["name"] == name).unwrap()
}

#[test]
#[ignore = "needs root: cgroups"]
fn the_status_shows_memory_against_the_limit_of_rt_and_be_partitions() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("monitor-memory");
    let file = dir.file("mem.yaml");
    let socket = dir.file("mem.sock");
    // `tail` holds 4 MiB it read from /dev/zero (no newline: one line in memory).
    let hog = "sh -c 'head -c 4194304 /dev/zero | tail -n 1 | sleep 30'";
    // An rt task program attaches to the task library (the run waits for that).
    let periodic = common::bin("bulkhead-periodic");
    let periodic = periodic.display();
    std::fs::write(
        &file,
        format!("system: {{cpus: 0-1}}\npartitions:\n  - name: ctl\n    kind: rt\n    cpus: 0\n    memory: 64MiB\n    tasks:\n      - {{name: t, cmd: {periodic} --exec-us 100, budget: 1ms, period: 10ms}}\n  - name: ivi\n    kind: be\n    cpus: 1\n    memory: 48MiB\n    processes:\n      - {{cmd: \"{hog}\"}}\n  - name: free\n    kind: be\n    cpus: 1\n    processes:\n      - {{cmd: sleep 30}}\n"),
    )
    .unwrap();
    let _run = Running(Some(
        common::run_with_control(&file, "20s", &socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let status = status_until(&socket, |s| {
        s["partitions"].as_array().is_some_and(|p| p.len() == 3)
            && partition(s, "ivi")["memory"]["used_bytes"].as_u64() > Some(4 << 20)
            && partition(s, "ctl")["memory"]["used_bytes"].as_u64() > Some(0)
    });
    let (ctl, ivi) = (partition(&status, "ctl"), partition(&status, "ivi"));
    assert_eq!(ctl["memory"]["limit_bytes"], 64u64 << 20, "{status}");
    assert_eq!(ivi["memory"]["limit_bytes"], 48u64 << 20, "{status}");
    assert!(
        ivi["memory"]["used_bytes"].as_u64() < Some(48 << 20),
        "{status}"
    );
    assert_eq!(
        partition(&status, "free")["memory"],
        Value::Null,
        "{status}"
    );
    assert_eq!(status["windows"], Value::Null, "{status}");
    let text = common::text(&common::ctl(&socket, &["status"]).stdout);
    let line = |name: &str| {
        let start = format!("partition {name} (");
        let found = text.lines().find(|l| l.starts_with(&start));
        found.unwrap_or_else(|| panic!("no line for {name}: {text}"))
    };
    assert!(line("ctl").contains(" of 64MiB ("), "{text}");
    assert!(line("ivi").contains(" of 48MiB ("), "{text}");
    assert!(!line("free").contains("memory"), "{text}");
    assert!(!text.contains("windows:"), "{text}");
}

#[test]
#[ignore = "needs root: cgroups"]
fn the_status_shows_the_window_schedules_position() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("monitor-windows");
    let file = dir.file("win.yaml");
    let socket = dir.file("win.sock");
    std::fs::write(
        &file,
        "windows:\n  - length: 20\n    slices:\n      - {cpu: 0, sc_partition: A}\n  - length: 30\n    slices:\n      - {cpu: 0, sc_partition: B}\npartitions:\n  - name: A\n    memory: 32MiB\n    processes:\n      - {budget: 5, cmd: sleep 30}\n  - name: B\n    processes:\n      - {budget: 5, cmd: sleep 30}\n",
    )
    .unwrap();
    let _run = Running(Some(
        common::run_with_control(&file, "20s", &socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let mut seen = [false; 2];
    let mut last_started = 0;
    for _ in 0..40 {
        let status = status_until(&socket, |s| s["windows"]["started"].as_u64() > Some(0));
        let w = &status["windows"];
        assert_eq!(
            (&w["count"], &w["major_frame_ns"]),
            (&2.into(), &50_000_000.into()),
            "{w}"
        );
        let window = w["window"].as_u64().unwrap() as usize;
        let (length, before, name) = [(20_000_000, 0, "A"), (30_000_000, 20_000_000, "B")][window];
        assert_eq!(w["length_ns"], length, "{w}");
        assert_eq!(w["partitions"], serde_json::json!([name]), "{w}");
        let elapsed = w["elapsed_ns"].as_u64().unwrap();
        assert!(elapsed <= length, "{w}");
        assert_eq!(w["frame_position_ns"], before + elapsed, "{w}");
        let started = w["started"].as_u64().unwrap();
        assert!(started >= last_started, "{w}");
        last_started = started;
        seen[window] = true;
        assert_eq!(
            partition(&status, "A")["memory"]["limit_bytes"],
            32u64 << 20
        );
        if seen == [true, true] && last_started > 10 {
            let text = common::text(&common::ctl(&socket, &["status"]).stdout);
            let line = text.lines().find(|l| l.starts_with("windows: window "));
            let line = line.unwrap_or_else(|| panic!("no windows line: {text}"));
            assert!(line.contains(" of the 50ms major frame, "), "{text}");
            assert!(
                line.contains("0 of 0-1 running (A), ") || line.contains("1 of 0-1 running (B), "),
                "{text}"
            );
            return;
        }
    }
    panic!("40 status replies did not see both windows: {seen:?}, {last_started} started");
}
