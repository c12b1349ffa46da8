//! Builds examples/c/task.c with cc against include/bulkhead/task.h and the static
//! library, and runs it.

#[path = "../../chan/tests/support/c_example.rs"]
mod c_example;

use std::process::Command;

#[test]
fn the_task_example_runs_its_jobs_under_a_supervisor_and_refuses_to_run_without() {
    use bulkhead_task::clock::now_ns;
    use bulkhead_task::link::{LinkSpec, TaskLink};
    const MS: u64 = 1_000_000;
    let dir = c_example::temp_dir("task");
    let Some(exe) = c_example::compile_example("task", &dir.0) else {
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
