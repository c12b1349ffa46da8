//! The background load of DriveOS 7.2: best-effort threads that log to disk and send
//! over loopback, as a car's third-party applications do (section 7.1: "tasks in
//! Linux that log data in the eMMC storage and periodically send data over the
//! network"). Each thread works for its share of every 10 ms (CPU time of the thread,
//! so system calls count) and sleeps for the rest; half of them write log lines to a
//! file of their own (fdatasync every 256 KiB, the file cut back at 16 MiB), half send
//! 1 KiB datagrams to themselves over 127.0.0.1. Once a second the process prints the
//! CPU it used (`load: ...`).

use bulkhead_task::clock::{now_ns, read_ns, sleep_until, thread_cpu_ns};
use std::io::Write;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

const PERIOD_NS: u64 = 10_000_000;

/// Runs `threads` threads that together keep `share` of `cpus` CPUs busy, writing
/// their logs into `dir` (the caller removes it), until killed.
pub fn run(threads: usize, share: f64, cpus: usize, dir: &Path) -> Result<(), String> {
    let slice_ns = (share * cpus as f64 / threads as f64 * PERIOD_NS as f64) as u64;
    let work = Arc::new(AtomicU64::new(0));
    for i in 0..threads {
        let work = work.clone();
        let path = dir.join(format!("bh-vehicle-load-{}-{i}.log", std::process::id()));
        let sender = i % 2 == 1;
        std::thread::spawn(move || {
            let result = match sender {
                true => send_loop(slice_ns, &work),
                false => log_loop(slice_ns, &path, &work),
            };
            if let Err(e) = result {
                eprintln!("load: thread {i}: {e}");
            }
        });
    }
    let ticks = process_cpu_ns();
    let mut last = (now_ns(), ticks);
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let (t, cpu) = (now_ns(), process_cpu_ns());
        println!(
            "load: {threads} threads, {:.2} CPUs busy (asked {:.2}), {} MiB written and sent",
            (cpu - last.1) as f64 / (t - last.0) as f64,
            share * cpus as f64,
            work.load(Relaxed) >> 20
        );
        last = (t, cpu);
    }
}

/// Every period: work `slice_ns` of this thread's CPU time with `unit`, then sleep.
fn periodic(slice_ns: u64, mut unit: impl FnMut() -> std::io::Result<()>) -> std::io::Result<()> {
    let mut next = now_ns();
    loop {
        let start = thread_cpu_ns();
        while thread_cpu_ns() - start < slice_ns {
            unit()?;
        }
        next += PERIOD_NS;
        let now = now_ns();
        if next < now {
            next = now; // behind (the CPU was taken): no catching up
        }
        sleep_until(next);
    }
}

fn log_loop(slice_ns: u64, path: &PathBuf, work: &AtomicU64) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut f = std::fs::File::create(path).map_err(err)?;
    let (mut written, mut n) = (0u64, 0u64);
    let mut line = Vec::with_capacity(4096);
    periodic(slice_ns, || {
        line.clear();
        while line.len() < 4000 {
            n += 1;
            writeln!(line, "{} seq={n} speed=72.00 status=ok", now_ns())?;
        }
        f.write_all(&line)?;
        written += line.len() as u64;
        work.fetch_add(line.len() as u64, Relaxed);
        if written % (256 << 10) < line.len() as u64 {
            f.sync_data()?;
        }
        if written >= 16 << 20 {
            f.set_len(0)?;
            use std::io::Seek;
            f.seek(std::io::SeekFrom::Start(0))?;
            written = 0;
        }
        Ok(())
    })
    .map_err(err)
}

fn send_loop(slice_ns: u64, work: &AtomicU64) -> Result<(), String> {
    let err = |e: std::io::Error| format!("loopback: {e}");
    let s = UdpSocket::bind("127.0.0.1:0").map_err(err)?;
    s.connect(s.local_addr().map_err(err)?).map_err(err)?;
    let (out, mut back) = ([7u8; 1024], [0u8; 1024]);
    periodic(slice_ns, || {
        s.send(&out)?;
        s.recv(&mut back)?;
        work.fetch_add(out.len() as u64, Relaxed);
        Ok(())
    })
    .map_err(err)
}

fn process_cpu_ns() -> u64 {
    read_ns(libc::CLOCK_PROCESS_CPUTIME_ID).unwrap_or(0)
}
