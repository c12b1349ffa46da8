//! The C API: a DEmOS-style C program built against `include/bulkhead/client.h`
//! and the static library, outside a scheduler (DEmOS test/0100-api.t: it must
//! fail) and under `bulkhead run` (root and cgroups; skipped otherwise): it prints
//! one argument per window.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the C program; `None` (with the reason printed) when no C compiler or
/// static library is at hand.
fn build(name: &str) -> Option<PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // target/<profile>/deps/c_api-<hash> -> target/<profile>/libbulkhead_client.a
    let profile_dir = std::env::current_exe()
        .ok()?
        .parent()?
        .parent()?
        .to_path_buf();
    let lib = profile_dir.join("libbulkhead_client.a");
    if !lib.exists() {
        eprintln!("skipped: {} not built", lib.display());
        return None;
    }
    let out = std::env::temp_dir().join(format!("bulkhead-api-test-{}-{name}", std::process::id()));
    let status = Command::new("cc")
        .arg(manifest.join("tests/c/api_test.c"))
        .arg("-I")
        .arg(manifest.join("include"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        other => {
            eprintln!("skipped: cannot compile the C test program: {other:?}");
            None
        }
    }
}

#[test]
fn outside_a_scheduler_the_c_api_fails_with_enokey() {
    let Some(program) = build("outside") else {
        return;
    };
    let out = Command::new(&program)
        .env_remove("DEMOS_PARAMETERS")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains(&format!("errno {}", bulkhead_os::errno::ENOKEY)));
    let _ = std::fs::remove_file(program);
}

#[test]
#[ignore = "needs root: cgroups"]
fn a_demos_program_runs_unchanged_under_bulkhead_run() {
    let Some(program) = build("under") else {
        return;
    };
    bulkhead_runtime::Hierarchy::detect().expect("cgroups");
    // The run's working directory, under /tmp: a be process's private /tmp shows it
    // (and only it) at its path, so the program and its output live there. The process
    // runs under a uid of its own: everyone may write here.
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("bulkhead-api-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _gone = RemovedOnDrop(dir.clone());
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let inside = dir.join("under");
    std::fs::rename(&program, &inside).unwrap();
    let out = dir.join("out.txt");
    let yaml = format!(
        "{{windows: [{{length: 5, slices: [{{cpu: 0, sc_partition: SC1}}]}}], partitions: [{{name: SC1, processes: [{{cmd: {} {} first second, budget: 4}}]}}]}}",
        inside.display(),
        out.display()
    );
    let system = bulkhead_model::load_str(&yaml, "api.yaml").unwrap().system;
    let options = bulkhead_runtime::RunOptions {
        // Long enough for the program to start (sandbox, exec) and write on a loaded
        // machine; it loops after writing, so a longer run changes nothing else.
        timeout: Some(std::time::Duration::from_millis(500)),
        workdir: dir.clone(),
        ..Default::default()
    };
    let outcome = bulkhead_runtime::run(&system, &options).unwrap();
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "first\nsecond\n");
}

/// A directory removed when the test ends, failed or not.
struct RemovedOnDrop(std::path::PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
