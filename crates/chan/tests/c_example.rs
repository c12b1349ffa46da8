//! Builds examples/c/chan.c with cc against include/bulkhead/chan.h and the static
//! library, and runs it.

#[path = "support/c_example.rs"]
mod c_example;

use std::process::Command;

#[test]
fn the_chan_example_passes_readings_between_two_processes() {
    let dir = c_example::temp_dir("chan");
    let Some(exe) = c_example::compile_example("chan", &dir.0) else {
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
