//! Partitions scheduled as servers and multi-mode systems: every mode analysed on its
//! interfaces, every allowed switch replayed, unsafe switches refused with the step
//! and the partition (M2-Xen, Li et al., RTAS 2018, Sec. III-V).

use bulkhead_analysis::prm::{minimal_budget, Bound, Policy};
use bulkhead_analysis::system::{analyze_system, analyze_system_with, Options};
use bulkhead_analysis::text::render_text;
use bulkhead_analysis::Task;
use bulkhead_model::{load_str, System};

const MS: u64 = 1_000_000;

fn load(src: &str) -> System {
    match load_str(src, "m.yaml") {
        Ok(l) => l.system,
        Err(e) => panic!("{e}"),
    }
}

const SERVERS: &str = "system: {cpus: 0}
partitions:
  - name: a
    kind: rt
    cpus: 0
    interface: {period: 5ms}
    tasks:
      - {name: t1, cmd: x, budget: 1ms, period: 10ms}
      - {name: t2, cmd: x, budget: 2ms, period: 20ms}
  - name: b
    kind: rt
    cpus: 0
    interface: {period: 5ms, budget: BUDGET}
    tasks:
      - {name: u1, cmd: x, budget: 1ms, period: 10ms}
";

#[test]
fn a_server_partition_gets_the_least_budget_on_its_periodic_resource() {
    let report = analyze_system(&load(&SERVERS.replace("BUDGET", "1ms")));
    assert!(report.schedulable, "{}", render_text(&report, "s"));
    // Shin & Lee 2003: the least Θ of Γ(5 ms, Θ) for (1, 10), (2, 20) under RM.
    let tasks = [
        Task::new(MS, 10 * MS, 10 * MS),
        Task::new(2 * MS, 20 * MS, 20 * MS),
    ];
    let least = minimal_budget(
        &tasks,
        &Policy::FixedPriority(vec![0, 1]),
        5 * MS,
        Bound::Exact,
    )
    .unwrap();
    let a = &report.partitions[0];
    // Rounded up to a whole microsecond.
    let least = least.next_multiple_of(1_000);
    assert_eq!(a.interfaces[0].budget_ns, Some(least));
    assert_eq!(a.interfaces[0].period_ns, 5 * MS);
    // Its tasks' response times come from the supply of Γ, not of a whole CPU.
    let t2 = report.tasks.iter().find(|t| t.name == "t2").unwrap();
    assert_eq!(t2.test, "rta-prm");
    assert!(t2.wcrt_ns.unwrap() > 3 * MS, "{:?}", t2.wcrt_ns);
    let cpu = &report.cpus[0];
    let load = (least as f64 / (5 * MS) as f64) + 0.2;
    assert!((cpu.server_load.unwrap() - load).abs() < 1e-5, "{cpu:?}");
}

#[test]
fn a_budget_too_small_or_a_pool_too_full_fails() {
    let small = analyze_system(&load(&SERVERS.replace("BUDGET", "500us")));
    assert!(!small.schedulable);
    let u1 = small.tasks.iter().find(|t| t.name == "u1").unwrap();
    assert!(!u1.schedulable, "{u1:?}");
    assert!(u1.binding.contains("Γ(5ms, 500us)"), "{}", u1.binding);
    let full = analyze_system(&load(&SERVERS.replace("BUDGET", "4ms")));
    assert!(!full.schedulable);
    assert!(
        full.cpus[0].binding.contains("take 1")
            && full.cpus[0].binding.contains("above the cap 90.00%"),
        "{}",
        full.cpus[0].binding
    );
}

/// Two servers on CPUs 0-1, one partition on CPU 2, two modes (shared test data).
const VEHICLE: &str = include_str!("../../modes/tests/data/vehicle.yaml");

fn vehicle(up: &str, down: &str) -> System {
    load(&VEHICLE.replace("UP", up).replace("DOWN", down))
}

#[test]
fn each_mode_is_analysed_with_its_agent_and_each_switch_is_replayed() {
    let report = analyze_system(&vehicle("greedy", "boost"));
    let text = render_text(&report, "v.yaml");
    assert!(report.schedulable, "{text}");
    let modes = report.modes.as_ref().unwrap();
    assert_eq!(modes.pools.len(), 1, "safety owns CPU 2");
    // Boost reserve: two modal partitions in the pool, 100 us every 100 ms each.
    assert!(modes.boost_reserved);
    assert_eq!(modes.pools[0].reserve_ppm, 2_000);
    // Two CPUs at the kernel's 95% cap, less its fair server's 5% on each.
    assert_eq!(modes.pools[0].capacity_ppm, 1_800_000);
    let urban = &modes.modes[0];
    assert_eq!(urban.partitions[0].tasks, ["mode-agent", "can_rx"]);
    assert_eq!(urban.partitions[0].demand_ppm, 1_000 + 40_000);
    assert_eq!(urban.partitions[0].derived, ["budget"]);
    // The main report is the initial mode's: lka does not run in urban.
    assert!(report.tasks.iter().all(|t| t.name != "lka"));
    // urban -> highway: nav and safety shrink, control grows; greedy sends the
    // decreases at once and grows control at once if it fits.
    let up = &modes.transitions[0];
    assert!(up.safe, "{text}");
    let events: Vec<String> = up
        .steps
        .iter()
        .map(|s| format!("{} {}", s.event, s.partition.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(events.last().unwrap(), "mode_done ");
    let ack_nav = events.iter().position(|e| e == "agent_ack nav").unwrap();
    let shrink_nav = events
        .iter()
        .position(|e| e == "interface_change nav")
        .unwrap();
    assert!(ack_nav < shrink_nav, "{events:?}");
    let grow_control = events
        .iter()
        .position(|e| e == "interface_change control")
        .unwrap();
    let request_control = events
        .iter()
        .position(|e| e == "agent_request control")
        .unwrap();
    assert!(grow_control < request_control, "{events:?}");
    assert!(
        text.contains("switch urban -> highway (greedy): safe"),
        "{text}"
    );
    assert!(
        text.contains("switch highway -> urban (boost): safe"),
        "{text}"
    );
    assert!(text.contains("control request (boost)"), "{text}");
    for t in &modes.transitions {
        assert!(t.peak_ppm[0] <= modes.pools[0].capacity_ppm);
    }
}

#[test]
fn without_boost_no_reserve_is_held() {
    let report = analyze_system(&vehicle("batch", "sequential"));
    assert!(report.schedulable);
    let modes = report.modes.unwrap();
    assert!(!modes.boost_reserved);
    assert_eq!(modes.pools[0].reserve_ppm, 0);
}

/// No order of interface and task set change is safe (shared test data).
const UNSAFE: &str = include_str!("../../modes/tests/data/unsafe.yaml");

#[test]
fn an_unsafe_switch_is_refused_naming_the_step_and_the_partition() {
    let report = analyze_system(&load(UNSAFE));
    let text = render_text(&report, "u.yaml");
    assert!(!report.schedulable, "{text}");
    let modes = report.modes.as_ref().unwrap();
    assert!(modes.modes.iter().all(|m| m.schedulable), "{text}");
    let (up, down) = (&modes.transitions[0], &modes.transitions[1]);
    // a -> b grows nav (0.6 -> 0.7 CPU): the interface changes first (step 0), while
    // the old task set still runs.
    let r = up.refusal.as_ref().unwrap();
    assert_eq!((r.step, r.partition.as_deref()), (0, Some("nav")));
    assert!(
        r.message.starts_with("at step 0 (interface_change of `nav`) its old task set runs on the interface 14ms every 20ms and is not schedulable there"),
        "{}",
        r.message
    );
    // b -> a shrinks nav: the agent switches first; at its acknowledgement (step 1)
    // the new task set runs on the old interface.
    let r = down.refusal.as_ref().unwrap();
    assert_eq!((r.step, r.partition.as_deref()), (1, Some("nav")));
    assert!(
        r.message.contains("(agent_ack of `nav`) its new task set"),
        "{}",
        r.message
    );
    assert!(
        text.contains("switch a -> b (boost): REFUSED: at step 0"),
        "{text}"
    );
}

#[test]
fn a_mode_whose_pool_cannot_hold_the_boost_reserve_fails() {
    // Two servers whose interfaces fill the pool's 90% exactly (the kernel's 95% cap
    // less its fair server's 5%): the boost reserve (M2-Xen V-B's hypothetical VCPU) of
    // 2 x 100 us / 100 ms does not fit.
    let src = "system: {cpus: 0}
partitions:
  - {name: a, kind: rt, cpus: 0, interface: {period: 2ms, budget: 1ms}, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}
  - {name: b, kind: rt, cpus: 0, interface: {period: 2ms, budget: 800us}, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}
modes:
  initial: m
  table:
    - {name: m, partitions: {a: {tasks: [t]}, b: {tasks: [t]}}}
    - {name: n, partitions: {a: {tasks: []}, b: {tasks: []}}}
  transitions: [{from: m, to: n, policy: POLICY}, {from: n, to: m, policy: POLICY}]
";
    let boost = analyze_system(&load(&src.replace("POLICY", "boost")));
    let m = &boost.modes.as_ref().unwrap().modes[0];
    assert!(!m.schedulable);
    assert!(
        m.binding.contains(
            "with the boost reserve of 0.002 CPUs take 0.902 CPUs of its capacity 0.900 CPUs"
        ),
        "{}",
        m.binding
    );
    assert!(boost.modes.as_ref().unwrap().transitions[0]
        .refusal
        .as_ref()
        .unwrap()
        .message
        .contains("mode `m` is not schedulable"));
    let batch = analyze_system(&load(&src.replace("POLICY", "batch")));
    assert!(batch.schedulable, "{}", render_text(&batch, "b"));
}

/// M2-Xen Table I (the micro benchmark): Dom 1 has (10 ms, 10 ms) in mode 0 and
/// (4 ms, 10 ms) in mode 1 on its own CPU, full capacity, four tasks per mode.
#[test]
fn m2xen_table_1_switches_are_safe_in_both_directions() {
    let src = "system: {cpus: 1}
partitions:
  - name: dom1
    kind: rt
    cpus: 1
    interface: {period: 10ms}
    tasks:
      - {name: a, cmd: x, budget: 1ms, period: 40ms}
      - {name: b, cmd: x, budget: 2ms, period: 50ms}
      - {name: c, cmd: x, budget: 3ms, period: 60ms}
      - {name: d, cmd: x, budget: 4ms, period: 80ms}
      - {name: e, cmd: x, budget: 1ms, period: 100ms}
      - {name: f, cmd: x, budget: 2ms, period: 200ms}
      - {name: g, cmd: x, budget: 3ms, period: 300ms}
      - {name: h, cmd: x, budget: 4ms, period: 400ms}
modes:
  initial: '0'
  table:
    - {name: '0', partitions: {dom1: {tasks: [a, b, c, d], interface: {budget: 10ms}}}}
    - {name: '1', partitions: {dom1: {tasks: [e, f, g, h], interface: {budget: 4ms}}}}
  transitions:
    - {from: '0', to: '1', policy: sequential}
    - {from: '1', to: '0', policy: sequential}
";
    let options = Options {
        deadline_cap: (1, 1),
        ..Options::default()
    };
    let report = analyze_system_with(&load(src), &options);
    let text = render_text(&report, "t1.yaml");
    assert!(report.schedulable, "{text}");
    let modes = report.modes.unwrap();
    assert_eq!(modes.modes[0].loads_ppm, [1_000_000]);
    assert_eq!(modes.modes[1].loads_ppm, [400_000]);
    let order =
        |t: usize| -> Vec<&str> { modes.transitions[t].steps.iter().map(|s| s.event).collect() };
    // Shrinking: the tasks change before the interface; growing: after it.
    assert_eq!(
        order(0),
        [
            "agent_request",
            "agent_ack",
            "interface_change",
            "mode_done"
        ]
    );
    assert_eq!(
        order(1),
        [
            "interface_change",
            "agent_request",
            "agent_ack",
            "mode_done"
        ]
    );
    assert_eq!(modes.transitions[0].steps[2].load_ppm, Some(400_000));
}
