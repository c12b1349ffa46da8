//! DriveOS (Jadhav et al., "DriveOS: A Vehicle Management System", 2023) Sec. 7.2-7.3
//! on the gateway path of this bench: Table 4 (the delay between consecutive CAN
//! frames, all frames and per CAN id, at the source and where the Linux side receives
//! them), Fig. 8 (the Linux side's throughput against the number of background
//! processes that log the frames and copy their logs) and Fig. 9 (the throughput
//! against the number of time-critical processes, C = 20 us every T = 20 ms, that
//! read from and write to the bus). Each for the gateway path reserved (as bulkhead
//! runs it) and as SCHED_OTHER processes (plain Linux), in one invocation.
//!
//! Usage: `bulkhead-bench-can table4 BULKHEAD LOG SECONDS`,
//! `bulkhead-bench-can fig8|fig9 BULKHEAD LOG SECONDS N,N,...`. Last line: one JSON
//! object.

use super::{run, run_raw, set_deadline_of_retrying, u64s, Background};
use bulkhead_can::vbus::Node;
use bulkhead_can::{CanId, Frame};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{Seek, Write};
use std::time::{Duration, Instant};

/// The critical processes' reservation (DriveOS 7.3.1: C = 20 us, T = 20 ms).
const CRITICAL_BUDGET: Duration = Duration::from_micros(20);
const CRITICAL_PERIOD: Duration = Duration::from_millis(20);
/// The critical processes' CAN id; the load's are 0x100..=0x1FF.
const CRITICAL_ID: u16 = 0x010;
/// Frames a logger writes before it syncs its log, copies it and starts it anew.
const LOG_BATCH: u32 = 1000;

/// A CAN id as one number (extended ids with bit 31 set).
pub fn id_word(id: CanId) -> u32 {
    match id {
        CanId::Standard(v) => u32::from(v),
        CanId::Extended(v) => v | 1 << 31,
    }
}

/// A background process of DriveOS 7.3: receives every frame of the bus, appends it to
/// a log file in `dir`, and every `LOG_BATCH` frames syncs the log, copies it ("make
/// copies of data for safety") and starts it anew. Runs until killed.
pub fn role_logger(bus: &str, dir: &str) {
    let mut node = Node::attach(bus).unwrap();
    let path = std::path::Path::new(dir).join(format!("log-{}", std::process::id()));
    let mut file = std::fs::File::create(&path).unwrap();
    let mut n = 0u32;
    loop {
        let Some(r) = node.recv(Some(Duration::from_millis(100))).unwrap() else {
            continue;
        };
        writeln!(file, "{} {:?}", r.t_ns, r.frame).unwrap();
        n += 1;
        if n.is_multiple_of(LOG_BATCH) {
            file.sync_data().unwrap();
            std::fs::copy(&path, path.with_extension("copy")).unwrap();
            file.set_len(0).unwrap();
            file.rewind().unwrap();
        }
    }
}

/// A time-critical process of DriveOS 7.3.1 under SCHED_DEADLINE (20 us every 20 ms):
/// each period it reads the frames that reached it and writes one (id `CRITICAL_ID`, which
/// wins arbitration over the load's), for `seconds`.
pub fn role_critical(bus: &str, seconds: &str) {
    let end = Instant::now() + Duration::from_secs_f64(seconds.parse().unwrap());
    if let Err(e) = set_deadline_of_retrying(CRITICAL_BUDGET, CRITICAL_PERIOD) {
        eprintln!("error: {e}");
        std::process::exit(3);
    }
    let mut node = Node::attach(bus).unwrap();
    let frame = Frame::new(CanId::Standard(CRITICAL_ID), &[0; 8]).unwrap();
    while Instant::now() < end {
        while node.recv(Some(Duration::ZERO)).unwrap().is_some() {}
        node.send(&frame).unwrap();
        // SAFETY: sched_yield has no arguments; under SCHED_DEADLINE it ends this job.
        unsafe { libc::sched_yield() };
    }
}

/// The mean delay between consecutive frames, all frames and per CAN id (mean over every
/// pair of consecutive frames of one id), ms, at the source (the bus's timestamps) and
/// at the mapper (when it received them); and the p99 and max of the latter.
pub fn inter_frame(got: &Value) -> Value {
    let ids = u64s(&got["id"]);
    let at = |key: &str| u64s(&got[key]);
    let (t_bus, t_map) = (at("t_bus"), at("t_map"));
    let of = |times: &[u64]| {
        let raw: Vec<u64> = times
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .collect();
        let mut last: HashMap<u64, u64> = HashMap::new();
        let mut same = Vec::new();
        for (&id, &t) in ids.iter().zip(times) {
            if let Some(prev) = last.insert(id, t) {
                same.push(t.saturating_sub(prev));
            }
        }
        let mut sorted = raw.clone();
        sorted.sort_unstable();
        let q = |p: f64| {
            sorted
                .get(((sorted.len().max(1) - 1) as f64 * p).round() as usize)
                .map_or(0.0, |&v| v as f64 / 1e6)
        };
        json!({"raw_mean": mean_ms(&raw), "per_id_mean": mean_ms(&same),
               "raw_p99": q(0.99), "raw_max": q(1.0), "frames": times.len(),
               "ids": last.len()})
    };
    json!({"source": of(&t_bus), "received": of(&t_map)})
}

fn mean_ms(v: &[u64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e6
}

/// The load's frames (ids 0x100..=0x1FF, not the critical processes') the mapper
/// received, and their rate from the first to the last of them, frames/s.
fn load_received(got: &Value) -> (u64, f64) {
    let times: Vec<u64> = u64s(&got["id"])
        .into_iter()
        .zip(u64s(&got["t_map"]))
        .filter(|(id, _)| (0x100..=0x1FF).contains(id))
        .map(|(_, t)| t)
        .collect();
    let n = times.len() as u64;
    let span = match (times.first(), times.last()) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
        _ => return (n, 0.0),
    };
    (n, n as f64 / span)
}

/// Runs `table4`, `fig8` or `fig9` and prints its figures.
pub fn orchestrate(args: &[String]) {
    let usage = "usage: bulkhead-bench-can table4|fig8|fig9 BULKHEAD LOG SECONDS [N,N,...]";
    let (what, bulkhead, log) = (
        &args[1],
        args.get(2).expect(usage),
        args.get(3).expect(usage),
    );
    let seconds: f64 = args.get(4).expect(usage).parse().expect(usage);
    let counts: Vec<usize> = args
        .get(5)
        .map(|c| c.split(',').map(|n| n.parse().expect(usage)).collect())
        .unwrap_or_default();
    let mut rows = Vec::new();
    if what == "table4" {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        for mode in ["reserved", "sched_other"] {
            let background = Background {
                hogs: cpus,
                extra: Vec::new(),
            };
            let r = run(bulkhead, "replay", mode, log, seconds, &background);
            println!("table4 {mode}: {}", r["inter_frame_ms"]);
            rows.push(json!({"mode": mode, "inter_frame_ms": r["inter_frame_ms"],
                             "lost": r["lost"], "received": r["received"]}));
        }
    } else {
        let role = if what == "fig8" { "logger" } else { "critical" };
        for &n in &counts {
            for mode in ["reserved", "sched_other"] {
                let last = if role == "logger" {
                    "{dir}".to_string()
                } else {
                    (seconds + 1.0).to_string()
                };
                let extra = vec![vec![role.to_string(), "{bus}".to_string(), last]; n];
                let background = Background { hogs: 0, extra };
                let started = Instant::now();
                let (r, got) = run_raw(bulkhead, "saturate", mode, log, seconds, &background);
                let (received, fps) = load_received(&got);
                let sent = r["sent"].as_u64().unwrap_or(0);
                println!(
                    "{what} {role}s {n:>2} {mode:<11}: {fps:>7.0} frames/s at the mapper, {} lost \
                     of {sent} ({:.0} s)",
                    sent.saturating_sub(received),
                    started.elapsed().as_secs_f64()
                );
                rows.push(json!({"mode": mode, "processes": n,
                                 "throughput_fps": fps, "sent": sent,
                                 "received": received, "lost": sent.saturating_sub(received),
                                 "delivery_to_mapper_ms": r["delivery_to_mapper_ms"]}));
            }
        }
    }
    println!(
        "{}",
        json!({"bench": format!("can-driveos-{what}"), "seconds": seconds, "rows": rows})
    );
}
