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
    /// Transmits `frame` if the bus takes it without waiting: `Ok(false)` while its
    /// transmit queue is full (the frame was not taken; try again later).
    fn try_send(&mut self, frame: &Frame) -> io::Result<bool>;
    /// The next frame from another node, waiting at most `timeout` (for ever if
    /// None); Ok(None) on timeout.
    fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Received>>;
}

impl CanBus for Node {
    fn send(&mut self, frame: &Frame) -> io::Result<()> {
        Node::send(self, frame)
    }
    fn try_send(&mut self, frame: &Frame) -> io::Result<bool> {
        Node::try_send(self, frame)
    }
    fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Received>> {
        Node::recv(self, timeout)
    }
}

impl CanBus for SocketCan {
    fn send(&mut self, frame: &Frame) -> io::Result<()> {
        SocketCan::send(self, frame)
    }
    fn try_send(&mut self, frame: &Frame) -> io::Result<bool> {
        SocketCan::try_send(self, frame)
    }
    fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Received>> {
        SocketCan::recv(self, timeout)
    }
}

pub use bulkhead_gateway_protocol::SOCKETCAN_PREFIX;

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
    fn try_send(&mut self, frame: &Frame) -> io::Result<bool> {
        SocketCan::try_send(self, frame)
    }
    fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Received>> {
        SocketCan::recv(self, timeout)
    }
}

/// Opens `spec` for a sender that keeps its own queue and uses
/// [`CanBus::try_send`] (the gateway's writer): on a virtual bus, the node's socket holds
/// only a few frames on their way to the bus ([`Node::hold_few_frames`]), so that what
/// waits for the bus waits in the sender's queue, in the sender's order, not in the
/// socket's first-in first-out one. A SocketCAN interface's transmit queue is short
/// already (`txqueuelen` 10 for CAN devices).
pub fn open_sender(spec: &str) -> Result<Box<dyn CanBus>, OpenError> {
    match spec.strip_prefix(SOCKETCAN_PREFIX) {
        Some(_) => open(spec),
        None => {
            let node = Node::attach(spec).map_err(OpenError::Virtual)?;
            node.hold_few_frames()
                .map_err(|e| OpenError::Virtual(BusError::Io(e)))?;
            Ok(Box::new(node))
        }
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
