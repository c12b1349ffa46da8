//! The analysis against the shared test vectors (tests/data, see its README).

#[allow(dead_code)] // shared with tests/properties.rs; this binary uses `simulate` only
mod reference;

use bulkhead_analysis::prm::{minimal_budget, Bound, Policy};
use bulkhead_analysis::rta::response_times;
use bulkhead_analysis::task::{decimal_scale, explicit_order, to_ticks, utilization_cmp, Task};
use bulkhead_analysis::PeriodicSupply;
use serde_json::Value;
use std::cmp::Ordering;

fn load(name: &str) -> Value {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).expect("vector file")).expect("json")
}

fn num(v: &Value) -> f64 {
    v.as_f64().expect("number")
}

struct Set {
    name: String,
    tasks: Vec<Task>,
    order: Vec<usize>,
    scale: u64,
    wcrt: Vec<Option<f64>>,
    schedulable: bool,
}

fn sets() -> Vec<Set> {
    let doc = load("fixed_priority.json");
    doc.as_array()
        .expect("array of sets")
        .iter()
        .map(|s| {
            let ts = s["tasks"].as_array().expect("tasks");
            let values: Vec<f64> = ts
                .iter()
                .flat_map(|t| [num(&t["C"]), num(&t["T"]), num(&t["D"])])
                .collect();
            let scale = decimal_scale(&values).expect("at most 9 decimals");
            let tasks = ts
                .iter()
                .map(|t| {
                    let c = |k: &str| to_ticks(num(&t[k]), scale);
                    Task::new(c("C"), c("T"), c("D"))
                })
                .collect();
            let prios: Vec<u32> = ts
                .iter()
                .map(|t| t["priority"].as_u64().expect("priority") as u32)
                .collect();
            Set {
                name: s["name"].as_str().expect("name").to_string(),
                tasks,
                order: explicit_order(&prios),
                scale,
                wcrt: ts.iter().map(|t| t["wcrt"].as_f64()).collect(),
                schedulable: s["schedulable"].as_bool().expect("schedulable"),
            }
        })
        .collect()
}

#[test]
fn every_numeric_wcrt_matches_exactly() {
    let mut compared = 0;
    for set in sets() {
        let ours = response_times(&set.tasks, &set.order, &PeriodicSupply::dedicated());
        for (i, expected) in set.wcrt.iter().enumerate() {
            if let Some(w) = expected {
                assert_eq!(
                    ours[i].wcrt,
                    Some(to_ticks(*w, set.scale)),
                    "set {} task {i}: vector {w}",
                    set.name
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 500, "only {compared} WCRTs compared");
}

#[test]
fn schedulability_verdicts_match() {
    for set in sets() {
        let ours = response_times(&set.tasks, &set.order, &PeriodicSupply::dedicated());
        let ok = ours
            .iter()
            .zip(&set.tasks)
            .all(|(r, t)| r.wcrt.is_some_and(|w| w <= t.deadline));
        assert_eq!(ok, set.schedulable, "set {}", set.name);
    }
}

/// Where the vector says `null`, bulkhead says `null` exactly when the level-i busy
/// period is unbounded; otherwise its finite WCRT equals the exact simulation of the
/// tasks of priority >= i over their hyperperiod.
#[test]
fn null_wcrts_are_unbounded_levels_or_simulated_exactly() {
    let mut nulls = 0;
    for set in sets() {
        let ours = response_times(&set.tasks, &set.order, &PeriodicSupply::dedicated());
        for (pos, &i) in set.order.iter().enumerate() {
            if set.wcrt[i].is_some() {
                continue;
            }
            nulls += 1;
            let hep: Vec<Task> = set.order[..=pos].iter().map(|&k| set.tasks[k]).collect();
            if utilization_cmp(&hep, 1, 1) == Ordering::Greater {
                assert_eq!(ours[i].wcrt, None, "set {} task {i}", set.name);
            } else {
                let rank: Vec<usize> = (0..hep.len()).collect();
                let (sim, _) = reference::simulate(&hep, &rank, false);
                assert_eq!(ours[i].wcrt, Some(sim[pos]), "set {} task {i}", set.name);
            }
        }
    }
    assert!(nulls > 0);
}

/// Shin & Lee's periodic resource model: minimal Θ for each Π (vector values to 4
/// decimals, tolerance 1e-3). Times are scaled by 10^6 so Θ is exact to 1e-6.
#[test]
fn prm_minimal_budgets() {
    let doc = load("rm_example.json");
    let scale = 1_000_000;
    let tasks: Vec<Task> = doc["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| {
            Task::new(
                to_ticks(num(&t["C"]), scale),
                to_ticks(num(&t["T"]), scale),
                to_ticks(num(&t["D"]), scale),
            )
        })
        .collect();
    let rm = Policy::FixedPriority(vec![0, 1, 2]);
    let cases = [
        ("fp_exact", &rm, Bound::Exact),
        ("fp_linear", &rm, Bound::Linear),
        ("edf_exact", &Policy::Edf, Bound::Exact),
        ("edf_linear", &Policy::Edf, Bound::Linear),
    ];
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), 4);
    for r in results {
        let period = to_ticks(num(&r["Pi"]), scale);
        for (key, policy, bound) in cases {
            let theta = minimal_budget(&tasks, policy, period, bound).expect("feasible") as f64
                / scale as f64;
            let expected = num(&r[key]);
            assert!(
                (theta - expected).abs() <= 1e-3,
                "Π = {} {key}: ours {theta}, vector {expected}",
                r["Pi"]
            );
        }
    }
}
