//! DBC decoding: messages and signals from a DBC file (parsed by the `can-dbc`
//! crate) applied to frames.
//!
//! A signal's raw value is `size` bits of the payload: little-endian (Intel, `@1`)
//! signals start at their least significant bit `start_bit` and go up; big-endian
//! (Motorola, `@0`) signals start at their most significant bit and go down within a
//! byte, then on to the next byte's bit 7 (the DBC "sawtooth" numbering). Signed
//! (`-`) raw values are two's complement of `size` bits; `SIG_VALTYPE_` float and
//! double signals are IEEE 754. The physical value is `raw * factor + offset`.
//!
//! Multiplexing: a signal marked `mN` is present only when the message's
//! multiplexor (`M`) has raw value N; extended multiplexing (`SG_MUL_VAL_`) gives a
//! signal its own switch and value ranges, and nested switches (`mNM`) are present
//! only when their own condition holds.

use crate::frame::{CanId, Frame};
use can_dbc::{ByteOrder, Dbc, MessageId, MultiplexIndicator, SignalExtendedValueType, ValueType};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

/// How a signal's bits are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Unsigned,
    Signed,
    Float32,
    Float64,
}

/// When a signal is present in a frame.
#[derive(Debug, Clone, PartialEq)]
enum Presence {
    Always,
    /// When signal `switch` (index in the message) is present and its raw value is in
    /// one of the inclusive ranges.
    When {
        switch: usize,
        ranges: Vec<(u64, u64)>,
    },
}

/// One signal of a message.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalDef {
    pub name: String,
    pub start_bit: u32,
    pub size: u32,
    pub little_endian: bool,
    pub encoding: Encoding,
    pub factor: f64,
    pub offset: f64,
    pub unit: String,
    presence: Presence,
}

impl SignalDef {
    /// The raw bits of this signal (not sign-extended), or None if they lie beyond `data`.
    pub fn raw_bits(&self, data: &[u8]) -> Option<u64> {
        let bit = |pos: u32| -> Option<u64> {
            let byte = data.get((pos / 8) as usize)?;
            Some(u64::from((byte >> (pos % 8)) & 1))
        };
        let mut value = 0u64;
        if self.little_endian {
            for i in 0..self.size {
                value |= bit(self.start_bit + i)? << i;
            }
        } else {
            let mut pos = self.start_bit;
            for _ in 0..self.size {
                value = (value << 1) | bit(pos)?;
                pos = if pos % 8 == 0 { pos + 15 } else { pos - 1 };
            }
        }
        Some(value)
    }

    /// Writes the low `size` bits of `raw` into `data` where [`SignalDef::raw_bits`]
    /// reads them; None if they lie beyond `data`.
    pub fn set_raw_bits(&self, data: &mut [u8], raw: u64) -> Option<()> {
        let mut put = |pos: u32, bit: u64| -> Option<()> {
            let byte = data.get_mut((pos / 8) as usize)?;
            let mask = 1u8 << (pos % 8);
            *byte = if bit & 1 == 1 {
                *byte | mask
            } else {
                *byte & !mask
            };
            Some(())
        };
        if self.little_endian {
            for i in 0..self.size {
                put(self.start_bit + i, raw >> i)?;
            }
        } else {
            let mut pos = self.start_bit;
            for i in (0..self.size).rev() {
                put(pos, raw >> i)?;
                pos = if pos % 8 == 0 { pos + 15 } else { pos - 1 };
            }
        }
        Some(())
    }

    /// The raw bits for physical value `value`: `(value - offset) / factor`, rounded
    /// to the nearest integer for integer signals; None if that does not fit.
    pub fn raw_for(&self, value: f64) -> Option<u64> {
        let scaled = (value - self.offset) / self.factor;
        if !scaled.is_finite() {
            return None;
        }
        let mask = if self.size == 64 {
            u64::MAX
        } else {
            (1u64 << self.size) - 1
        };
        match self.encoding {
            Encoding::Unsigned => {
                let r = scaled.round();
                (r >= 0.0 && r <= mask as f64).then_some(r as u64)
            }
            Encoding::Signed => {
                let r = scaled.round();
                let half = (1u64 << (self.size - 1)) as f64;
                (r >= -half && r < half).then_some((r as i64 as u64) & mask)
            }
            Encoding::Float32 => Some(u64::from((scaled as f32).to_bits())),
            Encoding::Float64 => Some(scaled.to_bits()),
        }
    }

    /// The physical value: the raw value (sign-extended or IEEE 754 per
    /// [`Encoding`]) times factor plus offset.
    pub fn physical(&self, raw: u64) -> f64 {
        let value = match self.encoding {
            Encoding::Unsigned => raw as f64,
            Encoding::Signed => {
                let shift = 64 - self.size;
                (((raw << shift) as i64) >> shift) as f64
            }
            Encoding::Float32 => f64::from(f32::from_bits(raw as u32)),
            Encoding::Float64 => f64::from_bits(raw),
        };
        value * self.factor + self.offset
    }
}

/// One message of a DBC.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageDef {
    pub id: CanId,
    pub name: String,
    /// Payload length the DBC declares.
    pub size: usize,
    pub signals: Vec<SignalDef>,
}

/// A decoded frame: its message name and `(signal, physical value)` pairs in DBC order.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded<'a> {
    pub message: &'a str,
    pub signals: Vec<(&'a str, f64)>,
}

/// Why a frame cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// No message with this id in the DBC.
    UnknownId(CanId),
    /// Fewer data bytes than the DBC declares for the message.
    TooShort {
        message: String,
        have: usize,
        need: usize,
    },
    /// A remote frame carries no data.
    Remote,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::UnknownId(id) => write!(f, "id {id} is not in the DBC"),
            DecodeError::TooShort {
                message,
                have,
                need,
            } => write!(f, "{message}: frame has {have} bytes, the DBC says {need}"),
            DecodeError::Remote => write!(f, "remote frame"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Why signal values cannot be encoded into a frame.
#[derive(Debug, Clone, PartialEq)]
pub enum EncodeError {
    UnknownMessage(String),
    UnknownSignal {
        message: String,
        signal: String,
    },
    /// The value is not finite or does not fit the signal's bits.
    OutOfRange {
        signal: String,
        value: f64,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::UnknownMessage(m) => write!(f, "no message {m:?} in the DBC"),
            EncodeError::UnknownSignal { message, signal } => {
                write!(f, "message {message:?} has no signal {signal:?}")
            }
            EncodeError::OutOfRange { signal, value } => {
                write!(f, "{value} does not fit signal {signal:?}")
            }
        }
    }
}

impl std::error::Error for EncodeError {}

/// Why a DBC file cannot be loaded.
#[derive(Debug)]
pub enum LoadError {
    Io(std::io::Error),
    Parse(String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Io(e) => e.fmt(f),
            LoadError::Parse(e) => write!(f, "not a valid DBC: {e}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// The messages of a DBC, indexed by id and by name.
#[derive(Debug, Clone)]
pub struct Database {
    messages: Vec<MessageDef>,
    by_id: HashMap<CanId, usize>,
    by_name: HashMap<String, usize>,
}

fn can_id(id: MessageId) -> CanId {
    match id {
        MessageId::Standard(v) if u32::from(v) <= crate::frame::MAX_STANDARD_ID => {
            CanId::Standard(v)
        }
        MessageId::Standard(v) => CanId::Extended(v.into()),
        MessageId::Extended(v) => CanId::Extended(v),
    }
}

impl Database {
    /// Reads and parses a DBC file. Non-UTF-8 bytes (cp1252 comments) are replaced.
    pub fn from_file(path: &Path) -> Result<Database, LoadError> {
        let bytes = std::fs::read(path).map_err(LoadError::Io)?;
        Database::parse(&String::from_utf8_lossy(&bytes))
    }

    /// Parses DBC text.
    pub fn parse(text: &str) -> Result<Database, LoadError> {
        let dbc = Dbc::try_from(text).map_err(|e| LoadError::Parse(e.to_string()))?;
        Ok(Database::from_dbc(&dbc))
    }

    /// Builds the decoding tables of a parsed DBC.
    pub fn from_dbc(dbc: &Dbc) -> Database {
        let messages: Vec<MessageDef> = dbc.messages.iter().map(|m| message_def(dbc, m)).collect();
        let by_id = messages
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id, i))
            .collect();
        let by_name = messages
            .iter()
            .enumerate()
            .map(|(i, m)| (m.name.clone(), i))
            .collect();
        Database {
            messages,
            by_id,
            by_name,
        }
    }

    pub fn messages(&self) -> &[MessageDef] {
        &self.messages
    }

    pub fn message(&self, id: CanId) -> Option<&MessageDef> {
        self.by_id.get(&id).map(|&i| &self.messages[i])
    }

    pub fn message_by_name(&self, name: &str) -> Option<&MessageDef> {
        self.by_name.get(name).map(|&i| &self.messages[i])
    }

    /// Decodes the signals present in `frame`.
    pub fn decode(&self, frame: &Frame) -> Result<Decoded<'_>, DecodeError> {
        let message = self
            .message(frame.id())
            .ok_or(DecodeError::UnknownId(frame.id()))?;
        if frame.is_remote() {
            return Err(DecodeError::Remote);
        }
        let data = frame.data();
        if data.len() < message.size {
            return Err(DecodeError::TooShort {
                message: message.name.clone(),
                have: data.len(),
                need: message.size,
            });
        }
        let raws: Vec<Option<u64>> = message.signals.iter().map(|s| s.raw_bits(data)).collect();
        let signals = message
            .signals
            .iter()
            .enumerate()
            .filter(|&(i, _)| present(message, &raws, i, 0))
            .filter_map(|(i, s)| Some((s.name.as_str(), s.physical(raws[i]?))))
            .collect();
        Ok(Decoded {
            message: &message.name,
            signals,
        })
    }
}

impl Database {
    /// A frame of message `message` carrying `values` (physical); signals not given
    /// are raw 0. For a multiplexed message, give the multiplexor's value too.
    pub fn encode(&self, message: &str, values: &[(&str, f64)]) -> Result<Frame, EncodeError> {
        let def = self
            .message_by_name(message)
            .ok_or_else(|| EncodeError::UnknownMessage(message.to_string()))?;
        let mut data = vec![0u8; def.size];
        for &(name, value) in values {
            let signal = def.signals.iter().find(|s| s.name == name).ok_or_else(|| {
                EncodeError::UnknownSignal {
                    message: message.to_string(),
                    signal: name.to_string(),
                }
            })?;
            let out_of_range = || EncodeError::OutOfRange {
                signal: name.to_string(),
                value,
            };
            let raw = signal.raw_for(value).ok_or_else(out_of_range)?;
            signal
                .set_raw_bits(&mut data, raw)
                .ok_or_else(out_of_range)?;
        }
        let frame = if data.len() <= crate::frame::CLASSIC_MAX_LEN {
            Frame::new(def.id, &data)
        } else {
            Frame::fd(def.id, false, &data)
        };
        frame.map_err(|_| EncodeError::OutOfRange {
            signal: message.to_string(),
            value: def.size as f64,
        })
    }
}

/// Whether signal `i` is present, given every signal's raw bits. `depth` bounds the
/// walk up the switch chain so that a cyclic DBC cannot loop.
fn present(message: &MessageDef, raws: &[Option<u64>], i: usize, depth: usize) -> bool {
    match &message.signals[i].presence {
        Presence::Always => true,
        Presence::When { switch, ranges } => {
            let Some(value) = raws[*switch] else {
                return false;
            };
            depth < message.signals.len()
                && ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&value))
                && present(message, raws, *switch, depth + 1)
        }
    }
}

fn message_def(dbc: &Dbc, m: &can_dbc::Message) -> MessageDef {
    let index_of = |name: &str| m.signals.iter().position(|s| s.name == name);
    let main_switch = m
        .signals
        .iter()
        .position(|s| s.multiplexer_indicator == MultiplexIndicator::Multiplexor);
    let signals = m
        .signals
        .iter()
        .map(|s| {
            let extended = dbc
                .extended_multiplex
                .iter()
                .find(|x| x.message_id == m.id && x.signal_name == s.name);
            let presence = match (extended, s.multiplexer_indicator) {
                (Some(x), _) => match index_of(&x.multiplexor_signal_name) {
                    Some(switch) => Presence::When {
                        switch,
                        ranges: x
                            .mappings
                            .iter()
                            .map(|r| (r.min_value, r.max_value))
                            .collect(),
                    },
                    None => Presence::Always,
                },
                (
                    None,
                    MultiplexIndicator::MultiplexedSignal(v)
                    | MultiplexIndicator::MultiplexorAndMultiplexedSignal(v),
                ) => match main_switch {
                    Some(switch) => Presence::When {
                        switch,
                        ranges: vec![(v, v)],
                    },
                    None => Presence::Always,
                },
                _ => Presence::Always,
            };
            let encoding = match dbc.extended_value_type_for_signal(m.id, &s.name) {
                Some(SignalExtendedValueType::IEEEfloat32Bit) => Encoding::Float32,
                Some(SignalExtendedValueType::IEEEdouble64bit) => Encoding::Float64,
                _ if s.value_type == ValueType::Signed => Encoding::Signed,
                _ => Encoding::Unsigned,
            };
            SignalDef {
                name: s.name.clone(),
                start_bit: s.start_bit as u32,
                size: (s.size as u32).clamp(1, 64),
                little_endian: s.byte_order == ByteOrder::LittleEndian,
                encoding,
                factor: s.factor,
                offset: s.offset,
                unit: s.unit.clone(),
                presence,
            }
        })
        .collect();
    MessageDef {
        id: can_id(m.id),
        name: m.name.clone(),
        size: m.size as usize,
        signals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DBC: &str = r#"VERSION ""

BO_ 100 LE: 8 XXX
 SG_ U12 : 0|12@1+ (0.5,10) [0|0] "" XXX
 SG_ S4 : 12|4@1- (1,0) [0|0] "" XXX
 SG_ F32 : 32|32@1- (1,0) [0|0] "" XXX

BO_ 101 BE: 4 XXX
 SG_ B16 : 7|16@0+ (1,0) [0|0] "" XXX
 SG_ S10 : 21|10@0- (0.1,-1) [0|0] "" XXX

BO_ 2147484672 EXT: 2 XXX
 SG_ MUX M : 0|4@1+ (1,0) [0|0] "" XXX
 SG_ A m1 : 8|8@1+ (1,0) [0|0] "" XXX
 SG_ B m2 : 8|8@1- (1,0) [0|0] "" XXX
 SG_ C : 4|4@1+ (1,0) [0|0] "" XXX

SIG_VALTYPE_ 100 F32 : 1;
"#;

    fn db() -> Database {
        Database::parse(DBC).unwrap()
    }

    fn values(d: &Decoded<'_>) -> Vec<(String, f64)> {
        d.signals.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn little_endian_factor_offset_sign_and_float() {
        let mut data = [0u8; 8];
        // U12 = 0x234 -> 0x234 * 0.5 + 10; S4 = 0xF -> -1.
        data[0] = 0x34;
        data[1] = 0xF2;
        data[4..8].copy_from_slice(&1.5f32.to_le_bytes());
        let frame = Frame::new(CanId::Standard(100), &data).unwrap();
        let db = db();
        let d = db.decode(&frame).unwrap();
        assert_eq!(d.message, "LE");
        assert_eq!(
            values(&d),
            vec![
                ("U12".into(), 0x234 as f64 * 0.5 + 10.0),
                ("S4".into(), -1.0),
                ("F32".into(), 1.5)
            ]
        );
    }

    #[test]
    fn big_endian_sawtooth_bits() {
        // B16 spans bytes 0-1 MSB first; S10 starts at bit 21 (byte 2, bit 5):
        // bits 21..16 of byte 2 then bits 31..28 of byte 3.
        let data = [0x12, 0x34, 0b0011_1111, 0b1110_0000];
        let frame = Frame::new(CanId::Standard(101), &data).unwrap();
        let db = db();
        let d = db.decode(&frame).unwrap();
        let v = values(&d);
        assert_eq!(v[0], ("B16".into(), 0x1234 as f64));
        // raw = 111111 1110 = 0x3FE -> -2 (10-bit two's complement) -> -2*0.1-1.
        assert!((v[1].1 - (-1.2)).abs() < 1e-9, "{v:?}");
    }

    #[test]
    fn multiplexed_signals_follow_their_switch() {
        let db = db();
        let id = CanId::Extended(1024);
        let d1 = db.decode(&Frame::new(id, &[0x31, 0xFF]).unwrap()).unwrap();
        assert_eq!(
            values(&d1),
            vec![("MUX".into(), 1.0), ("A".into(), 255.0), ("C".into(), 3.0)]
        );
        let d2 = db.decode(&Frame::new(id, &[0x02, 0xFF]).unwrap()).unwrap();
        assert_eq!(
            values(&d2),
            vec![("MUX".into(), 2.0), ("B".into(), -1.0), ("C".into(), 0.0)]
        );
    }

    #[test]
    fn undecodable_frames_say_why() {
        let db = db();
        let unknown = Frame::new(CanId::Standard(7), &[]).unwrap();
        assert_eq!(
            db.decode(&unknown),
            Err(DecodeError::UnknownId(CanId::Standard(7)))
        );
        let short = Frame::new(CanId::Standard(101), &[1, 2]).unwrap();
        assert_eq!(
            db.decode(&short).unwrap_err().to_string(),
            "BE: frame has 2 bytes, the DBC says 4"
        );
    }

    #[test]
    fn encoding_inverts_decoding() {
        let db = db();
        let frame = db
            .encode("LE", &[("U12", 100.5), ("S4", -3.0), ("F32", -2.25)])
            .unwrap();
        let v = values(&db.decode(&frame).unwrap());
        assert_eq!(
            v,
            vec![
                ("U12".into(), 100.5),
                ("S4".into(), -3.0),
                ("F32".into(), -2.25)
            ]
        );
        let frame = db.encode("BE", &[("B16", 4660.0), ("S10", -1.2)]).unwrap();
        assert_eq!(frame.data(), &[0x12, 0x34, 0b0011_1111, 0b1110_0000]);
        assert_eq!(
            db.encode("BE", &[("S10", 1000.0)]),
            Err(EncodeError::OutOfRange {
                signal: "S10".into(),
                value: 1000.0
            })
        );
        assert!(matches!(
            db.encode("BE", &[("X", 1.0)]),
            Err(EncodeError::UnknownSignal { .. })
        ));
        assert!(matches!(
            db.encode("NONE", &[]),
            Err(EncodeError::UnknownMessage(_))
        ));
    }

    #[test]
    fn bad_dbc_is_an_error() {
        assert!(matches!(Database::parse("BO_ x"), Err(LoadError::Parse(_))));
    }
}
