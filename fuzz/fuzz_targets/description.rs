//! The description loader on arbitrary bytes: YAML parsing, alias and depth limits,
//! deserialization, normalization and validation. Any result is fine; a panic, a hang
//! or unbounded memory is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = bulkhead_model::load_bytes(data, "fuzz.yaml");
});
