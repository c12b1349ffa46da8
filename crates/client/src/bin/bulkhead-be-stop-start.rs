//! A best-effort program that follows stop-start (docs/stop-start.md): it appends one
//! line per stop-start event to the file OUT, and at each resume says whether an input
//! it took at its start is still fresh (never, after a resume) and whether one taken
//! now is. Exit 2 with a message when not run by `bulkhead run` with stop-start.

use bulkhead_client::stop_start::{monotonic_ns, Event, StopStart};
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(out) = std::env::args_os().nth(1) else {
        eprintln!("usage: bulkhead-be-stop-start OUT");
        return ExitCode::from(2);
    };
    let ss = match StopStart::open() {
        Ok(ss) => ss,
        Err(e) => {
            eprintln!("bulkhead-be-stop-start: {e}");
            return ExitCode::from(2);
        }
    };
    let input = monotonic_ns();
    if let Err(e) = append(&out, "started") {
        eprintln!("bulkhead-be-stop-start: {e}");
        return ExitCode::from(1);
    }
    loop {
        let Some(event) = ss.wait_event(None) else {
            continue;
        };
        let line = match event {
            Event::Suspending { seq, .. } => format!("suspending seq={seq}"),
            Event::Resumed {
                seq, suspended_ns, ..
            } => format!(
                "resumed seq={seq} suspended_ns={suspended_ns} old_input_fresh={} new_input_fresh={} stale_dropped={}",
                ss.fresh(input),
                ss.fresh(monotonic_ns()),
                ss.stale_dropped()
            ),
        };
        if let Err(e) = append(&out, &line) {
            eprintln!("bulkhead-be-stop-start: {e}");
            return ExitCode::from(1);
        }
    }
}

fn append(path: &std::ffi::OsStr, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(f, "{line}")
}
