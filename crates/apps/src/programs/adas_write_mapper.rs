//! `bulkhead-app adas-write-mapper`, rt task F.

use super::{names, periodic, receiver, sender, R};
use crate::car;
use crate::wire::{Actuation, SIZE};
use bulkhead_can::gateway;

#[derive(clap::Args)]
pub struct Args {
    /// The channel of the commands
    #[arg(long, value_name = "CHANNEL", default_value = "carla_control")]
    from: String,
    /// The gateway channel of the frames
    #[arg(long, value_name = "CHANNEL", default_value = "adas_can_tx")]
    to: String,
}

/// F: the newest acceleration command of channel 4 as an ACC_CONTROL frame (ACCEL_CMD
/// clamped to ISO 15622's -3.5..2.0 m/s^2) to the gateway.
pub fn run(args: &Args) -> R<()> {
    let db = car::dbc();
    let mut rx = receiver(&args.from)?;
    let mut tx = sender(&args.to)?;
    let (mut sent, mut dropped, mut bad) = (0u64, 0u64, 0u64);
    let mut buf = [0u8; SIZE];
    periodic(&names(&["sent", "dropped", "refused"]), |_, v| {
        let mut newest = None;
        for _ in 0..16 {
            if rx.try_read(&mut buf).is_err() {
                break;
            }
            newest = Some(Actuation::decode(&buf));
        }
        if let Some(a) = newest {
            if !a.accel.is_finite() {
                bad += 1;
            } else {
                let accel = f64::from(a.accel).clamp(-3.5, 2.0);
                let on = f64::from(u8::from(a.active));
                let frame = car::encode(
                    &db,
                    "ACC_CONTROL",
                    &[
                        ("ACCEL_CMD", accel),
                        ("PERMIT_BRAKING", on),
                        ("RELEASE_STANDSTILL", on),
                        ("ACC_TYPE", on),
                        ("CANCEL_REQ", f64::from(u8::from(a.cancel))),
                        ("ITS_CONNECT_LEAD", f64::from(a.tag)),
                    ],
                );
                let msg = gateway::encode(0, 0, &frame).expect("classic frame");
                match tx.try_write(&msg) {
                    Ok(()) => sent += 1,
                    Err(_) => dropped += 1,
                }
            }
        }
        v.copy_from_slice(&[sent, dropped, bad]);
        Ok(())
    })
}
