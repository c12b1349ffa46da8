//! Control words: each side of a channel owns one [`Side`], alone on its own
//! page, and is the only one to write it. The peer maps that page read-only.

use crate::sync::{AtomicU32, AtomicU64};

/// Bit 31 of [`Side::seq`]: the side has closed its endpoint.
pub const CLOSED: u32 = 1 << 31;
/// Bits 0..=30 of [`Side::seq`]: the index or count.
pub const INDEX: u32 = CLOSED - 1;

/// The control words of one side (writer or reader). All-zero is the initial
/// state, so a freshly truncated file is a valid empty channel.
///
/// Three groups, 128 bytes apart (a cache line and its adjacent-line prefetch
/// partner), so that no write of one side steals a line the peer reads for another
/// purpose: `seq` (and the overwriting mode's positions), which change with every
/// message and which the peer polls; the words the peer reads on every message but
/// this side rarely writes (`waiting`, `fence_free`); and this side's counters, which
/// it writes on every message but only the supervisor reads.
#[repr(C)]
pub struct Side {
    /// fifo: next index to write (writer) or read (reader), in `0..2*depth`;
    /// latest writer: number of messages published (wrapping, 31 bits).
    /// Bit 31 is [`CLOSED`]. This is the futex word the peer sleeps on.
    pub seq: AtomicU32,
    _pad: u32,
    /// A fifo with `overflow: drop_oldest` ([`crate::fifo`]'s overwriting mode), by
    /// absolute message positions: the writer's messages written, the reader's next
    /// message to read.
    pub pos: AtomicU64,
    /// Overwriting mode, the writer's: the position of the oldest message not dropped.
    pub floor: AtomicU64,
    _line0: [u64; 13],
    /// 1 while this side sleeps, or is about to sleep, on the peer's `seq`.
    /// Only the sleeper sets and clears it.
    pub waiting: AtomicU32,
    /// fifo: 1 while this side promises to issue a process-wide barrier before it
    /// next sleeps, so that the peer may publish without a fence ([`crate::fifo`]).
    /// Only this side writes it.
    pub fence_free: AtomicU32,
    /// pid of the attached endpoint (as its pid namespace numbers it), 0 when none is
    /// attached: marks the side attached; whether its holder lives is a lock
    /// (`alive`), never this word.
    pub owner: AtomicU32,
    /// four-slot: the writer's `latest` pair, or the reader's `reading` pair.
    pub pair: AtomicU32,
    /// four-slot writer: `slot[pair]`, the most recently written slot of each pair.
    pub slot: [AtomicU32; 2],
    _line1: [u32; 26],
    /// Messages this side moved: written (writer) or read (reader). Counted by the
    /// endpoint, not the algorithm; the supervisor reports them (`ctl status`).
    pub count: std::sync::atomic::AtomicU64,
    /// Messages lost at this side: writes refused or dropped because the fifo was full
    /// (writer), or messages of a latest channel overwritten or of a `drop_oldest` fifo
    /// dropped before this reader saw them (reader).
    pub lost: std::sync::atomic::AtomicU64,
}

impl Side {
    /// The all-zero initial state (used by model checks; shared memory starts zeroed).
    pub fn new() -> Side {
        Side {
            seq: AtomicU32::new(0),
            _pad: 0,
            pos: AtomicU64::new(0),
            floor: AtomicU64::new(0),
            _line0: [0; 13],
            waiting: AtomicU32::new(0),
            fence_free: AtomicU32::new(0),
            owner: AtomicU32::new(0),
            pair: AtomicU32::new(0),
            slot: [AtomicU32::new(0), AtomicU32::new(0)],
            _line1: [0; 26],
            count: std::sync::atomic::AtomicU64::new(0),
            lost: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl Default for Side {
    fn default() -> Self {
        Side::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Side;
    use std::mem::offset_of;

    #[test]
    fn the_three_groups_are_128_bytes_apart() {
        assert_eq!(offset_of!(Side, seq), 0);
        assert_eq!(offset_of!(Side, waiting), 128);
        assert_eq!(offset_of!(Side, count), 256);
        assert!(size_of::<Side>() <= 4096, "a Side fits its page");
    }
}
