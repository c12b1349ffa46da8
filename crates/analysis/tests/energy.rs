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
    assert!(min_energy(&plain, &Options::default())
        .unwrap_err()
        .contains("`power:` section"));
}
