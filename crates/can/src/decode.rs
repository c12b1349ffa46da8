//! Decoding a candump log with a DBC into JSON lines (`bulkhead can decode`).

use crate::candump::{ReadError, Reader, Record};
use crate::dbc::{Database, DecodeError, Decoded};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead, Write};

/// One output line: `{"t": seconds, "iface": str, "id": int, "message": str,
/// "signals": {name: value}}` (signals in DBC order).
#[derive(Serialize)]
pub struct JsonLine<'a> {
    pub t: f64,
    pub iface: &'a str,
    pub id: u32,
    pub message: &'a str,
    pub signals: Signals<'a>,
}

/// Signal values serialized as a JSON object in DBC order.
pub struct Signals<'a>(pub &'a [(&'a str, f64)]);

impl Serialize for Signals<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// The JSON line of a decoded record.
pub fn json_line(record: &Record, decoded: &Decoded<'_>) -> String {
    let line = JsonLine {
        t: record.t_secs(),
        iface: &record.iface,
        id: record.frame.id().raw(),
        message: decoded.message,
        signals: Signals(&decoded.signals),
    };
    serde_json::to_string(&line).expect("plain data serializes")
}

/// What a decoding run saw.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub decoded: u64,
    /// Records of other interfaces (when decoding one interface).
    pub skipped: u64,
    /// Frames whose id is not in the DBC, by id (candump spelling).
    pub unknown_ids: BTreeMap<String, u64>,
    /// Frames of a known message that could not be decoded, by message and reason.
    pub failed: BTreeMap<String, u64>,
    /// Lines that are not candump records (first few kept with their line numbers).
    pub malformed: u64,
    pub malformed_examples: Vec<String>,
}

impl Summary {
    pub fn undecodable(&self) -> u64 {
        self.unknown_ids.values().sum::<u64>() + self.failed.values().sum::<u64>()
    }
}

impl fmt::Display for Summary {
    /// A multi-line report for stderr.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unknown: u64 = self.unknown_ids.values().sum();
        writeln!(
            f,
            "decoded {} frames; {} undecodable ({} with {} ids not in the DBC); {} malformed lines; \
             {} of other interfaces skipped",
            self.decoded,
            self.undecodable(),
            unknown,
            self.unknown_ids.len(),
            self.malformed,
            self.skipped
        )?;
        for (reason, count) in &self.failed {
            writeln!(f, "  {count} x {reason}")?;
        }
        for example in &self.malformed_examples {
            writeln!(f, "  malformed: {example}")?;
        }
        Ok(())
    }
}

const MAX_EXAMPLES: usize = 5;

/// Decodes every record of `input` (of interface `iface`, if given), writing one
/// JSON line per decodable frame to `out`. Malformed lines and undecodable frames
/// are counted, never fatal; only I/O errors end the run.
pub fn decode_log(
    db: &Database,
    input: impl BufRead,
    iface: Option<&str>,
    out: &mut impl Write,
) -> io::Result<Summary> {
    let mut summary = Summary::default();
    for item in Reader::new(input) {
        let record = match item {
            Ok(record) => record,
            Err(ReadError::Io(e)) => return Err(e),
            Err(ReadError::Parse(e)) => {
                summary.malformed += 1;
                if summary.malformed_examples.len() < MAX_EXAMPLES {
                    summary.malformed_examples.push(e.to_string());
                }
                continue;
            }
        };
        if iface.is_some_and(|i| i != record.iface) {
            summary.skipped += 1;
            continue;
        }
        match db.decode(&record.frame) {
            Ok(decoded) => {
                summary.decoded += 1;
                writeln!(out, "{}", json_line(&record, &decoded))?;
            }
            Err(DecodeError::UnknownId(id)) => {
                *summary.unknown_ids.entry(id.to_string()).or_default() += 1;
            }
            Err(e) => *summary.failed.entry(e.to_string()).or_default() += 1,
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape_and_counts() {
        let db = Database::parse(
            "BO_ 16 M: 2 XXX\n SG_ B : 8|8@1+ (1,0) [0|0] \"\" XXX\n SG_ A : 0|8@1- (0.5,0) [0|0] \"\" XXX\n",
        )
        .unwrap();
        let log = "(1.250000) can0 010#FE07\n(2.0) can0 011#00\n(3.0) can0 010#01\nnot a line\n\
                   (4.0) can1 010#FE07\n";
        let mut out = Vec::new();
        let summary = decode_log(&db, log.as_bytes(), Some("can0"), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "{\"t\":1.25,\"iface\":\"can0\",\"id\":16,\"message\":\"M\",\"signals\":{\"B\":7.0,\"A\":-1.0}}\n"
        );
        assert_eq!(summary.decoded, 1);
        assert_eq!(summary.unknown_ids.get("011"), Some(&1));
        assert_eq!(
            summary.failed.get("M: frame has 1 bytes, the DBC says 2"),
            Some(&1)
        );
        assert_eq!(summary.malformed, 1);
        assert_eq!(summary.skipped, 1);
        assert_eq!(summary.undecodable(), 2);
        assert!(summary.to_string().contains("2 undecodable"));
    }
}
