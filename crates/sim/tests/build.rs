//! From a system description to a simulation: priorities, channel bindings, defaults.

use bulkhead_sim::*;

const PIPELINE: &str = "
system: {cpus: 0-1}
partitions:
  - name: sensors
    kind: rt
    cpus: 0
    tasks:
      - {name: camera, cmd: cam, budget: 1ms, period: 10ms}
  - name: control
    kind: rt
    cpus: 1
    tasks:
      - {name: logger, cmd: log, budget: 1ms, period: 5ms, priority: 2}
      - {name: planner, cmd: plan, budget: 2ms, period: 10ms, priority: 1}
channels:
  - {name: frames, kind: latest, message_size: 64, writer: sensors, readers: [control]}
";

fn system(yaml: &str) -> bulkhead_model::System {
    bulkhead_model::load_str(yaml, "pipeline.yaml")
        .unwrap()
        .system
}

#[test]
fn explicit_priorities_win_then_deadline_monotonic_with_ties_in_order() {
    let spec = from_system(&system(PIPELINE), &BuildOptions::default()).unwrap();
    let prio: Vec<(String, u32)> = spec
        .tasks
        .iter()
        .map(|t| (t.name.to_string(), spec.servers[t.server].priority))
        .collect();
    assert_eq!(
        prio,
        [
            ("camera".into(), 1),
            ("logger".into(), 2),
            ("planner".into(), 1)
        ]
    );
    let dm = "partitions: [{name: p, kind: rt, cpus: 0, tasks: [{name: a, cmd: x, budget: 1ms, period: 10ms}, \
              {name: b, cmd: x, budget: 1ms, period: 10ms, deadline: 5ms}, {name: c, cmd: x, budget: 1ms, period: 10ms}]}]";
    let spec = from_system(&system(dm), &BuildOptions::default()).unwrap();
    let ranks: Vec<u32> = spec
        .tasks
        .iter()
        .map(|t| spec.servers[t.server].priority)
        .collect();
    assert_eq!(ranks, [2, 1, 3]);
    assert_eq!(hyperperiod(&spec), Some(10_000_000));
}

#[test]
fn channels_bind_the_first_task_by_default_and_the_linked_one_on_request() {
    let sys = system(PIPELINE);
    let spec = from_system(&sys, &BuildOptions::default()).unwrap();
    assert_eq!(
        spec.tasks[1].inputs,
        [0],
        "logger, the first task of control, reads by default"
    );
    assert_eq!(link_warnings(&sys, &BuildOptions::default()).len(), 1);
    let options = BuildOptions {
        links: vec![Link::parse("frames=camera>planner").unwrap()],
        ..BuildOptions::default()
    };
    let spec = from_system(&sys, &options).unwrap();
    assert!(spec.tasks[1].inputs.is_empty());
    assert_eq!(
        (
            spec.tasks[0].outputs.as_slice(),
            spec.tasks[2].inputs.as_slice()
        ),
        (&[0][..], &[0][..])
    );
    assert!(link_warnings(&sys, &options).is_empty());
    let report = simulate(
        &spec,
        Options::until(100_000_000),
        &mut bulkhead_trace::Discard,
    )
    .unwrap();
    let chain = &report.chains[0];
    assert_eq!(chain.name, "sensors/camera -> control/planner");
    // The camera (CPU 0) samples at 0, 10, ... and writes at 1 ms; the planner
    // (CPU 1) reads when it starts, at 0, 10, ...: each frame waits one period.
    assert_eq!(
        (chain.min_delay_ns, chain.max_delay_ns),
        (Some(12_000_000), Some(12_000_000))
    );
    assert_eq!(chain.delivered, 9);
}

#[test]
fn bad_links_name_what_is_missing() {
    let sys = system(PIPELINE);
    let bad = |link: &str| {
        from_system(
            &sys,
            &BuildOptions {
                links: vec![Link::parse(link).unwrap()],
                ..BuildOptions::default()
            },
        )
        .unwrap_err()
    };
    let e = bad("nope=camera>planner");
    assert_eq!(e, BuildError::LinkChannel("nope".into()));
    assert_eq!(e.to_string(), "--link nope: no channel `nope`");
    let e = bad("frames=planner>logger");
    assert!(matches!(&e, BuildError::LinkTask { task, .. } if task == "planner"));
    assert_eq!(
        e.to_string(),
        "--link frames: no task `planner` in partition(s) sensors"
    );
    assert!(Link::parse("frames=camera").is_err());
    assert_eq!(Link::parse("=a>b"), Err(LinkSyntax("=a>b".into())));
    assert_eq!(
        LinkSyntax("=a>b".into()).to_string(),
        "`=a>b`: expected CHANNEL=WRITER_TASK>READER_TASK[,READER_TASK...]"
    );
}

#[test]
fn a_spec_that_fails_its_checks_is_not_simulated() {
    let mut spec = from_system(&system(PIPELINE), &BuildOptions::default()).unwrap();
    spec.channels[0].depth = 0;
    let e = simulate(&spec, Options::until(1_000_000), &mut trace::Discard).unwrap_err();
    assert_eq!(e, SimError::Spec(SpecError::Depth("frames".into())));
    assert_eq!(e.to_string(), "channel `frames`: depth must be positive");
    assert_eq!(
        ServerChoice::parse("io:0"),
        Err(bulkhead_model::TaskServerError("io:0".into()))
    );
}

#[test]
fn a_partition_on_all_cpus_needs_system_cpus() {
    let yaml = "partitions: [{name: p, kind: rt, cpus: all, tasks: [{name: a, cmd: x, budget: 1ms, period: 10ms}]}]";
    let err = from_system(&system(yaml), &BuildOptions::default()).unwrap_err();
    assert_eq!(err, BuildError::AllCpus("p".into()));
    assert_eq!(
        err.to_string(),
        "partition `p`: `cpus: all` needs `system.cpus` to be simulated"
    );
    let spec = from_system(
        &system(&format!("system: {{cpus: 2-3}}\n{yaml}")),
        &BuildOptions::default(),
    )
    .unwrap();
    // Fixed priority on two CPUs is partitioned: the one task runs on the first, where
    // the analysis places it and `run` pins it.
    assert_eq!(spec.domains[0].cpus, [2]);
}

/// A task whose 8 ms were measured at 600 MHz, a quarter of them memory-bound, on a
/// cluster whose top is 1200 MHz: at the top it runs 8 x (0.25 + 0.75 x 600/1200) = 5 ms
/// (its server's budget stays 8 ms); CPU-bound, 4 ms; without `power:`, its budget.
#[test]
fn execution_times_are_the_wcet_at_the_top_frequency() {
    let yaml = "
system: {cpus: 0}
power:
  clusters:
    - cpus: 0
      operating_points: [{frequency: 600, power: 0.2}, {frequency: 1200, power: 0.6}]
partitions:
  - name: ctl
    kind: rt
    cpus: 0
    tasks: [{name: t, cmd: t, budget: 8ms, period: 10ms, wcet_frequency: 600, memory_bound: 0.25}]
";
    let response = |yaml: &str| {
        let spec = from_system(&system(yaml), &BuildOptions::default()).unwrap();
        assert_eq!(spec.servers[0].budget, 8_000_000);
        let options = Options {
            drain: true,
            ..Options::until(10_000_000)
        };
        simulate(&spec, options, &mut bulkhead_trace::Discard)
            .unwrap()
            .tasks[0]
            .max_response_ns
    };
    assert_eq!(response(yaml), 5_000_000);
    assert_eq!(
        response(&yaml.replace(", memory_bound: 0.25", "")),
        4_000_000
    );
    let plain = yaml.replace(", wcet_frequency: 600, memory_bound: 0.25", "");
    assert_eq!(response(&plain), 8_000_000);
    let no_power = "system: {cpus: 0}\npartitions: [{name: ctl, kind: rt, cpus: 0, tasks: [{name: t, cmd: t, budget: 8ms, period: 10ms, wcet_frequency: 600, memory_bound: 0.25}]}]\n";
    assert_eq!(response(no_power), 8_000_000);
}
