//! The hand-written C header declares exactly the functions the shared library
//! exports: a function added on one side only fails here.

#[path = "support/header_check.rs"]
mod header_check;

const HEADERS: &[&str] = &["include/bulkhead/chan.h"];
const LIBRARY: &str = "libbulkhead_chan.so";

#[test]
fn the_header_declares_exactly_the_exported_functions() {
    header_check::assert_header_matches(HEADERS, LIBRARY);
}

#[test]
fn declarations_are_found_across_lines_and_not_in_comments() {
    let text = "/* int not_me(void); */\n#define X(a) a\ntypedef int (*cb)(int);\n\
                struct s *open_it(const char *name,\n    cb f);\nint close_it(struct s *s); // no(\n";
    let names: Vec<_> = header_check::declared(text).into_iter().collect();
    assert_eq!(names, ["close_it", "open_it"]);
}
