//! Reservations on real processes of this machine (root, cgroups, SCHED_DEADLINE). Each
//! test skips with a printed reason where a facility is missing. Tests that use cpusets
//! hold a lock file, so they never compete for CPU 0 with each other or with the
//! bulkhead-task tests.

use bulkhead_os::cpuset::{self, CpusetMount, ExclusiveDomain};
use bulkhead_os::sched::detect;
use bulkhead_os::sched::{self, DeadlineParams, Policy};
use bulkhead_runtime::enforce::{cpu_time, monotonic_ns, Budgeted, Enforcer};
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Kills and reaps the child when dropped, so a failing assertion leaks nothing.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Reaped {
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

/// The cpuset hierarchy, with the serializing lock held. The tests that call it are
/// ignored without root; as root, cpusets missing is a failure, not a skip.
fn cpuset_locked() -> (CpusetMount, fs::File) {
    let h = cpuset::detect().unwrap_or_else(|e| panic!("needs root and cpusets: {e}"));
    let lock = bulkhead_os::lock::exclusive_cpus().expect("the lock of the rt test suites");
    (h, lock)
}

/// Fails the test when this process may not use `policy` (`detect::deadline` or
/// `detect::fifo`): the tests that call it run as root, where both must work.
fn require(policy: Result<(), detect::Unavailable>) {
    if let Err(e) = policy {
        panic!("needs root and the policy: {e}");
    }
}

/// Creates an exclusive domain, waiting (up to 20 s) while another bulkhead instance (a
/// benchmark or test suite running now) holds an overlapping cpuset under the same parent.
fn domain(h: &CpusetMount, rel: &Path, cpus: &str) -> bulkhead_os::Result<ExclusiveDomain> {
    for _ in 0..200 {
        match ExclusiveDomain::create(h, rel, cpus) {
            Err(e) if held_by_another_instance(&e.to_string()) => {
                std::thread::sleep(Duration::from_millis(100))
            }
            r => return r,
        }
    }
    ExclusiveDomain::create(h, rel, cpus)
}

/// Whether an overlap error names a sibling that is not one of these tests' cpusets.
fn held_by_another_instance(err: &str) -> bool {
    err.split_once("sibling cpuset(s) ")
        .is_some_and(|(_, culprits)| !culprits.contains("bulkhead-rt-test"))
}

fn unique(name: &str) -> PathBuf {
    PathBuf::from(format!("bulkhead-rt-test-{}-{name}", std::process::id()))
}

/// Spawns `sh -c script` that joins `cgroup` and takes `policy` before it execs.
fn spawn_sh(cgroup: &Path, policy: Policy, script: &str) -> std::io::Result<Reaped> {
    let procs = fs::OpenOptions::new()
        .write(true)
        .open(cgroup.join("cgroup.procs"))?;
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]).stdin(Stdio::null());
    let fd = procs.as_raw_fd();
    // SAFETY: the closure runs in the forked child and only makes system calls on
    // descriptors and stack data: async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(std::io::Error::last_os_error());
            }
            sched::set_current(&policy)
        });
    }
    let child = cmd.spawn()?;
    drop(procs);
    Ok(Reaped(child))
}

/// Spawns `sleep 60` that joins `cgroup` and takes `policy` before it execs.
fn spawn_in(cgroup: &Path, policy: Policy) -> std::io::Result<Reaped> {
    spawn_sh(cgroup, policy, "exec sleep 60")
}

/// Waits (up to 5 s) until process `pid` runs `comm`.
fn wait_for_exec(pid: i32, comm: &str) {
    for _ in 0..500 {
        let now = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if now.trim() == comm {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("process {pid} never became `{comm}`");
}

fn chrt(pid: i32) -> String {
    let out = Command::new("chrt")
        .arg("-p")
        .arg(pid.to_string())
        .output()
        .expect("chrt runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn root_load_balance(h: &CpusetMount) -> String {
    fs::read_to_string(h.mount().join("cpuset.sched_load_balance"))
        .unwrap_or_default()
        .trim()
        .into()
}

fn leftovers(h: &CpusetMount) -> Vec<String> {
    let me = format!("bulkhead-rt-test-{}", std::process::id());
    fs::read_dir(h.mount())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&me))
        .collect()
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn deadline_task_in_an_exclusive_domain_shows_its_reservation() {
    let (h, _lock) = cpuset_locked();
    require(detect::deadline());
    let lb_before = root_load_balance(&h);
    let cpu0 = "0";
    let domain = match domain(&h, &unique("dl").join("rt"), cpu0) {
        // A skip, not a failure: a benchmark or another suite running bulkhead on this
        // machine may hold CPU 0 for longer than `domain` waits.
        Err(e) if held_by_another_instance(&e.to_string()) => {
            eprintln!("skipping: another bulkhead instance holds CPU 0: {e}");
            return;
        }
        r => r.expect("exclusive domain on CPU 0"),
    };
    let dl = DeadlineParams::new(100_000, 900_000, 1_000_000).unwrap();
    // The shell forks a child first (allowed: reset-on-fork), then becomes `sleep`.
    let script = "sh -c 'exit 0' && exec sleep 60";
    let child = spawn_sh(domain.dir(), Policy::Deadline(dl), script)
        .expect("task starts under SCHED_DEADLINE");
    let pid = child.pid();
    wait_for_exec(pid, "sleep");

    let shown = chrt(pid);
    assert!(shown.contains("SCHED_DEADLINE"), "{shown}");
    assert!(shown.contains("100000/900000/1000000"), "{shown}");
    let proc = sched::proc_sched(pid).unwrap();
    assert_eq!((proc.policy, proc.prio), (6, -1), "{proc:?}");
    assert!(proc.dl_runtime.is_some_and(|r| r <= 100_000), "{proc:?}");
    assert_eq!(sched::get(pid).unwrap(), Policy::Deadline(dl));
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("Cpus_allowed_list:\t0\n"), "{status}");
    assert_eq!(domain.processes().unwrap(), vec![pid]);

    domain
        .remove()
        .expect("removal kills the task and undoes everything");
    assert!(leftovers(&h).is_empty(), "{:?}", leftovers(&h));
    assert_eq!(root_load_balance(&h), lb_before);
    drop(child);
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn deadline_needs_the_root_domain() {
    let (h, _lock) = cpuset_locked();
    require(detect::deadline());
    // A root CI machine may have only cgroup v2 (bulkhead supports it); this test is
    // about the v1 layout.
    if !matches!(h, CpusetMount::V1(_)) {
        eprintln!("skipping deadline_needs_the_root_domain: written for the v1 cpuset layout");
        return;
    }
    // A plain (non-exclusive) cpuset on CPU 0 is not a root domain: the kernel refuses.
    let dir = h.mount().join(unique("plain"));
    fs::create_dir(&dir).unwrap();
    let cleanup = Cleanup(dir.clone());
    fs::write(dir.join("cpuset.cpus"), "0").unwrap();
    fs::write(
        dir.join("cpuset.mems"),
        fs::read_to_string(h.mount().join("cpuset.mems")).unwrap(),
    )
    .unwrap();
    let child = spawn_in(&dir, Policy::Other { nice: 0 }).unwrap();
    let dl = Policy::Deadline(DeadlineParams::new(100_000, 1_000_000, 1_000_000).unwrap());
    let err = sched::set(child.pid(), &dl).unwrap_err();
    assert_eq!(err.errno(), Some(libc::EPERM));
    assert!(err.to_string().contains("exclusive cpuset"), "{err}");
    drop(child);
    drop(cleanup);
}

/// Two hogs killed together: killing the lower-priority one first would hang, as it never
/// gets the CPU to die while the higher one runs.
struct Both(Reaped, Reaped);

impl Drop for Both {
    fn drop(&mut self) {
        let _ = self.0 .0.kill();
        let _ = self.1 .0.kill();
    }
}

/// Removes a cgroup directory (after its processes are gone) when dropped.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for _ in 0..200 {
            if fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn overlapping_exclusive_domains_are_refused_with_the_culprit() {
    let (h, _lock) = cpuset_locked();
    let cpu0 = "0";
    let first = match domain(&h, &unique("a"), cpu0) {
        // A skip, not a failure: a benchmark or another suite running bulkhead on this
        // machine may hold CPU 0 for longer than `domain` waits.
        Err(e) if held_by_another_instance(&e.to_string()) => {
            eprintln!("skipping: another bulkhead instance holds CPU 0: {e}");
            return;
        }
        r => r.expect("first domain"),
    };
    let err = ExclusiveDomain::create(&h, &unique("b"), cpu0)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&unique("a").display().to_string()), "{err}");
    assert!(err.contains("exclusive"), "{err}");
    // The failed creation left nothing behind.
    assert_eq!(leftovers(&h), vec![unique("a").display().to_string()]);
    first.remove().unwrap();
    assert!(leftovers(&h).is_empty());
}

#[test]
#[ignore = "needs root: SCHED_FIFO"]
fn fifo_priority_shows_in_chrt_and_proc() {
    require(detect::fifo());
    let child = Reaped(Command::new("sleep").arg("60").spawn().unwrap());
    sched::set_process(child.pid(), &Policy::Fifo { priority: 42 }).unwrap();
    let shown = chrt(child.pid());
    assert!(
        shown.contains("SCHED_FIFO|SCHED_RESET_ON_FORK") || shown.contains("SCHED_FIFO"),
        "{shown}"
    );
    assert!(shown.contains("priority: 42"), "{shown}");
    let proc = sched::proc_sched(child.pid()).unwrap();
    assert_eq!((proc.policy, proc.prio), (1, 99 - 42));
}

/// Two SCHED_FIFO busy loops share CPU 1: priority 20 with a 2 ms budget every 10 ms,
/// and priority 10 without a budget. Without enforcement the higher one would take the
/// whole CPU (up to the kernel's global RT throttling) and starve the lower one; with it, it
/// gets about its 20% at FIFO priority (then SCHED_IDLE, which never beats a FIFO task; it
/// may still get the 5% the kernel keeps from real-time tasks),
/// and the lower-priority task gets the rest.
#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn enforcer_holds_a_fifo_hog_to_its_budget() {
    let (_h, _lock) = cpuset_locked();
    require(detect::fifo());
    let hog = |fifo: Option<u32>| {
        let mut cmd = Command::new("taskset");
        cmd.args(["-c", "1", "sh", "-c", "while :; do :; done"]);
        let child = Reaped(cmd.spawn().unwrap());
        std::thread::sleep(Duration::from_millis(20)); // let taskset exec the shell
        if let Some(priority) = fifo {
            sched::set_process(child.pid(), &Policy::Fifo { priority }).unwrap();
        }
        child
    };
    let hogs = Both(hog(Some(20)), hog(Some(10)));
    let (rt, low) = (&hogs.0, &hogs.1);
    let task = Budgeted {
        pid: rt.pid(),
        priority: 20,
        budget: 2_000_000,
        period: 10_000_000,
        first_release: monotonic_ns(),
    };
    let enforcer = Enforcer::start(Some(1), vec![task]).expect("enforcer starts");
    // Measure from now: until the enforcer runs (late on a loaded machine) the hog is free.
    let t0 = monotonic_ns();
    let (rt0, low0) = (cpu_time(rt.pid()).unwrap(), cpu_time(low.pid()).unwrap());
    std::thread::sleep(Duration::from_millis(600));
    let elapsed = (monotonic_ns() - t0) as f64;
    let rt_share = (cpu_time(rt.pid()).unwrap() - rt0) as f64 / elapsed;
    let low_share = (cpu_time(low.pid()).unwrap() - low0) as f64 / elapsed;
    let stats = enforcer.stop();
    let rt_policy = sched::get(rt.pid());
    drop(hogs);
    eprintln!("budgeted share {rt_share:.2}, lower-priority share {low_share:.2}, {stats:?}");
    assert!(
        rt_share > 0.1 && rt_share < 0.4,
        "the budgeted task got {rt_share:.2}"
    );
    assert!(
        low_share > 0.5,
        "the lower-priority task got {low_share:.2}"
    );
    assert!(
        stats[0].throttled >= 30 && stats[0].periods >= 50,
        "{stats:?}"
    );
    // Enforcement ended with the task at its priority again.
    assert_eq!(rt_policy.unwrap(), Policy::Fifo { priority: 20 });
}

/// A shield moves the top cpuset's processes off CPU 0; one whose owner died (simulated by
/// forgetting it and registering a dead owner) is released by `release_stale_shields`:
/// its processes return to the top cpuset and its cpuset disappears.
#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn a_dead_supervisors_shield_is_released() {
    let (h, _lock) = cpuset_locked();
    // A root CI machine may have only cgroup v2, where there is no shield.
    if !matches!(h, CpusetMount::V1(_)) {
        eprintln!("skipping: the shield is cgroup v1 only");
        return;
    }
    let sleeper = Reaped(Command::new("sleep").arg("60").spawn().unwrap());
    let name = unique("shield").display().to_string();
    let (shield, moved) = cpuset::Shield::create(&h, &name, "1").unwrap();
    assert!(moved >= 1);
    let dir = h.mount().join(&name);
    let inside = fs::read_to_string(dir.join("cgroup.procs")).unwrap();
    assert!(
        inside.lines().any(|p| p == sleeper.pid().to_string()),
        "{inside}"
    );
    std::mem::forget(shield);
    fs::write(format!("/run/bulkhead-shields/{name}"), "4194305 0").unwrap();
    let released = cpuset::release_stale_shields(h.mount());
    assert!(released.contains(&name), "{released:?}");
    assert!(!dir.exists());
    let top = fs::read_to_string(h.mount().join("cgroup.procs")).unwrap();
    assert!(top.lines().any(|p| p == sleeper.pid().to_string()));
    assert!(!Path::new(&format!("/run/bulkhead-shields/{name}")).exists());
}
