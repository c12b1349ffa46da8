//! Compiles tests/c/task_test.c against include/bulkhead/task.h and the static library,
//! and runs it as a task under a TaskLink: the C API end to end.

use bulkhead_task::clock::now_ns;
use bulkhead_task::link::{LinkSpec, TaskLink};
use bulkhead_task::Record;
use std::path::{Path, PathBuf};
use std::process::Command;

const MS: u64 = 1_000_000;

/// The static library cargo built with this test (both live in target/<profile>/deps/).
fn static_lib() -> PathBuf {
    std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .join("libbulkhead_task.a")
}

/// A test's directory in /tmp, removed on drop, passed or failed.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("bulkhead-task-{tag}-{}", std::process::id()));
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compiles `tests/c/<name>.c` into `dir`; `None` without a C compiler.
fn compile(name: &str, dir: &Path) -> Option<PathBuf> {
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("skipping: no C compiler `cc`");
        return None;
    }
    let lib = static_lib();
    assert!(
        lib.exists(),
        "static library not built at {}",
        lib.display()
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir).unwrap();
    let exe = dir.join(name);
    let cc = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg(root.join(format!("tests/c/{name}.c")))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s", "-o"])
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    Some(exe)
}

#[test]
fn a_c_task_uses_the_header_and_static_library() {
    let scratch = Scratch::new("ctest");
    let dir = &scratch.0;
    let Some(exe) = compile("task_test", dir) else {
        return;
    };
    let spec = LinkSpec {
        name: "c-task".into(),
        task_index: 0,
        budget_ns: MS,
        // Long enough that a loaded machine neither starts the program after its first
        // release nor preempts it past a release (the program checks the indices run on).
        period_ns: 20 * MS,
        deadline_ns: 15 * MS,
        epoch_ns: now_ns() + 100 * MS,
        ring_depth: 16,
    };
    let mut link = TaskLink::create(&spec).unwrap();
    let mut cmd = Command::new(&exe);
    cmd.arg("6");
    link.prepare(&mut cmd);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("params 1000000 20000000 15000000"),
        "{stdout}"
    );
    assert_eq!(
        link.named_counters(),
        vec![("can0.rx_forwarded".to_string(), 60)]
    );
    let mut recs: Vec<Record> = Vec::new();
    link.drain(&mut recs);
    assert_eq!(
        recs.iter().map(|r| r.index).collect::<Vec<_>>(),
        (0..6).collect::<Vec<_>>()
    );
}

#[test]
fn a_c_task_follows_mode_requests_and_acknowledges_them() {
    let scratch = Scratch::new("cmode");
    let dir = &scratch.0;
    let Some(exe) = compile("mode_test", dir) else {
        return;
    };
    let spec = LinkSpec {
        name: "c-modes".into(),
        task_index: 0,
        budget_ns: MS,
        period_ns: 10 * MS,
        deadline_ns: 10 * MS,
        epoch_ns: now_ns(),
        ring_depth: 16,
    };
    let link = TaskLink::create(&spec).unwrap();
    let mut cmd = Command::new(&exe);
    cmd.arg("2").stdout(std::process::Stdio::piped());
    link.prepare(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    // The task first reports its initial mode, with no request pending.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert_eq!(line, "start in mode 0\n");
    let mut acked = |seq: u32| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !link.mode_acked(seq) {
            if std::time::Instant::now() > deadline || child.try_wait().unwrap().is_some() {
                let _ = child.kill();
                let status = child.wait().unwrap();
                panic!("request {seq} not acknowledged; the task: {status}");
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    let first = link.request_mode(2);
    acked(first);
    let second = link.request_mode(1);
    acked(second);
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(status.code(), Some(0), "{rest}");
    assert_eq!(rest, "mode 2 seq 1\nmode 1 seq 2\n");
}

#[path = "support/supervise.rs"]
mod supervise;

#[test]
fn a_restartable_c_task_gets_its_checkpoint_back_at_a_resume() {
    use bulkhead_task::Resume;
    use supervise::{counter, wait_for, Proc, Stopper};
    let scratch = Scratch::new("css");
    let dir = &scratch.0;
    let Some(exe) = compile("stop_start_test", dir) else {
        return;
    };
    let spec = LinkSpec {
        name: "c-restart".into(),
        task_index: 0,
        budget_ns: MS,
        period_ns: 10 * MS,
        deadline_ns: 10 * MS,
        epoch_ns: now_ns(),
        ring_depth: 1024,
    };
    let mut link = TaskLink::create(&spec).unwrap();
    let mut cmd = Command::new(&exe);
    link.prepare(&mut cmd);
    let mut task = Proc(cmd.spawn().unwrap());
    let mut stop = Stopper::new(&link);
    let long = std::time::Duration::from_secs(10);
    wait_for("5 jobs", long, || counter(&link, "state") >= 105);
    let s = stop.suspend(&task, std::time::Duration::from_millis(500));
    assert!(s.acked);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let resumed_at = stop.resume(&link, &task, Resume::Restartable);
    wait_for("the restart", long, || counter(&link, "suspend_calls") == 1);
    assert_eq!(
        counter(&link, "restart_state"),
        100,
        "the checkpoint's state"
    );
    assert_eq!(counter(&link, "suspend_deadline"), s.deadline_ns);
    assert_eq!(counter(&link, "release_is_resume"), 1);
    link.request_stop();
    let status = task.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let mut recs: Vec<Record> = Vec::new();
    link.drain(&mut recs);
    let restarted: Vec<_> = recs
        .iter()
        .filter(|r| r.flags & bulkhead_task::flags::RESTARTED != 0)
        .collect();
    assert_eq!(restarted.len(), 1, "{recs:?}");
    assert_eq!(restarted[0].release_ns, resumed_at);
}

#[test]
fn a_sporadic_c_task_is_released_by_each_input_not_by_its_period() {
    use std::io::{BufRead, Write};
    let scratch = Scratch::new("carrival");
    let Some(exe) = compile("arrival_test", &scratch.0) else {
        return;
    };
    let spec = LinkSpec {
        name: "c-arrival".into(),
        task_index: 0,
        budget_ns: MS,
        period_ns: 500 * MS,
        deadline_ns: 500 * MS,
        epoch_ns: now_ns(),
        ring_depth: 16,
    };
    let link = TaskLink::create(&spec).unwrap();
    let mut cmd = Command::new(&exe);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    link.prepare(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut sent = Vec::new();
    for byte in [b'a', b'b', b'c'] {
        std::thread::sleep(std::time::Duration::from_millis(30));
        sent.push(now_ns());
        input.write_all(&[byte]).unwrap();
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            &fields[..3],
            [
                "job",
                &(sent.len() - 1).to_string(),
                &(byte as char).to_string()
            ]
        );
        // Released at the byte's arrival: after it was sent, well before a 500 ms period.
        let release: u64 = fields[3].parse().unwrap();
        let at = *sent.last().unwrap();
        assert!(
            release >= at && release < at + 100 * MS,
            "{line} sent at {at}"
        );
    }
    drop(input);
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut output, &mut rest).unwrap();
    assert_eq!(status.code(), Some(0), "{rest}");
    assert_eq!(rest, format!("ended {}\n", -bulkhead_os::errno::EPIPE));
}
