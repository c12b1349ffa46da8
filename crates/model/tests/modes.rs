//! Multi-mode descriptions: partitions scheduled as servers, the mode table, and the
//! view of the system in one mode.

use bulkhead_model::modes::AGENT_TASK;
use bulkhead_model::{load_str, ServerInterface, Service, SwitchPolicy, System};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn load(src: &str) -> System {
    match load_str(src, "m.yaml") {
        Ok(l) => l.system,
        Err(e) => panic!("{e}"),
    }
}

fn error(src: &str) -> String {
    load_str(src, "m.yaml").expect_err("invalid").to_string()
}

const VEHICLE: &str = "system: {cpus: 0-2}
partitions:
  - name: control
    kind: rt
    cpus: 0-1
    interface: {period: 5ms, budget: 2ms}
    tasks:
      - {name: can_rx, cmd: ./rx, budget: 200us, period: 1ms}
      - {name: lka, cmd: ./lka, budget: 1ms, period: 10ms}
  - name: nav
    kind: rt
    cpus: 0-1
    interface: {period: 5ms}
    tasks:
      - {name: route, cmd: ./route, budget: 2ms, period: 20ms, deadline: 15ms}
      - {name: map, cmd: ./map, budget: 1ms, period: 40ms}
  - name: logger
    kind: be
    cpus: 2
    processes: [./log]
modes:
  initial: urban
  agent: {budget: 150us, period: 50ms}
  table:
    - name: urban
      partitions:
        control: {tasks: [can_rx]}
        nav: {tasks: [route, {name: map, period: 20ms}], interface: {budget: 3ms}}
    - name: highway
      partitions:
        control: {tasks: [can_rx, {name: lka, budget: 2ms}], interface: {period: 5ms, budget: 3ms}}
        nav: {tasks: [route]}
  transitions:
    - {from: urban, to: highway, policy: greedy}
    - {from: highway, to: urban}
";

#[test]
fn a_mode_table_loads_with_its_defaults() {
    let s = load(VEHICLE);
    let modes = s.modes.as_ref().unwrap();
    assert_eq!(modes.initial, "urban");
    assert_eq!(
        (modes.agent.budget, modes.agent.period),
        (150 * US, 50 * MS)
    );
    assert_eq!(modes.table.len(), 2);
    assert_eq!(modes.policy("urban", "highway"), Some(SwitchPolicy::Greedy));
    assert_eq!(
        modes.policy("highway", "urban"),
        Some(SwitchPolicy::Boost),
        "boost is the default policy"
    );
    assert_eq!(modes.policy("urban", "urban"), None);
    assert!(modes.is_modal("nav") && !modes.is_modal("logger"));
    assert_eq!(
        s.partitions[1].interface,
        Some(ServerInterface {
            period: Some(5 * MS),
            budget: None
        })
    );
}

#[test]
fn without_transitions_every_switch_is_allowed_under_boost() {
    let s = load(&VEHICLE.replace(
        "  transitions:\n    - {from: urban, to: highway, policy: greedy}\n    - {from: highway, to: urban}\n",
        "",
    ));
    let modes = s.modes.unwrap();
    assert_eq!(modes.transitions, None);
    assert_eq!(modes.policy("urban", "highway"), Some(SwitchPolicy::Boost));
    assert_eq!(modes.allowed().len(), 2);
}

#[test]
fn in_mode_gives_each_partition_its_task_set_interface_and_agent() {
    let s = load(VEHICLE);
    let urban = s.in_mode("urban").unwrap();
    assert!(urban.modes.is_none());
    let control: Vec<&str> = urban.partitions[0]
        .tasks
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(control, [AGENT_TASK, "can_rx"]);
    let agent = &urban.partitions[0].tasks[0];
    assert_eq!(
        (agent.budget, agent.period, agent.priority),
        (150 * US, 50 * MS, Some(0))
    );
    assert_eq!(agent.service, Some(Service::ModeAgent));
    // `map` runs every 20 ms in urban; its implicit deadline follows its period.
    let map = &urban.partitions[1].tasks[2];
    assert_eq!(
        (map.name.as_str(), map.period, map.deadline),
        ("map", 20 * MS, 20 * MS)
    );
    // The mode's budget with the partition's period.
    assert_eq!(
        urban.partitions[1].interface,
        Some(ServerInterface {
            period: Some(5 * MS),
            budget: Some(3 * MS)
        })
    );
    let highway = s.in_mode("highway").unwrap();
    let lka = &highway.partitions[0].tasks[2];
    assert_eq!(
        (lka.budget, lka.period, lka.deadline),
        (2 * MS, 10 * MS, 10 * MS)
    );
    // An explicit deadline is kept; an unlisted partition runs as declared.
    let route = &highway.partitions[1].tasks[1];
    assert_eq!(route.deadline, 15 * MS);
    assert_eq!(highway.partitions[2], s.partitions[2]);
    assert!(s.in_mode("parking").is_none());
}

#[test]
fn gateway_tasks_run_in_every_mode() {
    let s = load(
        "system: {}
partitions:
  - {name: gw, kind: rt, cpus: 0, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}
buses: [{name: can0, gateway: gw, period: 1ms, reader_budget: 100us, writer_budget: 100us}]
modes:
  initial: a
  table: [{name: a, partitions: {gw: {tasks: []}}}]
",
    );
    let a = s.in_mode("a").unwrap();
    let names: Vec<&str> = a.partitions[0]
        .tasks
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, [AGENT_TASK, "can0-reader", "can0-writer"]);
}

#[test]
fn modes_is_no_longer_a_reserved_section() {
    let e = error("system: {}\nmodes: {}\n");
    assert!(e.contains("missing field `initial`"), "{e}");
}

#[test]
fn errors_name_the_key_path() {
    let cases = [
        (
            VEHICLE.replace("        nav: {tasks: [route]}", "        radio: {tasks: []}"),
            "m.yaml:32:16: modes.table[1].partitions.radio: unknown partition `radio`",
        ),
        (
            VEHICLE.replace("nav: {tasks: [route]}", "nav: {tasks: [route, gps]}"),
            "modes.table[1].partitions.nav.tasks[1]: partition `nav` declares no task `gps`",
        ),
        (
            VEHICLE.replace("nav: {tasks: [route]}", "nav: {tasks: [route, route]}"),
            "modes.table[1].partitions.nav.tasks[1]: task `route` is listed twice",
        ),
        (
            VEHICLE.replace("nav: {tasks: [route]}", "logger: {tasks: []}"),
            "modes.table[1].partitions.logger: `logger` is not an rt partition",
        ),
        (
            VEHICLE.replace("initial: urban", "initial: parking"),
            "m.yaml:22:12: modes.initial: unknown mode `parking`",
        ),
        (
            VEHICLE.replace("name: highway", "name: urban"),
            "modes.table[1].name: duplicate mode name `urban`",
        ),
        (
            VEHICLE.replace("{from: highway, to: urban}", "{from: highway, to: highway}"),
            "modes.transitions[1].to: a switch goes to another mode",
        ),
        (
            VEHICLE.replace("{from: highway, to: urban}", "{from: urban, to: highway}"),
            "modes.transitions[1]: the switch urban -> highway is listed twice",
        ),
        (
            VEHICLE.replace("policy: greedy", "policy: fastest"),
            "modes.transitions[0].policy: unknown variant `fastest`",
        ),
        (
            VEHICLE.replace("{from: urban, to: highway,", "{from: urban, to: parking,"),
            "modes.transitions[0].to: unknown mode `parking`",
        ),
        (
            VEHICLE.replace("budget: 150us, period: 50ms", "budget: 150ms, period: 50ms"),
            "modes.agent.budget: exceeds the agent's period",
        ),
        (
            VEHICLE.replace("interface: {budget: 3ms}", "interface: {budget: 0ms}"),
            "modes.table[0].partitions.nav.interface.budget: must be a positive duration",
        ),
        (
            VEHICLE.replace("interface: {period: 5ms, budget: 2ms}", "interface: {period: 5ms, budget: 6ms}"),
            "partitions[0].interface.budget: exceeds the period",
        ),
        (
            VEHICLE.replace(
                "      - {name: map, cmd",
                "      - {name: mode-agent, cmd: x, budget: 1ms, period: 9ms}\n      - {name: map, cmd",
            ),
            "partitions[1].tasks[1].name: `mode-agent` is the name of the partition's mode agent",
        ),
        (
            VEHICLE.replace("  table:\n", "  table: []\n  old:\n"),
            "m.yaml:25:3: modes.old: unknown field `old`",
        ),
    ];
    for (src, expected) in cases {
        let e = error(&src);
        assert!(e.contains(expected), "expected `{expected}` in `{e}`");
    }
}

#[test]
fn an_interface_in_a_mode_needs_a_server_partition() {
    let src = "system: {}
partitions:
  - {name: a, kind: rt, cpus: 0, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}
modes:
  initial: m
  table: [{name: m, partitions: {a: {tasks: [t], interface: {budget: 1ms}}}}]
";
    let e = error(src);
    assert!(
        e.contains("modes.table[0].partitions.a.interface: partition `a` owns its CPUs"),
        "{e}"
    );
}

#[test]
fn servers_share_cpus_only_as_a_whole_pool() {
    let base = "system: {}
partitions:
  - {name: a, kind: rt, cpus: 0-1, interface: {period: 5ms}, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}
  - {name: b, kind: rt, cpus: CPUS, INTERFACE tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}
";
    let shared = base
        .replace("CPUS", "0-1")
        .replace("INTERFACE", "interface: {period: 10ms},");
    assert_eq!(load(&shared).partitions.len(), 2);
    let part = base
        .replace("CPUS", "1")
        .replace("INTERFACE", "interface: {period: 10ms},");
    let e = error(&part);
    assert!(
        e.contains("partitions[1].cpus: overlaps the CPUs of partition `a`; partitions scheduled as servers share CPUs only as a whole pool"),
        "{e}"
    );
    let exclusive = base.replace("CPUS", "0-1").replace("INTERFACE", "");
    let e = error(&exclusive);
    assert!(
        e.contains("owns its CPUs exclusively unless both have an `interface`"),
        "{e}"
    );
    let be = "system: {}\npartitions:\n  - {name: a, kind: be, cpus: 0, interface: {period: 5ms}, processes: [x]}\n";
    assert!(
        error(be).contains("partitions[0].interface: only rt partitions are scheduled as servers")
    );
}

#[test]
fn the_canonical_form_keeps_modes_and_interfaces() {
    let s = load(VEHICLE);
    let text = bulkhead_model::to_canonical_yaml(&s);
    assert!(
        text.contains("    interface: {period: 5ms, budget: 2ms}\n"),
        "{text}"
    );
    assert!(
        text.contains("      \"nav\": {tasks: [\"route\", {name: \"map\", period: 20ms}], interface: {budget: 3ms}}\n"),
        "{text}"
    );
    assert!(
        text.contains("    - {from: \"highway\", to: \"urban\", policy: boost}\n"),
        "{text}"
    );
    assert_eq!(load(&text), s);
}

#[test]
fn requesters_allow_named_modes_and_the_suspend_per_partition() {
    let src = format!(
        "{VEHICLE}  requesters:\n    - {{partition: logger, modes: [highway]}}\n    - {{partition: nav, suspend: true}}\n"
    );
    let modes = load(&src).modes.unwrap();
    assert!(modes.may_request_mode("logger", "highway"));
    assert!(!modes.may_request_mode("logger", "urban"));
    assert!(!modes.may_request_suspend("logger"));
    assert!(modes.may_request_suspend("nav"));
    assert!(!modes.may_request_mode("nav", "highway"));
    assert!(!modes.may_request_mode("control", "highway"));
    assert!(load(VEHICLE).modes.unwrap().requesters.is_empty());
}

#[test]
fn requester_errors_name_the_key_path() {
    let with = |r: &str| error(&format!("{VEHICLE}  requesters:\n{r}"));
    let e = with("    - {partition: radio, modes: [urban]}\n");
    assert!(
        e.contains("modes.requesters[0].partition: unknown partition `radio` (partitions: control, nav, logger)"),
        "{e}"
    );
    let e = with("    - {partition: logger, modes: [urban, parking]}\n");
    assert!(
        e.contains("modes.requesters[0].modes[1]: unknown mode `parking` (modes: urban, highway)"),
        "{e}"
    );
    let e = with(
        "    - {partition: logger, modes: [urban]}\n    - {partition: logger, suspend: true}\n",
    );
    assert!(
        e.contains("modes.requesters[1].partition: partition `logger` is listed twice"),
        "{e}"
    );
    let e = with("    - {partition: logger}\n");
    assert!(e.contains("modes.requesters[0]: allows nothing"), "{e}");
    let e = with("    - {partition: logger, mode: [urban]}\n");
    assert!(
        e.contains("modes.requesters[0]") && e.contains("mode"),
        "{e}"
    );
}
