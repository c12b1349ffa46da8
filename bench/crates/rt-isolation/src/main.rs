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
//! `bulkhead-bench-rt-isolation [--duration SECONDS] [--hogs N] [--scheduler S]` (root).
//! Prints a table per run and, last, one JSON object. The analytic WCRT is the analysis's:
//! response-time analysis for fixed priority, the deadline for EDF (CBS guarantee).

use bulkhead_model::System;
use bulkhead_reserve::partition::{admit, RtOptions, RtPartitions};
use bulkhead_task::clock::now_ns;
use bulkhead_task::supervisor::{LinkSpec, TaskLink};
use bulkhead_task::Record;
use bulkhead_workloads::be::{BeCgroups, BeLimits};
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
}

fn main() {
    let mut duration = 60u64;
    let mut hogs = 20usize;
    let mut scheduler = "edf".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let raw = args.next().unwrap_or_default();
        let v = raw.parse::<u64>().ok();
        match (a.as_str(), v) {
            ("--duration", Some(s)) if s > 0 => duration = s,
            ("--hogs", Some(n)) if n > 0 => hogs = n as usize,
            ("--scheduler", _) if raw == "edf" || raw == "fixed-priority" => scheduler = raw,
            _ => {
                eprintln!("usage: bulkhead-bench-rt-isolation [--duration SECONDS] [--hogs N] [--scheduler edf|fixed-priority]");
                std::process::exit(2);
            }
        }
    }
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
    let system = quest_system(&bin.join("bulkhead-periodic"), &scheduler);
    let report = match admit(&system) {
        Ok(r) => r,
        Err(e) => {
            println!("{{\"error\": {:?}}}", e.to_string());
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
    let mut reserved = run_bulkhead(&system, &hog, hogs, secs);
    println!("baseline: the same tasks SCHED_OTHER on CPUs 0-1 with the {hogs} hogs, {duration} s");
    let mut baseline = run_baseline(&system, &hog, hogs, secs);
    for f in reserved.iter_mut().chain(baseline.iter_mut()) {
        f.wcrt_ns = wcrt(&f.name);
    }
    print_table("bulkhead", &reserved);
    print_table("baseline", &baseline);
    println!("{}", json(&scheduler, duration, hogs, &reserved, &baseline));
}

fn quest_system(periodic: &Path, scheduler: &str) -> System {
    let mut yaml = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: quest\n    kind: rt\n    cpus: 0\n    scheduler: {scheduler}\n    tasks:\n",
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

fn run_bulkhead(system: &System, hog: &Path, hogs: usize, secs: Duration) -> Vec<Figures> {
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
        epoch_ns: now_ns() + 100_000_000,
        workdir: std::env::temp_dir(),
        ring_depth: 16384,
        shield: std::env::var_os("BULKHEAD_NO_SHIELD").is_none(),
    };
    let mut rt = RtPartitions::start(system, &options).expect("rt partition starts");
    let end = Instant::now() + secs + Duration::from_millis(100);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        rt.drain(&mut |_| {});
    }
    let summary = rt.stop(&mut |_| {});
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
    tasks.into_iter().map(|(_, _, f)| f).collect()
}

fn print_table(run: &str, figs: &[Figures]) {
    println!(
        "{run:<9} {:<18} {:>8} {:>12} {:>12} {:>7}",
        "task", "jobs", "max resp us", "WCRT us", "misses"
    );
    for f in figs {
        let wcrt = f
            .wcrt_ns
            .map_or("-".to_string(), |w| format!("{:.1}", w as f64 / 1000.0));
        println!(
            "{run:<9} {:<18} {:>8} {:>12.1} {:>12} {:>7}",
            f.name,
            f.jobs,
            f.max_response_ns as f64 / 1000.0,
            wcrt,
            f.misses
        );
    }
}

fn json(
    scheduler: &str,
    duration: u64,
    hogs: usize,
    reserved: &[Figures],
    baseline: &[Figures],
) -> String {
    let tasks = |figs: &[Figures]| {
        let items: Vec<String> = figs
            .iter()
            .map(|f| {
                format!(
                    "{{\"task\":\"{}\",\"jobs\":{},\"max_response_ns\":{},\"wcrt_ns\":{},\"misses\":{}}}",
                    f.name,
                    f.jobs,
                    f.max_response_ns,
                    f.wcrt_ns.map_or("null".into(), |w| w.to_string()),
                    f.misses
                )
            })
            .collect();
        format!("[{}]", items.join(","))
    };
    let total = |figs: &[Figures]| figs.iter().map(|f| f.misses).sum::<u64>();
    let within = reserved
        .iter()
        .all(|f| f.wcrt_ns.is_some_and(|w| f.max_response_ns <= w));
    format!(
        "{{\"bench\":\"rt-isolation\",\"scheduler\":\"{scheduler}\",\"duration_s\":{duration},\"hogs\":{hogs},\"bulkhead\":{{\"misses\":{},\"max_response_within_wcrt\":{within},\"tasks\":{}}},\"baseline\":{{\"misses\":{},\"tasks\":{}}}}}",
        total(reserved),
        tasks(reserved),
        total(baseline),
        tasks(baseline)
    )
}
