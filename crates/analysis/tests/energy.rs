//! `--min-energy`: the lowest static frequency per cluster at which every verdict passes,
//! and the energy per hyperperiod it saves.

use bulkhead_analysis::energy::min_energy;
use bulkhead_analysis::system::Options;

/// One rt task of 5 ms every 10 ms, deadline 9.5 ms, on CPU 0, whose cluster offers 50,
/// 55, 60 and 100 % of its top frequency: at 50 % it needs 10 ms (past its deadline), at
/// 60 % 8.33 ms; 55 % (9.09 ms) is the lowest that passes.
const SYSTEM: &str = "
system: {cpus: 0-1}
power:
  clusters:
    - cpus: 0
      idle_power: 0.1
      operating_points:
        - {frequency: 500, power: 0.5}
        - {frequency: 550, power: 0.6}
        - {frequency: 600, power: 0.7}
        - {frequency: 1000, power: 2}
partitions:
  - name: ctl
    kind: rt
    cpus: 0
    tasks: [{name: t, cmd: ./t, budget: 5ms, period: 10ms, deadline: 9.5ms}]
";

#[test]
fn chooses_the_operating_point_between_50_and_60_percent() {
    let system = bulkhead_model::load_str(SYSTEM, "t.yaml").unwrap().system;
    let found = min_energy(&system, &Options::default()).unwrap();
    assert_eq!(found.clusters[0].frequency_hz, Some(550_000_000));
    assert_eq!(found.hyperperiod_ns, 10_000_000);
    // At 550 MHz: busy ceil(5 ms x 1000/550) = 9 090 910 ns at 0.6 W, idle the rest at
    // 0.1 W; at 1000 MHz: 5 ms at 2 W and 5 ms at 0.1 W.
    let at_550 = 9_090_910e-9 * 0.6 + (10_000_000.0 - 9_090_910.0) * 1e-9 * 0.1;
    assert!((found.joules - at_550).abs() < 1e-12, "{}", found.joules);
    assert!(
        (found.joules_at_max - 0.0105).abs() < 1e-12,
        "{}",
        found.joules_at_max
    );
    assert!((found.saved_joules - (0.0105 - at_550)).abs() < 1e-12);
}

#[test]
fn a_set_unschedulable_at_the_top_has_no_frequency() {
    let overloaded = SYSTEM.replace("budget: 5ms", "budget: 9.9ms");
    let system = bulkhead_model::load_str(&overloaded, "t.yaml")
        .unwrap()
        .system;
    let found = min_energy(&system, &Options::default()).unwrap();
    assert_eq!(found.clusters[0].frequency_hz, None);
    let plain = bulkhead_model::load_str("partitions: [{name: a, kind: rt, cpus: 0, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}]\nsystem: {}\n", "t.yaml").unwrap().system;
    assert_eq!(
        min_energy(&plain, &Options::default())
            .unwrap_err()
            .to_string(),
        "--min-energy needs the description's `power:` section"
    );
}

/// The task's 8 ms were measured at 600 MHz. CPU-bound, it needs 8 x 600/500 = 9.6 ms at
/// 500 MHz (past its deadline of 9.5 ms) and 8 x 600/550 = 8.73 ms at 550 MHz. With a
/// quarter of it memory-bound, C(f) = 8 x (0.25 + 0.75 x 600/f): 9.2 ms at 500 MHz,
/// which passes, and 5.6 ms at 1000 MHz.
#[test]
fn a_memory_bound_task_measured_below_the_top_slows_down_less() {
    let measured = SYSTEM.replace("budget: 5ms", "budget: 8ms, wcet_frequency: 600");
    let system = bulkhead_model::load_str(&measured, "t.yaml")
        .unwrap()
        .system;
    let found = min_energy(&system, &Options::default()).unwrap();
    assert_eq!(found.clusters[0].frequency_hz, Some(550_000_000));

    let memory_bound = measured.replace(
        "wcet_frequency: 600",
        "wcet_frequency: 600, memory_bound: 0.25",
    );
    let system = bulkhead_model::load_str(&memory_bound, "t.yaml")
        .unwrap()
        .system;
    let found = min_energy(&system, &Options::default()).unwrap();
    assert_eq!(found.clusters[0].frequency_hz, Some(500_000_000));
    // At 500 MHz: 9.2 ms at 0.5 W, 0.8 ms idle at 0.1 W; at 1000 MHz: 5.6 ms at 2 W,
    // 4.4 ms at 0.1 W.
    let at_500 = 9.2e-3 * 0.5 + 0.8e-3 * 0.1;
    let at_max = 5.6e-3 * 2.0 + 4.4e-3 * 0.1;
    assert!((found.joules - at_500).abs() < 1e-12, "{}", found.joules);
    assert!(
        (found.joules_at_max - at_max).abs() < 1e-12,
        "{}",
        found.joules_at_max
    );
}
