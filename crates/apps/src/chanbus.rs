//! The CAN I/O tasks of Table 3 mapped onto a virtual bus: `usb-bh` (A) is the only
//! process attached to the bus (the USB host controller's bottom half: it moves frames
//! between the wire and two channels inside the rt partition, `usb_rx` and `usb_tx`),
//! and `mhydra-rx` (B) / `mhydra-tx` (H) run the CAN gateway's reader and writer
//! ([`bulkhead_can::gateway::BusReader`], [`BusWriter`](bulkhead_can::gateway::BusWriter))
//! over a [`ChanBus`]: a [`CanBus`] whose frames come from and go to those channels.
//! The controller pipeline of DriveOS 7.2 thus crosses A, B, E, K, G, L, F, H, A.

use bulkhead_can::bus::{CanBus, Received};
use bulkhead_can::frame::Frame;
use bulkhead_can::gateway::{decode, encode, WIRE_SIZE};
use bulkhead_chan::{Receiver, RecvError, Sender};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// A bus seen through `usb-bh`'s channels: `recv` reads `usb_rx` (never waits),
/// `send` writes `usb_tx` (a full channel drops the frame and counts it).
pub struct ChanBus {
    pub rx: Option<Receiver>,
    pub tx: Option<Sender>,
    pub dropped: Arc<AtomicU64>,
}

impl CanBus for ChanBus {
    fn send(&mut self, frame: &Frame) -> io::Result<()> {
        let tx = self
            .tx
            .as_mut()
            .ok_or_else(|| io::Error::other("no usb_tx channel"))?;
        let msg = encode(0, 0, frame).ok_or_else(|| io::Error::other("not a classic frame"))?;
        if tx.try_write(&msg).is_err() {
            self.dropped.fetch_add(1, Relaxed);
        }
        Ok(())
    }

    /// The same as `send`: writing `usb_tx` never waits.
    fn try_send(&mut self, frame: &Frame) -> io::Result<bool> {
        self.send(frame).map(|()| true)
    }

    fn recv(&mut self, _timeout: Option<Duration>) -> io::Result<Option<Received>> {
        let Some(rx) = self.rx.as_mut() else {
            return Ok(None);
        };
        let mut buf = [0u8; WIRE_SIZE];
        match rx.try_read(&mut buf) {
            Ok(()) => {}
            Err(RecvError::Empty) | Err(RecvError::Closed) => return Ok(None),
            Err(e) => return Err(io::Error::other(e.to_string())),
        }
        let (t_ns, _, frame) = decode(&buf).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Some(Received { t_ns, frame }))
    }
}

/// What one `usb-bh` job moved.
#[derive(Debug, Default, Clone, Copy)]
pub struct UsbCounts {
    pub rx: u64,
    pub rx_dropped: u64,
    pub tx: u64,
}

/// One `usb-bh` job: at most `max` frames from the bus to `usb_rx` (dropped and
/// counted when it is full) and at most `max` from `usb_tx` to the bus.
pub fn usb_step(
    bus: &mut dyn CanBus,
    rx: &mut Sender,
    tx: &mut Receiver,
    max: usize,
    seq: &mut u64,
    n: &mut UsbCounts,
) -> io::Result<()> {
    for _ in 0..max {
        let Some(r) = bus.recv(Some(Duration::ZERO))? else {
            break;
        };
        *seq += 1;
        let Some(msg) = encode(r.t_ns, *seq, &r.frame) else {
            continue;
        };
        match rx.try_write(&msg) {
            Ok(()) => n.rx += 1,
            Err(_) => n.rx_dropped += 1,
        }
    }
    let mut buf = [0u8; WIRE_SIZE];
    for _ in 0..max {
        if tx.try_read(&mut buf).is_err() {
            break;
        }
        if let Ok((_, _, frame)) = decode(&buf) {
            bus.send(&frame)?;
            n.tx += 1;
        }
    }
    Ok(())
}
