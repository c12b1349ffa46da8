//! Showing untrusted text (a log line, a DBC line) in a message: printable ASCII as is,
//! everything else escaped, and at most a given number of characters, so that a 30 MB
//! line or a binary file does not flood the terminal or reach it as raw bytes.

use std::fmt::Write as _;

/// `text` with control and non-ASCII characters escaped (`\u{1b}`, `\n`), cut after
/// `max` characters of output with `... (N more bytes)`.
pub fn excerpt(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (at, c) in text.char_indices() {
        if out.len() >= max {
            let _ = write!(out, "... ({} more bytes)", text.len() - at);
            return out;
        }
        if c == ' ' || c.is_ascii_graphic() {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    out
}

/// [`excerpt`] of every line of a multi-line message (at most `max_lines` lines of at
/// most `max` characters each), keeping its line structure.
pub fn excerpt_lines(text: &str, max: usize, max_lines: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines
        .iter()
        .take(max_lines)
        .map(|l| excerpt(l, max))
        .collect();
    if lines.len() > max_lines {
        out.push(format!("... ({} more lines)", lines.len() - max_lines));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_truncates() {
        assert_eq!(excerpt("123#00 ok", 40), "123#00 ok");
        assert_eq!(excerpt("a\u{1b}[2Jb\u{fffd}", 40), "a\\u{1b}[2Jb\\u{fffd}");
        let long = "A".repeat(1000);
        assert_eq!(excerpt(&long, 8), "AAAAAAAA... (992 more bytes)");
        let many = "x\n".repeat(20);
        let shown = excerpt_lines(&many, 10, 3);
        assert_eq!(shown, "x\nx\nx\n... (17 more lines)");
    }
}
