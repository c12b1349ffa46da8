//! Shared by the header tests of the crates with a C API (chan, client, task): the
//! hand-written C header declares exactly the functions the shared library exports.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Names of the functions `text` (a C header) declares: an identifier followed by `(`
/// outside comments, preprocessor lines and typedefs.
pub fn declared(text: &str) -> BTreeSet<String> {
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

/// Asserts that `headers` (paths from the including crate's root) declare exactly the
/// functions that `library` (a shared library cargo built beside the test) exports.
pub fn assert_header_matches(headers: &[&str], library: &str) {
    let lib = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .join(library);
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
    let declared: BTreeSet<String> = headers
        .iter()
        .flat_map(|h| declared(&std::fs::read_to_string(root.join(h)).unwrap()))
        .collect();
    let missing: Vec<_> = exported.difference(&declared).collect();
    let extra: Vec<_> = declared.difference(&exported).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{headers:?}: exported but not declared: {missing:?}; declared but not exported: {extra:?}"
    );
}
