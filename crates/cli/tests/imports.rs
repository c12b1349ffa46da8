//! Within each crate, modules import one another without cycles: the modules a
//! module names by a `crate::` path form a directed acyclic graph (issue 33, item 6):
//! a cycle fails the test, naming the crate and its modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Every module of the crate whose sources are in `src`, by path (`a::b`; the crate
/// root is ``), with its code: line comments and the test module left out.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(parts.join("::"), code(&text));
        }
    }
    out
}

/// `text` without its line comments and its test module.
fn code(text: &str) -> String {
    let text = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    let lines = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default());
    lines.collect::<Vec<_>>().join("\n")
}

/// The paths a `crate::` path names: `crate::a::b` one, `crate::{a, b::c}` one per item.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let items = match rest.strip_prefix('{') {
            Some(group) => group
                .split('}')
                .next()
                .unwrap_or_default()
                .split(',')
                .collect(),
            None => vec![rest],
        };
        for item in items {
            let word = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
            let path = item.trim_start().split(|c| !word(c)).next();
            let path = path.unwrap_or_default();
            out.push(
                path.split("::")
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
            );
        }
    }
    out
}

/// Per module, the other modules it names, neither its ancestors nor its descendants.
fn imports(modules: &BTreeMap<String, String>) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut out = BTreeMap::new();
    for (name, code) in modules {
        let mut named = BTreeSet::new();
        for path in crate_paths(code) {
            let longest = (1..=path.len())
                .rev()
                .find_map(|k| modules.get_key_value(&path[..k].join("::")));
            if let Some((other, _)) = longest {
                let related = |a: &str, b: &str| b.starts_with(&format!("{a}::"));
                if other != name && !related(name, other) && !related(other, name) {
                    named.insert(other.as_str());
                }
            }
        }
        out.insert(name.as_str(), named);
    }
    out
}

/// The cycles of `graph`: its strongly connected components of more than one module
/// (Tarjan), each sorted, in order.
fn cycles<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Tarjan<'g, 'a> {
        graph: &'g BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    impl<'a> Tarjan<'_, 'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            for &w in self.graph.get(v).into_iter().flatten() {
                let low = match self.index.get(w) {
                    None => {
                        self.visit(w);
                        self.index[w].1
                    }
                    Some(&(i, _)) if self.stack.contains(&w) => i,
                    Some(_) => continue,
                };
                let entry = self.index.get_mut(v).unwrap();
                entry.1 = entry.1.min(low);
            }
            if self.index[v].0 == self.index[v].1 {
                let at = self.stack.iter().position(|&w| w == v).unwrap();
                let mut component = self.stack.split_off(at);
                if component.len() > 1 {
                    component.sort_unstable();
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for &v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

#[test]
fn modules_import_one_another_without_cycles() {
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    let crates = std::fs::read_dir(repo().join("crates")).unwrap();
    let mut dirs: Vec<_> = crates.map(|e| e.unwrap().path()).collect();
    dirs.sort();
    for dir in dirs.iter().filter(|d| d.join("src").is_dir()) {
        let modules = modules(&dir.join("src"));
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        for cycle in cycles(&imports(&modules)) {
            found.push((name.clone(), cycle.iter().map(|m| m.to_string()).collect()));
        }
    }
    assert!(
        found.is_empty(),
        "import cycles (crate, modules): {found:?}"
    );
}

#[test]
fn a_cycle_through_a_use_group_is_found_and_a_child_is_no_cycle() {
    let modules: BTreeMap<String, String> = [
        ("a", "use crate::{b::Thing, c};"),
        ("b", "fn f() { crate::a::g() }"),
        ("c", "use crate::c::d::X;"),
        ("c::d", "use crate::c::Y;"),
    ]
    .into_iter()
    .map(|(m, code)| (m.to_string(), code.to_string()))
    .collect();
    assert_eq!(cycles(&imports(&modules)), [vec!["a", "b"]]);
}
