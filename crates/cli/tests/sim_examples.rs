//! The examples simulate without warnings: their channels name the tasks at each end.

mod common;

#[test]
fn the_driveos_example_simulates_without_warnings() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/driveos.yaml");
    let out = common::bulkhead()
        .args(["sim", example, "--for", "10ms"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}
