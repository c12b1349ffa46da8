//! `bulkhead sim --for` with a huge duration is not silent when stderr is no terminal:
//! it prints progress lines, so a user (or CI log) sees it working and how far it got.

mod common;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn a_huge_for_shows_progress_on_a_non_terminal_stderr() {
    let dir = common::Scratch::new("sim-progress");
    let file = dir.file("rm.yaml");
    std::fs::write(
        &file,
        "partitions:\n  - {name: p, kind: rt, cpus: 0, tasks: [{name: t, budget: 1ms, period: 4ms}]}\n",
    )
    .unwrap();
    let mut child = common::bulkhead()
        .args([
            "sim",
            file.to_str().unwrap(),
            "--for",
            "18446744073709551615ns",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) if line.contains("bulkhead sim: progress:") => {
                seen.push(line);
                break;
            }
            Ok(line) => seen.push(line),
            Err(_) => {}
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let last = seen.last().cloned().unwrap_or_default();
    assert!(
        last.contains("s of 18446744073.710 s simulated"),
        "no progress line within 20 s: {seen:?}"
    );
}
