//! `Receiver::read_timeout_or`: a fifo read that also ends when a word of another mapping
//! (a task's control block) changes or is woken, the way a sporadic task's input wait
//! hears its supervisor's requests.

use bulkhead_chan::{Channel, RecvError, Spec};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(10);

fn wake(word: &AtomicU32) {
    rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), i32::MAX as u32)
        .unwrap();
}

/// Runs `poke(word)` on another thread 50 ms into a read of an empty fifo with a 10 s
/// timeout; returns the read's result and how long it took.
fn read_while(
    name: &str,
    poke: impl FnOnce(&AtomicU32) + Send,
) -> (Result<(), RecvError>, Duration) {
    let chan = Channel::create(&Spec::fifo(name, 32, 4)).unwrap();
    let (_tx, mut rx) = (chan.sender().unwrap(), chan.receiver().unwrap());
    let word = AtomicU32::new(7);
    let mut m = [0u8; 32];
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            poke(&word);
        });
        let t = Instant::now();
        let r = rx.read_timeout_or(&mut m, LONG, &word, 7);
        (r, t.elapsed())
    })
}

#[test]
fn a_change_of_the_other_word_ends_the_wait() {
    let (r, took) = read_while("intr-change", |w| {
        w.store(8, Ordering::Release);
        wake(w);
    });
    assert!(matches!(r, Err(RecvError::Interrupted)), "{r:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn a_wake_of_the_other_word_without_a_change_ends_the_wait_too() {
    let (r, took) = read_while("intr-wake", wake);
    assert!(matches!(r, Err(RecvError::Interrupted)), "{r:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn a_word_changed_before_the_read_ends_it_at_once_and_a_message_comes_first() {
    let chan = Channel::create(&Spec::fifo("intr-now", 32, 4)).unwrap();
    let (mut tx, mut rx) = (chan.sender().unwrap(), chan.receiver().unwrap());
    let word = AtomicU32::new(1);
    let mut m = [0u8; 32];
    let t = Instant::now();
    let r = rx.read_timeout_or(&mut m, LONG, &word, 0);
    assert!(matches!(r, Err(RecvError::Interrupted)), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    tx.write(&[9; 32]).unwrap();
    rx.read_timeout_or(&mut m, LONG, &word, 0).unwrap();
    assert_eq!(m, [9; 32]);
}

#[test]
fn a_message_or_the_timeout_ends_it_as_read_timeout_does() {
    let chan = Channel::create(&Spec::fifo("intr-msg", 32, 4)).unwrap();
    let (mut tx, mut rx) = (chan.sender().unwrap(), chan.receiver().unwrap());
    let word = AtomicU32::new(0);
    let mut m = [0u8; 32];
    let r = rx.read_timeout_or(&mut m, Duration::from_millis(30), &word, 0);
    assert!(matches!(r, Err(RecvError::Timeout)), "{r:?}");
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            tx.write(&[5; 32]).unwrap();
        });
        rx.read_timeout_or(&mut m, LONG, &word, 0).unwrap();
    });
    assert_eq!(m, [5; 32]);
}
