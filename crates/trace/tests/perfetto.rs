//! The Perfetto export: the documented mapping, and slices that always nest.

use bulkhead_trace::{perfetto, CpuSet, Event, EventKind, GrantEnd, Name};
use proptest::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;

fn start(t: u64, cpu: u32, task: &str, job: u64) -> Event {
    Event::new(
        t,
        EventKind::JobStart {
            cpu,
            partition: "ctl".into(),
            task: task.into(),
            job,
        },
    )
}
fn preempt(t: u64, cpu: u32, task: &str, job: u64) -> Event {
    Event::new(
        t,
        EventKind::JobPreempt {
            cpu,
            partition: "ctl".into(),
            task: task.into(),
            job,
        },
    )
}
fn complete(t: u64, cpu: u32, task: &str, job: u64) -> Event {
    Event::new(
        t,
        EventKind::JobComplete {
            cpu,
            partition: "ctl".into(),
            task: task.into(),
            job,
            response_ns: t,
        },
    )
}

fn trace_events(json: &Value) -> &Vec<Value> {
    json["traceEvents"].as_array().unwrap()
}

fn ns(value: &Value) -> u64 {
    (value.as_f64().unwrap() * 1000.0).round() as u64
}

/// (pid, tid, start_ns, end_ns, name) of every "X" slice.
fn slices(json: &Value) -> Vec<(u64, u64, u64, u64, String)> {
    trace_events(json)
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let start = ns(&e["ts"]);
            let name = e["name"].as_str().unwrap().to_string();
            (
                e["pid"].as_u64().unwrap(),
                e["tid"].as_u64().unwrap(),
                start,
                start + ns(&e["dur"]),
                name,
            )
        })
        .collect()
}

fn thread_names(json: &Value) -> BTreeMap<(u64, u64), String> {
    trace_events(json)
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn execution_becomes_x_slices_on_one_track_per_cpu() {
    // Rate-monotonic (1,4),(2,6) on CPU 0 and a job on CPU 1.
    let events = vec![
        start(0, 0, "t1", 0),
        complete(1_000, 0, "t1", 0),
        start(1_000, 0, "t2", 0),
        complete(3_000, 0, "t2", 0),
        start(4_000, 0, "t1", 1),
        preempt(4_500, 0, "t1", 1),
        start(500, 1, "t3", 0),
        complete(2_500, 1, "t3", 0),
    ];
    let json = perfetto::export(&events);
    let mut got = slices(&json);
    // Slices are written as they end; the format leaves the order to the viewer.
    got.sort_by_key(|s| s.2);
    let expected = vec![
        (1, 1, 0, 1_000, "ctl/t1".to_string()),
        (1, 2, 500, 2_500, "ctl/t3".to_string()),
        (1, 1, 1_000, 3_000, "ctl/t2".to_string()),
        (1, 1, 4_000, 4_500, "ctl/t1".to_string()),
    ];
    assert_eq!(got, expected);
    let names = thread_names(&json);
    assert_eq!(names[&(1, 1)], "CPU 0");
    assert_eq!(names[&(1, 2)], "CPU 1");
    // Timestamps are microseconds.
    let first = trace_events(&json).iter().find(|e| e["ph"] == "X").unwrap();
    assert_eq!(first["dur"], 1);
}

#[test]
fn named_counters_are_counter_tracks_of_the_partitions_process() {
    let counter = |t, value| {
        Event::new(
            t,
            EventKind::Counter {
                partition: "gw".into(),
                task: "reader".into(),
                name: "ctl.rx_dropped".into(),
                value,
            },
        )
    };
    let json = perfetto::export(&[counter(1_000, 3), counter(3_000, 7)]);
    let counters: Vec<(String, u64, u64, u64)> = trace_events(&json)
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["pid"].as_u64().unwrap(),
                ns(&e["ts"]),
                e["args"]["value"].as_u64().unwrap(),
            )
        })
        .collect();
    let name = "gw/reader ctl.rx_dropped".to_string();
    assert_eq!(
        counters,
        vec![(name.clone(), 3, 1_000, 3), (name, 3, 3_000, 7)]
    );
}

#[test]
fn misses_are_instants_budgets_are_counters_messages_are_flows() {
    let events = vec![
        start(0, 0, "w", 0),
        Event::new(
            100,
            EventKind::Budget {
                cpu: 0,
                partition: "ctl".into(),
                task: "w".into(),
                remaining_ns: 400,
            },
        ),
        Event::new(
            200,
            EventKind::ChannelWrite {
                cpu: 0,
                channel: "can".into(),
                partition: "ctl".into(),
                task: "w".into(),
                msg: 0,
            },
        ),
        complete(300, 0, "w", 0),
        start(300, 1, "r", 0),
        Event::new(
            350,
            EventKind::ChannelRead {
                cpu: 1,
                channel: "can".into(),
                partition: "ctl".into(),
                task: "r".into(),
                msg: 0,
            },
        ),
        Event::new(
            400,
            EventKind::DeadlineMiss {
                cpu: 1,
                partition: "ctl".into(),
                task: "r".into(),
                job: 0,
                deadline_ns: 400,
            },
        ),
        complete(500, 1, "r", 0),
    ];
    let json = perfetto::export(&events);
    let all = trace_events(&json);
    let miss = all.iter().find(|e| e["ph"] == "i").unwrap();
    assert_eq!(miss["name"], "deadline miss ctl/r");
    assert_eq!((miss["tid"].as_u64(), ns(&miss["ts"])), (Some(2), 400));
    let counter = all.iter().find(|e| e["ph"] == "C").unwrap();
    assert_eq!(counter["name"], "budget ctl/w");
    assert_eq!(counter["args"]["remaining_ns"], 400);
    let flow_start = all.iter().find(|e| e["ph"] == "s").unwrap();
    let flow_end = all.iter().find(|e| e["ph"] == "f").unwrap();
    assert_eq!(flow_start["id"], flow_end["id"]);
    assert_eq!(
        (flow_start["tid"].as_u64(), ns(&flow_start["ts"])),
        (Some(1), 200)
    );
    assert_eq!(
        (
            flow_end["tid"].as_u64(),
            ns(&flow_end["ts"]),
            flow_end["bp"].as_str()
        ),
        (Some(2), 350, Some("e"))
    );
    assert_eq!(flow_end["name"], "can");
}

#[test]
fn windows_and_grants_have_their_tracks() {
    let cpus = CpuSet::from_cpus([0, 1]).unwrap();
    let events = vec![
        Event::new(
            0,
            EventKind::WindowStart {
                window: 0,
                length_ns: 10_000,
            },
        ),
        Event::new(
            0,
            EventKind::Run {
                cpus: cpus.clone(),
                partition: "sc".into(),
                cmd: "./a".into(),
                budget_ns: 6_000,
            },
        ),
        Event::new(
            6_000,
            EventKind::Stop {
                cpus: cpus.clone(),
                partition: "sc".into(),
                cmd: "./a".into(),
                reason: GrantEnd::Budget,
            },
        ),
        Event::new(10_000, EventKind::WindowEnd { window: 0 }),
    ];
    let json = perfetto::export(&events);
    let got = slices(&json);
    assert!(
        got.contains(&(2, 1, 0, 10_000, "window 0".into())),
        "{got:?}"
    );
    assert!(got.contains(&(1, 1, 0, 6_000, "sc: ./a".into())), "{got:?}");
    assert!(got.contains(&(1, 2, 0, 6_000, "sc: ./a".into())), "{got:?}");
}

#[test]
fn a_mode_switch_is_a_slice_with_agent_slices_and_bandwidth_counters() {
    let cpus = CpuSet::from_cpus([0, 1]).unwrap();
    let events = vec![
        Event::new(
            1_000,
            EventKind::ModeRequest {
                from: "urban".into(),
                to: "highway".into(),
                policy: "boost".into(),
                load_ppm: 1_500_000,
                capacity_ppm: 1_900_000,
            },
        ),
        Event::new(
            1_000,
            EventKind::AgentRequest {
                partition: "nav".into(),
                mode: "highway".into(),
                boost: true,
            },
        ),
        Event::new(
            1_200,
            EventKind::AgentAck {
                partition: "nav".into(),
                demand_ppm: 200_000,
                interface_ppm: Some(300_000),
            },
        ),
        Event::new(
            1_200,
            EventKind::InterfaceChange {
                partition: "nav".into(),
                cpus,
                budget_ns: 1_500,
                period_ns: 5_000,
                bandwidth_ppm: 600_000,
                load_ppm: 1_400_000,
                capacity_ppm: 1_900_000,
            },
        ),
        Event::new(
            1_200,
            EventKind::ModeDone {
                mode: "highway".into(),
                latency_ns: 200,
                load_ppm: 1_400_000,
                capacity_ppm: 1_900_000,
            },
        ),
    ];
    let json = perfetto::export(&events);
    let got = slices(&json);
    assert!(
        got.contains(&(2, 2, 1_000, 1_200, "urban -> highway (boost)".into())),
        "{got:?}"
    );
    assert!(
        got.contains(&(3, 1, 1_000, 1_200, "mode agent -> highway (boost)".into())),
        "{got:?}"
    );
    let counters: Vec<(&str, u64)> = trace_events(&json)
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["args"]["load_ppm"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        counters,
        vec![
            ("bandwidth all shared CPUs", 1_500_000),
            ("bandwidth CPUs 0-1", 1_400_000)
        ]
    );
    let done = trace_events(&json)
        .iter()
        .find(|e| e["name"] == "mode highway")
        .unwrap();
    assert_eq!(done["s"], "g");
}

#[test]
fn open_slices_end_with_the_trace() {
    let events = vec![
        start(0, 0, "t", 0),
        Event::new(7_000, EventKind::Suspend {}),
    ];
    assert_eq!(
        slices(&perfetto::export(&events)),
        vec![(1, 1, 0, 7_000, "ctl/t".to_string())]
    );
}

#[test]
fn overlapping_execution_goes_to_a_second_lane() {
    // A faulty producer runs two jobs on CPU 0 at once: the export must still nest.
    let events = vec![
        start(0, 0, "a", 0),
        start(500, 0, "b", 0),
        complete(1_000, 0, "a", 0),
        complete(1_500, 0, "b", 0),
    ];
    let json = perfetto::export(&events);
    let got = slices(&json);
    assert_eq!(got.len(), 2);
    assert_ne!(got[0].1, got[1].1);
    assert_eq!(thread_names(&json)[&(1, 100_001)], "CPU 0 (lane 1)");
}

fn name(i: u8) -> Name {
    format!("n{}", i % 3).into()
}

/// Arbitrary event streams with non-decreasing time over a few CPUs, tasks and grants.
fn arb_events() -> impl Strategy<Value = Vec<Event>> {
    let step = (0u8..8, 0u32..3, 0u8..6, 0u64..3, 0u64..2_000_000);
    proptest::collection::vec(step, 0..120).prop_map(|steps| {
        let mut t = 0;
        steps
            .into_iter()
            .map(|(kind, cpu, who, job, dt)| {
                t += dt;
                let (partition, task) = (name(who / 3), name(who));
                let cpus = CpuSet::from_cpus([cpu, (cpu + who as u32) % 3]).unwrap();
                let kind = match kind {
                    0 | 1 => EventKind::JobStart {
                        cpu,
                        partition,
                        task,
                        job,
                    },
                    2 => EventKind::JobPreempt {
                        cpu,
                        partition,
                        task,
                        job,
                    },
                    3 => EventKind::JobComplete {
                        cpu,
                        partition,
                        task,
                        job,
                        response_ns: 0,
                    },
                    4 => EventKind::Run {
                        cpus,
                        partition,
                        cmd: task,
                        budget_ns: 1,
                    },
                    5 => EventKind::Stop {
                        cpus,
                        partition,
                        cmd: task,
                        reason: GrantEnd::Yield,
                    },
                    6 => EventKind::WindowStart {
                        window: cpu,
                        length_ns: 1,
                    },
                    _ => EventKind::WindowEnd { window: cpu },
                };
                Event::new(t, kind)
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn slices_on_a_track_always_nest(events in arb_events()) {
        let all = slices(&perfetto::export(&events));
        for (i, a) in all.iter().enumerate() {
            prop_assert!(a.2 <= a.3);
            for b in &all[i + 1..] {
                if (a.0, a.1) != (b.0, b.1) {
                    continue;
                }
                let disjoint = a.3 <= b.2 || b.3 <= a.2;
                let nested = (a.2 <= b.2 && b.3 <= a.3) || (b.2 <= a.2 && a.3 <= b.3);
                prop_assert!(disjoint || nested, "{a:?} and {b:?} overlap on one track");
            }
        }
    }

    #[test]
    fn every_start_yields_exactly_one_slice(events in arb_events()) {
        // Each execution start opens one slice per CPU; none is dropped by lane assignment.
        let opened: usize = events.iter().map(|e| match &e.kind {
            EventKind::JobStart { .. } | EventKind::WindowStart { .. } => 1,
            EventKind::Run { cpus, .. } => cpus.len(),
            _ => 0,
        }).sum();
        prop_assert_eq!(slices(&perfetto::export(&events)).len(), opened);
    }
}
