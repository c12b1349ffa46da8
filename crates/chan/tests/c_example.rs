//! Builds examples/c/chan.c with cc against include/bulkhead/chan.h and the static
//! library, and runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `examples/c/chan.c` against the crate's header and the static library cargo
/// built with this test (both in target/<profile>/deps/); `None` without a C compiler.
fn compile_example(dir: &Path) -> Option<PathBuf> {
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler `cc`");
        return None;
    }
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().join("libbulkhead_chan.a");
    assert!(
        lib.exists(),
        "static library not built at {}",
        lib.display()
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join("chan");
    let cc = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(root.join("include"))
        .arg(root.join("../../examples/c/chan.c"))
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
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir() -> TempDir {
    TempDir(std::env::temp_dir().join(format!("bulkhead-chan-example-{}", std::process::id())))
}

#[test]
fn the_chan_example_passes_readings_between_two_processes() {
    let dir = temp_dir();
    let Some(exe) = compile_example(&dir.0) else {
        return;
    };
    let out = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}: {stdout}", out.status);
    assert_eq!(
        stdout,
        "received 1: 41.0 km/h\nreceived 2: 42.0 km/h\nreceived 3: 43.0 km/h\n"
    );
}
