//! `bulkhead-app ivi-read-mapper` and `adas-read-mapper`, rt tasks C and E: one
//! program, two defaults.

use super::{names, periodic, receiver, sender, R};
use crate::car;
use crate::wire::{Cluster, Hvac, Sensors, HVAC_STATUS_ID};
use bulkhead_can::frame::CanId;
use bulkhead_can::gateway::{self, WIRE_SIZE};
use std::marker::PhantomData;

/// The channels of a read mapper, `S` its side's defaults.
#[derive(clap::Args)]
pub struct Args<S: Side> {
    /// The gateway channel it reads
    #[arg(long, value_name = "CHANNEL", default_value = S::FROM)]
    pub(super) from: String,
    /// The channel of the signals
    #[arg(long, value_name = "CHANNEL", default_value = S::TO)]
    pub(super) to: String,
    /// Also the cluster's signals, to this latest channel (the dashboard's)
    #[arg(long, value_name = "CHANNEL")]
    pub(super) dash: Option<String>,
    #[arg(skip)]
    side: PhantomData<S>,
}

/// The side a read mapper serves: its channels by default.
pub trait Side: Send + Sync + 'static {
    const FROM: &'static str;
    const TO: &'static str;
}

/// C: to the infotainment (channel 1).
pub struct Ivi;

impl Side for Ivi {
    const FROM: &'static str = "ivi_can_rx";
    const TO: &'static str = "ic_ivi_sensor";
}

/// E: to the ADAS (channel 3).
pub struct Adas;

impl Side for Adas {
    const FROM: &'static str = "adas_can_rx";
    const TO: &'static str = "carla_sensor";
}

/// C / E: decodes the frames the gateway forwards (SPEED, WHEEL_SPEEDS, GAS_PEDAL,
/// BRAKE_MODULE) and publishes the signals as [`Sensors`] when one changed, from the
/// first SPEED on.
pub fn run(from: &str, to: &str, dash: Option<&str>) -> R<()> {
    let db = car::dbc();
    let mut rx = receiver(from)?;
    let mut tx = sender(to)?;
    let mut dash = dash.map(sender).transpose()?;
    let mut cluster = Cluster {
        gear: 255,
        ..Cluster::default()
    };
    let (mut s, mut speed_seen) = (Sensors::default(), false);
    let (mut published, mut dropped, mut undecodable) = (0u64, 0u64, 0u64);
    let mut buf = [0u8; WIRE_SIZE];
    periodic(
        &names(&["frames", "published", "dropped", "undecodable"]),
        |_, v| {
            let before = s.frames;
            for _ in 0..64 {
                if rx.try_read(&mut buf).is_err() {
                    break;
                }
                let Ok((t_ns, _, frame)) = gateway::decode(&buf) else {
                    undecodable += 1;
                    continue;
                };
                if frame.id() == CanId::standard(HVAC_STATUS_ID).expect("11 bits") {
                    echo(&mut cluster, frame.data());
                    continue;
                }
                match db.decode(&frame) {
                    Ok(d) => {
                        speed_seen |= d.message == "SPEED";
                        apply(&mut s, t_ns, d.message, &d.signals);
                        apply_cluster(&mut cluster, d.message, &d.signals);
                    }
                    Err(_) => undecodable += 1,
                }
            }
            // Nothing is published before the first SPEED: a speed of 0 would be news.
            if s.frames != before && speed_seen {
                match tx.try_write(&s.encode()) {
                    Ok(()) => published += 1,
                    Err(_) => dropped += 1,
                }
                if let Some(d) = dash.as_mut() {
                    cluster.sensors = s;
                    // A latest channel: wait-free, never full.
                    let _ = d.try_write(&cluster.encode());
                }
            }
            v.copy_from_slice(&[u64::from(s.frames), published, dropped, undecodable]);
            Ok(())
        },
    )
}

/// Folds the signals only the cluster shows into `c` (wheel speeds km/h to m/s).
fn apply_cluster(c: &mut Cluster, message: &str, signals: &[(&str, f64)]) {
    let get = |name: &str| signals.iter().find(|x| x.0 == name).map(|x| x.1);
    match message {
        "WHEEL_SPEEDS" => {
            let names = ["FL", "FR", "RL", "RR"].map(|w| format!("WHEEL_SPEED_{w}"));
            for (slot, name) in c.wheels.iter_mut().zip(&names) {
                *slot = (get(name).unwrap_or(0.0) / 3.6) as f32;
            }
        }
        "STEER_ANGLE_SENSOR" => c.steer_deg = get("STEER_ANGLE").unwrap_or(0.0) as f32,
        "GEAR_PACKET" => c.gear = get("GEAR").unwrap_or(255.0) as u8,
        _ => {}
    }
}

/// An HVAC status frame: the setting the HVAC unit took.
fn echo(c: &mut Cluster, data: &[u8]) {
    if let Some(h) = Hvac::from_frame_data(data) {
        c.hvac = h;
        c.hvac_echoes = c.hvac_echoes.wrapping_add(1);
    }
}

/// Folds one decoded message into `s` (speeds km/h to m/s).
fn apply(s: &mut Sensors, t_ns: u64, message: &str, signals: &[(&str, f64)]) {
    let get = |name: &str| signals.iter().find(|x| x.0 == name).map(|x| x.1);
    let used = match message {
        "SPEED" => get("SPEED").map(|v| {
            s.v_ego = (v / 3.6) as f32;
            s.tag = get("ENCODER").unwrap_or(0.0) as u8;
        }),
        "WHEEL_SPEEDS" => {
            let wheels = [
                "WHEEL_SPEED_FL",
                "WHEEL_SPEED_FR",
                "WHEEL_SPEED_RL",
                "WHEEL_SPEED_RR",
            ];
            let sum: f64 = wheels.iter().filter_map(|w| get(w)).sum();
            s.wheel = (sum / 4.0 / 3.6) as f32;
            Some(())
        }
        "GAS_PEDAL" => get("GAS_PEDAL").map(|v| s.gas = v as f32),
        "BRAKE_MODULE" => {
            s.brake_pressed = get("BRAKE_PRESSED").unwrap_or(0.0) != 0.0;
            get("BRAKE_PRESSURE").map(|v| s.brake_pressure = v as f32)
        }
        _ => None,
    };
    if used.is_some() {
        s.t_ns = t_ns;
        s.frames = s.frames.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plant::{Car, Plant};
    use crate::programs::plant::frame;

    #[test]
    fn decoded_messages_fold_into_the_sensors() {
        let db = car::dbc();
        let mut s = Sensors::default();
        let p = Plant::new(Car::default(), 25.0);
        for m in ["SPEED", "WHEEL_SPEEDS", "BRAKE_MODULE", "GAS_PEDAL"] {
            let f = frame(&db, m, &p, 3);
            let d = db.decode(&f).unwrap();
            apply(&mut s, 7, d.message, &d.signals);
        }
        assert_eq!((s.frames, s.t_ns), (4, 7));
        assert!(
            (s.v_ego - 25.0).abs() < 0.01 && (s.wheel - 25.0).abs() < 0.01,
            "{s:?}"
        );
    }
}
