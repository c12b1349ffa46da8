//! The CAN mapper for best-effort partitions: the partition's side of its two
//! gateway channels (DriveOS section 6.4.1: "Every CAN mapper process has one
//! thread each for reading and writing CAN messages via shmcomm read and write
//! channels" and forwards them "to appropriate applications based on CAN message
//! IDs"). Subscribe by id, or by DBC message or signal name; publish frames (the
//! gateway sends those on the partition's allowlist).

use crate::dbc::Database;
use crate::frame::{CanId, Frame};
use crate::gateway::{self, WIRE_SIZE};
use bulkhead_chan::{Error as ChanError, OpenError, Receiver, RecvError, SendError, Sender};
pub use bulkhead_gateway_protocol::env_var;
use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

/// Errors of the mapper.
#[derive(Debug)]
pub enum MapperError {
    Chan(ChanError),
    /// A channel whose message size is not [`WIRE_SIZE`].
    BadChannel(String),
    /// Subscribing by name needs a DBC ([`Mapper::with_dbc`]).
    NoDbc,
    UnknownMessage(String),
    UnknownSignal {
        message: String,
        signal: String,
    },
    /// The gateway sent something that is not a classic CAN frame.
    Malformed(String),
    /// Signal values that do not encode (see [`crate::dbc::EncodeError`]).
    Encode(String),
    /// [`Mapper::from_env`]: the partition's channels to the bus are not in the
    /// environment, or are not there.
    Env(bulkhead_gateway_protocol::ClientError),
}

impl fmt::Display for MapperError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapperError::Chan(e) => write!(f, "channel: {e}"),
            MapperError::BadChannel(e) => f.write_str(e),
            MapperError::NoDbc => write!(f, "subscribing by name needs a DBC"),
            MapperError::UnknownMessage(m) => write!(f, "no message {m:?} in the DBC"),
            MapperError::UnknownSignal { message, signal } => {
                write!(f, "message {message:?} has no signal {signal:?}")
            }
            MapperError::Malformed(e) => write!(f, "malformed frame from the gateway: {e}"),
            MapperError::Encode(e) => f.write_str(e),
            MapperError::Env(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for MapperError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MapperError::Env(e) => Some(e),
            _ => None,
        }
    }
}

impl From<OpenError> for MapperError {
    fn from(e: OpenError) -> MapperError {
        MapperError::Chan(e.into())
    }
}

impl From<SendError> for MapperError {
    fn from(e: SendError) -> MapperError {
        MapperError::Chan(e.into())
    }
}

impl From<RecvError> for MapperError {
    fn from(e: RecvError) -> MapperError {
        MapperError::Chan(e.into())
    }
}

/// What a subscription of one id delivers.
#[derive(Debug, Clone, PartialEq)]
enum Wanted {
    /// The frame only.
    Frame,
    /// The frame and these signals (all of the message's if empty).
    Signals(Vec<String>),
}

/// A subscribed frame as delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Bus timestamp, ns.
    pub t_ns: u64,
    /// The gateway's sequence number of the frame on its bus.
    pub seq: u64,
    pub frame: Frame,
    /// The DBC message name, when subscribed by name.
    pub message: Option<String>,
    /// Decoded signals, when subscribed by message (all) or signal (those).
    pub signals: Vec<(String, f64)>,
}

/// A best-effort partition's connection to the CAN gateway.
pub struct Mapper {
    rx: Receiver,
    tx: Sender,
    db: Option<Database>,
    subs: HashMap<CanId, Wanted>,
    all: bool,
    next_seq: Option<u64>,
    missed: u64,
}

impl Mapper {
    /// `from_gateway` is the receiving end of the gateway's channel to this
    /// partition, `to_gateway` the sending end of this partition's channel to it.
    pub fn new(from_gateway: Receiver, to_gateway: Sender) -> Result<Mapper, MapperError> {
        for size in [from_gateway.meta().msg_size, to_gateway.meta().msg_size] {
            if size as usize != WIRE_SIZE {
                return Err(MapperError::BadChannel(format!(
                    "channel carries {size}-byte messages, CAN gateway channels carry {WIRE_SIZE}"
                )));
            }
        }
        Ok(Mapper {
            rx: from_gateway,
            tx: to_gateway,
            db: None,
            subs: HashMap::new(),
            all: false,
            next_seq: None,
            missed: 0,
        })
    }

    /// Connects to bus `bus` through the channels handed over in [`env_var`]`(bus)`
    /// (two values of [`Channel::open_handed`], comma-separated), as `bulkhead run`
    /// provides them to the processes of a client partition.
    pub fn from_env(bus: &str) -> Result<Mapper, MapperError> {
        let (rx, tx) = bulkhead_gateway_protocol::client_channels(bus).map_err(MapperError::Env)?;
        Mapper::new(rx.receiver()?, tx.sender()?)
    }

    /// Uses `db` to subscribe by name and decode.
    pub fn with_dbc(mut self, db: Database) -> Mapper {
        self.db = Some(db);
        self
    }

    /// Spin iterations before a blocking receive sleeps on the channel's futex
    /// (`bulkhead-chan`'s default suits a dedicated CPU; a task under a CPU
    /// reservation should not burn its budget spinning: use 0).
    pub fn set_spin(&mut self, spins: u32) {
        self.rx.set_spin(spins);
        self.tx.set_spin(spins);
    }

    /// Delivers every frame (as frames, but for ids subscribed by name).
    pub fn subscribe_all(&mut self) {
        self.all = true;
    }

    /// Delivers frames with this id.
    pub fn subscribe_id(&mut self, id: CanId) {
        self.subs.entry(id).or_insert(Wanted::Frame);
    }

    /// Delivers frames of DBC message `name`, decoded. Returns its id.
    pub fn subscribe_message(&mut self, name: &str) -> Result<CanId, MapperError> {
        let db = self.db.as_ref().ok_or(MapperError::NoDbc)?;
        let message = db
            .message_by_name(name)
            .ok_or_else(|| MapperError::UnknownMessage(name.to_string()))?;
        self.subs.insert(message.id, Wanted::Signals(Vec::new()));
        Ok(message.id)
    }

    /// Delivers frames of DBC message `message` with signal `signal` decoded (and
    /// any other signals subscribed on that message). Returns the message's id.
    pub fn subscribe_signal(&mut self, message: &str, signal: &str) -> Result<CanId, MapperError> {
        let db = self.db.as_ref().ok_or(MapperError::NoDbc)?;
        let def = db
            .message_by_name(message)
            .ok_or_else(|| MapperError::UnknownMessage(message.to_string()))?;
        if !def.signals.iter().any(|s| s.name == signal) {
            return Err(MapperError::UnknownSignal {
                message: message.to_string(),
                signal: signal.to_string(),
            });
        }
        match self.subs.entry(def.id).or_insert(Wanted::Frame) {
            Wanted::Signals(names) if names.is_empty() => {} // already all signals
            Wanted::Signals(names) => names.push(signal.to_string()),
            w => *w = Wanted::Signals(vec![signal.to_string()]),
        }
        Ok(def.id)
    }

    /// Sends `frame` to the gateway, waiting while the channel is full. The
    /// gateway transmits it if its id is on this partition's allowlist.
    pub fn publish(&mut self, frame: &Frame) -> Result<(), MapperError> {
        let msg = gateway::encode(0, 0, frame).ok_or_else(|| {
            MapperError::Malformed("only classic frames cross the gateway".into())
        })?;
        Ok(self.tx.write(&msg)?)
    }

    /// Encodes `values` (physical, by signal name) into a frame of DBC message
    /// `message` and publishes it.
    pub fn publish_signals(
        &mut self,
        message: &str,
        values: &[(&str, f64)],
    ) -> Result<(), MapperError> {
        let db = self.db.as_ref().ok_or(MapperError::NoDbc)?;
        let frame = db
            .encode(message, values)
            .map_err(|e| MapperError::Encode(e.to_string()))?;
        self.publish(&frame)
    }

    /// The next subscribed frame, waiting at most `timeout`; frames of other ids
    /// are skipped. Ok(None) on timeout.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<Delivery>, MapperError> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; WIRE_SIZE];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.read_timeout(&mut buf, left) {
                Ok(()) => {}
                Err(RecvError::Timeout) | Err(RecvError::Empty) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
            let (t_ns, seq, frame) =
                gateway::decode(&buf).map_err(|e| MapperError::Malformed(e.to_string()))?;
            self.note_seq(seq);
            if let Some(delivery) = self.deliver(t_ns, seq, frame) {
                return Ok(Some(delivery));
            }
        }
    }

    /// Frames of the bus the gateway could not forward to this partition
    /// (sequence gaps seen so far).
    pub fn missed(&self) -> u64 {
        self.missed
    }

    fn note_seq(&mut self, seq: u64) {
        if let Some(expected) = self.next_seq {
            self.missed += seq.saturating_sub(expected);
        }
        self.next_seq = Some(seq + 1);
    }

    fn deliver(&self, t_ns: u64, seq: u64, frame: Frame) -> Option<Delivery> {
        let wanted = match self.subs.get(&frame.id()) {
            Some(wanted) => wanted,
            None if self.all => &Wanted::Frame,
            None => return None,
        };
        let mut delivery = Delivery {
            t_ns,
            seq,
            frame,
            message: None,
            signals: Vec::new(),
        };
        if let (Wanted::Signals(names), Some(db)) = (wanted, &self.db) {
            if let Ok(decoded) = db.decode(&frame) {
                delivery.message = Some(decoded.message.to_string());
                delivery.signals = decoded
                    .signals
                    .iter()
                    .filter(|(n, _)| names.is_empty() || names.iter().any(|w| w == n))
                    .map(|(n, v)| (n.to_string(), *v))
                    .collect();
            }
        }
        Some(delivery)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkhead_chan::{Channel, Spec};

    #[test]
    fn the_environment_variable_is_the_bus_name_uppercased() {
        assert_eq!(env_var("can0"), "BULKHEAD_CAN_CAN0");
        assert_eq!(env_var("body-1.x"), "BULKHEAD_CAN_BODY_1_X");
        let err = Mapper::from_env("bulkhead-unset-bus-4711")
            .err()
            .expect("no such variable")
            .to_string();
        assert!(
            err.starts_with("BULKHEAD_CAN_BULKHEAD_UNSET_BUS_4711 is not set"),
            "{err}"
        );
    }

    fn mapper(size: u32) -> Result<Mapper, MapperError> {
        let a = Channel::create(&Spec::fifo("mapper-a", size, 4)).unwrap();
        let b = Channel::create(&Spec::fifo("mapper-b", size, 4)).unwrap();
        Mapper::new(a.receiver().unwrap(), b.sender().unwrap())
    }

    #[test]
    fn subscriptions_by_name_are_checked() {
        let mut m = mapper(WIRE_SIZE as u32).unwrap();
        assert!(matches!(
            m.subscribe_message("SPEED"),
            Err(MapperError::NoDbc)
        ));
        let db = Database::parse(
            "BO_ 180 SPEED: 8 XXX\n SG_ SPEED : 47|16@0+ (0.01,0) [0|250] \"km/h\" XXX\n",
        )
        .unwrap();
        let mut m = m.with_dbc(db);
        assert_eq!(
            m.subscribe_signal("SPEED", "SPEED").unwrap(),
            CanId::Standard(180)
        );
        assert_eq!(
            m.subscribe_message("SPEEDO").unwrap_err().to_string(),
            "no message \"SPEEDO\" in the DBC"
        );
        assert!(matches!(
            m.subscribe_signal("SPEED", "RPM"),
            Err(MapperError::UnknownSignal { .. })
        ));
        assert!(matches!(mapper(8), Err(MapperError::BadChannel(_))));
    }

    #[test]
    fn published_signals_arrive_encoded_on_the_gateway_side() {
        let to_gw = Channel::create(&Spec::fifo("mapper-tx", WIRE_SIZE as u32, 4)).unwrap();
        let from_gw = Channel::create(&Spec::fifo("mapper-rx", WIRE_SIZE as u32, 4)).unwrap();
        let db = Database::parse(
            "BO_ 835 ACC_CONTROL: 8 DSU\n SG_ ACCEL_CMD : 7|16@0- (0.001,0) [-20|20] \"m/s^2\" HCU\n",
        )
        .unwrap();
        let mut m = Mapper::new(from_gw.receiver().unwrap(), to_gw.sender().unwrap())
            .unwrap()
            .with_dbc(db);
        m.publish_signals("ACC_CONTROL", &[("ACCEL_CMD", -1.5)])
            .unwrap();
        let mut gateway_end = to_gw.receiver().unwrap();
        let mut buf = [0u8; WIRE_SIZE];
        gateway_end.try_read(&mut buf).unwrap();
        let (_, _, frame) = gateway::decode(&buf).unwrap();
        assert_eq!(frame.id(), CanId::Standard(835));
        assert_eq!(&frame.data()[..2], &(-1500i16).to_be_bytes());
        let err = m
            .publish_signals("ACC_CONTROL", &[("ACCEL_CMD", 99.0)])
            .unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
    }
}
