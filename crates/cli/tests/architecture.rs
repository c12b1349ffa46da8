//! docs/architecture.md says what the workspace is: each crate's direct bulkhead
//! dependencies in its diagram, whose lines are the layers (highest first), and a row per
//! crate outside `bench/` in its table. These tests hold the page to `cargo metadata`, so
//! that the page cannot drift from the Cargo.toml files and no crate imports a higher one.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Per workspace crate (name without `bulkhead-`), its directory and the bulkhead crates
/// of its `[dependencies]`.
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

/// One line of the page's diagram: the crates it names and the dependencies it lists.
struct Line {
    names: Vec<String>,
    deps: BTreeSet<String>,
}

/// The page's diagram, its lines in the page's order (the highest layer first).
fn diagram(page: &str) -> Vec<Line> {
    let block = page.split("```").nth(1).expect("the dependency diagram");
    let mut out = Vec::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        if let Some((name, deps)) = line.split_once("──") {
            let deps = deps.split('(').next().unwrap();
            let deps = deps.split(',').map(|d| d.trim().to_string()).collect();
            let names = vec![name.trim().to_string()];
            out.push(Line { names, deps });
        } else if let Some((names, _)) = line.split_once(": no bulkhead crate") {
            let names = names.split(',').map(|n| n.trim().to_string()).collect();
            let deps = BTreeSet::new();
            out.push(Line { names, deps });
        } else {
            panic!("docs/architecture.md's diagram has a line it cannot read: {line:?}");
        }
    }
    out
}

/// Per crate the diagram names, its layer (the index of its line) and listed dependencies.
fn layers(lines: &[Line]) -> BTreeMap<&str, (usize, &BTreeSet<String>)> {
    let mut out = BTreeMap::new();
    for (layer, line) in lines.iter().enumerate() {
        for name in &line.names {
            let again = out.insert(name.as_str(), (layer, &line.deps));
            assert!(again.is_none(), "the diagram names `{name}` twice");
        }
    }
    out
}

/// The crates among `crates` whose dependency on a crate on the same or a higher line of
/// the diagram breaks its layering, as `crate -> dependency`.
fn upward(
    crates: &BTreeMap<String, (String, BTreeSet<String>)>,
    layer: &BTreeMap<&str, (usize, &BTreeSet<String>)>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, (_, deps)) in crates {
        let Some((own, _)) = layer.get(name.as_str()) else {
            continue;
        };
        for dep in deps {
            match layer.get(dep.as_str()) {
                Some((theirs, _)) if theirs > own => {}
                _ => out.push(format!("{name} -> {dep}")),
            }
        }
    }
    out
}

#[test]
fn the_architecture_page_matches_the_workspace() {
    let page = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let crates = metadata();
    let lines = diagram(&page);
    let drawn = layers(&lines);
    for (name, (dir, deps)) in &crates {
        assert_eq!(
            drawn.get(name.as_str()).map(|(_, deps)| *deps),
            Some(deps),
            "docs/architecture.md's diagram line of `{name}` does not list its dependencies"
        );
        if dir.starts_with("bench/") {
            continue;
        }
        let row = format!("| `bulkhead-{name}` | `{dir}` |");
        assert!(
            page.contains(&row),
            "docs/architecture.md has no row `{row}`"
        );
    }
    let extra: Vec<&&str> = drawn.keys().filter(|n| !crates.contains_key(**n)).collect();
    assert!(
        extra.is_empty(),
        "the diagram names crates the workspace lacks: {extra:?}"
    );
}

#[test]
fn no_crate_depends_on_a_crate_of_its_own_or_a_higher_layer() {
    let page = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let lines = diagram(&page);
    let broken = upward(&metadata(), &layers(&lines));
    assert!(
        broken.is_empty(),
        "dependencies on the same or a higher line of docs/architecture.md's diagram: {broken:?}"
    );
}

#[test]
fn a_dependency_on_a_higher_line_is_found() {
    let page = "```\nruntime ── os\nos: no bulkhead crate\n```\n";
    let lines = diagram(page);
    let mut crates = BTreeMap::new();
    let os = BTreeSet::from(["runtime".to_string()]);
    crates.insert("os".to_string(), ("crates/os".to_string(), os));
    let runtime = BTreeSet::from(["os".to_string()]);
    crates.insert(
        "runtime".to_string(),
        ("crates/runtime".to_string(), runtime),
    );
    assert_eq!(upward(&crates, &layers(&lines)), ["os -> runtime"]);
}
