//! Where a DBC's messages and signals are written in its text (the `BO_` and `SG_`
//! lines), so that the content checks of [`crate::dbc`] can name the line each
//! [`Problem`] is about.

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
    /// The lines of the message's signals of each name, in order.
    signals: HashMap<String, Vec<usize>>,
}

impl MessageSource {
    /// The line of signal `name`, the `nth` of that name in the message.
    pub fn signal_line(&self, name: &str, nth: usize) -> Option<usize> {
        self.signals.get(name)?.get(nth).copied()
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
                    signals: HashMap::new(),
                });
            }
            Some("SG_") => {
                if let (Some(m), Some(name)) = (messages.last_mut(), tokens.next()) {
                    m.signals.entry(name.to_string()).or_default().push(i + 1);
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
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, m) in scanned.iter().enumerate() {
        by_name.entry(m.name.as_str()).or_default().push(i);
    }
    let mut cursor = 0;
    names
        .map(|name| {
            let at = by_name.get(name)?;
            let found = at[at.partition_point(|&i| i < cursor)..].first()?;
            cursor = found + 1;
            Some(scanned[*found].clone())
        })
        .collect()
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
