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
    assert_eq!(e, bulkhead_sim::BuildError::NoPowerModel);
    assert!(e.to_string().contains("`power:` section"), "{e}");
}

/// One cluster of three CPUs (600 and 1200 MHz): a window schedule on CPU 0 (SC for
/// 4 ms, BE for the other 6 ms of each 10 ms window) drives the frequency; rt tasks on
/// CPUs 1 and 2 (6 ms WCETs at 1200 MHz, periods of 20 ms), one CPU-bound, one half
/// memory-bound.
const MIXED: &str = "
system: {cpus: 0-2}
power:
  clusters:
    - cpus: 0-2
      operating_points:
        - {frequency: 600, power: 0.2}
        - {frequency: 1200, power: 0.8}
partitions:
  - {name: cpu, kind: rt, cpus: 1, tasks: [{name: t, cmd: t, budget: 6ms, period: 20ms}]}
  - {name: mem, kind: rt, cpus: 2, tasks: [{name: t, cmd: t, budget: 6ms, period: 20ms, memory_bound: 0.5}]}
windows:
  - length: 10ms
    cpu: 0
    sc_processes: [{cmd: sc, budget: 4ms}]
    be_processes: [{cmd: be, budget: 6ms}]
";

/// `(µs, partition)` of the rt jobs' completions.
fn completions(policy: &str) -> Vec<(u64, String)> {
    let system = bulkhead_model::load_str(MIXED, "t.yaml").unwrap().system;
    let options = BuildOptions {
        power_policy: Some(bulkhead_power::Policy::parse(policy).unwrap()),
        ..BuildOptions::default()
    };
    let spec = from_system(&system, &options).unwrap();
    let mut events = Vec::new();
    simulate(&spec, Options::until(40 * MS), &mut events).unwrap();
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::JobComplete { partition, .. } => {
                Some((e.t_ns / 1_000, partition.to_string()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_running_rt_job_slows_down_when_the_frequency_drops() {
    // minbe: 1200 MHz from 0 (and 20), 600 MHz from 4 (and 24). Both jobs do 4 ms of
    // their 6 ms (at 1200 MHz) by 4 ms. `cpu` (C(f) = C x 1200/f) runs at half speed
    // after: 2 ms of work take 4 ms, done at 8. `mem` (m = 0.5: C(600) = C x (0.5 +
    // 0.5 x 2) = 1.5 C) runs at 2/3 speed: 2 ms of work take 3 ms, done at 7.
    assert_eq!(
        completions("minbe"),
        [
            (7_000, "mem".to_string()),
            (8_000, "cpu".to_string()),
            (27_000, "mem".to_string()),
            (28_000, "cpu".to_string())
        ]
    );
    // low: 600 MHz throughout: 12 ms and 9 ms.
    assert_eq!(
        completions("low"),
        [
            (9_000, "mem".to_string()),
            (12_000, "cpu".to_string()),
            (29_000, "mem".to_string()),
            (32_000, "cpu".to_string())
        ]
    );
    // high: the WCETs as given.
    assert_eq!(
        completions("high"),
        [
            (6_000, "cpu".to_string()),
            (6_000, "mem".to_string()),
            (26_000, "cpu".to_string()),
            (26_000, "mem".to_string())
        ]
    );
}
