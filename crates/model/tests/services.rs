//! Buses (the CAN gateway's tasks), I/O tasks with derived reservations, and partition users.

use bulkhead_model::{load_str, Network, Service};

const MS: u64 = 1_000_000;

fn load(src: &str) -> bulkhead_model::System {
    match load_str(src, "t.yaml") {
        Ok(l) => l.system,
        Err(e) => panic!("{e}"),
    }
}

fn error(src: &str) -> String {
    load_str(src, "t.yaml").expect_err("invalid").to_string()
}

/// DriveOS section 4.1: "the utilization percentage of USB-CAN devices in DriveOS is 10%. If a
/// task with a period of 1 ms waits for a USB-CAN read, then the USB-CAN BH will receive
/// 0.1 ms budget in every 1 ms".
#[test]
fn io_task_gets_u_io_times_the_served_period() {
    let s = load(
        "system: {}
partitions:
  - name: adas
    kind: rt
    cpus: 0
    tasks:
      - {name: ctl, cmd: c, budget: 200us, period: 1ms}
      - {name: can-bh, cmd: b, serves: ctl, io_utilization: 0.1}
",
    );
    let bh = &s.partitions[0].tasks[1];
    assert_eq!((bh.budget, bh.period, bh.deadline), (MS / 10, MS, MS));
}

#[test]
fn io_task_errors_name_the_key() {
    let base = "system: {}\npartitions:\n  - name: a\n    kind: rt\n    cpus: 0\n    tasks:\n      - {name: ctl, cmd: c, budget: 1ms, period: 10ms}\n";
    let cases = [
        (
            "{name: io, cmd: b, serves: nope, io_utilization: 0.1}",
            "partitions[0].tasks[1].serves: no task `nope`",
        ),
        (
            "{name: io, cmd: b, serves: ctl, io_utilization: 1.5}",
            "partitions[0].tasks[1].io_utilization: must be in (0, 1]",
        ),
        (
            "{name: io, cmd: b, serves: ctl}",
            "partitions[0].tasks[1]: missing `io_utilization`",
        ),
        (
            "{name: io, cmd: b, serves: ctl, io_utilization: 0.1, period: 1ms}",
            "partitions[0].tasks[1].period: an I/O task takes the period",
        ),
        (
            "{name: io, cmd: b, budget: 1ms}",
            "partitions[0].tasks[1]: missing `period`",
        ),
    ];
    for (task, expect) in cases {
        let e = error(&format!("{base}      - {task}\n"));
        assert!(e.contains(expect), "{task}: {e}");
        assert!(e.starts_with("t.yaml:8:"), "{task}: {e}");
    }
}

const BUS: &str = "system: {}
partitions:
  - name: gw
    kind: rt
    cpus: 0
    scheduler: edf
    tasks: []
  - name: ic
    cpus: 1
    user: nobody
    processes: [{cmd: dash}]
buses:
  - name: pt
    gateway: gw
    period: 2ms
    reader_budget: 100us
    writer_budget: 150us
    clients:
      - {partition: ic, allow: [0x1A0, 416, 0x18FF50E5]}
";

#[test]
fn a_bus_adds_the_gateway_tasks_to_its_partition() {
    let s = load(BUS);
    let gw = &s.partitions[0];
    let tasks: Vec<_> = gw
        .tasks
        .iter()
        .map(|t| (t.name.as_str(), t.budget, t.period, t.service.clone()))
        .collect();
    let bus = |b: &str| b.to_string();
    assert_eq!(
        tasks,
        [
            (
                "pt-reader",
                MS / 10,
                2 * MS,
                Some(Service::CanReader { bus: bus("pt") })
            ),
            (
                "pt-writer",
                3 * MS / 20,
                2 * MS,
                Some(Service::CanWriter { bus: bus("pt") })
            ),
        ]
    );
    assert_eq!(s.buses[0].clients[0].allow, [0x1A0, 0x1A0, 0x18FF_50E5]);
    assert_eq!(s.buses[0].depth, 256);
    assert_eq!(s.partitions[1].user.as_deref(), Some("nobody"));
    assert_eq!(s.network_of(&s.partitions[0]), Network::Host, "the gateway");
    assert_eq!(s.network_of(&s.partitions[1]), Network::Private, "a client");
    let canonical = bulkhead_model::to_canonical_yaml(&s);
    assert_eq!(load(&canonical), s, "{canonical}");
}

#[test]
fn bus_errors_name_the_key() {
    let cases = [
        (
            "gateway: gw",
            "gateway: ic",
            "buses[0].gateway: `ic` is not an rt partition",
        ),
        (
            "gateway: gw",
            "gateway: x",
            "buses[0].gateway: unknown partition `x`",
        ),
        (
            "partition: ic,",
            "partition: gw,",
            "buses[0].clients[0].partition: the gateway's own partition",
        ),
        (
            "0x18FF50E5",
            "0x20000000",
            "buses[0].clients[0].allow[2]: 0x20000000 is not a CAN id",
        ),
        (
            "writer_budget: 150us",
            "writer_budget: 3ms",
            "buses[0].writer_budget: exceeds the period",
        ),
        (
            "name: pt",
            "name: p/t",
            "buses[0].name: a bus name uses only",
        ),
        (
            "tasks: []",
            "network: private\n    tasks: []",
            "partitions[0].network: the gateway of bus `pt` must reach the bus",
        ),
        (
            "tasks: []",
            "tasks: [{name: pt-reader, cmd: x, budget: 1ms, period: 2ms}]",
            "task name `pt-reader` is taken",
        ),
    ];
    for (from, to, expect) in cases {
        let src = BUS.replacen(from, to, 1);
        let e = error(&src);
        assert!(e.contains(expect), "{to}: {e}");
    }
}

#[test]
fn a_host_network_client_is_warned_about() {
    let src = BUS.replace("user: nobody", "user: nobody\n    network: host");
    let loaded = load_str(&src, "t.yaml").unwrap();
    let w: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        w.iter()
            .any(|w| w.contains("partitions[1].network: partition `ic` shares the host network")),
        "{w:?}"
    );
    let plain = load_str(
        "system: {}\npartitions: [{name: a, cpus: 1, processes: [x]}]\n",
        "t",
    )
    .unwrap();
    assert_eq!(
        plain.system.network_of(&plain.system.partitions[0]),
        Network::Host
    );
}

/// `listen`: the address the supervisor binds for a best-effort partition; such a
/// partition runs in a private network unless it says otherwise.
#[test]
fn a_listening_partition_gets_its_address_and_a_private_network() {
    let src = |listen: &str| {
        format!("system: {{}}\npartitions:\n  - {{name: a, cpus: 1, listen: {listen}, processes: [x]}}\n  - {{name: b, cpus: 1, processes: [x]}}\n")
    };
    for (given, want) in [
        ("8080", "127.0.0.1:8080"),
        ("localhost:8081", "127.0.0.1:8081"),
        ("\"0.0.0.0:80\"", "0.0.0.0:80"),
        ("\"[::1]:9000\"", "[::1]:9000"),
    ] {
        let s = load(&src(given));
        assert_eq!(s.partitions[0].listen.unwrap().to_string(), want, "{given}");
        assert_eq!(s.network_of(&s.partitions[0]), Network::Private, "{given}");
        assert_eq!(s.network_of(&s.partitions[1]), Network::Host, "{given}");
    }
    let host = load(&src("8080").replace("listen: 8080", "listen: 8080, network: host"));
    assert_eq!(host.network_of(&host.partitions[0]), Network::Host);
    for bad in ["web", "\"1.2.3:80\"", "70000", "\"localhost\""] {
        let e = error(&src(bad));
        assert!(
            e.contains("partitions[0].listen: `") && e.contains("is not an address to listen on"),
            "{bad}: {e}"
        );
    }
    let two = |a: &str, b: &str| {
        format!("system: {{}}\npartitions:\n  - {{name: a, cpus: 1, listen: {a}, processes: [x]}}\n  - {{name: b, cpus: 1, listen: {b}, processes: [x]}}\n")
    };
    for (a, b) in [("8080", "localhost:8080"), ("\"0.0.0.0:8080\"", "8080")] {
        let e = error(&two(a, b));
        assert!(
            e.contains("partitions[1].listen: `")
                && e.contains("clashes with")
                && e.contains("of partition `a` (partitions[0].listen)"),
            "{a} {b}: {e}"
        );
    }
    assert!(load(&two("8080", "8081")).partitions[1].listen.is_some());
    assert!(load(&two("8080", "\"[::1]:8080\"")).partitions[1]
        .listen
        .is_some());
    let zero = error(&src("0"));
    assert!(zero.contains("partitions[0].listen: port 0"), "{zero}");
    let rt = error("system: {cpus: 0}\npartitions:\n  - name: r\n    kind: rt\n    cpus: 0\n    listen: 8080\n    tasks: [{name: t, cmd: c, budget: 1ms, period: 10ms}]\n");
    assert!(
        rt.contains("partitions[0].listen: only a best-effort partition may listen"),
        "{rt}"
    );
}

/// `offset`: a task released `offset` after each period's start (less than its period),
/// kept through the canonical form.
#[test]
fn a_task_offset_moves_its_releases_within_the_period() {
    let src = |offset: &str| {
        format!("system: {{cpus: 0}}\npartitions:\n  - name: r\n    kind: rt\n    cpus: 0\n    tasks: [{{name: t, cmd: c, budget: 200us, period: 1ms{offset}}}]\n")
    };
    let s = load(&src(", offset: 300us"));
    assert_eq!(s.partitions[0].tasks[0].offset, 300_000);
    assert_eq!(load(&src("")).partitions[0].tasks[0].offset, 0);
    let canonical = bulkhead_model::to_canonical_yaml(&s);
    assert!(canonical.contains(", offset: 300us,"), "{canonical}");
    assert_eq!(load(&canonical).partitions[0].tasks[0].offset, 300_000);
    let e = error(&src(", offset: 1ms"));
    assert!(
        e.contains("partitions[0].tasks[0].offset: must be less than the period"),
        "{e}"
    );
}
