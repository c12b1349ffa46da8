//! `bulkhead-probe OUT [YIELD_MS]`: a test program that observes how it is
//! scheduled. It spins and, about every 200 µs of its own CPU time, appends a line
//! `<monotonic ns> <own CPU ns> <allowed CPUs>` to OUT. With YIELD_MS it calls the
//! client library's `completed()` after each YIELD_MS of CPU time and appends
//! `yield <monotonic ns>` before and `resumed <monotonic ns>` after the call.
//! An `init: true` process first calls `initialization_completed()` and appends
//! `init <monotonic ns>`.
use bulkhead_os::clock::{now_ns, process_cpu_ns};
use bulkhead_os::sched::own_cpus;
use std::fs::OpenOptions;
use std::io::Write;

fn allowed_cpus() -> String {
    let cpus: Vec<String> = own_cpus().iter().map(u32::to_string).collect();
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
        writeln!(file, "init {}", now_ns()).unwrap();
    }
    let mut since_yield = process_cpu_ns();
    loop {
        let start = process_cpu_ns();
        while process_cpu_ns() - start < 200_000 {}
        let cpu = process_cpu_ns();
        writeln!(file, "{} {} {}", now_ns(), cpu, allowed_cpus()).unwrap();
        if let Some(y) = yield_ns {
            if cpu - since_yield >= y {
                writeln!(file, "yield {}", now_ns()).unwrap();
                complete();
                writeln!(file, "resumed {}", now_ns()).unwrap();
                since_yield = process_cpu_ns();
            }
        }
    }
}

/// Signals completion and waits to be scheduled again; exits quietly when the
/// supervisor hung up the channel (the run is over: it is being killed).
fn complete() {
    match bulkhead_client::completed() {
        Ok(()) => {}
        Err(bulkhead_client::Error::Io(e)) if e == libc::ECONNRESET || e == libc::EPIPE => {
            std::process::exit(0)
        }
        Err(e) => panic!("completed: {e:?}"),
    }
}
