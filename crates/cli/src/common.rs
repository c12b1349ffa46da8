//! What every subcommand that reads a system description shares.

use bulkhead_model::Loaded;
use std::path::Path;
use std::process::ExitCode;

/// Exit code for invalid input or a failed verdict.
pub const INVALID: u8 = 1;

/// Loads `path`, printing warnings to stderr. On error prints the positioned
/// message (`file:line:col: key.path: message`) and returns exit code 1.
pub fn load_system(path: &Path) -> Result<Loaded, ExitCode> {
    match bulkhead_model::load_file(path) {
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
