//! `check`, `analyze`, `sim` and `bulkhead run` of a best-effort partition on the CPU of
//! an rt partition with `exclusive: false` (issue 39.4; DriveOS 7.1's Linux side,
//! Boomerang IV-A's ProcData beside its load). `run` is observed from outside: the be process's CPU affinity, cgroups and
//! CPU time (`/proc/PID/status`, `/proc/PID/cgroup`, `/proc/PID/stat`), the rt task's
//! jobs and misses in the schedule log against a probe beside them, and nothing left
//! behind.

mod common;
use common::{bin, bulkhead, partition_children, Scratch};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Boomerang IV-A's Core 1: ProcData (0.2 ms every 2 ms) under SCHED_DEADLINE beside the
/// load and a logger held to 20%.
const CORE1: &str = "partitions:
  - {name: linux, kind: rt, cpus: 1, exclusive: false, scheduler: edf,
     tasks: [{name: procdata, cmd: 'true', budget: 200us, period: 2ms}]}
  - {name: load, kind: be, cpus: 1, processes: ['true']}
  - {name: logger, kind: be, cpus: 1, cpu: 20%, processes: ['true']}
";

#[test]
fn check_analyze_and_sim_take_be_partitions_on_a_non_exclusive_rt_partitions_cpu() {
    let scratch = Scratch::new("shared-cpu-tools");
    let file = scratch.file("core1.yaml");
    std::fs::write(&file, CORE1).unwrap();
    let path = file.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = bulkhead().args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {text}{err}");
        text
    };
    run(&["check", path]);
    let analysis = run(&["analyze", path]);
    assert!(
        analysis.contains("shared with best-effort partition(s) `load`, `logger`"),
        "{analysis}"
    );
    let sim = run(&["sim", path, "--for", "1s"]);
    assert!(
        sim.contains("best-effort logger in the background on CPU 1: 200ms"),
        "{sim}"
    );
    assert!(
        sim.contains("best-effort load in the background on CPU 1: 700ms"),
        "{sim}"
    );
    // Made exclusive, the same description is refused, naming the key to declare.
    std::fs::write(&file, CORE1.replace("exclusive: false", "exclusive: true")).unwrap();
    let out = bulkhead().args(["check", path]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        err.contains("core1.yaml:4:") && err.contains("partitions[1].cpus"),
        "{err}"
    );
    assert!(err.contains("declare `exclusive: false`"), "{err}");
}

/// examples/driveos-linux.yaml, DriveOS 7.1's Linux side: K and L under SCHED_DEADLINE
/// on CPU 1 beside five be partitions that declare a 100 µs non-preemptible section.
fn driveos_linux() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/driveos-linux.yaml"
    );
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn the_driveos_linux_side_is_checked_analysed_and_simulated_beside_its_be_work() {
    let scratch = Scratch::new("driveos-linux");
    let file = scratch.file("driveos-linux.yaml");
    std::fs::write(&file, driveos_linux()).unwrap();
    let path = file.to_str().unwrap();
    for args in [&["check", path][..], &["sim", path, "--for", "10ms"]] {
        let out = bulkhead().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("warning"), "{args:?}: {err}");
    }
    let out = bulkhead()
        .args(["analyze", "--json", path])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cpu1 = report["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cpu"] == "1")
        .expect("CPU 1 in the report");
    let sharing = &cpu1["sharing"];
    assert_eq!(
        sharing["partitions"].as_array().unwrap().len(),
        5,
        "{sharing}"
    );
    assert_eq!(sharing["nonpreemptible_ns"], 100_000);
    assert_eq!(sharing["nonpreemptible_declared"], true);
    assert_eq!(sharing["fifo"], false);
    assert_eq!(report["cpus"][0]["sharing"], serde_json::Value::Null);
}

/// The same Linux side with a non-preemptible section its 1 ms tasks cannot absorb, or
/// with `linux` exclusive: `analyze` fails CPU 1, `check` names the be partition's
/// `cpus` and the key to declare.
#[test]
fn the_driveos_linux_side_is_refused_when_the_be_work_cannot_fit_beside_it() {
    let scratch = Scratch::new("driveos-linux-refused");
    let file = scratch.file("driveos-linux.yaml");
    let path = file.to_str().unwrap();
    std::fs::write(
        &file,
        driveos_linux().replacen("nonpreemptible: 100us", "nonpreemptible: 900us", 1),
    )
    .unwrap();
    let out = bulkhead().args(["analyze", path]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("CPU 1:") && text.contains("FAILS"), "{text}");
    assert!(text.contains("up to 900 µs"), "{text}");
    let exclusive = driveos_linux().replace("    exclusive: false ", "    # exclusive: false ");
    std::fs::write(&file, exclusive).unwrap();
    let out = bulkhead().args(["check", path]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("driveos-linux.yaml:54:")
            && err.contains("partitions[2].cpus: overlaps the CPUs of partition `linux`"),
        "{err}"
    );
    assert!(err.contains("declare `exclusive: false`"), "{err}");
}

/// The be process's utime + stime in clock ticks (`/proc/PID/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command: field 3 is the state, so utime (14) is index 11.
    fields
        .get(11..13)
        .map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum())
}

fn status_line(pid: u32, key: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap_or("");
    line.split(':').nth(1).unwrap_or("").trim().to_string()
}

/// The pid of the `bulkhead-hog` the run `run` started, looked for until 2 s after
/// `started`. It runs under its pid namespace's monitor and init: two levels down.
fn find_hog(run: u32, started: Instant) -> Option<u32> {
    let is_hog = |pid: &u32| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        cmdline.windows(12).any(|w| w == b"bulkhead-hog")
    };
    while started.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
        let all = partition_children(run);
        let below = all.iter().flat_map(|&p| common::children(p));
        let deeper: Vec<u32> = below.flat_map(common::children).collect();
        if let Some(pid) = all.into_iter().chain(deeper).find(is_hog) {
            return Some(pid);
        }
    }
    None
}

/// The mapper beside the burner misses no more than the platform lets a task of its
/// period miss: the probe's wake-ups later than 10 ms, twice over, and 5 to spare.
fn assert_within_the_probes_floor(schedule: &str, probed: &std::process::Output) {
    let of_mapper = |event: &str| {
        let lines = schedule
            .lines()
            .filter(|l| l.contains("\"task\":\"mapper\""));
        lines
            .filter(|l| l.contains(&format!("\"event\":\"{event}\"")))
            .count()
    };
    let report: serde_json::Value = serde_json::from_slice(&probed.stdout).unwrap_or_else(|e| {
        panic!(
            "probe --json: {e}: {}",
            String::from_utf8_lossy(&probed.stderr)
        )
    });
    let late = report["cpus"][0]["missed"]
        .as_u64()
        .expect("the probe's CPU 1");
    let (mapper_jobs, mapper_misses) = (of_mapper("job_complete"), of_mapper("deadline_miss"));
    assert!(
        mapper_jobs >= 200,
        "{mapper_jobs} jobs of the mapper in 4 s"
    );
    assert!(
        mapper_misses as u64 <= 2 * late + 5,
        "the mapper missed {mapper_misses} of {mapper_jobs} deadlines beside the be work; the probe beside it woke {late} times later than 10 ms"
    );
}

/// `quest` owns CPU 0 with `control`; `linux-rt` (`exclusive: false`) reserves `mapper`
/// (1 ms every 10 ms, SCHED_DEADLINE) on CPU 1, where `background` burns CPU within 30%.
fn burner_beside_mapper(periodic: &std::path::Path, hog: &std::path::Path) -> String {
    format!(
        "system: {{cpus: 0-1}}
partitions:
  - name: quest
    kind: rt
    cpus: 0
    tasks:
      - {{name: control, cmd: {} --exec-us 500, budget: 1ms, period: 10ms}}
  - name: linux-rt
    kind: rt
    cpus: 1
    exclusive: false
    scheduler: edf
    tasks:
      - {{name: mapper, cmd: {} --exec-us 1000, budget: 2ms, period: 10ms}}
  - name: background
    kind: be
    cpus: 1
    cpu: 30%
    processes: [{} cpu]
",
        periodic.display(),
        periodic.display(),
        hog.display()
    )
}

/// Both CPUs belong to rt partitions (`quest` owns CPU 0, as in Boomerang's set-up): the
/// be partition's cgroups have no CPU of their own to start from.
#[test]
#[ignore = "needs root: SCHED_DEADLINE, cgroups and cpusets"]
fn a_be_partition_burns_the_cpu_of_a_non_exclusive_rt_partition_below_its_reservation() {
    let (periodic, _lock) = common::rt_test_setup();
    let scratch = Scratch::new("shared-cpu");
    let file = scratch.file("system.yaml");
    let log = scratch.file("schedule.jsonl");
    let hog = bin("bulkhead-hog");
    std::fs::write(&file, burner_beside_mapper(&periodic, &hog)).unwrap();
    let started = Instant::now();
    let run = bulkhead()
        .args(["run", file.to_str().unwrap(), "--timeout", "4s"])
        .args(["--schedule-log", log.to_str().unwrap()])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The platform's floor beside them: a SCHED_FIFO 99 timer every 10 ms on CPU 1, the
    // mapper's period, for as long as the run (docs/platform.md).
    let probe = bulkhead()
        .args(["probe", "--json", "--cpus", "1", "--interval", "10ms"])
        .args(["--priority", "99", "--for", "4s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let Some(hog_pid) = find_hog(run.id(), started) else {
        // Refused (another run's exclusive cpuset on our CPUs?) or slow: say which.
        let out = run.wait_with_output().unwrap();
        panic!(
            "the be process did not start: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(started.elapsed()));
    let (affinity, cgroups, ticks) = (
        status_line(hog_pid, "Cpus_allowed_list"),
        std::fs::read_to_string(format!("/proc/{hog_pid}/cgroup")).unwrap_or_default(),
        cpu_ticks(hog_pid),
    );
    let elapsed_ticks = started.elapsed().as_millis() as u64 / 10;
    let out = run.wait_with_output().unwrap();
    let probed = probe.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let schedule = std::fs::read_to_string(&log).unwrap_or_default();
    let count = |event: &str| schedule.matches(&format!("\"event\":\"{event}\"")).count();

    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // The be process runs on the rt partition's CPU, in a cpuset below the rt domain
    // and a cpu cgroup of its own.
    assert_eq!(affinity, "1", "{cgroups}");
    let cpuset = cgroups
        .lines()
        .find(|l| l.contains(":cpuset:"))
        .unwrap_or("");
    assert!(cpuset.contains("/linux-rt-cpu1/"), "{cgroups}");
    let cpu = cgroups
        .lines()
        .find(|l| l.contains(":cpu:") || l.contains(":cpu,"))
        .unwrap_or("");
    assert!(cpu.contains("background"), "{cgroups}");
    // It makes progress, within its 30% (wide bounds: the machine is shared).
    assert!(
        ticks >= 10,
        "the be process got {ticks} ticks in {elapsed_ticks}"
    );
    assert!(
        ticks * 10 <= elapsed_ticks * 6,
        "{ticks} ticks in {elapsed_ticks}: above 30%?"
    );
    // The rt task keeps its jobs and (within a wide bound) its deadlines.
    let (jobs, misses) = (count("job_complete"), count("deadline_miss"));
    // Two 10 ms tasks for about 4 s: `control` on CPU 0 and `mapper` beside the be work.
    assert!(
        jobs >= 400,
        "{jobs} jobs in 4 s of two 10 ms tasks: {stderr}"
    );
    assert!(
        misses * 20 <= jobs,
        "{misses} misses of {jobs} jobs beside the be work"
    );
    assert_within_the_probes_floor(&schedule, &probed);
    // Nothing is left: no process, no cgroup of the run.
    assert!(!std::path::Path::new(&format!("/proc/{hog_pid}")).exists());
    for line in cgroups.lines().filter(|l| l.contains("bulkhead-")) {
        let (controller, path) = line.split_once(':').unwrap().1.split_once(':').unwrap();
        let mount = format!("/sys/fs/cgroup/{}", controller.split(',').next().unwrap());
        let dir = format!("{mount}{path}");
        assert!(!std::path::Path::new(&dir).exists(), "{dir} is left");
    }
}
