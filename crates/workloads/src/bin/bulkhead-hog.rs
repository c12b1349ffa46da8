//! `bulkhead-hog cpu [--threads N] | mem [--bytes N] | fork | io [--dir D] [--bytes N] |
//! can --bus BUS --id ID [--every-us N] [--count N]`: a best-effort hog that runs until
//! killed (see the bulkhead-workloads crate docs); `can` with `--count` ends after that
//! many frames and prints `sent N`. Exit 2 on bad arguments, 1 if the hog fails.

use std::process::ExitCode;

fn usage(msg: &str) -> ExitCode {
    eprintln!("bulkhead-hog: {msg}");
    eprintln!(
        "usage: bulkhead-hog cpu [--threads N] | mem [--bytes N] | fork | io [--dir D] [--bytes N] \
         | can --bus BUS --id ID [--every-us N] [--count N]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(kind) = args.first() else {
        return usage("which hog? cpu, mem, fork, io or can");
    };
    let mut threads = 1u32;
    let mut bytes: Option<u64> = None;
    let mut dir = std::env::temp_dir();
    let (mut bus, mut id) = (None, None);
    let (mut every, mut count) = (None, None);
    let mut rest = args[1..].iter();
    while let Some(flag) = rest.next() {
        let Some(value) = rest.next() else {
            return usage(&format!("{flag} needs a value"));
        };
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: `{value}` is not a non-negative integer"))
        };
        match (kind.as_str(), flag.as_str()) {
            ("cpu", "--threads") => match number() {
                Ok(n) if n > 0 && n <= 1024 => threads = n as u32,
                Ok(_) => return usage("--threads must be in 1..=1024"),
                Err(e) => return usage(&e),
            },
            ("mem" | "io", "--bytes") => match number() {
                Ok(n) => bytes = Some(n),
                Err(e) => return usage(&e),
            },
            ("io", "--dir") => dir = value.into(),
            ("can", "--bus") => bus = Some(value.clone()),
            ("can", "--id") => match bulkhead_gateway_protocol::parse_ids(value).as_deref() {
                Ok([one]) => id = Some(*one),
                _ => return usage(&format!("--id: `{value}` is not one CAN id")),
            },
            ("can", "--every-us") => match number() {
                Ok(n) => every = Some(std::time::Duration::from_micros(n)),
                Err(e) => return usage(&e),
            },
            ("can", "--count") => match number() {
                Ok(n) => count = Some(n),
                Err(e) => return usage(&e),
            },
            _ => return usage(&format!("`{flag}` is not an option of `{kind}`")),
        }
    }
    match kind.as_str() {
        "cpu" => bulkhead_workloads::cpu(threads),
        "mem" => bulkhead_workloads::memory(bytes),
        "fork" => bulkhead_workloads::fork(),
        "io" => match bulkhead_workloads::io(&dir, bytes.unwrap_or(4 << 20) as usize) {
            Err(e) => {
                eprintln!("bulkhead-hog: io in {}: {e}", dir.display());
                ExitCode::from(1)
            }
        },
        "can" => {
            let (Some(bus), Some(id)) = (bus, id) else {
                return usage("can needs --bus BUS and --id ID");
            };
            match bulkhead_workloads::can(&bus, id, every, count) {
                Ok(sent) => {
                    println!("sent {sent}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("bulkhead-hog: can: {e}");
                    ExitCode::from(1)
                }
            }
        }
        other => usage(&format!("unknown hog `{other}`")),
    }
}
