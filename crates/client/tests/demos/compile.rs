//! Builds the stand-ins for DEmOS's test programs (README.md beside this file) with the
//! C and C++ compilers against `demos-sch.h` and the static client library. Shared by
//! the client's tests and `demos-sched`'s (`#[path]`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Each program: its name, its source in this directory, the compiler.
pub const PROGRAMS: [(&str, &str, &str); 3] = [
    ("api-test", "api-test.c", "cc"),
    ("api-init-test", "api-init-test.cpp", "c++"),
    ("dummy", "dummy.c", "cc"),
];

/// Builds every program from `sources` (this directory) into `out`, linking `lib`
/// (`libbulkhead_client.a`) and the header directory `include`; the error names the
/// program and shows the compiler's output.
pub fn build_all(sources: &Path, include: &Path, lib: &Path, out: &Path) -> Result<(), String> {
    for (name, source, compiler) in PROGRAMS {
        let built = Command::new(compiler)
            .arg(sources.join(source))
            .arg("-I")
            .arg(include)
            .arg(lib)
            .args(["-lpthread", "-ldl", "-lm", "-o"])
            .arg(out.join(name))
            .output()
            .map_err(|e| format!("{compiler}: {e}"))?;
        if !built.status.success() {
            return Err(format!(
                "{compiler} {source}: {}",
                String::from_utf8_lossy(&built.stderr)
            ));
        }
    }
    Ok(())
}

/// A scratch directory for the programs, readable by every user (partitions run as
/// users of their own), removed on drop.
pub struct ProgramDir(pub PathBuf);

impl ProgramDir {
    pub fn new(name: &str) -> ProgramDir {
        let dir =
            std::env::temp_dir().join(format!("demos-programs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        ProgramDir(dir)
    }
}

impl Drop for ProgramDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
