//! Builds examples/c/task.c with cc against include/bulkhead/task.h and the static
//! library, and runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `examples/c/task.c` against the crate's header and the static library cargo
/// built with this test (both in target/<profile>/deps/); `None` without a C compiler.
fn compile_example(dir: &Path) -> Option<PathBuf> {
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler `cc`");
        return None;
    }
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().join("libbulkhead_task.a");
    assert!(
        lib.exists(),
        "static library not built at {}",
        lib.display()
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join("task");
    let cc = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(root.join("include"))
        .arg(root.join("../../examples/c/task.c"))
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
    TempDir(std::env::temp_dir().join(format!("bulkhead-task-example-{}", std::process::id())))
}

#[test]
fn the_task_example_runs_its_jobs_under_a_supervisor_and_refuses_to_run_without() {
    use bulkhead_task::clock::now_ns;
    use bulkhead_task::supervisor::{LinkSpec, TaskLink};
    const MS: u64 = 1_000_000;
    let dir = temp_dir();
    let Some(exe) = compile_example(&dir.0) else {
        return;
    };
    let alone = Command::new(&exe)
        .env_remove("BULKHEAD_TASK")
        .output()
        .unwrap();
    assert_eq!(alone.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&alone.stderr).contains("not started by bulkhead"));
    let spec = LinkSpec {
        name: "c-example".into(),
        task_index: 0,
        budget_ns: MS,
        period_ns: 4 * MS,
        deadline_ns: 3 * MS,
        epoch_ns: now_ns() + 5 * MS,
        ring_depth: 16,
    };
    let link = TaskLink::create(&spec).unwrap();
    let mut cmd = Command::new(&exe);
    cmd.arg("5");
    link.prepare(&mut cmd);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with("C=1000000 T=4000000 D=3000000 ns\n"),
        "{stdout}"
    );
    assert!(stdout.ends_with("5 jobs\n"), "{stdout}");
    assert_eq!(link.named_counters(), vec![("jobs".to_string(), 5)]);
}
