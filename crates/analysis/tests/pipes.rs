//! The tuned-pipe solver against Boomerang's (RTAS 2020) Tables I, III and V.

use bulkhead_analysis::pipes::{apply, solve, Solution};
use bulkhead_analysis::system::{analyze_system, Options};
use proptest::prelude::*;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// Quest on CPU 0 (fixed priority), Linux on CPU 1 (EDF); the gateway's reader and writer
/// of `rav4` take the place of the device path of Table I each way (USB_BH and mhydra_rx,
/// mhydra_tx and USB_BH: 1 ms each, so one 2 ms period per direction).
fn system(pipelines: &str) -> String {
    format!(
        "system: {{}}
partitions:
  - {{name: quest, kind: rt, cpus: 0}}
  - {{name: linux, kind: rt, cpus: 1, scheduler: edf}}
buses:
  - {{name: rav4, gateway: quest, period: 2ms, reader_budget: 300us, writer_budget: 300us,
     clients: [{{partition: linux, allow: [0x100]}}]}}
pipelines:
{pipelines}"
    )
}

fn solved(pipelines: &str) -> Solution {
    let loaded = bulkhead_model::load_str(&system(pipelines), "t.yaml").expect("loads");
    let mut all = solve(&loaded.system, &Options::default());
    assert_eq!(all.len(), 1);
    all.remove(0)
}

fn periods(s: &Solution) -> Vec<(String, u64)> {
    let stages = s.stages.iter();
    stages.map(|t| (t.name.clone(), t.period_ns)).collect()
}

fn p(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|&(n, t)| (n.to_string(), t)).collect()
}

const P1: &str = "  - name: p1
    spec: CanRead|ProcData|CanWrite[0%,10ms]
    stages:
      CanRead: {partition: quest, wcet: 100us, input: can:rav4}
      ProcData: {partition: linux, wcet: 200us}
      CanWrite: {partition: quest, wcet: 100us, output: can:rav4}
";

/// Table I, pipeline 1: rate matching gives CanRead, ProcData and CanWrite the 2 ms of
/// Table I: (10 ms - 2 x 2 ms of the gateway) / 3; expected delay 10 ms (IV-A).
#[test]
fn table_i_pipeline_1_is_10_ms() {
    let s = solved(P1);
    assert!(s.feasible, "{:?}", s.failure);
    let want = [
        ("CanRead", 2 * MS),
        ("ProcData", 2 * MS),
        ("CanWrite", 2 * MS),
    ];
    assert_eq!(periods(&s), p(&want));
    assert_eq!(s.e2e_delay_bound_ns, 10 * MS);
    assert_eq!(s.loss_bound, 0.0);
    let budgets: Vec<u64> = s.stages.iter().map(|t| t.budget_ns).collect();
    assert_eq!(budgets, [100 * US, 200 * US, 100 * US]);
    // The exact bound adds each stage's WCRT to its period: larger than the paper's.
    let exact = s.exact_delay_bound_ns.expect("every WCRT is bounded");
    assert!(exact > 10 * MS && exact < 20 * MS, "{exact}");
    assert!(s.buffers.iter().all(|b| b.kind == "latest" && b.depth == 1));
    // Phased releases (Figure 7): each stage released T/n after its producer, n = 3.
    let offsets: Vec<u64> = s.stages.iter().map(|t| t.offset_ns).collect();
    assert_eq!(offsets, [0, 2 * MS / 3, 4 * MS / 3]);
    // `apply` gives the stages' tasks these offsets, for `run`.
    let loaded = bulkhead_model::load_str(&system(P1), "t.yaml").expect("loads");
    let applied = apply(&loaded.system, std::slice::from_ref(&s));
    let task = |name: &str| {
        let tasks = applied.partitions.iter().flat_map(|q| q.tasks.iter());
        tasks
            .clone()
            .find(|t| t.name == name)
            .expect("a stage task")
            .offset
    };
    assert_eq!(
        ["CanRead", "ProcData", "CanWrite"].map(task).to_vec(),
        offsets
    );
}

/// Table I, pipeline 2: (8 ms - 2 x 2 ms) / 2 = 2 ms for RTFusion and RTControl; 8 ms.
#[test]
fn table_i_pipeline_2_is_8_ms() {
    let s = solved(
        "  - name: p2
    spec: RTFusion|RTControl[0%,8ms]
    stages:
      RTFusion: {partition: quest, wcet: 100us, input: can:rav4}
      RTControl: {partition: quest, wcet: 100us, output: can:rav4}
",
    );
    assert!(s.feasible, "{:?}", s.failure);
    let want = [("RTFusion", 2 * MS), ("RTControl", 2 * MS)];
    assert_eq!(periods(&s), p(&want));
    assert_eq!(s.e2e_delay_bound_ns, 8 * MS);
}

/// Table III (20% loss): ProcData and CanWrite at 2.5 ms give 11 ms and a loss bound of
/// 1 - 2/2.5 = 20%; RTControl at 2.5 ms gives 8.5 ms.
#[test]
fn table_iii_delays_and_loss() {
    let s = solved(
        "  - name: p1
    spec: CanRead|ProcData|CanWrite[20%,11ms]
    stages:
      CanRead: {partition: quest, wcet: 100us, input: can:rav4}
      ProcData: {partition: linux, wcet: 200us, period: 2.5ms}
      CanWrite: {partition: quest, wcet: 100us, period: 2.5ms, output: can:rav4}
",
    );
    assert!(s.feasible, "{:?}", s.failure);
    assert_eq!(s.stages[0].period_ns, 2 * MS);
    assert_eq!(s.e2e_delay_bound_ns, 11 * MS);
    assert!((s.loss_bound - 0.2).abs() < 1e-12);
    let s = solved(
        "  - name: p2
    spec: RTFusion|RTControl[20%,8.5ms]
    stages:
      RTFusion: {partition: quest, wcet: 100us, input: can:rav4}
      RTControl: {partition: quest, wcet: 100us, period: 2.5ms, output: can:rav4}
",
    );
    assert!(s.feasible, "{:?}", s.failure);
    assert_eq!(s.e2e_delay_bound_ns, 8_500 * US);
    assert!((s.loss_bound - 0.2).abs() < 1e-12);
}

/// Table V (FIFO): buffers of 4, 2 and 4 messages between CanRead and ProcData,
/// ProcData and CanWrite, RTFusion and RTControl.
#[test]
fn table_v_fifo_depths() {
    let s = solved(
        "  - name: p1
    spec: '*CanRead|ProcData|CanWrite'
    stages:
      CanRead: {partition: quest, wcet: 100us, period: 2ms, input: can:rav4}
      ProcData: {partition: linux, wcet: 200us, period: 4ms}
      CanWrite: {partition: quest, wcet: 100us, budget: 200us, period: 4ms, output: can:rav4}
",
    );
    assert!(s.feasible, "{:?}", s.failure);
    let depths: Vec<u64> = s.buffers.iter().map(|b| b.depth).collect();
    assert_eq!(depths, [4, 2]);
    assert!(s.buffers.iter().all(|b| b.kind == "fifo"));
    assert_eq!(s.stages[2].messages_per_period, 2);
    let s = solved(
        "  - name: p2
    spec: '*RTFusion|RTControl'
    stages:
      RTFusion: {partition: quest, wcet: 100us, period: 2ms, input: can:rav4}
      RTControl: {partition: quest, wcet: 125us, period: 2.5ms, output: can:rav4}
",
    );
    assert_eq!(s.buffers[0].depth, 4);
}

/// A delay below what the fixed stages take is infeasible, naming the stage and test.
#[test]
fn infeasible_pipelines_name_stage_and_test() {
    let s = solved(
        "  - name: p
    spec: Slow[0%,5ms]
    stages:
      Slow: {partition: linux, wcet: 4ms, input: can:rav4, output: can:rav4}
",
    );
    assert!(!s.feasible);
    let f = s.failure.expect("a failure");
    assert_eq!(
        (f.stage.as_str(), f.test.as_str()),
        ("Slow", "e2e-delay"),
        "{f:?}"
    );
    let s = solved(
        "  - name: p
    spec: A|B
    stages:
      A: {partition: quest, wcet: 900us, period: 2ms, input: can:rav4}
      B: {partition: quest, wcet: 900us, period: 2ms, output: can:rav4}
",
    );
    let f = s.failure.expect("quest is overloaded");
    assert_eq!(f.test, "rta", "{f:?}");
}

/// Steps 2 to 4 of III-E: a partition too loaded for rate matching's periods makes the
/// solver scale them by α, then halve producers and double consumers' budgets.
#[test]
fn scaling_and_halving_reach_the_delay() {
    let s = solved(
        "  - name: p
    spec: '*A|B|C[100/s,30ms]'
    stages:
      A: {partition: quest, wcet: 2ms, input: can:rav4}
      B: {partition: quest, wcet: 3ms}
      C: {partition: linux, wcet: 1ms, output: can:rav4}
",
    );
    assert!(s.feasible, "{:?}", s.failure);
    assert!(s.e2e_delay_bound_ns <= 30 * MS);
    assert!(s.throughput_per_s >= 100.0);
    for st in &s.stages {
        assert!(st.period_ns > st.budget_ns, "{st:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]
    /// Every feasible solution meets its QoS by the paper's conditions and its stages,
    /// placed in their partitions, pass the analysis.
    #[test]
    fn solutions_meet_their_conditions(
        wcets in prop::collection::vec((50u64..800, any::<bool>()), 1..5),
        delay_ms in 3u64..40,
        fifo in any::<bool>(),
    ) {
        let names: Vec<String> = (0..wcets.len()).map(|i| format!("S{i}")).collect();
        let star = if fifo { "*" } else { "" };
        let qos = if fifo { "50/s" } else { "50%" };
        let mut text = format!("  - name: p\n    spec: '{star}{}[{qos},{delay_ms}ms]'\n    stages:\n", names.join("|"));
        for (i, (w, linux)) in wcets.iter().enumerate() {
            let part = if *linux { "linux" } else { "quest" };
            let mut ends = String::new();
            if i == 0 { ends += ", input: can:rav4"; }
            if i + 1 == wcets.len() { ends += ", output: can:rav4"; }
            text += &format!("      S{i}: {{partition: {part}, wcet: {w}us{ends}}}\n");
        }
        let loaded = bulkhead_model::load_str(&system(&text), "t.yaml").expect("loads");
        let solutions = solve(&loaded.system, &Options::default());
        let s = &solutions[0];
        if s.feasible {
            prop_assert!(s.e2e_delay_bound_ns <= delay_ms * MS);
            prop_assert!(s.exact_delay_bound_ns.is_some_and(|e| e >= s.e2e_delay_bound_ns));
            if fifo { prop_assert!(s.throughput_per_s >= 50.0); } else { prop_assert!(s.loss_bound <= 0.5); }
            for st in &s.stages {
                prop_assert!(st.period_ns > st.budget_ns);
            }
            let report = analyze_system(&apply(&loaded.system, &solutions));
            prop_assert!(report.schedulable);
        } else {
            prop_assert!(s.failure.is_some());
        }
    }
}
