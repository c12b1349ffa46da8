//! The RAV4's CAN messages (opendbc's `toyota_new_mc_pt_generated.dbc`, compiled in
//! so that a sandboxed partition needs no file) and their real rates, measured on the
//! comma2k19 RAV4 log (`can0`, 60 s): WHEEL_SPEEDS 82.9 Hz, SPEED and BRAKE_MODULE
//! 41.45 Hz, GAS_PEDAL 31.5 Hz, ACC_CONTROL 33.3 Hz.

use bulkhead_can::dbc::Database;
use bulkhead_can::frame::{CanId, Frame};

const DBC: &str = include_str!("../../can/tests/data/toyota_new_mc_pt_generated.dbc");

/// The DBC (its known warnings about PCS_HUD are not errors).
pub fn dbc() -> Database {
    Database::parse(DBC).expect("the compiled-in DBC parses")
}

pub const SPEED: CanId = CanId::Standard(0xB4);
pub const WHEEL_SPEEDS: CanId = CanId::Standard(0xAA);
pub const GAS_PEDAL: CanId = CanId::Standard(0x2C1);
pub const BRAKE_MODULE: CanId = CanId::Standard(0x224);
pub const ACC_CONTROL: CanId = CanId::Standard(0x343);
/// STEERING_LKA: the lateral command OpenPilot's Linux side may send.
pub const STEERING_LKA: CanId = CanId::Standard(0x2E4);

/// Periods in microseconds of the messages the plant publishes (real rates above).
pub const PERIODS_US: [(&str, u64); 4] = [
    ("WHEEL_SPEEDS", 12_063),
    ("SPEED", 24_125),
    ("BRAKE_MODULE", 24_125),
    ("GAS_PEDAL", 31_746),
];

/// Toyota's checksum in the last byte: (id low byte + id high byte + length + the
/// other bytes) mod 256 (opendbc `toyota_checksum`); verified on the log's frames.
pub fn with_checksum(frame: &Frame) -> Frame {
    let data = frame.data();
    let n = data.len();
    let id = frame.id().raw();
    let mut sum = (id & 0xFF) + ((id >> 8) & 0xFF) + n as u32;
    sum += data[..n - 1].iter().map(|&b| u32::from(b)).sum::<u32>();
    let mut out = data.to_vec();
    out[n - 1] = (sum & 0xFF) as u8;
    Frame::new(frame.id(), &out).expect("same length")
}

/// Encodes `values` into `message` and sets its checksum when it has one.
pub fn encode(db: &Database, message: &str, values: &[(&str, f64)]) -> Frame {
    let frame = db.encode(message, values).expect("values within the DBC");
    let has_checksum = db
        .message_by_name(message)
        .is_some_and(|m| m.signals.iter().any(|s| s.name == "CHECKSUM"));
    match has_checksum {
        true => with_checksum(&frame),
        false => frame,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_the_log() {
        // (1533224087.000013) can0 2C1#0014DF14BBCA3A91
        let logged = [0x00, 0x14, 0xDF, 0x14, 0xBB, 0xCA, 0x3A, 0x91];
        let mut zeroed = logged;
        zeroed[7] = 0;
        let f = Frame::new(GAS_PEDAL, &zeroed).unwrap();
        assert_eq!(with_checksum(&f).data(), &logged);
    }

    #[test]
    fn acc_commands_encode_and_decode() {
        let db = dbc();
        let f = encode(
            &db,
            "ACC_CONTROL",
            &[("ACCEL_CMD", -1.25), ("PERMIT_BRAKING", 1.0)],
        );
        assert_eq!(f.id(), ACC_CONTROL);
        let d = db.decode(&f).unwrap();
        let accel = d.signals.iter().find(|s| s.0 == "ACCEL_CMD").unwrap().1;
        assert!((accel + 1.25).abs() < 1e-9);
    }
}
