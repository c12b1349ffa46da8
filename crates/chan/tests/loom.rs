//! Model checks of the channel algorithms with loom: every interleaving (up
//! to the preemption bound) of one writer and one reader thread running the
//! very code that runs over shared memory, with a futex modelled by a mutex
//! and condition variable (src/sync.rs). Loom fails a model on a data race
//! on a message slot (a torn message), a deadlock (a lost wake-up: both
//! sides asleep) or a failed assertion (loss, reordering, stale data).
//!
//! Each model was checked to fail when its algorithm is broken on purpose:
//! dropping the sleeper's fence gives a deadlock, so does a sleeper that clears its
//! `fence_free` only after re-reading the peer's index (the fence-free protocol of
//! src/fifo.rs: every model crosses it, `CALM_OPS` being 1 under loom), and dropping either
//! four-slot fence or letting the writer pick the pair being read gives a
//! causality violation on a slot.
//!
//! Run: RUSTFLAGS="--cfg loom" cargo test -p bulkhead-chan --release --test loom
#![cfg(loom)]

use bulkhead_chan::ctrl::Side;
use bulkhead_chan::fifo::{Consumer, Producer};
use bulkhead_chan::fourslot::{Reader, Writer};
use bulkhead_chan::{RecvError, SendError};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

struct Shared {
    writer: Side,
    reader: Side,
    slots: Vec<UnsafeCell<u64>>,
}

fn shared(slots: usize) -> Arc<Shared> {
    Arc::new(Shared {
        writer: Side::new(),
        reader: Side::new(),
        slots: (0..slots).map(|_| UnsafeCell::new(0)).collect(),
    })
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

fn fifo_run(depth: u32, count: u64, spin: u32) {
    let s = shared(depth as usize);
    let w = s.clone();
    let writer = thread::spawn(move || {
        // SAFETY: the Sides live in the Arc, which outlives the producer.
        let mut p = unsafe { Producer::new(&w.writer, &w.reader, depth) }.unwrap();
        p.spin = spin;
        for v in 1..=count {
            let slot = p.reserve(None).unwrap();
            // SAFETY: loom checks that no read of this slot is concurrent.
            w.slots[slot].with_mut(|d| unsafe { *d = v });
            p.commit();
        }
        p.close();
    });
    // SAFETY: as above.
    let mut c = unsafe { Consumer::new(&s.reader, &s.writer, depth) }.unwrap();
    c.spin = spin;
    for want in 1..=count {
        let slot = c.acquire(None).unwrap();
        // SAFETY: loom checks that no write of this slot is concurrent.
        let got = s.slots[slot].with(|d| unsafe { *d });
        assert_eq!(got, want, "fifo lost or reordered a message");
        c.release();
    }
    assert!(
        matches!(c.acquire(None), Err(RecvError::Closed)),
        "close must wake the reader"
    );
    writer.join().unwrap();
}

#[test]
fn fifo_depth_1_both_sides_sleep_without_lost_wakeup() {
    model(|| fifo_run(1, 3, 0));
}

#[test]
fn fifo_depth_2_wraps_in_order() {
    model(|| fifo_run(2, 4, 0));
}

#[test]
fn fifo_spin_then_sleep() {
    model(|| fifo_run(1, 2, 1));
}

#[test]
fn fifo_writer_blocked_on_full_is_woken_by_reader_close() {
    model(|| {
        let s = shared(1);
        let r = s.clone();
        let reader = thread::spawn(move || {
            // SAFETY: the Sides live in the Arc.
            let mut c = unsafe { Consumer::new(&r.reader, &r.writer, 1) }.unwrap();
            c.spin = 0;
            let slot = c.acquire(None).unwrap();
            r.slots[slot].with(|d| assert_eq!(unsafe { *d }, 1));
            c.release();
            c.close();
        });
        // SAFETY: as above.
        let mut p = unsafe { Producer::new(&s.writer, &s.reader, 1) }.unwrap();
        p.spin = 0;
        let mut results = Vec::new();
        for v in 1..=3u64 {
            match p.reserve(None) {
                Ok(slot) => {
                    s.slots[slot].with_mut(|d| unsafe { *d = v });
                    p.commit();
                    results.push(true);
                }
                Err(SendError::Closed) => results.push(false),
                Err(e) => panic!("{e}"),
            }
        }
        // The first message fits; the third can only fail once the reader closed.
        assert!(results[0] && !results[2]);
        reader.join().unwrap();
    });
}

#[test]
fn four_slot_never_torn_and_fresh() {
    model(|| {
        const WRITES: u64 = 3;
        let s = shared(4);
        let (w, r) = (s.clone(), s.clone());
        let writer = thread::spawn(move || {
            // SAFETY: the Sides live in the Arc.
            let mut wr = unsafe { Writer::new(&w.writer, &w.reader) }.unwrap();
            for v in 1..=WRITES {
                let slot = wr.begin();
                // SAFETY: loom reports a race if the reader reads this slot now.
                w.slots[slot].with_mut(|d| unsafe { *d = v });
                wr.commit();
            }
        });
        let reader = thread::spawn(move || {
            // SAFETY: as above.
            let mut rd = unsafe { Reader::new(&r.reader, &r.writer) };
            let (mut last, mut reads) = (0, 0);
            while reads < 2 {
                match rd.begin().unwrap() {
                    None => thread::yield_now(),
                    Some(slot) => {
                        // SAFETY: loom reports a race if the writer writes this slot now.
                        let v = r.slots[slot].with(|d| unsafe { *d });
                        assert!(v >= last && v >= 1, "freshness went back: {last} -> {v}");
                        (last, reads) = (v, reads + 1);
                    }
                }
            }
            rd
        });
        writer.join().unwrap();
        let mut rd = reader.join().unwrap();
        let slot = rd.begin().unwrap().expect("published");
        // SAFETY: both threads have finished.
        let v = s.slots[slot].with(|d| unsafe { *d });
        assert_eq!(v, WRITES, "after the writer finished, the latest value");
    });
}

/// The overwriting fifo (`overflow: drop_oldest`): a writer that never waits against a
/// reader, a message being two words a slot holds as atomics (as `Sender` does in this
/// mode). Every message the reader keeps is whole and newer than the last, and the
/// newest is never dropped. Checked to fail when the reader keeps a copy without
/// [`Consumer::intact`] (a torn or reordered message).
#[test]
fn fifo_overwriting_never_torn_nor_reordered() {
    use loom::sync::atomic::{AtomicU64, Ordering::Relaxed};
    model(|| {
        const WRITES: u64 = 3;
        let words: Arc<Vec<[AtomicU64; 2]>> = Arc::new(
            (0..1)
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
        );
        let s = shared(1);
        let (w, ww) = (s.clone(), words.clone());
        let writer = thread::spawn(move || {
            // SAFETY: the Sides live in the Arc.
            let p = unsafe { Producer::new(&w.writer, &w.reader, 1) }.unwrap();
            let mut p = p.overwriting();
            for v in 1..=WRITES {
                let (slot, _) = p.reserve_overwriting().unwrap();
                ww[slot][0].store(v, Relaxed);
                ww[slot][1].store(v, Relaxed);
                p.commit();
            }
            p.close();
        });
        // SAFETY: as above.
        let c = unsafe { Consumer::new(&s.reader, &s.writer, 1) }.unwrap();
        let mut c = c.overwriting();
        c.spin = 0;
        let mut last = 0;
        loop {
            let slot = match c.acquire(None) {
                Ok(slot) => slot,
                Err(RecvError::Closed) => break,
                Err(e) => panic!("{e}"),
            };
            let (a, b) = (words[slot][0].load(Relaxed), words[slot][1].load(Relaxed));
            if !c.intact() {
                continue;
            }
            assert_eq!(a, b, "torn message");
            assert!(a > last, "reordered: {a} after {last}");
            last = a;
            c.release();
        }
        assert_eq!(last, WRITES, "the newest message is never dropped");
        writer.join().unwrap();
    });
}
