//! Checks of a DBC's messages and signals beyond its syntax, each problem with the DBC
//! line it is about, split as cantools splits them (`cantools.database.load_file(path,
//! strict=...)`, cantools 45.1):
//!
//! * **errors**, whatever the strictness: a signal of 0 bits (cantools: "length 0 is
//!   not greater than 0"), an extended id of more than 29 bits or a standard id of more
//!   than 11 (cantools rejects both), and, stricter than cantools because the decoder
//!   could only produce wrong values, a signal of more than 64 bits and an IEEE float
//!   (`SIG_VALTYPE_ 1`) that is not 32 bits or a double (`2`) that is not 64 (cantools
//!   reads a 16-bit "float" as a half float);
//! * **warnings**, errors when strict: a signal that does not fit in its message (never
//!   decoded), signals that share bits while both can be present (cantools: "are
//!   overlapping"), and two messages with one id (the later one decodes it, as in
//!   cantools, which logs "Overwriting message") or one name.
//!
//! Real DBCs such as opendbc's Toyota files have overlapping signals and load with
//! warnings, as they load in cantools only with `strict=False`.

use crate::dbc::{MessageDef, SignalDef};
use std::collections::HashMap;
use std::fmt;

/// One problem of a DBC: the line it is about (1-based, when known) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for Problem {
    /// `line N: message` (or the message alone when the line is unknown).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Where a message and its signals are defined in the DBC text.
#[derive(Debug, Clone, Default)]
pub(crate) struct MessageSource {
    pub line: usize,
    name: String,
    /// The id as written (with the extended flag, bit 31), before any masking.
    pub raw_id: Option<u64>,
    signals: Vec<(String, usize)>,
}

impl MessageSource {
    /// The line of signal `name`, the `nth` of that name in the message.
    pub fn signal_line(&self, name: &str, nth: usize) -> Option<usize> {
        self.signals
            .iter()
            .filter(|(n, _)| n == name)
            .nth(nth)
            .map(|&(_, line)| line)
    }
}

/// The `BO_` and `SG_` lines of a DBC text, in order.
pub(crate) fn scan(text: &str) -> Vec<MessageSource> {
    let mut messages: Vec<MessageSource> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut tokens = line.split_ascii_whitespace();
        match tokens.next() {
            Some("BO_") => {
                let raw_id = tokens.next().and_then(|t| t.parse().ok());
                let name = tokens.next().unwrap_or("").trim_end_matches(':');
                messages.push(MessageSource {
                    line: i + 1,
                    name: name.to_string(),
                    raw_id,
                    signals: Vec::new(),
                });
            }
            Some("SG_") => {
                if let (Some(m), Some(name)) = (messages.last_mut(), tokens.next()) {
                    m.signals.push((name.to_string(), i + 1));
                }
            }
            _ => {}
        }
    }
    messages
}

/// For each name in `names` (the parser's messages, in file order), its source: the
/// next scanned `BO_` line of that name. A `BO_` inside a multi-line comment only
/// costs the line numbers of the messages it is mistaken for.
pub(crate) fn locate<'a>(
    names: impl Iterator<Item = &'a str>,
    scanned: &[MessageSource],
) -> Vec<Option<MessageSource>> {
    let mut cursor = 0;
    names
        .map(|name| {
            let found = scanned[cursor..].iter().position(|m| m.name == name)?;
            cursor += found + 1;
            Some(scanned[cursor - 1].clone())
        })
        .collect()
}

/// Largest payload of any CAN frame (CAN FD), in bits: signal bits beyond it are
/// beyond every message.
const MAX_BITS: usize = 64 * 8;

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

/// The signals' bits as bitsets of [`MAX_BITS`] (bits beyond are dropped: such a signal
/// is reported as not fitting anyway).
fn bitset(positions: &[u32]) -> [u64; MAX_BITS / 64] {
    let mut set = [0u64; MAX_BITS / 64];
    for &p in positions.iter().filter(|&&p| (p as usize) < MAX_BITS) {
        set[p as usize / 64] |= 1 << (p % 64);
    }
    set
}

/// Warnings about one message's layout: signals beyond its length, and signals that
/// share bits and can be present in one frame.
pub(crate) fn layout_warnings(m: &MessageDef, source: Option<&MessageSource>) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut lines = Vec::new();
    for s in &m.signals {
        let nth = seen.entry(&s.name).or_default();
        lines.push(source.and_then(|src| src.signal_line(&s.name, *nth)));
        *nth += 1;
    }
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
    let sets: Vec<_> = positions.iter().map(|p| bitset(p)).collect();
    for i in 0..m.signals.len() {
        for j in i + 1..m.signals.len() {
            let shared = sets[i].iter().zip(&sets[j]).any(|(a, b)| a & b != 0);
            if shared && m.can_coexist(i, j) {
                out.push(Problem {
                    line: lines[j],
                    message: format!(
                        "message {}: signals {} and {} share bits (cantools' strict mode \
                         rejects this too)",
                        m.name, m.signals[i].name, m.signals[j].name
                    ),
                });
            }
        }
    }
    out
}

/// Warnings about messages that share an id or a name. `sources[i]` is message i's.
pub(crate) fn duplicate_warnings(
    messages: &[MessageDef],
    sources: &[Option<MessageSource>],
) -> Vec<Problem> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_finds_messages_signals_and_raw_ids() {
        let text = "VERSION \"\"\nBO_ 3221225472 VECTOR__INDEPENDENT_SIG_MSG: 0 Vector__XXX\n\
                    \nBO_ 100 M: 8 X\n SG_ A : 0|8@1+ (1,0) [0|0] \"\" X\n\tSG_ B M : 8|8@1+ (1,0) [0|0] \"\" X\n\
                    BO_TX_BU_ 100 : X;\n";
        let scanned = scan(text);
        assert_eq!(scanned.len(), 2);
        assert_eq!(scanned[0].raw_id, Some(3_221_225_472));
        assert_eq!(scanned[1].line, 4);
        assert_eq!(scanned[1].signal_line("A", 0), Some(5));
        assert_eq!(scanned[1].signal_line("B", 0), Some(6));
        let located = locate(["M", "N"].into_iter(), &scanned);
        assert_eq!(located[0].as_ref().map(|s| s.line), Some(4));
        assert!(located[1].is_none());
    }
}
