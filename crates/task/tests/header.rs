//! The hand-written C header declares exactly the functions the shared library
//! exports: a function added on one side only fails here.

#[path = "../../chan/tests/support/header_check.rs"]
mod header_check;

/// The headers declaring what the library exports (the task library links the
/// channel library, whose C API it exports too).
const HEADERS: &[&str] = &["include/bulkhead/task.h", "../chan/include/bulkhead/chan.h"];
const LIBRARY: &str = "libbulkhead_task.so";

#[test]
fn the_header_declares_exactly_the_exported_functions() {
    header_check::assert_header_matches(HEADERS, LIBRARY);
}
