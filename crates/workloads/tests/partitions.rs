//! rt partitions from a system description, through the supervisor hook
//! `bulkhead_runtime::tasks`: admission refuses an overloaded set and names the task;
//! an `edf` partition's tasks run under SCHED_DEADLINE and a `fixed-priority` one's under
//! SCHED_FIFO at their rate-monotonic priority, as `chrt -p` shows (and `reclaim: true`
//! adds SCHED_FLAG_RECLAIM, as `sched_getattr` shows); their records become
//! trace events; nothing is left behind.

use bulkhead_os::cpuset;
use bulkhead_os::sched::{self, Policy};
use bulkhead_plan::{admit, Options};
use bulkhead_plan::{Host, Programs};
use bulkhead_runtime::tasks::{Epoch, RtOptions, RtPartitions};
use bulkhead_trace::{Event, EventKind};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn system(yaml: &str) -> bulkhead_model::System {
    bulkhead_model::load_str(yaml, "test.yaml")
        .expect("valid description")
        .system
}

#[test]
fn an_overloaded_partition_is_refused_naming_the_task_and_test() {
    let fp = system(
        "system: {cpus: 0-1}\npartitions:\n  - name: ctl\n    kind: rt\n    cpus: 0\n    tasks:\n\
         \x20     - {name: fast, cmd: x, budget: 6ms, period: 10ms}\n\
         \x20     - {name: slow, cmd: x, budget: 9ms, period: 20ms}\n",
    );
    let e = admit(&fp, &Options::default()).unwrap_err().to_string();
    assert!(e.contains("`slow`") && e.contains("rta"), "{e}");
    let edf = system(
        "system: {cpus: 0-1}\npartitions:\n  - name: ctl\n    kind: rt\n    cpus: 0\n    scheduler: edf\n    tasks:\n\
         \x20     - {name: a, cmd: x, budget: 6ms, period: 10ms}\n\
         \x20     - {name: b, cmd: x, budget: 5ms, period: 10ms}\n",
    );
    let e = admit(&edf, &Options::default()).unwrap_err().to_string();
    assert!(e.contains("admission refused") && e.contains("ctl"), "{e}");
}

fn chrt(pid: u32) -> String {
    let out = Command::new("chrt")
        .arg("-p")
        .arg(pid.to_string())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Starts `sys`'s rt partitions. Other bulkhead instances (other test suites) may hold
/// these CPUs for a moment: an exclusive cpuset cannot overlap them. Waits for them up
/// to 20 s, then gives up (`None`, the test skips).
fn start_when_free(sys: &bulkhead_model::System, options: &RtOptions) -> Option<RtPartitions> {
    let mut tries = 0;
    loop {
        match RtPartitions::start(sys, options) {
            Ok(rt) => return Some(rt),
            Err(e) if e.to_string().contains("sibling cpuset") && tries < 200 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) if e.to_string().contains("sibling cpuset") => {
                eprintln!("skipping: another bulkhead instance holds CPU 0 or 1: {e}");
                return None;
            }
            Err(e) => panic!("rt partitions start: {e}"),
        }
    }
}

/// The reservations `chrt` showed for tasks a, b and c, and whether each reclaims.
fn assert_reservations(shown: &[String], flags: &[Option<bool>]) {
    assert!(
        shown[0].contains("SCHED_DEADLINE") && shown[0].contains("2000000/10000000/10000000"),
        "{}",
        shown[0]
    );
    assert!(
        shown[1].contains("5000000/40000000/50000000"),
        "{}",
        shown[1]
    );
    assert!(
        shown[2].contains("SCHED_FIFO") && shown[2].contains("priority: 98"),
        "{}",
        shown[2]
    );
    assert_eq!(
        flags,
        [Some(true), Some(true), None],
        "`reclaim: true` of ctl"
    );
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn rt_tasks_run_with_their_reservations_and_report_every_job() {
    if let Err(e) = cpuset::detect() {
        panic!("needs root and cpusets: {e}");
    }
    let _lock = bulkhead_os::lock::exclusive_cpus().expect("the lock of the rt test suites");
    let bin = env!("CARGO_BIN_EXE_bulkhead-periodic");
    let sys = system(&format!(
        "system: {{cpus: 0-1}}\npartitions:\n\
         \x20 - name: ctl\n    kind: rt\n    cpus: 0\n    scheduler: edf\n    reclaim: true\n    memory: 64MiB\n    tasks:\n\
         \x20     - {{name: a, cmd: {bin} --exec-us 500, budget: 2ms, period: 10ms}}\n\
         \x20     - {{name: b, cmd: {bin} --exec-us 1000, budget: 5ms, period: 50ms, deadline: 40ms}}\n\
         \x20 - name: fp\n    kind: rt\n    cpus: 1\n    tasks:\n\
         \x20     - {{name: c, cmd: {bin} --exec-us 500, budget: 2ms, period: 20ms}}\n"
    ));
    let instance = PathBuf::from(format!("bulkhead-rt-test-{}-run", std::process::id()));
    let options = RtOptions {
        instance: instance.clone(),
        epoch: Epoch {
            after_attach_ns: 50_000_000,
            grid_ns: 1,
            attach_within: Duration::from_secs(5),
        },
        workdir: std::env::temp_dir(),
        programs: Programs::resolve(&sys, &Host::current(&std::env::temp_dir())).unwrap(),
        ring_depth: 1024,
        shield: false,
    };
    let Some(mut rt) = start_when_free(&sys, &options) else {
        return;
    };
    std::thread::sleep(Duration::from_millis(100));
    let pids = rt.pids();
    let shown: Vec<String> = pids.iter().map(|&p| chrt(p)).collect();
    // chrt does not print SCHED_FLAG_RECLAIM; sched_getattr reports it.
    let flags: Vec<Option<bool>> = pids
        .iter()
        .map(|&p| match sched::get(p as i32) {
            Ok(Policy::Deadline(d)) => Some(d.reclaim),
            _ => None,
        })
        .collect();
    let memcg = format!("{}-ctl", instance.display());
    let in_memcg = std::fs::read_to_string(format!("/proc/{}/cgroup", pids[0])).unwrap();
    let limit = std::fs::read_to_string(format!(
        "/sys/fs/cgroup/memory/{memcg}/memory.limit_in_bytes"
    ));
    std::thread::sleep(Duration::from_millis(1000));
    let mut events: Vec<Event> = Vec::new();
    rt.drain(&mut |e| events.push(e));
    let summary = rt.stop(&mut |e| events.push(e));

    assert_reservations(&shown, &flags);
    eprintln!("{summary:#?}");
    for s in &summary {
        // A VM's host takes milliseconds now and then (a 14 ms response was seen in CI):
        // a miss or two is the platform's, which bench/rt-isolation measures against its
        // floor; more than 5% of the jobs would be ours.
        assert!(s.misses <= 1 + s.jobs / 20, "{s:?}");
        assert!(s.max_response_ns > 0 && s.dropped == 0, "{s:?}");
    }
    assert!(summary[0].jobs >= 80, "{:?}", summary[0]);
    let completes = |task: &str| {
        events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::JobComplete { task: t, .. } if &**t == task))
            .count() as u64
    };
    assert_eq!(completes("a"), summary[0].jobs);
    assert_eq!(completes("c"), summary[2].jobs);
    // Releases lie on task a's grid from the schedule start (t = 0): job k at k x 10 ms.
    // Its first job is the first release after its process attached, which a VM's
    // stall has delayed by 50 ms (job 5) in CI: a bound, not job 0.
    let first = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::JobRelease { task, job, .. } if &**task == "a" => Some((e.t_ns, *job)),
            _ => None,
        })
        .unwrap();
    assert_eq!(first.0, first.1 * 10_000_000, "on the grid: {first:?}");
    assert!(first.1 <= 20, "started within 200 ms: {first:?}");
    if std::path::Path::new("/sys/fs/cgroup/memory").exists() {
        assert!(
            in_memcg.contains(&format!(":memory:/{memcg}\n")),
            "{in_memcg}"
        );
        assert_eq!(limit.unwrap().trim(), (64u64 << 20).to_string());
        assert!(!std::path::Path::new(&format!("/sys/fs/cgroup/memory/{memcg}")).exists());
    }
    let mount = cpuset::detect().unwrap().mount().to_path_buf();
    assert!(
        !mount.join(&instance).exists(),
        "the instance's cpusets were not removed"
    );
    assert_eq!(
        std::fs::read_to_string(mount.join("cpuset.sched_load_balance"))
            .unwrap()
            .trim(),
        "1"
    );
}
