//! Splitting a byte stream into lines of bounded length.

/// One line read from a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its newline.
    Text(String),
    /// A line longer than the limit; its bytes were discarded up to its newline.
    TooLong,
    /// A line that is not UTF-8.
    NotUtf8,
}

/// Accumulates bytes and yields complete lines, never holding more than `max` bytes:
/// a longer line is reported once as [`Line::TooLong`] and skipped to its end.
#[derive(Debug, Clone)]
pub struct LineBuffer {
    buf: Vec<u8>,
    max: usize,
    /// Skipping the rest of an over-long line.
    discarding: bool,
}

impl LineBuffer {
    pub fn new(max: usize) -> LineBuffer {
        LineBuffer {
            buf: Vec::new(),
            max,
            discarding: false,
        }
    }

    /// Adds `bytes`; appends every line they complete to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<Line>) {
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|&b| b == b'\n');
            let (part, rest) = match newline {
                Some(i) => (&bytes[..i], Some(&bytes[i + 1..])),
                None => (bytes, None),
            };
            if !self.discarding {
                if self.buf.len() + part.len() > self.max {
                    self.buf.clear();
                    self.discarding = true;
                    out.push(Line::TooLong);
                } else {
                    self.buf.extend_from_slice(part);
                }
            }
            match rest {
                Some(rest) => {
                    if !self.discarding {
                        let line = std::mem::take(&mut self.buf);
                        out.push(match String::from_utf8(line) {
                            Ok(text) => Line::Text(text.trim_end_matches('\r').to_string()),
                            Err(_) => Line::NotUtf8,
                        });
                    }
                    self.discarding = false;
                    bytes = rest;
                }
                None => bytes = &[],
            }
        }
    }

    /// Bytes held for an incomplete line.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(max: usize, chunks: &[&[u8]]) -> Vec<Line> {
        let mut b = LineBuffer::new(max);
        let mut out = Vec::new();
        for c in chunks {
            b.push(c, &mut out);
        }
        out
    }

    #[test]
    fn lines_may_arrive_in_pieces() {
        assert_eq!(
            lines(100, &[b"ab", b"c\nde", b"f\r\n\n"]),
            [
                Line::Text("abc".into()),
                Line::Text("def".into()),
                Line::Text(String::new())
            ]
        );
    }

    #[test]
    fn an_overlong_line_is_reported_once_and_skipped() {
        let long = [b'x'; 25];
        let out = lines(10, &[&long[..12], &long[12..], b"\nok\n"]);
        assert_eq!(out, [Line::TooLong, Line::Text("ok".into())]);
        assert_eq!(
            lines(3, &[b"abc\nabcd\n"]),
            [Line::Text("abc".into()), Line::TooLong]
        );
        let mut b = LineBuffer::new(10);
        b.push(&[b'y'; 1000], &mut Vec::new());
        assert_eq!(b.pending(), 0, "nothing of it is kept");
    }

    #[test]
    fn invalid_utf8_is_its_own_error() {
        assert_eq!(lines(10, &[b"\xff\xfe\n"]), [Line::NotUtf8]);
    }
}
