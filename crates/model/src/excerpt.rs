//! Showing untrusted text in a message: a log line, a DBC line, a value of a
//! description. Printable ASCII is shown as is, everything else escaped, and at most a
//! given length, so that a 4 MB command or a binary file does not flood the terminal or
//! reach it as raw bytes.
//!
//! Messages quote the values they show in backticks (`` unknown partition `x` ``);
//! [`values`] cuts every quoted value longer than [`MAX_VALUE`] bytes, so that the one
//! place that prints messages (the CLI's error and warning lines, a
//! [`crate::Diagnostic`]) bounds them all.

use std::fmt::Write as _;

/// The longest value shown whole in a message, in bytes.
pub const MAX_VALUE: usize = 200;

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

/// `message` with every backtick-quoted value longer than [`MAX_VALUE`] bytes cut to
/// its first bytes and `...` inside the quotes, followed by its length: `` `xxx...` (4000000
/// bytes) ``. Idempotent (a cut value is [`MAX_VALUE`] bytes long), so a message may
/// pass through it twice. An unpaired backtick leaves the rest as it is.
pub fn values(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4 * MAX_VALUE));
    let mut rest = message;
    while let Some(open) = rest.find('`') {
        let (before, quoted) = rest.split_at(open + 1);
        out.push_str(before);
        let Some(close) = quoted.find('`') else {
            rest = quoted;
            break;
        };
        let value = &quoted[..close];
        if value.len() > MAX_VALUE {
            let _ = write!(out, "{}...` ({} bytes)", head(value), value.len());
        } else {
            out.push_str(value);
            out.push('`');
        }
        rest = &quoted[close + 1..];
    }
    out.push_str(rest);
    out
}

/// `text` itself, or when longer than [`MAX_VALUE`] bytes its first bytes, `...` and
/// its length: for a value shown unquoted (a key path made of a description's keys).
pub fn shorten(text: &str) -> std::borrow::Cow<'_, str> {
    match text.len() > MAX_VALUE {
        true => format!("{}... ({} bytes)", head(text), text.len()).into(),
        false => text.into(),
    }
}

/// The first `MAX_VALUE - 3` bytes of `text` (fewer to end on a character), so that
/// with `...` it is [`MAX_VALUE`] bytes at most.
fn head(text: &str) -> &str {
    let end = (0..=MAX_VALUE - 3)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    &text[..end]
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

    #[test]
    fn long_quoted_values_are_cut_once_and_short_ones_kept() {
        let long = "x".repeat(4_000_000);
        let message = format!("process 0 (`{long}`): `{long}`: command not found in PATH");
        let cut = values(&message);
        let shown = format!("`{}...` (4000000 bytes)", "x".repeat(MAX_VALUE - 3));
        assert_eq!(
            cut,
            format!("process 0 ({shown}): {shown}: command not found in PATH")
        );
        assert_eq!(values(&cut), cut, "idempotent");
        let short = "unknown partition `p` (first defined at `q`)";
        assert_eq!(values(short), short);
        assert_eq!(values("a `b"), "a `b");
        let wide = format!("`{}`", "é".repeat(MAX_VALUE));
        assert!(values(&wide).starts_with(&format!("`{}...`", "é".repeat(98))));
        assert_eq!(shorten("partitions[0].name"), "partitions[0].name");
        let key = format!("partitions[0].{long}");
        assert_eq!(
            shorten(&key),
            format!("{}... (4000014 bytes)", &key[..MAX_VALUE - 3])
        );
    }
}
