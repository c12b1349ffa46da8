//! Every scenario `bulkhead run` can execute, on this machine (root; serialized with
//! the other rt test suites by `/run/bulkhead-rt-tests.lock`), against the bounds of
//! `analyze` and `solve` up to the platform's floor measured in the same run, and
//! against the simulation of the same scenario. `BULKHEAD_CONFORMANCE=NAME,...` runs
//! only the scenarios whose names start with one of them.

use bulkhead_conformance::run::Run;
use bulkhead_conformance::{conform, scenario, Executor, Scenario};

/// Scenarios whose `run` disagrees with their simulation in every run, for a reason of
/// ours not fixed yet: listed, with what disagrees, until it is fixed (their simulation
/// is still checked by tests/sim.rs). A scenario `run` cannot execute on a machine like
/// this one says so in its own header (`# run-cannot:`, `Run::cannot`).
const KNOWN: &[(&str, &str)] = &[];

/// Runs of one scenario before a disagreement fails the suite.
const ATTEMPTS: usize = 3;

fn chosen(s: &Scenario) -> bool {
    match std::env::var("BULKHEAD_CONFORMANCE") {
        Ok(names) => names.split(',').any(|n| s.name.starts_with(n.trim())),
        Err(_) => true,
    }
}

#[test]
#[ignore = "needs root: partitions under users of their own, cgroups and SCHED_DEADLINE"]
fn every_scenario_runs_as_it_simulates() {
    let run = Run::new().unwrap_or_else(|why| panic!("{why}"));
    let _lock = bulkhead_os::lock::exclusive_cpus().expect("the lock of the rt test suites");
    let started = std::time::Instant::now();
    let (mut ran, mut failed) = (0, Vec::new());
    for s in scenario::all().iter().filter(|s| chosen(s)) {
        if let Some((_, why)) = KNOWN.iter().find(|(name, _)| *name == s.name) {
            println!(
                "{}: not run: a known disagreement (docs/conformance.md): {why}",
                s.name
            );
            continue;
        }
        if let Some(why) = run.cannot(s) {
            println!("{}: not run: {why}", s.name);
            continue;
        }
        // A disagreement that a second or third run does not repeat was the machine's
        // (a VM's stall longer than the probe saw); one that every run repeats is ours.
        let mut attempts = Vec::new();
        for attempt in 1..=ATTEMPTS {
            let at = std::time::Instant::now();
            let v = conform(&run, s);
            println!(
                "{} (run {attempt} of at most {ATTEMPTS}): {} in {:.1} s{}",
                s.name,
                if v.passed() { "agrees" } else { "DISAGREES" },
                at.elapsed().as_secs_f64(),
                v.excused
                    .iter()
                    .map(|e| format!("\n  the platform's: {e}"))
                    .collect::<String>()
            );
            if v.passed() {
                break;
            }
            attempts.push(format!("run {attempt}:\n  {}", v.failures.join("\n  ")));
        }
        if attempts.len() == ATTEMPTS {
            failed.push(format!("{}:\n{}", s.name, attempts.join("\n")));
        } else if !attempts.is_empty() {
            println!(
                "{}: agreed after {} disagreeing run(s):\n{}",
                s.name,
                attempts.len(),
                attempts.join("\n")
            );
        }
        ran += 1;
    }
    println!(
        "{ran} scenarios in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
