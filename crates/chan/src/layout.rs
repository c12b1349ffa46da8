//! The channel file layout and the validation of its header.
//!
//! ```text
//! page 0            header (written once by the creator; magic stored last)
//! page 1            writer's control words (a `Side`)
//! page 2            reader's control words (a `Side`)
//! page 3..          message area: `depth` slots (fifo) or 4 slots (latest),
//!                   each `stride` = message size rounded up to 8 bytes
//! ```
//!
//! Each side maps its own page and (writer only) the message area writable,
//! everything else read-only: the reader's mapping of the message area is
//! read-only for both kinds.
//!
//! A connecting side trusts nothing in the header: [`validate`] re-derives the
//! whole layout from (kind, message size, depth, page size) and requires every
//! stored field to match, and the file to be at least `total_len` long.

use crate::error::{OpenError, Result};
use std::fmt;

/// "BHDCHAN1" little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"BHDCHAN1");
/// Layout version; bumped on any incompatible change (2: the control words of a
/// [`crate::ctrl::Side`] regrouped 128 bytes apart, with `fence_free`).
pub const VERSION: u32 = 2;
/// Bytes of the encoded header.
pub const HEADER_LEN: usize = 144;
/// Longest channel name, in bytes.
pub const NAME_MAX: usize = 63;
/// Largest message size, in bytes (16 MiB).
pub const MAX_MSG_SIZE: u32 = 1 << 24;

/// The two kinds of channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Lossless SPSC ring; blocking when full/empty (shmcomm `SYNC`, Boomerang `RT_FIFO`).
    Fifo,
    /// Simpson's four-slot register: the most recent message (shmcomm `ASYNC`, Boomerang `RT_ASYNC`).
    Latest,
}

impl Kind {
    fn code(self) -> u32 {
        match self {
            Kind::Fifo => 1,
            Kind::Latest => 2,
        }
    }
    fn from_code(c: u32) -> Option<Kind> {
        match c {
            1 => Some(Kind::Fifo),
            2 => Some(Kind::Latest),
            _ => None,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Fifo => "fifo",
            Kind::Latest => "latest",
        })
    }
}

/// What a write to a full fifo does (the description's `overflow:`); header offset 68,
/// 0 in headers written before it existed, which is [`Overflow::Block`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// [`crate::Sender::write`] waits for room (Boomerang's `RT_FIFO`).
    #[default]
    Block,
    /// [`crate::Sender::write`] drops the new message when the fifo is full (counted in
    /// the writer's `lost`).
    DropNewest,
    /// [`crate::Sender::write`] drops the oldest unread message to make room (counted in
    /// the writer's `lost`): the fifo's overwriting mode ([`crate::fifo`]).
    DropOldest,
}

impl Overflow {
    fn code(self) -> u32 {
        match self {
            Overflow::Block => 0,
            Overflow::DropNewest => 1,
            Overflow::DropOldest => 2,
        }
    }
    fn from_code(c: u32) -> Option<Overflow> {
        match c {
            0 => Some(Overflow::Block),
            1 => Some(Overflow::DropNewest),
            2 => Some(Overflow::DropOldest),
            _ => None,
        }
    }
}

/// What a channel is: the metadata of shmcomm's `get_vshm_key` and
/// `get_channel_transfer_type` (DriveOS section 5.1.3), plus sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Channel name (also the `/dev/shm` name of a named channel).
    pub name: String,
    /// fifo or latest.
    pub kind: Kind,
    /// Fixed size of every message, in bytes.
    pub msg_size: u32,
    /// Messages the fifo holds; 1 for latest (it holds one message).
    pub depth: u32,
    /// What a write to the full fifo does; [`Overflow::Block`] for latest.
    pub overflow: Overflow,
    /// pid of the process that created the channel.
    pub creator_pid: u32,
    /// Start time of the creator (clock ticks since boot), against pid reuse.
    pub creator_start: u64,
}

/// Byte offsets and sizes derived from the metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub page: u64,
    pub stride: u64,
    pub writer_off: u64,
    pub reader_off: u64,
    pub data_off: u64,
    pub data_len: u64,
    pub total_len: u64,
}

/// Checks a channel name: 1 to 63 bytes of `[A-Za-z0-9._-]`.
pub fn check_name(name: &str) -> Result<(), OpenError> {
    let ok = !name.is_empty()
        && name.len() <= NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(OpenError::Invalid(format!(
            "channel name {name:?}: want 1 to {NAME_MAX} characters of A-Z a-z 0-9 . _ -"
        )))
    }
}

impl Layout {
    /// The layout for these parameters, or why they are unusable.
    pub fn compute(kind: Kind, msg_size: u32, depth: u32, page: u64) -> Result<Layout, OpenError> {
        if msg_size == 0 || msg_size > MAX_MSG_SIZE {
            return Err(OpenError::Invalid(format!(
                "message size {msg_size}: want 1..={MAX_MSG_SIZE}"
            )));
        }
        let slots = match kind {
            Kind::Fifo if (1..=crate::fifo::MAX_DEPTH).contains(&depth) => depth as u64,
            Kind::Fifo => {
                let max = crate::fifo::MAX_DEPTH;
                return Err(OpenError::Invalid(format!(
                    "fifo depth {depth}: want 1..={max}"
                )));
            }
            Kind::Latest if depth == 1 => 4,
            Kind::Latest => {
                return Err(OpenError::Invalid(format!(
                    "latest depth {depth}: must be 1"
                )))
            }
        };
        let stride = (msg_size as u64).div_ceil(8) * 8;
        let data_len = stride * slots;
        if data_len > 1 << 32 {
            return Err(OpenError::Invalid(format!(
                "message area {data_len} bytes: want at most 4 GiB"
            )));
        }
        Ok(Layout {
            page,
            stride,
            writer_off: page,
            reader_off: 2 * page,
            data_off: 3 * page,
            data_len,
            total_len: 3 * page + data_len.div_ceil(page) * page,
        })
    }
}

/// Encodes the header (the magic included; the creator stores it last).
pub fn encode(meta: &Meta, l: &Layout) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    let mut put = |off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
    put(0, &MAGIC.to_le_bytes());
    put(8, &VERSION.to_le_bytes());
    put(12, &meta.kind.code().to_le_bytes());
    put(16, &meta.msg_size.to_le_bytes());
    put(20, &meta.depth.to_le_bytes());
    put(24, &(l.page as u32).to_le_bytes());
    put(28, &(l.stride as u32).to_le_bytes());
    put(32, &l.writer_off.to_le_bytes());
    put(40, &l.reader_off.to_le_bytes());
    put(48, &l.data_off.to_le_bytes());
    put(56, &l.total_len.to_le_bytes());
    put(64, &meta.creator_pid.to_le_bytes());
    put(68, &meta.overflow.code().to_le_bytes());
    put(72, &meta.creator_start.to_le_bytes());
    put(80, meta.name.as_bytes());
    b
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// Validates a header copied out of a channel file of `file_len` bytes,
/// for a system whose page size is `page`. Never panics, whatever the bytes.
pub fn validate(b: &[u8], file_len: u64, page: u64) -> Result<(Meta, Layout), OpenError> {
    let bad = |m: String| Err(OpenError::BadHeader(m));
    if b.len() < HEADER_LEN {
        return bad(format!("{} bytes, want at least {HEADER_LEN}", b.len()));
    }
    if u64_at(b, 0) != MAGIC {
        return bad(format!("magic {:#018x}, want {MAGIC:#018x}", u64_at(b, 0)));
    }
    if u32_at(b, 8) != VERSION {
        return bad(format!("version {}, want {VERSION}", u32_at(b, 8)));
    }
    let Some(kind) = Kind::from_code(u32_at(b, 12)) else {
        return bad(format!(
            "kind {}, want 1 (fifo) or 2 (latest)",
            u32_at(b, 12)
        ));
    };
    let (msg_size, depth) = (u32_at(b, 16), u32_at(b, 20));
    if u32_at(b, 24) as u64 != page {
        return bad(format!(
            "page size {}, this system uses {page}",
            u32_at(b, 24)
        ));
    }
    let l = match Layout::compute(kind, msg_size, depth, page) {
        Ok(l) => l,
        Err(e) => return bad(e.to_string()),
    };
    let fields = [
        ("stride", u32_at(b, 28) as u64, l.stride),
        ("writer_off", u64_at(b, 32), l.writer_off),
        ("reader_off", u64_at(b, 40), l.reader_off),
        ("data_off", u64_at(b, 48), l.data_off),
        ("total_len", u64_at(b, 56), l.total_len),
    ];
    for (what, got, want) in fields {
        if got != want {
            return bad(format!("{what} {got}, want {want}"));
        }
    }
    if file_len < l.total_len {
        return bad(format!(
            "file is {file_len} bytes, layout needs {}",
            l.total_len
        ));
    }
    let raw = &b[80..80 + NAME_MAX + 1];
    let Some(end) = raw.iter().position(|&c| c == 0) else {
        return bad("name is not NUL-terminated".into());
    };
    let name = String::from_utf8_lossy(&raw[..end]).into_owned();
    if let Err(e) = check_name(&name) {
        return bad(e.to_string());
    }
    let creator_pid = u32_at(b, 64);
    let overflow = match (kind, Overflow::from_code(u32_at(b, 68))) {
        (Kind::Fifo, Some(o)) | (Kind::Latest, Some(o @ Overflow::Block)) => o,
        (_, _) => {
            return bad(format!(
                "overflow {}, want 0 (block), 1 (drop newest) or 2 (drop oldest; fifo only)",
                u32_at(b, 68)
            ))
        }
    };
    let meta = Meta {
        name,
        kind,
        msg_size,
        depth,
        overflow,
        creator_pid,
        creator_start: u64_at(b, 72),
    };
    Ok((meta, l))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn meta(kind: Kind, msg_size: u32, depth: u32) -> Meta {
        Meta {
            name: "101".into(),
            kind,
            msg_size,
            depth,
            overflow: Overflow::Block,
            creator_pid: 7,
            creator_start: 9,
        }
    }

    #[test]
    fn round_trip_program_1() {
        // DriveOS Program 1: struct packet {int X; int Y}, key 101, ring length 10.
        let m = meta(Kind::Fifo, 8, 10);
        let l = Layout::compute(m.kind, m.msg_size, m.depth, 4096).unwrap();
        assert_eq!((l.stride, l.data_len, l.total_len), (8, 80, 4 * 4096));
        let (got, gl) = validate(&encode(&m, &l), l.total_len, 4096).unwrap();
        assert_eq!((got, gl), (m, l));
    }

    #[test]
    fn latest_has_four_slots() {
        let l = Layout::compute(Kind::Latest, 32, 1, 4096).unwrap();
        assert_eq!(l.data_len, 4 * 32);
        assert!(Layout::compute(Kind::Latest, 32, 2, 4096).is_err());
    }

    #[test]
    fn rejects_each_field() {
        let m = meta(Kind::Fifo, 32, 64);
        let l = Layout::compute(m.kind, m.msg_size, m.depth, 4096).unwrap();
        let good = encode(&m, &l);
        let cases: [(usize, &str); 10] = [
            (68, "overflow"),
            (0, "magic"),
            (8, "version"),
            (12, "kind"),
            (16, "message size"),
            (20, "depth"),
            (24, "page size"),
            (28, "stride"),
            (48, "data_off"),
            (56, "total_len"),
        ];
        for (off, what) in cases {
            let mut b = good;
            b[off + 3] ^= 0x40;
            let e = validate(&b, l.total_len, 4096).unwrap_err().to_string();
            assert!(e.contains(what), "offset {off}: {e}");
        }
        let e = validate(&good, l.total_len - 1, 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains("file is"), "{e}");
        let mut b = good;
        b[80..144].fill(b'a');
        assert!(validate(&b, l.total_len, 4096)
            .unwrap_err()
            .to_string()
            .contains("NUL"));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200), len in any::<u64>()) {
            let _ = validate(&b, len, 4096);
        }

        #[test]
        fn accepted_headers_fit_the_file(kind in 1u32..3, msg in 0u32..70000, depth in 0u32..5000, len in 0u64..1 << 40) {
            let kind = Kind::from_code(kind).unwrap();
            if let Ok(l) = Layout::compute(kind, msg, depth, 4096) {
                let m = meta(kind, msg, depth);
                match validate(&encode(&m, &l), len, 4096) {
                    Ok((_, got)) => prop_assert!(got.total_len <= len && got.data_off + got.data_len <= got.total_len),
                    Err(_) => prop_assert!(len < l.total_len),
                }
            }
        }
    }
}
