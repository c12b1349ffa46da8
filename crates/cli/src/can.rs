//! `bulkhead can`: decode candump logs with a DBC, serve a virtual CAN bus (also over
//! socketcand), run the gateway's reader or writer, talk to the gateway from a
//! partition, and the can-utils tools on any bus: replay (canplayer), dump (candump),
//! send (cansend), gen (cangen), in `can_utils.rs`. The logic lives in `bulkhead-can`.

use crate::can_utils;
use crate::common::positive_duration;
use crate::fail::{fail, gateway_failed, usage};
use bulkhead_can::candump::{self, open_log, Record};
use bulkhead_can::dbc::LoadError;
use bulkhead_can::dbc_check::Problem;
use bulkhead_can::decode::decode_log;
use bulkhead_can::mapper::Mapper;
use bulkhead_can::service;
use bulkhead_can::socketcand::Server;
use bulkhead_can::vbus::{self, Bus};
use bulkhead_can::Database;
use bulkhead_can::Frame;
use bulkhead_gateway_protocol::GatewayArgs;
use clap::Subcommand;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: CanCommand,
}

#[derive(Subcommand)]
enum CanCommand {
    /// Serve a virtual CAN bus that nodes attach to by name (runs until killed); with
    /// --socketcand also over TCP for socketcand clients (python-can)
    Bus(BusArgs),
    /// Inject a candump log onto buses in real time (canplayer)
    Replay(can_utils::ReplayArgs),
    /// Print the frames of a bus, filtered by id, as candump's table or log (candump)
    Dump(can_utils::DumpArgs),
    /// Send frames given as ID#DATA (cansend)
    Send(can_utils::SendArgs),
    /// Send random, incrementing or fixed frames every gap (cangen)
    Gen(can_utils::GenArgs),
    /// Decode a candump log (.gz too) with a DBC: one JSON line per decodable frame
    Decode(DecodeArgs),
    /// Run the CAN gateway's reader (bus to partitions) or writer (partitions to bus)
    /// job: as a bulkhead task under `bulkhead run`, else every --period
    Gateway(GatewayCmd),
    /// From a partition connected to a bus (BULKHEAD_CAN_<BUS>): send frames through
    /// the gateway and print the frames it forwards, in candump log format
    Map(MapArgs),
}

/// The gateway's command line: what the supervisor writes ([`GatewayArgs`]) and the
/// job's own tuning.
#[derive(clap::Args)]
struct GatewayCmd {
    #[command(flatten)]
    link: GatewayArgs,
    /// Frames handled per job, at most
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_frames: u64,
    /// Job period when not run by bulkhead (e.g. 2ms)
    #[arg(allow_hyphen_values = true, long, default_value = "2ms", value_parser = positive_duration)]
    period: Duration,
}

#[derive(clap::Args)]
struct MapArgs {
    /// The bus, by its name in the system description
    #[arg(long)]
    bus: String,
    /// A frame to send through the gateway first, candump style: 123#DEADBEEF, 1ABCDEF0#00
    #[arg(long, value_name = "ID#DATA", value_parser = candump::parse_frame)]
    send: Vec<Frame>,
    /// Stop after receiving this many frames
    #[arg(long)]
    count: Option<u64>,
    /// Stop after this long (e.g. 2s, 500ms)
    #[arg(allow_hyphen_values = true, long, value_parser = positive_duration)]
    timeout: Option<Duration>,
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
    /// Reject the DBC for what cantools' strict mode rejects (signals that overlap or
    /// do not fit their message, messages sharing an id); without it these are warnings
    #[arg(long)]
    strict: bool,
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
    /// Also serve the bus over the socketcand protocol (python-can's `socketcand`
    /// interface) on [ADDR:]PORT; ADDR defaults to 127.0.0.1, port 0 picks a free one
    #[arg(long, value_name = "[ADDR:]PORT", value_parser = parse_listen)]
    socketcand: Option<SocketAddr>,
    /// Let --socketcand listen on an address other than loopback (socketcand has no
    /// authentication: anyone who reaches the port can send on the bus)
    #[arg(long, requires = "socketcand")]
    socketcand_remote: bool,
}

/// `PORT` (on 127.0.0.1) or `ADDR:PORT`.
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    match text.parse::<u16>() {
        Ok(port) => Ok(SocketAddr::from(([127, 0, 0, 1], port))),
        Err(_) => text.parse().map_err(|_| {
            format!("`{text}`: want PORT or ADDR:PORT, e.g. 29536 or 127.0.0.1:29536")
        }),
    }
}

pub(crate) fn parse_bus_name(text: &str) -> Result<String, String> {
    vbus::check_name(text).map_err(|e| e.to_string())?;
    Ok(text.to_string())
}

pub fn run(args: Args) -> ExitCode {
    let result = match args.command {
        CanCommand::Decode(a) => run_decode(a),
        CanCommand::Bus(a) => run_bus(a),
        CanCommand::Replay(a) => can_utils::run_replay(a),
        CanCommand::Dump(a) => can_utils::run_dump(a),
        CanCommand::Send(a) => can_utils::run_send(a),
        CanCommand::Gen(a) => can_utils::run_gen(a),
        CanCommand::Gateway(a) => return run_gateway(a),
        CanCommand::Map(a) => run_map(a),
    };
    match result {
        Ok(code) => code,
        Err(message) => fail(message),
    }
}

/// Warnings of a DBC shown, at most; the rest are counted.
const MAX_DBC_WARNINGS: usize = 5;

/// Loads a DBC, printing its warnings (at most [`MAX_DBC_WARNINGS`]) on stderr. Errors
/// name the file and the DBC line of each problem.
fn load_dbc(path: &Path, strict: bool) -> Result<Database, String> {
    let at = |p: &Problem| match p.line {
        Some(line) => format!("{}:{line}: {}", path.display(), p.message),
        None => format!("{}: {}", path.display(), p.message),
    };
    let bytes = crate::common::read_input(path, crate::common::Input::Dbc)?;
    let text = String::from_utf8_lossy(&bytes);
    let db = Database::parse_with(&text, strict).map_err(|e| match e {
        LoadError::Invalid(problems) => problems
            .iter()
            .map(at)
            .collect::<Vec<_>>()
            .join("\nerror: "),
        LoadError::Parse { line, message } => at(&Problem {
            line,
            message: format!("not a valid DBC: {message}"),
        }),
        e => format!("{}: {e}", path.display()),
    })?;
    let warnings = db.warnings();
    for w in warnings.iter().take(MAX_DBC_WARNINGS) {
        crate::fail::warning_line(at(w));
    }
    if warnings.len() > MAX_DBC_WARNINGS {
        eprintln!(
            "warning: {}: {} more warnings like these",
            path.display(),
            warnings.len() - MAX_DBC_WARNINGS
        );
    }
    if !warnings.is_empty() {
        eprintln!("note: --strict makes these warnings errors (as cantools' strict mode does)");
    }
    Ok(db)
}

fn run_decode(a: DecodeArgs) -> Result<ExitCode, String> {
    let db = load_dbc(&a.dbc, a.strict)?;
    let input = open_log(&a.log).map_err(|e| format!("{}: {e}", a.log.display()))?;
    let stdout = crate::out::stdout();
    let mut out = BufWriter::new(stdout);
    let summary = decode_log(&db, input, a.iface.as_deref(), &mut out)
        .and_then(|s| out.flush().map(|_| s))
        .map_err(|e| format!("{}: {e}", a.log.display()))?;
    eprint!("{}: {summary}", a.log.display());
    Ok(ExitCode::SUCCESS)
}

fn run_bus(a: BusArgs) -> Result<ExitCode, String> {
    if let Some(addr) = a.socketcand {
        if !addr.ip().is_loopback() && !a.socketcand_remote {
            return Ok(usage(format!(
                "--socketcand {addr}: not a loopback address; socketcand has no \
                 authentication, so add --socketcand-remote to let other hosts send on the bus"
            )));
        }
    }
    let bus = Bus::bind(&a.name, a.bitrate).map_err(|e| e.to_string())?;
    let server = a
        .socketcand
        .map(|addr| Server::bind(addr, &a.name).map_err(|e| format!("--socketcand {addr}: {e}")))
        .transpose()?;
    eprintln!(
        "virtual CAN bus {:?} at {} bit/s on @{}; stop with Ctrl-C",
        a.name,
        a.bitrate,
        vbus::socket_name(&a.name)
    );
    let _bus = bus.spawn();
    let _server = match server {
        Some(server) => {
            let handle = server.spawn().map_err(|e| e.to_string())?;
            eprintln!(
                "socketcand on {} (channel {:?})",
                handle.local_addr(),
                a.name
            );
            Some(handle)
        }
        None => None,
    };
    loop {
        std::thread::park();
    }
}

fn run_gateway(a: GatewayCmd) -> ExitCode {
    let role = a.link.role;
    let config = service::Config {
        role,
        bus: a.link.bus,
        to: a.link.to,
        from: a.link.from,
        allow: a.link.allow,
        rate: a.link.rate,
        queue: a.link.queue,
        only: a.link.only,
        max_frames: a.max_frames as usize,
        period: a.period,
        dbc: a.link.dbc.map(PathBuf::from),
        suspend_when: a.link.suspend_when,
        resume_when: a.link.resume_when,
        switch_when: a.link.switch_when,
    };
    let stop = match service::stop_on_signals() {
        Ok(stop) => stop,
        Err(e) => return fail(format!("installing signal handlers: {e}")),
    };
    match service::run(&config, stop) {
        Ok(counters) => {
            let list: Vec<String> = counters.iter().map(|(n, v)| format!("{n}={v}")).collect();
            // One write: the run's other programs share this stderr, and a line
            // `eprintln!` writes in pieces can be split by theirs.
            let line = format!(
                "gateway {} of {} stopped: {}\n",
                role.name(),
                config.bus,
                list.join(" ")
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => gateway_failed(&e, role.name(), &config.bus),
    }
}

fn run_map(a: MapArgs) -> Result<ExitCode, String> {
    let mut mapper = Mapper::from_env(&a.bus).map_err(|e| e.to_string())?;
    mapper.subscribe_all();
    for frame in &a.send {
        mapper
            .publish(frame)
            .map_err(|e| format!("--send {}: {e}", candump::format_frame(frame)))?;
    }
    let deadline = a.timeout.map(|t| Instant::now() + t);
    let mut out = crate::out::stdout();
    let mut n = 0u64;
    while a.count.is_none_or(|c| n < c) {
        let wait = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()),
            None => Duration::from_secs(1),
        };
        if deadline.is_some() && wait.is_zero() {
            break;
        }
        let Some(d) = mapper.recv(wait).map_err(|e| e.to_string())? else {
            continue;
        };
        let record = Record {
            t_ns: d.t_ns,
            iface: a.bus.clone(),
            frame: d.frame,
        };
        writeln!(out, "{record}")
            .and_then(|_| out.flush())
            .map_err(|e| e.to_string())?;
        n += 1;
    }
    if mapper.missed() > 0 {
        eprintln!(
            "{} frames of the bus were not forwarded to this partition (its channel was full)",
            mapper.missed()
        );
    }
    match a.count {
        Some(count) if n < count => {
            eprintln!("timeout: received {n} of {count} frames");
            Ok(ExitCode::from(1))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}
