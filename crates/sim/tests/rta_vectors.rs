//! On the fixed-priority vectors (tests/data/fixed_priority.json,
//! pyCPA busy-window analysis cross-checked with SimSo), the maximum response time
//! simulated over one hyperperiod from synchronous release equals the vectors' wcrt.

mod common;

use bulkhead_sim::*;
use common::*;
use serde_json::Value;

/// Time unit of the vectors in nanoseconds: 1 unit = 1 ms, so decimals such as
/// 1.25 stay exact integers.
const UNIT: f64 = 1e6;

struct Vector {
    name: String,
    spec: Spec,
    wcrt: Vec<Option<u64>>,
    hyperperiod: u64,
}

fn ns(v: &Value) -> u64 {
    (v.as_f64().unwrap() * UNIT).round() as u64
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn vectors() -> Vec<Vector> {
    let text = include_str!("data/fixed_priority.json");
    let entries: Vec<Value> = serde_json::from_str(text).unwrap();
    entries
        .iter()
        .map(|entry| {
            let mut spec = one_cpu(Policy::FixedPriority);
            let tasks = entry["tasks"].as_array().unwrap();
            let mut wcrt = Vec::new();
            let mut hyperperiod = 1u64;
            for task in tasks {
                let (c, t, d) = (ns(&task["C"]), ns(&task["T"]), ns(&task["D"]));
                let priority = task["priority"].as_u64().unwrap() as u32;
                let i = add_task(
                    &mut spec,
                    task["name"].as_str().unwrap(),
                    ServerKind::Unlimited,
                    c,
                    t,
                    priority,
                );
                spec.tasks[i].deadline = d;
                wcrt.push(task["wcrt"].as_f64().map(|w| (w * UNIT).round() as u64));
                hyperperiod = hyperperiod / gcd(hyperperiod, t) * t;
            }
            Vector {
                name: entry["name"].as_str().unwrap().to_string(),
                spec,
                wcrt,
                hyperperiod,
            }
        })
        .collect()
}

fn max_responses(v: &Vector) -> Vec<u64> {
    let options = Options {
        drain: true,
        ..Options::until(v.hyperperiod)
    };
    let report = simulate(&v.spec, options, &mut bulkhead_trace::Discard).unwrap();
    report.tasks.iter().map(|t| t.max_response_ns).collect()
}

/// Entries whose hyperperiod holds at most this many jobs run in the default suite.
const MAX_JOBS: u64 = 2_000_000;

fn jobs_in_hyperperiod(v: &Vector) -> u64 {
    v.spec.tasks.iter().map(|t| v.hyperperiod / period(t)).sum()
}

fn period(t: &TaskSpec) -> u64 {
    match t.release {
        Release::Periodic { period, .. } => period,
        _ => unreachable!("vectors are periodic"),
    }
}

#[test]
fn simulated_maximum_response_equals_vector_wcrt() {
    let mut checked = 0;
    for v in vectors() {
        if v.wcrt.iter().any(Option::is_none) || jobs_in_hyperperiod(&v) > MAX_JOBS {
            continue;
        }
        let expected: Vec<u64> = v.wcrt.iter().map(|w| w.unwrap()).collect();
        assert_eq!(max_responses(&v), expected, "vector {}", v.name);
        checked += 1;
    }
    // 127 entries: 9 overloaded ones (wcrt null) and one with a 1.2e10 hyperperiod are left out.
    assert_eq!(checked, 117);
}

#[test]
fn overloaded_vectors_miss_deadlines() {
    for v in vectors()
        .into_iter()
        .filter(|v| v.wcrt.iter().any(Option::is_none))
    {
        let report = simulate(
            &v.spec,
            Options::until(v.hyperperiod * 4),
            &mut bulkhead_trace::Discard,
        )
        .unwrap();
        let misses: u64 = report.tasks.iter().map(|t| t.misses).sum();
        assert!(misses > 0, "vector {}", v.name);
    }
}

/// The 1.2e10-unit hyperperiod holds about 5.6e8 jobs: a minute or two in release
/// mode. Run with `cargo test --release -p bulkhead-sim --test rta_vectors -- --ignored`.
#[test]
#[ignore = "long: minutes in release mode (scripts/test.sh skips it)"]
fn long_hyperperiod_vector_over_its_full_hyperperiod() {
    let v = vectors()
        .into_iter()
        .find(|v| v.name == "long-hyperperiod")
        .unwrap();
    let expected: Vec<u64> = v.wcrt.iter().map(|w| w.unwrap()).collect();
    assert_eq!(max_responses(&v), expected);
}
