//! The `stop_start:` section: the suspend order (default: be, rt, gateways last), the
//! acknowledgement deadline, the stale rule, suspend-to-RAM and the CAN triggers, each
//! checked with its position; the canonical form loads back.

use bulkhead_model::{load_str, to_canonical_yaml, Compare, Diagnostic, System};

const SYSTEM: &str = "system: {}
partitions:
  - name: gw
    kind: rt
    cpus: 0
    tasks: [{name: ctl, budget: 1ms, period: 10ms}]
  - name: hmi
    cpus: 1
    processes: [{cmd: dash}]
  - name: ctl
    kind: rt
    cpus: 2
    tasks: [{name: loop, budget: 1ms, period: 10ms, resume: restartable}]
  - name: ivi
    cpus: 1
    processes: [{cmd: dash}]
buses:
  - name: rav4
    dbc: toyota.dbc
    gateway: gw
    period: 1ms
    reader_budget: 100us
    writer_budget: 100us
";

fn load(src: &str) -> System {
    match load_str(src, "t.yaml") {
        Ok(l) => l.system,
        Err(e) => panic!("rejected: {e}"),
    }
}

fn fails(src: &str) -> String {
    let e: Diagnostic = load_str(src, "t.yaml").expect_err("accepted an invalid description");
    e.to_string()
}

#[test]
fn without_the_section_the_order_is_be_then_rt_then_the_gateway() {
    let s = load(SYSTEM);
    assert!(s.stop_start.is_none());
    let d = s.stop_start();
    assert_eq!(d.order, ["hmi", "ivi", "ctl", "gw"]);
    assert_eq!(d.ack_deadline, 5_000_000);
    assert!(!d.suspend_to_ram);
    assert!(d.awake(&s).is_empty());
}

#[test]
fn the_section_loads_and_its_canonical_form_loads_back() {
    let s = load(&format!(
        "{SYSTEM}stop_start:
  order: [ivi, hmi, ctl, gw]
  ack_deadline: 2ms
  stale: drop
  suspend_to_ram: true
  suspend_when: {{bus: rav4, signal: SPEED, below: 0.5, for: 3s}}
  resume_when: {{bus: rav4, signal: GAS_PEDAL, above: 0}}
"
    ));
    let ss = s.stop_start.clone().unwrap();
    assert_eq!(ss.order, ["ivi", "hmi", "ctl", "gw"]);
    assert_eq!(ss.ack_deadline, 2_000_000);
    assert!(ss.suspend_to_ram);
    let when = ss.suspend_when.as_ref().unwrap();
    assert_eq!(
        (when.compare, when.threshold, when.hold),
        (Compare::Below, 0.5, 3_000_000_000)
    );
    assert!(when.met(0.4) && !when.met(0.5));
    let resume = ss.resume_when.as_ref().unwrap();
    assert_eq!((resume.compare, resume.hold), (Compare::Above, 0));
    assert_eq!(resume.spec(), "GAS_PEDAL>0@0");
    assert_eq!(ss.awake(&s), ["gw"]);
    assert_eq!(s.buses[0].dbc.as_deref(), Some("toyota.dbc"));
    let yaml = to_canonical_yaml(&s);
    assert_eq!(load(&yaml), s, "{yaml}");
}

#[test]
fn an_empty_section_takes_every_default() {
    let s = load(&format!("{SYSTEM}stop_start: {{}}\n"));
    assert_eq!(s.stop_start.clone().unwrap(), s.stop_start());
    assert_eq!(load(&to_canonical_yaml(&s)), s);
}

#[test]
fn errors_name_position_and_key_path() {
    let cases = [
        (
            "order: [hmi, ivi, ctl, gw, radio]",
            "t.yaml:25:30: stop_start.order[4]: unknown partition `radio`",
        ),
        (
            "order: [hmi, ivi, hmi, ctl, gw]",
            "stop_start.order[2]: partition `hmi` is listed twice",
        ),
        (
            "order: [hmi, ivi, ctl]",
            "t.yaml:25:10: stop_start.order: does not list partition `gw`",
        ),
        (
            "ack_deadline: 0ms",
            "stop_start.ack_deadline: must be a positive duration",
        ),
        (
            "ack_deadline: 5",
            "stop_start.ack_deadline: `5` needs a unit",
        ),
        ("stale: keep", "stop_start.stale: unknown variant `keep`"),
        (
            "suspend_when: {bus: can9, signal: SPEED, below: 1}",
            "t.yaml:25:23: stop_start.suspend_when.bus: unknown bus `can9` (buses: rav4)",
        ),
        (
            "resume_when: {bus: rav4, signal: GAS}",
            "stop_start.resume_when: give `below` or `above`",
        ),
        (
            "resume_when: {bus: rav4, signal: GAS, below: 1, above: 0}",
            "stop_start.resume_when.above: give either `below` or `above`, not both",
        ),
        (
            "resume_when: {bus: rav4, signal: GAS, above: 0, for: soon}",
            "stop_start.resume_when.for:",
        ),
        (
            "resume_when: {bus: rav4, signal: GAS, above: fast}",
            "stop_start.resume_when.above: expected a number",
        ),
        (
            "suspend_to_ram: maybe",
            "stop_start.suspend_to_ram: expected true or false",
        ),
        ("sleep: now", "stop_start.sleep: unknown field `sleep`"),
    ];
    for (line, expect) in cases {
        let e = fails(&format!("{SYSTEM}stop_start:\n  {line}\n"));
        assert!(e.contains(expect), "{line}: expected `{expect}` in `{e}`");
    }
}

#[test]
fn a_trigger_needs_a_bus() {
    let e = fails(
        "system: {}
partitions: [{name: a, cpus: 0, processes: [{cmd: dash}]}]
stop_start:
  suspend_when: {bus: rav4, signal: SPEED, below: 1}
",
    );
    assert!(
        e.contains("unknown bus `rav4` (the system has no `buses`)"),
        "{e}"
    );
}
