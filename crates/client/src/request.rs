//! Requests from inside (docs/modes.md, "Requests from inside"): a program asks the
//! supervisor for a mode switch or a suspend on its own DEmOS channel, the socket the
//! supervisor handed it at spawn. The supervisor knows the requesting partition from
//! the socket the request arrives on; the request names only what it wants.
//!
//! The wire format, in 8-byte words of native byte order on the channel (after the
//! heartbeat, [`crate::HEARTBEAT`]):
//!
//! - `3`, the name's length N (1..=[`MAX_NAME`]), then the name's N bytes padded with
//!   zeros to a multiple of 8: a mode request;
//! - `4`: a suspend request;
//!
//! and the supervisor's reply, one word: 0 when the manager took the request, else the
//! errno the caller gets (`EPERM`: the description does not allow it).

/// The first word of a mode request.
pub const MODE: u64 = 3;
/// The word of a suspend request.
pub const SUSPEND: u64 = 4;
/// The longest mode name a request carries.
pub const MAX_NAME: usize = 255;

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    Mode(String),
    Suspend,
}

/// A message of a program on its channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Heartbeat,
    Request(Want),
    /// Bytes that follow no message format (the rest of what was received is dropped).
    Malformed,
}

/// The bytes of `want` on the channel.
pub fn encode(want: &Want) -> Vec<u8> {
    match want {
        Want::Suspend => SUSPEND.to_ne_bytes().to_vec(),
        Want::Mode(name) => {
            let mut out = MODE.to_ne_bytes().to_vec();
            out.extend((name.len() as u64).to_ne_bytes());
            out.extend(name.as_bytes());
            out.resize(16 + name.len().div_ceil(8) * 8, 0);
            out
        }
    }
}

/// Splits a channel's byte stream into messages, whatever pieces it arrives in.
#[derive(Debug, Default)]
pub struct Decoder {
    pending: Vec<u8>,
}

impl Decoder {
    /// The messages `bytes` completes, in order; an incomplete one waits for more.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Message> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut at = 0;
        while let Some((message, len)) = decode(&self.pending[at..]) {
            at += len;
            if message == Message::Malformed {
                at = self.pending.len();
            }
            out.push(message);
        }
        self.pending.drain(..at);
        out
    }
}

/// The first message of `bytes` and its length; `None` while it is incomplete.
fn decode(bytes: &[u8]) -> Option<(Message, usize)> {
    let word = |i: usize| {
        let b = bytes.get(i * 8..i * 8 + 8)?;
        Some(u64::from_ne_bytes(b.try_into().expect("8 bytes")))
    };
    match word(0)? {
        crate::HEARTBEAT => Some((Message::Heartbeat, 8)),
        SUSPEND => Some((Message::Request(Want::Suspend), 8)),
        MODE => {
            let n = word(1)?;
            if n == 0 || n > MAX_NAME as u64 {
                return Some((Message::Malformed, bytes.len()));
            }
            let n = n as usize;
            let len = 16 + n.div_ceil(8) * 8;
            let name = bytes.get(16..16 + n)?;
            bytes.get(..len)?;
            match std::str::from_utf8(name) {
                Ok(name) => Some((Message::Request(Want::Mode(name.to_string())), len)),
                Err(_) => Some((Message::Malformed, bytes.len())),
            }
        }
        _ => Some((Message::Malformed, bytes.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_split_anywhere_decode_the_same() {
        let mut stream = crate::HEARTBEAT.to_ne_bytes().to_vec();
        stream.extend(encode(&Want::Mode("highway".into())));
        stream.extend(encode(&Want::Suspend));
        stream.extend(encode(&Want::Mode("eightchr".into())));
        let whole = Decoder::default().push(&stream);
        assert_eq!(
            whole,
            vec![
                Message::Heartbeat,
                Message::Request(Want::Mode("highway".into())),
                Message::Request(Want::Suspend),
                Message::Request(Want::Mode("eightchr".into())),
            ]
        );
        for cut in 1..stream.len() {
            let mut d = Decoder::default();
            let mut got = d.push(&stream[..cut]);
            got.extend(d.push(&stream[cut..]));
            assert_eq!(got, whole, "cut at {cut}");
        }
    }

    #[test]
    fn unknown_words_and_bad_lengths_are_malformed_and_dropped() {
        let mut d = Decoder::default();
        let mut bad = 9u64.to_ne_bytes().to_vec();
        bad.extend(encode(&Want::Suspend));
        assert_eq!(d.push(&bad), vec![Message::Malformed]);
        let mut long = MODE.to_ne_bytes().to_vec();
        long.extend(1000u64.to_ne_bytes());
        assert_eq!(d.push(&long), vec![Message::Malformed]);
        assert_eq!(
            d.push(&encode(&Want::Suspend)),
            vec![Message::Request(Want::Suspend)]
        );
    }
}
