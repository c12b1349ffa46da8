//! The virtual bus: arbitration order, transmission times, delivery, errors.

use bulkhead_can::timing::{bits_to_ns, frame_bits};
use bulkhead_can::vbus::{Bus, BusError, Node};
use bulkhead_can::{CanId, Frame};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A bus name unique to this test process and call.
fn bus_name(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "test-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn std_frame(id: u16, data: &[u8]) -> Frame {
    Frame::new(CanId::Standard(id), data).unwrap()
}

fn recv_ids(node: &mut Node, n: usize) -> Vec<(u64, u32)> {
    (0..n)
        .map(|_| {
            let r = node
                .recv(Some(Duration::from_secs(5)))
                .unwrap()
                .expect("frame within 5 s");
            (r.t_ns, r.frame.id().raw())
        })
        .collect()
}

#[test]
fn lowest_id_wins_among_frames_pending_when_the_bus_frees() {
    // 1 kbit/s: the first 8-byte frame occupies the bus for 135 ms, long enough for
    // the three later frames to be queued before the next arbitration even on a
    // loaded machine.
    let name = bus_name("arb");
    let _bus = Bus::bind(&name, 1_000).unwrap().spawn();
    let sender = Node::attach(&name).unwrap();
    let mut receiver = Node::attach(&name).unwrap();
    std::thread::sleep(Duration::from_millis(50)); // both attached
    sender.send(&std_frame(0x700, &[0; 8])).unwrap();
    for id in [0x300, 0x200, 0x100] {
        sender.send(&std_frame(id, &[])).unwrap();
    }
    let got: Vec<u32> = recv_ids(&mut receiver, 4)
        .into_iter()
        .map(|x| x.1)
        .collect();
    assert_eq!(got, vec![0x700, 0x100, 0x200, 0x300]);
}

#[test]
fn back_to_back_frames_are_spaced_by_their_worst_case_length() {
    // 1 kbit/s: a 135 ms frame first, so that the others queue up behind it.
    let name = bus_name("timing");
    let bitrate = 1_000;
    let _bus = Bus::bind(&name, bitrate).unwrap().spawn();
    let sender = Node::attach(&name).unwrap();
    let mut receiver = Node::attach(&name).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    sender.send(&std_frame(0x10, &[0xAA; 8])).unwrap();
    for i in 1..6u16 {
        sender.send(&std_frame(0x10 + i, &[])).unwrap();
    }
    sender
        .send(&Frame::new(CanId::Extended(0x1FFF_FFFF), &[1, 2]).unwrap())
        .unwrap();
    let got = recv_ids(&mut receiver, 7);
    let elapsed = t0.elapsed();
    let c8 = bits_to_ns(frame_bits(false, 8), bitrate); // 135 ms
    let c0 = bits_to_ns(frame_bits(false, 0), bitrate); // 55 ms
    let c_ext2 = bits_to_ns(frame_bits(true, 2), bitrate); // 100 ms
    assert_eq!(got[1].0 - got[0].0, c0);
    for w in got[1..6].windows(2) {
        assert_eq!(w[1].0 - w[0].0, c0, "timestamps {w:?}");
    }
    assert_eq!(got[6].0 - got[5].0, c_ext2);
    // Delivered no earlier than the bus could carry them.
    assert!(
        elapsed >= Duration::from_nanos(c8 + 5 * c0 + c_ext2),
        "{elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
}

#[test]
fn every_other_node_receives_and_the_sender_does_not() {
    let name = bus_name("fanout");
    let bus = Bus::bind(&name, 500_000).unwrap().spawn();
    let mut a = Node::attach(&name).unwrap();
    let mut b = Node::attach(&name).unwrap();
    let mut c = Node::attach(&name).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let frame = Frame::new(CanId::Extended(0x18DA_F110), &[1, 2, 3]).unwrap();
    a.send(&frame).unwrap();
    for node in [&mut b, &mut c] {
        let r = node.recv(Some(Duration::from_secs(5))).unwrap().unwrap();
        assert_eq!(r.frame, frame);
    }
    assert!(a.recv(Some(Duration::from_millis(100))).unwrap().is_none());
    assert_eq!(bus.stats().transmitted.load(Ordering::Relaxed), 1);
    assert_eq!(
        bus.stats().bits.load(Ordering::Relaxed),
        frame_bits(true, 3)
    );
}

#[test]
fn names_in_use_missing_and_malformed_are_errors() {
    let name = bus_name("err");
    let bus = Bus::bind(&name, 500_000).unwrap().spawn();
    assert!(matches!(Bus::bind(&name, 500_000), Err(BusError::InUse(_))));
    drop(bus);
    let missing = Node::attach(&name).err().unwrap();
    assert!(matches!(missing, BusError::NoBus(_)));
    assert!(missing.to_string().contains("bulkhead can bus"));
    assert!(matches!(Node::attach("a/b"), Err(BusError::BadName(_))));
    assert!(matches!(
        Bus::bind(&bus_name("rate"), 2_000_000),
        Err(BusError::BadBitrate(2_000_000))
    ));
}

#[test]
fn nodes_see_the_bus_go_away() {
    let name = bus_name("gone");
    let bus = Bus::bind(&name, 500_000).unwrap().spawn();
    let mut node = Node::attach(&name).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    drop(bus);
    let err = node.recv(Some(Duration::from_secs(5))).unwrap_err();
    assert!(err.to_string().contains("went away"), "{err}");
}

#[test]
fn replay_keeps_log_timing_skips_bad_lines_and_dump_writes_candump() {
    use bulkhead_can::bus::CanBus;
    use bulkhead_can::dump::{dump, Filters, Format, Limits, Printer};
    use bulkhead_can::replay::{replay, Options};
    use std::io::BufRead;
    let name = bus_name("replay");
    let _bus = Bus::bind(&name, 500_000).unwrap().spawn();
    let mut buses: Vec<Box<dyn CanBus>> = vec![Box::new(Node::attach(&name).unwrap())];
    let mut listener = Node::attach(&name).unwrap();
    let log =
        "(10.000000) can0 123#01\n(10.100000) can1 124#02\nbad line\n(10.200000) can0 125#03\n";
    let mut open = || Ok(Box::new(log.as_bytes()) as Box<dyn BufRead>);
    let routes = [(Some("can0".to_string()), 0)];
    let t0 = Instant::now();
    let stats = replay(&mut open, &mut buses, &routes, &Options::default()).unwrap();
    assert!(
        t0.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!((stats.sent, stats.skipped, stats.malformed), (2, 1, 1));
    let mut out = Vec::new();
    let limits = Limits {
        count: Some(2),
        timeout: Some(Duration::from_secs(5)),
    };
    let mut printer = Printer::new(Format::Log, "vcan");
    let n = dump(
        &mut listener,
        &Filters::default(),
        &mut printer,
        limits,
        &mut out,
    )
    .unwrap();
    assert_eq!(n, 2);
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].ends_with(") vcan 123#01"), "{text}");
    assert!(lines[1].ends_with(") vcan 125#03"), "{text}");
    let t = |l: &str| bulkhead_can::candump::parse_line(l, 1).unwrap().t_ns;
    let gap = t(lines[1]) - t(lines[0]);
    assert!((190_000_000..1_000_000_000).contains(&gap), "{gap}");
}

#[test]
fn a_node_receives_every_frame_sent_after_attach_returns() {
    let name = bus_name("attach");
    let _bus = Bus::bind(&name, 1_000_000).unwrap().spawn();
    let sender = Node::attach(&name).unwrap();
    for round in 0..20u8 {
        let mut late = Node::attach(&name).unwrap();
        sender.send(&std_frame(0x10, &[round])).unwrap();
        let got = late.recv(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(got.map(|r| r.frame), Some(std_frame(0x10, &[round])));
    }
}

/// The process serving a bus may not get to run (a best-effort one, starved): it then
/// neither accepts a node nor acknowledges it. `begin_attach` and `try_finish` return
/// all the same, so a real-time task that attaches a little at each job never waits on
/// it; the first `try_finish` after the acknowledgement gives the node.
#[test]
fn attaching_without_waiting_returns_while_the_bus_does_not_answer() {
    use bulkhead_can::vbus::{socket_name, ATTACHED, TO_BUS_RECORD};
    use std::io::{Read, Write};
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};

    let name = bus_name("silent");
    assert!(matches!(Node::begin_attach(&name), Err(BusError::NoBus(_))));
    // A bus that never runs: bound, never accepting.
    let addr = SocketAddr::from_abstract_name(socket_name(&name)).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    let attaching = std::thread::spawn(move || {
        let mut attaching = Node::begin_attach(&name).unwrap();
        let unanswered = (0..100).all(|_| attaching.try_finish().unwrap().is_none());
        done.send(unanswered).unwrap();
        attaching
    });
    let unanswered = finished
        .recv_timeout(Duration::from_secs(10))
        .expect("begin_attach and try_finish returned while the bus did not answer");
    assert!(
        unanswered,
        "a node attached to a bus that never acknowledged it"
    );
    let mut attaching = attaching.join().unwrap();
    let (mut served, _) = listener.accept().unwrap();
    served.write_all(&[ATTACHED]).unwrap();
    let node = loop {
        if let Some(node) = attaching.try_finish().unwrap() {
            break node;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    // Attached: its frames reach the bus, whole.
    node.send(&std_frame(0x3E0, &[1, 0x2D, 4])).unwrap();
    let mut record = [0u8; TO_BUS_RECORD];
    served.read_exact(&mut record).unwrap();
    assert_eq!(
        Frame::from_can_frame_bytes(&record).unwrap(),
        std_frame(0x3E0, &[1, 0x2D, 4])
    );
}

/// Attached without waiting to a real bus, a node receives what another node sends.
#[test]
fn a_node_attached_without_waiting_receives_the_bus() {
    let name = bus_name("nowait");
    let _bus = Bus::bind(&name, 1_000_000).unwrap().spawn();
    let mut attaching = Node::begin_attach(&name).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut node = loop {
        if let Some(node) = attaching.try_finish().unwrap() {
            break node;
        }
        assert!(
            Instant::now() < deadline,
            "the bus did not acknowledge in 10 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    Node::attach(&name)
        .unwrap()
        .send(&std_frame(0x7, &[9]))
        .unwrap();
    let got = node.recv(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(got.map(|r| r.frame), Some(std_frame(0x7, &[9])));
}
