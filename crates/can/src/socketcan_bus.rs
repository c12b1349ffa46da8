//! The SocketCAN backend (real interfaces such as `can0`, and `vcan`), on the
//! `socketcan` crate. Classic CAN frames only.

use crate::frame::{CanId, Frame};
use crate::vbus::Received;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::SendFlags;
use socketcan::{CanFrame, CanSocket, EmbeddedFrame, ExtendedId, Id, Socket, StandardId};
use std::fmt;
use std::io;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Why a SocketCAN interface cannot be used.
#[derive(Debug)]
pub enum SocketCanError {
    /// The kernel has no `AF_CAN` (the `can`/`can_raw` modules are missing).
    NoKernelSupport,
    /// No network interface of this name.
    NoInterface(String),
    Io(io::Error),
}

impl fmt::Display for SocketCanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocketCanError::NoKernelSupport => write!(
                f,
                "this kernel has no SocketCAN support (socket(AF_CAN) fails: load the `can` \
                 and `can_raw` modules, or use a virtual bus: `bulkhead can bus NAME`)"
            ),
            SocketCanError::NoInterface(name) => {
                write!(f, "no network interface {name:?} (see `ip link`)")
            }
            SocketCanError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SocketCanError {}

fn classify(e: io::Error, iface: &str) -> SocketCanError {
    match e.raw_os_error() {
        Some(bulkhead_os::errno::EAFNOSUPPORT) | Some(bulkhead_os::errno::EPROTONOSUPPORT) => {
            SocketCanError::NoKernelSupport
        }
        Some(bulkhead_os::errno::ENODEV) | Some(bulkhead_os::errno::ENXIO) => {
            SocketCanError::NoInterface(iface.to_string())
        }
        _ if e.kind() == io::ErrorKind::NotFound => SocketCanError::NoInterface(iface.to_string()),
        _ => SocketCanError::Io(e),
    }
}

/// Whether this kernel can open a raw CAN socket at all.
pub fn kernel_has_can() -> bool {
    // Interface index 0 binds a CAN_RAW socket to every CAN interface; it fails
    // only when the address family is missing.
    CanSocket::open_iface(0).is_ok()
}

/// An open raw CAN socket on one interface.
pub struct SocketCan {
    socket: CanSocket,
    iface: String,
}

impl SocketCan {
    /// Opens interface `iface` (e.g. `can0`, `vcan0`).
    pub fn open(iface: &str) -> Result<SocketCan, SocketCanError> {
        if let Err(e) = CanSocket::open_iface(0) {
            return Err(classify(e, iface));
        }
        let socket = CanSocket::open(iface).map_err(|e| classify(e, iface))?;
        Ok(SocketCan {
            socket,
            iface: iface.to_string(),
        })
    }

    pub fn iface(&self) -> &str {
        &self.iface
    }

    pub fn send(&self, frame: &Frame) -> io::Result<()> {
        let frame = to_socketcan(frame)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a classic frame"))?;
        self.socket.write_frame(&frame)
    }

    /// Transmits `frame` if the interface's transmit queue takes it at once: `Ok(false)`
    /// when it is full (`EAGAIN`, or `ENOBUFS` as CAN drivers report a full queue).
    pub fn try_send(&self, frame: &Frame) -> io::Result<bool> {
        let bytes = frame
            .to_can_frame_bytes()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        loop {
            return match rustix::net::send(&self.socket, &bytes, SendFlags::DONTWAIT) {
                Ok(_) => Ok(true),
                Err(Errno::AGAIN | Errno::NOBUFS) => Ok(false),
                Err(Errno::INTR) => continue,
                Err(e) => Err(e.into()),
            };
        }
    }

    /// Receives a frame, waiting at most `timeout` (for ever if None; a zero
    /// timeout never blocks); Ok(None) on timeout. Error frames are skipped.
    /// Timestamps are taken on reception.
    pub fn recv(&self, timeout: Option<Duration>) -> io::Result<Option<Received>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if !self.wait_readable(deadline)? {
                return Ok(None);
            }
            let raw = match self.socket.read_frame() {
                Ok(raw) => raw,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if let Some(frame) = from_socketcan(&raw) {
                let t_ns = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                return Ok(Some(Received { t_ns, frame }));
            }
        }
    }

    /// Waits until a frame can be read or `deadline` passes (false). Polls once
    /// without waiting when the deadline has passed already.
    fn wait_readable(&self, deadline: Option<Instant>) -> io::Result<bool> {
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let timeout = left.map(|l| Timespec {
                tv_sec: l.as_secs() as _,
                tv_nsec: l.subsec_nanos() as _,
            });
            let mut fds = [PollFd::new(&self.socket, PollFlags::IN)];
            match poll(&mut fds, timeout.as_ref()) {
                Ok(0) => return Ok(false),
                Ok(_) => return Ok(true),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Converts to a `socketcan` frame (None for CAN FD frames).
pub fn to_socketcan(frame: &Frame) -> Option<CanFrame> {
    if frame.kind() != crate::frame::Kind::Classic {
        return None;
    }
    let id: Id = match frame.id() {
        CanId::Standard(id) => StandardId::new(id)?.into(),
        CanId::Extended(id) => ExtendedId::new(id)?.into(),
    };
    if frame.is_remote() {
        CanFrame::new_remote(id, frame.len())
    } else {
        CanFrame::new(id, frame.data())
    }
}

/// Converts from a `socketcan` frame (None for error frames).
pub fn from_socketcan(frame: &CanFrame) -> Option<Frame> {
    let id = match EmbeddedFrame::id(frame) {
        Id::Standard(id) => CanId::Standard(id.as_raw()),
        Id::Extended(id) => CanId::Extended(id.as_raw()),
    };
    match frame {
        CanFrame::Data(_) => Frame::new(id, EmbeddedFrame::data(frame)).ok(),
        CanFrame::Remote(_) => Frame::remote(id, EmbeddedFrame::dlc(frame) as u8).ok(),
        CanFrame::Error(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_convert_both_ways() {
        let frames = [
            Frame::new(CanId::Standard(0x7FF), &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap(),
            Frame::new(CanId::Extended(0x1ABC_DEF0), &[]).unwrap(),
            Frame::remote(CanId::Standard(0x12), 4).unwrap(),
        ];
        for frame in frames {
            let sc = to_socketcan(&frame).unwrap();
            assert_eq!(from_socketcan(&sc), Some(frame));
        }
        let sc = to_socketcan(&frames[1]).unwrap();
        assert!(EmbeddedFrame::is_extended(&sc));
        assert!(to_socketcan(&Frame::fd(CanId::Standard(1), false, &[0; 12]).unwrap()).is_none());
    }

    #[test]
    fn opening_reports_what_is_missing() {
        match SocketCan::open("bulkheadnone0") {
            Err(SocketCanError::NoKernelSupport) => {
                assert!(!kernel_has_can());
                let msg = SocketCanError::NoKernelSupport.to_string();
                assert!(msg.contains("no SocketCAN support"), "{msg}");
            }
            Err(SocketCanError::NoInterface(name)) => {
                assert!(kernel_has_can());
                assert_eq!(name, "bulkheadnone0");
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("an interface named bulkheadnone0 exists"),
        }
    }
}
