//! The `latest` algorithm: Simpson's four-slot fully asynchronous mechanism.
//!
//! H. R. Simpson, "Four-slot fully asynchronous communication mechanism",
//! IEE Proceedings E (Computers and Digital Techniques) 137(1):17-30, 1990.
//! It is the asynchronous shmcomm channel of DriveOS (section 5.1.4: "Simpson's
//! four-slot algorithm for wait-free asynchronous message passing", Programs
//! 1-2 with `SHMCOMM_ASYNC_CH`) and Boomerang's `RT_ASYNC` buffering (sections
//! II-B and III-B: freshness and integrity without either side blocking).
//!
//! Four slots `data[pair][index]`; control variables `latest` and `slot[2]`
//! (written only by the writer, in its [`Side::pair`] and [`Side::slot`]) and
//! `reading` (written only by the reader, in its [`Side::pair`]):
//!
//! ```text
//! writer:  pair = !reading; index = !slot[pair];
//!          write data[pair][index]; slot[pair] = index; latest = pair
//! reader:  pair = latest; reading = pair; index = slot[pair];
//!          read data[pair][index]
//! ```
//!
//! Simpson's proof assumes sequentially consistent control variables. Here
//! they are release/acquire accesses plus one SeqCst fence per side: the
//! writer's between publishing the previous message and reading `reading`,
//! the reader's between storing `reading` and loading `slot[pair]`. The loom
//! model in `tests/loom.rs` checks that the writer never touches the slot
//! being read (no torn message) and that freshness is monotonic.
//! A peer's control value outside {0, 1} is reported as a `Corrupt` error.

use crate::ctrl::{Side, INDEX};
use crate::error::{OpenError, RecvError};
use crate::sync::{fence, Ordering::*};

/// `v` as a slot or pair number, or `what` was corrupt.
fn bit(v: u32, what: &'static str) -> Result<usize, &'static str> {
    if v > 1 {
        return Err(what);
    }
    Ok(v as usize)
}

/// Writer end of the four-slot algorithm.
pub struct Writer {
    mine: *const Side,
    peer: *const Side,
    slot: [u32; 2],
    pending: (usize, u32),
    count: u32,
}

// SAFETY: the words are atomics in memory that outlives the Writer
// (constructor contract); nothing is thread-local.
unsafe impl Send for Writer {}

impl Writer {
    /// Attaches the writer, continuing from its published state.
    ///
    /// # Safety
    /// `mine` and `peer` must point to [`Side`]s valid for the lifetime of
    /// the returned value; only this writer may write `mine` while it lives.
    pub unsafe fn new(mine: *const Side, peer: *const Side) -> Result<Writer, OpenError> {
        // SAFETY: caller contract.
        let m = unsafe { &*mine };
        let own = |i: usize, what| bit(m.slot[i].load(Acquire), what).map_err(OpenError::Corrupt);
        let slot = [
            own(0, "four-slot slot[0]")? as u32,
            own(1, "four-slot slot[1]")? as u32,
        ];
        let count = m.seq.load(Acquire) & INDEX;
        m.seq.store(count, Release);
        Ok(Writer {
            mine,
            peer,
            slot,
            pending: (0, 0),
            count,
        })
    }

    /// Chooses the slot (0..4) for the next message: never the one being read.
    pub fn begin(&mut self) -> usize {
        fence(SeqCst);
        // SAFETY: constructor contract.
        let reading = unsafe { &*self.peer }.pair.load(Acquire);
        // The reader's word is untrusted: only its low bit is used, so a reader
        // that writes garbage there can only tear its own reads.
        let pair = 1 - (reading & 1) as usize;
        let index = 1 - self.slot[pair];
        self.pending = (pair, index);
        pair * 2 + index as usize
    }

    /// Publishes the message written into the slot chosen by `begin`.
    pub fn commit(&mut self) {
        let (pair, index) = self.pending;
        self.slot[pair] = index;
        // SAFETY: constructor contract.
        let m = unsafe { &*self.mine };
        m.slot[pair].store(index, Release);
        m.pair.store(pair as u32, Release);
        // Wraps from 2^31-1 to 1: 0 keeps meaning "never published".
        self.count = if self.count == INDEX {
            1
        } else {
            self.count + 1
        };
        m.seq.store(self.count, Release);
    }

    /// Marks the writer closed (readers keep getting the last message).
    pub fn close(&mut self) {
        // SAFETY: constructor contract.
        unsafe { &*self.mine }
            .seq
            .store(self.count | crate::ctrl::CLOSED, Release);
    }
}

/// Reader end of the four-slot algorithm.
pub struct Reader {
    mine: *const Side,
    peer: *const Side,
}

// SAFETY: as for Writer.
unsafe impl Send for Reader {}

impl Reader {
    /// Attaches the reader.
    ///
    /// # Safety
    /// Same contract as [`Writer::new`], with the roles swapped.
    pub unsafe fn new(mine: *const Side, peer: *const Side) -> Reader {
        Reader { mine, peer }
    }

    /// The slot (0..4) holding the most recent complete message, or `None`
    /// if nothing was ever published. The slot stays reserved for reading
    /// until the next call.
    pub fn begin(&mut self) -> Result<Option<usize>, RecvError> {
        // SAFETY: constructor contract.
        let (m, p) = unsafe { (&*self.mine, &*self.peer) };
        if p.seq.load(Acquire) & INDEX == 0 {
            return Ok(None);
        }
        let pair = bit(p.pair.load(Acquire), "four-slot latest").map_err(RecvError::Corrupt)?;
        m.pair.store(pair as u32, Relaxed);
        fence(SeqCst);
        let index = bit(p.slot[pair].load(Acquire), "four-slot slot[pair]");
        let index = index.map_err(RecvError::Corrupt)?;
        Ok(Some(pair * 2 + index))
    }

    /// Number of messages the writer has published (wrapping at 2^31, never 0
    /// once something was published).
    pub fn published(&self) -> u32 {
        // SAFETY: constructor contract.
        unsafe { &*self.peer }.seq.load(Acquire) & INDEX
    }
}
