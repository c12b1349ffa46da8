//! `bulkhead run` with a `buses:` section: the CAN gateway's reader and
//! writer run as reserved tasks of an rt partition; a best-effort partition reaches the
//! bus only through its channels (its own network namespace hides the virtual bus),
//! sends only the ids on its allowlist, and the gateway's counters reach the schedule log.
//! Observed from outside: frames on the bus (`can dump`), frames the partition printed,
//! the schedule log, `chrt`, what is left afterwards.

mod common;
use common::{bulkhead, deadline_children, exclusive_cpus_lock, shm_objects, Scratch};
use std::process::{Child, Stdio};
use std::time::Duration;

/// A child process killed on drop (the bus, a dump), even when the test fails.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn description(bus: &str, dir: &Scratch) -> String {
    let exe = env!("CARGO_BIN_EXE_bulkhead");
    let d = dir.0.display();
    format!(
        "system: {{}}
partitions:
  - name: gw
    kind: rt
    cpus: 0
    scheduler: edf
    tasks: []
  - name: ic
    cpus: 1
    user: nobody
    processes:
      - \"{exe} can map --bus {bus} --send 1A0#0102 --send 7FF#0304 --count 4 --timeout 4s > {d}/mapped 2> {d}/map.err\"
      - \"sh -c '{exe} can dump {bus} --count 1 --timeout 1s; echo $? > {d}/direct'\"
buses:
  - name: {bus}
    gateway: gw
    period: 2ms
    reader_budget: 200us
    writer_budget: 200us
    clients:
      - {{partition: ic, allow: [0x1A0]}}
"
    )
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE, cgroups, users and namespaces"]
fn the_gateway_alone_holds_the_bus_and_filters_what_a_partition_sends() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("buses");
    let bus = format!("bh-test-{}", std::process::id());
    let _bus = Killed(bulkhead().args(["can", "bus", &bus]).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(200));
    // What reaches the bus from the partition, seen by a node of the host network.
    let dump = bulkhead()
        .args(["can", "dump", "-L", &bus, "--timeout", "5s"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let desc = dir.0.join("system.yaml");
    std::fs::write(&desc, description(&bus, &dir)).unwrap();
    let log = dir.0.join("schedule.jsonl");
    let run = bulkhead()
        .args(["run", desc.to_str().unwrap(), "--timeout", "6s"])
        .arg("--schedule-log")
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run_pid = run.id();
    let reservations = deadline_children(&run, 2, Duration::from_secs(10));
    // Frames from the bus to the partition, once its mapper is connected.
    let frames = dir.0.join("frames.log");
    std::fs::write(
        &frames,
        "(0.000000) can0 123#11\n(0.010000) can0 456#22\n(0.020000) can0 18FF50E5#33\n",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let replay = bulkhead()
        .args(["can", "replay", frames.to_str().unwrap(), "--bus", &bus])
        .output()
        .unwrap();
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let mut dump = Killed(dump);
    let _ = dump.0.kill();
    let mut on_bus = String::new();
    std::io::Read::read_to_string(dump.0.stdout.as_mut().unwrap(), &mut on_bus).unwrap();
    let read = |name: &str| std::fs::read_to_string(dir.0.join(name)).unwrap_or_default();

    assert_eq!(
        reservations.len(),
        2,
        "reader and writer reserved: {reservations:?}"
    );
    assert!(
        reservations
            .iter()
            .all(|r| r.contains("200000/2000000/2000000")),
        "{reservations:?}"
    );
    assert!(
        on_bus.contains("1A0#0102"),
        "the allowed frame is sent: {on_bus}"
    );
    assert!(
        !on_bus.contains("7FF#"),
        "the denied frame is dropped: {on_bus}"
    );
    // The partition sees the bus as every node does: its own sent frame included.
    let mapped = read("mapped");
    for frame in ["1A0#0102", "123#11", "456#22", "18FF50E5#33"] {
        assert!(
            mapped.contains(frame),
            "{frame} reaches the partition: {mapped}\n{}",
            read("map.err")
        );
    }
    assert_ne!(
        read("direct").trim(),
        "0",
        "the partition cannot attach to the bus itself"
    );
    assert!(!read("direct").trim().is_empty(), "the direct attempt ran");
    let schedule = read("schedule.jsonl");
    let counter = |name: &str, value: u64| {
        schedule.lines().any(|l| {
            l.contains("\"event\":\"counter\"")
                && l.contains(&format!("\"name\":\"ic.{name}\""))
                && l.contains(&format!("\"value\":{value}"))
        })
    };
    assert!(counter("tx_sent", 1), "{schedule}");
    assert!(counter("tx_denied", 1), "{schedule}");
    assert!(counter("rx_forwarded", 4), "{schedule}");
    let leftovers = shm_objects(&format!("bulkhead-chan-can{run_pid}-"));
    assert_eq!(
        leftovers,
        Vec::<String>::new(),
        "gateway channels left behind"
    );
}

/// `ip -o link show IFACE`, in the namespace pinned at `ns` if given; `None` if absent.
fn link(iface: &str, ns: Option<&std::path::Path>) -> Option<String> {
    let mut cmd = match ns {
        Some(pin) => {
            let mut c = std::process::Command::new("nsenter");
            c.arg(format!("--net={}", pin.display())).arg("ip");
            c
        }
        None => std::process::Command::new("ip"),
    };
    let out = cmd
        .args(["-o", "link", "show", iface])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One end of a veth pair, deleted (with its peer) when dropped.
struct Veth(String);

impl Veth {
    /// A veth pair named after `tag` and this test process; None (after saying why)
    /// when the kernel or the user cannot make one.
    fn create(tag: &str) -> Option<Veth> {
        let iface = format!("bh{tag}{}", std::process::id() % 100_000);
        let made = std::process::Command::new("ip")
            .args(["link", "add", &iface, "type", "veth", "peer", "name"])
            .arg(format!("{iface}p"))
            .status()
            .is_ok_and(|s| s.success());
        if !made {
            eprintln!("skipping: `ip link add ... type veth` failed here");
        }
        made.then_some(Veth(iface))
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.0])
            .stderr(Stdio::null())
            .status();
    }
}

/// A description whose bus `pt` has the SocketCAN interface `iface`; `extra` goes
/// into the bus's mapping (e.g. `allow_non_can: true, `).
fn interface_description(iface: &str, extra: &str, dir: &Scratch) -> String {
    format!(
        "system: {{}}
partitions:
  - {{name: gw, kind: rt, cpus: 0, scheduler: edf, tasks: []}}
  - name: ic
    cpus: 1
    processes: [\"sh -c 'ip link show {iface} > /dev/null 2>&1; echo $? > {d}/seen; sleep 3'\"]
buses:
  - {{name: pt, interface: {iface}, {extra}gateway: gw, period: 2ms, reader_budget: 200us, writer_budget: 200us, clients: [{{partition: ic}}]}}
",
        d = dir.0.display()
    )
}

#[test]
#[ignore = "needs root: make a veth pair"]
fn an_interface_that_is_not_can_is_refused_with_the_bus_position_before_anything_moves() {
    let Some(veth) = Veth::create("nc") else {
        return;
    };
    let iface = veth.0.clone();
    let before = link(&iface, None).expect("the veth is there");
    let dir = Scratch::new("not-can");
    let desc = dir.0.join("system.yaml");
    std::fs::write(&desc, interface_description(&iface, "", &dir)).unwrap();
    let out = bulkhead()
        .args(["run", desc.to_str().unwrap(), "--timeout", "2s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let at = format!("error: {}:8:", desc.display());
    assert!(
        stderr.starts_with(&at)
            && stderr.contains(&format!(
                ": buses[0].interface: `{iface}` is not a CAN interface"
            ))
            && stderr.contains("allow_non_can: true"),
        "{stderr}"
    );
    assert_eq!(
        link(&iface, None),
        Some(before),
        "the interface did not move"
    );
    assert!(!dir.0.join("seen").exists(), "no process started");
}

#[test]
#[ignore = "needs root: namespaces and interfaces"]
fn a_socketcan_interface_is_only_in_the_gateways_namespace_while_it_runs() {
    // This kernel has no CAN: one end of a veth pair stands in for can0 (an interface
    // moves between namespaces the same way, whatever its kind), which the bus allows
    // with `allow_non_can`.
    let Some(veth) = Veth::create("gw") else {
        return;
    };
    let iface = veth.0.clone();
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("socketcan");
    let desc = dir.0.join("system.yaml");
    let text = interface_description(&iface, "allow_non_can: true, ", &dir);
    std::fs::write(&desc, text).unwrap();
    let run = bulkhead()
        .args(["run", desc.to_str().unwrap(), "--timeout", "2s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pin = std::path::PathBuf::from(format!("/run/bulkhead/netns/{}-{iface}", run.id()));
    let mut during = (None, None);
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(20));
        during = (link(&iface, None), link(&iface, Some(&pin)));
        if during.0.is_none() && during.1.is_some() {
            break;
        }
    }
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (in_host, in_gateway_ns) = during;
    assert_eq!(
        in_host, None,
        "the interface left the machine's namespace: {stderr}"
    );
    let inside = in_gateway_ns.unwrap_or_default();
    assert!(
        inside.contains(&iface) && inside.contains(",UP"),
        "up in the gateway's namespace: {inside} {stderr}"
    );
    let seen = std::fs::read_to_string(dir.0.join("seen")).unwrap_or_default();
    assert!(
        !seen.trim().is_empty() && seen.trim() != "0",
        "the client partition cannot see it: {seen:?}"
    );
    // A veth end is no CAN interface (and this kernel has no CAN): the gateway's tasks
    // fail to open it, and the run says so, task by task.
    for task in ["pt-reader", "pt-writer"] {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(&format!("task `{task}` of `gw`"))
                    && l.contains("ended on its own before the stop (exit status: 1)")),
            "{stderr}"
        );
    }
    let back = link(&iface, None);
    assert!(
        back.is_some_and(|l| !l.contains(",UP")),
        "back, down as before: {stderr}"
    );
    assert!(!pin.exists(), "the namespace's pin is removed");
}
