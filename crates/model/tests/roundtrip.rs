//! Property: the canonical form of any valid system loads back to the same model.

use bulkhead_model::*;
use proptest::prelude::*;
use proptest::sample::subsequence;

fn duration() -> impl Strategy<Value = Nanos> {
    prop_oneof![
        1u64..1_000,
        (1u64..5_000).prop_map(|n| n * 1_000),
        (1u64..5_000).prop_map(|n| n * 1_000_000),
        1u64..u32::MAX as u64
    ]
}

/// Text that needs quoting in YAML, never blank.
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ./:#'\"\\\\-]{0,12}".prop_map(|s| format!("x{s}"))
}

fn cpuset(max: u32) -> impl Strategy<Value = CpuSet> {
    proptest::collection::btree_set(0..max, 1..4).prop_map(|s| CpuSet::from_cpus(s).unwrap())
}

fn process() -> impl Strategy<Value = Process> {
    (text(), duration(), any::<bool>(), 0u64..=2).prop_map(|(cmd, budget, init, j)| Process {
        cmd,
        budget,
        jitter: budget * j / 2,
        init,
    })
}

fn be_partition(i: usize) -> impl Strategy<Value = Partition> {
    let cpus = proptest::option::of(cpuset(8).prop_map(Cpus::Set));
    let memory = proptest::option::of(1u64..1 << 40);
    (
        text(),
        cpus,
        memory,
        proptest::collection::vec(process(), 1..3),
        proptest::option::of(text()),
        proptest::option::of(prop_oneof![Just(Network::Host), Just(Network::Private)]),
    )
        .prop_map(
            move |(prefix, cpus, memory, processes, user, network)| Partition {
                name: format!("{prefix}{i}"),
                kind: PartitionKind::Be,
                cpus,
                scheduler: Scheduler::FixedPriority,
                reclaim: false,
                memory,
                pids: memory.map(|m| (m % 1000) as u32 + 1),
                tasks: Vec::new(),
                processes,
                user: user.map(|u| format!("u{u}")),
                network,
            },
        )
}

fn task(j: usize) -> impl Strategy<Value = Task> {
    let resume = prop_oneof![Just(Resume::Continuable), Just(Resume::Restartable)];
    (
        text(),
        duration(),
        duration(),
        duration(),
        proptest::option::of(1u32..20),
        0u64..1000,
        0u64..1000,
        resume,
    )
        .prop_map(
            move |(cmd, budget, period, deadline, priority, release_jitter, blocking, resume)| {
                Task {
                    name: format!("t{j}"),
                    cmd,
                    budget,
                    period,
                    deadline,
                    priority,
                    release_jitter,
                    blocking,
                    resume,
                    service: None,
                }
            },
        )
}

fn rt_partition(i: usize) -> impl Strategy<Value = Partition> {
    let scheduler = prop_oneof![
        Just((Scheduler::FixedPriority, false)),
        Just((Scheduler::Edf, false)),
        Just((Scheduler::Edf, true))
    ];
    let tasks = (1usize..4).prop_flat_map(|n| (0..n).map(task).collect::<Vec<_>>());
    (scheduler, tasks).prop_map(move |((scheduler, reclaim), tasks)| Partition {
        name: format!("rt{i}"),
        kind: PartitionKind::Rt,
        cpus: Some(Cpus::Set(CpuSet::from_cpus([100 + i as u32]).unwrap())),
        scheduler,
        reclaim,
        memory: None,
        pids: None,
        tasks,
        processes: Vec::new(),
        user: None,
        network: None,
    })
}

/// A bus owned by `gateway` (an rt partition) with `clients`, and its two gateway tasks.
fn bus(gateway: String, clients: Vec<String>) -> impl Strategy<Value = (Bus, [Task; 2])> {
    let ids = proptest::collection::vec(0u32..0x2000_0000, 0..4);
    let allows = proptest::collection::vec(ids, clients.len());
    let interface = proptest::option::of(Just("can0".to_string()));
    (duration(), duration(), 1u32..1000, interface, allows).prop_map(
        move |(extra, budget, depth, interface, allows)| {
            let period = budget + extra;
            let clients = clients
                .iter()
                .zip(allows)
                .map(|(partition, allow)| BusClient {
                    partition: partition.clone(),
                    allow,
                })
                .collect();
            let bus = Bus {
                name: "pt".into(),
                allow_non_can: interface.is_some() && depth % 2 == 0,
                interface,
                gateway: gateway.clone(),
                period,
                reader_budget: budget,
                writer_budget: budget,
                depth,
                clients,
            };
            let task = |name: String, service| Task {
                name,
                cmd: String::new(),
                budget,
                period,
                deadline: period,
                priority: None,
                release_jitter: 0,
                blocking: 0,
                resume: Resume::Restartable,
                service: Some(service),
            };
            let tasks = [
                task(bus.reader_task(), Service::CanReader { bus: "pt".into() }),
                task(bus.writer_task(), Service::CanWriter { bus: "pt".into() }),
            ];
            (bus, tasks)
        },
    )
}

/// A window over distinct be partitions `names`, in one or two slices.
fn window(names: Vec<String>) -> impl Strategy<Value = Window> {
    let most = names.len().min(4);
    (duration(), subsequence(names, 0..=most), any::<bool>()).prop_map(|(length, chosen, all)| {
        let slices = chosen
            .chunks(2)
            .enumerate()
            .map(|(j, pair)| Slice {
                cpus: if all && chosen.len() <= 2 {
                    Cpus::All
                } else {
                    Cpus::Set(CpuSet::from_cpus([j as u32 * 4]).unwrap())
                },
                sc_partition: pair.first().cloned(),
                be_partition: pair.get(1).cloned(),
            })
            .collect();
        Window { length, slices }
    })
}

fn channel(k: usize, names: Vec<String>) -> impl Strategy<Value = Channel> {
    let kind = prop_oneof![Just(ChannelKind::Fifo), Just(ChannelKind::Latest)];
    (
        kind,
        1u32..4096,
        1u32..100,
        proptest::sample::select(names.clone()),
        proptest::sample::select(names),
    )
        .prop_map(move |(kind, message_size, depth, writer, reader)| Channel {
            name: format!("c{k}"),
            kind,
            message_size,
            depth: if kind == ChannelKind::Fifo { depth } else { 1 },
            writer,
            readers: vec![reader],
        })
}

fn system() -> impl Strategy<Value = System> {
    let partitions = (1usize..5, 0usize..3).prop_flat_map(|(be, rt)| {
        let be: Vec<_> = (0..be).map(be_partition).collect();
        let rt: Vec<_> = (0..rt).map(rt_partition).collect();
        (be, rt)
    });
    partitions
        .prop_flat_map(|(be, rt)| {
            let be_names: Vec<String> = be.iter().map(|p| p.name.clone()).collect();
            let windows = proptest::collection::vec(window(be_names.clone()), 0..4);
            let all_names: Vec<String> = be.iter().chain(&rt).map(|p| p.name.clone()).collect();
            let channels = (0usize..3).prop_flat_map(move |n| {
                (0..n)
                    .map(|k| channel(k, all_names.clone()))
                    .collect::<Vec<_>>()
            });
            let buses = match rt.first() {
                Some(g) => proptest::option::of(bus(g.name.clone(), be_names.clone())).boxed(),
                None => Just(None).boxed(),
            };
            let partitions: Vec<Partition> = be.into_iter().chain(rt).collect();
            let cpus = proptest::option::of(Just(CpuSet::parse("0-127").unwrap()));
            (
                Just(partitions),
                windows,
                channels,
                any::<bool>(),
                cpus,
                proptest::option::of(cpuset(4)),
                buses,
            )
        })
        .prop_map(
            |(mut partitions, windows, channels, set_cwd, cpus, supervisor_cpus, bus)| {
                let mut buses = Vec::new();
                if let Some((bus, tasks)) = bus {
                    let gateway = partitions.iter_mut().find(|p| p.name == bus.gateway);
                    gateway.expect("rt partition").tasks.extend(tasks);
                    buses.push(bus);
                }
                System {
                    cpus,
                    set_cwd,
                    supervisor_cpus,
                    partitions,
                    windows,
                    channels,
                    buses,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn canonical_form_loads_back_identically(sys in system()) {
        let yaml = to_canonical_yaml(&sys);
        let loaded = load_str(&yaml, "canonical.yaml").map_err(|e| TestCaseError::fail(format!("{e}\n{yaml}")))?;
        prop_assert_eq!(&loaded.system, &sys, "{}", yaml);
    }
}
