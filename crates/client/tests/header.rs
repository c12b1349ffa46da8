//! The hand-written C header declares exactly the functions the shared library
//! exports: a function added on one side only fails here.

#[path = "../../chan/tests/support/header_check.rs"]
mod header_check;

const HEADERS: &[&str] = &["include/bulkhead/client.h", "include/demos-sch.h"];
const LIBRARY: &str = "libbulkhead_client.so";

#[test]
fn the_header_declares_exactly_the_exported_functions() {
    header_check::assert_header_matches(HEADERS, LIBRARY);
}
