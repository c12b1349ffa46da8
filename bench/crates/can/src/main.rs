//! The CAN gateway path (virtual bus -> `bulkhead can
//! gateway --role reader` -> fifo channel -> mapper) while best-effort hog processes
//! load every CPU.
//!
//! Two loads: the real RAV4 powertrain log (comma2k19, opendbc) replayed at 1x, and a
//! saturated 500 kbit/s bus (8-byte frames back to back). Two configurations of the
//! same processes: "reserved" (the gateway's reader and writer, the `bulkhead can
//! gateway` program run as bulkhead tasks, each under SCHED_DEADLINE, budget 250 µs
//! every 2 ms; the mapper under its own SCHED_DEADLINE reservation) and the baseline
//! "sched_other" (the same programs, same task links and periods, as SCHED_OTHER
//! processes). This program plays the supervisor: it creates the named channels and
//! the task links, starts the gateway jobs with them and drains their activation
//! records. The bus server and the load generator (the "vehicle") run SCHED_FIFO in
//! both configurations, so the wire is the same.
//!
//! Latency of each frame, from its timestamps:
//! * `t_bus`: the bus's end-of-transmission timestamp (ideal bus time);
//! * `t_deliv`: when a probe node (SCHED_FIFO, blocked in `recv`) receives it, i.e.
//!   when the bus hands it to its nodes' sockets;
//! * the start of the reader job that forwarded it (from the task's records);
//! * `t_map`: when the mapper receives it.
//!
//! Reported: frames sent, received, lost, gateway drops, throughput; bus-to-mapper
//! latency (`t_map - t_bus`, what the first version of this bench measured) and
//! delivery-to-mapper latency (`t_map - t_deliv`, what the gateway is responsible
//! for), median / p99 / max, and the split of the latter into waiting for the next
//! reader job and reader job start to mapper.
//!
//! Usage: `bulkhead-bench-can BULKHEAD LOG [REPLAY_SECONDS] [SATURATE_SECONDS]`; the
//! binary re-executes itself for each role but the gateway's.

use bulkhead_can::bus::CanBus;
use bulkhead_can::candump::{open_log, Reader};
use bulkhead_can::gateway::WIRE_SIZE;
use bulkhead_can::mapper::Mapper;
use bulkhead_can::replay::{replay, Options};
use bulkhead_can::vbus::{Bus, Node};
use bulkhead_can::{CanId, Frame};
use bulkhead_chan::{Channel, Spec};
use bulkhead_task::clock::now_ns;
use bulkhead_task::link::{LinkSpec, TaskLink};
use bulkhead_task::Record;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod driveos;

/// Gateway task period: DriveOS Table 3 gives its CAN mapper tasks in the gateway
/// (C, D) a 2 ms period with a 0.1 ms budget; our jobs make system calls into the
/// virtual bus and the channels, so they get 0.25 ms.
const PERIOD: Duration = Duration::from_millis(2);
const BUDGET: Duration = Duration::from_micros(250);
const BITRATE: u64 = 500_000;
/// Frames one reader job forwards at most: a period's worth at 1 Mbit/s and more.
const MAX_FRAMES: &str = "256";
/// The mapper and the probe stop after this long without a frame.
const IDLE_END: Duration = Duration::from_millis(1500);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let role = args.get(1).map(String::as_str).unwrap_or("");
    match role {
        "bus" => role_bus(&args[2]),
        "probe" => role_probe(&args[2]),
        "mapper" => role_mapper(&args[2], &args[3], args[4] == "reserved"),
        "replay" => role_replay(&args[2], &args[3], args[4].parse().unwrap()),
        "saturate" => role_saturate(&args[2], args[3].parse().unwrap()),
        "hog" => role_hog(),
        "logger" => driveos::role_logger(&args[2], &args[3]),
        "critical" => driveos::role_critical(&args[2], &args[3]),
        "table4" | "fig8" | "fig9" => driveos::orchestrate(&args),
        _ => orchestrate(&args),
    }
}

// ---- scheduling -------------------------------------------------------------

/// `struct sched_attr` of `sched_setattr(2)`.
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

const SCHED_DEADLINE: u32 = 6;

/// Puts the calling thread under SCHED_DEADLINE (runtime `BUDGET`, deadline and
/// period `PERIOD`). One system call, no allocation: usable between fork and exec.
fn set_deadline() -> std::io::Result<()> {
    set_deadline_of(BUDGET, PERIOD)
}

/// Puts the calling thread under SCHED_DEADLINE with `runtime` every `period` (deadline
/// = period). One system call, no allocation: usable between fork and exec.
fn set_deadline_of(runtime: Duration, period: Duration) -> std::io::Result<()> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: SCHED_DEADLINE,
        flags: 0,
        nice: 0,
        priority: 0,
        runtime: runtime.as_nanos() as u64,
        deadline: period.as_nanos() as u64,
        period: period.as_nanos() as u64,
    };
    // SAFETY: sched_setattr(0, attr, 0) reads `size` bytes of a valid, initialized
    // struct that outlives the call; pid 0 is the calling thread.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// [`set_deadline`], retrying for 2 s while admission control refuses (EBUSY: other
/// reservations on this machine use the bandwidth).
fn set_deadline_retrying() -> Result<(), String> {
    set_deadline_of_retrying(BUDGET, PERIOD)
}

/// [`set_deadline_of`], retrying for 2 s while admission control refuses.
fn set_deadline_of_retrying(runtime: Duration, period: Duration) -> Result<(), String> {
    for _ in 0..20 {
        match set_deadline_of(runtime, period) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                thread::sleep(Duration::from_millis(100))
            }
            r => return r.map_err(|e| format!("sched_setattr(SCHED_DEADLINE): {e}")),
        }
    }
    Err("sched_setattr(SCHED_DEADLINE): busy for 2 s".into())
}

/// Puts the calling thread under SCHED_FIFO at `priority`.
fn set_fifo(priority: i32) {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler reads a valid sched_param; pid 0 is this thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        eprintln!("warning: SCHED_FIFO: {}", std::io::Error::last_os_error());
    }
}

fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

// ---- roles ------------------------------------------------------------------

fn role_bus(name: &str) {
    set_fifo(50);
    Bus::bind(name, BITRATE).unwrap().run()
}

/// Prints `{"t_bus": [..], "t_deliv": [..]}`: when each frame reached this node.
fn role_probe(bus_name: &str) {
    set_fifo(45);
    let mut node = Node::attach(bus_name).unwrap();
    let (mut t_bus, mut t_deliv) = (Vec::new(), Vec::new());
    let start = Instant::now();
    let mut last = None;
    loop {
        match node.recv(Some(Duration::from_millis(100))).unwrap() {
            Some(r) => {
                t_deliv.push(now_unix_ns());
                t_bus.push(r.t_ns);
                last = Some(Instant::now());
            }
            None if last.is_some_and(|l| l.elapsed() > IDLE_END) => break,
            None if last.is_none() && start.elapsed() > Duration::from_secs(60) => break,
            None => {}
        }
    }
    println!("{}", json!({"t_bus": t_bus, "t_deliv": t_deliv}));
}

/// Prints `{"received", "missed", "span_s", "t_bus": [..], "t_map": [..], "id": [..]}`.
fn role_mapper(to: &str, from: &str, reserved: bool) {
    if reserved {
        if let Err(e) = set_deadline_retrying() {
            eprintln!("error: {e}");
            std::process::exit(3);
        }
    }
    let to = Channel::open_named(to).unwrap();
    let from = Channel::open_named(from).unwrap();
    let mut mapper = Mapper::new(to.receiver().unwrap(), from.sender().unwrap()).unwrap();
    if reserved {
        mapper.set_spin(0);
    }
    mapper.subscribe_all();
    let (mut t_bus, mut t_map) = (Vec::with_capacity(1 << 16), Vec::with_capacity(1 << 16));
    let mut ids = Vec::with_capacity(1 << 16);
    let (mut first, mut last) = (None, Instant::now());
    let start = Instant::now();
    loop {
        match mapper.recv(Duration::from_millis(100)).unwrap() {
            Some(d) => {
                t_map.push(now_unix_ns());
                t_bus.push(d.t_ns);
                ids.push(driveos::id_word(d.frame.id()));
                last = Instant::now();
                first.get_or_insert(last);
            }
            None if first.is_some() && last.elapsed() > IDLE_END => break,
            None if first.is_none() && start.elapsed() > Duration::from_secs(60) => break,
            None => {}
        }
    }
    let span = first.map_or(0.0, |f| (last - f).as_secs_f64());
    println!(
        "{}",
        json!({"received": t_map.len(), "missed": mapper.missed(), "span_s": span,
               "t_bus": t_bus, "t_map": t_map, "id": ids})
    );
}

fn role_replay(bus_name: &str, log: &str, seconds: f64) {
    set_fifo(40);
    let mut buses: Vec<Box<dyn CanBus>> = vec![Box::new(Node::attach(bus_name).unwrap())];
    // The log's first `seconds`, as a log of its own.
    let input = open_log(std::path::Path::new(log)).unwrap();
    let mut t0 = None;
    let mut excerpt = String::new();
    for record in Reader::new(input).filter_map(Result::ok) {
        if (record.t_ns - *t0.get_or_insert(record.t_ns)) as f64 > seconds * 1e9 {
            break;
        }
        excerpt.push_str(&record.to_string());
        excerpt.push('\n');
    }
    let mut open = || Ok(Box::new(std::io::Cursor::new(excerpt.clone())) as Box<dyn BufRead>);
    let routes = [(Some("can0".to_string()), 0)];
    let stats = replay(&mut open, &mut buses, &routes, &Options::default()).unwrap();
    println!(
        "{}",
        json!({"sent": stats.sent, "max_late_ms": stats.max_late.as_secs_f64() * 1e3})
    );
}

fn role_saturate(bus_name: &str, seconds: f64) {
    set_fifo(40);
    let node = Node::attach(bus_name).unwrap();
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut sent = 0u64;
    while Instant::now() < end {
        let id = CanId::Standard(0x100 + (sent % 0x100) as u16);
        node.send(&Frame::new(id, &sent.to_le_bytes()).unwrap())
            .unwrap();
        sent += 1;
    }
    println!("{}", json!({"sent": sent, "max_late_ms": 0.0}));
}

fn role_hog() {
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

// ---- orchestration ----------------------------------------------------------

/// Child processes killed and reaped on drop; named channels destroyed and scratch
/// directories removed on drop.
struct Cleanup {
    children: Vec<Child>,
    channels: Vec<String>,
    dirs: Vec<std::path::PathBuf>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        // Reverse order: consumers before the bus they are attached to.
        for child in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
        for name in &self.channels {
            if let Ok(c) = Channel::open_named(name) {
                let _ = c.destroy();
            }
        }
        for dir in &self.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn me(args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(args);
    cmd
}

fn spawn(cleanup: &mut Cleanup, args: &[&str]) {
    cleanup
        .children
        .push(me(args).stdout(Stdio::null()).spawn().unwrap());
}

/// A gateway job program (`bulkhead can gateway ...`) run as a task: its link, and
/// its process, reserved with SCHED_DEADLINE or SCHED_OTHER.
fn spawn_gateway(
    cleanup: &mut Cleanup,
    bulkhead: &str,
    args: &[&str],
    name: &str,
    reserved: bool,
) -> TaskLink {
    let link = TaskLink::create(&LinkSpec {
        name: name.into(),
        task_index: 0,
        budget_ns: BUDGET.as_nanos() as u64,
        period_ns: PERIOD.as_nanos() as u64,
        deadline_ns: PERIOD.as_nanos() as u64,
        epoch_ns: now_ns() + 20_000_000,
        ring_depth: 32_768,
    })
    .unwrap();
    for attempt in 0.. {
        let mut cmd = Command::new(bulkhead);
        cmd.args(["can", "gateway"]).args(args);
        cmd.stdout(Stdio::null());
        link.prepare(&mut cmd);
        if reserved {
            // SAFETY: set_deadline makes one system call and allocates nothing:
            // async-signal-safe between fork and exec.
            unsafe { cmd.pre_exec(set_deadline) };
        }
        match cmd.spawn() {
            Ok(child) => {
                cleanup.children.push(child);
                break;
            }
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && attempt < 20 => {
                thread::sleep(Duration::from_millis(100))
            }
            Err(e) => panic!("starting {bulkhead} can gateway: {e}"),
        }
    }
    link
}

fn json_of(child: Child) -> Value {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("null")).unwrap_or(Value::Null)
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// What runs beside the gateway path: `hogs` CPU hogs, and each of `extra`'s roles
/// (arguments of this program; `{dir}` a scratch directory, `{bus}` the bus's name).
struct Background {
    hogs: usize,
    extra: Vec<Vec<String>>,
}

/// One run: load `load` ("replay" or "saturate") with the gateway path `mode`.
fn run(
    bulkhead: &str,
    load: &str,
    mode: &str,
    log: &str,
    seconds: f64,
    background: &Background,
) -> Value {
    run_raw(bulkhead, load, mode, log, seconds, background).0
}

/// [`run`], and what the mapper printed (each frame's timestamps and id).
fn run_raw(
    bulkhead: &str,
    load: &str,
    mode: &str,
    log: &str,
    seconds: f64,
    background: &Background,
) -> (Value, Value) {
    let reserved = mode == "reserved";
    let tag = format!("{}-{load}-{mode}", std::process::id());
    let bus_name = format!("bench-{tag}");
    let (to, from) = (format!("bench-{tag}-to"), format!("bench-{tag}-from"));
    let dir = std::env::temp_dir().join(format!("bh-bench-can-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cleanup = Cleanup {
        children: Vec::new(),
        channels: vec![to.clone(), from.clone()],
        dirs: vec![dir.clone()],
    };
    let _to = Channel::create_named(&Spec::fifo(&to, WIRE_SIZE as u32, 1024)).unwrap();
    let _from = Channel::create_named(&Spec::fifo(&from, WIRE_SIZE as u32, 64)).unwrap();
    spawn(&mut cleanup, &["bus", &bus_name]);
    wait_for_bus(&bus_name);
    let common = ["--bus", &bus_name, "--max-frames", MAX_FRAMES];
    let to_flag = format!("--to=be={to}");
    let reader_args = [&["--role", "reader"], &common[..], &[&to_flag]].concat();
    let mut reader = spawn_gateway(&mut cleanup, bulkhead, &reader_args, "reader", reserved);
    let from_flag = format!("--from=be={from}");
    let writer_args = [
        &["--role", "writer"],
        &common[..],
        &[&from_flag, "--allow=be=0x7DF"],
    ]
    .concat();
    let _writer = spawn_gateway(&mut cleanup, bulkhead, &writer_args, "writer", reserved);
    let mapper = me(&["mapper", &to, &from, mode])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let probe = me(&["probe", &bus_name])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let hogs = background.hogs;
    for _ in 0..hogs {
        spawn(&mut cleanup, &["hog"]);
    }
    let dir_text = dir.display().to_string();
    for role in &background.extra {
        let role: Vec<String> = role
            .iter()
            .map(|a| a.replace("{dir}", &dir_text).replace("{bus}", &bus_name))
            .collect();
        spawn(
            &mut cleanup,
            &role.iter().map(String::as_str).collect::<Vec<_>>(),
        );
    }
    thread::sleep(Duration::from_millis(300));
    let secs = seconds.to_string();
    let load_args: Vec<&str> = match load {
        "replay" => vec!["replay", &bus_name, log, &secs],
        _ => vec!["saturate", &bus_name, &secs],
    };
    let steal_before = steal_ms();
    let started = Instant::now();
    let sender = me(&load_args).stdout(Stdio::piped()).spawn().unwrap();
    let mut jobs: Vec<Record> = Vec::new();
    let (sent, got, probed) = thread::scope(|s| {
        let sent = s.spawn(|| json_of(sender));
        let got = s.spawn(|| json_of(mapper));
        let probed = s.spawn(|| json_of(probe));
        while !got.is_finished() {
            reader.drain(&mut jobs);
            thread::sleep(Duration::from_millis(100));
        }
        let join = |h: thread::ScopedJoinHandle<'_, Value>| h.join().unwrap();
        (join(sent), join(got), join(probed))
    });
    reader.drain(&mut jobs);
    let steal = steal_ms() - steal_before;
    let counters: HashMap<String, u64> = reader.named_counters().into_iter().collect();
    drop(cleanup);
    let mut result = summarize(load, mode, &sent, &got, &probed, &jobs, hogs);
    result["inter_frame_ms"] = driveos::inter_frame(&got);
    result["steal_ms"] = json!(steal);
    result["elapsed_s"] = json!(started.elapsed().as_secs_f64());
    result["gateway_rx_dropped"] = json!(counters.get("be.rx_dropped"));
    result["gateway_rx_forwarded"] = json!(counters.get("be.rx_forwarded"));
    (result, got)
}

/// CPU time stolen by the hypervisor so far, all CPUs (`/proc/stat` `steal`), ms.
fn steal_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: f64 = stat
        .lines()
        .next()
        .and_then(|cpu| cpu.split_whitespace().nth(8))
        .and_then(|t| t.parse().ok())
        .unwrap_or(0.0);
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks * 1e3 / hz
}

/// Hog processes: env `HOGS`, else one per CPU.
fn hog_count() -> usize {
    std::env::var("HOGS")
        .ok()
        .and_then(|h| h.parse().ok())
        .unwrap_or_else(|| thread::available_parallelism().map_or(2, |n| n.get()))
}

fn wait_for_bus(name: &str) {
    let end = Instant::now() + Duration::from_secs(5);
    while Node::attach(name).is_err() {
        assert!(Instant::now() < end, "bus {name} did not start");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Median, p99 and max of `values` (ns) in ms.
fn stats(values: &mut [i64]) -> Value {
    values.sort_unstable();
    let at = |p: f64| {
        if values.is_empty() {
            return f64::NAN;
        }
        let i = ((values.len() - 1) as f64 * p).round() as usize;
        values[i] as f64 / 1e6
    };
    json!({"median": at(0.5), "p99": at(0.99), "max": at(1.0)})
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, ns (the task records are monotonic).
fn realtime_offset() -> i64 {
    now_unix_ns() as i64 - now_ns() as i64
}

fn summarize(
    load: &str,
    mode: &str,
    sent: &Value,
    got: &Value,
    probed: &Value,
    jobs: &[Record],
    hogs: usize,
) -> Value {
    let sent_n = sent["sent"].as_u64().unwrap_or(0);
    let received = got["received"].as_u64().unwrap_or(0);
    let delivered: HashMap<u64, u64> = u64s(&probed["t_bus"])
        .into_iter()
        .zip(u64s(&probed["t_deliv"]))
        .collect();
    let offset = realtime_offset();
    let starts: Vec<(i64, i64)> = jobs
        .iter()
        .map(|r| (r.start_ns as i64 + offset, r.end_ns as i64 + offset))
        .collect();
    let (mut total, mut gateway, mut bus, mut wait, mut forward) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (t_bus, t_map) in u64s(&got["t_bus"]).into_iter().zip(u64s(&got["t_map"])) {
        let (t_bus, t_map) = (t_bus as i64, t_map as i64);
        total.push(t_map - t_bus);
        let Some(&t_deliv) = delivered.get(&(t_bus as u64)) else {
            continue;
        };
        let t_deliv = t_deliv as i64;
        bus.push(t_deliv - t_bus);
        gateway.push(t_map - t_deliv);
        // The reader job that forwarded the frame: the first one to end after the
        // frame reached the bus's sockets and to start before the mapper had it.
        let i = starts.partition_point(|&(_, end)| end < t_deliv);
        if let Some(&(start, _)) = starts.get(i).filter(|&&(start, _)| start <= t_map) {
            wait.push((start - t_deliv).max(0));
            forward.push(t_map - start.max(t_deliv));
        }
    }
    let span = got["span_s"].as_f64().unwrap_or(0.0);
    let mut job_ns: Vec<i64> = jobs
        .iter()
        .map(|r| r.end_ns.saturating_sub(r.start_ns) as i64)
        .collect();
    let late = jobs.iter().filter(|r| r.flags != 0).count();
    json!({
        "load": load, "mode": mode, "hogs": hogs,
        "sent": sent_n, "received": received, "lost": sent_n.saturating_sub(received),
        "missed_at_gateway": got["missed"],
        "throughput_fps": if span > 0.0 { received as f64 / span } else { 0.0 },
        "reader_jobs": jobs.len(),
        "reader_jobs_late": late,
        "reader_job_ms": stats(&mut job_ns),
        "latency_ms": stats(&mut total),
        "delivery_to_mapper_ms": stats(&mut gateway),
        "split_ms": {"bus_timestamp_to_delivery": stats(&mut bus),
                     "delivery_to_reader_job": stats(&mut wait),
                     "reader_job_to_mapper": stats(&mut forward)},
        "replay_max_late_ms": sent["max_late_ms"],
    })
}

fn orchestrate(args: &[String]) {
    let usage = "usage: bulkhead-bench-can BULKHEAD LOG [REPLAY_S] [SATURATE_S]";
    let bulkhead = args.get(1).expect(usage);
    let log = args.get(2).expect(usage);
    let replay_s: f64 = args.get(3).map_or(20.0, |s| s.parse().unwrap());
    let saturate_s: f64 = args.get(4).map_or(10.0, |s| s.parse().unwrap());
    println!(
        "CAN gateway path under {} CPU hogs; gateway period {} ms, budget {} us; bus {} kbit/s",
        hog_count(),
        PERIOD.as_millis(),
        BUDGET.as_micros(),
        BITRATE / 1000
    );
    println!(
        "{:<9} {:<12} {:>6} {:>6} {:>5} {:>7} | {:>17} | {:>17} | {:>11} {:>11} {:>11} {:>6}",
        "load",
        "mode",
        "sent",
        "recv",
        "lost",
        "fps",
        "bus->map med/p99",
        "deliv->map med/p99",
        "bus p99",
        "wait p99",
        "fwd p99",
        "steal"
    );
    let mut results = Vec::new();
    for (load, secs) in [("replay", replay_s), ("saturate", saturate_s)] {
        for mode in ["reserved", "sched_other"] {
            let background = Background {
                hogs: hog_count(),
                extra: Vec::new(),
            };
            let r = run(bulkhead, load, mode, log, secs, &background);
            print_row(&r);
            results.push(r);
        }
    }
    let period_ms = PERIOD.as_secs_f64() * 1e3;
    let p99 = |r: &Value, key: &str| r[key]["p99"].as_f64().unwrap_or(f64::NAN);
    let verdict = |r: &Value| r["lost"] == 0 && p99(r, "delivery_to_mapper_ms") <= 2.0 * period_ms;
    let reserved_sat = &results[2];
    println!(
        "target (0 loss at saturation, p99 delivery-to-mapper <= 2 periods) with reservations: {}",
        if verdict(reserved_sat) {
            "met"
        } else {
            "NOT met"
        }
    );
    let gain = |i: usize| {
        p99(&results[i + 1], "delivery_to_mapper_ms") / p99(&results[i], "delivery_to_mapper_ms")
    };
    println!(
        "p99 delivery-to-mapper baseline / reserved: replay {:.1}x, saturate {:.1}x",
        gain(0),
        gain(2)
    );
    println!(
        "{}",
        json!({"bench": "can", "period_ms": period_ms, "budget_us": BUDGET.as_micros() as u64,
               "runs": results, "target_met_reserved_saturation": verdict(reserved_sat),
               "p99_gain": {"replay": gain(0), "saturate": gain(2)}})
    );
}

fn print_row(r: &Value) {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let pair = |key: &str| format!("{:.3}/{:.3}", f(&r[key]["median"]), f(&r[key]["p99"]));
    let split = |key: &str| f(&r["split_ms"][key]["p99"]);
    let n = |key: &str| r[key].as_u64().unwrap_or(0);
    println!(
        "{:<9} {:<12} {:>6} {:>6} {:>5} {:>7.0} | {:>17} | {:>17} | {:>11.3} {:>11.3} {:>11.3} {:>6.0}",
        r["load"].as_str().unwrap_or(""),
        r["mode"].as_str().unwrap_or(""),
        n("sent"),
        n("received"),
        n("lost"),
        f(&r["throughput_fps"]),
        pair("latency_ms"),
        pair("delivery_to_mapper_ms"),
        split("bus_timestamp_to_delivery"),
        split("delivery_to_reader_job"),
        split("reader_job_to_mapper"),
        f(&r["steal_ms"]),
    );
}
