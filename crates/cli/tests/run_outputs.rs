//! `bulkhead run`'s output files (`--schedule-log`, `--trace`): a path that cannot be
//! created is reported against its option before anything starts; a file that cannot be
//! written (`/dev/full`, `/proc/version`) fails the run with exit 1 and a message naming
//! the option. Observed from outside: exit code and message. Also the wake-up latency
//! request the run holds (`--cpu-latency-us`). Needs root (cgroups).

mod common;
use common::{exclusive_cpus_lock, Scratch};
use std::process::Output;

/// A window schedule of one process (20 ms windows).
const WINDOWS: &str = "windows:\n  - length: 20\n    slices:\n      - {cpu: 0, sc_partition: SC1}\npartitions:\n  - name: SC1\n    processes:\n      - {budget: 5, cmd: sleep 30}\n";

fn run(scratch: &Scratch, description: &str, flags: &[&str]) -> Output {
    let file = scratch.file("system.yaml");
    std::fs::write(&file, description).unwrap();
    common::bulkhead()
        .args(["run", file.to_str().unwrap(), "--timeout", "300ms"])
        .args(flags)
        .output()
        .unwrap()
}

/// `run` with `flag path` exits 1 with a message starting with the option and the path.
fn assert_fails_naming(scratch: &Scratch, description: &str, flag: &str, path: &str) {
    let out = run(scratch, description, &[flag, path]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{flag} {path}: {stderr}");
    assert!(
        stderr.contains(&format!("error: {flag} {path}: ")),
        "{flag} {path}: {stderr}"
    );
    assert!(!stderr.contains("system.yaml"), "{flag} {path}: {stderr}");
}

#[test]
#[ignore = "needs root: cgroups"]
fn an_output_that_cannot_be_created_is_reported_against_its_option_before_the_run() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("out-create");
    let marker = scratch.file("started");
    let description = WINDOWS.replace("sleep 30", &format!("touch {}", marker.display()));
    for flag in ["--schedule-log", "--trace"] {
        assert_fails_naming(&scratch, &description, flag, "/nonexistent/x");
        assert!(!marker.exists(), "{flag}: a process started");
    }
}

#[test]
#[ignore = "needs root: cgroups"]
fn an_output_that_cannot_be_written_fails_a_window_schedule_naming_its_option() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("out-windows");
    for flag in ["--schedule-log", "--trace"] {
        for path in ["/dev/full", "/proc/version"] {
            assert_fails_naming(&scratch, WINDOWS, flag, path);
        }
    }
}

#[test]
#[ignore = "needs root: cgroups"]
fn an_output_that_cannot_be_written_fails_an_rt_run_naming_its_option() {
    let periodic = common::built("bulkhead-periodic");
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("out-rt");
    let description = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: ctl\n    kind: rt\n    cpus: 0\n    scheduler: edf\n    tasks:\n      - {{name: a, cmd: {} --exec-us 200, budget: 2ms, period: 10ms}}\n",
        periodic.display()
    );
    for flag in ["--schedule-log", "--trace"] {
        for path in ["/dev/full", "/proc/version"] {
            assert_fails_naming(&scratch, &description, flag, path);
        }
    }
}

#[test]
#[ignore = "needs root: cgroups"]
fn the_trace_of_an_rt_run_holds_its_jobs_as_slices_on_their_cpu() {
    let periodic = common::built("bulkhead-periodic");
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("out-rt-trace");
    let description = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: ctl\n    kind: rt\n    cpus: 0\n    scheduler: edf\n    tasks:\n      - {{name: a, cmd: {} --exec-us 200, budget: 2ms, period: 10ms}}\n",
        periodic.display()
    );
    let trace = scratch.file("trace.json");
    let out = run(
        &scratch,
        &description,
        &["--trace", trace.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&trace).unwrap()).expect("the trace is JSON");
    let events = json["traceEvents"].as_array().unwrap();
    let jobs = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "ctl/a" && e["pid"] == 1 && e["tid"] == 1)
        .count();
    // 300 ms of a 10 ms task, less the start delay: well over 5 jobs, at most 31.
    assert!((5..=31 * 2).contains(&jobs), "{jobs} job slices");
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["tid"] == 1 && e["args"]["name"] == "CPU 0"),
        "no track name for CPU 0"
    );
}

/// `n` one-process partitions in 1 ms windows, each process's output through the relay.
fn many_partitions(n: usize) -> String {
    let mut yaml = String::from("system: {user_range: 100000-199999}\npartitions:\n");
    for i in 0..n {
        yaml += &format!("  - {{name: p{i}, processes: [{{cmd: sleep 30, budget: 1ms}}]}}\n");
    }
    yaml += "windows:\n";
    for i in 0..n {
        yaml += &format!("  - {{length: 1ms, cpu: 0, sc_partition: p{i}}}\n");
    }
    yaml
}

/// The output relay holds two pipes per process beside its channel: a run whose
/// descriptors cannot fit the limit it cannot raise is refused before anything starts,
/// naming the limit, instead of failing with EMFILE once the spawning reaches it (a
/// 10,000-partition run failed so after minutes; 500 under a hard limit of 1200, after
/// about 300 spawns). A supervisor that may raise its hard limit (CAP_SYS_RESOURCE)
/// runs the schedule instead. The refusal names `--raw-output`, with which the same
/// run (one descriptor per process) starts under the same limit.
#[test]
#[ignore = "needs root: cgroups"]
fn a_run_whose_descriptors_cannot_fit_the_limit_is_refused_before_it_starts() {
    let _lock = exclusive_cpus_lock();
    let scratch = Scratch::new("out-fd-limit");
    let file = scratch.file("system.yaml");
    std::fs::write(&file, many_partitions(500)).unwrap();
    let (out, pid) = run_under_1200_descriptors(&file, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(common::cgroups_of(pid).is_empty(), "{stderr}");
    if out.status.success() {
        assert!(stderr.contains("timeout reached"), "{stderr}");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("500 processes need at least")
            && stderr.contains("the descriptor limit (RLIMIT_NOFILE) is 1200")
            && stderr.contains("`bulkhead run --raw-output`"),
        "{stderr}"
    );
    let (out, _) = run_under_1200_descriptors(&file, &["--raw-output"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("timeout reached"), "{stderr}");
}

/// `bulkhead run FILE --timeout 300ms FLAGS` under a descriptor limit of 1200 (soft and
/// hard): its output, stdout discarded, and its pid.
fn run_under_1200_descriptors(
    file: &std::path::Path,
    flags: &[&str],
) -> (std::process::Output, u32) {
    let mut run = common::bulkhead();
    run.args(["run", file.to_str().unwrap(), "--timeout", "300ms"]);
    run.args(flags);
    // SAFETY: setrlimit is async-signal-safe; lowering a limit needs no privilege.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut run, || {
            let limit = libc::rlimit {
                rlim_cur: 1200,
                rlim_max: 1200,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        });
    }
    let child = run
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (child.wait_with_output().unwrap(), pid)
}

/// `run` holds a wake-up latency request while it runs (`--cpu-latency-us`, 0 by
/// default), none with `off`; a value that is not one is a usage error naming the flag.
#[test]
#[ignore = "needs root: cgroups"]
fn the_run_holds_a_cpu_latency_request_unless_told_off() {
    let _cpus = exclusive_cpus_lock();
    let scratch = Scratch::new("run-latency");
    let file = scratch.file("system.yaml");
    std::fs::write(&file, WINDOWS).unwrap();
    for (flags, held) in [(&[][..], true), (&["--cpu-latency-us", "off"][..], false)] {
        let mut child = common::bulkhead()
            .args(["run", file.to_str().unwrap(), "--timeout", "1500ms"])
            .args(flags)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(700));
        let seen = bulkhead_os::cpu_latency::held_by(child.id());
        assert!(child.wait().unwrap().success(), "{flags:?}");
        assert_eq!(seen, held, "{flags:?}");
    }
    let out = run(&scratch, WINDOWS, &["--cpu-latency-us", "soon"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--cpu-latency-us"), "{stderr}");
}
