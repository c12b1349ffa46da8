//! Sender and Receiver: a mapped channel plus the fifo or four-slot algorithm.

use crate::alive::{Hold, Lock};
use crate::ctrl::Side;
use crate::error::{OpenError, RecvError, SendError};
use crate::fifo::{Consumer, Producer};
use crate::fourslot;
use crate::layout::{Kind, Layout, Meta, Overflow};
use crate::map::Map;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long an operation may wait.
#[derive(Clone, Copy)]
enum Wait {
    Never,
    Until(Option<Instant>),
}

fn deadline(timeout: Duration) -> Wait {
    Wait::Until(Instant::now().checked_add(timeout))
}

/// A blocking call without deadline wakes this often to check that the peer
/// process is still alive, so a crashed peer cannot make it hang.
const LIVENESS_SLICE: Duration = Duration::from_millis(100);

/// How an endpoint knows whether its peer is attached and alive: the peer's control
/// words and the peer's lock, looked at through this endpoint's own [`Hold`] (see
/// [`crate::alive`]).
struct Peer {
    side: *const Side,
    hold: Hold,
}

impl Peer {
    /// The peer's owner word (its pid, as its own pid namespace numbers it) if the
    /// peer attached and has not detached, yet no process holds its end any more.
    fn died(&self) -> Option<u32> {
        // SAFETY: `side` points into the endpoint's live mapping.
        let owner = unsafe { &*self.side }.owner.load(Ordering::Acquire);
        (owner != 0 && !self.hold.peer_alive()).then_some(owner)
    }

    /// Whether the peer has attached and a process still holds its end.
    fn attached(&self) -> bool {
        // SAFETY: `side` points into the endpoint's live mapping.
        let owner = unsafe { &*self.side }.owner.load(Ordering::Acquire);
        owner != 0 && self.hold.peer_alive()
    }
}

/// The errors of a blocking operation that [`blocking`] tells apart.
trait Blocked {
    fn is_timeout(&self) -> bool;
    fn peer_died(pid: u32) -> Self;
}

impl Blocked for SendError {
    fn is_timeout(&self) -> bool {
        *self == SendError::Timeout
    }
    fn peer_died(pid: u32) -> Self {
        SendError::PeerDied(pid)
    }
}

impl Blocked for RecvError {
    fn is_timeout(&self) -> bool {
        *self == RecvError::Timeout
    }
    fn peer_died(pid: u32) -> Self {
        RecvError::PeerDied(pid)
    }
}

/// Runs `op` with deadlines of at most one liveness slice until it succeeds,
/// fails otherwise, reaches `deadline`, or the peer process died.
fn blocking<T, E: Blocked>(
    peer: &Peer,
    deadline: Option<Instant>,
    mut op: impl FnMut(Option<Instant>) -> Result<T, E>,
) -> Result<T, E> {
    loop {
        let slice = Instant::now() + LIVENESS_SLICE;
        let until = deadline.map_or(slice, |d| d.min(slice));
        match op(Some(until)) {
            Err(e) if e.is_timeout() && deadline.is_none_or(|d| Instant::now() < d) => {
                if let Some(pid) = peer.died() {
                    return Err(E::peer_died(pid));
                }
            }
            r => return r,
        }
    }
}

fn my_pid() -> u32 {
    rustix::process::getpid().as_raw_nonzero().get() as u32
}

/// Attaches this endpoint as the owner of `side`, whose lock is `mine` (`peer`: the
/// peer's): takes the end's lock (fails with `Busy` while another endpoint, of this or
/// any process, holds it), then writes this process's pid into the owner word. The pid
/// only marks the end attached and names it in errors: who is alive is decided by the
/// lock, so pids need not be unique across pid namespaces.
fn claim(side: &Side, mine: Lock<'_>, peer: Lock<'_>) -> Result<Hold, OpenError> {
    let hold = Hold::take(mine, peer, side.owner.load(Ordering::Acquire))?;
    side.owner.store(my_pid(), Ordering::Release);
    Ok(hold)
}

fn release(side: &Side) {
    side.owner.store(0, Ordering::Release);
}

/// Adds `n` to a counter of this endpoint's own side: a load and a store, not a locked
/// read-modify-write (which costs as much as a fence on every message), since only
/// the endpoint holding the side writes its counters (`claim`: one holder at a time).
fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

enum Tx {
    Fifo(Producer),
    Latest(fourslot::Writer),
}

/// The writing end of a channel (one per channel at a time).
pub struct Sender {
    tx: Tx,
    meta: Meta,
    data: *mut u8,
    stride: usize,
    side: *const Side,
    /// The peer, and this end's lock (released after `side` is cleared, on drop).
    peer: Peer,
    // Unmapped last: `tx`, `data`, `side` and `peer` point into them.
    _map: Map,
    _region: Option<Map>,
}

// SAFETY: all pointers point into the owned mapping.
unsafe impl Send for Sender {}

impl Sender {
    /// `region`: the reader region of a split channel (the reader's control words);
    /// `locks`: the writer's and the reader's lock.
    pub(crate) fn new(
        map: Map,
        region: Option<Map>,
        locks: [Lock<'_>; 2],
        meta: Meta,
        l: Layout,
    ) -> Result<Sender, OpenError> {
        let mine = map.side(l.writer_off);
        let peer = region
            .as_ref()
            .map_or(map.side(l.reader_off), |r| r.side(0));
        // SAFETY: `mine` points into the live mapping we own.
        let hold = claim(unsafe { &*mine }, locks[0], locks[1])?;
        // SAFETY: both sides lie in `map`, which the Sender owns and unmaps
        // only after dropping `tx`; this process now owns the writer side.
        let tx = unsafe {
            match (meta.kind, meta.overflow) {
                (Kind::Fifo, Overflow::DropOldest) => {
                    Producer::new(mine, peer, meta.depth).map(|p| Tx::Fifo(p.overwriting()))
                }
                (Kind::Fifo, _) => Producer::new(mine, peer, meta.depth).map(Tx::Fifo),
                (Kind::Latest, _) => fourslot::Writer::new(mine, peer).map(Tx::Latest),
            }
        };
        // SAFETY: `mine` points into the live mapping we own (as above).
        let tx = tx.inspect_err(|_| release(unsafe { &*mine }))?;
        // SAFETY: data_off < total_len = map.len.
        let data = unsafe { map.ptr.add(l.data_off as usize) };
        Ok(Sender {
            tx,
            meta,
            data,
            stride: l.stride as usize,
            side: mine,
            peer: Peer { side: peer, hold },
            _map: map,
            _region: region,
        })
    }

    /// Name, kind, message size and depth of the channel.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Writes one message. A full fifo follows its overflow rule ([`Overflow`]): the
    /// write waits for room (`Block`), drops this message (`DropNewest`, counted in the
    /// writer's `lost`) or the oldest unread one (`DropOldest`, counted in the reader's
    /// `lost` when it skips it). Latest never blocks.
    pub fn write(&mut self, msg: &[u8]) -> Result<(), SendError> {
        self.write_with(msg, Wait::Until(None))
    }

    /// Like [`Self::write`], giving up with [`SendError::Timeout`] after `timeout`.
    pub fn write_timeout(&mut self, msg: &[u8], timeout: Duration) -> Result<(), SendError> {
        self.write_with(msg, deadline(timeout))
    }

    /// Writes one message or fails at once with [`SendError::Full`] (a `DropOldest`
    /// fifo is never full: it drops the oldest unread message).
    #[inline]
    pub fn try_write(&mut self, msg: &[u8]) -> Result<(), SendError> {
        self.write_with(msg, Wait::Never)
    }

    #[inline]
    fn write_with(&mut self, msg: &[u8], wait: Wait) -> Result<(), SendError> {
        let (len, msg_size) = (msg.len(), self.meta.msg_size);
        if len != msg_size as usize {
            return Err(SendError::Length { len, msg_size });
        }
        // SAFETY: `side` points into the still-mapped `_map`.
        let side = unsafe { &*self.side };
        let overflow = self.meta.overflow;
        let slot = match (&mut self.tx, wait, overflow) {
            (Tx::Fifo(p), _, Overflow::DropOldest) => p.reserve_overwriting().map(|(slot, _)| slot),
            (Tx::Fifo(p), Wait::Never, _) => p.try_reserve(),
            (Tx::Fifo(p), Wait::Until(_), Overflow::DropNewest) => match p.try_reserve() {
                Err(SendError::Full) => {
                    add(&side.lost, 1);
                    return Ok(());
                }
                r => r,
            },
            (Tx::Fifo(p), Wait::Until(d), Overflow::Block) => {
                blocking(&self.peer, d, |until| p.reserve(until))
            }
            (Tx::Latest(w), _, _) => Ok(w.begin()),
        };
        if matches!(slot, Err(SendError::Full) | Err(SendError::Timeout)) {
            add(&side.lost, 1);
        }
        let slot = slot?;
        // SAFETY: slot < number of slots (depth or 4) by construction of the
        // algorithms, so the write stays inside the message area; the algorithm
        // guarantees the reader is not reading this slot, except in the overwriting
        // mode, where both sides access the area by atomic words only.
        let dst = unsafe { self.data.add(slot * self.stride) };
        match overflow {
            // SAFETY: `dst` is 8-aligned (the area starts on a page, the stride is a
            // multiple of 8) and `stride >= msg.len()` bytes long inside the mapping.
            Overflow::DropOldest => unsafe { store_words(dst, msg) },
            // SAFETY: as above; no reader accesses this slot meanwhile.
            _ => unsafe { copy_by_words(msg, dst) },
        }
        match &mut self.tx {
            Tx::Fifo(p) => p.commit(),
            Tx::Latest(w) => w.commit(),
        }
        add(&side.count, 1);
        Ok(())
    }

    /// Spin iterations before a blocking write sleeps (fifo only).
    pub fn set_spin(&mut self, spins: u32) {
        if let Tx::Fifo(p) = &mut self.tx {
            p.spin = spins;
        }
    }

    /// How many times a blocking write slept on the futex.
    pub fn sleeps(&self) -> u64 {
        match &self.tx {
            Tx::Fifo(p) => p.sleeps,
            Tx::Latest(_) => 0,
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        match &mut self.tx {
            Tx::Fifo(p) => p.close(),
            Tx::Latest(w) => w.close(),
        }
        // SAFETY: `side` points into the still-mapped `_map`.
        release(unsafe { &*self.side });
    }
}

enum Rx {
    Fifo(Consumer),
    Latest(fourslot::Reader),
}

/// The reading end of a channel (one per channel at a time).
pub struct Receiver {
    rx: Rx,
    meta: Meta,
    data: *const u8,
    stride: usize,
    side: *const Side,
    /// The peer, and this end's lock (released after `side` is cleared, on drop).
    peer: Peer,
    /// Latest: the writer's publication count at the last read (0: none yet).
    seen: u32,
    _map: Map,
    _region: Option<Map>,
}

// SAFETY: all pointers point into the owned mappings.
unsafe impl Send for Receiver {}

impl Receiver {
    /// `region`: the reader region of a split channel (this side's control words);
    /// `locks`: the writer's and the reader's lock.
    pub(crate) fn new(
        map: Map,
        region: Option<Map>,
        locks: [Lock<'_>; 2],
        meta: Meta,
        l: Layout,
    ) -> Result<Receiver, OpenError> {
        let mine = region
            .as_ref()
            .map_or(map.side(l.reader_off), |r| r.side(0));
        let peer = map.side(l.writer_off);
        // SAFETY: `mine` points into the live mapping we own.
        let hold = claim(unsafe { &*mine }, locks[1], locks[0])?;
        // SAFETY: as in Sender::new.
        let rx = unsafe {
            match (meta.kind, meta.overflow) {
                (Kind::Fifo, Overflow::DropOldest) => {
                    Consumer::new(mine, peer, meta.depth).map(|c| Rx::Fifo(c.overwriting()))
                }
                (Kind::Fifo, _) => Consumer::new(mine, peer, meta.depth).map(Rx::Fifo),
                (Kind::Latest, _) => Ok(Rx::Latest(fourslot::Reader::new(mine, peer))),
            }
        };
        // SAFETY: `mine` points into the live mapping we own (as above).
        let rx = rx.inspect_err(|_| release(unsafe { &*mine }))?;
        // SAFETY: data_off < total_len = map.len.
        let data = unsafe { map.ptr.add(l.data_off as usize) };
        Ok(Receiver {
            rx,
            meta,
            data,
            stride: l.stride as usize,
            side: mine,
            peer: Peer { side: peer, hold },
            seen: 0,
            _map: map,
            _region: region,
        })
    }

    /// Name, kind, message size and depth of the channel.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Reads one message into `buf` (exactly the message size). A fifo blocks
    /// while empty and returns [`RecvError::Closed`] once the writer closed and
    /// the ring is drained; latest returns the most recent message at once,
    /// or [`RecvError::Empty`] if none was ever written.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<(), RecvError> {
        self.read_with(buf, Wait::Until(None), None)
    }

    /// Like [`Self::read`], giving up with [`RecvError::Timeout`] after `timeout`.
    pub fn read_timeout(&mut self, buf: &mut [u8], timeout: Duration) -> Result<(), RecvError> {
        self.read_with(buf, deadline(timeout), None)
    }

    /// Like [`Self::read_timeout`], and on a fifo also ends with
    /// [`RecvError::Interrupted`] as soon as `other` differs from `other_seen` or is woken
    /// (`futex_waitv` on both): a task waiting for its input sees a request of its
    /// supervisor at once (`bulkhead_task::Wake`). `other` may live in another mapping.
    pub fn read_timeout_or(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
        other: &AtomicU32,
        other_seen: u32,
    ) -> Result<(), RecvError> {
        self.read_with(buf, deadline(timeout), Some((other, other_seen)))
    }

    /// Reads one message or fails at once with [`RecvError::Empty`].
    #[inline]
    pub fn try_read(&mut self, buf: &mut [u8]) -> Result<(), RecvError> {
        self.read_with(buf, Wait::Never, None)
    }

    /// `interrupt`: a word whose change (or wake-up) ends a fifo's wait, and its value
    /// before the wait.
    #[inline]
    fn read_with(
        &mut self,
        buf: &mut [u8],
        wait: Wait,
        interrupt: Option<(&AtomicU32, u32)>,
    ) -> Result<(), RecvError> {
        let (len, msg_size) = (buf.len(), self.meta.msg_size);
        if len != msg_size as usize {
            return Err(RecvError::Length { len, msg_size });
        }
        loop {
            let slot = match (&mut self.rx, wait) {
                (Rx::Fifo(c), Wait::Never) => match c.try_acquire() {
                    Err(RecvError::Empty) => {
                        if let Some(slot) = c.awaited_slot() {
                            // SAFETY: slot is in range (as below); a prefetch reads nothing.
                            prefetch(unsafe { self.data.add(slot * self.stride) });
                        }
                        return Err(RecvError::Empty);
                    }
                    r => r?,
                },
                (Rx::Fifo(c), Wait::Until(d)) => {
                    blocking(&self.peer, d, |until| match interrupt {
                        Some((word, seen)) => c.acquire_or(until, word, seen),
                        None => c.acquire(until),
                    })?
                }
                (Rx::Latest(r), _) => r.begin()?.ok_or(RecvError::Empty)?,
            };
            // SAFETY: slot is in range by construction (see Sender::write_with).
            let src = unsafe { self.data.add(slot * self.stride) };
            match self.meta.overflow {
                // SAFETY: 8-aligned and in the mapping (see Sender::write_with); the
                // writer may overwrite the slot meanwhile, by atomic words too.
                Overflow::DropOldest => unsafe { load_words(src, buf) },
                // SAFETY: the algorithm guarantees the writer is not writing this slot.
                _ => unsafe { std::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) },
            }
            match &mut self.rx {
                // A drop overwrote the slot while it was copied: take the next one.
                Rx::Fifo(c) if !c.intact() => continue,
                Rx::Fifo(c) => c.release(),
                Rx::Latest(_) => {}
            }
            break;
        }
        // SAFETY: `side` points into the still-mapped region or map.
        let side = unsafe { &*self.side };
        add(&side.count, 1);
        if let Rx::Latest(r) = &self.rx {
            // Messages published since the last one this reader saw, minus the one read.
            let now = r.published();
            let skipped = now.wrapping_sub(self.seen) & crate::ctrl::INDEX;
            if skipped > 1 {
                add(&side.lost, u64::from(skipped - 1));
            }
            self.seen = now;
        }
        Ok(())
    }

    /// Number of messages published so far on a latest channel (wrapping at
    /// 2^31); for a fifo, 0.
    pub fn published(&self) -> u32 {
        match &self.rx {
            Rx::Fifo(_) => 0,
            Rx::Latest(r) => r.published(),
        }
    }

    /// Whether a writer has attached to the channel and its process still holds the
    /// writer's end (e.g. a consumer waiting for its producer to have started).
    pub fn writer_attached(&self) -> bool {
        self.peer.attached()
    }

    /// Spin iterations before a blocking read sleeps (fifo only).
    pub fn set_spin(&mut self, spins: u32) {
        if let Rx::Fifo(c) = &mut self.rx {
            c.spin = spins;
        }
    }

    /// How many times a blocking read slept on the futex.
    pub fn sleeps(&self) -> u64 {
        match &self.rx {
            Rx::Fifo(c) => c.sleeps,
            Rx::Latest(_) => 0,
        }
    }
}

/// Asks the processor to fetch the cache line at `at` (x86-64 `prefetcht0`; nothing
/// elsewhere). A hint, not a read: it cannot fault, returns nothing, and is no access in
/// the memory model, so it may target a slot the writer is writing.
#[inline]
fn prefetch(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch has no preconditions (SSE is part of x86-64).
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(at.cast());
    }
}

/// Copies `msg` to `dst` by 8-byte loads and stores (the last bytes one by one), never
/// by wider loads: a caller has usually just stored its message, field by field, and a
/// load wider than those stores cannot take its bytes from them (x86 store-to-load
/// forwarding); it then waits until every older store has left the store buffer, the
/// previous message's index and slot stores among them, each waiting for its cache line
/// to come back from the reader (issue 36: 94% of the writer's samples on that load).
///
/// # Safety
/// `dst` must be valid for `msg.len()` bytes and not overlap `msg`.
#[inline]
unsafe fn copy_by_words(msg: &[u8], dst: *mut u8) {
    let mut words = msg.chunks_exact(8);
    let mut at = dst;
    for word in &mut words {
        let mut word = u64::from_ne_bytes(word.try_into().expect("8 bytes"));
        // SAFETY: an empty asm block that only "changes" a register: it keeps the
        // compiler from merging these 8-byte loads into wider ones, and does nothing.
        unsafe { std::arch::asm!("/* {0} */", inout(reg) word, options(pure, nomem, nostack)) };
        // SAFETY: `at` stays within `dst`'s `msg.len()` bytes (precondition).
        unsafe {
            std::ptr::write_unaligned(at.cast::<u64>(), word);
            at = at.add(8);
        }
    }
    let rest = words.remainder();
    // SAFETY: the last `rest.len()` bytes of `dst` (precondition).
    unsafe { std::ptr::copy_nonoverlapping(rest.as_ptr(), at, rest.len()) };
}

/// Copies `msg` into the slot at `dst` by 8-byte atomic words (Relaxed), the last one
/// padded with zeros.
///
/// # Safety
/// `dst` must be 8-aligned and valid for `msg.len()` rounded up to 8 bytes, and only
/// accessed by atomic words by others while this runs.
unsafe fn store_words(dst: *mut u8, msg: &[u8]) {
    for (i, chunk) in msg.chunks(8).enumerate() {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        // SAFETY: within the slot and aligned (precondition); an AtomicU64 has the
        // size and alignment of a u64.
        let cell = unsafe { &*(dst.add(8 * i) as *const AtomicU64) };
        cell.store(u64::from_ne_bytes(word), Ordering::Relaxed);
    }
}

/// Copies the slot at `src` into `buf` by 8-byte atomic words (Relaxed).
///
/// # Safety
/// As [`store_words`], for `buf.len()` bytes.
unsafe fn load_words(src: *const u8, buf: &mut [u8]) {
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        // SAFETY: as in `store_words`.
        let cell = unsafe { &*(src.add(8 * i) as *const AtomicU64) };
        let word = cell.load(Ordering::Relaxed).to_ne_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Rx::Fifo(c) = &mut self.rx {
            c.close();
        }
        // SAFETY: `side` points into the still-mapped `_map`.
        release(unsafe { &*self.side });
    }
}
