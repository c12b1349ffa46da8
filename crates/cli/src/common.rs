//! What every subcommand that reads a system description shares.

use bulkhead_model::input::{self, ReadError};
use bulkhead_model::Loaded;
use std::path::Path;
use std::process::ExitCode;
use std::sync::OnceLock;

/// Exit code for invalid input or a failed verdict.
pub const INVALID: u8 = 1;

/// The limit on a file read whole (`--max-input-size`), set once by `main`.
static MAX_INPUT_SIZE: OnceLock<u64> = OnceLock::new();

/// Sets the limit on files read whole (descriptions, DBC files, standard input).
pub fn set_max_input_size(bytes: u64) {
    let _ = MAX_INPUT_SIZE.set(bytes);
}

/// Reads the regular file `path` whole (`-`: standard input), bounded by
/// `--max-input-size`; the error names the file and, for a large file, the flag.
pub fn read_input(path: &Path) -> Result<Vec<u8>, String> {
    let limit = *MAX_INPUT_SIZE.get_or_init(|| input::DEFAULT_MAX_INPUT_SIZE);
    let read = if path == Path::new("-") {
        input::read_limited(std::io::stdin().lock(), limit)
    } else {
        input::read_file(path, limit)
    };
    read.map_err(|e| match e {
        ReadError::TooLarge { .. } => {
            format!("{}: {e}; raise it with --max-input-size", name(path))
        }
        e => format!("{}: {e}", name(path)),
    })
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
    let loaded = read_input(path).and_then(|bytes| {
        bulkhead_model::load_bytes(&bytes, &name(path)).map_err(|e| e.to_string())
    });
    match loaded {
        Ok(loaded) => {
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            Ok(loaded)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Err(ExitCode::from(INVALID))
        }
    }
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
        eprintln!("error: {}: {why}", name(path));
        return Err(ExitCode::from(INVALID));
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
