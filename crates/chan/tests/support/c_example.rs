//! Shared by the C example tests of the crates with a C API (chan, client, task):
//! builds `examples/c/NAME.c` with cc against the crate's header and static library.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `examples/c/NAME.c` against the including crate's header and its static
/// library `libbulkhead_NAME.a` cargo built with the test (both in target/<profile>/deps/); `None` without a C compiler.
pub fn compile_example(name: &str, dir: &Path) -> Option<PathBuf> {
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler `cc`");
        return None;
    }
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().join(format!("libbulkhead_{name}.a"));
    assert!(
        lib.exists(),
        "static library not built at {}",
        lib.display()
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join(name);
    let cc = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(root.join("include"))
        .arg(root.join(format!("../../examples/c/{name}.c")))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    Some(out)
}

/// Removes a directory when dropped (also when the test fails).
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A scratch directory for example `name`, removed when dropped.
pub fn temp_dir(name: &str) -> TempDir {
    let dir = format!("bulkhead-{name}-example-{}", std::process::id());
    TempDir(std::env::temp_dir().join(dir))
}
