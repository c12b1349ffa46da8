//! The can-utils tools of `bulkhead can`, on a virtual bus or a SocketCAN interface:
//! `replay` (canplayer), `dump` (candump), `send` (cansend) and `gen` (cangen), with
//! their options under the same letters where they exist.

use crate::common::positive_duration;
use bulkhead_can::bus::{self, CanBus, SOCKETCAN_PREFIX};
use bulkhead_can::candump::{self, open_log};
use bulkhead_can::dump::{self, Filter, Filters, Format, Limits, Printer, Timestamps};
use bulkhead_can::generate::{self, Generator, Mode, Spec};
use bulkhead_can::replay::{self, Options, ReplayError, ReplayStats, Route};
use bulkhead_can::Frame;
use bulkhead_gateway_protocol::parse_bus_spec;
use bulkhead_model::units::{format_duration, parse_duration};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn usage(message: String) -> Result<ExitCode, String> {
    Ok(crate::fail::usage(message))
}

#[derive(clap::Args)]
pub struct ReplayArgs {
    /// The candump log, plain or gzip-compressed
    log: PathBuf,
    /// Interface assignments BUS=LOGIFACE (canplayer's): records of log interface
    /// LOGIFACE go to bus BUS (a virtual bus name or socketcan:IFACE)
    #[arg(value_name = "BUS=LOGIFACE", value_parser = parse_assignment)]
    assign: Vec<(String, String)>,
    /// The bus for the records of --iface, or of every interface without --iface
    #[arg(long, value_parser = parse_bus_spec)]
    bus: Option<String>,
    /// With --bus: replay only the log's records of this interface
    #[arg(long, requires = "bus")]
    iface: Option<String>,
    /// Time scale: 2.0 replays twice as fast (0.001 to 1000000)
    #[arg(allow_hyphen_values = true, long, default_value_t = 1.0, value_parser = parse_speed)]
    speed: f64,
    /// Skip gaps in log time longer than this (canplayer -s): the next record goes out
    /// at once
    #[arg(allow_hyphen_values = true, short = 's', long, value_name = "DURATION", default_value = "10s", value_parser = positive_duration)]
    max_gap: Duration,
    /// Ignore the timestamps: send the records --gap apart (canplayer -t)
    #[arg(short = 't', long)]
    ignore_timestamps: bool,
    /// With -t: the time between two records (canplayer -g)
    #[arg(allow_hyphen_values = true, short = 'g', long, value_name = "DURATION", default_value = "1ms",
          value_parser = parse_gap, requires = "ignore_timestamps")]
    gap: Duration,
    /// Play the log this many times, `i` for ever (canplayer -l)
    #[arg(short = 'l', long = "loop", value_name = "N|i", default_value = "1", value_parser = parse_loops)]
    loops: Loops,
    /// Stop after sending this many frames (canplayer -n)
    #[arg(short = 'n', long)]
    count: Option<u64>,
}

#[derive(Clone, Copy)]
struct Loops(Option<u64>);

fn parse_loops(text: &str) -> Result<Loops, String> {
    match text {
        "i" => Ok(Loops(None)),
        n => match n.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Loops(Some(n))),
            _ => Err(format!(
                "`{text}`: want a count of at least 1, or `i` for ever"
            )),
        },
    }
}

fn parse_assignment(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((bus, iface)) if !iface.is_empty() => Ok((parse_bus_spec(bus)?, iface.to_string())),
        _ => Err(format!(
            "`{text}`: want BUS=LOGIFACE, e.g. pt=can0 or socketcan:vcan0=can0"
        )),
    }
}

fn parse_speed(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if (replay::MIN_SPEED..=replay::MAX_SPEED).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{text}`: want a number from {} (a thousandth of real time) to {} (a million times)",
            replay::MIN_SPEED,
            replay::MAX_SPEED
        )),
    }
}

/// A duration with a unit that may be zero (`0ms`: back to back).
fn parse_gap(text: &str) -> Result<Duration, String> {
    Ok(Duration::from_nanos(parse_duration(text, None)?))
}

/// The buses to open (each spec once) and the routes onto them, from --bus/--iface and
/// the assignments; Err is a usage error.
fn routes(a: &ReplayArgs) -> Result<(Vec<String>, Vec<Route>), String> {
    let mut specs: Vec<String> = Vec::new();
    let mut routes = Vec::new();
    let mut add = |spec: &str, iface: Option<&str>| {
        let index = match specs.iter().position(|s| s == spec) {
            Some(i) => i,
            None => {
                specs.push(spec.to_string());
                specs.len() - 1
            }
        };
        routes.push((iface.map(str::to_string), index));
    };
    if let Some(bus) = &a.bus {
        if a.iface.is_none() && !a.assign.is_empty() {
            return Err(
                "--bus without --iface takes every interface: give no BUS=LOGIFACE too".into(),
            );
        }
        add(bus, a.iface.as_deref());
    }
    for (bus, iface) in &a.assign {
        add(bus, Some(iface));
    }
    if routes.is_empty() {
        return Err("give --bus BUS, or BUS=LOGIFACE assignments".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for (iface, _) in &routes {
        if let Some(i) = iface {
            if !seen.insert(i.clone()) {
                return Err(format!("log interface `{i}` is assigned twice"));
            }
        }
    }
    Ok((specs, routes))
}

pub fn run_replay(a: ReplayArgs) -> Result<ExitCode, String> {
    let (specs, routes) = match routes(&a) {
        Ok(r) => r,
        Err(m) => return usage(m),
    };
    // Opened (and a missing file reported) before any bus is touched.
    drop(open_log(&a.log).map_err(|e| format!("{}: {e}", a.log.display()))?);
    let mut buses: Vec<Box<dyn CanBus>> = Vec::new();
    for spec in &specs {
        buses.push(bus::open(spec).map_err(|e| format!("--bus {spec}: {e}"))?);
    }
    let options = Options {
        speed: a.speed,
        max_gap: a.max_gap,
        fixed_gap: a.ignore_timestamps.then_some(a.gap),
        loops: a.loops.0,
        count: a.count,
    };
    let log = a.log.clone();
    let mut open = move || open_log(&log);
    let stats = replay::replay(&mut open, &mut buses, &routes, &options).map_err(|e| match e {
        ReplayError::Send { line, bus, error } => format!(
            "{}: line {line}: sending to {}: {error}",
            a.log.display(),
            specs[bus]
        ),
        e => format!("{}: {e}", a.log.display()),
    })?;
    report(&stats, &specs, &a);
    Ok(ExitCode::SUCCESS)
}

fn report(stats: &ReplayStats, specs: &[String], a: &ReplayArgs) {
    eprintln!(
        "replayed {} frames onto {} ({} of other interfaces skipped, {} malformed lines, \
         at most {:.3} ms late)",
        stats.sent,
        specs.join(", "),
        stats.skipped,
        stats.malformed,
        stats.max_late.as_secs_f64() * 1e3
    );
    if let Some(first) = &stats.first_malformed {
        eprintln!("  first malformed: {first}");
    }
    if stats.fd_skipped > 0 {
        eprintln!(
            "  {} CAN FD records skipped: bulkhead's buses carry classic CAN only",
            stats.fd_skipped
        );
    }
    if let Some(line) = stats.first_gap_line {
        eprintln!(
            "  {} gaps longer than {} skipped (the first before line {line}; -s sets the limit)",
            stats.gaps_skipped,
            format_duration(a.max_gap.as_nanos() as u64)
        );
    }
    if let Some(line) = stats.first_backwards_line {
        eprintln!(
            "  {} timestamps earlier than the record before (the first at line {line}): \
             replayed from there as a new start",
            stats.backwards
        );
    }
    if a.loops.0 != Some(1) {
        eprintln!("  {} loops played", stats.loops);
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum TimestampArg {
    /// absolute (seconds of the Unix epoch)
    A,
    /// since the previous frame
    D,
    /// since the first frame
    Z,
}

#[derive(clap::Args)]
pub struct DumpArgs {
    /// The bus: a virtual bus name, or socketcan:IFACE (positional, as candump's)
    #[arg(value_name = "BUS", value_parser = parse_bus_spec, required_unless_present = "bus_flag")]
    bus: Option<String>,
    /// The bus, as `dump` took it before it took it as candump does
    #[arg(long = "bus", id = "bus_flag", value_name = "BUS", value_parser = parse_bus_spec,
          conflicts_with = "bus", hide = true)]
    bus_flag: Option<String>,
    /// Only frames that match ID:MASK (id word & MASK == ID & MASK) or ID~MASK (the
    /// others), hex; 8 digits of ID mean a 29-bit id; repeat for more (any matches)
    #[arg(short = 'f', long = "filter", value_name = "ID:MASK", value_parser = Filter::parse)]
    filters: Vec<Filter>,
    /// A frame must match every filter, not any (candump's `j`)
    #[arg(short = 'j', long, requires = "filters")]
    join: bool,
    /// Print candump log lines `(secs) BUS ID#DATA` (candump -L), which replay reads,
    /// instead of candump's table
    #[arg(short = 'L', long)]
    log: bool,
    /// Table timestamps: a absolute, d delta, z from the first frame (candump -t)
    #[arg(short = 't', long, value_enum, conflicts_with = "log")]
    timestamps: Option<TimestampArg>,
    /// Stop after this many frames
    #[arg(short = 'n', long)]
    count: Option<u64>,
    /// Stop after this long (e.g. 2s, 500ms)
    #[arg(allow_hyphen_values = true, long, value_parser = positive_duration)]
    timeout: Option<Duration>,
}

pub fn run_dump(a: DumpArgs) -> Result<ExitCode, String> {
    let spec = a.bus.or(a.bus_flag).expect("clap requires one");
    let mut bus = bus::open(&spec).map_err(|e| format!("{spec}: {e}"))?;
    let iface = spec.strip_prefix(SOCKETCAN_PREFIX).unwrap_or(&spec);
    let format = match (a.log, a.timestamps) {
        (true, _) => Format::Log,
        (false, t) => Format::Table(t.map(|t| match t {
            TimestampArg::A => Timestamps::Absolute,
            TimestampArg::D => Timestamps::Delta,
            TimestampArg::Z => Timestamps::Zero,
        })),
    };
    let filters = Filters {
        filters: a.filters,
        join: a.join,
    };
    let limits = Limits {
        count: a.count,
        timeout: a.timeout,
    };
    let mut printer = Printer::new(format, iface);
    let mut out = crate::out::stdout();
    let n = dump::dump(bus.as_mut(), &filters, &mut printer, limits, &mut out)
        .map_err(|e| format!("{spec}: {e}"))?;
    match a.count {
        Some(count) if n < count => {
            eprintln!("timeout: received {n} of {count} frames");
            Ok(ExitCode::from(1))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

#[derive(clap::Args)]
pub struct SendArgs {
    /// The bus: a virtual bus name, or socketcan:IFACE
    #[arg(value_parser = parse_bus_spec)]
    bus: String,
    /// Frames, candump style: 123#DEADBEEF, 1ABCDEF0#00, 123#R (remote)
    #[arg(value_name = "ID#DATA", required = true, value_parser = candump::parse_frame)]
    frames: Vec<Frame>,
}

pub fn run_send(a: SendArgs) -> Result<ExitCode, String> {
    if let Some(fd) = a
        .frames
        .iter()
        .find(|f| f.kind() != bulkhead_can::frame::Kind::Classic)
    {
        return usage(format!(
            "{}: a CAN FD frame; bulkhead's buses carry classic CAN only",
            candump::format_frame(fd)
        ));
    }
    let mut bus = bus::open(&a.bus).map_err(|e| format!("{}: {e}", a.bus))?;
    for frame in &a.frames {
        bus.send(frame)
            .map_err(|e| format!("{}: sending {}: {e}", a.bus, candump::format_frame(frame)))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct GenArgs {
    /// The bus: a virtual bus name, or socketcan:IFACE
    #[arg(value_parser = parse_bus_spec)]
    bus: String,
    /// Time between frames (cangen -g; 0ms: as fast as the bus takes them)
    #[arg(allow_hyphen_values = true, short = 'g', long, value_name = "DURATION", default_value = "200ms", value_parser = parse_gap)]
    gap: Duration,
    /// Send on CLOCK_MONOTONIC's grid of instants k * gap + PHASE instead of from now
    /// (a `bulkhead run`'s rt tasks are released on multiples of 10 ms plus their
    /// offsets, so frames can keep a known phase to them)
    #[arg(long, value_name = "DURATION", value_parser = parse_gap)]
    phase: Option<Duration>,
    /// Ids: r random, i incrementing, or a fixed hex id (cangen -I)
    #[arg(short = 'I', long = "id", value_name = "r|i|HEX", default_value = "r", value_parser = parse_id_mode)]
    id: Mode<u32>,
    /// Lengths: r random, i incrementing, or a fixed length 0..8 (cangen -L; default r,
    /// or the fixed payload's length)
    #[arg(short = 'L', long = "len", value_name = "r|i|LEN", value_parser = parse_len_mode)]
    len: Option<Mode<usize>>,
    /// Payloads: r random, i incrementing, or fixed hex bytes (cangen -D)
    #[arg(short = 'D', long = "data", value_name = "r|i|HEX", default_value = "r", value_parser = parse_data_mode)]
    data: Mode<Vec<u8>>,
    /// 29-bit ids (cangen -e)
    #[arg(short = 'e', long)]
    extended: bool,
    /// Remote frames (cangen -R)
    #[arg(short = 'R', long)]
    remote: bool,
    /// Stop after this many frames (cangen -n; default: until killed)
    #[arg(short = 'n', long)]
    count: Option<u64>,
    /// Seed of the random choices (default: from the clock)
    #[arg(long)]
    seed: Option<u64>,
    /// Print each frame sent, as candump's table (cangen -v)
    #[arg(short = 'v', long)]
    verbose: bool,
}

fn mode<T>(text: &str, fixed: impl Fn(&str) -> Result<T, String>) -> Result<Mode<T>, String> {
    match text {
        "r" => Ok(Mode::Random),
        "i" => Ok(Mode::Increment),
        other => fixed(other).map(Mode::Fixed),
    }
}

fn parse_id_mode(text: &str) -> Result<Mode<u32>, String> {
    mode(text, |t| {
        u32::from_str_radix(t, 16).map_err(|_| format!("`{t}`: want r, i or a hex id"))
    })
}

fn parse_len_mode(text: &str) -> Result<Mode<usize>, String> {
    mode(text, |t| {
        t.parse()
            .map_err(|_| format!("`{t}`: want r, i or a length 0..8"))
    })
}

fn parse_data_mode(text: &str) -> Result<Mode<Vec<u8>>, String> {
    mode(text, |t| {
        candump::parse_frame(&format!("0#{t}"))
            .map(|f| f.data().to_vec())
            .map_err(|_| format!("`{t}`: want r, i or hex bytes (at most 8)"))
    })
}

pub fn run_gen(a: GenArgs) -> Result<ExitCode, String> {
    let len = a.len.unwrap_or(match &a.data {
        Mode::Fixed(d) => Mode::Fixed(d.len()),
        _ => Mode::Random,
    });
    let spec = Spec {
        id: a.id,
        len,
        data: a.data,
        extended: a.extended,
        remote: a.remote,
    };
    if let Err(m) = spec.check() {
        return usage(m.to_string());
    }
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let mut bus = bus::open(&a.bus).map_err(|e| format!("{}: {e}", a.bus))?;
    let iface = a
        .bus
        .strip_prefix(SOCKETCAN_PREFIX)
        .unwrap_or(&a.bus)
        .to_string();
    let mut out = crate::out::stdout();
    let mut print = |frame: &Frame| match a.verbose {
        true => writeln!(out, "  {iface}  {}", dump::long_frame(frame)),
        false => Ok(()),
    };
    let mut generator = Generator::new(spec, seed);
    generate::run(
        &mut generator,
        bus.as_mut(),
        a.gap,
        a.phase,
        a.count,
        &mut print,
    )
    .map_err(|e| format!("{}: {e}", a.bus))?;
    Ok(ExitCode::SUCCESS)
}
