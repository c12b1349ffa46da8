//! `bulkhead ctl` against a control server: text and JSON replies, errors from the
//! system, and a clear message when no system runs.

use bulkhead_control::*;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn bulkhead(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(args)
        .output()
        .expect("bulkhead runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Answers like a system in mode `urban` with one partition, one task and one channel.
struct Fake;

impl Handler for Fake {
    fn request(&mut self, request: Request, _peer: Peer, _ticket: Ticket) -> Handled {
        Handled::Reply(match request {
            Request::Status => Response::status(
                None,
                Status {
                    protocol: PROTOCOL_VERSION,
                    system: "vehicle".into(),
                    pid: 42,
                    uptime_ns: 1_500_000_000,
                    state: "running".into(),
                    mode: Some("urban".into()),
                    switching_to: None,
                    partitions: vec![PartitionStatus {
                        name: "nav".into(),
                        kind: "rt".into(),
                        cpus: "1".into(),
                        interface: Some(InterfaceStatus {
                            budget_ns: 1_000_000,
                            period_ns: 5_000_000,
                        }),
                        tasks: vec![TaskStatus {
                            name: "route".into(),
                            pid: Some(4242),
                            policy: "fifo".into(),
                            budget_ns: 4_000_000,
                            period_ns: 50_000_000,
                            deadline_ns: 50_000_000,
                            priority: Some(90),
                            jobs: 30,
                            misses: 0,
                            ..TaskStatus::default()
                        }],
                        memory: None,
                    }],
                    channels: vec![ChannelStatus {
                        name: "route2ivi".into(),
                        kind: "latest".into(),
                        writer: "nav".into(),
                        readers: vec!["ivi".into()],
                        written: 30,
                        read: 29,
                        lost: 1,
                        dropped: 0,
                        overwritten: 1,
                        writer_end: EndStatus {
                            state: "attached".into(),
                            pid: Some(4250),
                        },
                        reader_end: EndStatus {
                            state: "closed".into(),
                            pid: None,
                        },
                    }],
                    stop_start: Some(StopStartStatus {
                        state: "suspended".into(),
                        cycles: 3,
                        last_suspend_ns: Some(4_000_000),
                        last_resume_ns: None,
                        order: vec!["ivi".into(), "nav".into()],
                    }),
                    windows: None,
                    health: vec![SupervisionStatus {
                        partition: "nav".into(),
                        task: Some("route".into()),
                        supervision: "on_miss".into(),
                        fired: 1,
                        next_action: "mode: safe".into(),
                        misses: Some(2),
                        ..SupervisionStatus::default()
                    }],
                },
            ),
            Request::Mode { name } if name == "highway" => Response::mode(
                None,
                ModeOutcome {
                    from: "urban".into(),
                    to: "highway".into(),
                    policy: "boost".into(),
                    latency_ns: 300_000,
                    steps: vec![
                        StepRecord {
                            t_ns: 0,
                            event: "agent_request".into(),
                            partition: Some("nav".into()),
                            boost: true,
                        },
                        StepRecord {
                            t_ns: 300_000,
                            event: "mode_done".into(),
                            partition: None,
                            boost: false,
                        },
                    ],
                },
            ),
            Request::Mode { name } => {
                Response::error(None, ErrorCode::UnknownMode, format!("no mode `{name}`"))
            }
            _ => Response::error(None, ErrorCode::Unsupported, "not here"),
        })
    }

    fn refused(&mut self, _peer: Peer, _why: &str) {}
}

struct Served {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    fn start(name: &str) -> Served {
        let path = std::env::temp_dir()
            .join(format!("bulkhead-ctl-{}-{name}", std::process::id()))
            .join("vehicle.sock");
        let uid = std::fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
            .unwrap();
        let mut server = Server::bind(&path, &[0, uid]).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                server
                    .poll_within(&mut Fake, Duration::from_millis(5))
                    .unwrap();
            }
        });
        Served {
            path,
            stop,
            thread: Some(thread),
        }
    }

    fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(self.path.parent().unwrap());
    }
}

#[test]
fn status_prints_partitions_tasks_mode_and_channels() {
    let sys = Served::start("status");
    let out = bulkhead(&["ctl", "--control", sys.arg(), "status"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for line in [
        "system vehicle (pid 42): running for 1500ms, mode urban",
        "partition nav (rt, CPUs 1, interface 1ms every 5ms)",
        "task route            fifo priority 90 4ms every 50ms (deadline 50ms), pid 4242, 30 jobs, 0 misses",
        "channel route2ivi (latest): nav -> ivi, 30 written, 29 read, 1 lost (0 dropped, 1 overwritten); writer attached (pid 4250), reader closed",
        "stop-start: suspended, 3 cycles, last suspend 4ms, last resume -, order ivi > nav",
        "health: task route of partition nav: on_miss fired 1 times, next action mode: safe, 2 misses in its window",
    ] {
        assert!(stdout.contains(line), "`{line}` in\n{stdout}");
    }
    let json = bulkhead(&["ctl", "--control", sys.arg(), "status", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["status"]["mode"], "urban");
    assert_eq!(doc["ok"], true);
}

#[test]
fn mode_prints_the_outcome_and_errors_exit_1() {
    let sys = Served::start("mode");
    let out = bulkhead(&["ctl", "--control", sys.arg(), "mode", "highway"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout.starts_with("urban -> highway (boost): done in 300us\n"),
        "{stdout}"
    );
    assert!(stdout.contains("agent_request nav (boost)"), "{stdout}");
    let out = bulkhead(&["ctl", "--control", sys.arg(), "mode", "moon"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), "error: unknown_mode: no mode `moon`\n");
    let out = bulkhead(&["ctl", "--control", sys.arg(), "--json", "mode", "moon"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("\"code\": \"unknown_mode\""));
}

#[test]
fn no_running_system_is_a_clear_error() {
    let path = std::env::temp_dir().join(format!("bulkhead-ctl-{}-none.sock", std::process::id()));
    let out = bulkhead(&["ctl", "--control", path.to_str().unwrap(), "status"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: no bulkhead system is running at {} (no such socket)\n",
            path.display()
        )
    );
}
