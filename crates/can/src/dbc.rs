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

use crate::dbc_check::{self, MessageSource, Problem};
use crate::dbc_def::Presence;
pub use crate::dbc_def::{Encoding, MessageDef, SignalDef};
use crate::dbc_overlap;
use crate::frame::{CanId, Frame};
use bulkhead_model::excerpt::excerpt;
use can_dbc::{
    AttributeValue, ByteOrder, Dbc, MessageId, MultiplexIndicator, SignalExtendedValueType,
    ValueType,
};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

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
    /// Not DBC syntax: the line (when the parser knows it) and what was expected there,
    /// with the line's start escaped and cut short.
    Parse {
        line: Option<usize>,
        message: String,
    },
    /// Valid syntax, invalid content (see [`Database::parse_with`]), each problem with its line.
    Invalid(Vec<Problem>),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Io(e) => e.fmt(f),
            LoadError::Parse {
                line: Some(line),
                message,
            } => write!(f, "line {line}: not a valid DBC: {message}"),
            LoadError::Parse {
                line: None,
                message,
            } => write!(f, "not a valid DBC: {message}"),
            LoadError::Invalid(problems) => {
                let list: Vec<String> = problems.iter().map(Problem::to_string).collect();
                write!(f, "invalid DBC: {}", list.join("; "))
            }
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
    warnings: Vec<Problem>,
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

/// The pseudo-message in which Vector's tools keep signals of no message (id
/// 0xC0000000); cantools skips it, and so does this crate.
const INDEPENDENT_SIGNALS: &str = "VECTOR__INDEPENDENT_SIG_MSG";

/// The largest DBC file [`Database::from_file`] reads (real ones are a few MB at most).
pub const MAX_FILE_SIZE: u64 = 16 << 20;

/// Reads a regular file of at most [`MAX_FILE_SIZE`] bytes (a FIFO or a device is refused
/// before it is opened: `bulkhead_model::input`).
fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use bulkhead_model::input::{read_file, Fifo};
    Ok(read_file(path, MAX_FILE_SIZE, Fifo::Refuse)?)
}

impl Database {
    /// Reads and parses a DBC file, not strict ([`Database::parse`]). Non-UTF-8 bytes
    /// (cp1252 comments) are replaced.
    pub fn from_file(path: &Path) -> Result<Database, LoadError> {
        Database::from_file_with(path, false)
    }

    /// Reads and parses a DBC file (a regular file of at most [`MAX_FILE_SIZE`] bytes);
    /// `strict` as in [`Database::parse_with`].
    pub fn from_file_with(path: &Path, strict: bool) -> Result<Database, LoadError> {
        let bytes = read_bounded(path).map_err(LoadError::Io)?;
        Database::parse_with(&String::from_utf8_lossy(&bytes), strict)
    }

    /// Parses DBC text, not strict: what cantools rejects even with `strict=False` is
    /// an error, what only its strict mode rejects is a warning ([`Database::warnings`]).
    pub fn parse(text: &str) -> Result<Database, LoadError> {
        Database::parse_with(text, false)
    }

    /// Parses DBC text; with `strict` the warnings are errors too. Beyond its syntax, the
    /// messages and signals are checked, each problem with the DBC line it is about
    /// ([`crate::dbc_check`] finds the lines), split as cantools splits them
    /// (`cantools.database.load_file(path, strict=...)`, cantools 45.1):
    ///
    /// * **errors**, whatever the strictness: a signal of 0 bits (cantools: "length 0 is
    ///   not greater than 0"), an extended id of more than 29 bits or a standard id of
    ///   more than 11 (cantools rejects both), and, stricter than cantools because the
    ///   decoder could only produce wrong values, a signal of more than 64 bits and an
    ///   IEEE float (`SIG_VALTYPE_ 1`) that is not 32 bits or a double (`2`) that is not
    ///   64 (cantools reads a 16-bit "float" as a half float);
    /// * **warnings**, errors when strict: a signal that does not fit in its message
    ///   (never decoded), signals that share bits while both can be present (cantools:
    ///   "are overlapping"), and two messages with one id (the later one decodes it, as
    ///   in cantools, which logs "Overwriting message") or one name.
    ///
    /// Real DBCs such as opendbc's Toyota files have overlapping signals and load with
    /// warnings, as they load in cantools only with `strict=False`.
    pub fn parse_with(text: &str, strict: bool) -> Result<Database, LoadError> {
        let dbc = Dbc::try_from(text).map_err(parse_error)?;
        let scanned = dbc_check::scan(text);
        let sources = dbc_check::locate(dbc.messages.iter().map(|m| m.name.as_str()), &scanned);
        let lookups = Lookups::new(&dbc);
        let mut errors = Vec::new();
        let mut kept = Vec::new();
        let mut messages = Vec::new();
        for (m, source) in dbc.messages.iter().zip(sources) {
            if m.name == INDEPENDENT_SIGNALS {
                continue;
            }
            messages.push(message_def(&lookups, m, source.as_ref(), &mut errors));
            kept.push(source);
        }
        let mut warnings: Vec<Problem> = messages
            .iter()
            .zip(&kept)
            .flat_map(|(m, source)| layout_warnings(m, source.as_ref()))
            .collect();
        warnings.extend(duplicate_warnings(&messages, &kept));
        if strict {
            errors.append(&mut warnings);
        }
        if !errors.is_empty() {
            errors.sort_by_key(|p| p.line);
            return Err(LoadError::Invalid(errors));
        }
        warnings.sort_by_key(|p| p.line);
        Ok(Database::index(messages, warnings))
    }

    /// What the DBC's strict check would reject but a lenient load accepts, by line.
    pub fn warnings(&self) -> &[Problem] {
        &self.warnings
    }

    fn index(messages: Vec<MessageDef>, warnings: Vec<Problem>) -> Database {
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
            warnings,
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

#[cfg(test)]
impl MessageDef {
    /// Whether signals `i` and `j` can be present in one frame: not when both hang, at
    /// some level, on the same switch with value ranges that do not meet. The pairwise
    /// reference the overlap check (`dbc_overlap`) is tested against.
    fn can_coexist(&self, i: usize, j: usize) -> bool {
        let (a, b) = (self.switch_chain(i), self.switch_chain(j));
        !a.iter().any(|(switch, ra)| {
            b.iter().any(|(other, rb)| {
                switch == other
                    && !ra
                        .iter()
                        .any(|&(lo, hi)| rb.iter().any(|&(l, h)| lo <= h && l <= hi))
            })
        })
    }

    /// The switches signal `i` depends on, nearest first, with the values each must have.
    fn switch_chain(&self, mut i: usize) -> Vec<(usize, &[(u64, u64)])> {
        let mut chain = Vec::new();
        while let Presence::When { switch, ranges } = &self.signals[i].presence {
            if chain.len() >= self.signals.len() {
                break;
            }
            chain.push((*switch, ranges.as_slice()));
            i = *switch;
        }
        chain
    }
}

/// A syntax error: with its line and the line's start (escaped: a binary file is not
/// echoed as raw bytes) when the grammar says where.
fn parse_error(e: can_dbc::DbcError) -> LoadError {
    use pest::error::LineColLocation;
    match e {
        can_dbc::DbcError::Pest(e) => {
            let (line, column) = match e.line_col {
                LineColLocation::Pos(at) | LineColLocation::Span(at, _) => at,
            };
            LoadError::Parse {
                line: Some(line),
                message: format!(
                    "{} at column {column} of \"{}\"",
                    e.variant.message(),
                    excerpt(e.line(), 80)
                ),
            }
        }
        e => LoadError::Parse {
            line: None,
            message: excerpt(&e.to_string(), 200),
        },
    }
}

/// The message's id, or an error when it does not fit its kind (cantools: "Extended
/// frame id ... is more than 29 bits", "Standard frame id ... is more than 11 bits").
/// The parser masks extended ids to 29 bits and truncates standard ones to 16, so the
/// id as written (`raw`) is checked.
fn checked_id(m: &can_dbc::Message, raw: Option<u64>) -> Result<CanId, IdTooLong> {
    const EXTENDED_FLAG: u64 = 1 << 31;
    let Some(raw) = raw else {
        return Ok(can_id(m.id));
    };
    let (value, extended) = (raw & !EXTENDED_FLAG, raw & EXTENDED_FLAG != 0);
    let id = if extended {
        u32::try_from(value).ok().and_then(CanId::extended)
    } else {
        u32::try_from(value).ok().and_then(CanId::standard)
    };
    id.ok_or_else(|| IdTooLong {
        message: m.name.clone(),
        extended,
        value,
    })
}

/// A message id written with more bits than its kind has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "message {message}: {} id {value:#x} has more than {} bits (ids with bit 31 set are \
     extended; cantools rejects this too)",
    if *.extended { "extended" } else { "standard" },
    if *.extended { 29 } else { 11 }
)]
struct IdTooLong {
    message: String,
    extended: bool,
    value: u64,
}

/// What the DBC says of its signals beyond their `SG_` lines, looked up by message id and
/// signal name (the first entry wins, as can-dbc's own lookups find it).
struct Lookups<'a> {
    value_types: HashMap<(MessageId, &'a str), SignalExtendedValueType>,
    extended: HashMap<(MessageId, &'a str), &'a can_dbc::ExtendedMultiplex>,
    /// Each message's `GenMsgCycleTime` attribute (`BA_`), and the attribute's default
    /// (`BA_DEF_DEF_`).
    cycle_times: HashMap<MessageId, &'a AttributeValue>,
    default_cycle_time: Option<&'a AttributeValue>,
}

impl<'a> Lookups<'a> {
    fn new(dbc: &'a Dbc) -> Lookups<'a> {
        let mut value_types = HashMap::new();
        for x in &dbc.signal_extended_value_type_list {
            let key = (x.message_id, x.signal_name.as_str());
            value_types
                .entry(key)
                .or_insert(x.signal_extended_value_type);
        }
        let mut extended = HashMap::new();
        for x in &dbc.extended_multiplex {
            extended
                .entry((x.message_id, x.signal_name.as_str()))
                .or_insert(x);
        }
        let mut cycle_times = HashMap::new();
        for a in &dbc.attribute_values_message {
            if a.name == CYCLE_TIME {
                cycle_times.entry(a.message_id).or_insert(&a.value);
            }
        }
        let defaults = dbc.attribute_defaults.iter();
        Lookups {
            value_types,
            extended,
            cycle_times,
            default_cycle_time: defaults
                .filter(|a| a.name == CYCLE_TIME)
                .map(|a| &a.value)
                .next(),
        }
    }

    /// How often message `id` is sent, in ms: its `GenMsgCycleTime`, else the
    /// attribute's default, if a positive number.
    fn cycle_ms(&self, id: &MessageId) -> Option<f64> {
        let value = self
            .cycle_times
            .get(id)
            .or(self.default_cycle_time.as_ref())?;
        let ms = match value {
            AttributeValue::Uint(v) => *v as f64,
            AttributeValue::Int(v) => *v as f64,
            AttributeValue::Double(v) => *v,
            AttributeValue::String(_) => return None,
        };
        (ms > 0.0 && ms.is_finite()).then_some(ms)
    }
}

/// The decoding table of message `m`; its content errors go to `errors`, each with the
/// line of its `BO_` or `SG_` (from `source`).
fn message_def(
    lookups: &Lookups,
    m: &can_dbc::Message,
    source: Option<&MessageSource>,
    errors: &mut Vec<Problem>,
) -> MessageDef {
    let id = checked_id(m, source.and_then(|s| s.raw_id)).unwrap_or_else(|e| {
        errors.push(Problem {
            line: source.map(|s| s.line),
            message: e.to_string(),
        });
        can_id(m.id)
    });
    let switches = Switches::of(m);
    let lines = signal_lines(m.signals.iter().map(|s| s.name.as_str()), source);
    let signals = m
        .signals
        .iter()
        .zip(&lines)
        .map(|(s, &line)| {
            let encoding = encoding(lookups, m, s);
            if let Some(message) = signal_error(s, encoding) {
                errors.push(Problem {
                    line,
                    message: format!("message {}, signal {}: {message}", m.name, s.name),
                });
            }
            SignalDef {
                name: s.name.clone(),
                start_bit: u32::try_from(s.start_bit).unwrap_or(u32::MAX),
                size: (s.size as u32).clamp(1, 64),
                little_endian: s.byte_order == ByteOrder::LittleEndian,
                encoding,
                factor: s.factor,
                offset: s.offset,
                unit: s.unit.clone(),
                presence: presence(lookups, &switches, m, s),
            }
        })
        .collect();
    let def = MessageDef {
        id,
        name: m.name.clone(),
        size: m.size as usize,
        signals,
        cycle_ms: lookups.cycle_ms(&m.id),
    };
    for (i, path) in dbc_overlap::paths(&def).iter().enumerate() {
        if path.is_none() {
            errors.push(Problem {
                line: lines[i],
                message: format!(
                    "message {}, signal {}: multiplexed more than {} levels deep, or its \
                     switches form a cycle",
                    def.name,
                    def.signals[i].name,
                    dbc_overlap::MAX_DEPTH
                ),
            });
        }
    }
    def
}

/// The DBC line of each signal of a message, by the `nth` signal of its name.
fn signal_lines<'a>(
    names: impl Iterator<Item = &'a str>,
    source: Option<&MessageSource>,
) -> Vec<Option<usize>> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    names
        .map(|name| {
            let nth = seen.entry(name).or_default();
            *nth += 1;
            source.and_then(|src| src.signal_line(name, *nth - 1))
        })
        .collect()
}

/// The attribute that gives a message's period in Vector's DBC convention.
const CYCLE_TIME: &str = "GenMsgCycleTime";

/// What is wrong with a signal's size for its encoding, if anything.
fn signal_error(s: &can_dbc::Signal, encoding: Encoding) -> Option<String> {
    let need = match encoding {
        Encoding::Float32 => Some((32, "SIG_VALTYPE_ 1 (IEEE float)")),
        Encoding::Float64 => Some((64, "SIG_VALTYPE_ 2 (IEEE double)")),
        _ => None,
    };
    match (s.size, need) {
        (0, _) => Some("has 0 bits: a signal has 1 to 64 (cantools rejects this too)".into()),
        (65.., _) => Some(format!(
            "has {} bits: a signal has 1 to 64 (longer ones cannot be decoded)",
            s.size
        )),
        (size, Some((bits, what))) if size != bits => Some(format!(
            "{what} needs {bits} bits, the signal has {size} (the DBC format has no other \
             float sizes; cantools would read 16 bits as a half float)"
        )),
        _ => None,
    }
}

/// The payload bits (byte * 8 + bit) a signal occupies, in the order
/// [`SignalDef::raw_bits`] reads them.
fn bit_positions(s: &SignalDef) -> Vec<u32> {
    let mut out = Vec::with_capacity(s.size as usize);
    let mut pos = s.start_bit;
    for i in 0..s.size {
        if s.little_endian {
            out.push(s.start_bit.saturating_add(i));
        } else {
            out.push(pos);
            pos = if pos % 8 == 0 {
                pos.saturating_add(15)
            } else {
                pos - 1
            };
        }
    }
    out
}

/// Warnings about one message's layout: signals beyond its length, and signals that
/// share bits and can be present in one frame (each signal at most once, with the first
/// earlier one found: [`dbc_overlap`]).
fn layout_warnings(m: &MessageDef, source: Option<&MessageSource>) -> Vec<Problem> {
    let mut out = Vec::new();
    let lines = signal_lines(m.signals.iter().map(|s| s.name.as_str()), source);
    let positions: Vec<Vec<u32>> = m.signals.iter().map(bit_positions).collect();
    for (i, s) in m.signals.iter().enumerate() {
        let beyond = positions[i].iter().any(|&p| p as usize >= m.size * 8);
        if beyond {
            out.push(Problem {
                line: lines[i],
                message: format!(
                    "message {}, signal {}: its {} bits from bit {} do not fit in the message's \
                     {} bytes (never decoded; cantools' strict mode rejects this too)",
                    m.name, s.name, s.size, s.start_bit, m.size
                ),
            });
        }
    }
    let paths = dbc_overlap::paths(m);
    for (j, i) in dbc_overlap::overlaps(m, &paths, &positions) {
        out.push(Problem {
            line: lines[j],
            message: format!(
                "message {}: signals {} and {} share bits (cantools' strict mode rejects this \
                 too)",
                m.name, m.signals[i].name, m.signals[j].name
            ),
        });
    }
    out
}

/// Warnings about messages that share an id or a name. `sources[i]` is message i's.
fn duplicate_warnings(messages: &[MessageDef], sources: &[Option<MessageSource>]) -> Vec<Problem> {
    let line = |i: usize| sources[i].as_ref().map(|s| s.line);
    let at = |i: usize| line(i).map_or(String::new(), |l| format!(" (line {l})"));
    let mut out = Vec::new();
    let mut by_id = HashMap::new();
    let mut by_name = HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        if let Some(first) = by_id.insert(m.id, i) {
            out.push(Problem {
                line: line(i),
                message: format!(
                    "message {} has the id {} of message {}{}: frames with this id decode as {} \
                     (as in cantools)",
                    m.name,
                    m.id,
                    messages[first].name,
                    at(first),
                    m.name
                ),
            });
        }
        if let Some(first) = by_name.insert(m.name.as_str(), i) {
            out.push(Problem {
                line: line(i),
                message: format!(
                    "a second message named {}; the first{} is found by name no more",
                    m.name,
                    at(first)
                ),
            });
        }
    }
    out
}

fn encoding(lookups: &Lookups, m: &can_dbc::Message, s: &can_dbc::Signal) -> Encoding {
    match lookups.value_types.get(&(m.id, s.name.as_str())) {
        Some(SignalExtendedValueType::IEEEfloat32Bit) => Encoding::Float32,
        Some(SignalExtendedValueType::IEEEdouble64bit) => Encoding::Float64,
        _ if s.value_type == ValueType::Signed => Encoding::Signed,
        _ => Encoding::Unsigned,
    }
}

/// A message's switches: the index of each signal name (the first of a name), and its
/// multiplexor (`M`) for `mN` signals.
struct Switches<'a> {
    index: HashMap<&'a str, usize>,
    main: Option<usize>,
}

impl<'a> Switches<'a> {
    fn of(m: &'a can_dbc::Message) -> Switches<'a> {
        let mut index = HashMap::new();
        for (i, s) in m.signals.iter().enumerate() {
            index.entry(s.name.as_str()).or_insert(i);
        }
        let main = m
            .signals
            .iter()
            .position(|s| s.multiplexer_indicator == MultiplexIndicator::Multiplexor);
        Switches { index, main }
    }
}

/// When signal `s` of `m` is present: extended multiplexing (`SG_MUL_VAL_`) if given,
/// else the message's multiplexor for `mN` signals.
fn presence(
    lookups: &Lookups,
    switches: &Switches,
    m: &can_dbc::Message,
    s: &can_dbc::Signal,
) -> Presence {
    let extended = lookups.extended.get(&(m.id, s.name.as_str()));
    match (extended, s.multiplexer_indicator) {
        (Some(x), _) => match switches.index.get(x.multiplexor_signal_name.as_str()) {
            Some(&switch) => Presence::When {
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
        ) => match switches.main {
            Some(switch) => Presence::When {
                switch,
                ranges: vec![(v, v)],
            },
            None => Presence::Always,
        },
        _ => Presence::Always,
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

    /// A message of `n` random signals: bits anywhere in 8 bytes, each always present
    /// or hanging on an earlier signal (so nested, up to deeper than the limit) with one
    /// or two value ranges.
    fn random_message(rng: &mut rand_xorshift::XorShiftRng, n: usize) -> MessageDef {
        use rand::RngExt;
        let signals = (0..n)
            .map(|i| {
                let presence = match i > 0 && rng.random_range(0..3) > 0 {
                    true => Presence::When {
                        switch: rng.random_range(0..i),
                        ranges: (0..rng.random_range(1..3))
                            .map(|_| {
                                let lo = rng.random_range(0..6);
                                (lo, lo + rng.random_range(0..3))
                            })
                            .collect(),
                    },
                    false => Presence::Always,
                };
                SignalDef {
                    name: format!("S{i}"),
                    start_bit: rng.random_range(0..64),
                    size: rng.random_range(1..10),
                    little_endian: rng.random_range(0..2) == 0,
                    encoding: Encoding::Unsigned,
                    factor: 1.0,
                    offset: 0.0,
                    unit: String::new(),
                    presence,
                }
            })
            .collect();
        MessageDef {
            id: CanId::Standard(1),
            name: "M".into(),
            size: 8,
            signals,
            cycle_ms: None,
        }
    }

    /// The overlap check reports exactly the signals that share a bit with an earlier
    /// signal they can be present with, as comparing every pair finds them.
    #[test]
    fn the_overlap_check_finds_what_comparing_every_pair_finds() {
        use rand::SeedableRng;
        let mut rng = rand_xorshift::XorShiftRng::seed_from_u64(35);
        for _ in 0..2000 {
            let n = rand::RngExt::random_range(&mut rng, 1..40);
            let m = random_message(&mut rng, n);
            let paths = dbc_overlap::paths(&m);
            let bits: Vec<Vec<u32>> = m.signals.iter().map(bit_positions).collect();
            let found = dbc_overlap::overlaps(&m, &paths, &bits);
            let expected: Vec<usize> = (0..n)
                .filter(|&j| paths[j].is_some())
                .filter(|&j| {
                    (0..j).any(|i| {
                        paths[i].is_some()
                            && bits[i].iter().any(|b| bits[j].contains(b))
                            && m.can_coexist(i, j)
                    })
                })
                .collect();
            let reported: Vec<usize> = found.iter().map(|&(j, _)| j).collect();
            assert_eq!(reported, expected, "{m:#?}");
            for &(j, i) in &found {
                assert!(i < j && bits[i].iter().any(|b| bits[j].contains(b)));
                assert!(m.can_coexist(i, j), "{i} and {j} in {m:#?}");
            }
        }
    }

    /// 20,000 signals in one message: all overlapping, or all multiplexed on one switch
    /// at the same bits. The check compared every pair (quadratic time: 200,000 took
    /// over 40 s) and warned once per overlapping pair (3 million warnings here).
    #[test]
    fn a_message_of_many_signals_is_checked_in_linear_time() {
        let header = "BO_ 100 BIG: 64 X\n SG_ SW M : 0|32@1+ (1,0) [0|0] \"\" X\n";
        let n = 20_000;
        let mut plain = String::from(header);
        let mut muxed = String::from(header);
        for i in 0..n {
            plain.push_str(&format!(
                " SG_ P{i} : {}|1@1+ (1,0) [0|1] \"\" X\n",
                32 + i % 64
            ));
            muxed.push_str(&format!(" SG_ X{i} m{i} : 32|8@1+ (1,0) [0|255] \"\" X\n"));
        }
        let warnings = Database::parse(&plain).unwrap().warnings().len();
        assert_eq!(
            warnings,
            n - 64,
            "each signal once, after the first 64 bits are taken"
        );
        assert!(Database::parse(&muxed).unwrap().warnings().is_empty());
    }

    fn problems(text: &str, strict: bool) -> Vec<(Option<usize>, String)> {
        match Database::parse_with(text, strict) {
            Ok(db) => panic!("accepted; warnings {:?}", db.warnings()),
            Err(LoadError::Invalid(p)) => p.into_iter().map(|p| (p.line, p.message)).collect(),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn content_errors_name_their_line_whatever_the_strictness() {
        let text = "BO_ 100 M: 8 X\n SG_ Z : 0|0@1+ (1,0) [0|0] \"\" X\n\
                    SG_ W : 0|65@1+ (1,0) [0|0] \"\" X\n SG_ F : 0|16@1- (1,0) [0|0] \"\" X\n\
                    BO_ 3758096384 HIGH: 1 X\n\nSIG_VALTYPE_ 100 F : 1;\n";
        let got = problems(text, false);
        let lines: Vec<_> = got.iter().map(|p| p.0).collect();
        assert_eq!(lines, [Some(2), Some(3), Some(4), Some(5)], "{got:?}");
        assert!(got[0].1.contains("signal Z: has 0 bits"), "{got:?}");
        assert!(got[1].1.contains("signal W: has 65 bits"), "{got:?}");
        assert!(
            got[2].1.contains("needs 32 bits, the signal has 16"),
            "{got:?}"
        );
        assert!(
            got[3].1.contains("0x60000000 has more than 29 bits"),
            "{got:?}"
        );
    }

    /// Switches in a cycle (A on B, B on A) would make every walk up a signal's chain
    /// endless, as 17 nested levels make it long: both are errors at the signal's line.
    #[test]
    fn switches_in_a_cycle_or_nested_too_deep_are_errors() {
        let cycle = "BO_ 100 M: 8 X\n SG_ A : 0|8@1+ (1,0) [0|0] \"\" X\n\
                     SG_ B : 8|8@1+ (1,0) [0|0] \"\" X\n\n\
                     SG_MUL_VAL_ 100 A B 1-1;\nSG_MUL_VAL_ 100 B A 1-1;\n";
        let got = problems(cycle, false);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, Some(2));
        assert!(
            got[0].1.contains(
                "signal A: multiplexed more than 16 levels deep, or its switches form a cycle"
            ),
            "{got:?}"
        );
        let mut deep = String::from("BO_ 100 M: 8 X\n SG_ S0 : 0|1@1+ (1,0) [0|0] \"\" X\n");
        let mut muls = String::new();
        for i in 1..=17 {
            deep.push_str(&format!(" SG_ S{i} : {i}|1@1+ (1,0) [0|0] \"\" X\n"));
            muls.push_str(&format!("SG_MUL_VAL_ 100 S{i} S{} 1-1;\n", i - 1));
        }
        let got = problems(&format!("{deep}\n{muls}"), false);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, Some(19), "S17's line: {got:?}");
    }

    #[test]
    fn strict_only_problems_are_warnings_unless_strict() {
        let text = "BO_ 100 A: 2 X\n SG_ S : 0|8@1+ (1,0) [0|0] \"\" X\n\
                    SG_ T : 4|16@1+ (1,0) [0|0] \"\" X\nBO_ 100 B: 1 X\n";
        let db = Database::parse(text).unwrap();
        let warnings: Vec<_> = db.warnings().iter().map(|p| p.line).collect();
        // T does not fit, S and T share bits, B takes A's id (and decodes it, as in cantools).
        assert_eq!(warnings, [Some(3), Some(3), Some(4)], "{:?}", db.warnings());
        assert_eq!(db.message(CanId::Standard(100)).unwrap().name, "B");
        assert_eq!(problems(text, true).len(), 3);
    }

    #[test]
    fn multiplexed_signals_may_share_bits_and_vector_pseudo_messages_are_skipped() {
        let text = "BO_ 3221225472 VECTOR__INDEPENDENT_SIG_MSG: 0 Vector__XXX\n\
                    SG_ LOOSE : 0|8@1+ (1,0) [0|0] \"\" X\n\
                    BO_ 100 M: 2 X\n SG_ MUX M : 0|8@1+ (1,0) [0|0] \"\" X\n\
                    SG_ A m1 : 8|8@1+ (1,0) [0|0] \"\" X\n SG_ B m2 : 8|8@1+ (1,0) [0|0] \"\" X\n";
        let db = Database::parse_with(text, true).unwrap();
        assert_eq!(db.messages().len(), 1);
        assert!(db.message(CanId::Standard(0)).is_none());
        let shared = text.replace("B m2", "B m1");
        assert_eq!(problems(&shared, true).len(), 1);
    }

    /// A message's `GenMsgCycleTime`, else the attribute's default; 0 (not periodic) is
    /// none, as is a DBC without the attribute.
    #[test]
    fn cycle_times_come_from_gen_msg_cycle_time() {
        let attrs = "BA_DEF_ BO_ \"GenMsgCycleTime\" INT 0 65535;\n\
                     BA_DEF_DEF_ \"GenMsgCycleTime\" 100;\n\
                     BA_ \"GenMsgCycleTime\" BO_ 100 10;\n\
                     BA_ \"GenMsgCycleTime\" BO_ 2147484672 0;\n";
        let with = Database::parse(&format!("{DBC}\n{attrs}")).unwrap();
        let cycle = |id| with.message(id).unwrap().cycle_ms;
        assert_eq!(cycle(CanId::Standard(100)), Some(10.0));
        assert_eq!(cycle(CanId::Standard(101)), Some(100.0));
        assert_eq!(cycle(CanId::Extended(0x400)), None);
        assert_eq!(db().message(CanId::Standard(100)).unwrap().cycle_ms, None);
    }

    #[test]
    fn bad_dbc_is_an_error() {
        assert!(matches!(
            Database::parse("BO_ x"),
            Err(LoadError::Parse { line: Some(1), .. })
        ));
    }
}
