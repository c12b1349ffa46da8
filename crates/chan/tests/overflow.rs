//! The overflow rules of a full fifo (`overflow:` of a channel, docs/channels.md): the
//! writer waits (block), drops its message (drop_newest) or the oldest unread one
//! (drop_oldest), each drop counted in `lost` (the writer's for the new message, the
//! reader's for the oldest, when it skips it).

use bulkhead_chan::{Channel, Overflow, SendError, Spec};

fn message(v: u64) -> [u8; 20] {
    let mut m = [0u8; 20];
    m[..8].copy_from_slice(&v.to_le_bytes());
    m[8..16].copy_from_slice(&(!v).to_le_bytes());
    m[16..].copy_from_slice(&(v as u32).to_le_bytes());
    m
}

/// The value of a message, or a panic when its words do not belong together (torn).
fn value(m: &[u8; 20]) -> u64 {
    let v = u64::from_le_bytes(m[..8].try_into().unwrap());
    assert_eq!(
        u64::from_le_bytes(m[8..16].try_into().unwrap()),
        !v,
        "torn: {m:?}"
    );
    assert_eq!(
        u32::from_le_bytes(m[16..].try_into().unwrap()),
        v as u32,
        "torn"
    );
    v
}

fn fifo(name: &str, overflow: Overflow) -> Channel {
    Channel::create(&Spec::fifo(name, 20, 4).with_overflow(overflow)).unwrap()
}

/// Ten writes to a fifo of four nobody reads, then what the reader finds.
fn ten_into_four(name: &str, overflow: Overflow) -> (Vec<u64>, u64) {
    let chan = fifo(name, overflow);
    let mut tx = chan.sender().unwrap();
    let mut rx = chan.receiver().unwrap();
    for v in 0..10 {
        tx.write(&message(v)).unwrap();
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 20];
    while rx.try_read(&mut buf).is_ok() {
        got.push(value(&buf));
    }
    let c = chan.counters().unwrap();
    (got, c.writer.lost + c.reader.lost)
}

#[test]
fn drop_newest_keeps_the_oldest_and_counts_the_rest() {
    assert_eq!(
        ten_into_four("ovf-newest", Overflow::DropNewest),
        (vec![0, 1, 2, 3], 6)
    );
}

#[test]
fn drop_oldest_keeps_the_newest_and_counts_the_rest() {
    assert_eq!(
        ten_into_four("ovf-oldest", Overflow::DropOldest),
        (vec![6, 7, 8, 9], 6)
    );
}

#[test]
fn block_is_the_default_and_try_write_reports_full() {
    let chan = Channel::create(&Spec::fifo("ovf-block", 20, 4)).unwrap();
    assert_eq!(chan.meta().overflow, Overflow::Block);
    let mut tx = chan.sender().unwrap();
    let _rx = chan.receiver().unwrap();
    for v in 0..4 {
        tx.write(&message(v)).unwrap();
    }
    assert_eq!(tx.try_write(&message(4)), Err(SendError::Full));
    let wait = std::time::Duration::from_millis(20);
    assert_eq!(tx.write_timeout(&message(4), wait), Err(SendError::Timeout));
}

/// A writer that never waits against a reader that reads as fast as it can: every
/// message read is whole (never torn, though the writer reuses the slot of a dropped
/// message the reader may be copying), in increasing order, and each message is
/// either read or counted lost by the reader.
#[test]
fn drop_oldest_under_a_concurrent_reader_never_tears_or_reorders() {
    let chan = fifo("ovf-race", Overflow::DropOldest);
    let mut tx = chan.sender().unwrap();
    let mut rx = chan.receiver().unwrap();
    const N: u64 = 200_000;
    let writer = std::thread::spawn(move || {
        for v in 0..N {
            tx.write(&message(v)).unwrap();
        }
    });
    let mut buf = [0u8; 20];
    let (mut read, mut last) = (0u64, None);
    let wait = std::time::Duration::from_millis(200);
    while rx.read_timeout(&mut buf, wait).is_ok() {
        let v = value(&buf);
        assert!(last.is_none_or(|l| v > l), "{v} after {last:?}");
        last = Some(v);
        read += 1;
    }
    writer.join().unwrap();
    assert_eq!(last, Some(N - 1), "the newest message is never dropped");
    assert_eq!(read + chan.counters().unwrap().reader.lost, N);
}

/// The rule travels in the header: whoever opens the channel's file applies it (an
/// unknown code is refused: the layout's header tests).
#[test]
fn the_rule_travels_with_the_channel() {
    let chan = fifo("ovf-header", Overflow::DropOldest);
    let again = Channel::from_fd(rustix::io::dup(&chan).unwrap()).unwrap();
    assert_eq!(again.meta().overflow, Overflow::DropOldest);
}
