//! Frequencies and energy in simulated window schedules: each policy's frequency events,
//! energy matching a hand computation, work stretched at lower frequencies.

use bulkhead_sim::trace::EventKind;
use bulkhead_sim::{from_system, simulate, Behaviour, BuildOptions, Options};

const MS: u64 = 1_000_000;

/// One CPU: 600 MHz at 0.2 W, 1200 MHz at 0.8 W, 0.1 W idle. Each 10 ms window runs
/// SC `sc` for 4 ms, then BE `be` for 3 ms, then idles 3 ms.
const SMALL: &str = "
power:
  clusters:
    - cpus: 0
      idle_power: 0.1
      operating_points:
        - {frequency: 600, power: 0.2}
        - {frequency: 1200, power: 0.8}
windows:
  - length: 10
    cpu: 0
    sc_processes: [{cmd: sc, budget: 4}]
    be_processes: [{cmd: be, budget: 3}]
";

struct Outcome {
    joules: f64,
    mean_hz: f64,
    /// `(ms, kHz)` of the frequency events, and `(ms, cmd)` of the grants.
    frequencies: Vec<(u64, u64)>,
    stops: Vec<(f64, String)>,
}

fn sim(yaml: &str, policy: &str, behaviours: &[(&str, Behaviour)]) -> Outcome {
    let system = bulkhead_model::load_str(yaml, "t.yaml").unwrap().system;
    let options = BuildOptions {
        power_policy: Some(bulkhead_power::Policy::parse(policy).unwrap()),
        behaviours: behaviours
            .iter()
            .map(|&(c, b)| (c.to_string(), b))
            .collect(),
        ..BuildOptions::default()
    };
    let spec = from_system(&system, &options).unwrap();
    let mut events = Vec::new();
    let report = simulate(&spec, Options::until(20 * MS), &mut events).unwrap();
    let energy = report.energy.expect("a power section gives energy");
    assert_eq!(energy.policy_error, None);
    Outcome {
        joules: energy.total_joules,
        mean_hz: energy.cpus[0].mean_frequency_hz,
        frequencies: events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::CpuFrequency { khz, .. } => Some((e.t_ns / MS, khz)),
                _ => None,
            })
            .collect(),
        stops: events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Stop { cmd, .. } => Some((e.t_ns as f64 / MS as f64, cmd.to_string())),
                _ => None,
            })
            .collect(),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn energy_matches_a_hand_computation() {
    // high: 2 windows x (7 ms busy at 0.8 W + 3 ms idle at 0.1 W) = 11.2 + 0.6 mJ.
    let high = sim(SMALL, "high", &[]);
    assert!(close(high.joules, 0.0118), "{}", high.joules);
    assert!(close(high.mean_hz, 1.2e9), "{}", high.mean_hz);
    assert_eq!(high.frequencies, [(0, 1_200_000)]);
    // low: 14 ms busy at 0.2 W + 6 ms idle at 0.1 W = 2.8 + 0.6 mJ.
    let low = sim(SMALL, "low", &[]);
    assert!(close(low.joules, 0.0034), "{}", low.joules);
    assert!(close(low.mean_hz, 0.6e9), "{}", low.mean_hz);
    assert!(low.joules < high.joules);
    // minbe: per window 4 ms SC at 0.8 W, 3 ms BE at 0.2 W, 3 ms idle at 0.1 W = 4.1 mJ;
    // 4 ms of 10 at 1.2 GHz, 6 at 0.6 GHz.
    let minbe = sim(SMALL, "minbe", &[]);
    assert!(close(minbe.joules, 0.0082), "{}", minbe.joules);
    assert!(close(minbe.mean_hz, 0.84e9), "{}", minbe.mean_hz);
    assert_eq!(
        minbe.frequencies,
        [
            (0, 1_200_000),
            (4, 600_000),
            (10, 1_200_000),
            (14, 600_000),
            (20, 1_200_000)
        ]
    );
    // none: the clusters stay at the top frequency, as under high, without events.
    let none = sim(SMALL, "none", &[]);
    assert!(close(none.joules, high.joules) && none.frequencies.is_empty());
}

#[test]
fn work_takes_longer_at_a_lower_frequency() {
    // `sc` yields after 1.5 ms of work at the top frequency: 3 ms at half the clock.
    let yielding = [("sc", Behaviour::YieldAfter(1_500_000))];
    let high = sim(SMALL, "high", &yielding);
    let low = sim(SMALL, "low", &yielding);
    assert_eq!(high.stops[0], (1.5, "sc".to_string()));
    assert_eq!(low.stops[0], (3.0, "sc".to_string()));
}

#[test]
fn a_policy_without_a_power_section_is_refused() {
    let system = bulkhead_model::load_str(
        "windows: [{length: 10, cpu: 0, sc_processes: [{cmd: a, budget: 4}]}]",
        "t.yaml",
    )
    .unwrap()
    .system;
    let options = BuildOptions {
        power_policy: Some(bulkhead_power::Policy::MinBe),
        ..BuildOptions::default()
    };
    let e = from_system(&system, &options).unwrap_err();
    assert!(e.contains("`power:` section"), "{e}");
}
