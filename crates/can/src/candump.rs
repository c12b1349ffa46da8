//! candump log format (`candump -L`, read by `canplayer`): one frame a line,
//! `(seconds.micros) iface ID#DATA`.
//!
//! `ID` is 3 hex digits for an 11-bit id and 8 for a 29-bit id; `DATA` is 0..8 bytes
//! in hex; `ID#R` (optionally `ID#R<len>`) is a remote frame and `ID##<flags>DATA`
//! a CAN FD frame (flags nibble: 1 = bit-rate switch). Logs compressed with gzip are
//! read transparently ([`open_log`]).

/// A frame's `ID#DATA` text, the form it takes in a log line.
pub use crate::frame::format_frame;
use crate::frame::{CanId, Frame};
use bulkhead_model::excerpt::excerpt;
use bulkhead_model::input::{self, Fifo};
use flate2::read::MultiGzDecoder;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;

/// One line of a candump log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Timestamp, nanoseconds (of the Unix epoch in real logs).
    pub t_ns: u64,
    pub iface: String,
    pub frame: Frame,
}

impl Record {
    /// Timestamp in seconds: the f64 nearest to the exact decimal (dividing by 1e9
    /// in floating point can be off by one unit in the last place).
    pub fn t_secs(&self) -> f64 {
        let secs = self.t_ns / 1_000_000_000;
        let nanos = self.t_ns % 1_000_000_000;
        format!("{secs}.{nanos:09}")
            .parse()
            .expect("digits and a dot parse")
    }
}

impl fmt::Display for Record {
    /// The candump log line, without newline; timestamps have microsecond resolution.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.t_ns / 1_000_000_000;
        let micros = (self.t_ns % 1_000_000_000) / 1_000;
        write!(
            f,
            "({secs}.{micros:06}) {} {}",
            self.iface,
            format_frame(&self.frame)
        )
    }
}

/// A line that is not a candump log record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    #[source]
    pub problem: LineError,
}

/// What is wrong with a candump log line (the texts quoted, cut short).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("expected `(seconds) iface ID#DATA`, found {}", quoted(.0))]
    Fields(String),
    #[error("bad timestamp {}", quoted(.0))]
    Timestamp(String),
    #[error("line longer than {MAX_LINE} bytes")]
    TooLong,
    #[error(transparent)]
    Frame(#[from] FrameSyntax),
}

/// A frame that is not `ID#DATA`, `ID#R[len]` or `ID##<flags>DATA` ([`parse_frame`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameSyntax {
    #[error("{} lacks the `#` between id and data", quoted(.0))]
    NoHash(String),
    #[error("bad CAN id {}", quoted(.0))]
    Id(String),
    #[error("CAN id {} out of range", quoted(.0))]
    IdRange(String),
    #[error("{}: CAN FD frame lacks its flags digit", quoted(.0))]
    FdFlags(String),
    #[error("{}: bad remote length {}", quoted(.body), quoted(.len))]
    RemoteLength { body: String, len: String },
    #[error("{}: {source}", quoted(.body))]
    Data { body: String, source: HexError },
    /// The frame the text describes cannot be built.
    #[error("{}: {source}", quoted(.body))]
    Frame {
        body: String,
        source: crate::frame::FrameError,
    },
}

/// Data that is not pairs of hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HexError {
    #[error("odd number of hex digits in {}", quoted(.0))]
    Odd(String),
    #[error("bad hex data {}", quoted(.0))]
    NotHex(String),
}

/// Longest excerpt of a line shown in an error message, in characters.
const SHOWN: usize = 48;

/// `"text"` escaped and cut short (see [`crate::excerpt`]).
fn quoted(text: &str) -> String {
    format!("\"{}\"", excerpt(text, SHOWN))
}

/// Parses one log line (without its newline). `line_no` is used in errors. A trailing
/// `R` or `T` (received or transmitted, which python-can's `can.Logger` writes) is
/// accepted and ignored.
pub fn parse_line(text: &str, line_no: usize) -> Result<Record, ParseError> {
    let err = |problem: LineError| ParseError {
        line: line_no,
        problem,
    };
    let mut fields = text.split_ascii_whitespace();
    let (Some(ts), Some(iface), Some(body), None | Some("R" | "T"), None) = (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
    ) else {
        return Err(err(LineError::Fields(text.into())));
    };
    let t_ns = parse_timestamp(ts).ok_or_else(|| err(LineError::Timestamp(ts.into())))?;
    let frame = parse_frame(body).map_err(|e| err(e.into()))?;
    Ok(Record {
        t_ns,
        iface: iface.to_string(),
        frame,
    })
}

/// `(1533224087.000013)` to nanoseconds.
fn parse_timestamp(ts: &str) -> Option<u64> {
    let inner = ts.strip_prefix('(')?.strip_suffix(')')?;
    let (secs, frac) = inner.split_once('.').unwrap_or((inner, ""));
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32)
    };
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// Parses `ID#DATA`, `ID#R[len]` or `ID##<flags>DATA`.
pub fn parse_frame(body: &str) -> Result<Frame, FrameSyntax> {
    let (id_text, rest) = body
        .split_once('#')
        .ok_or_else(|| FrameSyntax::NoHash(body.into()))?;
    let id = parse_id(id_text)?;
    let bad = |source| FrameSyntax::Frame {
        body: body.into(),
        source,
    };
    let data = |source| FrameSyntax::Data {
        body: body.into(),
        source,
    };
    if let Some(fd) = rest.strip_prefix('#') {
        let mut chars = fd.chars();
        let flags = chars
            .next()
            .and_then(|c| c.to_digit(16))
            .ok_or_else(|| FrameSyntax::FdFlags(body.into()))?;
        let data = parse_hex(chars.as_str()).map_err(data)?;
        return Frame::fd(id, flags & 1 != 0, &data).map_err(bad);
    }
    if let Some(len) = rest.strip_prefix(['R', 'r']) {
        let len = if len.is_empty() {
            0
        } else {
            len.parse::<u8>().map_err(|_| FrameSyntax::RemoteLength {
                body: body.into(),
                len: len.into(),
            })?
        };
        return Frame::remote(id, len).map_err(bad);
    }
    let data = parse_hex(rest).map_err(data)?;
    Frame::new(id, &data).map_err(bad)
}

fn parse_id(text: &str) -> Result<CanId, FrameSyntax> {
    let value = u32::from_str_radix(text, 16).map_err(|_| FrameSyntax::Id(text.into()))?;
    let id = if text.len() <= 3 {
        CanId::standard(value)
    } else {
        CanId::extended(value)
    };
    id.ok_or_else(|| FrameSyntax::IdRange(text.into()))
}

fn parse_hex(text: &str) -> Result<Vec<u8>, HexError> {
    if text.len() % 2 != 0 {
        return Err(HexError::Odd(text.into()));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| HexError::NotHex(text.into()))
        })
        .collect()
}

/// Opens a candump log, decompressing it when it starts with the gzip magic bytes.
/// Only a regular file is a log (`bulkhead_model::input::open`): a FIFO, a device or a
/// directory is refused before it is opened (opening a FIFO blocks, a device may never
/// end, and replay opens the log again for each loop). A log is streamed, so its size
/// is not bounded, the memory of reading it is ([`MAX_LINE`]).
pub fn open_log(path: &Path) -> io::Result<Box<dyn BufRead>> {
    let file = input::open(path, Fifo::Refuse)?;
    let mut file = BufReader::new(file);
    let gz = file.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    Ok(if gz {
        Box::new(BufReader::new(MultiGzDecoder::new(file)))
    } else {
        Box::new(file)
    })
}

/// The longest log line read, in bytes (a CAN FD record takes about 200); the rest of a
/// longer line is skipped without being kept.
pub const MAX_LINE: usize = 4096;

/// Reads records line by line; blank lines and `#` comments are skipped. A line that
/// is not UTF-8 or longer than [`MAX_LINE`] is a malformed line like any other.
pub struct Reader<R> {
    input: R,
    line_no: usize,
    buf: Vec<u8>,
}

/// A read failure: I/O (fatal) or a malformed line (the caller may go on).
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    Parse(ParseError),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => e.fmt(f),
            ReadError::Parse(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReadError {}

impl<R: BufRead> Reader<R> {
    pub fn new(input: R) -> Reader<R> {
        Reader {
            input,
            line_no: 0,
            buf: Vec::new(),
        }
    }

    /// The number of the line read last (1-based; 0 before the first).
    pub fn line(&self) -> usize {
        self.line_no
    }
}

impl<R: BufRead> Reader<R> {
    /// Skips the rest of a line longer than [`MAX_LINE`]; the line is malformed.
    fn skip_long_line(&mut self) -> Result<Record, ReadError> {
        if self.buf.last() != Some(&b'\n') {
            loop {
                let chunk = self.input.fill_buf().map_err(ReadError::Io)?;
                if chunk.is_empty() {
                    break;
                }
                let (used, end) = match chunk.iter().position(|&b| b == b'\n') {
                    Some(i) => (i + 1, true),
                    None => (chunk.len(), false),
                };
                self.input.consume(used);
                if end {
                    break;
                }
            }
        }
        Err(ReadError::Parse(ParseError {
            line: self.line_no,
            problem: LineError::TooLong,
        }))
    }
}

impl<R: BufRead> Iterator for Reader<R> {
    type Item = Result<Record, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.buf.clear();
            let limited = (&mut self.input).take(MAX_LINE as u64 + 1);
            match BufRead::read_until(&mut { limited }, b'\n', &mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(ReadError::Io(e))),
            }
            self.line_no += 1;
            if self.buf.len() > MAX_LINE {
                return Some(self.skip_long_line());
            }
            // Bytes that are not UTF-8 make the line malformed, not the log unreadable.
            let line = String::from_utf8_lossy(&self.buf);
            let text = line.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            return Some(parse_line(text, self.line_no).map_err(ReadError::Parse));
        }
    }
}

/// Reads a whole log from any reader (e.g. a decompressed buffer).
pub fn read_all(input: impl Read) -> Result<Vec<Record>, ReadError> {
    Reader::new(BufReader::new(input)).collect()
}

/// Writes one record as a log line.
pub fn write_record(out: &mut impl Write, record: &Record) -> io::Result<()> {
    writeln!(out, "{record}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_candump_lines() {
        for line in [
            "(1533224087.000013) can0 2C1#0014DF14BBCA3A91",
            "(1533224087.000018) can0 2E4#BE000000A9",
            "(0.000001) vcan1 1ABCDEF0#",
            "(12.500000) can0 123#R",
            "(12.500000) can0 123#R3",
            "(12.500000) can0 123##1000102030405060708090A0B",
        ] {
            let record = parse_line(line, 1).unwrap();
            assert_eq!(record.to_string(), line);
        }
        let r = parse_line("(1533224087.000013) can0 2C1#0014DF14BBCA3A91", 1).unwrap();
        assert_eq!(r.t_ns, 1_533_224_087_000_013_000);
        assert_eq!(r.frame.id(), CanId::Standard(0x2C1));
        assert_eq!(r.frame.data()[..3], [0x00, 0x14, 0xDF]);
        assert_eq!(r.t_secs(), 1533224087.000013);
        let ext = parse_line("(1.0) can0 00000123#11", 1).unwrap();
        assert_eq!(ext.frame.id(), CanId::Extended(0x123));
        // python-can's can.Logger marks received and transmitted frames.
        let rx = parse_line("(1795472244.028629) pyb 7FF#AABB R", 1).unwrap();
        assert_eq!(rx.frame.data(), &[0xAA, 0xBB]);
        assert!(parse_line("(1.0) can0 123#00 T", 1).is_ok());
    }

    #[test]
    fn malformed_lines_name_their_line() {
        for bad in [
            "can0 123#00",
            "(1.0) can0 123",
            "(1.0) can0 123#0",
            "(1.0) can0 800#00",
            "(1.0) can0 123#001122334455667788",
            "(x) can0 123#00",
            "(1.0) can0 12G#00",
            "(1.0) can0 123#00 extra",
            "(1.0) can0 123#00 R R",
        ] {
            let e = parse_line(bad, 7).unwrap_err();
            assert_eq!(e.line, 7, "{bad}");
            assert!(e.to_string().starts_with("line 7: "), "{e}");
        }
        let odd = parse_line("(1.0) can0 123#0", 7).unwrap_err();
        let hex = HexError::Odd("0".into());
        let data = FrameSyntax::Data {
            body: "123#0".into(),
            source: hex,
        };
        assert_eq!(odd.problem, LineError::Frame(data));
        assert_eq!(
            odd.to_string(),
            "line 7: \"123#0\": odd number of hex digits in \"0\""
        );
        let long = parse_line("(1.0) can0 123#001122334455667788", 7).unwrap_err();
        let LineError::Frame(FrameSyntax::Frame { .. }) = long.problem else {
            panic!("{long:?}");
        };
        assert_eq!(parse_frame("12G#00"), Err(FrameSyntax::Id("12G".into())));
    }

    #[test]
    fn errors_show_lines_escaped_and_cut_short() {
        let long = format!("(1.0) can0 064#{}", "A".repeat(1 << 20));
        let e = parse_line(&long, 3).unwrap_err().to_string();
        assert!(e.len() < 200, "{} bytes", e.len());
        assert!(e.contains("more bytes)"), "{e}");
        let e = parse_line("(1.0) can0 \u{1b}[2J#00", 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\\u{1b}[2J") && !e.contains('\u{1b}'), "{e}");
    }

    #[test]
    fn reader_skips_blank_lines_and_counts_lines() {
        let text = "\n(1.0) can0 123#00\n# note\n(2.0) can0 bad\n";
        let items: Vec<_> = Reader::new(text.as_bytes()).collect();
        assert_eq!(items.len(), 2);
        assert!(items[0].is_ok());
        match &items[1] {
            Err(ReadError::Parse(e)) => assert_eq!(e.line, 4),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_long_line_is_malformed_and_skipped_without_being_kept() {
        let text = format!(
            "(1.0) can0 123#{}\n(2.0) can0 124#00\n",
            "0".repeat(100_000)
        );
        let items: Vec<_> = Reader::new(text.as_bytes()).collect();
        assert_eq!(items.len(), 2);
        match &items[0] {
            Err(ReadError::Parse(e)) => {
                assert_eq!(e.problem, LineError::TooLong);
                assert_eq!(e.to_string(), "line 1: line longer than 4096 bytes");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(items[1].as_ref().unwrap().t_ns, 2_000_000_000);
    }

    #[test]
    fn only_regular_files_are_logs() {
        for path in ["/dev/zero", "/"] {
            let e = open_log(Path::new(path)).err().expect("refused");
            assert!(e.to_string().contains("not a regular file"), "{path}: {e}");
        }
    }
}
