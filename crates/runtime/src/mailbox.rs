//! A queue between the supervisor's threads that never spins: a mutex and a condition
//! variable (futexes), in place of `std::sync::mpsc`.
//!
//! Why not `mpsc`: its receiver waits for a slot that a sender has reserved but not yet
//! written by spinning with `sched_yield` (`std::sync::mpmc`'s list channel,
//! `Slot::wait_write`), and the supervisor's threads run at different SCHED_FIFO
//! priorities on the same CPUs: the stop-start worker at 44, mode agents boosted, the
//! control loop at 40. When the worker's `recv_timeout` timer preempted the control loop
//! inside a `send` (between reserving the slot and writing it), the worker, above it on
//! the same CPU, yielded to nobody that could finish the send: it spun at 100% of the CPU
//! while the control loop stayed runnable and never ran (seen 2026-11-26 in
//! bench/stop-start at cycle 929, and very likely the cause of a bench/pipes run that did
//! not stop at its timeout). A waiter here sleeps on a futex instead, so whichever thread
//! holds the lock gets the CPU and finishes; a holder is inside the lock only for a
//! `VecDeque` push or pop.
//!
//! Postconditions: every item sent before the last [`Sender`] was dropped is received,
//! in the order sent; [`Receiver::recv_timeout`] returns [`Recv::Closed`] only once the
//! queue is empty and no sender is left; [`Sender::send`] fails once the receiver is gone.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

struct State<T> {
    items: VecDeque<T>,
    senders: usize,
    receiver: bool,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The sending end; clone it for more senders.
pub struct Sender<T>(Arc<Shared<T>>);

/// The receiving end (one).
pub struct Receiver<T>(Arc<Shared<T>>);

/// What [`Receiver::recv_timeout`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Recv<T> {
    Item(T),
    /// Nothing came within the timeout.
    Empty,
    /// Nothing is left and every sender is gone.
    Closed,
}

/// A new queue.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            senders: 1,
            receiver: true,
        }),
        ready: Condvar::new(),
    });
    (Sender(shared.clone()), Receiver(shared))
}

impl<T> Sender<T> {
    /// Queues `item`; gives it back when the receiver is gone.
    pub fn send(&self, item: T) -> Result<(), T> {
        let mut s = self.0.lock();
        if !s.receiver {
            return Err(item);
        }
        s.items.push_back(item);
        drop(s);
        self.0.ready.notify_one();
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.0.lock().senders += 1;
        Sender(self.0.clone())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.senders -= 1;
        if s.senders == 0 {
            drop(s);
            self.0.ready.notify_one();
        }
    }
}

impl<T> Receiver<T> {
    /// The next item, waiting at most `timeout` for one.
    pub fn recv_timeout(&self, timeout: Duration) -> Recv<T> {
        let until = Instant::now() + timeout;
        let mut s = self.0.lock();
        loop {
            if let Some(item) = s.items.pop_front() {
                return Recv::Item(item);
            }
            if s.senders == 0 {
                return Recv::Closed;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Recv::Empty;
            }
            s = match self.0.ready.wait_timeout(s, left) {
                Ok((s, _)) => s,
                Err(e) => e.into_inner().0,
            };
        }
    }

    /// The next item, waiting for one; `None` once nothing is left and every sender is
    /// gone.
    pub fn recv(&self) -> Option<T> {
        let mut s = self.0.lock();
        loop {
            if let Some(item) = s.items.pop_front() {
                return Some(item);
            }
            if s.senders == 0 {
                return None;
            }
            s = self.0.ready.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The next item queued now, without waiting.
    pub fn try_recv(&self) -> Option<T> {
        self.0.lock().items.pop_front()
    }

    /// Every item queued now, without waiting.
    pub fn drain(&self) -> Vec<T> {
        self.0.lock().items.drain(..).collect()
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.0.lock().receiver = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_in_order_then_closed_once_every_sender_is_gone() {
        let (tx, rx) = channel();
        let tx2 = tx.clone();
        tx.send(1).unwrap();
        tx2.send(2).unwrap();
        drop(tx);
        assert_eq!(rx.recv_timeout(Duration::ZERO), Recv::Item(1));
        assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Recv::Item(2));
        assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Recv::Empty);
        drop(tx2);
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Recv::Closed);
        assert_eq!(rx.recv(), None);
    }

    #[test]
    fn try_recv_takes_what_is_queued_in_order_and_does_not_wait() {
        let (tx, rx) = channel();
        assert_eq!(rx.try_recv(), None);
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        assert_eq!(rx.try_recv(), Some(1));
        assert_eq!(rx.try_recv(), Some(2));
        assert_eq!(rx.try_recv(), None);
    }

    #[test]
    fn a_send_after_the_receiver_is_gone_gives_the_item_back() {
        let (tx, rx) = channel();
        drop(rx);
        assert_eq!(tx.send(7), Err(7));
    }

    #[test]
    fn a_waiting_receiver_wakes_at_a_send_from_another_thread() {
        let (tx, rx) = channel();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(3).unwrap();
        });
        let start = Instant::now();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Recv::Item(3));
        assert!(start.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
        assert_eq!(rx.recv(), None);
        assert!(rx.drain().is_empty());
    }

    /// The calling thread on the last CPU it may use under SCHED_FIFO `priority`, or
    /// `None` where the kernel refuses (not root).
    fn pinned_fifo(cpu: usize, priority: i32) -> Option<bulkhead_os::sched::Realtime> {
        bulkhead_os::sched::set_affinity(0, [cpu as u32]).unwrap();
        bulkhead_os::sched::Realtime::enter(priority).ok()
    }

    /// The supervisor's case: a receiver at a higher SCHED_FIFO priority than its sender,
    /// both on one CPU, polling with a short timeout so that its timer preempts the sender
    /// inside `send`. With `std::sync::mpsc` this spins forever in `sched_yield` within
    /// seconds (the module's doc); here every item arrives.
    #[test]
    fn a_higher_priority_receiver_on_the_senders_cpu_gets_every_item() {
        const ITEMS: u64 = 60_000;
        let cpu = *bulkhead_os::sched::own_cpus().last().expect("a CPU") as usize;
        let (tx, rx) = channel::<u64>();
        let (result, outcome) = std::sync::mpsc::channel();
        // Both threads on the CPU at their priorities before the first item.
        let placed = std::sync::Arc::new(std::sync::Barrier::new(2));
        let sender_placed = placed.clone();
        let receiver = std::thread::spawn(move || {
            let rt = pinned_fifo(cpu, 20);
            placed.wait();
            let _rt = rt?;
            let mut next = 0;
            loop {
                match rx.recv_timeout(Duration::from_micros(50)) {
                    Recv::Item(i) => {
                        assert_eq!(i, next, "items out of order");
                        next += 1;
                    }
                    Recv::Empty => {}
                    Recv::Closed => break,
                }
            }
            Some(next)
        });
        std::thread::spawn(move || {
            // Without SCHED_FIFO the receiver is gone: nothing to send.
            let _rt = pinned_fifo(cpu, 10);
            sender_placed.wait();
            for i in 0..ITEMS {
                if tx.send(i).is_err() {
                    break;
                }
                if i % 64 == 0 {
                    std::thread::sleep(Duration::from_micros(1));
                }
            }
            drop(tx);
            let _ = result.send(receiver.join());
        });
        match outcome.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(Some(got))) => assert_eq!(got, ITEMS),
            Ok(Ok(None)) => eprintln!("skipped: SCHED_FIFO refused (needs root)"),
            Ok(Err(_)) => panic!("the receiver panicked"),
            Err(_) => panic!("no result in 120 s: the receiver livelocked"),
        }
    }
}
