//! One interface over the two kinds of bus: a virtual bus (by name) and a
//! SocketCAN interface (`socketcan:IFACE`).

use crate::frame::Frame;
use crate::socketcan_bus::{SocketCan, SocketCanError};
use crate::vbus::{BusError, Node};
use std::fmt;
use std::io;
use std::time::Duration;

pub use crate::vbus::Received;

/// A CAN bus a program can send to and receive from.
pub trait CanBus: Send {
    /// Transmits `frame` (may block while the transmit queue is full).
    fn send(&mut self, frame: &Frame) -> io::Result<()>;
    /// The next frame from another node, waiting at most `timeout` (for ever if
    /// None); Ok(None) on timeout.
    fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Received>>;
}

impl CanBus for Node {
    fn send(&mut self, frame: &Frame) -> io::Result<()> {
        Node::send(self, frame)
    }
    fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Received>> {
        Node::recv(self, timeout)
    }
}

impl CanBus for SocketCan {
    fn send(&mut self, frame: &Frame) -> io::Result<()> {
        SocketCan::send(self, frame)
    }
    fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Received>> {
        SocketCan::recv(self, timeout)
    }
}

pub use bulkhead_canwire::SOCKETCAN_PREFIX;

/// Why a bus spec cannot be opened.
#[derive(Debug)]
pub enum OpenError {
    Virtual(BusError),
    SocketCan(SocketCanError),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Virtual(e) => e.fmt(f),
            OpenError::SocketCan(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for OpenError {}

/// Opens `spec`: `socketcan:IFACE` for a SocketCAN interface, else the name of a
/// virtual bus.
pub fn open(spec: &str) -> Result<Box<dyn CanBus>, OpenError> {
    match spec.strip_prefix(SOCKETCAN_PREFIX) {
        Some(iface) => Ok(Box::new(
            SocketCan::open(iface).map_err(OpenError::SocketCan)?,
        )),
        None => Ok(Box::new(Node::attach(spec).map_err(OpenError::Virtual)?)),
    }
}

impl CanBus for std::sync::Arc<SocketCan> {
    fn send(&mut self, frame: &Frame) -> io::Result<()> {
        SocketCan::send(self, frame)
    }
    fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Received>> {
        SocketCan::recv(self, timeout)
    }
}

/// A reader's and a writer's handle on one bus.
pub type BusPair = (Box<dyn CanBus>, Box<dyn CanBus>);

/// Two handles on one connection to `spec`, for a reader thread and a writer
/// thread: frames sent through either are not received by either (like one
/// SocketCAN socket, which does not receive its own frames).
pub fn open_pair(spec: &str) -> Result<BusPair, OpenError> {
    match spec.strip_prefix(SOCKETCAN_PREFIX) {
        Some(iface) => {
            let socket = std::sync::Arc::new(SocketCan::open(iface).map_err(OpenError::SocketCan)?);
            Ok((Box::new(socket.clone()), Box::new(socket)))
        }
        None => {
            let node = Node::attach(spec).map_err(OpenError::Virtual)?;
            let twin = node
                .try_clone()
                .map_err(|e| OpenError::Virtual(BusError::Io(e)))?;
            Ok((Box::new(node), Box::new(twin)))
        }
    }
}
