//! `bulkhead ctl`: talk to a running system through its control socket (docs/control.md).

use crate::common::positive_duration;
use crate::fail::{error_line, fail, INVALID};
use crate::out::{out, outln};
use bulkhead_control::{
    discover, Client, ModeOutcome, PowerOutcome, Request, Response, Status, WindowsStatus,
    SOCKET_DIR,
};
use bulkhead_model::units::{format_duration, format_size};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 when the system did what was asked; 1 when no system runs at the \
socket, the request was refused or failed; 2 on a usage error.\nSee docs/control.md for the protocol."
)]
pub struct Args {
    /// Control socket of the system [default: the only socket in /run/bulkhead]
    #[arg(long, value_name = "PATH", global = true)]
    control: Option<PathBuf>,
    /// The system named NAME (its description's file name without extension): /run/bulkhead/NAME.sock
    #[arg(long, value_name = "NAME", global = true, conflicts_with = "control", value_parser = system_name)]
    system: Option<String>,
    /// Print the reply as one JSON object
    #[arg(long, global = true)]
    json: bool,
    /// How long to wait for the reply, e.g. 500ms or 30s
    #[arg(allow_hyphen_values = true, long, value_name = "DURATION", global = true, default_value = "10s", value_parser = positive_duration)]
    timeout: Duration,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Partitions, tasks with their reservations, the current mode, channels with their counters
    Status,
    /// Switch to mode NAME; prints the outcome and the timing of each step
    Mode {
        /// The mode to switch to
        name: String,
    },
    /// Suspend the whole system (stop-start)
    Suspend,
    /// Resume a suspended system
    Resume,
}

/// A system's name as `run` makes it (`bulkhead_control::default_path`): 1 to 255 of
/// `A-Z a-z 0-9 - _ .`, not `.` or `..`, so that it names a socket in /run/bulkhead
/// and nothing elsewhere.
fn system_name(text: &str) -> Result<String, String> {
    let ok = (1..=255).contains(&text.len())
        && text != "."
        && text != ".."
        && bulkhead_os::name::safe_name(text) == text;
    match ok {
        true => Ok(text.to_string()),
        false => Err(
            "want 1 to 255 of A-Z a-z 0-9 - _ . (the description's file name without extension)"
                .into(),
        ),
    }
}

pub fn run(args: Args) -> ExitCode {
    match exchange(&args) {
        Ok(reply) => show(&args, &reply),
        Err(message) => fail(message),
    }
}

/// The socket to use: `--control`, `--system`, or the only one running.
fn socket(args: &Args) -> Result<PathBuf, String> {
    match (&args.control, &args.system) {
        (Some(path), _) => Ok(path.clone()),
        (None, Some(name)) => Ok(Path::new(SOCKET_DIR).join(format!("{name}.sock"))),
        (None, None) => discover(Path::new(SOCKET_DIR)).map_err(|e| e.to_string()),
    }
}

fn exchange(args: &Args) -> Result<Response, String> {
    let path = socket(args)?;
    let request = match &args.command {
        Command::Status => Request::Status,
        Command::Mode { name } => Request::Mode { name: name.clone() },
        Command::Suspend => Request::Suspend,
        Command::Resume => Request::Resume,
    };
    let mut client = Client::connect(&path).map_err(|e| e.to_string())?;
    client
        .request(request, args.timeout)
        .map_err(|e| e.to_string())
}

fn show(args: &Args, reply: &Response) -> ExitCode {
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(reply).expect("a reply serializes")
        );
    } else if let Some(e) = &reply.error {
        error_line(format!("{}: {}", e.code.name(), e.message));
    } else if let Some(s) = &reply.status {
        out!("{}", status_text(s));
    } else if let Some(m) = &reply.mode {
        out!("{}", mode_text(m));
    } else if let Some(p) = &reply.power {
        out!("{}", power_text(p));
    }
    if reply.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(INVALID)
    }
}

fn status_text(s: &Status) -> String {
    let mode = match (&s.mode, &s.switching_to) {
        (Some(m), Some(to)) => format!(", mode {m} (switching to {to})"),
        (Some(m), None) => format!(", mode {m}"),
        _ => String::new(),
    };
    let mut out = format!(
        "system {} (pid {}): {} for {}{mode}\n",
        s.system,
        s.pid,
        s.state,
        format_duration(s.uptime_ns)
    );
    for p in &s.partitions {
        let interface = p.interface.map_or(String::new(), |i| {
            format!(
                ", interface {} every {}",
                format_duration(i.budget_ns),
                format_duration(i.period_ns)
            )
        });
        let memory = p.memory.map_or(String::new(), |m| {
            format!(
                ", memory {} of {} ({}%)",
                mebibytes(m.used_bytes),
                format_size(m.limit_bytes),
                m.used_bytes.saturating_mul(100) / m.limit_bytes.max(1)
            )
        });
        out += &format!(
            "partition {} ({}, CPUs {}{interface}{memory})\n",
            p.name, p.kind, p.cpus
        );
        for t in &p.tasks {
            let pid = t.pid.map_or("-".to_string(), |p| p.to_string());
            let priority = t
                .priority
                .map_or(String::new(), |p| format!(" priority {p}"));
            out += &format!(
                "  task {:<16} {}{priority} {} every {} (deadline {}), pid {pid}, {} jobs, {} misses\n",
                t.name,
                t.policy,
                format_duration(t.budget_ns),
                format_duration(t.period_ns),
                format_duration(t.deadline_ns),
                t.jobs,
                t.misses
            );
        }
    }
    if let Some(w) = &s.windows {
        out += &windows_text(w);
    }
    if let Some(ss) = &s.stop_start {
        let last = |ns: Option<u64>| ns.map_or("-".to_string(), format_duration);
        out += &format!(
            "stop-start: {}, {} cycles, last suspend {}, last resume {}, order {}\n",
            ss.state,
            ss.cycles,
            last(ss.last_suspend_ns),
            last(ss.last_resume_ns),
            ss.order.join(" > ")
        );
    }
    out += &s.health.iter().map(supervision_text).collect::<String>();
    for c in &s.channels {
        let end = |e: &bulkhead_control::EndStatus| match e.pid {
            Some(pid) => format!("{} (pid {pid})", e.state),
            None => e.state.clone(),
        };
        out += &format!(
            "channel {} ({}): {} -> {}, {} written, {} read, {} lost ({} dropped, {} overwritten); writer {}, reader {}\n",
            c.name,
            c.kind,
            c.writer,
            c.readers.join(", "),
            c.written,
            c.read,
            c.lost,
            c.dropped,
            c.overwritten,
            end(&c.writer_end),
            end(&c.reader_end)
        );
    }
    out
}

/// One supervision of a `health:` key: `health: task acc of partition control: on_miss
/// fired 1 times, next action mode: safe, 2 misses in its window`.
fn supervision_text(h: &bulkhead_control::SupervisionStatus) -> String {
    let who = match (&h.task, h.process) {
        (Some(t), _) => format!("task {t}"),
        (None, Some(k)) => format!("process {k}"),
        (None, None) => "-".to_string(),
    };
    let misses = h
        .misses
        .map_or(String::new(), |m| format!(", {m} misses in its window"));
    let silent = h.silent_ns.map_or(String::new(), |ns| {
        format!(", silent for {}", format_duration(ns))
    });
    format!(
        "health: {who} of partition {}: {} fired {} times, next action {}{misses}{silent}\n",
        h.partition, h.supervision, h.fired, h.next_action
    )
}

/// Bytes in MiB with one decimal: `4.1MiB`.
fn mebibytes(bytes: u64) -> String {
    format!("{:.1}MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// Nanoseconds in ms with three decimals: `12.346ms`.
fn milliseconds(ns: u64) -> String {
    format!("{:.3}ms", ns as f64 / 1e6)
}

/// The window schedule's position; the window's number is the JSON's (0-based).
fn windows_text(w: &WindowsStatus) -> String {
    format!(
        "windows: window {} of 0-{} running ({}), {} of {} elapsed, at {} of the {} major frame, {} started\n",
        w.window,
        w.count.saturating_sub(1),
        w.partitions.join(", "),
        milliseconds(w.elapsed_ns),
        format_duration(w.length_ns),
        milliseconds(w.frame_position_ns),
        format_duration(w.major_frame_ns),
        w.started
    )
}

fn mode_text(m: &ModeOutcome) -> String {
    let mut out = format!(
        "{} -> {} ({}): done in {}\n",
        m.from,
        m.to,
        m.policy,
        format_duration(m.latency_ns)
    );
    for s in &m.steps {
        let who = s.partition.as_deref().unwrap_or("");
        let boost = if s.boost { " (boost)" } else { "" };
        out += &format!(
            "  +{:<10} {} {who}{boost}\n",
            format_duration(s.t_ns),
            s.event
        );
    }
    out
}

fn power_text(p: &PowerOutcome) -> String {
    let mut out = format!("{} after {}\n", p.state, format_duration(p.latency_ns));
    for q in &p.partitions {
        let ack = if q.acknowledged {
            ""
        } else {
            " (no acknowledgement in time)"
        };
        out += &format!(
            "  {} after {}{ack}\n",
            q.name,
            format_duration(q.latency_ns)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn the_text_status_shows_memory_against_the_limit_and_the_window_position() {
        let partition = |name: &str, memory| bulkhead_control::PartitionStatus {
            name: name.into(),
            kind: "be".into(),
            cpus: "1".into(),
            memory,
            ..Default::default()
        };
        let status = Status {
            system: "car".into(),
            state: "running".into(),
            partitions: vec![
                partition(
                    "ivi",
                    Some(bulkhead_control::MemoryStatus {
                        used_bytes: 12 << 20 | 1 << 19,
                        limit_bytes: 48 << 20,
                    }),
                ),
                partition("free", None),
            ],
            windows: Some(WindowsStatus {
                window: 1,
                count: 2,
                length_ns: 30_000_000,
                elapsed_ns: 12_345_678,
                frame_position_ns: 32_345_678,
                major_frame_ns: 50_000_000,
                started: 17,
                partitions: vec!["B".into()],
            }),
            ..Default::default()
        };
        let text = status_text(&status);
        assert!(
            text.contains("partition ivi (be, CPUs 1, memory 12.5MiB of 48MiB (26%))\n"),
            "{text}"
        );
        assert!(text.contains("partition free (be, CPUs 1)\n"), "{text}");
        assert!(
            text.contains("windows: window 1 of 0-1 running (B), 12.346ms of 30ms elapsed, at 32.346ms of the 50ms major frame, 17 started\n"),
            "{text}"
        );
        let without = status_text(&Status {
            windows: None,
            ..status
        });
        assert!(!without.contains("windows:"), "{without}");
    }

    #[test]
    fn flags_go_before_or_after_the_request() {
        let a = Cli::try_parse_from(["ctl", "--control", "/tmp/x.sock", "status", "--json"])
            .unwrap()
            .args;
        assert!(a.json);
        assert_eq!(socket(&a).unwrap(), Path::new("/tmp/x.sock"));
        let b = Cli::try_parse_from(["ctl", "--system", "car", "mode", "highway"])
            .unwrap()
            .args;
        assert_eq!(socket(&b).unwrap(), Path::new("/run/bulkhead/car.sock"));
        for bad in [
            &["ctl"][..],
            &["ctl", "mode"],
            &["ctl", "reboot"],
            &["ctl", "--control", "a", "--system", "b", "status"],
            &["ctl", "--timeout", "0s", "status"],
        ] {
            let e = Cli::try_parse_from(bad).err().unwrap();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }
}
