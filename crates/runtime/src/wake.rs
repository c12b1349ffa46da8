//! Waking the run's threads on evidence instead of polling them (docs/health.md): each
//! thread that acts on a health decision (the unwindowed keeper, the rt drain thread,
//! the supervisor's loop) waits in an epoll set of its own on what it acts on (its
//! processes' pidfds and channels) and on an eventfd through which the monitor hands it
//! a decision ([`Wakers`]).
//!
//! Concurrency: a [`Wakeup`] may be notified from any thread; the waiting thread clears
//! it before it looks at what it was woken for, so that a notification after the clear
//! wakes it again.

use crate::RunError;
use bulkhead_os::event::{Epoll, Wakeup};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

/// The eventfds that wake each thread of a run: notified when a decision is queued for
/// it ([`crate::health::Health::route`]) or when the run stops.
#[derive(Clone)]
pub struct Wakers {
    /// The unwindowed keeper: a restart of a best-effort process.
    pub keeper: Arc<Wakeup>,
    /// The rt drain thread: a restart of an rt task.
    pub drain: Arc<Wakeup>,
    /// The supervisor's loop: a mode switch, a suspend or a stop.
    pub services: Arc<Wakeup>,
}

impl Wakers {
    pub fn new() -> Result<Wakers, RunError> {
        let one = || {
            Wakeup::new()
                .map(Arc::new)
                .map_err(|e| RunError::io("eventfd", e))
        };
        Ok(Wakers {
            keeper: one()?,
            drain: one()?,
            services: one()?,
        })
    }
}

/// A thread's epoll set: its [`Wakeup`] and the descriptors it watches, all under one
/// token (a wake says only that something changed; the thread looks at everything).
pub struct Waiter {
    epoll: Epoll,
    wakeup: Arc<Wakeup>,
}

impl Waiter {
    pub fn new(wakeup: Arc<Wakeup>) -> std::io::Result<Waiter> {
        let epoll = Epoll::new()?;
        epoll.add(wakeup.fd(), 0)?;
        Ok(Waiter { epoll, wakeup })
    }

    /// Watches `fd` (a pidfd, a channel). Precondition: it stays open until
    /// [`Waiter::unwatch`] or its close (the kernel drops a closed descriptor itself).
    pub fn watch(&self, fd: RawFd) -> std::io::Result<()> {
        self.epoll.add(fd, 0)
    }

    /// Stops watching `fd` (not watched: nothing happens).
    pub fn unwatch(&self, fd: RawFd) {
        self.epoll.remove(fd);
    }

    /// Waits until a watched descriptor is ready, the wakeup is notified, or `timeout`
    /// passed (rounded up to whole milliseconds), then clears the wakeup.
    pub fn wait(&mut self, timeout: Duration) {
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        if self.epoll.wait(ms).is_err() {
            // An epoll set that cannot be waited on: the thread still looks each timeout.
            std::thread::sleep(timeout);
        }
        self.wakeup.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkhead_os::proc::Process;
    use std::time::Instant;

    /// Far longer than any wake here takes: a wait that returns before it was woken.
    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn a_wait_returns_when_a_watched_process_exits() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.1")
            .spawn()
            .unwrap();
        let process = Process::open(child.id()).unwrap().expect("it runs");
        let mut waiter = Waiter::new(Arc::new(Wakeup::new().unwrap())).unwrap();
        waiter.watch(process.fd()).unwrap();
        let started = Instant::now();
        waiter.wait(LONG);
        assert!(started.elapsed() < LONG / 2, "{:?}", started.elapsed());
        assert!(child.wait().unwrap().success());
    }

    #[test]
    fn a_notification_wakes_the_waiter_once() {
        let wakeup = Arc::new(Wakeup::new().unwrap());
        let mut waiter = Waiter::new(wakeup.clone()).unwrap();
        let notifier = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            wakeup.notify();
        });
        let started = Instant::now();
        waiter.wait(LONG);
        assert!(started.elapsed() < LONG / 2, "{:?}", started.elapsed());
        notifier.join().unwrap();
        // Cleared by the wait that it woke: the next one lasts its timeout.
        let started = Instant::now();
        waiter.wait(Duration::from_millis(100));
        assert!(started.elapsed() >= Duration::from_millis(100));
    }
}
