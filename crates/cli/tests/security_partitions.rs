//! One partition attacking another's processes from inside, through `bulkhead run`:
//! stopping them with SIGSTOP, opening their memory and reading their environment
//! through /proc.
//! With a pid namespace of its own per be partition (the default) the attacker does not
//! even see the victim; without (`sandbox: {pid_namespace: false}`), a uid of its own
//! per partition (the default) refuses every attack; the same attack between two
//! partitions that also declare `shared_user: true` succeeds, which shows the attacks
//! are real and what the relaxations give up (docs/security.md).

mod common;
use common::{bulkhead, exclusive_cpus_lock, Scratch};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The attacker waits for the victim's pid, tries each attack and records its exit
/// status and the victim's state after the SIGSTOP, then resumes the victim if it
/// could stop it (so the run ends cleanly either way).
const ATTACK: &str =
    "sh -c 'while [ ! -s @D@/victim.pid ]; do sleep 0.05; done; v=$(cat @D@/victim.pid); \
kill -STOP $v 2>/dev/null; echo stop=$?; sleep 0.2; grep ^State: /proc/$v/status; \
kill -CONT $v 2>/dev/null; \
(exec 3</proc/$v/mem) 2>/dev/null; echo mem=$?; \
head -c 1 /proc/$v/environ >/dev/null 2>&1; echo environ=$?' > @D@/attacker 2>&1";

/// Runs a victim and an attacker partition (`users`: extra keys of both), gives the
/// attacker the victim's pid (as the host sees it) and returns the attacker's report.
fn attack(dir: &Scratch, users: &str) -> String {
    let d = dir.0.display().to_string();
    let victim = format!("sleep 30.{}", std::process::id());
    let _ = std::fs::remove_file(dir.file("victim.pid"));
    let desc = format!(
        "system: {{}}\npartitions:\n  - {{name: victim, cpus: 0{users}, processes: [\"{victim}\"]}}\n  - {{name: attacker, cpus: 1{users}, processes: [\"{}\"]}}\n",
        ATTACK.replace("@D@", &d)
    );
    let path = dir.file("system.yaml");
    std::fs::write(&path, desc).unwrap();
    let run = bulkhead()
        .args(["run", path.to_str().unwrap(), "--timeout", "8s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let pid = loop {
        let out = Command::new("pgrep")
            .args(["-x", "-f", &victim])
            .output()
            .unwrap();
        let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !pid.is_empty() || Instant::now() > deadline {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::fs::write(dir.file("victim.pid"), format!("{pid}\n")).unwrap();
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    std::fs::read_to_string(dir.file("attacker")).unwrap_or_default()
}

/// Whether the attack `name` succeeded (its exit status 0), as the attacker reported.
fn status(report: &str, name: &str) -> Option<bool> {
    let prefix = format!("{name}=");
    let line = report.lines().find(|l| l.starts_with(&prefix))?;
    Some(line[prefix.len()..].trim() == "0")
}

#[test]
#[ignore = "needs root: users and cgroups"]
fn a_partition_cannot_stop_or_read_another_partitions_processes() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-partitions");
    let report = attack(&dir, "");
    for attack in ["stop", "mem", "environ"] {
        assert_eq!(status(&report, attack), Some(false), "{attack}: {report}");
    }
    assert!(
        !report.contains("State:"),
        "the victim was visible: {report}"
    );

    let host = Scratch::new("sec-partitions-host");
    let report = attack(&host, ", sandbox: {pid_namespace: false}");
    for attack in ["stop", "mem", "environ"] {
        assert_eq!(status(&report, attack), Some(false), "{attack}: {report}");
    }
    assert!(
        !report.contains("stopped"),
        "the victim was stopped: {report}"
    );

    let shared = Scratch::new("sec-partitions-shared");
    let keys = ", user: nobody, shared_user: true, sandbox: {pid_namespace: false}";
    let report = attack(&shared, keys);
    assert_eq!(status(&report, "stop"), Some(true), "{report}");
    assert!(report.contains("stopped"), "{report}");
}
