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

/// A partition name: text without `/` (names become cgroup directories).
fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .:#'\"\\\\-]{0,12}".prop_map(|s| format!("x{s}"))
}

fn cpuset(max: u32) -> impl Strategy<Value = CpuSet> {
    proptest::collection::btree_set(0..max, 1..4).prop_map(|s| CpuSet::from_cpus(s).unwrap())
}

fn process() -> impl Strategy<Value = Process> {
    (
        text(),
        duration(),
        any::<bool>(),
        0u64..=2,
        proptest::option::of(1u64..3_000_000),
    )
        .prop_map(|(cmd, budget, init, j, frequency_khz)| Process {
            cmd,
            budget,
            jitter: budget * j / 2,
            init,
            frequency_khz,
            restart: None,
            required: init,
        })
}

fn be_partition(i: usize) -> impl Strategy<Value = Partition> {
    let cpus = proptest::option::of(cpuset(8).prop_map(Cpus::Set));
    let memory = proptest::option::of(1u64..1 << 40);
    (
        name(),
        cpus,
        memory,
        proptest::collection::vec(process(), 1..3),
        proptest::option::of(text()),
        proptest::option::of(prop_oneof![Just(Network::Host), Just(Network::Private)]),
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        proptest::array::uniform7(any::<bool>()),
    )
        .prop_map(
            move |(
                prefix,
                cpus,
                memory,
                processes,
                user,
                network,
                (clean_env, no_new_privs, no_capabilities, seccomp, private_tmp, pid_namespace),
                [private_users, protect_system, protect_kernel, protect_cgroups, hide_runtime_dir, private_ipc, remove_ipc],
            )| {
                Partition {
                    name: format!("{prefix}{i}"),
                    kind: PartitionKind::Be,
                    exclusive: true,
                    // Some of the be partitions have a CPU bandwidth (a percentage).
                    cpu: memory.map(|m| (m % 400) as u32 + 1),
                    nonpreemptible: memory.map(|m| m % 3_000_000),
                    cpus,
                    scheduler: Scheduler::FixedPriority,
                    reclaim: false,
                    memory,
                    // At least what starting the processes takes: 3 each (program,
                    // monitor, init of its pid namespace).
                    pids: memory.map(|m| (m % 1000) as u32 + 3 * processes.len() as u32),
                    tasks: Vec::new(),
                    processes,
                    // A numeric uid of its own (names must be accounts of this machine).
                    user: user.map(|u| format!("{}", 70000 + u.len() * 1000 + i)),
                    shared_user: memory.is_some(),
                    monitor: memory.is_none(),
                    network,
                    // A port of its own, never 0: `check` refuses port 0 and two
                    // partitions listening on one port.
                    listen: memory.map(|m| {
                        let port = 10_000 + 1000 * i as u64 + m % 1000;
                        std::net::SocketAddr::from(([127, 0, 0, 1], port as u16))
                    }),
                    interface: None,
                    sandbox: Sandbox {
                        clean_env,
                        no_new_privs,
                        no_capabilities,
                        seccomp,
                        private_tmp,
                        pid_namespace,
                        private_users,
                        protect_system,
                        protect_kernel,
                        protect_cgroups,
                        hide_runtime_dir,
                        private_ipc,
                        remove_ipc,
                    },
                    // Some partitions set their own search path (absolute entries).
                    path: network.map(|_| format!("/opt/p{i}/bin:/usr/bin")),
                }
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
        proptest::option::of(1u64..3_000_000),
        prop_oneof![Just(0u32), 0u32..=1_000_000],
        proptest::option::of(server()),
    )
        .prop_map(
            move |(
                cmd,
                budget,
                period,
                deadline,
                priority,
                release_jitter,
                blocking,
                resume,
                wcet_khz,
                memory_bound_ppm,
                server,
            )| {
                Task {
                    name: format!("t{j}"),
                    cmd,
                    budget,
                    period,
                    deadline,
                    priority,
                    release_jitter,
                    offset: 0,
                    blocking,
                    resume,
                    wcet_khz,
                    memory_bound_ppm,
                    service: None,
                    server,
                }
            },
        )
}

fn server() -> impl Strategy<Value = TaskServer> {
    prop_oneof![
        Just(TaskServer::None),
        Just(TaskServer::Sporadic),
        Just(TaskServer::Deferrable),
        Just(TaskServer::Cbs),
        (1u32..=1000).prop_map(|permille| TaskServer::Io { permille }),
    ]
}

fn rt_partition(i: usize) -> impl Strategy<Value = Partition> {
    let scheduler = prop_oneof![
        Just((Scheduler::FixedPriority, false)),
        Just((Scheduler::Edf, false)),
        Just((Scheduler::Edf, true))
    ];
    let tasks = (1usize..4).prop_flat_map(|n| (0..n).map(task).collect::<Vec<_>>());
    let interface = proptest::option::of(interface());
    (scheduler, tasks, interface).prop_map(move |((scheduler, reclaim), mut tasks, interface)| {
        if interface.is_some() {
            // A partition scheduled as a server gives its tasks their reservation.
            tasks.iter_mut().for_each(|t| t.server = None);
        }
        Partition {
            name: format!("rt{i}"),
            kind: PartitionKind::Rt,
            cpus: Some(Cpus::Set(CpuSet::from_cpus([100 + i as u32]).unwrap())),
            exclusive: i % 2 == 0,
            cpu: None,
            nonpreemptible: None,
            scheduler,
            reclaim,
            memory: None,
            pids: None,
            tasks,
            processes: Vec::new(),
            user: None,
            shared_user: false,
            monitor: false,
            network: None,
            listen: None,
            interface,
            sandbox: Sandbox::default(),
            path: None,
        }
    })
}

/// A server interface with any of its two values given (budget <= period).
fn interface() -> impl Strategy<Value = ServerInterface> {
    (
        proptest::option::of(duration()),
        proptest::option::of(duration()),
    )
        .prop_map(|(period, budget)| ServerInterface {
            period,
            budget: match (period, budget) {
                (Some(p), Some(b)) => Some(b.min(p)),
                (_, b) => b,
            },
        })
}

/// A task of a mode: one of `tasks`, with or without changed parameters.
fn mode_task(tasks: Vec<String>) -> impl Strategy<Value = ModeTask> {
    (
        proptest::sample::select(tasks),
        proptest::option::of(duration()),
        proptest::option::of(duration()),
        proptest::option::of(duration()),
    )
        .prop_map(|(name, budget, period, deadline)| ModeTask {
            name,
            budget,
            period,
            deadline,
        })
}

/// What one rt partition runs in a mode.
fn local_mode(p: &Partition) -> impl Strategy<Value = LocalMode> {
    let names: Vec<String> = p.tasks.iter().map(|t| t.name.clone()).collect();
    let tasks = proptest::collection::vec(mode_task(names), 0..3).prop_map(|mut list| {
        let mut seen = std::collections::HashSet::new();
        list.retain(|t| seen.insert(t.name.clone()));
        list
    });
    let interface = if p.interface.is_some() {
        proptest::option::of(interface()).boxed()
    } else {
        Just(None).boxed()
    };
    let partition = p.name.clone();
    (tasks, interface).prop_map(move |(tasks, interface)| LocalMode {
        partition: partition.clone(),
        tasks,
        interface,
    })
}

/// A mode table over the rt partitions `rt`, with or without explicit transitions.
fn modes(rt: Vec<Partition>) -> impl Strategy<Value = Option<Modes>> {
    if rt.is_empty() {
        return Just(None).boxed();
    }
    let requester = rt[0].name.clone();
    let mode = move |i: usize| {
        let locals: Vec<_> = rt.iter().map(local_mode).collect();
        (locals, proptest::collection::vec(any::<bool>(), rt.len())).prop_map(
            move |(locals, keep)| Mode {
                name: format!("m{i}"),
                partitions: locals
                    .into_iter()
                    .zip(keep)
                    .filter_map(|(l, k)| k.then_some(l))
                    .collect(),
            },
        )
    };
    let policy = prop_oneof![
        Just(SwitchPolicy::Sequential),
        Just(SwitchPolicy::Batch),
        Just(SwitchPolicy::Greedy),
        Just(SwitchPolicy::Boost)
    ];
    (1usize..4)
        .prop_flat_map(move |n| {
            let table: Vec<_> = (0..n).map(&mode).collect();
            let pairs: Vec<(usize, usize)> = (0..n)
                .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
                .collect();
            let transitions = proptest::option::of(
                subsequence(pairs.clone(), 0..=pairs.len())
                    .prop_flat_map({
                        let policy = policy.clone();
                        move |pairs| {
                            let policies = proptest::collection::vec(policy.clone(), pairs.len());
                            (Just(pairs), policies)
                        }
                    })
                    .prop_map(|(pairs, policies)| {
                        pairs
                            .into_iter()
                            .zip(policies)
                            .map(|((a, b), policy)| Transition {
                                from: format!("m{a}"),
                                to: format!("m{b}"),
                                policy,
                            })
                            .collect::<Vec<_>>()
                    }),
            );
            (table, 0..n, transitions, 1u64..1_000, 1u64..1_000)
        })
        .prop_map(move |(table, initial, transitions, budget, extra)| {
            Some(Modes {
                initial: format!("m{initial}"),
                agent: Agent {
                    budget: budget * 1_000,
                    period: (budget + extra) * 1_000,
                },
                table,
                transitions,
                requesters: vec![Requester {
                    partition: requester.clone(),
                    modes: vec![format!("m{initial}")],
                    suspend: budget % 2 == 1,
                }],
                switch_when: Vec::new(),
            })
        })
        .boxed()
}

/// A bus owned by `gateway` (an rt partition) with `clients`, and its two gateway tasks.
fn bus(gateway: String, clients: Vec<String>) -> impl Strategy<Value = (Bus, [Task; 2])> {
    let ids = proptest::collection::vec(0u32..0x2000_0000, 0..4);
    let limit = proptest::option::of(1u32..=1024);
    // A client that may send nothing has no limits to set.
    let client = (ids, limit.clone(), limit).prop_map(|(ids, rate, queue)| {
        let some = !ids.is_empty();
        (ids, rate.filter(|_| some), queue.filter(|_| some))
    });
    let allows = proptest::collection::vec(client, clients.len());
    let interface = proptest::option::of(Just("can0".to_string()));
    (duration(), duration(), 1u32..1000, interface, allows).prop_map(
        move |(extra, budget, depth, interface, allows)| {
            let period = budget + extra;
            let clients = clients
                .iter()
                .zip(allows)
                .map(|(partition, (allow, rate, queue))| BusClient {
                    partition: partition.clone(),
                    allow,
                    rate,
                    queue,
                })
                .collect();
            let bus = Bus {
                name: "pt".into(),
                allow_non_can: interface.is_some() && depth % 2 == 0,
                interface,
                dbc: None,
                gateway: gateway.clone(),
                period,
                reader_budget: budget,
                writer_budget: budget,
                depth,
                clients,
            };
            let task = |name: String, service| Task {
                resume: Resume::Restartable,
                service: Some(service),
                ..Task::periodic(name, budget, period)
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
                frequency_khz: None,
            })
            .collect();
        Window { length, slices }
    })
}

fn channel(k: usize, names: Vec<String>) -> impl Strategy<Value = Channel> {
    let kind = prop_oneof![Just(ChannelKind::Fifo), Just(ChannelKind::Latest)];
    let overflow = prop_oneof![
        Just(Overflow::Block),
        Just(Overflow::DropNewest),
        Just(Overflow::DropOldest)
    ];
    let reads = prop_oneof![
        Just(Reads::ONE),
        (2u32..9).prop_map(Reads::Count),
        Just(Reads::All)
    ];
    (
        kind,
        1u32..4096,
        1u32..100,
        proptest::sample::select(names.clone()),
        proptest::sample::select(names),
        (overflow, reads),
    )
        .prop_map(
            move |(kind, message_size, depth, writer, reader, (overflow, reads))| Channel {
                name: format!("c{k}"),
                kind,
                message_size,
                depth: if kind == ChannelKind::Fifo { depth } else { 1 },
                overflow: if kind == ChannelKind::Fifo {
                    overflow
                } else {
                    Overflow::Block
                },
                reads: if kind == ChannelKind::Fifo {
                    reads
                } else {
                    Reads::ONE
                },
                writer,
                readers: vec![reader],
                writer_task: None,
                reader_tasks: vec![None],
                bridge: None,
            },
        )
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
            let modes = modes(rt.clone());
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
                modes,
                proptest::option::of(platform()),
            )
        })
        .prop_map(
            |(
                mut partitions,
                windows,
                channels,
                set_cwd,
                cpus,
                supervisor_cpus,
                bus,
                modes,
                platform,
            )| {
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
                    modes,
                    power: None,
                    user_range: set_cwd.then_some((1000, 1999)),
                    path: set_cwd.then(|| "/opt/bulkhead/bin:/usr/bin:/bin".to_string()),
                    pipelines: Vec::new(),
                    stop_start: None,
                    platform,
                    health: Vec::new(),
                }
            },
        )
}

fn platform() -> impl Strategy<Value = bulkhead_model::platform::Platform> {
    let per_cpu = proptest::collection::btree_map(0u32..8, 0u64..50_000_000, 0..3);
    (0u64..50_000_000, per_cpu)
        .prop_map(|(stall, per_cpu)| bulkhead_model::platform::Platform { stall, per_cpu })
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

/// `Task::periodic` is the task a description makes of a name, budget and period alone:
/// every other key at its default.
#[test]
fn a_periodic_task_is_what_a_description_of_name_budget_and_period_loads_to() {
    let loaded = load_str(
        "system: {cpus: 0}\npartitions:\n  - {name: p, kind: rt, cpus: 0, tasks: [{name: t, budget: 1ms, period: 10ms}]}\n",
        "t.yaml",
    )
    .unwrap();
    let task = &loaded.system.partitions[0].tasks[0];
    assert_eq!(*task, Task::periodic("t", 1_000_000, 10_000_000));
}
