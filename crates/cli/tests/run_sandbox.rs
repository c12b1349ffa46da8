//! The sandbox every partition process gets, observed from inside a partition under
//! `bulkhead run`: no-new-privileges is set, and the environment holds bulkhead's
//! variables, `PATH` and `LANG`, and nothing else of the supervisor's (its `HOME`, a
//! secret in a variable). Needs root (rt tasks, partition uids).

mod common;
use common::{exclusive_cpus_lock, Scratch};

/// What `probe.sh <file>` writes: its NoNewPrivs line, then its environment.
const PROBE: &str =
    "grep NoNewPrivs /proc/self/status > \"$1.tmp\"\nenv >> \"$1.tmp\"\nmv \"$1.tmp\" \"$1\"\n";

/// Runs an rt task and a be process, both `probe.sh`, with a channel between them, under
/// a supervisor whose environment has a `HOME`, a secret and a `LANG`; returns what each
/// wrote (empty if nothing) and bulkhead's stderr.
fn probe_both(scratch: &Scratch, be_sandbox: &str) -> (String, String, String) {
    std::fs::write(scratch.file("probe.sh"), PROBE).unwrap();
    let d = scratch.0.display();
    let src = format!(
        "system: {{cpus: 0-1}}
partitions:
  - name: ctl
    kind: rt
    cpus: 0
    scheduler: fixed-priority
    tasks:
      - {{name: t, cmd: sh {d}/probe.sh {d}/rt.txt, budget: 2ms, period: 10ms}}
  - name: ivi
    kind: be
    cpus: 1
    processes: [sh {d}/probe.sh {d}/be.txt]
{be_sandbox}channels:
  - {{name: speed, kind: latest, message_size: 16, writer: ctl, readers: [ivi]}}
"
    );
    let file = scratch.file("system.yaml");
    std::fs::write(&file, src).unwrap();
    let out = common::bulkhead()
        .args(["run", file.to_str().unwrap(), "--timeout", "2s"])
        .env("HOME", "/home/supervisor-home")
        .env("SUPERVISOR_SECRET", "hunter2")
        .env("LANG", "C.UTF-8")
        .output()
        .unwrap();
    let read = |name| std::fs::read_to_string(scratch.file(name)).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (read("rt.txt"), read("be.txt"), stderr)
}

/// The checks common to both kinds: no-new-privileges, the minimal PATH (bulkhead's own
/// directory first), LANG, the channel's variable, and none of the supervisor's other
/// variables.
fn assert_sandboxed(kind: &str, seen: &str, stderr: &str) {
    let lines: Vec<&str> = seen.lines().collect();
    let ctx = format!("{kind} process wrote {seen:?}; bulkhead: {stderr}");
    assert!(
        lines
            .first()
            .is_some_and(|l| l.split_whitespace().eq(["NoNewPrivs:", "1"])),
        "{ctx}"
    );
    let own = common::bin("bulkhead");
    let path = format!(
        "PATH={}:/usr/local/bin:/usr/bin:/bin",
        own.parent().unwrap().display()
    );
    assert!(lines.contains(&path.as_str()), "{ctx}");
    assert!(lines.contains(&"LANG=C.UTF-8"), "{ctx}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("BULKHEAD_CHAN_SPEED=fd:")),
        "{ctx}"
    );
    assert!(!seen.contains("supervisor-home"), "{ctx}");
    assert!(!seen.contains("SUPERVISOR_SECRET"), "{ctx}");
}

#[test]
#[ignore = "needs root: rt tasks and partition uids need root"]
fn partition_processes_run_without_new_privileges_in_a_clean_environment() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("sandbox-probe");
    let (rt, be, stderr) = probe_both(&scratch, "");
    assert_sandboxed("rt", &rt, &stderr);
    assert!(rt.lines().any(|l| l.starts_with("BULKHEAD_TASK=")), "{rt}");
    assert_sandboxed("be", &be, &stderr);
    assert!(
        be.lines().any(|l| l.starts_with("DEMOS_PARAMETERS=3,3,")),
        "{be}"
    );
}

/// `sandbox: {clean_env: false, no_new_privs: false}` relaxes both parts for that
/// partition only: its process sees the supervisor's environment and may gain
/// privileges; the rt partition beside it keeps its sandbox.
#[test]
#[ignore = "needs root: rt tasks and partition uids need root"]
fn a_partitions_sandbox_can_be_relaxed_by_name() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("sandbox-relaxed");
    let relaxed = "    sandbox: {clean_env: false, no_new_privs: false}\n";
    let (rt, be, stderr) = probe_both(&scratch, relaxed);
    assert_sandboxed("rt", &rt, &stderr);
    let lines: Vec<&str> = be.lines().collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.split_whitespace().eq(["NoNewPrivs:", "0"])),
        "{be}; {stderr}"
    );
    assert!(lines.contains(&"HOME=/home/supervisor-home"), "{be}");
    assert!(lines.contains(&"SUPERVISOR_SECRET=hunter2"), "{be}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("BULKHEAD_CHAN_SPEED=fd:")),
        "{be}"
    );
}
