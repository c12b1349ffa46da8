//! `bulkhead can`: decode candump logs with a DBC, serve a virtual CAN bus, replay
//! a log onto a bus, dump a bus. The logic lives in `bulkhead-can`.

use bulkhead_can::bus::{self, SOCKETCAN_PREFIX};
use bulkhead_can::candump::{open_log, Reader};
use bulkhead_can::decode::decode_log;
use bulkhead_can::replay::{dump, replay};
use bulkhead_can::vbus::{self, Bus};
use bulkhead_can::Database;
use clap::Subcommand;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: CanCommand,
}

#[derive(Subcommand)]
enum CanCommand {
    /// Decode a candump log (.gz too) with a DBC: one JSON line per decodable frame
    Decode(DecodeArgs),
    /// Serve a virtual CAN bus that nodes attach to by name (runs until killed)
    Bus(BusArgs),
    /// Inject a candump log onto a bus in real time
    Replay(ReplayArgs),
    /// Print the frames received from a bus in candump log format
    Dump(DumpArgs),
}

#[derive(clap::Args)]
struct DecodeArgs {
    /// The DBC file
    #[arg(long)]
    dbc: PathBuf,
    /// The candump log (`(ts) iface ID#DATA` lines), plain or gzip-compressed
    log: PathBuf,
    /// Decode only the log's frames of this interface (default: all)
    #[arg(long)]
    iface: Option<String>,
}

#[derive(clap::Args)]
struct BusArgs {
    /// Bus name (1-64 of A-Z a-z 0-9 _ . -)
    #[arg(value_parser = parse_bus_name)]
    name: String,
    /// Bit rate in bit/s (classic CAN: at most 1000000)
    #[arg(long, default_value_t = 500_000,
          value_parser = clap::value_parser!(u64).range(1..=vbus::MAX_BITRATE))]
    bitrate: u64,
}

#[derive(clap::Args)]
struct ReplayArgs {
    /// The candump log, plain or gzip-compressed
    log: PathBuf,
    /// The bus: a virtual bus name, or socketcan:IFACE
    #[arg(long, value_parser = parse_bus_spec)]
    bus: String,
    /// Replay only the log's frames of this interface (default: all)
    #[arg(long)]
    iface: Option<String>,
    /// Time scale: 2.0 replays twice as fast
    #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
    speed: f64,
}

#[derive(clap::Args)]
struct DumpArgs {
    /// The bus: a virtual bus name, or socketcan:IFACE
    #[arg(long, value_parser = parse_bus_spec)]
    bus: String,
    /// Stop after this many frames
    #[arg(long)]
    count: Option<u64>,
    /// Stop after this long (e.g. 2s, 500ms; a bare number is seconds)
    #[arg(long, value_parser = parse_timeout)]
    timeout: Option<Duration>,
}

fn parse_bus_name(text: &str) -> Result<String, String> {
    vbus::check_name(text).map_err(|e| e.to_string())?;
    Ok(text.to_string())
}

fn parse_bus_spec(text: &str) -> Result<String, String> {
    match text.strip_prefix(SOCKETCAN_PREFIX) {
        Some("") => Err("socketcan: needs an interface name, e.g. socketcan:can0".into()),
        Some(_) => Ok(text.to_string()),
        None => parse_bus_name(text),
    }
}

fn parse_speed(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{text}` is not a positive number")),
    }
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    bulkhead_model::units::parse_duration(text, Some(1_000_000_000)).map(Duration::from_nanos)
}

pub fn run(args: Args) -> ExitCode {
    let result = match args.command {
        CanCommand::Decode(a) => run_decode(a),
        CanCommand::Bus(a) => run_bus(a),
        CanCommand::Replay(a) => run_replay(a),
        CanCommand::Dump(a) => run_dump(a),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

fn run_decode(a: DecodeArgs) -> Result<ExitCode, String> {
    let db = Database::from_file(&a.dbc).map_err(|e| format!("{}: {e}", a.dbc.display()))?;
    let input = open_log(&a.log).map_err(|e| format!("{}: {e}", a.log.display()))?;
    let stdout = io::stdout().lock();
    let mut out = BufWriter::new(stdout);
    let summary = decode_log(&db, input, a.iface.as_deref(), &mut out)
        .and_then(|s| out.flush().map(|_| s))
        .map_err(|e| format!("{}: {e}", a.log.display()))?;
    eprint!("{}: {summary}", a.log.display());
    Ok(ExitCode::SUCCESS)
}

fn run_bus(a: BusArgs) -> Result<ExitCode, String> {
    let bus = Bus::bind(&a.name, a.bitrate).map_err(|e| e.to_string())?;
    eprintln!(
        "virtual CAN bus {:?} at {} bit/s on @{}; stop with Ctrl-C",
        a.name,
        a.bitrate,
        vbus::socket_name(&a.name)
    );
    bus.run()
}

fn run_replay(a: ReplayArgs) -> Result<ExitCode, String> {
    let input = open_log(&a.log).map_err(|e| format!("{}: {e}", a.log.display()))?;
    let mut bus = bus::open(&a.bus).map_err(|e| format!("--bus {}: {e}", a.bus))?;
    let stats = replay(
        Reader::new(input),
        bus.as_mut(),
        a.iface.as_deref(),
        a.speed,
    )
    .map_err(|e| format!("{}: {e}", a.log.display()))?;
    eprintln!(
        "replayed {} frames onto {} ({} of other interfaces skipped, {} malformed lines, \
         at most {:.3} ms late)",
        stats.sent,
        a.bus,
        stats.skipped,
        stats.malformed,
        stats.max_late.as_secs_f64() * 1e3
    );
    Ok(ExitCode::SUCCESS)
}

fn run_dump(a: DumpArgs) -> Result<ExitCode, String> {
    let mut bus = bus::open(&a.bus).map_err(|e| format!("--bus {}: {e}", a.bus))?;
    let iface = a.bus.strip_prefix(SOCKETCAN_PREFIX).unwrap_or(&a.bus);
    let mut out = io::stdout().lock();
    let n = dump(bus.as_mut(), iface, a.count, a.timeout, &mut out)
        .map_err(|e| format!("--bus {}: {e}", a.bus))?;
    match a.count {
        Some(count) if n < count => {
            eprintln!("timeout: received {n} of {count} frames");
            Ok(ExitCode::from(1))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}
