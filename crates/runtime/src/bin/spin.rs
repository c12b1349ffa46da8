//! `bulkhead-spin [--gaps TAG] [WORK]`: a CPU-bound test program. Without WORK it spins
//! forever; with WORK it does WORK million iterations of a fixed integer computation,
//! prints the wall time it took in nanoseconds, and exits (the fixed-work program of the
//! window-switch benchmark).
//!
//! With `--gaps TAG` it reads CLOCK_MONOTONIC every [`CHUNK`] iterations while it works
//! and, before its wall time, prints one line `gap TAG START END` (ns on CLOCK_MONOTONIC)
//! for each interval longer than [`MIN_GAP_NS`] in which it did not run: START its last
//! reading before, END its first after. Two such spins alternating in windows tell when
//! one stopped and the other resumed, on the clock both read: the CPU time a window
//! switch takes from the work (bench/window-switch).
use bulkhead_os::clock::now_ns;
use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

/// Iterations between two clock readings (about 0.1 µs of work on this machine).
const CHUNK: u64 = 128;
/// Shorter intervals (an interrupt, a tick) are not reported.
const MIN_GAP_NS: u64 = 10_000;

fn work(iterations: u64) -> u64 {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..iterations {
        x = black_box(x ^ (x << 13) ^ (x >> 7) ^ i);
    }
    x
}

/// `work(iterations)` in chunks, with the intervals it did not run: (start, end) ns.
fn work_with_gaps(iterations: u64) -> Vec<(u64, u64)> {
    let mut gaps = Vec::new();
    let mut last = now_ns();
    for _ in 0..iterations.div_ceil(CHUNK) {
        black_box(work(CHUNK));
        let now = now_ns();
        if now - last > MIN_GAP_NS {
            gaps.push((last, now));
        }
        last = now;
    }
    gaps
}

/// One write per line, so that the lines of two spins sharing a pipe never mix (a write
/// of less than PIPE_BUF bytes to a pipe is atomic).
fn print_gaps(tag: &str, gaps: &[(u64, u64)]) {
    let mut out = std::io::stdout().lock();
    for (start, end) in gaps {
        let _ = out.write_all(format!("gap {tag} {start} {end}\n").as_bytes());
        let _ = out.flush();
    }
}

fn main() -> std::process::ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let tag = (args.first().map(String::as_str) == Some("--gaps") && args.len() > 1)
        .then(|| args.drain(..2).nth(1).unwrap_or_default());
    let Some(arg) = args.first() else {
        loop {
            black_box(work(1_000_000));
        }
    };
    let (Ok(millions), 1) = (arg.parse::<u64>(), args.len()) else {
        eprintln!("usage: bulkhead-spin [--gaps TAG] [MILLION_ITERATIONS]");
        return 2.into();
    };
    let start = Instant::now();
    match &tag {
        Some(tag) => print_gaps(tag, &work_with_gaps(millions * 1_000_000)),
        None => {
            black_box(work(millions * 1_000_000));
        }
    }
    println!("{}", start.elapsed().as_nanos());
    0.into()
}
