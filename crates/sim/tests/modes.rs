//! Partitions scheduled as servers and mode switches in the simulator: the mode
//! manager's steps in the trace, agents delayed by their VCPU's budget or boosted past
//! it (M2-Xen, Li et al., RTAS 2018, Sec. V, Fig. 3, VI-C), task sets that change.

use bulkhead_model::{load_str, System};
use bulkhead_sim::{from_system, simulate, BuildOptions, ModeSwitch, Options, Report};
use bulkhead_trace::{Event, EventKind};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn load(src: &str) -> System {
    match load_str(src, "m.yaml") {
        Ok(l) => l.system,
        Err(e) => panic!("{e}"),
    }
}

fn run(system: &System, until: u64, switches: &[(u64, &str)]) -> (Report, Vec<Event>) {
    let spec = from_system(system, &BuildOptions::default()).unwrap();
    let options = Options {
        mode_switches: switches
            .iter()
            .map(|&(at, mode)| ModeSwitch {
                at,
                mode: mode.into(),
            })
            .collect(),
        ..Options::until(until)
    };
    let mut events = Vec::new();
    let report = simulate(&spec, options, &mut events).unwrap();
    (report, events)
}

/// The mode manager's events as short words: `request a->b`, `interface p`,
/// `agent p`, `agent p boost`, `ack p`, `done b`.
fn steps(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ModeRequest { from, to, .. } => Some(format!("request {from}->{to}")),
            EventKind::InterfaceChange { partition, .. } => Some(format!("interface {partition}")),
            EventKind::AgentRequest {
                partition, boost, ..
            } => Some(format!(
                "agent {partition}{}",
                if *boost { " boost" } else { "" }
            )),
            EventKind::AgentAck { partition, .. } => Some(format!("ack {partition}")),
            EventKind::ModeDone { mode, .. } => Some(format!("done {mode}")),
            _ => None,
        })
        .collect()
}

/// The times of `task`'s events of the kind `pick` accepts.
fn times_of(events: &[Event], task: &str, pick: fn(&EventKind) -> Option<&str>) -> Vec<u64> {
    events
        .iter()
        .filter(|e| pick(&e.kind) == Some(task))
        .map(|e| e.t_ns)
        .collect()
}

fn releases(events: &[Event], task: &str) -> Vec<u64> {
    times_of(events, task, |k| match k {
        EventKind::JobRelease { task, .. } => Some(task),
        _ => None,
    })
}

fn starts(events: &[Event], task: &str) -> Vec<u64> {
    times_of(events, task, |k| match k {
        EventKind::JobStart { task, .. } => Some(task),
        _ => None,
    })
}

/// M2-Xen Sec. VI-C and Fig. 3: a VM whose VCPU (4 ms every 10 ms) has used up its
/// budget when the request comes waits for the replenishment, "up to P - B = 10ms - 4ms
/// = 6ms"; a boosted agent runs at once. The VM's `hog` always has work.
const FIG3: &str = "system: {cpus: 0}
partitions:
  - name: dom1
    kind: rt
    cpus: 0
    interface: {period: 10ms, budget: 4ms}
    tasks:
      - {name: hog, cmd: x, budget: 10ms, period: 10ms}
      - {name: calm, cmd: x, budget: 1ms, period: 10ms}
modes:
  initial: '1'
  table:
    - {name: '1', partitions: {dom1: {tasks: [hog]}}}
    - {name: '2', partitions: {dom1: {tasks: [calm], interface: {budget: 2ms}}}}
  transitions: [{from: '1', to: '2', policy: POLICY}]
";

#[test]
fn an_agent_waits_for_its_budget_unless_boosted() {
    for (policy, latency) in [("sequential", 6 * MS + 100 * US), ("boost", 100 * US)] {
        let system = load(&FIG3.replace("POLICY", policy));
        let (report, events) = run(&system, 30 * MS, &[(4 * MS, "2")]);
        let switch = &report.switches[0];
        assert_eq!(switch.policy.as_deref(), Some(policy));
        assert_eq!(switch.latency_ns, Some(latency), "{policy}");
        let boost = if policy == "boost" { " boost" } else { "" };
        assert_eq!(
            steps(&events),
            [
                "request 1->2".to_string(),
                format!("agent dom1{boost}"),
                "ack dom1".into(),
                "interface dom1".into(),
                "done 2".into()
            ]
        );
        let done = events
            .iter()
            .find(|e| matches!(e.kind, EventKind::ModeDone { .. }))
            .unwrap();
        assert_eq!(done.t_ns, 4 * MS + latency);
        // hog stops at the acknowledgement, calm starts there.
        let ack = done.t_ns;
        assert!(
            releases(&events, "hog").iter().all(|&t| t < ack),
            "{policy}"
        );
        assert_eq!(releases(&events, "calm")[0], ack);
        assert!(releases(&events, "calm")
            .windows(2)
            .all(|w| w[1] - w[0] == 10 * MS));
    }
}

#[test]
fn a_boosted_agent_does_not_use_its_vcpu_budget() {
    let system = load(&FIG3.replace("POLICY", "boost"));
    let (_, events) = run(&system, 30 * MS, &[(4 * MS, "2")]);
    // The agent runs at once on the exhausted VCPU; what the VCPU runs next waits for
    // its budget, which the boost did not touch.
    assert_eq!(starts(&events, "mode-agent"), [4 * MS]);
    assert_eq!(starts(&events, "calm")[0], 10 * MS);
    let sequential = load(&FIG3.replace("POLICY", "sequential"));
    let (_, events) = run(&sequential, 30 * MS, &[(4 * MS, "2")]);
    assert_eq!(
        starts(&events, "mode-agent"),
        [10 * MS],
        "unboosted, it waits for the replenishment"
    );
}

/// Two servers on CPUs 0-1, one partition on CPU 2, two modes (shared test data).
const VEHICLE: &str = include_str!("../../modes/tests/data/vehicle.yaml");

fn vehicle(policy: &str) -> System {
    load(&VEHICLE.replace("UP", policy).replace("DOWN", policy))
}

#[test]
fn the_trace_shows_the_analysed_step_order_and_never_an_overload() {
    for policy in ["sequential", "batch", "greedy", "boost"] {
        let system = vehicle(policy);
        let analysis = bulkhead_analysis::analyze_system(&system);
        assert!(analysis.schedulable, "{policy}");
        let (report, events) = run(
            &system,
            400 * MS,
            &[(50 * MS, "highway"), (250 * MS, "urban")],
        );
        assert!(
            report.switches.iter().all(|s| s.latency_ns.is_some()),
            "{report:?}"
        );
        let got = steps(&events);
        // Sequential and Boost are one at a time: exactly the analysed order.
        let modes = analysis.modes.unwrap();
        let analysed: Vec<String> = modes
            .transitions
            .iter()
            .flat_map(|t| {
                let mut v = vec![format!("request {}->{}", t.from, t.to)];
                v.extend(t.steps.iter().map(|s| {
                    let who = s.partition.clone().unwrap_or_default();
                    match s.event {
                        "interface_change" => format!("interface {who}"),
                        "agent_request" if s.boost => format!("agent {who} boost"),
                        "agent_request" => format!("agent {who}"),
                        "agent_ack" => format!("ack {who}"),
                        _ => format!("done {}", t.to),
                    }
                }));
                v
            })
            .collect();
        if matches!(policy, "sequential" | "boost") {
            assert_eq!(got, analysed, "{policy}");
        } else {
            let mut a = got.clone();
            let mut b = analysed.clone();
            a.sort();
            b.sort();
            assert_eq!(a, b, "{policy}: the same steps");
        }
        for e in &events {
            match &e.kind {
                EventKind::InterfaceChange {
                    load_ppm,
                    capacity_ppm,
                    ..
                }
                | EventKind::ModeRequest {
                    load_ppm,
                    capacity_ppm,
                    ..
                } => assert!(load_ppm <= capacity_ppm, "{policy}: {e:?}"),
                EventKind::AgentAck {
                    demand_ppm,
                    interface_ppm: Some(interface),
                    ..
                } => assert!(demand_ppm <= interface, "{policy}: {e:?}"),
                _ => {}
            }
        }
        let misses: u64 = report
            .tasks
            .iter()
            .filter(|t| t.name != "mode-agent")
            .map(|t| t.misses)
            .sum();
        assert_eq!(misses, 0, "{policy}: {report:?}");
    }
}

#[test]
fn tasks_follow_their_mode() {
    let system = vehicle("boost");
    let (report, events) = run(
        &system,
        400 * MS,
        &[(50 * MS, "highway"), (250 * MS, "urban")],
    );
    let done: Vec<u64> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ModeDone { .. }))
        .map(|e| e.t_ns)
        .collect();
    assert_eq!(done.len(), 2);
    // lka runs only in highway, every 20 ms there.
    let lka = releases(&events, "lka");
    assert!(!lka.is_empty());
    assert!(lka.iter().all(|&t| t > 50 * MS && t < done[1]), "{lka:?}");
    assert!(lka.windows(2).all(|w| w[1] - w[0] == 20 * MS), "{lka:?}");
    // map and park stop in highway and come back in urban.
    for task in ["map", "park"] {
        let r = releases(&events, task);
        assert!(
            r.iter().all(|&t| t < done[0] || t >= 250 * MS),
            "{task}: {r:?}"
        );
        assert!(r.iter().any(|&t| t >= 250 * MS), "{task}: {r:?}");
    }
    let agent_jobs: u64 = report
        .tasks
        .iter()
        .filter(|t| t.name == "mode-agent")
        .map(|t| t.jobs)
        .sum();
    assert_eq!(agent_jobs, 6, "three agents, two switches");
}

#[test]
fn requests_too_soon_in_progress_or_not_allowed_are_refused() {
    let src = VEHICLE
        .replace("UP", "sequential")
        .replace("    - {from: highway, to: urban, policy: DOWN}\n", "");
    let system = load(&src);
    let (report, _) = run(
        &system,
        400 * MS,
        &[
            (10 * MS, "highway"),
            (10 * MS + 1, "urban"),
            (200 * MS, "urban"),
        ],
    );
    let refused: Vec<Option<&str>> = report
        .switches
        .iter()
        .map(|s| s.refused.as_deref())
        .collect();
    assert_eq!(refused[0], None);
    assert_eq!(refused[1], Some("a switch is in progress"));
    assert_eq!(refused[2], Some("no switch highway -> urban is allowed"));
    let (report, _) = run(
        &system,
        400 * MS,
        &[(10 * MS, "highway"), (50 * MS, "urban")],
    );
    assert!(report.switches[1]
        .refused
        .as_deref()
        .unwrap()
        .starts_with("less than the agent period"));
    let spec = from_system(&system, &BuildOptions::default()).unwrap();
    let options = Options {
        mode_switches: vec![ModeSwitch {
            at: MS,
            mode: "parking".into(),
        }],
        ..Options::until(MS)
    };
    let e = simulate(&spec, options, &mut Vec::new()).unwrap_err();
    assert_eq!(e, bulkhead_sim::SimError::NoMode("parking".into()));
    assert_eq!(e.to_string(), "--mode-switch parking: no mode `parking`");
}

#[test]
fn servers_sharing_a_cpu_are_isolated_by_their_interfaces() {
    // Two partitions on one CPU: `greedy` asks for more than its interface gives and
    // misses; `steady` keeps every deadline on its own interface.
    let src = "system: {cpus: 0}
partitions:
  - {name: steady, kind: rt, cpus: 0, interface: {period: 5ms, budget: 2ms}, tasks: [{name: s, cmd: x, budget: 1ms, period: 10ms}]}
  - {name: greedy, kind: rt, cpus: 0, interface: {period: 5ms, budget: 2ms}, tasks: [{name: g, cmd: x, budget: 8ms, period: 10ms}]}
";
    let (report, _) = run(&load(src), 100 * MS, &[]);
    let misses = |name: &str| report.tasks.iter().find(|t| t.name == name).unwrap().misses;
    assert_eq!(misses("s"), 0);
    assert!(misses("g") > 0);
    let s = report.tasks.iter().find(|t| t.name == "s").unwrap();
    assert_eq!(s.jobs, 10);
}

#[test]
fn mode_events_go_to_the_schedule_log() {
    use bulkhead_trace::EventKind as K;
    for kind in [
        K::ModeRequest {
            from: "a".into(),
            to: "b".into(),
            policy: "boost".into(),
            load_ppm: 0,
            capacity_ppm: 0,
        },
        K::AgentAck {
            partition: "p".into(),
            demand_ppm: 0,
            interface_ppm: None,
        },
    ] {
        assert!(bulkhead_sim::in_schedule_log(&kind));
    }
}
