//! An rt partition (exclusive SCHED_DEADLINE root domain on CPU 0, two periodic tasks)
//! next to a be partition (CPU 1, 64 MiB, 64 pids, uid nobody) running a fork bomb, a
//! memory hog, CPU hogs and an I/O hog. The rt tasks miss no deadline, and a process of the
//! be partition can change neither the rt tasks' scheduling nor its own CPUs, memory limit
//! or cgroups. Needs root, cgroup v1 cpuset/memory/pids/freezer and SCHED_DEADLINE;
//! otherwise it prints why it skips.
//!
//! This is the isolation half of issue 7 built from the crates directly; `bulkhead run`
//! builds the same layout from a system description.

use bulkhead_model::CpuSet;
use bulkhead_reserve::cpuset::{self, ExclusiveDomain, Hierarchy};
use bulkhead_reserve::detect;
use bulkhead_reserve::sched::{self, DeadlineParams, Policy};
use bulkhead_task::clock::now_ns;
use bulkhead_task::flags;
use bulkhead_task::supervisor::{LinkSpec, TaskLink};
use bulkhead_task::Record;
use bulkhead_workloads::be::{BeCgroups, BeLimits};
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;
/// The be partition: CPU 1, 64 MiB, 64 pids.
const BE_LIMITS: BeLimits = BeLimits {
    cpus: Some("1"),
    memory: Some(64 << 20),
    pids_max: 64,
};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A periodic rt task process; killed and reaped when dropped.
struct RtTask {
    link: TaskLink,
    child: Child,
}

impl Drop for RtTask {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_rt(domain: &ExclusiveDomain, link: TaskLink, exec_us: u64) -> RtTask {
    let s = link.spec();
    let dl = Policy::Deadline(
        DeadlineParams::for_task(s.budget_ns, s.deadline_ns, s.period_ns).unwrap(),
    );
    let procs = fs::OpenOptions::new()
        .write(true)
        .open(domain.dir().join("cgroup.procs"))
        .unwrap();
    let fd = procs.as_raw_fd();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bulkhead-periodic"));
    cmd.args(["--exec-us", &exec_us.to_string()])
        .stdin(Stdio::null());
    link.prepare(&mut cmd);
    // SAFETY: write(2) and sched_setattr(2) in the forked child: async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(std::io::Error::last_os_error());
            }
            sched::set_current(&dl)
        });
    }
    let child = cmd.spawn().expect("rt task starts under SCHED_DEADLINE");
    RtTask { link, child }
}

/// What a be process tries against the rt partition and its own limits; each line names an
/// attempt and whether the kernel refused it.
const PROBE: &str = r#"
try() { if err=$("$@" 2>&1 >/dev/null); then echo "ALLOWED: $*"; else echo "refused: $* -- $err"; fi; }
try chrt -o -p 0 "$RT"
try chrt -f -p 50 "$RT"
try kill -STOP "$RT"
try chrt -f -p 10 $$
try taskset -p -c 0 $$
try sh -c "echo 0-1 > $CPUSET/cpuset.cpus"
try sh -c "echo 0 > $MEMORY/memory.limit_in_bytes"
try sh -c "echo $$ > $RTDOMAIN/cgroup.procs"
try sh -c "echo $$ > /sys/fs/cgroup/cpuset/cgroup.procs"
grep Cpus_allowed_list /proc/self/status
"#;

#[test]
fn be_hogs_cause_no_rt_miss_and_cannot_touch_the_rt_partition() {
    if !is_root() {
        eprintln!("skipping: needs root");
        return;
    }
    let h = match cpuset::detect() {
        Ok(h @ Hierarchy::V1(_)) => h,
        other => {
            eprintln!("skipping: this test builds the cgroup v1 layout, found {other:?}");
            return;
        }
    };
    if let Err(e) = detect::deadline() {
        eprintln!("skipping: {e}");
        return;
    }
    let lock = fs::File::create("/run/bulkhead-rt-tests.lock").unwrap();
    // SAFETY: flock on an open descriptor.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);

    let name = format!("bulkhead-rt-test-{}", std::process::id());
    // Another bulkhead instance (another test suite running now) may hold CPU 0 in a
    // cpuset for a moment; an exclusive one cannot overlap it. Wait up to 20 s, then skip.
    let rel = Path::new(&format!("{name}-rt")).join("rt");
    let cpu0 = CpuSet::parse("0").unwrap();
    let mut tries = 0;
    let domain = loop {
        match ExclusiveDomain::create(&h, &rel, &cpu0) {
            Err(e) if e.to_string().contains("sibling cpuset") && tries < 200 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) if e.to_string().contains("sibling cpuset") => {
                eprintln!("skipping: another bulkhead instance holds CPU 0: {e}");
                return;
            }
            r => break r.expect("rt domain"),
        }
    };
    let be = BeCgroups::create(&format!("{name}-be"), BE_LIMITS).expect("be cgroups");

    let epoch = now_ns() + 50 * MS;
    let link = |task_index: u32, c: u64, t: u64| {
        TaskLink::create(&LinkSpec {
            name: format!("rt{task_index}"),
            task_index,
            budget_ns: c,
            period_ns: t,
            deadline_ns: t,
            epoch_ns: epoch,
            ring_depth: 4096,
        })
        .unwrap()
    };
    // Generous reservations (C = 20% of T, each job burns a tenth of its budget): on this
    // project's VM (PREEMPT_NONE, no IRQ time accounting) the hogs' kernel work delays a
    // task by up to ~25 ms now and then, which 1-20 ms periods cannot absorb (see
    // docs/rt.md); the 60 s benchmark measures the short periods of DriveOS Table 3.
    let tasks = [
        start_rt(&domain, link(0, 10 * MS, 50 * MS), 1000),
        start_rt(&domain, link(1, 20 * MS, 100 * MS), 2000),
    ];

    let rt_pid = tasks[0].child.id();
    let probe = be
        .spawn(
            Command::new("sh")
                .args(["-c", PROBE])
                .env("RT", rt_pid.to_string())
                .env("CPUSET", be.dir("cpuset").unwrap())
                .env("MEMORY", be.dir("memory").unwrap())
                .env("RTDOMAIN", domain.dir())
                .stdout(Stdio::piped()),
        )
        .expect("probe starts");
    let probe = probe.wait_with_output().unwrap();
    let hog = env!("CARGO_BIN_EXE_bulkhead-hog");
    let mut hogs = Vec::new();
    for args in [
        &["fork"][..],
        &["mem"],
        &["cpu", "--threads", "4"],
        &["io", "--bytes", "1048576"],
    ] {
        hogs.push(be.spawn(Command::new(hog).args(args)).expect("hog starts"));
    }
    // The probe ran before the fork bomb could take the partition's pids (it must fail
    // for want of permission, not of a process slot). Now the hogs run for 10 s (issue 7: "no rt deadline miss in a 10 s run").
    std::thread::sleep(Duration::from_secs(10));

    let failcnt =
        fs::read_to_string(be.dir("memory").unwrap().join("memory.failcnt")).unwrap_or_default();
    let pids_peak =
        fs::read_to_string(be.dir("pids").unwrap().join("pids.current")).unwrap_or_default();
    let rt_policy = sched::get(rt_pid as i32);
    let mut records: Vec<Vec<Record>> = Vec::new();
    for mut t in tasks {
        t.link.request_stop();
        let deadline = Instant::now() + Duration::from_secs(2);
        while t.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut r = Vec::new();
        t.link.drain(&mut r);
        records.push(r);
    }
    drop(be);
    for mut h in hogs {
        let _ = h.wait();
    }
    domain.remove().expect("rt domain removed");

    let out = String::from_utf8_lossy(&probe.stdout);
    eprintln!("probe:\n{out}memory.failcnt {failcnt}pids.current {pids_peak}");
    assert!(
        !out.contains("ALLOWED"),
        "a be process changed what it must not:\n{out}"
    );
    assert_eq!(out.matches("refused").count(), 9, "{out}");
    for line in out.lines().filter(|l| l.starts_with("refused")) {
        let why = ["not permitted", "Permission denied", "Invalid argument"];
        assert!(
            why.iter().any(|w| line.contains(w)),
            "refused for another reason: {line}"
        );
    }
    assert!(out.contains("Cpus_allowed_list:\t1\n"), "{out}");
    assert_eq!(rt_policy.unwrap().name(), "SCHED_DEADLINE");
    assert!(
        failcnt.trim().parse::<u64>().unwrap_or(0) > 0,
        "the memory hog never reached its limit"
    );

    let periods = [50 * MS, 100 * MS];
    for (recs, period) in records.iter().zip(periods) {
        let expected = (10 * 1000 * MS / period) as usize;
        assert!(
            recs.len() * 10 >= expected * 8,
            "{} of ~{expected} activations",
            recs.len()
        );
        let missed: Vec<&Record> = recs
            .iter()
            .filter(|r| r.missed(period) || r.flags & flags::SKIPPED != 0)
            .collect();
        let worst = recs.iter().map(Record::response_ns).max().unwrap_or(0);
        eprintln!(
            "period {period} ns: {} activations, worst response {worst} ns, {} missed",
            recs.len(),
            missed.len()
        );
        for r in missed.iter().take(10) {
            let (late, run) = (r.start_ns - r.release_ns, r.end_ns - r.start_ns);
            eprintln!(
                "  miss: started {late} ns late, ran {run} ns, flags {}",
                r.flags
            );
        }
        assert!(
            missed.is_empty(),
            "deadline misses: {:?}",
            &missed[..missed.len().min(5)]
        );
    }
}
