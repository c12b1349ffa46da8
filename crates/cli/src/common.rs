//! What every subcommand that reads a system description shares, and the one way
//! the CLI reads an input whole.

use crate::fail::fail;
use bulkhead_model::host::{self, Host};
use bulkhead_model::input::{self, Fifo, ReadError};
use bulkhead_model::{CpuSet, Loaded, Places};
use std::path::Path;
use std::process::ExitCode;
use std::sync::OnceLock;

/// `--max-input-size`, when given; set once by `main`.
static MAX_INPUT_SIZE: OnceLock<u64> = OnceLock::new();

/// Sets the limit on every input read (`--max-input-size`).
pub fn set_max_input_size(bytes: u64) {
    let _ = MAX_INPUT_SIZE.set(bytes);
}

/// What an input is: its default size limit and whether a FIFO is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A system description: at most 16 MiB; a FIFO is read (DEmOS reads its
    /// configuration from one, and `<(generate)` passes one).
    Description,
    /// A DBC file: at most 16 MiB; no FIFO.
    Dbc,
    /// The schedule log or trace `report` reads: at most 1 GiB (a 60 s simulation of
    /// the DriveOS example writes a 280 MB trace); no FIFO (`-` reads standard input).
    Log,
}

/// The largest log or trace `report` reads by default.
pub const DEFAULT_MAX_LOG_SIZE: u64 = 1 << 30;

impl Input {
    /// `--max-input-size`, else this input's default.
    fn limit(self) -> u64 {
        let default = match self {
            Input::Description | Input::Dbc => input::DEFAULT_MAX_INPUT_SIZE,
            Input::Log => DEFAULT_MAX_LOG_SIZE,
        };
        MAX_INPUT_SIZE.get().copied().unwrap_or(default)
    }

    fn fifo(self) -> Fifo {
        match self {
            Input::Description => Fifo::Accept,
            Input::Dbc | Input::Log => Fifo::Refuse,
        }
    }
}

/// Reads the file `path` whole (`-`: standard input, whatever it is), bounded by
/// `--max-input-size` or the default of `what`: a device, socket or directory (and a
/// FIFO but for a description) is refused before it is read. The error names the file
/// and, for a large input, the flag.
pub fn read_input(path: &Path, what: Input) -> Result<Vec<u8>, String> {
    let limit = what.limit();
    let read = if path == Path::new("-") {
        input::read_limited(std::io::stdin().lock(), limit)
    } else {
        input::read_file(path, limit, what.fifo())
    };
    read.map_err(|e| match e {
        ReadError::TooLarge { .. } => {
            format!("{}: {e}; raise it with --max-input-size", name(path))
        }
        e => format!("{}: {e}", name(path)),
    })
}

/// The directory the programs of the description `file` start in: its own directory
/// (DEmOS's `set_cwd`, the default), else the current one.
pub fn workdir(system: &bulkhead_model::System, file: &Path) -> std::path::PathBuf {
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && file != Path::new("-"))
        .map_or_else(|| Path::new(".").to_path_buf(), Path::to_path_buf);
    let dir = if system.set_cwd { dir } else { ".".into() };
    std::path::absolute(&dir).unwrap_or(dir)
}

/// Resolves every program of `system` (described in `file` as `text`, run from
/// [`workdir`]) as `run` will
/// ([`bulkhead_plan::Programs::resolve`]); the first that cannot run is reported at its
/// position (`file:line:col: key.path: program ... not found (searched: ...)`), exit 1.
pub fn resolve_programs(
    system: &bulkhead_model::System,
    (file, text): (&Path, &str),
) -> Result<bulkhead_plan::Programs, ExitCode> {
    let host = bulkhead_plan::Host::current(&workdir(system, file));
    bulkhead_plan::Programs::resolve(system, &host)
        .map_err(|e| refuse_at((file, text), &e.key_path, e.source.to_string()))
}

/// Refuses what this machine's cgroup hierarchy cannot hold, as `run` will
/// ([`bulkhead_plan::cgroups::check`]), at its position (`file:line:col: key.path: ...`),
/// exit 1; nothing when no usable hierarchy is detected (`run` then fails on that).
pub fn check_cgroups(
    system: &bulkhead_model::System,
    (file, text): (&Path, &str),
) -> Result<(), ExitCode> {
    let Ok(hierarchy) = bulkhead_os::cgroup::Hierarchy::detect() else {
        return Ok(());
    };
    let version = bulkhead_runtime::plan_version(hierarchy.version);
    bulkhead_plan::cgroups::check(system, version)
        .map_err(|e| refuse_at((file, text), &e.key_path, e.to_string()))
}

/// Fails with `why` at the position of `key_path` in the description (`file:line:col:
/// key.path: why`), exit 1.
pub fn refuse_at((file, text): (&Path, &str), key_path: &str, why: String) -> ExitCode {
    fail(bulkhead_model::diagnostic_at(
        text,
        &name(file),
        key_path,
        why,
    ))
}

/// A positive duration with a unit (`500us`, `2ms`, `1s`): the syntax of every
/// duration flag (`run --timeout`, `ctl --timeout`, `can ... --timeout`).
pub fn positive_duration(text: &str) -> Result<std::time::Duration, String> {
    match bulkhead_model::units::parse_duration(text, None)? {
        0 => Err("must be a positive duration".into()),
        ns => Ok(std::time::Duration::from_nanos(ns)),
    }
}

/// How messages name `path`: `<stdin>` for `-`.
pub fn name(path: &Path) -> String {
    if path == Path::new("-") {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

/// Loads `path` (`-`: standard input), printing warnings to stderr. On error prints
/// the positioned message (`file:line:col: key.path: message`) and returns exit code 1.
pub fn load_system(path: &Path) -> Result<Loaded, ExitCode> {
    load_system_on(path, None).map(|(loaded, _)| loaded)
}

/// [`load_system`], also refused where it does not fit `host` (this machine, for what
/// runs here: [`this_machine`]); and the description's text, to position what is found
/// wrong after loading ([`bulkhead_model::diagnostic_at`]) without reading the input
/// again (a FIFO or standard input cannot be).
pub fn load_system_on(path: &Path, host: Option<&Host>) -> Result<(Loaded, String), ExitCode> {
    let loaded = read_input(path, Input::Description).and_then(|bytes| {
        let dbcs = |s: &bulkhead_model::System, places: &Places| {
            check_dbcs(s, path)?;
            host.map_or(Ok(()), |h| h.check(s, places))
        };
        let loaded = bulkhead_model::load_bytes_with(&bytes, &name(path), &dbcs)
            .map_err(|e| e.to_string())?;
        Ok((loaded, String::from_utf8_lossy(&bytes).into_owned()))
    });
    match loaded {
        Ok((loaded, text)) => {
            for w in &loaded.warnings {
                crate::fail::warning_line(w);
            }
            Ok((loaded, text))
        }
        Err(e) => Err(fail(e)),
    }
}

/// What this machine allows (`bulkhead_os::host`): its SCHED_DEADLINE period bounds
/// (Linux's defaults where unreadable) and its CPUs present and online.
pub fn this_machine() -> Host {
    let (min, max) = bulkhead_os::host::deadline_period_bounds_us();
    let cpus = |list: Option<String>| list.and_then(|l| CpuSet::parse(&l).ok());
    Host {
        deadline_period_min: min.map_or(host::DEFAULT_DEADLINE_PERIOD_MIN, |us| us * 1000),
        deadline_period_max: max.map_or(host::DEFAULT_DEADLINE_PERIOD_MAX, |us| us * 1000),
        present: cpus(bulkhead_os::host::cpus_present()),
        online: cpus(bulkhead_os::host::cpus_online()),
    }
}

/// Each bus's DBC must load (relative to the description's directory: the gateway's
/// writer takes its messages' cycle times), and each stop-start trigger's and
/// `modes.switch_when`'s signal must be in its bus's DBC: an error names the key path.
fn check_dbcs(system: &bulkhead_model::System, description: &Path) -> Result<(), (String, String)> {
    let dir = match description.parent() {
        Some(d) if description != Path::new("-") => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    for (i, bus) in system.buses.iter().enumerate() {
        let Some(dbc) = &bus.dbc else { continue };
        let file = dir.join(dbc);
        let db = read_input(&file, Input::Dbc)
            .and_then(|bytes| {
                bulkhead_can::dbc::Database::parse(&String::from_utf8_lossy(&bytes))
                    .map_err(|e| format!("{}: {e}", file.display()))
            })
            .map_err(|e| (format!("buses[{i}].dbc"), e))?;
        let stop_start = system.stop_start.iter().flat_map(|ss| ss.triggers());
        let stop_start = stop_start.map(|(key, t)| (format!("stop_start.{key}"), t));
        let switches = system.modes.iter().flat_map(|m| m.switch_when.iter());
        let switches =
            (switches.enumerate()).map(|(i, s)| (format!("modes.switch_when[{i}]"), &s.when));
        for (key, trigger) in stop_start
            .chain(switches)
            .filter(|(_, t)| t.bus == bus.name)
        {
            let found = db
                .messages()
                .iter()
                .any(|m| m.signals.iter().any(|s| s.name == trigger.signal));
            if !found {
                return Err((
                    format!("{key}.signal"),
                    format!(
                        "no signal `{}` in the DBC of bus `{}` ({dbc})",
                        trigger.signal, bus.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The system `check`, `analyze` and `sim` work on: its pipelines solved (Boomerang
/// III-E) and their stages made tasks with the solved reservations. An infeasible
/// pipeline is an error naming the stage and the test that fails (exit code 1).
pub fn solved_system(
    system: &bulkhead_model::System,
    path: &Path,
) -> Result<bulkhead_model::System, ExitCode> {
    if system.pipelines.is_empty() {
        return Ok(system.clone());
    }
    let options = bulkhead_analysis::system::Options::default();
    let solutions = bulkhead_analysis::pipes::solve(system, &options);
    if let Some(why) = infeasible(&solutions) {
        return Err(fail(format!("{}: {why}", name(path))));
    }
    Ok(bulkhead_analysis::pipes::apply(system, &solutions))
}

/// The first infeasible pipeline: its name, the stage and the test that fails.
pub fn infeasible(solutions: &[bulkhead_analysis::pipes::Solution]) -> Option<String> {
    let s = solutions.iter().find(|s| !s.feasible)?;
    let f = s.failure.as_ref()?;
    Some(format!(
        "pipeline `{}` is infeasible: stage `{}` fails {}: {}",
        s.name, f.stage, f.test, f.message
    ))
}
