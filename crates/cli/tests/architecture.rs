//! docs/architecture.md says what the workspace is: each crate's direct bulkhead
//! dependencies in its diagram, and a row per crate in its table. This test holds the
//! page to `cargo metadata`, so that the page cannot drift from the Cargo.toml files.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Per workspace crate outside `bench/` (name without `bulkhead-`), its directory and
/// the bulkhead crates of its `[dependencies]`.
fn metadata() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let root = meta["workspace_root"].as_str().unwrap().to_string();
    let mut crates = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let manifest = p["manifest_path"].as_str().unwrap();
        let dir = Path::new(manifest).parent().unwrap();
        let dir = dir.strip_prefix(&root).unwrap().display().to_string();
        if dir.starts_with("bench/") {
            continue;
        }
        let name = p["name"].as_str().unwrap().trim_start_matches("bulkhead-");
        let deps = p["dependencies"].as_array().unwrap().iter();
        let deps = deps
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str()?.strip_prefix("bulkhead-"))
            .map(String::from)
            .collect();
        crates.insert(name.to_string(), (dir, deps));
    }
    crates
}

/// The page's diagram: per crate, the dependencies it lists.
fn diagram(page: &str) -> BTreeMap<String, BTreeSet<String>> {
    let block = page.split("```").nth(1).expect("the dependency diagram");
    let mut out = BTreeMap::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        if let Some((name, deps)) = line.split_once("──") {
            let deps = deps.split('(').next().unwrap();
            let deps = deps.split(',').map(|d| d.trim().to_string()).collect();
            out.insert(name.trim().to_string(), deps);
        } else if let Some((names, _)) = line.split_once(": no bulkhead crate") {
            for name in names.split(',') {
                out.insert(name.trim().to_string(), BTreeSet::new());
            }
        }
    }
    out
}

#[test]
fn the_architecture_page_matches_the_workspace() {
    let page = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let crates = metadata();
    let drawn = diagram(&page);
    for (name, (dir, deps)) in &crates {
        assert_eq!(
            drawn.get(name),
            Some(deps),
            "docs/architecture.md's diagram line of `{name}` does not list its dependencies"
        );
        let row = format!("| `bulkhead-{name}` | `{dir}` |");
        assert!(
            page.contains(&row),
            "docs/architecture.md has no row `{row}`"
        );
    }
    let extra: Vec<&String> = drawn.keys().filter(|n| !crates.contains_key(*n)).collect();
    assert!(
        extra.is_empty(),
        "the diagram names crates the workspace lacks: {extra:?}"
    );
}
