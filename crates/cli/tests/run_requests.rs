//! Requests from inside (issue 38 item 3, docs/modes.md): a program of a best-effort
//! partition asks for a mode or a suspend with `bulkhead-request-mode` on its own
//! channel. Observed from outside: the command's exit status and message (written by
//! the program to files), the schedule log's `partition_request`, mode and stop-start
//! events, the run's stderr. Needs root (cgroups, SCHED_DEADLINE).

mod common;
use common::Scratch;
use std::path::Path;

/// The rt test setup (`bulkhead-periodic` and the CPU lock); fails unless
/// `bulkhead-request-mode` lies beside `bulkhead`.
fn setup() -> (std::path::PathBuf, std::fs::File) {
    let command = common::bin("bulkhead-request-mode");
    assert!(
        command.exists(),
        "{} is not built (cargo build -p bulkhead-client)",
        command.display()
    );
    common::rt_test_setup()
}

/// A system with an rt partition switching between `normal` and `highway`, and the
/// best-effort partitions `rq-ivi` and `rq-media` running `ivi` and `media` (shell
/// commands); `modes.requesters` is `requesters`.
fn system(periodic: &Path, ivi: &str, media: &str, requesters: &str) -> String {
    format!(
        "system: {{cpus: 0-1}}
partitions:
  - name: rq-ctl
    kind: rt
    cpus: 1
    scheduler: edf
    tasks:
      - {{name: loop, cmd: {} --exec-us 300, budget: 2ms, period: 10ms}}
  - name: rq-ivi
    processes:
      - \"sh -c '{ivi}'\"
  - name: rq-media
    processes:
      - \"sh -c '{media}'\"
modes:
  initial: normal
  agent: {{budget: 100us, period: 100ms}}
  table:
    - name: normal
      partitions:
        rq-ctl: {{tasks: [loop]}}
    - name: highway
      partitions:
        rq-ctl: {{tasks: [{{name: loop, period: 20ms, deadline: 20ms}}]}}
  requesters: {requesters}
",
        periodic.display()
    )
}

/// `bulkhead run` of `yaml` for `timeout`, its schedule log in `log.jsonl`, which must
/// end at the timeout (exit status 0): its stderr and the log's events.
fn run(scratch: &Scratch, yaml: &str, timeout: &str) -> (String, Vec<serde_json::Value>) {
    let name = scratch.0.file_name().unwrap().to_string_lossy();
    let file = scratch.file(&format!("{name}.yaml"));
    std::fs::write(&file, yaml).unwrap();
    let log = scratch.file("log.jsonl");
    let out = common::bulkhead()
        .current_dir(&scratch.0)
        .args(["run", file.to_str().unwrap(), "--timeout", timeout])
        .arg("--schedule-log")
        .arg(&log)
        .output()
        .unwrap();
    let events = common::log_events(&log);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    (stderr, events)
}

/// The contents of file `name` of the scratch directory, trimmed ("" when missing).
fn read(scratch: &Scratch, name: &str) -> String {
    let text = std::fs::read_to_string(scratch.file(name)).unwrap_or_default();
    text.trim().to_string()
}

/// The `partition_request` events, as (partition, mode, verdict).
fn requests(events: &[serde_json::Value]) -> Vec<(String, String, String)> {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
    events
        .iter()
        .filter(|e| e["event"] == "partition_request")
        .map(|e| (text(&e["partition"]), text(&e["mode"]), text(&e["verdict"])))
        .collect()
}

fn count(events: &[serde_json::Value], kind: &str) -> usize {
    events.iter().filter(|e| e["event"] == kind).count()
}

/// A program of a requester partition asks for `highway`: the command succeeds, the
/// request is granted, and the switch runs to its end (`mode_done`).
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn an_allowed_request_switches_the_mode() {
    let (periodic, _lock) = setup();
    let scratch = Scratch::new("request-granted");
    let ivi = "sleep 0.3; bulkhead-request-mode highway 2> ivi-err; echo $? > ivi-status; sleep 30";
    let yaml = system(
        &periodic,
        ivi,
        "sleep 30",
        "[{partition: rq-ivi, modes: [highway]}]",
    );
    let (stderr, events) = run(&scratch, &yaml, "2s");
    assert_eq!(
        read(&scratch, "ivi-status"),
        "0",
        "{}",
        read(&scratch, "ivi-err")
    );
    assert_eq!(
        requests(&events),
        vec![("rq-ivi".into(), "highway".into(), "granted".into())],
        "{stderr}"
    );
    let done = events
        .iter()
        .any(|e| e["event"] == "mode_done" && e["mode"] == "highway");
    assert!(done, "the switch to highway finished: {stderr}");
    assert!(
        stderr.contains("process 0 of partition `rq-ivi` requested mode `highway`: granted"),
        "{stderr}"
    );
}

/// A program of a partition that is no requester (and one asking for a mode its entry
/// does not list) gets EPERM; the request is logged as refused and no switch starts.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn a_request_the_description_does_not_allow_gets_eperm_and_changes_nothing() {
    let (periodic, _lock) = setup();
    let scratch = Scratch::new("request-refused");
    let ivi = "sleep 0.3; bulkhead-request-mode normal 2> ivi-err; echo $? > ivi-status; sleep 30";
    let media =
        "sleep 0.3; bulkhead-request-mode highway 2> media-err; echo $? > media-status; sleep 30";
    let yaml = system(
        &periodic,
        ivi,
        media,
        "[{partition: rq-ivi, modes: [highway]}]",
    );
    let (stderr, events) = run(&scratch, &yaml, "2s");
    for who in ["ivi", "media"] {
        assert_eq!(read(&scratch, &format!("{who}-status")), "1", "{stderr}");
        let err = read(&scratch, &format!("{who}-err"));
        assert!(err.contains("Operation not permitted"), "{who}: {err}");
    }
    let mut got = requests(&events);
    got.sort();
    assert_eq!(
        got,
        vec![
            ("rq-ivi".into(), "normal".into(), "refused".into()),
            ("rq-media".into(), "highway".into(), "refused".into()),
        ],
        "{stderr}"
    );
    assert_eq!(count(&events, "mode_request"), 0, "{stderr}");
    assert_eq!(count(&events, "mode_done"), 0, "{stderr}");
}

/// The attack from inside: a program of `rq-media` (no requester) tries to pass as
/// `rq-ivi` (a requester, whose process runs beside it): it names the partition in the
/// request, writes a forged message with that name on its channel (16 bytes that are no
/// message), and, with its pid namespace relaxed so that it sees the host's processes
/// (`rq-ivi`'s and the supervisor's among them), opens descriptor 3 (where each process
/// holds its channel) of every process under /proc to send the request on another's
/// channel. Every attempt fails, each request that reaches the supervisor is refused as
/// `rq-media`'s, and the mode never changes.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn a_partition_cannot_forge_another_partitions_request() {
    let (periodic, _lock) = setup();
    let scratch = Scratch::new("request-forged");
    let media = "sleep 0.3; \
        bulkhead-request-mode rq-ivi:highway 2>> attack-err || echo named >> refused; \
        printf rq-ivi:highway00 >&3; sleep 0.1; \
        for d in /proc/[0-9]*; do \
          [ $d = /proc/$$ ] && continue; \
          echo $d >> tried; \
          DEMOS_PARAMETERS=9,9,0 timeout 1 bulkhead-request-mode highway 9<>$d/fd/3 2>> attack-err \
            && echo $d >> forged; \
        done 2>> attack-err; \
        bulkhead-request-mode highway 2>> attack-err || echo own >> refused; \
        sleep 30";
    let yaml = system(
        &periodic,
        "sleep 30",
        media,
        "[{partition: rq-ivi, modes: [highway]}]",
    )
    .replace(
        "  - name: rq-media\n",
        "  - name: rq-media\n    sandbox: {pid_namespace: false}\n",
    );
    let (stderr, events) = run(&scratch, &yaml, "6s");
    let err = read(&scratch, "attack-err");
    let tried = read(&scratch, "tried").lines().count();
    assert!(tried >= 3, "it saw the host's processes: {tried}, {err}");
    assert_eq!(read(&scratch, "forged"), "", "{err}");
    assert_eq!(read(&scratch, "refused"), "named\nown", "{err}");
    let got = requests(&events);
    assert!(
        !got.is_empty(),
        "the requests reached the supervisor: {stderr}"
    );
    assert!(
        got.iter()
            .all(|(p, _, v)| p == "rq-media" && v == "refused"),
        "{got:?}"
    );
    assert_eq!(count(&events, "mode_request"), 0, "{stderr}");
    assert_eq!(count(&events, "mode_done"), 0, "{stderr}");
}

/// `suspend: true` lets a requester suspend the system through stop-start; a
/// requester without it gets EPERM for the same request.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn a_requester_with_suspend_suspends_the_system() {
    let (periodic, _lock) = setup();
    let scratch = Scratch::new("request-suspend");
    let ivi =
        "sleep 0.3; bulkhead-request-mode --suspend 2> ivi-err; echo $? > ivi-status; sleep 30";
    let media = "bulkhead-request-mode --suspend 2> media-err; echo $? > media-status; sleep 30";
    let requesters =
        "[{partition: rq-ivi, suspend: true}, {partition: rq-media, modes: [highway]}]";
    let yaml = system(&periodic, ivi, media, requesters);
    let (stderr, events) = run(&scratch, &yaml, "2s");
    assert_eq!(read(&scratch, "media-status"), "1", "{stderr}");
    let suspended = events.iter().any(|e| e["event"] == "system_suspended");
    assert!(suspended, "the system suspended: {stderr}");
    let by_request = events
        .iter()
        .any(|e| e["event"] == "suspend_request" && e["by"] == "request");
    assert!(by_request, "{stderr}");
    let mut got = requests(&events);
    got.sort();
    assert_eq!(
        got,
        vec![
            ("rq-ivi".into(), "".into(), "granted".into()),
            ("rq-media".into(), "".into(), "refused".into()),
        ],
        "{stderr}"
    );
}

/// `run` refuses, before anything starts, a requester it reads no requests from: an rt
/// partition (the task library sends none yet). `check` refuses it too, at its key.
#[test]
#[ignore = "needs root: cgroups, SCHED_DEADLINE"]
fn run_refuses_a_requester_it_reads_no_requests_from() {
    let (periodic, _lock) = setup();
    let scratch = Scratch::new("request-rt");
    let ivi = "echo x > started; sleep 30";
    let yaml = system(
        &periodic,
        ivi,
        "sleep 30",
        "[{partition: rq-ctl, modes: [highway]}]",
    );
    let file = scratch.file("rt.yaml");
    std::fs::write(&file, yaml).unwrap();
    let check = common::bulkhead().arg("check").arg(&file).output().unwrap();
    let refused = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(1), "{refused}");
    assert!(
        refused.contains(
            "modes.requesters[0]: partition `rq-ctl`: requests from inside are read from"
        ),
        "{refused}"
    );
    let out = common::bulkhead()
        .current_dir(&scratch.0)
        .args(["run", file.to_str().unwrap(), "--timeout", "2s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("modes.requesters[0]: partition `rq-ctl`: requests from inside are read from the processes of best-effort partitions in no window only"),
        "{stderr}"
    );
    assert_eq!(read(&scratch, "started"), "", "nothing started");
}
