//! The `fifo` algorithm: a lossless single-producer single-consumer ring.
//!
//! This is the synchronous shmcomm channel of DriveOS (section 5.1.4: "a FIFO
//! ring buffer for synchronous communication", Programs 1-2) and Boomerang's
//! `RT_FIFO` buffering (sections II-B and III-B: "the sender must block when
//! the buffer is full, and the receiver must block when the buffer is empty").
//!
//! Indices run over `0..2*depth` (one extra wrap bit), so `head == tail` means
//! empty and `head - tail == depth` (mod `2*depth`) means full, for any depth.
//! The writer owns `head` (its [`Side::seq`]), the reader owns `tail`. Every
//! value read from the peer is bounds-checked before use: a corrupt index
//! yields a `Corrupt` error from that operation, never an out-of-bounds slot,
//! and attaching never fails because of the peer's words (each side starts
//! from its own index), so a peer that scribbles on its own words only loses
//! its own messages.
//!
//! **Cached indices** (the local copies of the peer's index of MCRingBuffer: Lee, Bu,
//! Chandranmenon, "A lock-free, cache-efficient multi-core synchronization mechanism
//! for line-rate network traffic monitoring", IPDPS 2010): the writer keeps the room its
//! last read of the reader's index left ([`Producer`]'s `room`), the reader the writer's
//! index it last read, and each reads the peer's word again only when the ring looks
//! full (empty) by them: while it is neither, a side does not read the peer's index
//! (its line stays where the peer writes it). A cached value is a lower bound of the room (messages) there is:
//! the peer's index only moves forward. The orderings are those of the uncached ring:
//! the writer reuses only slots whose release it acquired (the reader's Release store
//! of its index after copying them out, the writer's Acquire load), and the reader
//! copies only messages whose publication it acquired.
//!
//! **Slipping behind the writer** (the "temporal slipping" of FastForward: Giacomoni,
//! Moseley, Vachharajani, "FastForward for efficient pipeline parallelism", PPoPP 2008):
//! a reader that keeps up with its writer finds one message per read of the writer's
//! index, and each read pulls the writer's index line (and the slot's) back to its cache
//! just before the writer stores to it again: every message then costs the writer two
//! ownership transfers, and it is the writer that bounds the throughput. So the first
//! time the reader finds the ring empty after a read of the writer's index that brought
//! new messages, it waits a number of spin hints before reporting `Empty`, leaving both
//! lines to the writer meanwhile; the messages written during the wait are then read as
//! a batch, with one read of the writer's index. The wait is [`SLIP_MIN`] spin hints
//! while the first read after each wait brings one message, and doubles (up to
//! [`SLIP_MAX`]) each time that read brings more: a lone message, as in a round trip,
//! arrives a round trip after the previous one, later than the short wait ends, while a
//! writer that streams lets the reader wait long enough for batches that pay for their
//! wait. No message is held back (the wait is only on an empty ring, once per batch).
//! Only timing changes: the reader's loads and their orderings are as above.
//!
//! **Prefetching a lone message's slot.** Each message reaches a polling reader in two
//! cache-line transfers one after the other: the writer's index line, whose new value it
//! waits for, then the slot's line, which it loads only once the index showed the
//! message. While reads bring one message each (the wait is [`SLIP_MIN`]: a round trip,
//! not a stream), [`Consumer::awaited_slot`] names the slot of the next message after
//! each empty read, and the reader's endpoint prefetches that line as it polls: the
//! writer's store to the slot takes the line, the next prefetch fetches it back with the
//! message in it, and the index store that follows finds the slot's line already on its
//! way. A prefetch is a hint, not a load: it reads nothing the algorithm uses and cannot
//! fault, so the orderings above are unchanged. A streaming writer's reader (longer
//! waits) does not prefetch: the line it would pull is the one the writer is filling.
//!
//! Blocking spins `spin` times, then sleeps on the futex of the peer's `seq`
//! word. No wake-up is lost: the sleeper sets its own `waiting` flag, issues a
//! SeqCst fence, re-reads the peer's word and sleeps only while that word still
//! holds the value it re-read (the kernel compares atomically); the waker
//! publishes its index, issues a SeqCst fence, then reads the sleeper's flag
//! and wakes if it is set. By the two fences at least one of them sees the
//! other's store (Dekker). Only the sleeper clears its flag.
//!
//! **Publishing without a fence.** The waker's fence stalls until its index store
//! has reached the peer's cache, on every message: that halved the round trip and cut
//! the throughput to a fifth of a bare ring's. So a side that has not slept for
//! [`CALM_OPS`] of its own publications sets its `fence_free` word, promising to issue a
//! *heavy* barrier ([`sync::heavy_barrier`], `membarrier(2)`) instead of its fence the
//! next time it sleeps, after clearing `fence_free` and setting `waiting`. A waker that
//! reads the peer's `fence_free` set after publishing (with only a compiler barrier,
//! [`sync::light_barrier`], between) neither fences nor reads `waiting`: it can skip the
//! wake. Why: let the sleeper's sleep be `W: fence_free = 0, waiting = 1; H: heavy
//! barrier; R: re-read seq` and the waker's publication `S: store seq; L: load
//! fence_free`. The heavy barrier acts as a SeqCst fence of the waker at some point P
//! during H. If L is after P, L sees W's 0 (only the sleeper writes `fence_free`, and it
//! sets it again only once awake), so the waker takes the fenced path. If L is before
//! P, so is S, and R sees S: the sleeper does not sleep on the old index. A side sets
//! `fence_free` only if its heavy barrier works, and reads the peer's only if its own
//! process is registered for the peer's heavy barriers ([`sync::barriers_ready`]);
//! otherwise both fence as above. A side that sleeps at least every [`CALM_OPS`]
//! publications never sets `fence_free` and pays no heavy barrier; one that stops
//! sleeping pays one heavy barrier (a few microseconds) when it sleeps again.
//!
//! **Overwriting mode** (a channel with `overflow: drop_oldest`, [`Producer::overwriting`],
//! [`Consumer::overwriting`]): the writer never waits; when `depth` messages are unread
//! it drops the oldest to make room. Both sides then count absolute message positions
//! in their [`Side::pos`] (the writer's messages written, the reader's next message),
//! message `n` living in slot `n mod depth`, and the writer publishes in
//! [`Side::floor`] the position of the oldest message it has not dropped. The reader
//! skips to the floor when it is behind it. A drop lets the writer reuse the slot of a
//! message the reader may be copying at that moment, so the message area is accessed
//! with per-word atomics in this mode and a copy is validated as a seqlock read is
//! (Lamport; Boehm, "Can Seqlocks Get Along With Programming Language Memory Models?",
//! MSPC 2012): the writer stores the floor, then a SeqCst fence, then the slot; the
//! reader copies the slot, then an Acquire fence, then loads the floor again; a floor
//! past the message it copied means the copy may be torn, and it is discarded
//! ([`Consumer::intact`]). A message read intact was written before its position was
//! published (the writer's `pos`, Release; the reader's Acquire load). The reader counts
//! the messages it skips in its [`Side::lost`].

use crate::ctrl::{Side, CLOSED, INDEX};
use crate::error::{OpenError, RecvError, SendError};
use crate::sync::{self, fence, AtomicU32, Ordering::*};
use std::time::Instant;

/// Largest supported depth (indices need `2*depth` values below bit 31).
pub const MAX_DEPTH: u32 = 1 << 24;

/// A side's publications without a sleep after which it sets its `fence_free` (module
/// doc): one heavy barrier at the next sleep costs about as much as this many fences.
#[cfg(not(loom))]
pub const CALM_OPS: u32 = 256;
/// In the loom model, after one publication, so that every model crosses the protocol.
#[cfg(loom)]
pub const CALM_OPS: u32 = 1;

/// Shared state of one end: its own words, the peer's words, the depth, and where
/// this side stands in the fence-free protocol (module doc).
struct Ends {
    mine: *const Side,
    peer: *const Side,
    depth: u32,
    /// This process is registered for heavy barriers and can issue them.
    barriers: bool,
    /// Publications left before this side sets its `fence_free` (counting down from
    /// [`CALM_OPS`] after each sleep; 0 once it did, or once it found it cannot).
    calm: u32,
    /// The value this side last stored in its `fence_free`.
    fence_free: bool,
}

impl Ends {
    /// The ends of a side whose holder may have left its `fence_free` set: this one
    /// keeps the promise (its next sleep issues the heavy barrier). Enters the
    /// fence-free protocol (module doc) when this process can.
    ///
    /// # Safety
    /// As [`Producer::new`].
    unsafe fn new(mine: *const Side, peer: *const Side, depth: u32) -> Ends {
        // SAFETY: valid by the caller's contract.
        let fence_free = unsafe { &*mine }.fence_free.load(Relaxed) != 0;
        Ends {
            mine,
            peer,
            depth,
            barriers: sync::barriers_ready(),
            calm: CALM_OPS,
            fence_free,
        }
    }
    #[inline]
    fn mine(&self) -> &Side {
        // SAFETY: `new_*` require both pointers valid for the lifetime of self.
        unsafe { &*self.mine }
    }
    #[inline]
    fn peer(&self) -> &Side {
        // SAFETY: as in `mine`.
        unsafe { &*self.peer }
    }
    #[inline]
    fn next(&self, i: u32) -> u32 {
        if i + 1 == 2 * self.depth {
            0
        } else {
            i + 1
        }
    }
    #[inline]
    fn slot(&self, i: u32) -> usize {
        (if i >= self.depth { i - self.depth } else { i }) as usize
    }
    /// Number of messages in the ring between `tail` and `head`, or an error
    /// if the peer's index is out of range.
    #[inline]
    fn used(&self, head: u32, tail: u32) -> Result<u32, &'static str> {
        let n = 2 * self.depth;
        if head >= n || tail >= n {
            return Err("fifo index out of range");
        }
        // (head - tail) mod n without a division: both are below n.
        let used = if head >= tail {
            head - tail
        } else {
            head + n - tail
        };
        if used > self.depth {
            return Err("fifo indices more than depth apart");
        }
        Ok(used)
    }
    /// Publishes `index` as this side's position and wakes a sleeping peer.
    ///
    /// Postcondition: a peer that sleeps on an older index (or is about to) is woken,
    /// or sees `index` before it sleeps (module doc: fenced, or fence-free when the
    /// peer's `fence_free` is set).
    #[inline]
    fn publish(&mut self, index: u32) {
        self.mine().seq.store(index, Release);
        sync::light_barrier();
        if !(self.barriers && self.peer().fence_free.load(Relaxed) != 0) {
            fence(SeqCst);
            if self.peer().waiting.load(Relaxed) != 0 {
                sync::wake(&self.mine().seq);
            }
        }
        if self.calm != 0 {
            self.calm -= 1;
            if self.calm == 0 {
                self.go_fence_free();
            }
        }
    }
    /// After [`CALM_OPS`] publications without a sleep: sets this side's `fence_free`
    /// if its heavy barrier works (module doc). Out of line: once per calm spell.
    #[cold]
    fn go_fence_free(&mut self) {
        if self.barriers && !self.fence_free {
            self.fence_free = true;
            self.mine().fence_free.store(1, Relaxed);
        }
    }
    /// Marks this side closed and wakes the peer unconditionally.
    fn close(&self, index: u32) {
        self.mine().seq.store(index | CLOSED, Release);
        fence(SeqCst);
        sync::wake(&self.mine().seq);
    }
    /// Sleeps until the peer's `seq` differs from `seen` (or spuriously): `wait(word,
    /// value)` is the futex wait on the peer's `seq` while it holds `value`.
    /// Returns whether it actually called the futex.
    ///
    /// Precondition: `seen` is the peer's index this side last read, with which it
    /// could not proceed. Postcondition: when it returns after sleeping, the peer
    /// published a newer index, woke it, or the wait failed; no publication of the
    /// peer after `seen` is missed (module doc).
    fn sleep<E>(
        &mut self,
        seen: u32,
        wait: impl FnOnce(&AtomicU32, u32) -> Result<(), E>,
    ) -> Result<bool, E> {
        self.calm = CALM_OPS;
        self.mine().waiting.store(1, Relaxed);
        if self.fence_free {
            self.fence_free = false;
            self.mine().fence_free.store(0, Relaxed);
            // The peer may still publish without a fence until this returns. A
            // failure here means this process refused itself membarrier after
            // attaching (a seccomp filter installed later), which its contract rules
            // out; the fence below is then the best left to do.
            sync::heavy_barrier();
        }
        fence(SeqCst);
        let word = &self.peer().seq;
        let now = word.load(Relaxed);
        let slept = now == seen;
        let r = if slept { wait(word, now) } else { Ok(()) };
        self.mine().waiting.store(0, Relaxed);
        r.map(|()| slept)
    }
}

/// Spin iterations before sleeping, by default.
pub const DEFAULT_SPIN: u32 = 2000;

/// Writer end of the fifo algorithm.
pub struct Producer {
    ends: Ends,
    head: u32,
    /// The reader's index as this side last read it (validated).
    tail_seen: u32,
    /// Slots free at `head` by `tail_seen`: while it is not 0, a reserve needs neither
    /// the reader's index nor a bounds check (the index is re-read only when the ring
    /// looks full; Lamport's cached index, as in FastForward and MCRingBuffer).
    room: u32,
    /// Overwriting mode: (messages written, oldest position not dropped).
    overwrite: Option<(u64, u64)>,
    /// Spin iterations before sleeping.
    pub spin: u32,
    /// Number of futex sleeps so far.
    pub sleeps: u64,
}

// SAFETY: the pointed-to words are atomics in memory that outlives the
// Producer (constructor contract); nothing is thread-local.
unsafe impl Send for Producer {}

impl Producer {
    /// Attaches the writer, continuing from the index it last published.
    ///
    /// # Safety
    /// `mine` and `peer` must point to [`Side`]s valid (and never unmapped)
    /// for the lifetime of the returned value; only this producer may write
    /// `mine` while it lives. `depth` must be in `1..=MAX_DEPTH`.
    pub unsafe fn new(
        mine: *const Side,
        peer: *const Side,
        depth: u32,
    ) -> Result<Producer, OpenError> {
        // SAFETY: the caller's contract.
        let ends = unsafe { Ends::new(mine, peer, depth) };
        let head = ends.mine().seq.load(Acquire) & INDEX;
        if head >= 2 * depth {
            return Err(OpenError::Corrupt("own fifo index out of range"));
        }
        let tail = ends.peer().seq.load(Acquire) & INDEX;
        // A corrupt peer index is not this side's failure: it shows as an
        // error on each operation until the peer repairs it.
        let (tail, used) = match ends.used(head, tail) {
            Ok(used) => (tail, used),
            Err(_) => (head, 0),
        };
        ends.mine().seq.store(head, Release);
        Ok(Producer {
            ends,
            head,
            tail_seen: tail,
            room: depth - used,
            overwrite: None,
            spin: DEFAULT_SPIN,
            sleeps: 0,
        })
    }

    /// Switches to the overwriting mode (module doc), continuing from the positions
    /// this side published.
    pub fn overwriting(mut self) -> Producer {
        let mine = self.ends.mine();
        self.overwrite = Some((mine.pos.load(Acquire), mine.floor.load(Acquire)));
        self
    }

    /// Overwriting mode: the slot for the next message, never waiting; `true` beside
    /// it when the oldest unread message was dropped to make room. `Closed` once the
    /// reader closed.
    pub fn reserve_overwriting(&mut self) -> Result<(usize, bool), SendError> {
        let depth = u64::from(self.ends.depth);
        let (written, floor) = self.overwrite.as_mut().expect("overwriting mode");
        if self.ends.peer().seq.load(Acquire) & CLOSED != 0 {
            return Err(SendError::Closed);
        }
        let read = self.ends.peer().pos.load(Acquire).min(*written);
        let dropped = *written - (*floor).max(read) >= depth;
        if dropped {
            *floor = *written + 1 - depth;
            self.ends.mine().floor.store(*floor, Relaxed);
            // Orders the floor before the slot's words (module doc).
            fence(SeqCst);
        }
        Ok(((*written % depth) as usize, dropped))
    }

    /// Slot number free for the next message, or `Full` / `Closed`.
    #[inline]
    pub fn try_reserve(&mut self) -> Result<usize, SendError> {
        if self.room != 0 {
            return Ok(self.ends.slot(self.head));
        }
        let t = self.ends.peer().seq.load(Acquire);
        if t == self.tail_seen {
            // Still full: the same (valid) index, not closed. A busy-polling writer
            // stays on this short path.
            return Err(SendError::Full);
        }
        let used = self.ends.used(self.head, t & INDEX);
        let used = used.map_err(SendError::Corrupt)?;
        self.tail_seen = t & INDEX;
        self.room = self.ends.depth - used;
        if self.room != 0 {
            Ok(self.ends.slot(self.head))
        } else if t & CLOSED != 0 {
            Err(SendError::Closed)
        } else {
            Err(SendError::Full)
        }
    }

    /// Like [`Self::try_reserve`] but waits for room: spins, then sleeps.
    pub fn reserve(&mut self, deadline: Option<Instant>) -> Result<usize, SendError> {
        for _ in 0..self.spin {
            match self.try_reserve() {
                Err(SendError::Full) => sync::spin_hint(),
                r => return r,
            }
        }
        loop {
            match self.try_reserve() {
                Err(SendError::Full) => {}
                r => return r,
            }
            let wait = |word: &AtomicU32, value| sync::wait(word, value, deadline);
            let slept = self.ends.sleep(self.tail_seen, wait);
            if slept.map_err(|sync::TimedOut| SendError::Timeout)? {
                self.sleeps += 1;
            }
        }
    }

    /// Publishes the message written into the reserved slot.
    ///
    /// Precondition: a reserve returned that slot since the last commit.
    #[inline]
    pub fn commit(&mut self) {
        if let Some((written, _)) = &mut self.overwrite {
            *written += 1;
            self.ends.mine().pos.store(*written, Release);
        } else {
            self.room -= 1;
        }
        self.head = self.ends.next(self.head);
        self.ends.publish(self.head);
    }

    /// Marks the writer closed; the reader drains what is left, then gets `Closed`.
    pub fn close(&mut self) {
        self.ends.close(self.head);
    }
}

/// Spin hints a reader waits on finding the ring empty after its last read of the writer's
/// index brought one message (module doc: slipping behind the writer). 60-120 ns on this
/// project's machine (a `pause` takes 16-30 ns there): under the ~190 ns round trip of two
/// busy-polling processes, so that a round trip's next message does not wait for it.
pub const SLIP_MIN: u32 = 4;
/// The longest wait, after reads that brought several messages each (a streaming writer).
#[cfg(not(loom))]
pub const SLIP_MAX: u32 = 32;
/// In the loom model as short as the shortest, so that models stay small.
#[cfg(loom)]
pub const SLIP_MAX: u32 = SLIP_MIN;

/// Waits `spins` spin hints (module doc: slipping behind the writer). Out of line: once
/// per batch of messages.
#[cold]
#[inline(never)]
fn slip_behind(spins: u32) {
    for _ in 0..spins {
        sync::spin_hint();
    }
}

/// Reader end of the fifo algorithm.
pub struct Consumer {
    ends: Ends,
    tail: u32,
    head_seen: u32,
    /// Spin hints to wait on finding the ring empty next, 0 for none: set by a read of
    /// the writer's index that brought messages (module doc: slipping behind the writer).
    slip: u32,
    /// The wait after a read that brings messages: [`SLIP_MIN`], doubled (up to
    /// [`SLIP_MAX`]) each time the first such read after a wait brings more than one.
    slip_len: u32,
    /// It waited since the last read that brought messages.
    slipped: bool,
    /// Overwriting mode: the position of the next message to read.
    overwrite: Option<u64>,
    /// Spin iterations before sleeping.
    pub spin: u32,
    /// Number of futex sleeps so far.
    pub sleeps: u64,
}

// SAFETY: as for Producer.
unsafe impl Send for Consumer {}

impl Consumer {
    /// Attaches the reader, continuing from the index it last published.
    ///
    /// # Safety
    /// Same contract as [`Producer::new`], with the roles swapped.
    pub unsafe fn new(
        mine: *const Side,
        peer: *const Side,
        depth: u32,
    ) -> Result<Consumer, OpenError> {
        // SAFETY: the caller's contract.
        let ends = unsafe { Ends::new(mine, peer, depth) };
        let tail = ends.mine().seq.load(Acquire) & INDEX;
        if tail >= 2 * depth {
            return Err(OpenError::Corrupt("own fifo index out of range"));
        }
        ends.mine().seq.store(tail, Release);
        Ok(Consumer {
            ends,
            tail,
            head_seen: tail,
            slip: 0,
            slip_len: SLIP_MIN,
            slipped: false,
            overwrite: None,
            spin: DEFAULT_SPIN,
            sleeps: 0,
        })
    }

    /// Switches to the overwriting mode (module doc), continuing from the position
    /// this side published.
    pub fn overwriting(mut self) -> Consumer {
        self.overwrite = Some(self.ends.mine().pos.load(Acquire));
        self
    }

    /// Overwriting mode: after copying the acquired slot, whether the copy is the
    /// message (no drop overwrote the slot meanwhile); if not, the next acquire skips
    /// to the oldest message left. Always true in the normal mode.
    #[inline]
    pub fn intact(&self) -> bool {
        let Some(next) = self.overwrite else {
            return true;
        };
        fence(Acquire);
        self.ends.peer().floor.load(Relaxed) <= next
    }

    /// Overwriting mode: [`Self::try_acquire`] by positions, skipping the dropped.
    fn try_acquire_overwriting(&mut self, next: u64) -> Result<usize, RecvError> {
        let floor = self.ends.peer().floor.load(Acquire);
        let next = match floor > next {
            true => {
                // Dropped before this reader got them: lost here, where it is exact
                // (the writer cannot tell a drop from a read it has not seen yet).
                let lost = &self.ends.mine().lost;
                lost.fetch_add(floor - next, std::sync::atomic::Ordering::Relaxed);
                self.skip_to(floor);
                floor
            }
            false => next,
        };
        let peer = self.ends.peer();
        let h = peer.seq.load(Acquire);
        let written = peer.pos.load(Acquire);
        self.head_seen = h & INDEX;
        if written > next {
            Ok((next % u64::from(self.ends.depth)) as usize)
        } else if h & CLOSED != 0 {
            Err(RecvError::Closed)
        } else {
            Err(RecvError::Empty)
        }
    }

    /// Overwriting mode: moves to position `to`, publishing it (and its index).
    fn skip_to(&mut self, to: u64) {
        self.overwrite = Some(to);
        self.ends.mine().pos.store(to, Release);
        self.tail = (to % (2 * u64::from(self.ends.depth))) as u32;
        self.ends.publish(self.tail);
    }

    /// Slot number of the oldest unread message, or `Empty` / `Closed`.
    ///
    /// Postcondition: `Empty` only if the writer's index this call read (Acquire) held no
    /// message past this side's; the wait before returning it (module doc: slipping
    /// behind the writer) comes after that read and neither reads nor writes shared memory.
    #[inline]
    pub fn try_acquire(&mut self) -> Result<usize, RecvError> {
        if let Some(next) = self.overwrite {
            return self.try_acquire_overwriting(next);
        }
        if self.head_seen != self.tail {
            return Ok(self.ends.slot(self.tail));
        }
        let h = self.ends.peer().seq.load(Acquire);
        if h == self.tail {
            // Still empty: the same (valid) index, not closed. A busy-polling reader
            // stays on this short path.
            if self.slip != 0 {
                slip_behind(std::mem::take(&mut self.slip));
                self.slipped = true;
            }
            return Err(RecvError::Empty);
        }
        let used = self.ends.used(h & INDEX, self.tail);
        let used = used.map_err(RecvError::Corrupt)?;
        self.head_seen = h & INDEX;
        if used != 0 {
            if std::mem::take(&mut self.slipped) {
                self.slip_len = match used {
                    1 => SLIP_MIN,
                    _ => (2 * self.slip_len).min(SLIP_MAX),
                };
            }
            self.slip = self.slip_len;
            Ok(self.ends.slot(self.tail))
        } else if h & CLOSED != 0 {
            Err(RecvError::Closed)
        } else {
            Err(RecvError::Empty)
        }
    }

    /// The slot of the next message when the last [`Self::try_acquire`] found the ring
    /// empty while reads bring one message each (its wait, if one was due, done): the
    /// caller may prefetch that slot's line while it polls (module doc: prefetching a lone
    /// message's slot). `None` in the overwriting mode and while reads bring batches.
    #[inline]
    pub fn awaited_slot(&self) -> Option<usize> {
        let lone = self.slip == 0 && self.slip_len == SLIP_MIN && self.overwrite.is_none();
        lone.then(|| self.ends.slot(self.tail))
    }

    /// Like [`Self::try_acquire`] but waits for a message: spins, then sleeps.
    pub fn acquire(&mut self, deadline: Option<Instant>) -> Result<usize, RecvError> {
        self.acquire_with(|word, value| {
            sync::wait(word, value, deadline).map_err(|sync::TimedOut| RecvError::Timeout)
        })
    }

    /// Like [`Self::acquire`], and ends with [`RecvError::Interrupted`] as soon as
    /// `other` differs from `other_seen` or is woken ([`sync::wait_either`]).
    #[cfg(not(loom))]
    pub fn acquire_or(
        &mut self,
        deadline: Option<Instant>,
        other: &AtomicU32,
        other_seen: u32,
    ) -> Result<usize, RecvError> {
        self.acquire_with(|word, value| {
            match sync::wait_either(word, value, other, other_seen, deadline) {
                Ok(sync::Woken::Mine) => Ok(()),
                Ok(sync::Woken::Other) => Err(RecvError::Interrupted),
                Err(sync::TimedOut) => Err(RecvError::Timeout),
            }
        })
    }

    /// Spins, then sleeps with `wait` (the futex wait on the writer's index) until a
    /// message is there or `wait` fails.
    fn acquire_with(
        &mut self,
        mut wait: impl FnMut(&AtomicU32, u32) -> Result<(), RecvError>,
    ) -> Result<usize, RecvError> {
        for _ in 0..self.spin {
            match self.try_acquire() {
                Err(RecvError::Empty) => sync::spin_hint(),
                r => return r,
            }
        }
        loop {
            match self.try_acquire() {
                Err(RecvError::Empty) => {}
                r => return r,
            }
            if self.ends.sleep(self.head_seen, &mut wait)? {
                self.sleeps += 1;
            }
        }
    }

    /// Frees the slot returned by the last acquire.
    #[inline]
    pub fn release(&mut self) {
        if let Some(next) = self.overwrite {
            self.skip_to(next + 1);
            return;
        }
        self.tail = self.ends.next(self.tail);
        self.ends.publish(self.tail);
    }

    /// Marks the reader closed; a writer blocked on a full ring gets `Closed`.
    pub fn close(&mut self) {
        self.ends.close(self.tail);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// A reader taking messages one by one names the slot the next message will be
    /// written to (module doc: prefetching a lone message's slot), across laps of the
    /// indices; once its reads bring batches, it names none.
    #[test]
    fn awaited_slot_is_the_next_write_while_messages_come_one_by_one() {
        let depth = 3;
        let (w, r) = (Side::new(), Side::new());
        // SAFETY: both sides live until the end of the test, written only by these.
        let mut p = unsafe { Producer::new(&w, &r, depth) }.unwrap();
        // SAFETY: as above.
        let mut c = unsafe { Consumer::new(&r, &w, depth) }.unwrap();
        for _ in 0..4 * depth {
            p.try_reserve().unwrap();
            p.commit();
            c.try_acquire().unwrap();
            c.release();
            assert_eq!(c.try_acquire(), Err(RecvError::Empty));
            assert_eq!(c.awaited_slot(), p.try_reserve().ok());
        }
        for _ in 0..2 {
            p.try_reserve().unwrap();
            p.commit();
        }
        for _ in 0..2 {
            c.try_acquire().unwrap();
            c.release();
        }
        assert_eq!(c.try_acquire(), Err(RecvError::Empty));
        assert_eq!(c.awaited_slot(), None, "a batch came: the writer streams");
    }

    proptest! {
        /// The cached indices (module doc) under wrap-around: a writer and a reader
        /// taking turns at random, over many laps of the `2*depth` indices, where each
        /// side's cached view of the other may be stale. A reserve succeeds exactly when
        /// fewer than `depth` messages are unread, an acquire exactly when one is, and
        /// the reader gets every message once, in order.
        #[test]
        fn cached_indices_are_exact_across_laps(depth in 1u32..6, writes in proptest::collection::vec(any::<bool>(), 0..400)) {
            let (w, r) = (Side::new(), Side::new());
            // SAFETY: both sides live until the end of the test, written only by these.
            let mut p = unsafe { Producer::new(&w, &r, depth) }.unwrap();
            // SAFETY: as above.
            let mut c = unsafe { Consumer::new(&r, &w, depth) }.unwrap();
            let mut slots = vec![0u64; depth as usize];
            let mut unread = VecDeque::new();
            for (n, write) in (1u64..).zip(writes) {
                if write {
                    match p.try_reserve() {
                        Ok(slot) => {
                            prop_assert!(unread.len() < depth as usize, "reserved a slot of a full ring");
                            slots[slot] = n;
                            unread.push_back(n);
                            p.commit();
                        }
                        Err(e) => prop_assert_eq!((e, unread.len()), (SendError::Full, depth as usize)),
                    }
                } else {
                    match c.try_acquire() {
                        Ok(slot) => {
                            prop_assert_eq!(Some(slots[slot]), unread.pop_front());
                            c.release();
                        }
                        Err(e) => prop_assert_eq!((e, unread.len()), (RecvError::Empty, 0)),
                    }
                }
            }
        }
    }
}
