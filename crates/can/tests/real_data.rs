//! Decoding real vehicle CAN (comma2k19 RAV4 excerpt, opendbc DBC; see tests/data/README.md).

use bulkhead_can::candump::{open_log, Reader, Record};
use bulkhead_can::decode::decode_log;
use bulkhead_can::{CanId, Database};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn db() -> Database {
    Database::from_file(&data("toyota_new_mc_pt_generated.dbc")).unwrap()
}

const LOG: &str = "comma2k19_rav4_seg40_excerpt.log.gz";

/// The excerpt's records, read once per test binary.
fn records() -> &'static [Record] {
    static RECORDS: OnceLock<Vec<Record>> = OnceLock::new();
    RECORDS.get_or_init(|| {
        Reader::new(open_log(&data(LOG)).unwrap())
            .map(|r| r.unwrap())
            .collect()
    })
}

/// Values of `message.signal` over the excerpt's can0 frames.
fn series(db: &Database, message: &str, signal: &str) -> Vec<f64> {
    let id = db.message_by_name(message).unwrap().id;
    records()
        .iter()
        .filter(|r| r.iface == "can0" && r.frame.id() == id)
        .map(|r| {
            let decoded = db.decode(&r.frame).unwrap();
            decoded
                .signals
                .iter()
                .find(|(n, _)| *n == signal)
                .unwrap()
                .1
        })
        .collect()
}

fn assert_within(values: &[f64], lo: f64, hi: f64, what: &str) {
    assert!(!values.is_empty(), "{what}: no frames");
    for v in values {
        assert!((lo..=hi).contains(v), "{what} = {v} outside {lo} .. {hi}");
    }
}

#[test]
fn vehicle_speed_is_in_range_at_about_41_hz() {
    let db = db();
    let speed = series(&db, "SPEED", "SPEED");
    assert_within(&speed, 29.38, 73.05, "SPEED.SPEED");
    // ~41 Hz over 6 s.
    assert!(
        (200..300).contains(&speed.len()),
        "{} SPEED frames",
        speed.len()
    );
    // A car on a highway does not jump: consecutive samples differ by < 1 km/h.
    assert!(speed.windows(2).all(|w| (w[1] - w[0]).abs() < 1.0));
}

#[test]
fn wheel_speeds_are_in_range_and_agree_with_vehicle_speed() {
    let db = db();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let speed = mean(&series(&db, "SPEED", "SPEED"));
    for wheel in ["FL", "FR", "RL", "RR"] {
        let name = format!("WHEEL_SPEED_{wheel}");
        let values = series(&db, "WHEEL_SPEEDS", &name);
        assert_within(&values, 28.0, 72.0, &name);
        assert!(
            (400..600).contains(&values.len()),
            "{name}: {}",
            values.len()
        );
        assert!((mean(&values) - speed).abs() < 3.0, "{name} vs SPEED");
    }
}

#[test]
fn steering_angle_is_in_range() {
    let db = db();
    let angle = series(&db, "STEER_ANGLE_SENSOR", "STEER_ANGLE");
    assert_within(&angle, -4.5, 3.0, "STEER_ANGLE");
    assert!((400..600).contains(&angle.len()), "{} frames", angle.len());
}

#[test]
fn whole_excerpt_decodes_with_undecodable_frames_counted() {
    let db = db();
    let mut out = Vec::new();
    let summary = decode_log(&db, open_log(&data(LOG)).unwrap(), None, &mut out).unwrap();
    let lines = String::from_utf8(out).unwrap();
    assert_eq!(lines.lines().count() as u64, summary.decoded);
    assert_eq!(summary.malformed, 0);
    // can1 (radar) ids are not in the powertrain DBC: counted, not fatal.
    assert!(summary.undecodable() > 4_000, "{summary}");
    assert!(summary.decoded > 4_000, "{summary}");
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert!(first["t"].as_f64().unwrap() >= 1_533_224_107.0);
    assert_eq!(first["iface"], "can0");
    assert!(first["signals"].is_object());
    let steer = CanId::Standard(0x25);
    assert_eq!(db.message(steer).unwrap().name, "STEER_ANGLE_SENSOR");
}

/// `cantools_decoded_excerpt.jsonl`: the first 400 can0 frames of the excerpt that
/// cantools 45.1 decodes (non-strict load; opendbc's DBC has overlapping signals, e.g.
/// PCS_HUD, which cantools cannot unpack), with cantools' physical values. Ours agree.
#[test]
fn decoding_agrees_with_cantools() {
    let db = db();
    let golden = std::fs::read_to_string(data("cantools_decoded_excerpt.jsonl")).unwrap();
    let mut messages = std::collections::BTreeSet::new();
    for (i, line) in golden.lines().enumerate() {
        let want: serde_json::Value = serde_json::from_str(line).unwrap();
        let record =
            bulkhead_can::candump::parse_line(want["line"].as_str().unwrap(), i + 1).unwrap();
        let got = db.decode(&record.frame).unwrap();
        assert_eq!(got.message, want["message"], "{line}");
        let signals = want["signals"].as_object().unwrap();
        assert_eq!(got.signals.len(), signals.len(), "{line}");
        for (name, value) in &got.signals {
            let expected = signals[*name].as_f64().unwrap();
            assert!(
                (value - expected).abs() <= 1e-9 * expected.abs().max(1.0),
                "{name}: {value} vs cantools {expected} in {line}"
            );
        }
        messages.insert(got.message.to_string());
    }
    assert_eq!(golden.lines().count(), 400);
    assert!(messages.len() >= 20, "{messages:?}");
}

/// Encoding the decoded values of real frames whose signals cover every bit gives
/// back the frame.
#[test]
fn encoding_decoded_real_frames_reproduces_them() {
    let db = db();
    let id = db.message_by_name("WHEEL_SPEEDS").unwrap().id;
    let mut n = 0;
    for r in records().iter().filter(|r| r.frame.id() == id) {
        let decoded = db.decode(&r.frame).unwrap();
        let frame = db.encode(decoded.message, &decoded.signals).unwrap();
        assert_eq!(frame, r.frame, "{r}");
        n += 1;
    }
    assert!(n > 400, "{n}");
}
