//! Stop-start triggers on the replayed RAV4 log (comma2k19 excerpt; its SPEED falls from
//! about 69.6 to 65 km/h in its last two seconds): gateway readers on the virtual bus
//! decode SPEED with the opendbc DBC and count the conditions met.

use bulkhead_can::bus::CanBus;
use bulkhead_can::candump::open_log;
use bulkhead_can::gateway::{BusReader, WIRE_SIZE};
use bulkhead_can::replay::{replay, Options};
use bulkhead_can::trigger::Triggers;
use bulkhead_can::vbus::{Bus, Node};
use bulkhead_can::Database;
use bulkhead_chan::{Channel, Spec};
use bulkhead_gateway_protocol::parse_trigger;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A reader of `bus` with the triggers `suspend` and `resume`, forwarding to one
/// partition's channel.
fn reader(bus: &str, chan: &str, suspend: &str, resume: &str) -> (BusReader, Channel) {
    let db = Database::from_file(&data("toyota_new_mc_pt_generated.dbc")).unwrap();
    let channel = Channel::create(&Spec::fifo(chan, WIRE_SIZE as u32, 4096)).unwrap();
    let node: Box<dyn CanBus> = Box::new(Node::attach(bus).unwrap());
    let links = vec![("ctl".to_string(), channel.sender().unwrap())];
    let (mut r, _) = BusReader::new(bus, node, links).unwrap();
    let (s, re) = (
        parse_trigger(suspend).unwrap(),
        parse_trigger(resume).unwrap(),
    );
    r.set_triggers(Triggers::new(db, Some(s), Some(re), Vec::new()).unwrap());
    (r, channel)
}

#[test]
fn a_speed_condition_on_the_replayed_log_triggers_a_suspend_and_a_later_resume() {
    let bus = format!("rav4-triggers-{}", std::process::id());
    let _serving = Bus::bind(&bus, 500_000).unwrap().spawn();
    // Played 3x fast: SPEED < 68 from log time 3.86 s, held 0.3 s of log time (100 ms),
    // counts at 4.16 s; SPEED < 66 from 4.60 s counts at once. Outside the log's range
    // (29.4-73.1 km/h), nothing counts.
    let (watching, _a) = reader(&bus, &format!("{bus}-a"), "SPEED<68@100000000", "SPEED<66");
    let (outside, _b) = reader(&bus, &format!("{bus}-b"), "SPEED<29", "SPEED>73.2");
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let stepping = std::thread::spawn(move || {
        let (mut watching, mut outside) = (watching, outside);
        let mut sink = bulkhead_trace::Discard;
        loop {
            let last = flag.load(Ordering::Acquire);
            while watching.step(256, &mut sink).unwrap() > 0 {}
            while outside.step(256, &mut sink).unwrap() > 0 {}
            if last {
                return (watching, outside);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let mut player: Vec<Box<dyn CanBus>> = vec![Box::new(Node::attach(&bus).unwrap())];
    let mut open = || open_log(&data("comma2k19_rav4_seg40_excerpt.log.gz"));
    let options = Options {
        speed: 3.0,
        ..Options::default()
    };
    let stats = replay(
        &mut open,
        &mut player,
        &[(Some("can0".into()), 0)],
        &options,
    )
    .unwrap();
    assert!(stats.sent > 1000, "{stats:?}");
    std::thread::sleep(Duration::from_millis(50));
    done.store(true, Ordering::Release);
    let (watching, outside) = stepping.join().unwrap();
    let t = watching.triggers().unwrap();
    assert_eq!(
        t.counts(),
        [
            ("ss.suspend_when".to_string(), 1),
            ("ss.resume_when".to_string(), 1)
        ]
    );
    let suspend = t.last_met_ns("ss.suspend_when").unwrap();
    let resume = t.last_met_ns("ss.resume_when").unwrap();
    // 4.60 - 4.16 s of log time at 3x: about 147 ms apart.
    assert!(
        resume > suspend + 50_000_000,
        "suspend at {suspend}, resume at {resume}"
    );
    assert_eq!(
        outside.triggers().unwrap().counts(),
        [
            ("ss.suspend_when".to_string(), 0),
            ("ss.resume_when".to_string(), 0)
        ]
    );
}
