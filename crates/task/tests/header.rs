//! The hand-written C header declares exactly the functions the shared library
//! exports: a function added on one side only fails here.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The headers declaring what the library exports (the task library links the
/// channel library, whose C API it exports too).
const HEADERS: &[&str] = &["include/bulkhead/task.h", "../chan/include/bulkhead/chan.h"];
const LIBRARY: &str = "libbulkhead_task.so";

/// Names of the functions `text` (a C header) declares: an identifier followed by `(`
/// outside comments, preprocessor lines and typedefs.
fn declared(text: &str) -> BTreeSet<String> {
    let mut code = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        code.push_str(&rest[..i]);
        rest = rest[i..].find("*/").map_or("", |j| &rest[i + j + 2..]);
    }
    code.push_str(rest);
    let mut names = BTreeSet::new();
    for statement in code
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
        .split(';')
        .filter(|s| !s.contains("typedef"))
    {
        let before = statement.split('(').next().unwrap_or("");
        if statement.contains('(') {
            let name = before
                .trim_end()
                .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("");
            if !name.is_empty() {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// The functions the shared library exports (`nm -D --defined-only`).
fn exported(lib: &Path) -> Option<BTreeSet<String>> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .ok()?;
    assert!(out.status.success(), "nm {}", lib.display());
    let names = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "T", name] => Some(name.to_string()),
            _ => None,
        })
        .collect();
    Some(names)
}

#[test]
fn the_header_declares_exactly_the_exported_functions() {
    let lib = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .join(LIBRARY);
    assert!(
        lib.exists(),
        "shared library not built at {}",
        lib.display()
    );
    let Some(exported) = exported(&lib) else {
        eprintln!("skipped: no `nm` on this machine");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let declared: BTreeSet<String> = HEADERS
        .iter()
        .flat_map(|h| declared(&std::fs::read_to_string(root.join(h)).unwrap()))
        .collect();
    let missing: Vec<_> = exported.difference(&declared).collect();
    let extra: Vec<_> = declared.difference(&exported).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{HEADERS:?}: exported but not declared: {missing:?}; declared but not exported: {extra:?}"
    );
}

#[test]
fn declarations_are_found_across_lines_and_not_in_comments() {
    let text = "/* int not_me(void); */\n#define X(a) a\ntypedef int (*cb)(int);\n\
                struct s *open_it(const char *name,\n    cb f);\nint close_it(struct s *s); // no(\n";
    let names: Vec<_> = declared(text).into_iter().collect();
    assert_eq!(names, ["close_it", "open_it"]);
}
