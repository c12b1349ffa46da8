//! Solved pipelines simulated: every message within the solver's exact bound
//! (Boomerang III-E; the analysis proves it, the simulation must never contradict it).

use bulkhead_analysis::pipes::{apply, solve};
use bulkhead_analysis::system::Options as AnalysisOptions;
use bulkhead_sim::pipes::pipeline_stats;
use bulkhead_sim::trace::Discard;
use bulkhead_sim::{from_system, Arrivals, BuildOptions, ExecModel, Options, Sim};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

fn description(wcets: &[(u64, bool)], delay_ms: u64, fifo: bool) -> String {
    let names: Vec<String> = (0..wcets.len()).map(|i| format!("S{i}")).collect();
    let (star, qos) = if fifo { ("*", "50/s") } else { ("", "50%") };
    let mut text = format!(
        "system: {{}}
partitions:
  - {{name: quest, kind: rt, cpus: 0, tasks: [{{name: load, budget: 1ms, period: 10ms}}]}}
  - {{name: linux, kind: rt, cpus: 1, scheduler: edf}}
pipelines:
  - name: p
    spec: '{star}{}[{qos},{delay_ms}ms]'
    stages:
",
        names.join("|")
    );
    for (i, (wcet, linux)) in wcets.iter().enumerate() {
        let partition = if *linux { "linux" } else { "quest" };
        let output = if i + 1 == wcets.len() {
            ", output: quest/sink/out"
        } else {
            ""
        };
        text += &format!("      S{i}: {{partition: {partition}, wcet: {wcet}us{output}}}\n");
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Every feasible pipeline, simulated with varied execution times, delivers every
    /// message within its exact bound, and a FIFO pipeline loses none
    /// (rate matching, Boomerang III-E condition 3: `solve` never promises what `sim`
    /// does not deliver).
    /// (A one-stage pipeline has no edge and so no channel to measure in simulation.)
    #[test]
    fn solved_pipelines_meet_their_bounds_in_simulation(
        wcets in prop::collection::vec((50u64..600, any::<bool>()), 2..5),
        delay_ms in 4u64..30,
        fifo in any::<bool>(),
        seed in 0u64..1000,
        varied in any::<bool>(),
    ) {
        let loaded = bulkhead_model::load_str(&description(&wcets, delay_ms, fifo), "p.yaml")
            .expect("loads");
        let solutions = solve(&loaded.system, &AnalysisOptions::default());
        prop_assume!(solutions[0].feasible);
        let solved = apply(&loaded.system, &solutions);
        let build = BuildOptions {
            exec: if varied { ExecModel::Uniform { min_pct: 10, max_pct: 100 } } else { ExecModel::Wcet },
            // Stages are released by their period's timer, as `run` releases them: the
            // bound (k T per stage) does not hold for a stage released up to 30% late.
            arrivals: Arrivals::Periodic,
            ..BuildOptions::default()
        };
        let spec = from_system(&solved, &build).expect("builds");
        let options = Options { seed, ..Options::until(500 * MS) };
        let report = Sim::new(&spec, options, false).expect("valid").run(&mut Discard);
        let stats = &pipeline_stats(&solved, &report.chains)[0];
        prop_assert!(stats.messages_out > 0, "{stats:?}");
        let exact = solutions[0].exact_delay_bound_ns.expect("bounded");
        prop_assert!(stats.max_e2e_ns.expect("delivered") <= exact, "{stats:?} > {exact}");
        if fifo {
            prop_assert_eq!(stats.lost, 0, "{:?}", stats);
            prop_assert!(report.channels.iter().all(|c| c.lost == 0), "{:?}", report.channels);
        }
    }
}

/// A MIMO pipeline (Boomerang Figure 6, `*(A|B),C|D|E,F`) with random fixed periods:
/// whatever the periods, a feasible solution loses nothing in simulation and keeps every
/// delay within its exact bound; an infeasible one names rate matching or a test of the
/// analysis.
fn mimo(periods: &[u64; 6], overflow: &str) -> String {
    let names = ["A", "B", "C", "D", "E", "F"];
    let mut text = format!(
        "system: {{}}
partitions:
  - {{name: quest, kind: rt, cpus: 0}}
  - {{name: linux, kind: rt, cpus: 1, scheduler: edf}}
pipelines:
  - name: m
    spec: '*(A|B),C|D|E,F'
    overflow: {overflow}
    stages:
"
    );
    for (name, t) in names.iter().zip(periods) {
        let (partition, end) = match *name {
            "D" => ("linux", ""),
            "E" | "F" => ("quest", ", output: quest/x/out"),
            _ => ("quest", ""),
        };
        text +=
            &format!("      {name}: {{partition: {partition}, wcet: 20us, period: {t}us{end}}}\n");
    }
    text
}

/// Solves the MIMO pipeline and, when feasible, simulates it: no loss, every delay
/// within the exact bound; when infeasible, the failing test is a named one.
fn mimo_delivers_what_solve_promises(
    periods: &[u64; 6],
    overflow: &str,
    seed: u64,
) -> Result<(), TestCaseError> {
    let loaded = bulkhead_model::load_str(&mimo(periods, overflow), "m.yaml").expect("loads");
    let solutions = solve(&loaded.system, &AnalysisOptions::default());
    let s = &solutions[0];
    if !s.feasible {
        let test = s
            .failure
            .as_ref()
            .map(|f| f.test.clone())
            .unwrap_or_default();
        prop_assert!(
            ["rate-matching", "rta", "edf-qpa"].contains(&test.as_str()),
            "{test}"
        );
        return Ok(());
    }
    prop_assert_eq!(s.loss_bound, 0.0);
    let solved = apply(&loaded.system, &solutions);
    let spec = from_system(&solved, &BuildOptions::default()).expect("builds");
    let options = Options {
        seed,
        ..Options::until(200 * MS)
    };
    let report = Sim::new(&spec, options, false)
        .expect("valid")
        .run(&mut Discard);
    let stats = &pipeline_stats(&solved, &report.chains)[0];
    prop_assert_eq!(stats.lost, 0, "{:?} {:?}", stats, report.channels);
    let exact = s.exact_delay_bound_ns.expect("bounded");
    prop_assert!(
        stats.max_e2e_ns.expect("delivered") <= exact,
        "{:?} > {}",
        stats,
        exact
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn mimo_pipelines_deliver_what_solve_promises(
        periods in prop::array::uniform6(prop::sample::select(vec![500u64, 1000, 2000, 2500, 4000])),
        overflow in prop::sample::select(vec!["block", "drop_newest", "drop_oldest"]),
        seed in 0u64..100,
    ) {
        mimo_delivers_what_solve_promises(&periods, overflow, seed)?;
    }
}

/// A join whose slow input (B, 4 ms, writing its 4 messages at once) and fast input
/// (C, 1 ms) match D's rate exactly: C's messages queue behind B's burst. Sized by C's
/// own rate alone, C->D (depth 2) lost 49 of 200 messages; the join's fifos now hold
/// the backlog of all its inputs.
#[test]
fn a_join_holds_the_backlog_of_a_bursty_input() {
    let periods = [1000, 4000, 1000, 500, 500, 500];
    for overflow in ["block", "drop_newest", "drop_oldest"] {
        mimo_delivers_what_solve_promises(&periods, overflow, 0).unwrap();
    }
}
