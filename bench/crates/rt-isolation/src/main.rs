//! The experiment of DriveOS section 7.2 and Boomerang section IV on Linux: the Quest
//! real-time tasks of DriveOS Table 3 (A-H) run as an rt partition on CPU 0 (SCHED_DEADLINE
//! reservations (C, T, T); `--scheduler fixed-priority`: SCHED_FIFO at their rate-monotonic
//! priorities with budget enforcement, as Quest's RMS Main VCPUs), shielded (every other
//! process moved off CPU 0; `BULKHEAD_NO_SHIELD=1` keeps them), while
//! a be partition on CPU 1 (cpuset, 512 MiB, pids.max 256, uid nobody) runs 20 hogs (CPU,
//! memory, I/O, fork). Each task burns half its budget per activation. Baseline, in the same
//! invocation: the same task programs as SCHED_OTHER processes on both CPUs, with the same
//! hogs, also on both CPUs (the fork hogs stay bounded by a pids cgroup).
//!
//! Housekeeping isolation (on unless `--no-housekeeping`): for the bulkhead run, IRQs,
//! unbound workqueues and unbound kthreads leave CPU 0 (`bulkhead_runtime::housekeeping`),
//! and so does this supervisor. `--misses FILE` writes every missed job (CLOCK_MONOTONIC
//! release, start, end) to lay beside a kernel trace (`trace-cpu0.sh` in this crate);
//! `--no-baseline` skips the baseline; `--reclaim` gives the partition `reclaim: true`
//! (SCHED_FLAG_RECLAIM, GRUB bandwidth reclaiming; edf only).
//!
//! `bulkhead-bench-rt-isolation [--duration SECONDS] [--hogs N] [--scheduler S]
//! [--no-housekeeping] [--reclaim] [--no-baseline] [--misses FILE]` (root).
//! Prints a table per run and, last, one JSON object. The analytic WCRT is the analysis's:
//! response-time analysis for fixed priority, the deadline for EDF (CBS guarantee).

use bulkhead_model::{CpuSet, System};
use bulkhead_plan::{Host, Programs};
use bulkhead_runtime::housekeeping::Housekeeping;
use bulkhead_runtime::tasks::{Epoch, RtOptions, RtPartitions};
use bulkhead_task::clock::now_ns;
use bulkhead_task::link::{LinkSpec, TaskLink};
use bulkhead_task::Record;
use bulkhead_trace::{Event, EventKind};
use bulkhead_workloads::be::{BeCgroups, BeLimits};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// DriveOS Table 3, Quest: (ID, task, budget µs, period µs).
const TABLE3: [(&str, &str, u64, u64); 8] = [
    ("A", "usb_bh", 100, 1000),
    ("B", "mhydra_rx", 200, 1000),
    ("C", "ivi_read_mapper", 100, 2000),
    ("D", "ivi_write_mapper", 100, 2000),
    ("E", "adas_read_mapper", 100, 2000),
    ("F", "adas_write_mapper", 100, 2000),
    ("G", "long_controller", 50, 1000),
    ("H", "mhydra_tx", 200, 1000),
];

struct Figures {
    name: String,
    wcrt_ns: Option<u64>,
    jobs: u64,
    max_response_ns: u64,
    misses: u64,
    /// Records lost to a full trace ring (jobs not counted).
    dropped: u64,
}

/// Command-line options.
struct Options {
    duration: u64,
    hogs: usize,
    scheduler: String,
    baseline: bool,
    housekeeping: bool,
    reclaim: bool,
    misses: Option<PathBuf>,
}

const USAGE: &str = "usage: bulkhead-bench-rt-isolation [--duration SECONDS] [--hogs N] \
     [--scheduler edf|fixed-priority] [--no-housekeeping] [--reclaim] [--no-baseline] [--misses FILE]";

fn parse_args() -> Options {
    let mut o = Options {
        duration: 60,
        hogs: 20,
        scheduler: "edf".into(),
        baseline: true,
        housekeeping: true,
        reclaim: false,
        misses: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let ok = match a.as_str() {
            "--no-baseline" => {
                o.baseline = false;
                true
            }
            "--no-housekeeping" => {
                o.housekeeping = false;
                true
            }
            "--reclaim" => {
                o.reclaim = true;
                true
            }
            _ => {
                let raw = args.next().unwrap_or_default();
                let v = raw.parse::<u64>().ok().filter(|v| *v > 0);
                match (a.as_str(), v) {
                    ("--duration", Some(s)) => {
                        o.duration = s;
                        true
                    }
                    ("--hogs", Some(n)) => {
                        o.hogs = n as usize;
                        true
                    }
                    ("--scheduler", _) if raw == "edf" || raw == "fixed-priority" => {
                        o.scheduler = raw;
                        true
                    }
                    ("--misses", _) if !raw.is_empty() => {
                        o.misses = Some(PathBuf::from(raw));
                        true
                    }
                    _ => false,
                }
            }
        };
        if !ok {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    }
    if o.reclaim && o.scheduler != "edf" {
        eprintln!("--reclaim needs --scheduler edf (SCHED_FLAG_RECLAIM is a SCHED_DEADLINE flag)");
        std::process::exit(2);
    }
    o
}

fn main() {
    let o = parse_args();
    let (duration, hogs, scheduler) = (o.duration, o.hogs, o.scheduler.clone());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("{{\"error\": \"needs root (cgroups, SCHED_FIFO)\"}}");
        std::process::exit(1);
    }
    let bin = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let system = quest_system(&bin.join("bulkhead-periodic"), &scheduler, o.reclaim);
    let report = match bulkhead_runtime::tasks::admit_here(&system) {
        Ok((r, _)) => r,
        Err(e) => {
            println!("{{\"error\": {e:?}}}");
            std::process::exit(1);
        }
    };
    let wcrt = |name: &str| {
        report
            .tasks
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.wcrt_ns)
    };
    let hog = bin.join("bulkhead-hog");
    let secs = Duration::from_secs(duration);

    let policy = if scheduler == "edf" {
        "SCHED_DEADLINE"
    } else {
        "SCHED_FIFO, RM, enforced"
    };
    println!("bulkhead: Table 3 tasks A-H on CPU 0 ({policy}), {hogs} hogs on CPU 1, {duration} s");
    for line in Housekeeping::restore_stale() {
        eprintln!("leftover of a killed run: {line}");
    }
    let rt_cpus = CpuSet::parse("0").expect("cpulist");
    let isolation = o.housekeeping.then(|| isolate(&rt_cpus));
    let mut misses = MissLog::default();
    let steal = cpu0_steal_ms();
    let mut reserved = run_bulkhead(&system, &hog, hogs, secs, &mut misses);
    let steal_ms = cpu0_steal_ms() - steal;
    drop(isolation);
    if let Some(path) = &o.misses {
        if let Err(e) = std::fs::write(path, &misses.lines) {
            eprintln!("writing {}: {e}", path.display());
        }
    }
    let mut baseline = Vec::new();
    if o.baseline {
        println!(
            "baseline: the same tasks SCHED_OTHER on CPUs 0-1 with the {hogs} hogs, {duration} s"
        );
        baseline = run_baseline(&system, &hog, hogs, secs);
    }
    for f in reserved.iter_mut().chain(baseline.iter_mut()) {
        f.wcrt_ns = wcrt(&f.name);
    }
    print_table("bulkhead", &reserved);
    print_table("baseline", &baseline);
    println!("bulkhead run: CPU 0 steal time {steal_ms} ms (/proc/stat, 10 ms resolution)");
    let run = Run {
        scheduler: &scheduler,
        duration,
        hogs,
        housekeeping: o.housekeeping,
        reclaim: o.reclaim,
        steal_ms,
    };
    println!("{}", json(&run, &reserved, &baseline));
}

/// Housekeeping isolation of the rt CPUs for the bulkhead run: IRQs, unbound workqueues
/// and kthreads moved off them (`bulkhead_runtime::housekeeping`), and this supervisor
/// itself (its drain loop ran on CPU 0 for up to 2 ms, not preemptible, in traces).
/// Dropping it undoes both.
struct Isolation {
    _housekeeping: Option<Housekeeping>,
    own_affinity: Option<libc::cpu_set_t>,
}

fn isolate(rt_cpus: &CpuSet) -> Isolation {
    let hk = match Housekeeping::isolate(rt_cpus) {
        Ok(hk) => {
            println!(
                "housekeeping: {} settings moved off CPUs {rt_cpus}",
                hk.changed().len()
            );
            for w in hk.warnings() {
                println!("  {w}");
            }
            Some(hk)
        }
        Err(e) => {
            println!("housekeeping: not isolated: {e}");
            None
        }
    };
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills at most its size.
    let mut own: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `own` is a valid cpu_set_t of `size` bytes.
    let saved = unsafe { libc::sched_getaffinity(0, size, &mut own) } == 0;
    let mut rest = own;
    for c in rt_cpus.iter() {
        // SAFETY: CPU_CLR writes inside `rest` (the model's CPUs are below CPU_SETSIZE).
        unsafe { libc::CPU_CLR(c as usize, &mut rest) };
    }
    // SAFETY: `rest` is a valid cpu_set_t of `size` bytes; pid 0 is this thread, the only
    // one of the process at this point (children inherit it; cpusets reset theirs).
    let pinned = saved && unsafe { libc::sched_setaffinity(0, size, &rest) } == 0;
    Isolation {
        _housekeeping: hk,
        own_affinity: pinned.then_some(own),
    }
}

impl Drop for Isolation {
    fn drop(&mut self) {
        if let Some(own) = &self.own_affinity {
            // SAFETY: `own` is the cpu_set_t saved by `isolate`.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(own), own) };
        }
    }
}

/// CPU 0's steal time so far, ms (the `steal` column of /proc/stat, in USER_HZ ticks).
fn cpu0_steal_ms() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks = stat
        .lines()
        .find(|l| l.starts_with("cpu0 "))
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks * 1000 / hz
}

fn quest_system(periodic: &Path, scheduler: &str, reclaim: bool) -> System {
    let mut yaml = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: quest\n    kind: rt\n    cpus: 0\n    scheduler: {scheduler}\n    reclaim: {reclaim}\n    tasks:\n",
    );
    for (_, name, c, t) in TABLE3 {
        let exec = c / 2;
        let _ = writeln!(
            yaml,
            "      - {{name: {name}, cmd: {} --exec-us {exec}, budget: {c}us, period: {t}us}}",
            periodic.display()
        );
    }
    bulkhead_model::load_str(&yaml, "quest.yaml")
        .expect("valid")
        .system
}

/// The hog command lines: mostly CPU, then memory, I/O and two fork bombs.
fn hog_args(i: usize) -> Vec<&'static str> {
    match i % 10 {
        0 => vec!["mem", "--bytes", "33554432"],
        1 => vec!["io", "--bytes", "1048576"],
        9 if i < 20 => vec!["fork"],
        _ => vec!["cpu"],
    }
}

fn start_hogs(be: &BeCgroups, hog: &Path, n: usize) -> Vec<Child> {
    (0..n)
        .filter_map(|i| {
            let mut cmd = Command::new(hog);
            cmd.args(hog_args(i))
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            be.spawn(&mut cmd).ok()
        })
        .collect()
}

/// The missed jobs of the bulkhead run, one line each, CLOCK_MONOTONIC ns:
/// `task job release start end` (start and end `-` for a skipped release), to lay beside a
/// kernel trace; first, a `# task NAME PID` line per task.
#[derive(Default)]
struct MissLog {
    epoch_ns: u64,
    /// Per task: the last job released and its release and start times.
    current: HashMap<String, (u64, u64, u64)>,
    /// Jobs of which a miss was reported and whose completion is awaited.
    missed: HashMap<String, u64>,
    lines: String,
}

impl MissLog {
    fn record(&mut self, e: &Event) {
        let t = self.epoch_ns + e.t_ns;
        match &e.kind {
            EventKind::JobRelease { task, job, .. } => {
                self.current.insert(task.to_string(), (*job, t, 0));
            }
            EventKind::JobStart { task, job, .. } => {
                if let Some(c) = self.current.get_mut(&**task).filter(|c| c.0 == *job) {
                    c.2 = t;
                }
            }
            EventKind::DeadlineMiss {
                task,
                job,
                deadline_ns,
                ..
            } => match self.current.get(&**task).filter(|c| c.0 == *job) {
                Some(_) => {
                    self.missed.insert(task.to_string(), *job);
                }
                None => {
                    let _ = writeln!(
                        self.lines,
                        "{task} {job} {} - - skipped",
                        self.epoch_ns + deadline_ns
                    );
                }
            },
            EventKind::JobComplete { task, job, .. } if self.missed.get(&**task) == Some(job) => {
                self.missed.remove(&**task);
                let (_, release, start) = self.current[&**task];
                let _ = writeln!(self.lines, "{task} {job} {release} {start} {t} late");
            }
            _ => {}
        }
    }
}

fn run_bulkhead(
    system: &System,
    hog: &Path,
    hogs: usize,
    secs: Duration,
    misses: &mut MissLog,
) -> Vec<Figures> {
    let name = format!("bulkhead-bench-rt-{}", std::process::id());
    let be = BeCgroups::create(
        &format!("{name}-be"),
        BeLimits {
            cpus: Some("1"),
            memory: Some(512 << 20),
            pids_max: 256,
        },
    )
    .expect("be cgroups");
    let mut children = start_hogs(&be, hog, hogs);
    let options = RtOptions {
        instance: PathBuf::from(format!("{name}-rt")),
        // Release 0 once every task has attached, and 200 ms later: room to open the
        // gates and for a reservation to repay its start-up (docs/rt.md).
        epoch: Epoch {
            after_attach_ns: 200_000_000,
            grid_ns: 1,
            attach_within: Duration::from_secs(5),
        },
        workdir: std::env::temp_dir(),
        programs: Programs::resolve(system, &Host::current(&std::env::temp_dir()))
            .expect("the tasks' programs exist"),
        ring_depth: 16384,
        shield: std::env::var_os("BULKHEAD_NO_SHIELD").is_none(),
    };
    let mut rt = RtPartitions::start(system, &options).expect("rt partition starts");
    misses.epoch_ns = rt.epoch_ns();
    let end = Instant::now() + secs + Duration::from_secs(1);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        rt.drain(&mut |e| misses.record(&e));
    }
    let summary = rt.stop(&mut |e| misses.record(&e));
    // Which pid is which task, for the trace classifier.
    let pids: String = summary
        .iter()
        .map(|s| format!("# task {} {}\n", s.task, s.pid))
        .collect();
    misses.lines.insert_str(0, &pids);
    drop(be);
    for c in &mut children {
        let _ = c.wait();
    }
    summary
        .into_iter()
        .map(|s| Figures {
            name: s.task,
            wcrt_ns: None,
            jobs: s.jobs,
            max_response_ns: s.max_response_ns,
            misses: s.misses,
            dropped: s.dropped,
        })
        .collect()
}

fn run_baseline(system: &System, hog: &Path, hogs: usize, secs: Duration) -> Vec<Figures> {
    let name = format!("bulkhead-bench-rt-{}-baseline", std::process::id());
    let be = BeCgroups::create(
        &name,
        BeLimits {
            cpus: None,
            memory: None,
            pids_max: 256,
        },
    )
    .expect("pids cgroup");
    let mut children = start_hogs(&be, hog, hogs);
    let epoch = now_ns() + 100_000_000;
    let mut tasks: Vec<(TaskLink, Child, Figures)> = Vec::new();
    for (i, t) in system.partitions[0].tasks.iter().enumerate() {
        let link = TaskLink::create(&LinkSpec {
            name: t.name.clone(),
            task_index: i as u32,
            budget_ns: t.budget,
            period_ns: t.period,
            deadline_ns: t.deadline,
            epoch_ns: epoch,
            ring_depth: 16384,
        })
        .expect("task link");
        let mut words = t.cmd.split_whitespace();
        let mut cmd = Command::new(words.next().unwrap());
        cmd.args(words).stdin(Stdio::null());
        link.prepare(&mut cmd);
        let child = cmd.spawn().expect("task starts");
        let f = Figures {
            name: t.name.clone(),
            wcrt_ns: None,
            jobs: 0,
            max_response_ns: 0,
            misses: 0,
            dropped: 0,
        };
        tasks.push((link, child, f));
    }
    let end = Instant::now() + secs + Duration::from_millis(100);
    let mut recs: Vec<Record> = Vec::new();
    let mut tally = |tasks: &mut Vec<(TaskLink, Child, Figures)>| {
        for (link, _, f) in tasks.iter_mut() {
            recs.clear();
            link.drain(&mut recs);
            let d = link.spec().deadline_ns;
            for r in &recs {
                f.jobs += 1;
                f.misses += r.missed(d) as u64 + r.skipped as u64;
                f.max_response_ns = f.max_response_ns.max(r.response_ns());
            }
        }
    };
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        tally(&mut tasks);
    }
    for (link, _, _) in &tasks {
        link.request_stop();
    }
    std::thread::sleep(Duration::from_millis(50));
    for (_, child, _) in tasks.iter_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
    tally(&mut tasks);
    drop(be);
    for c in &mut children {
        let _ = c.wait();
    }
    tasks
        .into_iter()
        .map(|(link, _, f)| Figures {
            dropped: link.counters().dropped,
            ..f
        })
        .collect()
}

fn print_table(run: &str, figs: &[Figures]) {
    if figs.is_empty() {
        return;
    }
    println!(
        "{run:<9} {:<18} {:>8} {:>12} {:>12} {:>7} {:>7}",
        "task", "jobs", "max resp us", "WCRT us", "misses", "dropped"
    );
    for f in figs {
        let wcrt = f
            .wcrt_ns
            .map_or("-".to_string(), |w| format!("{:.1}", w as f64 / 1000.0));
        println!(
            "{run:<9} {:<18} {:>8} {:>12.1} {:>12} {:>7} {:>7}",
            f.name,
            f.jobs,
            f.max_response_ns as f64 / 1000.0,
            wcrt,
            f.misses,
            f.dropped
        );
    }
}

/// What the JSON line says about the invocation.
struct Run<'a> {
    scheduler: &'a str,
    duration: u64,
    hogs: usize,
    housekeeping: bool,
    reclaim: bool,
    steal_ms: u64,
}

fn json(run: &Run, reserved: &[Figures], baseline: &[Figures]) -> String {
    let tasks = |figs: &[Figures]| {
        let items: Vec<String> = figs
            .iter()
            .map(|f| {
                format!(
                    "{{\"task\":\"{}\",\"jobs\":{},\"max_response_ns\":{},\"wcrt_ns\":{},\"misses\":{},\"dropped\":{}}}",
                    f.name,
                    f.jobs,
                    f.max_response_ns,
                    f.wcrt_ns.map_or("null".into(), |w| w.to_string()),
                    f.misses,
                    f.dropped
                )
            })
            .collect();
        format!("[{}]", items.join(","))
    };
    let total = |figs: &[Figures]| figs.iter().map(|f| f.misses).sum::<u64>();
    // A task that reported no job (it failed to start) or lost records proves nothing.
    let within = reserved
        .iter()
        .all(|f| f.jobs > 0 && f.dropped == 0 && f.wcrt_ns.is_some_and(|w| f.max_response_ns <= w));
    let Run {
        scheduler,
        duration,
        hogs,
        housekeeping,
        reclaim,
        steal_ms,
    } = run;
    format!(
        "{{\"bench\":\"rt-isolation\",\"scheduler\":\"{scheduler}\",\"duration_s\":{duration},\"hogs\":{hogs},\"bulkhead\":{{\"housekeeping\":{housekeeping},\"reclaim\":{reclaim},\"cpu0_steal_ms\":{steal_ms},\"misses\":{},\"max_response_within_wcrt\":{within},\"tasks\":{}}},\"baseline\":{{\"misses\":{},\"tasks\":{}}}}}",
        total(reserved),
        tasks(reserved),
        total(baseline),
        tasks(baseline)
    )
}
