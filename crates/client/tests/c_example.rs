//! Builds examples/c/client.c with cc against include/bulkhead/client.h and the static
//! library, and runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `examples/c/client.c` against the crate's header and the static library cargo
/// built with this test (both in target/<profile>/deps/); `None` without a C compiler.
fn compile_example(dir: &Path) -> Option<PathBuf> {
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler `cc`");
        return None;
    }
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().join("libbulkhead_client.a");
    assert!(
        lib.exists(),
        "static library not built at {}",
        lib.display()
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join("client");
    let cc = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(root.join("include"))
        .arg(root.join("../../examples/c/client.c"))
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
    TempDir(std::env::temp_dir().join(format!("bulkhead-client-example-{}", std::process::id())))
}

#[test]
fn the_client_example_works_through_its_rounds_without_a_scheduler() {
    let dir = temp_dir();
    let Some(exe) = compile_example(&dir.0) else {
        return;
    };
    let out = Command::new(&exe)
        .arg("2")
        .env_remove("DEMOS_PARAMETERS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}: {stdout}", out.status);
    assert_eq!(
        stdout,
        "not started by a scheduler\nround 0 done\nround 1 done\n"
    );
}
