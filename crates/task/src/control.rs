//! The control block: one page of a memfd shared by the supervisor and one task.
//!
//! Layout ([`Control`], `repr(C)`, native endianness: both sides run on the same machine).
//! Fields marked *supervisor* are written by the supervisor only, *task* by the task only;
//! the task maps the page read-write, so a faulty task can corrupt its own block, which
//! only affects itself: the supervisor treats the task's counters as reports, never as
//! inputs to a decision about another task.
//!
//! **Named counters** ([`NamedCounter`], [`NAMED_COUNTERS`] slots after the name): values
//! a task publishes under a name of at most [`COUNTER_NAME_LEN`] bytes (e.g. the CAN
//! gateway's `ctl.rx_forwarded`). The task claims a slot by writing its name, then
//! publishes it by storing `named_count` = slot + 1 (Release); the supervisor loads
//! `named_count` (Acquire) and reads only the slots below it, so it never sees a half-
//! written name. Only the task writes names and values (one writer: the `Task` handle),
//! a name is never changed once published, and every byte is accessed through relaxed
//! atomics, so a concurrent read is never undefined behaviour; a value read is exact,
//! a snapshot of several is not atomic. The slots survive a restart of the task's
//! process: the new process finds its counters by name and continues them.
//!
//! **Mode words** (M2-Xen IV-B: the DMM tells the programs of its domain the new mode
//! and waits for them): the supervisor stores the new mode's index in `mode`, then the
//! request's sequence number in `mode_seq` (Release) and wakes its futex waiters; the
//! task loads `mode_seq` (Acquire), then `mode`, and when it has adapted stores that
//! sequence number in `mode_ack` (Release). A request is pending while `mode_seq !=
//! mode_ack`. A later request overtakes an earlier one: acknowledging the later
//! acknowledges both.
//!
//! **Stop-start words** (JuMP2start 2.2, Fig. 2: the master asks every domain to save its
//! context, waits for the acknowledgements, then suspends; 2.3: time stitching). The
//! supervisor stores the acknowledgement deadline in `suspend_deadline_ns`, then the
//! request's sequence number in `suspend_seq` (Release) and wakes its futex waiters. The
//! task loads `suspend_seq` (Acquire); once it has saved what it needs, it stores that
//! number in `suspend_ack` (Release). A suspend is pending while `suspend_seq !=
//! suspend_ack`. The supervisor then freezes the task's cgroup, acknowledged or not. At
//! resume, before thawing, it stores the total suspended time in `suspended_ns` and the
//! resume instant in `resumed_at_ns`, then the request's number in `resume_seq`
//! (Release), and wakes its waiters. The system is suspended, as the task sees it, while
//! `suspend_seq != resume_seq`. bulkhead's system time is CLOCK_MONOTONIC minus
//! `suspended_ns` ([`Control::system_time_ns`]).
//!
//! **Start gate**: a task that is not in the initial mode is created held: the
//! supervisor stores 1 in `held` before it starts the process, and the task's first
//! activation waits (futex on `held`) until the word is 0, so the process may attach but
//! runs no job before its mode agent starts it. A task that reaches the closed gate
//! first stores 2 (1 to 2, compare-and-swap), so its agent sees when the program has
//! done its own set-up and sleeps at the gate. Releasing stores 0 (Release) and wakes
//! the futex; a stop request releases the gate too, so a held task can still stop. The
//! gate closes only once, before the process starts: parking a running task again is the
//! mode agent's SIGSTOP.
//!
//! **Release offset** (Boomerang III-E, Fig. 7: phased releases along a pipeline): the
//! task's releases are `epoch_ns + offset_ns + k * T` ([`Control::timing`]).
//! The supervisor stores `offset_ns` before it starts the process and never changes it,
//! so a task waits for its real release in the task library's sleep, not in its job:
//! under SCHED_DEADLINE a sleep inside the job is a self-suspension that the CBS wakeup
//! rule may answer with a postponed deadline.
//! **Timing changes** (a mode that gives a task another budget, period or deadline,
//! M2-Xen IV-B: the DMM re-parameterizes its tasks). The supervisor writes C, T, D, O and
//! `timing_from_ns` as a seqlock: `timing_seq` odd (Relaxed), a Release fence, the
//! stores (Relaxed), `timing_seq` even (Release); the task reads `timing_seq` (Acquire),
//! the fields (Relaxed), an Acquire fence and `timing_seq` again, and retries while it was
//! odd or changed ([`Control::timing`]). One writer: the task's mode agent. The new
//! timing starts at the old grid's first release at or after the change (`timing_from_ns`
//! after the epoch), so the job in progress ends under the old one and no release comes
//! sooner than the old grid would have given it; from there the releases are
//! `epoch_ns + O + k * T` with the new T and O = `timing_from_ns mod T`. The epoch is not
//! touched, so a stop-start's move of the epoch (another writer) still shifts the whole
//! grid.
//! **Message events** ([`MessageEvent`], a ring of [`MESSAGE_EVENTS`]): a task that
//! finishes messages (a pipeline's sink) reports each one's id, origin stamp and
//! completion time. One producer (the task) and one consumer (the supervisor's drain):
//! the task writes entry `msg_written % MESSAGE_EVENTS`, then stores `msg_written + 1`
//! (Release); it drops the event (counting `msg_dropped`) when `msg_written - msg_read`
//! is already [`MESSAGE_EVENTS`]. The supervisor loads `msg_written` (Acquire), reads the
//! entries from `msg_read` on (none when a faulty task stored a count more than
//! [`MESSAGE_EVENTS`] ahead: it skips them) and stores the new `msg_read` (Release). Bounded: a consumer that falls
//! behind loses the newest events, counted, and never blocks the task.
use crate::error::{Error, Result};
use bulkhead_os::futex::{
    wait as futex_wait, wait_until as futex_wait_until, wake_all as futex_wake_all,
};
use bulkhead_os::shm::{self, SharedMap};
use std::os::fd::BorrowedFd;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{fence, AtomicU32, AtomicU64};

/// `b"BHTASK01"` as a little-endian integer.
pub const MAGIC: u64 = u64::from_le_bytes(*b"BHTASK01");
/// 2: named counters; 3: mode words; 4: stop-start words; 5: start gate; 6: release
/// offset and message events; 7: timing changes.
pub const VERSION: u32 = 7;
/// Size of the mapped control block (one page on every Linux platform bulkhead targets).
pub const CONTROL_LEN: usize = 4096;
/// Longest task name stored (bytes, UTF-8, NUL padded).
pub const NAME_LEN: usize = 64;
/// Named counter slots in a control block.
pub const NAMED_COUNTERS: usize = 32;
/// Longest counter name (bytes, UTF-8; room for `<partition>.tx_malformed`); a slot
/// stores it NUL padded in 48 bytes.
pub const COUNTER_NAME_LEN: usize = 47;

/// One named counter slot: the name (48 bytes, NUL padded, as six native-endian
/// u64 words) and the value. Written by the task only.
#[repr(C)]
pub struct NamedCounter {
    pub name: [AtomicU64; 6],
    pub value: AtomicU64,
}

/// The shared control block.
#[repr(C)]
pub struct Control {
    /// [`MAGIC`], stored last by the supervisor (Release) once the rest is written.
    pub magic: AtomicU64,
    pub version: u32,
    /// Index of the task in its system (supervisor).
    pub task_index: u32,
    /// Budget C, period T, relative deadline D, ns (supervisor; a mode switch changes
    /// them under `timing_seq`, see **Timing changes**).
    pub budget_ns: AtomicU64,
    pub period_ns: AtomicU64,
    pub deadline_ns: AtomicU64,
    /// CLOCK_MONOTONIC time of release 0 (supervisor; may move while the task runs).
    pub epoch_ns: AtomicU64,
    /// How many times the supervisor restarted this task (supervisor).
    pub restarts: AtomicU32,
    /// Non-zero: the task should stop (supervisor).
    pub stop: AtomicU32,
    /// The process currently attached (task).
    pub pid: AtomicU32,
    _pad: u32,
    /// Activations started (task).
    pub activations: AtomicU64,
    /// Records dropped because the trace ring was full or closed (task).
    pub dropped: AtomicU64,
    /// Task name, NUL padded (supervisor).
    pub name: [u8; NAME_LEN],
    /// Named counter slots published so far (task; Release after the slot's name).
    pub named_count: AtomicU32,
    _pad2: u32,
    /// Named counters (task).
    pub named: [NamedCounter; NAMED_COUNTERS],
    /// Index of the current mode in the description's mode table (supervisor).
    pub mode: AtomicU32,
    /// Sequence number of the latest mode request, 0 = none (supervisor; futex word).
    pub mode_seq: AtomicU32,
    /// The latest mode request the task acknowledged (task).
    pub mode_ack: AtomicU32,
    _pad3: u32,
    /// Sequence number of the latest suspend request, 0 = none (supervisor; futex word).
    pub suspend_seq: AtomicU32,
    /// The latest suspend request the task acknowledged (task).
    pub suspend_ack: AtomicU32,
    /// The latest suspend request that was resumed (supervisor; futex word).
    pub resume_seq: AtomicU32,
    _pad4: u32,
    /// CLOCK_MONOTONIC instant by which the latest suspend request must be acknowledged
    /// (supervisor; stored before `suspend_seq`).
    pub suspend_deadline_ns: AtomicU64,
    /// Total time the system has spent suspended, ns (supervisor; stored before
    /// `resume_seq`).
    pub suspended_ns: AtomicU64,
    /// CLOCK_MONOTONIC instant at which the latest resume thawed the system (supervisor;
    /// stored before `resume_seq`).
    pub resumed_at_ns: AtomicU64,
    /// Non-zero: the task runs no activation yet (supervisor; futex word; start gate);
    /// 2: the task has reached the gate and waits there (task).
    pub held: AtomicU32,
    _pad5: u32,
    /// Release offset O, ns: releases are `epoch_ns + offset_ns + k * T` (supervisor;
    /// stored before the process starts, changed by a mode switch under `timing_seq`).
    pub offset_ns: AtomicU64,
    /// Message events written (task; Release after the entry).
    pub msg_written: AtomicU64,
    /// Message events the supervisor has read (supervisor).
    pub msg_read: AtomicU64,
    /// Message events dropped because the ring was full (task).
    pub msg_dropped: AtomicU64,
    /// The ring of message events (task).
    pub msgs: [MessageEvent; MESSAGE_EVENTS],
    /// Timing seqlock (supervisor): odd while the supervisor changes the timing.
    pub timing_seq: AtomicU32,
    _pad6: u32,
    /// Where the current timing's first release lies, ns after `epoch_ns` (supervisor;
    /// under `timing_seq`).
    pub timing_from_ns: AtomicU64,
}

/// Entries in the ring of message events: 64 messages per drain of the supervisor.
pub const MESSAGE_EVENTS: usize = 64;

/// One finished message: its id (e.g. a pipeline's sequence number), its origin stamp
/// and the time the task finished it (CLOCK_MONOTONIC ns).
#[repr(C)]
pub struct MessageEvent {
    pub id: AtomicU64,
    pub origin_ns: AtomicU64,
    pub done_ns: AtomicU64,
}

/// A message event as read: (id, origin, done), ns.
pub type Message = (u64, u64, u64);

/// Longest sleep of [`Control::wait_mode_ack`] between two looks at the word.
pub const ACK_RECHECK_NS: u64 = 1_000_000;

/// A task's timing as one consistent snapshot ([`Control::timing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `timing_seq` of the snapshot: it changes with every timing change.
    pub seq: u32,
    pub budget_ns: u64,
    pub period_ns: u64,
    pub deadline_ns: u64,
    /// Release offset O: releases are `epoch + O + k * T`.
    pub offset_ns: u64,
    /// The first release under this timing, ns after the epoch (0 for the timing the
    /// task started with).
    pub from_ns: u64,
}

impl Timing {
    /// The index of the first release under this timing (`from_ns = O + k * T`).
    pub fn first_index(&self) -> u64 {
        self.from_ns.saturating_sub(self.offset_ns) / self.period_ns
    }
}

/// A mode request as the task saw it: acknowledge it with its `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeChange {
    pub seq: u32,
    pub mode: u32,
}

const _: () = assert!(std::mem::size_of::<Control>() <= CONTROL_LEN);

/// A shared, writable mapping of a control block.
pub struct Mapping(SharedMap);

impl Mapping {
    /// Maps the first [`CONTROL_LEN`] bytes of `fd` shared and writable.
    /// Precondition: the file is at least that long (checked) and sealed against shrinking
    /// (checked by [`Mapping::open`]; the creator seals it).
    pub fn map(fd: BorrowedFd<'_>) -> Result<Mapping> {
        let size = shm::size(fd).map_err(|e| Error::io("fstat control block", e))?;
        if size < CONTROL_LEN as u64 {
            return Err(Error::BadControl(format!(
                "file is {size} bytes, want {CONTROL_LEN}"
            )));
        }
        let map = SharedMap::new(fd, CONTROL_LEN, true)
            .map_err(|e| Error::io("mmap control block", e))?;
        Ok(Mapping(map))
    }

    /// Maps a control block received from the supervisor and validates it.
    pub fn open(fd: BorrowedFd<'_>) -> Result<Mapping> {
        if shm::seals(fd).map_or(true, |seals| seals & shm::SEAL_SHRINK == 0) {
            return Err(Error::BadControl(
                "not a memfd sealed against shrinking".into(),
            ));
        }
        let m = Mapping::map(fd)?;
        let c = m.get();
        let magic = c.magic.load(std::sync::atomic::Ordering::Acquire);
        if magic != MAGIC {
            return Err(Error::BadControl(format!(
                "magic {magic:#x}, want {MAGIC:#x}"
            )));
        }
        if c.version != VERSION {
            return Err(Error::BadControl(format!(
                "version {}, want {VERSION}",
                c.version
            )));
        }
        if c.period_ns.load(Relaxed) == 0 || c.deadline_ns.load(Relaxed) == 0 {
            return Err(Error::BadControl("zero period or deadline".into()));
        }
        Ok(m)
    }

    /// The control block.
    pub fn get(&self) -> &Control {
        // SAFETY: the mapping is CONTROL_LEN >= size_of::<Control>() bytes, page-aligned,
        // alive as long as self; every field is valid for any bit pattern.
        unsafe { &*self.0.as_ptr().cast::<Control>() }
    }

    /// Mutable access for initialization by the creator, before it publishes the magic.
    ///
    /// # Safety
    /// No other process may have mapped the block yet.
    pub(crate) unsafe fn get_mut(&mut self) -> &mut Control {
        // SAFETY: the caller guarantees exclusive access; the mapping is as for `get`.
        unsafe { &mut *self.0.as_ptr().cast::<Control>() }
    }
}

impl NamedCounter {
    /// The slot's name (as published; lossy if a faulty task wrote invalid UTF-8).
    pub fn name(&self) -> String {
        let mut bytes = [0u8; 48];
        for (chunk, word) in bytes.chunks_mut(8).zip(&self.name) {
            chunk.copy_from_slice(&word.load(Relaxed).to_ne_bytes());
        }
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(48);
        String::from_utf8_lossy(&bytes[..end]).into_owned()
    }

    /// Writes `name` (at most [`COUNTER_NAME_LEN`] bytes, checked by the caller).
    fn set_name(&self, name: &str) {
        let mut bytes = [0u8; 48];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        for (chunk, word) in bytes.chunks(8).zip(&self.name) {
            word.store(
                u64::from_ne_bytes(chunk.try_into().expect("8 bytes")),
                Relaxed,
            );
        }
    }
}

/// Checks a counter name: 1..=[`COUNTER_NAME_LEN`] bytes, no NUL.
pub fn check_counter_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > COUNTER_NAME_LEN || name.contains('\0') {
        return Err(Error::Invalid(format!(
            "counter name {name:?}: want 1 to {COUNTER_NAME_LEN} bytes without NUL"
        )));
    }
    Ok(())
}

impl Control {
    /// Puts one message event in the ring (task side, the only writer); false when the
    /// ring is full and the event was dropped (counted in `msg_dropped`).
    pub fn push_message(&self, (id, origin_ns, done_ns): Message) -> bool {
        let written = self.msg_written.load(Relaxed);
        if written.wrapping_sub(self.msg_read.load(Acquire)) >= MESSAGE_EVENTS as u64 {
            self.msg_dropped.fetch_add(1, Relaxed);
            return false;
        }
        let e = &self.msgs[(written % MESSAGE_EVENTS as u64) as usize];
        e.id.store(id, Relaxed);
        e.origin_ns.store(origin_ns, Relaxed);
        e.done_ns.store(done_ns, Relaxed);
        self.msg_written.store(written.wrapping_add(1), Release);
        true
    }

    /// Moves the message events waiting in the ring into `out` (supervisor side, the
    /// only reader; at most [`MESSAGE_EVENTS`] per call); returns how many. A count more
    /// than a ring ahead, which [`Control::push_message`] never stores, is a faulty
    /// task's: its events are skipped, none taken, so that it cannot flood the log.
    pub fn take_messages(&self, out: &mut Vec<Message>) -> usize {
        let written = self.msg_written.load(Acquire);
        let read = self.msg_read.load(Relaxed);
        if written.wrapping_sub(read) > MESSAGE_EVENTS as u64 {
            self.msg_read.store(written, Release);
            return 0;
        }
        let n = written.wrapping_sub(read);
        for i in 0..n {
            let e = &self.msgs[(read.wrapping_add(i) % MESSAGE_EVENTS as u64) as usize];
            out.push((
                e.id.load(Relaxed),
                e.origin_ns.load(Relaxed),
                e.done_ns.load(Relaxed),
            ));
        }
        self.msg_read.store(read.wrapping_add(n), Release);
        n as usize
    }

    /// The published named counters, in slot order (supervisor side).
    pub fn named_counters(&self) -> Vec<(String, u64)> {
        let n = (self.named_count.load(Acquire) as usize).min(NAMED_COUNTERS);
        self.named[..n]
            .iter()
            .map(|c| (c.name(), c.value.load(Relaxed)))
            .collect()
    }

    /// The slot of counter `name`, claiming and publishing a new one if the task has
    /// none of that name yet (task side; the only writer of the slots).
    pub fn claim_counter(&self, name: &str) -> Result<usize> {
        check_counter_name(name)?;
        let n = (self.named_count.load(Acquire) as usize).min(NAMED_COUNTERS);
        if let Some(i) = self.named[..n].iter().position(|c| c.name() == name) {
            return Ok(i);
        }
        if n == NAMED_COUNTERS {
            return Err(Error::Invalid(format!(
                "counter {name:?}: all {NAMED_COUNTERS} named counter slots are used"
            )));
        }
        self.named[n].set_name(name);
        self.named[n].value.store(0, Relaxed);
        self.named_count.store(n as u32 + 1, Release);
        Ok(n)
    }

    /// The latest mode request (seq 0: the initial mode, nothing to acknowledge).
    pub fn mode_change(&self) -> ModeChange {
        let seq = self.mode_seq.load(Acquire);
        ModeChange {
            seq,
            mode: self.mode.load(Relaxed),
        }
    }

    /// Opens the start gate and wakes a task waiting at it (supervisor side).
    pub fn release(&self) {
        self.held.store(0, Release);
        futex_wake_all(&self.held);
    }

    /// Waits while the start gate is closed (task side), first marking the gate as
    /// reached (1 to 2) for [`Control::waits_at_gate`]. Returns at once when it is open;
    /// a wake-up without the gate opening (a spurious one) returns too: the caller loops.
    pub fn wait_released(&self) {
        if let Err(0) = self.held.compare_exchange(1, 2, AcqRel, Acquire) {
            return;
        }
        // FUTEX_WAIT sleeps only while the word is still 2, so a release between the
        // exchange above and the call is not lost; no timeout (the release or a stop
        // request wakes it).
        futex_wait(&self.held, 2, None);
    }

    /// Whether the task has reached its closed start gate ([`Control::wait_released`]):
    /// its program has done its own set-up and waits to be started (supervisor side).
    pub fn waits_at_gate(&self) -> bool {
        self.held.load(Acquire) == 2
    }

    /// Publishes a request to switch to `mode` and wakes the waiting task (supervisor
    /// side). Returns its sequence number.
    pub fn request_mode(&self, mode: u32) -> u32 {
        let seq = self.publish_mode(mode);
        // The task's sleep for its next release waits on `suspend_seq`
        // ([`Control::sleep_until_suspend`]): wake it too, so a task that acknowledges
        // at once sees the request without waiting for its release.
        futex_wake_all(&self.suspend_seq);
        seq
    }

    /// Publishes a request to switch to `mode`, waking a task that waits for one
    /// ([`Control::wait_mode`]) but not its sleep for its next release (supervisor side):
    /// for a program that declared it acknowledges every request at once, which reads
    /// the mode here whenever it asks and acknowledges at its next release, and whose
    /// acknowledgement nobody waits for. Returns its sequence number.
    pub fn publish_mode(&self, mode: u32) -> u32 {
        self.mode.store(mode, Relaxed);
        let seq = self.mode_seq.fetch_add(1, Release).wrapping_add(1);
        futex_wake_all(&self.mode_seq);
        seq
    }

    /// Waits until a mode request is pending (`mode_seq != mode_ack`) or `timeout`
    /// passes (`None`: forever); returns the pending request, if any (task side).
    pub fn wait_mode(&self, timeout: Option<std::time::Duration>) -> Option<ModeChange> {
        let deadline = timeout.map(|t| crate::clock::now_ns() + t.as_nanos() as u64);
        loop {
            let change = self.mode_change();
            if change.seq != self.mode_ack.load(Acquire) {
                return Some(change);
            }
            let left = time_left(deadline)?;
            futex_wait(&self.mode_seq, change.seq, left);
        }
    }

    /// The task has adapted to `change` (task side); wakes a mode agent waiting in
    /// [`Control::wait_mode_ack`].
    pub fn ack_mode(&self, change: ModeChange) {
        self.mode_ack.store(change.seq, Release);
        futex_wake_all(&self.mode_ack);
    }

    /// Waits until the task acknowledged request `seq` (or a later one) or
    /// CLOCK_MONOTONIC reaches `deadline_ns`; whether it did (supervisor side). Woken by
    /// [`Control::ack_mode`]; it also looks every [`ACK_RECHECK_NS`], for programs built
    /// with a library that stored the acknowledgement without waking.
    pub fn wait_mode_ack(&self, seq: u32, deadline_ns: u64) -> bool {
        loop {
            let acked = self.mode_ack.load(Acquire);
            if acked.wrapping_sub(seq) as i32 >= 0 {
                return true;
            }
            match deadline_ns.checked_sub(crate::clock::now_ns()) {
                Some(left) if left > 0 => {
                    futex_wait(&self.mode_ack, acked, Some(left.min(ACK_RECHECK_NS)))
                }
                _ => return false,
            }
        }
    }

    /// Publishes suspend request `seq` (one more than the previous one), due to be
    /// acknowledged by `deadline_ns` (CLOCK_MONOTONIC), and wakes the waiting task
    /// (supervisor side).
    pub fn request_suspend(&self, seq: u32, deadline_ns: u64) {
        self.suspend_deadline_ns.store(deadline_ns, Relaxed);
        self.suspend_seq.store(seq, Release);
        futex_wake_all(&self.suspend_seq);
    }

    /// The pending suspend request and its acknowledgement deadline, if the task has not
    /// acknowledged the latest one (task side).
    pub fn pending_suspend(&self) -> Option<(u32, u64)> {
        let seq = self.suspend_seq.load(Acquire);
        (seq != self.suspend_ack.load(Acquire))
            .then(|| (seq, self.suspend_deadline_ns.load(Relaxed)))
    }

    /// The task has saved what it needs for suspend request `seq` (task side); wakes a
    /// supervisor waiting in [`Control::wait_suspend_ack`].
    pub fn ack_suspend(&self, seq: u32) {
        self.suspend_ack.store(seq, Release);
        futex_wake_all(&self.suspend_ack);
    }

    /// Waits until the task acknowledged suspend request `seq` or CLOCK_MONOTONIC reaches
    /// `deadline_ns`; whether it did (supervisor side). Woken by
    /// [`Control::ack_suspend`]; it also looks every [`ACK_RECHECK_NS`], for programs
    /// built with a library that stored the acknowledgement without waking.
    pub fn wait_suspend_ack(&self, seq: u32, deadline_ns: u64) -> bool {
        loop {
            let acked = self.suspend_ack.load(Acquire);
            if acked == seq {
                return true;
            }
            match deadline_ns.checked_sub(crate::clock::now_ns()) {
                Some(left) if left > 0 => {
                    futex_wait(&self.suspend_ack, acked, Some(left.min(ACK_RECHECK_NS)))
                }
                _ => return false,
            }
        }
    }

    /// Whether the task acknowledged suspend request `seq` (supervisor side).
    pub fn suspend_acked(&self, seq: u32) -> bool {
        self.suspend_ack.load(Acquire) == seq
    }

    /// Publishes the resume of suspend request `seq`: the system's total suspended time
    /// and the resume instant, then the sequence number; wakes the waiters (supervisor
    /// side). Precondition: the task's cgroup is still frozen or the task is not yet
    /// released, so that it never sees `resume_seq` before the two times.
    pub fn publish_resume(&self, seq: u32, suspended_ns: u64, resumed_at_ns: u64) {
        self.suspended_ns.store(suspended_ns, Relaxed);
        self.resumed_at_ns.store(resumed_at_ns, Relaxed);
        self.resume_seq.store(seq, Release);
        futex_wake_all(&self.resume_seq);
    }

    /// Whether a suspend request is outstanding (requested and not yet resumed).
    pub fn suspended(&self) -> bool {
        self.suspend_seq.load(Acquire) != self.resume_seq.load(Acquire)
    }

    /// Waits until the outstanding suspend request, if any, is resumed or `timeout`
    /// passes (`None`: forever); returns whether the system is running (task side).
    pub fn wait_resume(&self, timeout: Option<std::time::Duration>) -> bool {
        let deadline = timeout.map(|t| crate::clock::now_ns() + t.as_nanos() as u64);
        loop {
            let resumed = self.resume_seq.load(Acquire);
            if resumed == self.suspend_seq.load(Acquire) {
                return true;
            }
            let Some(left) = time_left(deadline) else {
                return false;
            };
            futex_wait(&self.resume_seq, resumed, left);
        }
    }

    /// Sleeps until CLOCK_MONOTONIC reaches `until_ns` or a suspend request later than
    /// `seen_seq` arrives, whichever is first (task side: a task waiting for its next
    /// release hears a suspend request at once). Returns early on a signal too; the caller
    /// loops.
    pub fn sleep_until_suspend(&self, seen_seq: u32, until_ns: u64) {
        futex_wait_until(&self.suspend_seq, seen_seq, until_ns);
    }

    /// bulkhead's system time at CLOCK_MONOTONIC instant `monotonic_ns`: the time the
    /// system has run, without the time it spent suspended (JuMP2start 2.3).
    pub fn system_time_ns(&self, monotonic_ns: u64) -> u64 {
        monotonic_ns.saturating_sub(self.suspended_ns.load(Acquire))
    }

    /// The task's timing, consistent with itself (the seqlock of **Timing changes**).
    pub fn timing(&self) -> Timing {
        loop {
            let seq = self.timing_seq.load(Acquire);
            let t = Timing {
                seq,
                budget_ns: self.budget_ns.load(Relaxed),
                period_ns: self.period_ns.load(Relaxed),
                deadline_ns: self.deadline_ns.load(Relaxed),
                offset_ns: self.offset_ns.load(Relaxed),
                from_ns: self.timing_from_ns.load(Relaxed),
            };
            fence(Acquire);
            if seq % 2 == 0 && self.timing_seq.load(Relaxed) == seq {
                return t;
            }
            std::hint::spin_loop();
        }
    }

    /// Gives the task budget C, period T and deadline D from the first release of its
    /// current grid at or after CLOCK_MONOTONIC `now_ns` on (see **Timing changes**);
    /// returns the new timing. Precondition: the caller is the block's only timing
    /// writer (the task's mode agent), and `period_ns > 0`.
    pub fn set_timing(
        &self,
        budget_ns: u64,
        period_ns: u64,
        deadline_ns: u64,
        now_ns: u64,
    ) -> Timing {
        let old = self.timing();
        let since = now_ns.saturating_sub(self.epoch_ns.load(Acquire) + old.offset_ns);
        let from_ns = old.offset_ns + since.div_ceil(old.period_ns) * old.period_ns;
        let offset_ns = if period_ns == old.period_ns {
            old.offset_ns
        } else {
            from_ns % period_ns
        };
        self.store_timing(
            old.seq,
            [budget_ns, period_ns, deadline_ns, offset_ns],
            from_ns,
        )
    }

    /// Gives a task that its mode agent starts (it joins at a mode switch) budget C,
    /// period T and deadline D on a grid whose first release is CLOCK_MONOTONIC `at_ns`,
    /// the start: M2-Xen IV-C's task engine starts a task by continuing it (SIGCONT)
    /// while its DMM changes the task set, before the DMM acknowledges (IV-B, Step 4), so
    /// its first job is released there, not on the grid of the schedule's start (the
    /// simulation releases it at the acknowledgement). Returns the new timing; same
    /// precondition as [`Control::set_timing`].
    pub fn start_timing(
        &self,
        budget_ns: u64,
        period_ns: u64,
        deadline_ns: u64,
        at_ns: u64,
    ) -> Timing {
        let old = self.timing();
        let from_ns = at_ns.saturating_sub(self.epoch_ns.load(Acquire));
        let offset_ns = from_ns % period_ns;
        self.store_timing(
            old.seq,
            [budget_ns, period_ns, deadline_ns, offset_ns],
            from_ns,
        )
    }

    /// Stores C, T, D, O (`[budget, period, deadline, offset]`) and `from_ns` under the
    /// timing seqlock whose last even value is `seq`.
    fn store_timing(
        &self,
        seq: u32,
        [budget_ns, period_ns, deadline_ns, offset_ns]: [u64; 4],
        from_ns: u64,
    ) -> Timing {
        self.timing_seq.store(seq.wrapping_add(1), Relaxed);
        fence(Release);
        self.budget_ns.store(budget_ns, Relaxed);
        self.period_ns.store(period_ns, Relaxed);
        self.deadline_ns.store(deadline_ns, Relaxed);
        self.offset_ns.store(offset_ns, Relaxed);
        self.timing_from_ns.store(from_ns, Relaxed);
        let seq = seq.wrapping_add(2);
        self.timing_seq.store(seq, Release);
        Timing {
            seq,
            budget_ns,
            period_ns,
            deadline_ns,
            offset_ns,
            from_ns,
        }
    }

    /// The task name.
    pub fn name(&self) -> String {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }
}

/// The time left until `deadline` (CLOCK_MONOTONIC ns): `None` once it has passed,
/// `Some(None)` without a deadline.
fn time_left(deadline: Option<u64>) -> Option<Option<u64>> {
    match deadline {
        Some(d) => match d.checked_sub(crate::clock::now_ns()) {
            Some(left) if left > 0 => Some(Some(left)),
            _ => None,
        },
        None => Some(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn block() -> Box<Control> {
        // SAFETY: every field of Control is an integer, an atomic or an array of them:
        // all-zero is a valid value (a fresh memfd page is all zero too).
        unsafe { Box::new(std::mem::zeroed()) }
    }

    #[test]
    fn message_events_pass_in_order_and_a_full_ring_drops_the_newest() {
        let c = block();
        let mut out = Vec::new();
        for id in 0..MESSAGE_EVENTS as u64 + 10 {
            let kept = c.push_message((id, 1000 + id, 2000 + id));
            assert_eq!(kept, id < MESSAGE_EVENTS as u64, "{id}");
        }
        assert_eq!(c.msg_dropped.load(Relaxed), 10);
        assert_eq!(c.take_messages(&mut out), MESSAGE_EVENTS);
        assert_eq!(out.first(), Some(&(0, 1000, 2000)));
        assert_eq!(out.last(), Some(&(63, 1063, 2063)));
        assert!(c.push_message((500, 1, 2)));
        out.clear();
        assert_eq!(c.take_messages(&mut out), 1);
        assert_eq!(out, vec![(500, 1, 2)]);
        // A faulty task's count far ahead: the supervisor skips to it, taking nothing.
        c.msg_written.store(1 << 40, Release);
        out.clear();
        assert_eq!(c.take_messages(&mut out), 0);
        assert!(c.push_message((7, 1, 2)));
        assert_eq!(c.take_messages(&mut out), 1);
    }

    #[test]
    fn an_acknowledgement_wakes_the_agent_and_a_request_the_sleeping_task() {
        let c = block();
        let c = &*c;
        std::thread::scope(|s| {
            let task = s.spawn(|| {
                // The task's sleep for a release 5 s away, as in wait_next_period.
                let seen = c.suspend_seq.load(Acquire);
                c.sleep_until_suspend(seen, crate::clock::now_ns() + 5_000_000_000);
                let change = c.mode_change();
                c.ack_mode(change);
                change
            });
            std::thread::sleep(Duration::from_millis(20));
            let seq = c.request_mode(4);
            let t = Instant::now();
            assert!(c.wait_mode_ack(seq, crate::clock::now_ns() + 5_000_000_000));
            // Woken by the request and the acknowledgement, not by the 5 s timeouts.
            assert!(t.elapsed() < Duration::from_secs(4));
            assert_eq!(task.join().unwrap(), ModeChange { seq, mode: 4 });
        });
        assert!(!c.wait_mode_ack(9, crate::clock::now_ns() + 1_000_000));
    }

    #[test]
    fn a_published_mode_leaves_the_release_sleep_alone_and_a_request_wakes_it() {
        let c = block();
        let c = &*c;
        // Whether the task's sleep for a release `for_ns` away ended before it.
        let woken_early = |announce: &dyn Fn() -> u32, for_ns: u64| {
            std::thread::scope(|s| {
                let task = s.spawn(|| {
                    let seen = c.suspend_seq.load(Acquire);
                    let until = crate::clock::now_ns() + for_ns;
                    c.sleep_until_suspend(seen, until);
                    crate::clock::now_ns() < until
                });
                std::thread::sleep(Duration::from_millis(50));
                let seq = announce();
                (task.join().unwrap(), seq)
            })
        };
        let (early, seq) = woken_early(&|| c.publish_mode(2), 300_000_000);
        assert!(!early, "published: slept until its release");
        assert_eq!(c.mode_change(), ModeChange { seq, mode: 2 });
        let (early, seq) = woken_early(&|| c.request_mode(3), 5_000_000_000);
        assert!(early, "requested: woken before its release");
        assert_eq!(c.mode_change(), ModeChange { seq, mode: 3 });
    }

    #[test]
    fn a_mode_request_wakes_the_waiter_and_is_pending_until_acknowledged() {
        let c = block();
        assert_eq!(c.wait_mode(Some(Duration::from_millis(5))), None);
        let change = std::thread::scope(|s| {
            let waiter = s.spawn(|| c.wait_mode(Some(Duration::from_secs(5))));
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(c.request_mode(3), 1);
            waiter.join().unwrap()
        });
        assert_eq!(change, Some(ModeChange { seq: 1, mode: 3 }));
        // Still pending: a second wait returns at once.
        let t = Instant::now();
        assert_eq!(c.wait_mode(None), change);
        assert!(t.elapsed() < Duration::from_secs(1));
        c.ack_mode(change.unwrap());
        assert_eq!(c.wait_mode(Some(Duration::ZERO)), None);
    }

    #[test]
    fn a_suspend_is_pending_until_acknowledged_and_outstanding_until_resumed() {
        let c = block();
        assert_eq!(c.pending_suspend(), None);
        assert!(!c.suspended());
        c.request_suspend(1, 5_000);
        assert_eq!(c.pending_suspend(), Some((1, 5_000)));
        assert!(c.suspended());
        assert!(!c.suspend_acked(1));
        c.ack_suspend(1);
        assert!(c.suspend_acked(1));
        assert_eq!(c.pending_suspend(), None);
        assert!(!c.wait_resume(Some(Duration::from_millis(5))));
        assert!(!c.wait_suspend_ack(2, crate::clock::now_ns() + 1_000_000));
        let running = std::thread::scope(|s| {
            let waiter = s.spawn(|| c.wait_resume(Some(Duration::from_secs(5))));
            std::thread::sleep(Duration::from_millis(20));
            c.publish_resume(1, 700, 9_000);
            waiter.join().unwrap()
        });
        assert!(running);
        assert!(!c.suspended());
        assert_eq!(c.resumed_at_ns.load(Acquire), 9_000);
        // System time leaves out the 700 ns spent suspended.
        assert_eq!(c.system_time_ns(10_000), 9_300);
    }

    #[test]
    fn a_suspend_acknowledgement_wakes_the_waiting_supervisor() {
        let c = block();
        let c = &*c;
        std::thread::scope(|s| {
            let task = s.spawn(|| {
                let seen = c.suspend_seq.load(Acquire);
                c.sleep_until_suspend(seen, crate::clock::now_ns() + 5_000_000_000);
                let (seq, _) = c.pending_suspend().unwrap();
                c.ack_suspend(seq);
            });
            std::thread::sleep(Duration::from_millis(20));
            c.request_suspend(3, crate::clock::now_ns() + 5_000_000_000);
            let t = Instant::now();
            assert!(c.wait_suspend_ack(3, crate::clock::now_ns() + 5_000_000_000));
            // Woken by the acknowledgement, not by the 5 s deadline.
            assert!(t.elapsed() < Duration::from_secs(4));
            task.join().unwrap();
        });
    }

    #[test]
    fn a_later_request_overtakes_an_earlier_one() {
        let c = block();
        c.request_mode(1);
        c.request_mode(2);
        let change = c.wait_mode(Some(Duration::ZERO)).unwrap();
        assert_eq!(change, ModeChange { seq: 2, mode: 2 });
        c.ack_mode(change);
        assert_eq!(c.mode_ack.load(Acquire), 2);
        assert_eq!(c.wait_mode(Some(Duration::ZERO)), None);
    }
}
