//! Builds examples/c/client.c with cc against include/bulkhead/client.h and the static
//! library, and runs it.

#[path = "../../chan/tests/support/c_example.rs"]
mod c_example;

use std::process::Command;

#[test]
fn the_client_example_works_through_its_rounds_without_a_scheduler() {
    let dir = c_example::temp_dir("client");
    let Some(exe) = c_example::compile_example("client", &dir.0) else {
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
