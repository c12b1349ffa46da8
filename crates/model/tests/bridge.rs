//! Channels bridged over Zenoh (issue 40): the bridge's end, its task and reservation in
//! its partition, its network, and the canonical form.

use bulkhead_model::{
    load_str, to_canonical_yaml, BridgeDirection, Network, Service, System, ZenohMode,
};

const MS: u64 = 1_000_000;

fn load(src: &str) -> System {
    match load_str(src, "t.yaml") {
        Ok(l) => l.system,
        Err(e) => panic!("{e}"),
    }
}

const BRIDGED: &str = "system: {}
partitions:
  - {name: ctl, kind: rt, cpus: 0, tasks: [{name: w, cmd: c, budget: 1ms, period: 10ms}]}
  - {name: log, kind: rt, cpus: 1, tasks: [{name: r, cmd: c, budget: 1ms, period: 10ms}]}
  - {name: bridge, kind: rt, cpus: 2, tasks: []}
  - {name: net, kind: rt, cpus: 3, tasks: []}
channels:
  - name: speed
    kind: fifo
    message_size: 16
    depth: 8
    writer: ctl/w
    bridge: {zenoh: {key: vehicle/speed, listen: [\"tcp/0.0.0.0:7447\"]}}
  - name: remote
    kind: fifo
    message_size: 16
    depth: 8
    writer: zenoh
    readers: [log/r]
    bridge:
      partition: net
      period: 5ms
      budget: 500us
      latency: 2ms
      loss: 0.5%
      zenoh: {key: vehicle/speed, connect: [\"tcp/10.0.0.1:7447\"], mode: client}
";

#[test]
fn a_published_channel_is_read_by_its_bridge_task() {
    let s = load(BRIDGED);
    let c = &s.channels[0];
    assert_eq!(
        (c.writer.as_str(), c.writer_task.as_deref()),
        ("ctl", Some("w"))
    );
    assert_eq!(c.readers, ["bridge"]);
    assert_eq!(c.reader_tasks, [Some("speed-bridge".to_string())]);
    let b = c.bridge.as_ref().unwrap();
    assert_eq!(b.direction, BridgeDirection::Publish);
    assert_eq!(b.zenoh.mode, ZenohMode::Peer);
    assert_eq!(b.zenoh.listen, ["tcp/0.0.0.0:7447"]);
    let task = &s.partitions[2].tasks[0];
    assert_eq!(task.name, "speed-bridge");
    assert_eq!(
        task.service,
        Some(Service::Bridge {
            channel: "speed".into()
        })
    );
    assert_eq!(
        (task.budget, task.period),
        (MS, 10 * MS),
        "the default reservation"
    );
}

#[test]
fn a_subscribed_channel_is_written_by_its_bridge_task() {
    let s = load(BRIDGED);
    let c = &s.channels[1];
    assert_eq!(
        (c.writer.as_str(), c.writer_task.as_deref()),
        ("net", Some("remote-bridge"))
    );
    assert_eq!(c.readers, ["log"]);
    assert_eq!(
        c.bridge.as_ref().unwrap().direction,
        BridgeDirection::Subscribe
    );
    let task = &s.partitions[3].tasks[0];
    assert_eq!((task.budget, task.period), (MS / 2, 5 * MS));
}

#[test]
fn a_bridge_declares_its_hop_latency_and_loss() {
    let s = load(BRIDGED);
    let hop = |i: usize| {
        let b = s.channels[i].bridge.as_ref().unwrap();
        (b.latency, b.loss_ppm)
    };
    assert_eq!(hop(0), (0, 0), "not declared: none");
    assert_eq!(hop(1), (2 * MS, 5_000), "2ms, 0.5%");
}

/// A pipeline's stage reaches a bridged channel as its local end: the reader of a
/// subscribed channel (`input`), the writer of a published one (`output`).
#[test]
fn a_stage_reads_and_writes_bridged_channels_from_their_local_end() {
    let pipeline = |input: &str, output: &str| {
        format!(
            "{BRIDGED}pipelines:\n  - name: p\n    spec: A|B\n    stages:\n      A: {{partition: log, wcet: 100us, input: '{input}'}}\n      B: {{partition: ctl, wcet: 100us, output: '{output}'}}\n"
        )
    };
    let s = load(&pipeline("zenoh:remote", "zenoh:speed"));
    let stages = &s.pipelines[0].stages;
    assert_eq!(
        stages[0].input.as_ref().unwrap().to_string(),
        "zenoh:remote"
    );
    assert_eq!(
        stages[1].output.as_ref().unwrap().to_string(),
        "zenoh:speed"
    );
    assert_eq!(load(&to_canonical_yaml(&s)), s);
    let error = |input: &str, output: &str| match load_str(&pipeline(input, output), "t.yaml") {
        Ok(_) => panic!("{input} -> {output} loads"),
        Err(e) => e.to_string(),
    };
    let e = error("zenoh:speed", "zenoh:speed");
    assert!(e.contains("pipelines[0].stages.A.input: channel `speed` is published: a stage's input is a channel subscribed from a Zenoh key"), "{e}");
    let e = error("zenoh:remote", "zenoh:remote");
    assert!(
        e.contains("pipelines[0].stages.B.output: channel `remote` is subscribed"),
        "{e}"
    );
    let e = error("zenoh:nothing", "zenoh:speed");
    assert!(
        e.contains("stages.A.input: no channel `nothing` with a `bridge`"),
        "{e}"
    );
    let e = error("zenoh:", "zenoh:speed");
    assert!(
        e.contains("stages.A.input: `zenoh:` needs a channel name"),
        "{e}"
    );
    let swapped =
        pipeline("zenoh:remote", "zenoh:speed").replace("B: {partition: ctl", "B: {partition: log");
    let e = load_str(&swapped, "t.yaml").unwrap_err().to_string();
    assert!(
        e.contains("stages.B.output: partition `log` is not the channel's local writer"),
        "{e}"
    );
}

#[test]
fn a_bridge_partition_keeps_the_network_of_the_machine() {
    let with_bus = format!(
        "{BRIDGED}buses:\n  - {{name: pt, gateway: ctl, period: 2ms, reader_budget: 100us, writer_budget: 100us}}\n"
    );
    let s = load(&with_bus);
    let network = |name: &str| s.network_of(s.partitions.iter().find(|p| p.name == name).unwrap());
    assert_eq!(network("bridge"), Network::Host);
    assert_eq!(network("net"), Network::Host);
    assert_eq!(network("log"), Network::Private, "a system with a bus");
}

#[test]
fn the_canonical_form_reads_back_to_the_same_system() {
    let s = load(BRIDGED);
    let canonical = to_canonical_yaml(&s);
    assert!(canonical.contains("writer: zenoh"), "{canonical}");
    assert_eq!(load(&canonical), s, "{canonical}");
}
