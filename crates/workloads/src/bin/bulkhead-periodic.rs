//! A periodic real-time task for experiments: each activation burns a configurable
//! amount of CPU time, through the bulkhead task library.
//!
//! `bulkhead-periodic [--exec-us N] [--activations N]`: N µs of CPU time per activation
//! (default: the task's budget minus 10%); stop after N activations (default: when the
//! supervisor asks). It runs the same code in every mode: a mode request (docs/modes.md)
//! is acknowledged as soon as it arrives, also while the task waits for its next release. Exit 0 when done or asked to stop, 1 if not attached, 2 on bad flags.

use bulkhead_task::{clock, Error, Task};
use std::process::ExitCode;

struct Args {
    exec_us: Option<u64>,
    activations: Option<u64>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
        exec_us: None,
        activations: None,
    };
    while let Some(flag) = args.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            let v = args.next().ok_or_else(|| format!("{name} needs a value"))?;
            v.parse()
                .map_err(|_| format!("{name}: `{v}` is not a non-negative integer"))
        };
        match flag.as_str() {
            "--exec-us" => out.exec_us = Some(value("--exec-us")?),
            "--activations" => out.activations = Some(value("--activations")?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(out)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("bulkhead-periodic: {msg}");
            }
            eprintln!("usage: bulkhead-periodic [--exec-us N] [--activations N]");
            return ExitCode::from(if msg.is_empty() { 0 } else { 2 });
        }
    };
    let mut task = match Task::attach() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bulkhead-periodic: {e}");
            return ExitCode::from(1);
        }
    };
    task.ack_modes_at_once();
    let exec_ns = args
        .exec_us
        .map_or(task.params().budget_ns / 10 * 9, |us| us * 1000);
    let mut done = 0u64;
    while args.activations.is_none_or(|n| done < n) {
        match task.wait_next_period() {
            Ok(_) => clock::burn_cpu(exec_ns),
            Err(Error::Stopped) => break,
            Err(e) => {
                eprintln!("bulkhead-periodic: {e}");
                return ExitCode::from(1);
            }
        }
        done += 1;
    }
    task.complete();
    ExitCode::SUCCESS
}
