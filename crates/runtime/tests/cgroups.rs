//! `bulkhead run` on real cgroups: every scenario of the DEmOS scenario corpus
//! (`crates/conformance/scenarios/windows-*`) with its expected schedule log, processes really frozen
//! and really pinned, no escapes, no leaks, leftovers removed, and the v2 code path on
//! the machine's cgroup2 mount.
//!
//! Needs root and cgroups: ignored unless asked for (`-- --include-ignored`, as
//! scripts/test.sh does as root).

use bulkhead_model::System;
use bulkhead_runtime::{Hierarchy, Outcome, RunOptions};
use bulkhead_trace::{EventKind, Nanos};
use bulkhead_windows::corpus;
use bulkhead_windows::StopReason;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MS: Nanos = 1_000_000;
const SPIN: &str = env!("CARGO_BIN_EXE_bulkhead-spin");
const PROBE: &str = env!("CARGO_BIN_EXE_bulkhead-probe");

/// The tests run one at a time: they share 2 CPUs and check for leftovers of this process.
static SERIAL: Mutex<()> = Mutex::new(());

/// The lock of the test suites that take CPUs exclusively (bulkhead-cli's, the
/// reservations'): while one holds CPU 0 as an exclusive cpuset, an instance on every
/// CPU cannot be made.
fn exclusive_cpus_lock() -> std::fs::File {
    bulkhead_os::lock::exclusive_cpus().expect("the lock of the rt test suites")
}

macro_rules! require_cgroups {
    () => {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let _cpus = exclusive_cpus_lock();
        if let Err(e) = Hierarchy::detect() {
            panic!("these tests need root and cgroups: {e}");
        }
    };
}

/// A test's own directory, removed when the test's thread ends (libtest runs each test
/// on a thread of its own), passed or failed.
struct TestDir(PathBuf);

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

thread_local! {
    static TEST_DIR: TestDir = {
        use std::os::unix::fs::PermissionsExt;
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir()
            .join(format!("bulkhead-runtime-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Partitions run under uids of their own: every one may write its output here.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        TestDir(dir)
    };
}

/// `name` in the calling test's own directory.
fn tmp(name: &str) -> PathBuf {
    TEST_DIR.with(|d| d.0.join(name))
}

struct Ran {
    outcome: Outcome,
    log: Vec<String>,
    messages: String,
}

fn run_with(yaml: &str, name: &str, edit: impl FnOnce(&mut RunOptions)) -> Ran {
    let yaml = yaml.replace("SPIN", SPIN).replace("PROBE", PROBE);
    let system = bulkhead_model::load_str(&yaml, "test.yaml")
        .expect("valid description")
        .system;
    run_system(&system, name, edit)
}

fn run_system(system: &System, name: &str, edit: impl FnOnce(&mut RunOptions)) -> Ran {
    let log_path = tmp(&format!("{name}.jsonl"));
    let messages = Arc::new(Mutex::new(Vec::new()));
    let mut options = RunOptions {
        schedule_log: Some(log_path.clone()),
        // The outputs' directory: processes see it even in their private /tmp.
        workdir: tmp("x").parent().expect("in a directory").to_path_buf(),
        messages: Some(messages.clone()),
        ..RunOptions::default()
    };
    edit(&mut options);
    let outcome = bulkhead_runtime::run(system, &options).expect("run");
    let file = std::io::BufReader::new(std::fs::File::open(&log_path).unwrap());
    let log = bulkhead_trace::read_schedule_log(file)
        .unwrap()
        .into_iter()
        .map(|e| match e.kind {
            EventKind::Run {
                cpus,
                cmd,
                budget_ns,
                ..
            } => {
                let cmd = cmd.replace(SPIN, "SPIN").replace(PROBE, "PROBE");
                format!(
                    "{:>6}: cpus={cpus} cmd='{cmd}' budget={}",
                    ms(e.t_ns),
                    ms(budget_ns)
                )
            }
            other => panic!("unexpected schedule-log event {other:?}"),
        })
        .collect();
    let messages = String::from_utf8(messages.lock().unwrap().clone()).unwrap();
    Ran {
        outcome,
        log,
        messages,
    }
}

fn run(yaml: &str, name: &str, timeout_ms: u64) -> Ran {
    run_with(yaml, name, |o| {
        o.timeout = Some(Duration::from_millis(timeout_ms))
    })
}

/// Time a test gives a process to initialize beyond the schedule it checks: the run's
/// timeout covers the init phase too, and a loaded machine can stretch a sandboxed
/// start (namespaces, exec) to tens of milliseconds.
const INIT_SLACK: Duration = Duration::from_secs(2);

/// The schedule-log lines of `ran` up to schedule time `until` (inclusive): a run given
/// [`INIT_SLACK`] beyond `until` logs more, and what it logs up to `until` is what a run
/// stopped at `until` after an instant init phase logs.
fn up_to(ran: &Ran, until: Duration) -> Vec<String> {
    let until_ms = until.as_secs_f64() * 1e3;
    ran.log
        .iter()
        .filter(|l| {
            let t: f64 = l.split(':').next().unwrap().trim().parse().unwrap();
            t <= until_ms
        })
        .cloned()
        .collect()
}

fn ms(t: Nanos) -> String {
    if t % MS == 0 {
        (t / MS).to_string()
    } else {
        format!("{}", t as f64 / MS as f64)
    }
}

/// Every scenario of the corpus not timed by its processes, played by the spinner and the probe
/// ([`corpus::Scenario::real_system`]): exactly the corpus's log. (A yield and an exit
/// on real processes: `yield_starts_the_next_process_early`, `exits_when_every_process_exited`.)
#[test]
#[ignore = "needs root: cgroups"]
fn every_scenario_of_the_corpus_gives_its_log() {
    require_cgroups!();
    let scenarios: Vec<_> = corpus::all()
        .into_iter()
        .filter(|s| !s.header.is_timed_by_processes())
        .collect();
    assert!(scenarios.len() >= 15, "{} scenarios", scenarios.len());
    for scenario in scenarios {
        let (system, names) = scenario.real_system(SPIN, PROBE);
        let until = Duration::from_nanos(scenario.header.until);
        let slack = match scenario.header.has_init_phase() {
            true => INIT_SLACK,
            false => Duration::ZERO,
        };
        let ran = run_system(&system, &scenario.name, |o| {
            o.seed = scenario.header.seed;
            o.timeout = Some(until + slack);
        });
        let log: Vec<String> = up_to(&ran, until)
            .iter()
            .map(|l| {
                // run_system writes the programs' paths as SPIN and PROBE.
                let (real, name) = names
                    .iter()
                    .map(|(real, name)| (real.replace(SPIN, "SPIN").replace(PROBE, "PROBE"), name))
                    .find(|(real, _)| l.contains(&format!("cmd='{real}'")))
                    .unwrap_or_else(|| panic!("{}: not a command of it: {l}", scenario.name));
                l.replace(&real, name)
            })
            .collect();
        if let Err(e) = corpus::check(&log, &scenario.expected) {
            panic!("scenario {}: {e}", scenario.name);
        }
    }
}

#[test]
#[ignore = "needs root: cgroups"]
fn init_phase_before_the_schedule() {
    require_cgroups!();
    let out = tmp("init.txt");
    let _ = std::fs::remove_file(&out);
    let yaml = format!(
        "
partitions:
  - name: SC
    processes: [{{cmd: PROBE {}, budget: 3, init: true}}, {{cmd: SPIN, budget: 2}}]
windows:
  - {{length: 10, cpu: 0, sc_partition: SC}}
",
        out.display()
    );
    let until = Duration::from_millis(20);
    let ran = run(&yaml, "init", (until + INIT_SLACK).as_millis() as u64);
    let probe = format!("PROBE {}", out.display());
    assert_eq!(
        up_to(&ran, until),
        format!(
            "     0: cpus=0 cmd='{probe}' budget=3
     3: cpus=0 cmd='SPIN' budget=2
    10: cpus=0 cmd='{probe}' budget=3
    13: cpus=0 cmd='SPIN' budget=2
    20: cpus=0 cmd='{probe}' budget=3"
        )
        .lines()
        .collect::<Vec<_>>(),
        "\nactual:\n{}\n",
        ran.log.join("\n")
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let init_line = text
        .lines()
        .position(|l| l.starts_with("init "))
        .expect("initialization completed");
    let samples = text
        .lines()
        .filter(|l| l.split(' ').count() == 3 && !l.starts_with("fd"))
        .count();
    assert!(
        samples > 0 && init_line < text.lines().count() - 1,
        "it ran in its windows after init:\n{text}"
    );
}

#[test]
#[ignore = "needs root: cgroups"]
fn yield_starts_the_next_process_early() {
    require_cgroups!();
    let out = tmp("yield.txt");
    let _ = std::fs::remove_file(&out);
    let yaml = format!("{{windows: [{{cpu: 0, length: 20, sc_partition: [{{cmd: PROBE {} 1, budget: 8}}, {{cmd: SPIN, budget: 5}}]}}]}}", out.display());
    let ran = run(&yaml, "yield", 100);
    let lines: Vec<(f64, String)> = ran
        .log
        .iter()
        .map(|l| {
            let (t, rest) = l.split_once(':').unwrap();
            (t.trim().parse::<f64>().unwrap(), rest.to_string())
        })
        .collect();
    assert_eq!(lines.len(), 11, "{:?}", ran.log);
    // Each window: the probe at the window start, SPIN when the probe yields (after
    // ~1 ms of its CPU time, well before its 8 ms budget) and at the latest at the
    // budget's end. The probe also starts up in its grants (its sandbox, exec), which
    // a loaded machine can stretch over a window or two: SPIN then starts at the
    // budget's end. Once started, the probe yields early.
    let mut early = 0;
    for k in 0..5 {
        let window = 20.0 * k as f64;
        let (t_probe, probe) = &lines[2 * k];
        let (t_spin, spin) = &lines[2 * k + 1];
        assert_eq!(*t_probe, window);
        assert!(
            probe.contains("PROBE") && spin.contains("SPIN"),
            "{:?}",
            ran.log
        );
        assert!(
            *t_spin > window && *t_spin <= window + 8.0,
            "SPIN at {t_spin}: {:?}",
            ran.log
        );
        early += usize::from(*t_spin < window + 7.99);
    }
    assert!(
        early >= 2,
        "the probe yielded early in {early} windows: {:?}",
        ran.log
    );
    assert_eq!(lines[10].0, 100.0);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("yield ") && text.contains("resumed "),
        "{text}"
    );
}

#[test]
#[ignore = "needs root: cgroups"]
fn window_and_frame_messages_in_order() {
    require_cgroups!();
    let yaml = "
partitions:
  - name: P
    processes: [{cmd: SPIN, budget: 1}]
windows:
  - {length: 2, cpu: 0, sc_partition: P}
  - {length: 3}
";
    let ran = run_with(yaml, "messages", |o| {
        o.timeout = Some(Duration::from_millis(10));
        o.window_message = Some("window".into());
        o.frame_message = Some("frame".into());
    });
    assert_eq!(
        ran.messages,
        "frame\nwindow\nwindow\nframe\nwindow\nwindow\nframe\nwindow\n"
    );
}

#[test]
#[ignore = "needs root: cgroups"]
fn exits_when_every_process_exited() {
    require_cgroups!();
    // `SPIN 1` does a million iterations (about a millisecond) and exits.
    let ran = run_with(
        "{windows: [{cpu: 0, length: 100, sc_partition: [{cmd: SPIN 1, budget: 50}]}]}",
        "exit",
        |_| {},
    );
    // On an idle machine it exits in its first window; on a loaded one (other CPU
    // hogs, a noisy host) it may need a few more windows: the run ends anyway.
    assert!(!ran.log.is_empty(), "no window ran");
    for (k, line) in ran.log.iter().enumerate() {
        assert_eq!(
            line,
            &format!("{:>6}: cpus=0 cmd='SPIN 1' budget=50", k * 100),
            "\nactual:\n{}\n",
            ran.log.join("\n")
        );
    }
    assert_eq!(ran.outcome.reason, StopReason::AllExited);
}

/// The probe's samples: (monotonic ns, CPU ns, allowed CPUs).
fn samples(text: &str) -> Vec<(u64, u64, String)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let (a, b, c) = (f.next()?, f.next()?, f.next()?);
            Some((a.parse().ok()?, b.parse().ok()?, c.to_string()))
        })
        .collect()
}

#[test]
#[ignore = "needs root: cgroups"]
fn processes_are_really_frozen_and_pinned() {
    require_cgroups!();
    let out = tmp("frozen.txt");
    let _ = std::fs::remove_file(&out);
    // 5 ms of every 20 ms, alternately on CPU 0 and CPU 1 (a BE partition moving).
    let yaml = format!(
        "
partitions:
  - name: P
    processes: [{{cmd: PROBE {}, budget: 5}}]
windows:
  - {{length: 20, cpu: 0, sc_partition: P}}
  - {{length: 20, cpu: 1, sc_partition: P}}
",
        out.display()
    );
    run(&yaml, "frozen", 400);
    let text = std::fs::read_to_string(&out).unwrap();
    let s = samples(&text);
    assert!(s.len() > 50, "{} samples", s.len());
    let wall = s.last().unwrap().0 - s[0].0;
    let cpu = s.last().unwrap().1 - s[0].1;
    // Granted 25% of the time: CPU time must stay far below wall time.
    assert!(
        cpu * 10 < wall * 5,
        "cpu {cpu} ns over {wall} ns: not frozen outside its windows"
    );
    // (Other work on the machine may take part of its windows: a loose lower bound.)
    assert!(
        cpu * 50 > wall,
        "cpu {cpu} ns over {wall} ns: it hardly ran"
    );
    // Whenever it ran, it was allowed exactly its slice's CPU.
    assert!(
        s.iter().all(|(_, _, cpus)| cpus == "0" || cpus == "1"),
        "{text}"
    );
    assert!(s.iter().any(|(_, _, c)| c == "0") && s.iter().any(|(_, _, c)| c == "1"));
    // Between two consecutive samples with a long wall gap (frozen), CPU time hardly moved.
    for w in s.windows(2) {
        let (dw, dc) = (w[1].0 - w[0].0, w[1].1 - w[0].1);
        if dw > 10 * MS {
            assert!(
                dc < 2 * MS,
                "CPU time advanced {dc} ns during a {dw} ns pause"
            );
        }
    }
}

#[test]
#[ignore = "needs root: cgroups"]
fn children_inherit_only_their_channel() {
    require_cgroups!();
    let out = tmp("fds.txt");
    let _ = std::fs::remove_file(&out);
    let yaml = format!(
        "{{windows: [{{cpu: 0, length: 10, sc_partition: [{{cmd: PROBE {}, budget: 5}}]}}]}}",
        out.display()
    );
    // Long enough for the probe to start and report on a loaded machine.
    run(&yaml, "fds", 300);
    let text = std::fs::read_to_string(&out).unwrap();
    let fds: Vec<&str> = text.lines().filter(|l| l.starts_with("fd ")).collect();
    let numbers: Vec<&str> = fds.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!(numbers, ["0", "1", "2", "3"], "{fds:?}");
    assert!(fds[3].contains("socket:"), "fd 3 is the channel: {fds:?}");
}

/// Pids of running processes whose executable is `exe`.
fn running(exe: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == Path::new(exe))
        })
        .collect()
}

fn our_instances() -> Vec<PathBuf> {
    let h = Hierarchy::detect().unwrap();
    let prefix = format!("bulkhead-{}-", std::process::id());
    h.bases()
        .iter()
        .flat_map(|b| std::fs::read_dir(b).unwrap().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

#[test]
#[ignore = "needs root: cgroups"]
fn two_hundred_short_runs_leave_nothing_behind() {
    require_cgroups!();
    // A whole process tree per partition: the shell stays (compound command) and
    // forks two spinners; all of it must die with the run.
    let yaml = "
windows:
  - length: 1
    slices:
      - {cpu: 0, sc_partition: [{cmd: 'SPIN & SPIN & wait', budget: 1}]}
      - {cpu: 1, be_partition: [{cmd: SPIN, budget: 1}]}
";
    let start = std::time::Instant::now();
    // The runs happen on another thread so that a hang fails the test instead of
    // blocking the suite.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for i in 0..200 {
            let ran = run(yaml, "many", 3);
            assert_eq!(ran.outcome.reason, StopReason::Timeout, "run {i}");
            assert!(
                running(SPIN).is_empty(),
                "run {i} left processes: {:?}",
                running(SPIN)
            );
        }
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(Duration::from_secs(90))
        .expect("200 runs finished (a run hung or failed)");
    assert!(
        our_instances().is_empty(),
        "left cgroups: {:?}",
        our_instances()
    );
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
#[ignore = "needs root: cgroups"]
fn leftovers_of_a_dead_supervisor_are_removed_and_live_ones_kept() {
    require_cgroups!();
    let h = Hierarchy::detect().unwrap();
    // A "dead" instance: pid 999999999 never runs; a process inside it.
    let dead = h.freezer_base.join("bulkhead-999999999-1-0");
    let leaf = dead.join("p0-x").join("proc0");
    std::fs::create_dir_all(&leaf).unwrap();
    let mut child = std::process::Command::new(SPIN).spawn().unwrap();
    std::fs::write(leaf.join("cgroup.procs"), child.id().to_string()).unwrap();
    // A "live" instance: named after this very process.
    let live = h.freezer_base.join(format!(
        "{}-x",
        bulkhead_runtime::leftovers::instance_name()
    ));
    std::fs::create_dir(&live).unwrap();
    // On a hybrid host, a dead instance at the root of the cgroup2 mount too (a run on
    // the v2 path, or bench/window-switch, killed there).
    let unified = Path::new("/sys/fs/cgroup/unified");
    let dead_v2 = (h.version == bulkhead_os::cgroup::Version::V1
        && unified.join("cgroup.procs").exists())
    .then(|| {
        let dir = unified.join("bulkhead-999999999-1-1-switch-0-0");
        std::fs::create_dir(&dir).unwrap();
        let child = std::process::Command::new(SPIN).spawn().unwrap();
        std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).unwrap();
        (dir, child)
    });
    run(
        "{windows: [{cpu: 0, length: 2, sc_partition: [{cmd: SPIN, budget: 1}]}]}",
        "leftovers",
        4,
    );
    let killed = child.wait().unwrap();
    assert!(!dead.exists(), "leftover instance removed");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&killed),
        Some(libc::SIGKILL)
    );
    if let Some((dir, mut child)) = dead_v2 {
        let removed = !dir.exists();
        if !removed {
            let _ = child.kill();
        }
        let killed = child.wait().unwrap();
        let _ = std::fs::remove_dir(&dir);
        assert!(removed, "leftover instance on the cgroup2 mount removed");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&killed),
            Some(libc::SIGKILL)
        );
    }
    assert!(live.exists(), "a live instance is never touched");
    std::fs::remove_dir(&live).unwrap();
}

#[test]
#[ignore = "needs root: cgroups"]
fn cgroup_v2_freeze_spawn_and_kill_on_the_unified_mount() {
    require_cgroups!();
    let unified = Path::new("/sys/fs/cgroup/unified");
    // A root CI machine in cgroup v1 legacy mode has no cgroup2 mount (bulkhead runs
    // there on v1).
    if !unified.join("cgroup.procs").exists() {
        eprintln!("skipped: no cgroup2 mount at {}", unified.display());
        return;
    }
    let out = tmp("v2.txt");
    let _ = std::fs::remove_file(&out);
    // No cpuset controller on a hybrid machine's cgroup2 mount: freezing, clone3
    // into the cgroup and cgroup.kill are what this exercises.
    let yaml = format!(
        "{{windows: [{{cpu: 0, length: 20, sc_partition: [{{cmd: PROBE {}, budget: 5}}, {{cmd: 'SPIN & SPIN & wait', budget: 5}}]}}]}}",
        out.display()
    );
    let ran = run_with(&yaml, "v2", |o| {
        o.timeout = Some(Duration::from_millis(300));
        o.hierarchy = Some(Hierarchy::v2_at(unified, false));
    });
    assert_eq!(ran.log.len(), 31, "{:?}", ran.log);
    let s = samples(&std::fs::read_to_string(&out).unwrap());
    let wall = s.last().unwrap().0 - s[0].0;
    let cpu = s.last().unwrap().1 - s[0].1;
    assert!(
        cpu * 10 < wall * 5,
        "v2 freezer: cpu {cpu} ns over {wall} ns"
    );
    assert!(
        running(SPIN).is_empty(),
        "cgroup.kill left {:?}",
        running(SPIN)
    );
    let prefix = format!("bulkhead-{}-", std::process::id());
    let left: Vec<_> = std::fs::read_dir(unified)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .collect();
    assert!(left.is_empty());
}

#[test]
#[ignore = "needs root: cgroups"]
fn a_missing_command_is_a_clear_error_and_leaves_nothing() {
    require_cgroups!();
    let system = bulkhead_model::load_str(
        "{windows: [{cpu: 0, length: 10, sc_partition: [{cmd: no-such-program-bulkhead, budget: 5}]}]}",
        "t.yaml",
    )
    .unwrap()
    .system;
    let e = bulkhead_runtime::run(
        &system,
        &RunOptions {
            workdir: std::env::temp_dir(),
            ..RunOptions::default()
        },
    )
    .expect_err("must fail");
    assert!(
        e.to_string()
            .contains("program `no-such-program-bulkhead` not found (searched: "),
        "{e}"
    );
}

/// A best-effort partition in no window runs for the whole run, never frozen, as its user:
/// here on the v2 code path (clone3 into its cgroup, cgroup.kill at the end).
#[test]
#[ignore = "needs root: cgroups"]
fn cgroup_v2_an_unwindowed_partition_runs_unfrozen_as_its_user() {
    require_cgroups!();
    let unified = Path::new("/sys/fs/cgroup/unified");
    // A root CI machine in cgroup v1 legacy mode has no cgroup2 mount (bulkhead runs
    // there on v1).
    if !unified.join("cgroup.procs").exists() {
        eprintln!("skipped: no cgroup2 mount at {}", unified.display());
        return;
    }
    let (uid, probe) = (tmp("free-uid.txt"), tmp("free-probe.txt"));
    let _ = std::fs::remove_file(&probe);
    let yaml = format!(
        "{{partitions: [{{name: free, user: nobody, processes: [\"sh -c 'id -u > {}; exec PROBE {}'\"]}}], windows: [{{cpu: 0, length: 20, sc_partition: [{{cmd: SPIN, budget: 5}}]}}]}}",
        uid.display(),
        probe.display()
    );
    std::fs::set_permissions(
        uid.parent().unwrap(),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    let ran = run_with(&yaml, "v2-free", |o| {
        o.timeout = Some(Duration::from_millis(400));
        o.hierarchy = Some(Hierarchy::v2_at(unified, false));
    });
    assert!(
        ran.log.len() >= 10,
        "the window schedule ran: {:?}",
        ran.log
    );
    assert_eq!(std::fs::read_to_string(&uid).unwrap().trim(), "65534");
    let s = samples(&std::fs::read_to_string(&probe).unwrap());
    let wall = s.last().unwrap().0 - s[0].0;
    let cpu = s.last().unwrap().1 - s[0].1;
    assert!(wall >= 200 * MS, "sampled for {wall} ns");
    assert!(cpu * 10 > wall, "never frozen: cpu {cpu} ns over {wall} ns");
    assert!(running(PROBE).is_empty(), "left {:?}", running(PROBE));
    let prefix = format!("bulkhead-{}-", std::process::id());
    let left: Vec<_> = std::fs::read_dir(unified)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
