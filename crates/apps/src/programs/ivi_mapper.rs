//! `bulkhead-app ivi-mapper`: the infotainment mapper, a best-effort process.

use super::{receiver, CLUSTER_PORT, R};
use crate::wire::{Sensors, SIZE};
use bulkhead_can::service::stop_on_signals;
use std::net::UdpSocket;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// The infotainment mapper of the Linux side (IML): channel 1 to the cluster (UDP on
/// the partition's loopback, as the paper's FIFO pipes between IC, IVI and IML).
pub fn run() -> R<()> {
    let stop = stop_on_signals().map_err(|e| e.to_string())?;
    let mut rx = receiver("ic_ivi_sensor")?;
    let udp = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let mut buf = [0u8; SIZE];
    let mut n = 0u64;
    while !stop.load(Relaxed) {
        if rx
            .read_timeout(&mut buf, Duration::from_millis(100))
            .is_ok()
        {
            n += 1;
            if n % 25 == 0 {
                let s = Sensors::decode(&buf);
                let line = format!(
                    "speed {:.1} km/h, wheels {:.1} km/h, gas {:.0} %, brake {:.0}",
                    s.v_ego * 3.6,
                    s.wheel * 3.6,
                    s.gas,
                    s.brake_pressure
                );
                let _ = udp.send_to(line.as_bytes(), ("127.0.0.1", CLUSTER_PORT));
            }
        }
    }
    println!("ivi-mapper: {n} sensor readings");
    Ok(())
}
