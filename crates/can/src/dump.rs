//! Printing what a bus carries, as can-utils' `candump` does: its id filters
//! (`ID:MASK`, `ID~MASK`), its default table and its `-L` log format.

use crate::bus::{CanBus, Received};
use crate::candump::Record;
use crate::frame::{Frame, Kind, CAN_EFF_FLAG, CAN_ERR_FLAG};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::{Duration, Instant};

/// One candump filter: `ID:MASK` matches a frame whose SocketCAN id word (id plus the
/// extended and remote flags) ANDed with the mask equals `ID & MASK`; `ID~MASK` matches
/// the others. An `ID` of 8 hex digits sets the extended flag, as in candump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filter {
    pub id: u32,
    pub mask: u32,
    pub inverted: bool,
}

/// A `--filter` text that is not `ID:MASK` or `ID~MASK`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("`{0}`: want ID:MASK or ID~MASK (hex), e.g. 123:7FF")]
    Syntax(String),
    #[error("`{text}`: `{part}` is not a hex number")]
    NotHex {
        text: String,
        part: String,
        source: std::num::ParseIntError,
    },
}

impl Filter {
    /// Parses `ID:MASK` or `ID~MASK` (hexadecimal).
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        let (id_text, mask_text, inverted) = match (text.split_once(':'), text.split_once('~')) {
            (Some((i, m)), None) => (i, m, false),
            (None, Some((i, m))) => (i, m, true),
            _ => return Err(FilterError::Syntax(text.into())),
        };
        let hex = |t: &str| {
            u32::from_str_radix(t, 16).map_err(|source| FilterError::NotHex {
                text: text.into(),
                part: t.into(),
                source,
            })
        };
        let mut id = hex(id_text)?;
        if id_text.len() == 8 {
            id |= CAN_EFF_FLAG;
        }
        Ok(Filter {
            id,
            mask: hex(mask_text)? & !CAN_ERR_FLAG,
            inverted,
        })
    }

    pub fn matches(&self, frame: &Frame) -> bool {
        let same = frame.can_id_word() & self.mask == self.id & self.mask;
        same != self.inverted
    }
}

/// A frame passes when any filter matches (all of them with `join`, candump's `j`);
/// with no filter every frame passes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    pub filters: Vec<Filter>,
    pub join: bool,
}

impl Filters {
    pub fn pass(&self, frame: &Frame) -> bool {
        if self.filters.is_empty() {
            return true;
        }
        let mut each = self.filters.iter().map(|f| f.matches(frame));
        if self.join {
            each.all(|m| m)
        } else {
            each.any(|m| m)
        }
    }
}

/// Timestamps of the table format (candump `-t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timestamps {
    /// `a`: absolute, seconds of the Unix epoch.
    Absolute,
    /// `d`: since the previous frame.
    Delta,
    /// `z`: since the first frame.
    Zero,
}

/// How frames are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// candump's default table: ` (ts)  can0  123   [2]  11 22`.
    Table(Option<Timestamps>),
    /// candump `-L`, the log format canplayer and `bulkhead can replay` read.
    Log,
}

/// candump's long frame text (can-utils `snprintf_long_canframe`): the id (3 or 8
/// digits), the length in brackets, the bytes spaced: `123   [2]  11 22`,
/// `12345678   [1]  FF`, `123  [12]  00 ...` (CAN FD), `123   [2]  remote request`.
pub fn long_frame(frame: &Frame) -> String {
    let mut out = frame.id().to_string();
    let _ = match frame.kind() {
        Kind::Classic => write!(out, "   [{}] ", frame.len()),
        Kind::Fd { .. } => write!(out, "  [{:02}] ", frame.len()),
    };
    if frame.is_remote() {
        out.push_str(" remote request");
    }
    for byte in frame.data() {
        let _ = write!(out, " {byte:02X}");
    }
    out
}

/// Formats received frames one line at a time.
pub struct Printer {
    format: Format,
    iface: String,
    /// Interface names are right-aligned to this width in the table (candump aligns
    /// them to the longest name it reads).
    width: usize,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
}

impl Printer {
    pub fn new(format: Format, iface: &str) -> Printer {
        Printer {
            format,
            iface: iface.to_string(),
            width: iface.len(),
            first_ns: None,
            last_ns: None,
        }
    }

    /// The line of one received frame, without newline.
    pub fn line(&mut self, received: &Received) -> String {
        let record = Record {
            t_ns: received.t_ns,
            iface: self.iface.clone(),
            frame: received.frame,
        };
        let timestamps = match self.format {
            Format::Log => return record.to_string(),
            Format::Table(t) => t,
        };
        let stamp = timestamps.map(|mode| {
            let reference = match mode {
                Timestamps::Absolute => 0,
                Timestamps::Delta => self.last_ns.unwrap_or(received.t_ns),
                Timestamps::Zero => *self.first_ns.get_or_insert(received.t_ns),
            };
            let ns = received.t_ns.saturating_sub(reference);
            let (secs, micros) = (ns / 1_000_000_000, ns % 1_000_000_000 / 1_000);
            format!("({secs:010}.{micros:06}) ")
        });
        self.last_ns = Some(received.t_ns);
        format!(
            " {} {:>width$}  {}",
            stamp.unwrap_or_default(),
            self.iface,
            long_frame(&received.frame),
            width = self.width
        )
    }
}

/// What ends a dump.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Stop after this many printed frames.
    pub count: Option<u64>,
    /// Stop after this long.
    pub timeout: Option<Duration>,
}

/// Prints the frames received from `bus` that pass `filters`, each line flushed, until
/// a limit is reached. Returns the number of frames printed.
pub fn dump(
    bus: &mut dyn CanBus,
    filters: &Filters,
    printer: &mut Printer,
    limits: Limits,
    out: &mut impl Write,
) -> io::Result<u64> {
    let deadline = limits.timeout.map(|t| Instant::now() + t);
    let mut written = 0;
    while limits.count.is_none_or(|n| written < n) {
        let wait = match deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => break,
            },
            None => None,
        };
        let Some(received) = bus.recv(wait)? else {
            continue;
        };
        if !filters.pass(&received.frame) {
            continue;
        }
        writeln!(out, "{}", printer.line(&received))?;
        out.flush()?;
        written += 1;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candump::parse_frame;

    fn frame(text: &str) -> Frame {
        parse_frame(text).unwrap()
    }

    #[test]
    fn filters_work_as_candumps() {
        let f = Filter::parse("123:7FF").unwrap();
        assert!(f.matches(&frame("123#00")));
        assert!(!f.matches(&frame("124#00")));
        // The extended flag is not in the mask: 0x123 extended matches too, as in candump.
        assert!(f.matches(&frame("00000123#00")));
        // With the flag (bit 31) in the mask, only the extended one.
        let high = Filter::parse("00000123:9FFFFFFF").unwrap();
        assert!(high.matches(&frame("00000123#00")) && !high.matches(&frame("123#00")));
        let not = Filter::parse("100~700").unwrap();
        assert!(not.matches(&frame("200#")) && !not.matches(&frame("1FF#")));
        for bad in ["123", "12G:7FF", "1:2:3", "1~2:3"] {
            assert!(Filter::parse(bad).is_err(), "{bad}");
        }
        let e = Filter::parse("12G:7FF").unwrap_err();
        assert!(matches!(&e, FilterError::NotHex { part, .. } if part == "12G"));
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(e.to_string(), "`12G:7FF`: `12G` is not a hex number");
        let any = Filters {
            filters: vec![Filter::parse("100:700").unwrap(), f],
            join: false,
        };
        assert!(any.pass(&frame("1AB#")) && any.pass(&frame("123#")) && !any.pass(&frame("223#")));
        let all = Filters { join: true, ..any };
        assert!(!all.pass(&frame("1AB#")) && all.pass(&frame("123#")));
    }

    #[test]
    fn table_lines_are_candumps() {
        assert_eq!(long_frame(&frame("123#1122")), "123   [2]  11 22");
        assert_eq!(long_frame(&frame("1ABCDEF0#FF")), "1ABCDEF0   [1]  FF");
        assert_eq!(long_frame(&frame("123#")), "123   [0] ");
        assert_eq!(long_frame(&frame("123#R2")), "123   [2]  remote request");
        assert_eq!(
            long_frame(&frame("123##1000102030405060708090A0B")),
            "123  [12]  00 01 02 03 04 05 06 07 08 09 0A 0B"
        );
        let at = |t_ns, text| Received {
            t_ns,
            frame: frame(text),
        };
        let mut p = Printer::new(Format::Table(None), "vcan0");
        assert_eq!(p.line(&at(5, "123#11")), "  vcan0  123   [1]  11");
        let mut p = Printer::new(Format::Table(Some(Timestamps::Absolute)), "b");
        assert_eq!(
            p.line(&at(1_533_224_087_000_013_000, "7FF#")),
            " (1533224087.000013)  b  7FF   [0] "
        );
        let mut p = Printer::new(Format::Table(Some(Timestamps::Delta)), "b");
        p.line(&at(1_000_000_000, "1#"));
        assert!(p
            .line(&at(1_250_000_000, "1#"))
            .starts_with(" (0000000000.250000)"));
        let mut p = Printer::new(Format::Log, "b");
        assert_eq!(p.line(&at(1_500_000_000, "1#")), "(1.500000) b 001#");
    }
}
