//! Compiles tests/c/chan_test.c with the system C compiler against
//! include/bulkhead/chan.h and the built static library, and runs it: the C
//! API used by two processes (fork), with a named fifo (DriveOS Programs 1-2),
//! a memfd latest channel granted over SCM_RIGHTS with marshal callbacks, and
//! the error codes.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The static library cargo built with this test: the test binary and the
/// library's staticlib output both live in target/<profile>/deps/.
fn static_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().join("libbulkhead_chan.a")
}

fn leftovers(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{}{prefix}", bulkhead_chan::PREFIX)))
        .collect()
}

#[test]
fn c_program_uses_the_api_across_two_processes() {
    let lib = static_lib();
    assert!(
        lib.exists(),
        "static library not built at {}",
        lib.display()
    );
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler `cc` on this machine");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("bulkhead-chan-ctest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("chan_test");
    let cc = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(root.join("include"))
        .arg(root.join("tests/c/chan_test.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s", "-o"])
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let prefix = format!("ct{}-", std::process::id());
    let run = Command::new(&exe).arg(&prefix).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "C test failed ({}):\n{out}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    for case in [
        "ok programs_1_2 20001 messages",
        "ok latest_over_socket",
        "ok errors",
    ] {
        assert!(out.contains(case), "missing {case:?} in:\n{out}");
    }
    assert_eq!(
        leftovers(&prefix),
        Vec::<String>::new(),
        "named channels left behind"
    );
}
