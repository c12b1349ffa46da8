//! `bulkhead probe`: the platform's floor, measured per CPU as cyclictest does (timer
//! wake-ups at SCHED_FIFO, or SCHED_DEADLINE), optionally beside a load, with the
//! `platform:` section of a description written from it (docs/platform.md); or, with
//! `--zenoh PEER`, the round trip to the Zenoh bridges at a peer, by
//! `bulkhead-bridge probe` beside this program (only the bridge links Zenoh;
//! docs/zenoh.md).

use crate::fail::fail;
use crate::out::{out, outln};
use bulkhead_model::units::{format_duration, parse_duration};
use bulkhead_model::CpuSet;
use bulkhead_os::probe::{measure, summarize, ProbePolicy, Spec, Summary, BUCKETS};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 after a measurement; 1 when it cannot run (it needs root for \
the real-time policy) or --write-platform cannot be written; 2 on a usage error.\n\
See docs/platform.md."
)]
pub struct Args {
    /// How long to measure, e.g. 10s
    #[arg(long = "for", value_name = "DURATION", default_value = "10s", value_parser = duration)]
    duration: u64,
    /// Time between wake-ups (cyclictest's -i)
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = duration)]
    interval: u64,
    /// CPUs to probe [default: every CPU this process may run on]
    #[arg(long, value_name = "CPULIST", value_parser = CpuSet::parse)]
    cpus: Option<CpuSet>,
    /// Run a load beside the probes: a memory-walking hog at SCHED_OTHER on each of
    /// CPULIST [default: every CPU probed]
    #[arg(long, value_name = "CPULIST", num_args = 0..=1, default_missing_value = "probed")]
    load: Option<String>,
    /// SCHED_FIFO priority of the probes (cyclictest's -p); 99 is above every rt task
    /// of a run (98 downwards), for a probe beside them
    #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u32).range(1..=99))]
    priority: u32,
    /// Probe under SCHED_DEADLINE instead (not pinned; each wake-up counts for the CPU
    /// it ran on)
    #[arg(long)]
    deadline: bool,
    /// Print one JSON document `{"cpus": [{"cpu", "median_us", "p99_us", ...}]}`
    #[arg(long)]
    json: bool,
    /// Write a `platform:` section for a description to FILE: each CPU's longest
    /// latency, rounded up to 100 µs, as the stall it is designed for
    #[arg(long, value_name = "FILE")]
    write_platform: Option<PathBuf>,
    /// Time round trips of a Zenoh query to the bridges of a run at ENDPOINT
    /// (tcp/HOST:PORT, a bridge's `listen`) instead: a bridge's hop `latency:`
    #[arg(long, value_name = "ENDPOINT")]
    zenoh: Option<String>,
    /// With --zenoh: how many round trips to time
    #[arg(long, default_value_t = 20, requires = "zenoh", value_parser = clap::value_parser!(u32).range(1..))]
    count: u32,
}

fn duration(text: &str) -> Result<u64, String> {
    match parse_duration(text, None)? {
        0 => Err("must be a positive duration".into()),
        ns => Ok(ns),
    }
}

pub fn run(args: Args) -> ExitCode {
    if let Some(peer) = &args.zenoh {
        return zenoh(peer, args.count);
    }
    let cpus: Vec<u32> = match &args.cpus {
        Some(set) => set.iter().collect(),
        None => bulkhead_os::sched::own_cpus(),
    };
    let load = match args.load.as_deref() {
        None => Vec::new(),
        Some("probed") => cpus.clone(),
        Some(text) => match CpuSet::parse(text) {
            Ok(set) => set.iter().collect(),
            Err(e) => return fail(format!("--load {text}: {e}")),
        },
    };
    let spec = Spec {
        cpus,
        interval: args.interval,
        duration: args.duration,
        policy: match args.deadline {
            true => ProbePolicy::Deadline,
            false => ProbePolicy::Fifo(args.priority),
        },
        load,
    };
    let samples = match measure(&spec) {
        Ok(samples) => samples,
        Err(e) => return fail(format!("probe: {e}")),
    };
    let summaries: Vec<Summary> = samples
        .iter()
        .map(|s| summarize(s, spec.interval))
        .collect();
    if let Some(path) = &args.write_platform {
        if let Err(e) = std::fs::write(path, platform_section(&summaries, &spec)) {
            return fail(format!("--write-platform {}: {e}", path.display()));
        }
    }
    match args.json {
        true => outln!("{}", json(&summaries, &spec)),
        false => out!("{}", text(&summaries, &spec)),
    }
    ExitCode::SUCCESS
}

/// `bulkhead-bridge probe --connect PEER --count N`, its output and exit status passed on.
fn zenoh(peer: &str, count: u32) -> ExitCode {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("bulkhead"));
    let bridge = exe.with_file_name("bulkhead-bridge");
    let status = std::process::Command::new(&bridge)
        .args(["probe", "--connect", peer, "--count", &count.to_string()])
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => fail(format!(
            "--zenoh {peer}: {}: {e} (built by cargo build --release -p bulkhead-bridge)",
            bridge.display()
        )),
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// How the measurement ran, in words.
fn setting(spec: &Spec) -> String {
    let policy = match spec.policy {
        ProbePolicy::Fifo(p) => format!("SCHED_FIFO {p}"),
        ProbePolicy::Deadline => "SCHED_DEADLINE".into(),
    };
    let load = match spec.load.is_empty() {
        true => "no load".to_string(),
        false => format!("load on CPUs {:?}", spec.load),
    };
    format!(
        "{} every {}, {policy}, {load}",
        format_duration(spec.duration),
        format_duration(spec.interval)
    )
}

fn text(summaries: &[Summary], spec: &Spec) -> String {
    let mut out = format!("probe: {}\n", setting(spec));
    out += &format!(
        "{:>4} {:>8} {:>10} {:>10} {:>10} {:>10} {:>7}\n",
        "cpu", "samples", "median", "p99", "p99.9", "max", "missed"
    );
    for s in summaries {
        out += &format!(
            "{:>4} {:>8} {:>8.1}us {:>8.1}us {:>8.1}us {:>8.1}us {:>7}\n",
            s.cpu,
            s.samples,
            us(s.median_ns),
            us(s.p99_ns),
            us(s.p999_ns),
            us(s.max_ns),
            s.missed
        );
    }
    out += "stalls (wake-ups per latency range):\n";
    for s in summaries {
        let ranges: Vec<String> = buckets()
            .iter()
            .zip(&s.histogram)
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        out += &format!("  cpu {}: {}\n", s.cpu, ranges.join(", "));
    }
    out
}

/// The histogram's ranges in words: `<10us`, `10us-100us`, ..., `>=50ms`.
fn buckets() -> Vec<String> {
    let mut names = Vec::new();
    let mut low = None;
    for b in BUCKETS {
        names.push(match low {
            None => format!("<{}", format_duration(b)),
            Some(l) => format!("{}-{}", format_duration(l), format_duration(b)),
        });
        low = Some(b);
    }
    names.push(format!(">={}", format_duration(BUCKETS[BUCKETS.len() - 1])));
    names
}

fn json(summaries: &[Summary], spec: &Spec) -> String {
    let cpus: Vec<serde_json::Value> = summaries
        .iter()
        .map(|s| {
            let histogram: Vec<serde_json::Value> = buckets()
                .iter()
                .zip(&s.histogram)
                .map(|(range, n)| serde_json::json!({"range": range, "count": n}))
                .collect();
            serde_json::json!({
                "cpu": s.cpu,
                "samples": s.samples,
                "min_us": us(s.min_ns),
                "median_us": us(s.median_ns),
                "p99_us": us(s.p99_ns),
                "p999_us": us(s.p999_ns),
                "max_us": us(s.max_ns),
                "missed": s.missed,
                "stalls": histogram,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "interval_us": us(spec.interval),
        "duration_s": spec.duration as f64 / 1e9,
        "policy": match spec.policy { ProbePolicy::Fifo(_) => "fifo", ProbePolicy::Deadline => "deadline" },
        "load_cpus": spec.load,
        "cpus": cpus,
    });
    serde_json::to_string(&doc).expect("serializes")
}

/// A `platform:` section: each CPU's longest latency rounded up to 100 µs, the section's
/// `stall` the longest of them.
fn platform_section(summaries: &[Summary], spec: &Spec) -> String {
    let round = |ns: u64| ns.div_ceil(100_000).max(1) * 100_000;
    let longest = summaries.iter().map(|s| round(s.max_ns)).max().unwrap_or(0);
    let mut out = format!(
        "# bulkhead probe: {} (docs/platform.md)\nplatform:\n  stall: {}\n  cpus:\n",
        setting(spec),
        format_duration(longest)
    );
    for s in summaries {
        out += &format!(
            "    - {{cpu: {}, stall: {}}}\n",
            s.cpu,
            format_duration(round(s.max_ns))
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(cpu: u32, max_ns: u64) -> Summary {
        Summary {
            cpu,
            samples: 10,
            min_ns: 1_000,
            median_ns: 2_000,
            p99_ns: 3_000,
            p999_ns: 4_000,
            max_ns,
            missed: 0,
            histogram: [10, 0, 0, 0, 0, 0, 0, 0, 0],
        }
    }

    #[test]
    fn the_platform_section_loads_with_each_cpus_longest_stall() {
        let spec = Spec {
            cpus: vec![0, 1],
            interval: 1_000_000,
            duration: 10_000_000_000,
            policy: ProbePolicy::Fifo(90),
            load: vec![1],
        };
        let section = platform_section(&[summary(0, 6_911_000), summary(1, 250_000)], &spec);
        let text = format!("system: {{}}\n{section}");
        let loaded = bulkhead_model::load_str(&text, "p.yaml").expect("loads");
        let platform = loaded.system.platform.expect("a platform section");
        assert_eq!(platform.stall, 7_000_000);
        assert_eq!(
            (platform.stall_of(0), platform.stall_of(1)),
            (7_000_000, 300_000)
        );
        assert!(
            section.starts_with("# bulkhead probe: 10s every 1ms, SCHED_FIFO 90, load on CPUs [1]")
        );
    }

    #[test]
    fn ranges_read_as_durations() {
        let names = buckets();
        assert_eq!(names.first().map(String::as_str), Some("<10us"));
        assert_eq!(names[1], "10us-100us");
        assert_eq!(names.last().map(String::as_str), Some(">=50ms"));
    }
}
