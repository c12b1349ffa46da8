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

/// What `usb-bh` moved so far.
#[derive(Debug, Default, Clone, Copy)]
pub struct UsbCounts {
    /// Frames taken from the bus and written into `usb_rx`.
    pub rx: u64,
    /// Frames taken from the bus and dropped: `usb_rx` was full.
    pub rx_dropped: u64,
    /// Frames from `usb_tx` the bus took.
    pub tx: u64,
    /// Jobs that found the bus's transmit queue full: a frame waited for the next job,
    /// and the frames behind it in `usb_tx`.
    pub tx_full: u64,
}

/// `usb-bh`'s state between jobs: like a CAN controller's transmit mailbox, a frame
/// the bus did not take waits here for the next job, and the job goes on.
#[derive(Debug, Default)]
pub struct UsbBh {
    pub counts: UsbCounts,
    seq: u64,
    held: Option<Frame>,
}

impl UsbBh {
    /// One job: at most `max` frames from the bus to `usb_rx` (dropped and counted when
    /// it is full) and at most `max` from `usb_tx` to the bus. Never waits on the bus:
    /// the process serving it may be starved, or its queue full of frames that win
    /// arbitration, and this job's deadline is not the bus's to spend.
    pub fn step(
        &mut self,
        bus: &mut dyn CanBus,
        rx: &mut Sender,
        tx: &mut Receiver,
        max: usize,
    ) -> io::Result<()> {
        for _ in 0..max {
            let Some(r) = bus.recv(Some(Duration::ZERO))? else {
                break;
            };
            self.seq += 1;
            let Some(msg) = encode(r.t_ns, self.seq, &r.frame) else {
                continue;
            };
            match rx.try_write(&msg) {
                Ok(()) => self.counts.rx += 1,
                Err(_) => self.counts.rx_dropped += 1,
            }
        }
        for _ in 0..max {
            let Some(frame) = self.held.take().or_else(|| next_frame(tx)) else {
                break;
            };
            if !bus.try_send(&frame)? {
                self.held = Some(frame);
                self.counts.tx_full += 1;
                break;
            }
            self.counts.tx += 1;
        }
        Ok(())
    }
}

/// The next frame in `usb_tx` (a message that is not a frame is skipped).
fn next_frame(tx: &mut Receiver) -> Option<Frame> {
    let mut buf = [0u8; WIRE_SIZE];
    while tx.try_read(&mut buf).is_ok() {
        if let Ok((_, _, frame)) = decode(&buf) {
            return Some(frame);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkhead_can::CanId;
    use bulkhead_chan::{Channel, Spec};

    /// A bus whose transmit queue has room for `room` more frames.
    struct Queue {
        room: usize,
        taken: Vec<Frame>,
    }

    impl CanBus for Queue {
        fn send(&mut self, _: &Frame) -> io::Result<()> {
            panic!("usb-bh waited on the bus")
        }
        fn try_send(&mut self, frame: &Frame) -> io::Result<bool> {
            if self.room == 0 {
                return Ok(false);
            }
            self.room -= 1;
            self.taken.push(*frame);
            Ok(true)
        }
        fn recv(&mut self, _: Option<Duration>) -> io::Result<Option<Received>> {
            Ok(None)
        }
    }

    fn frame(n: u8) -> Frame {
        Frame::new(CanId::Standard(0x3E0), &[n]).unwrap()
    }

    /// A full transmit queue holds the frame for the next job, counts the job, and loses
    /// nothing: once the bus takes frames again they leave in `usb_tx`'s order.
    #[test]
    fn a_full_bus_holds_the_frame_for_the_next_job_and_keeps_the_order() {
        let rx_chan = Channel::create(&Spec::fifo("usb_rx", WIRE_SIZE as u32, 8)).unwrap();
        let tx_chan = Channel::create(&Spec::fifo("usb_tx", WIRE_SIZE as u32, 8)).unwrap();
        let (mut rx, mut tx) = (rx_chan.sender().unwrap(), tx_chan.receiver().unwrap());
        let mut mhydra_tx = tx_chan.sender().unwrap();
        for n in 0..5 {
            mhydra_tx
                .try_write(&encode(0, 0, &frame(n)).unwrap())
                .unwrap();
        }
        let mut bus = Queue {
            room: 2,
            taken: vec![],
        };
        let mut usb = UsbBh::default();
        usb.step(&mut bus, &mut rx, &mut tx, 64).unwrap();
        assert_eq!(bus.taken, [frame(0), frame(1)]);
        assert_eq!((usb.counts.tx, usb.counts.tx_full), (2, 1));
        usb.step(&mut bus, &mut rx, &mut tx, 64).unwrap();
        assert_eq!((usb.counts.tx, usb.counts.tx_full), (2, 2));
        bus.room = 10;
        usb.step(&mut bus, &mut rx, &mut tx, 64).unwrap();
        assert_eq!(bus.taken, (0..5).map(frame).collect::<Vec<_>>());
        assert_eq!((usb.counts.tx, usb.counts.tx_full), (5, 2));
    }
}
