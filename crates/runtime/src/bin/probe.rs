//! `bulkhead-probe OUT [YIELD_MS]`: a test program that observes how it is
//! scheduled. It spins and, about every 200 µs of its own CPU time, appends a line
//! `<monotonic ns> <own CPU ns> <allowed CPUs>` to OUT. With YIELD_MS it calls the
//! client library's `completed()` after each YIELD_MS of CPU time and appends
//! `yield <monotonic ns>` before and `resumed <monotonic ns>` after the call.
//! An `init: true` process first calls `initialization_completed()` and appends
//! `init <monotonic ns>`.
use std::fs::OpenOptions;
use std::io::Write;

fn clock(id: libc::clockid_t) -> u64 {
    bulkhead_task::clock::read_ns(id).unwrap_or(0)
}

fn allowed_cpus() -> String {
    // SAFETY: a zeroed cpu_set_t is valid for sched_getaffinity to fill.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    // SAFETY: reads the set filled above.
    let cpus: Vec<String> = (0..64)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c.to_string())
        .collect();
    cpus.join(",")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let out = args.next().expect("usage: bulkhead-probe OUT [YIELD_MS]");
    let yield_ns = args
        .next()
        .map(|ms| ms.parse::<u64>().expect("YIELD_MS") * 1_000_000);
    // One write per line: a probe frozen or killed when its run ends never leaves half a
    // line (`writeln!` on a bare file writes a line in pieces; CI once read a sample
    // without its CPUs).
    let mut file = std::io::LineWriter::new(
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out)
            .expect("open OUT"),
    );
    // The descriptors it inherited (this file's and the directory listing's aside).
    for entry in std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .flatten()
    {
        let target = std::fs::read_link(entry.path())
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        if !target.ends_with(out.as_str()) && !target.contains("/fd") {
            writeln!(
                file,
                "fd {} {}",
                entry.file_name().to_string_lossy(),
                target
            )
            .unwrap();
        }
    }
    if bulkhead_client::initialization_pending().unwrap_or(false) {
        bulkhead_client::initialization_completed().expect("initialization_completed");
        writeln!(file, "init {}", clock(libc::CLOCK_MONOTONIC)).unwrap();
    }
    let mut since_yield = clock(libc::CLOCK_PROCESS_CPUTIME_ID);
    loop {
        let start = clock(libc::CLOCK_PROCESS_CPUTIME_ID);
        while clock(libc::CLOCK_PROCESS_CPUTIME_ID) - start < 200_000 {}
        let cpu = clock(libc::CLOCK_PROCESS_CPUTIME_ID);
        writeln!(
            file,
            "{} {} {}",
            clock(libc::CLOCK_MONOTONIC),
            cpu,
            allowed_cpus()
        )
        .unwrap();
        if let Some(y) = yield_ns {
            if cpu - since_yield >= y {
                writeln!(file, "yield {}", clock(libc::CLOCK_MONOTONIC)).unwrap();
                bulkhead_client::completed().expect("completed");
                writeln!(file, "resumed {}", clock(libc::CLOCK_MONOTONIC)).unwrap();
                since_yield = clock(libc::CLOCK_PROCESS_CPUTIME_ID);
            }
        }
    }
}
