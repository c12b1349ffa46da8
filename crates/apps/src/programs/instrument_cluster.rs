//! `bulkhead-app instrument-cluster`: the instrument cluster, a best-effort process.

use super::{CLUSTER_PORT, R};
use bulkhead_can::service::stop_on_signals;
use bulkhead_task::clock::now_ns;
use std::net::UdpSocket;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Prints the speeds the infotainment mapper sends.
pub fn run() -> R<()> {
    listen("instrument-cluster", CLUSTER_PORT)
}

/// The cluster and OpenPilot's UI: prints what its mapper sends, at most once a second.
fn listen(who: &str, port: u16) -> R<()> {
    let stop = stop_on_signals().map_err(|e| e.to_string())?;
    let udp = UdpSocket::bind(("127.0.0.1", port)).map_err(|e| format!("port {port}: {e}"))?;
    udp.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 512];
    let mut last = 0u64;
    while !stop.load(Relaxed) {
        if let Ok(n) = udp.recv(&mut buf) {
            if now_ns() - last >= 1_000_000_000 {
                last = now_ns();
                println!("{who}: {}", String::from_utf8_lossy(&buf[..n]));
            }
        }
    }
    Ok(())
}
