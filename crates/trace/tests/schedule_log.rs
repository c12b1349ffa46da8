//! Schedule-log lines: exact bytes, round trip, and readable errors.

use bulkhead_trace::{read_schedule_log, CpuSet, Event, EventKind, GrantEnd, ScheduleLogWriter};

fn run(t_ns: u64, cpus: &[u32], partition: &str, cmd: &str, budget_ns: u64) -> Event {
    let kind = EventKind::Run {
        cpus: CpuSet::from_cpus(cpus.iter().copied()).unwrap(),
        partition: partition.into(),
        cmd: cmd.into(),
        budget_ns,
    };
    Event::new(t_ns, kind)
}

#[test]
fn a_run_grant_is_the_documented_line() {
    let mut writer = ScheduleLogWriter::new(Vec::new());
    writer
        .write(&run(1_500_000, &[0, 1], "sc1", "./ctl --fast", 600_000))
        .unwrap();
    writer
        .write(&Event::new(
            2_000_000,
            EventKind::WindowStart {
                window: 1,
                length_ns: 1_000_000,
            },
        ))
        .unwrap();
    let text = String::from_utf8(writer.into_inner()).unwrap();
    assert_eq!(
        text,
        "{\"t_ns\":1500000,\"event\":\"run\",\"cpus\":\"0-1\",\"partition\":\"sc1\",\"cmd\":\"./ctl --fast\",\"budget_ns\":600000}\n\
         {\"t_ns\":2000000,\"event\":\"window_start\",\"window\":1,\"length_ns\":1000000}\n"
    );
}

#[test]
fn every_event_kind_round_trips_through_a_line() {
    let events = vec![
        run(0, &[0, 2, 3, 4], "p", "c", 5),
        Event::new(
            1,
            EventKind::Stop {
                cpus: CpuSet::from_cpus([1]).unwrap(),
                partition: "p".into(),
                cmd: "c".into(),
                reason: GrantEnd::WindowEnd,
            },
        ),
        Event::new(
            2,
            EventKind::JobRelease {
                cpu: 0,
                partition: "a".into(),
                task: "t".into(),
                job: 3,
                deadline_ns: 9,
            },
        ),
        Event::new(
            3,
            EventKind::DeadlineMiss {
                cpu: 0,
                partition: "a".into(),
                task: "t".into(),
                job: 3,
                deadline_ns: 9,
            },
        ),
        Event::new(
            4,
            EventKind::ChannelLoss {
                channel: "ch".into(),
                msg: 7,
            },
        ),
        Event::new(5, EventKind::Suspend {}),
        Event::new(5, EventKind::Resume { suspended_ns: 100 }),
        Event::new(
            6,
            EventKind::Counter {
                partition: "gw".into(),
                task: "can0-reader".into(),
                name: "ctl.rx_forwarded".into(),
                value: u64::MAX,
            },
        ),
        Event::new(
            6,
            EventKind::ModeRequest {
                from: "drive".into(),
                to: "park".into(),
                policy: "boost".into(),
                load_ppm: 1_200_000,
                capacity_ppm: 1_900_000,
            },
        ),
        Event::new(
            6,
            EventKind::AgentAck {
                partition: "ctl".into(),
                demand_ppm: 310_000,
                interface_ppm: None,
            },
        ),
    ];
    let mut writer = ScheduleLogWriter::new(Vec::new());
    for event in &events {
        writer.write(event).unwrap();
    }
    let bytes = writer.into_inner();
    assert_eq!(read_schedule_log(&bytes[..]).unwrap(), events);
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains("\"event\":\"stop\",\"cpus\":\"1\",\"partition\":\"p\",\"cmd\":\"c\",\"reason\":\"window_end\""), "{text}");
    assert!(
        text.contains("{\"t_ns\":5,\"event\":\"suspend\"}"),
        "{text}"
    );
    assert!(
        text.contains("{\"t_ns\":6,\"event\":\"counter\",\"partition\":\"gw\",\"task\":\"can0-reader\",\"name\":\"ctl.rx_forwarded\",\"value\":18446744073709551615}\n"),
        "{text}"
    );
}

#[test]
fn a_bad_line_is_reported_by_number() {
    let input = "{\"t_ns\":0,\"event\":\"window_end\",\"window\":0}\n{\"t_ns\":1,\"event\":\"no_such_event\"}\n";
    let err = read_schedule_log(input.as_bytes()).unwrap_err();
    assert_eq!(err.line, 2);
    assert!(
        matches!(err.source, bulkhead_trace::schedule_log::LineError::Json(_)),
        "{err:?}"
    );
    let err = err.to_string();
    assert!(err.starts_with("line 2: "), "{err}");
    assert!(err.contains("no_such_event"), "{err}");
}
