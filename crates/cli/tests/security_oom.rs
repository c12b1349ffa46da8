//! A be partition's memory limit reached from inside, through `bulkhead run`: a 64 MiB
//! partition that fills its `/tmp` and `/dev/shm` (tmpfs pages are charged to it) and a
//! partition whose limit (`memory: 1B`) its program cannot even start in, beside an rt
//! task. The partitions' OOM killer may find only their own programs: no process of
//! bulkhead's (the supervisor, a pid namespace's monitor and init) is a candidate, so
//! the run ends at its timeout as a normal run does and the rt task's jobs all ran
//! (docs/security.md). Needs root, the memory controller and SCHED_DEADLINE.

mod common;
use common::{rt_test_setup, text, Scratch};
use std::process::Command;

/// The rt task `a` on CPU 0 (a job of 1 ms every 50 ms) and the two be partitions on
/// CPU 1; `keys` are extra keys of both be partitions.
fn description(periodic: &str, d: &str, keys: &str) -> String {
    let fill = format!(
        "sh -c 'head -c 100M /dev/zero > /tmp/fill && head -c 100M /dev/zero > /dev/shm/fill \
         && echo filled > {d}/filled'"
    );
    format!(
        "system: {{cpus: 0-1}}
partitions:
  - name: ctl
    kind: rt
    cpus: 0
    scheduler: edf
    tasks:
      - {{name: a, cmd: {periodic} --exec-us 1000, budget: 10ms, period: 50ms}}
  - {{name: fill, cpus: 1, memory: 64MiB{keys}, processes: [\"{fill}\"]}}
  - {{name: tiny, cpus: 1, memory: 1B{keys}, processes: [\"sleep 60\"]}}
"
    )
}

/// The jobs the run's summary gives task `a` (`None` without a summary line).
fn jobs(stderr: &str) -> Option<u64> {
    let line = stderr.lines().find(|l| l.contains("task `a` of `ctl`"))?;
    let before = line.split(" jobs").next()?;
    before.rsplit(' ').next()?.parse().ok()
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE, cgroups and cpusets"]
fn a_be_partition_filling_its_memory_leaves_the_supervisor_and_the_rt_task_running() {
    let (periodic, _lock) = rt_test_setup();
    // A root machine may boot with the memory controller off (`cgroup_disable=memory`,
    // as some embedded boards do): bulkhead runs there without memory limits.
    if !std::path::Path::new("/sys/fs/cgroup/memory/tasks").exists()
        && !std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
    {
        return eprintln!("skipping: needs the memory controller");
    }
    let dir = Scratch::new("sec-oom");
    let d = dir.0.display().to_string();
    for keys in ["", ", sandbox: {pid_namespace: false}"] {
        let _ = std::fs::remove_file(dir.file("filled"));
        let path = dir.file("system.yaml");
        std::fs::write(
            &path,
            description(&periodic.display().to_string(), &d, keys),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
            .args(["run", path.to_str().unwrap(), "--timeout", "6s"])
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        let ctx = format!("sandbox{keys}:\n{stderr}");
        assert_eq!(out.status.code(), Some(0), "{ctx}");
        assert!(stderr.contains("timeout"), "{ctx}");
        // ~6 s less the start: about 119 jobs.
        let jobs = jobs(&stderr).unwrap_or_else(|| panic!("no summary of `a`: {ctx}"));
        assert!(jobs >= 95, "{jobs} of ~119 jobs: {ctx}");
        assert!(stderr.contains("partition `fill`"), "{ctx}");
        assert!(
            !dir.file("filled").exists(),
            "the partition wrote 200 MiB into 64 MiB: {ctx}"
        );
    }
}
