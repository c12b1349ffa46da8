//! `bulkhead-app openpilot`: OpenPilot's Linux side, a best-effort process.

use super::{receiver, R};
use crate::wire::{PlanState, SIZE};
use bulkhead_can::service::stop_on_signals;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// OpenPilot's Linux side: prints the ADAS read mapper's plan (channel `adas_plan`)
/// once a second.
pub fn run() -> R<()> {
    let stop = stop_on_signals().map_err(|e| e.to_string())?;
    let mut plan = receiver("adas_plan")?;
    let mut buf = [0u8; SIZE];
    while !stop.load(Relaxed) {
        std::thread::sleep(Duration::from_secs(1));
        if plan.try_read(&mut buf).is_ok() {
            let p = PlanState::decode(&buf);
            println!(
                "openpilot: t={:.1}s v={:.1}km/h set={:.1}km/h target={:.1}km/h a_target={:+.2} gap={:.0}m updates={}",
                p.t_s,
                p.v_ego * 3.6,
                p.set * 3.6,
                p.v_target * 3.6,
                p.a_target,
                p.gap,
                p.seq - 1
            );
        }
    }
    Ok(())
}
