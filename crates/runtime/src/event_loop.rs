//! The supervisor's one event loop, over the epoll set of `bulkhead-os`: the window
//! schedule's timer and the processes' channels (a run with windows), SIGINT and SIGTERM
//! (with [`crate::RunOptions::handle_signals`]), and the control socket with the mode
//! and stop-start managers' replies. A run without windows waits in the same loop, on
//! the health monitor's watchdog timer and wakeup too, woken at least every tick to look
//! whether its tasks and processes all exited.

use crate::control::Control;
use crate::RunError;
use bulkhead_os::event::Epoll;
use bulkhead_os::signal::StopSignals;
use std::os::fd::RawFd;

/// What woke the loop, in the order a wait reports it: the timer first (DEmOS gives it
/// priority), then a stop signal, then the control socket, then the channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The window schedule's timer (a run without windows: the next watchdog's) expired.
    Timer,
    /// SIGINT or SIGTERM arrived (consumed).
    Stop,
    /// The control socket or a manager's reply is ready.
    Control,
    /// The health monitor queued a decision for the loop ([`crate::wake::Wakers`]).
    Health,
    /// Process `index`'s channel is readable, or its peer hung up.
    Channel { index: usize, hung_up: bool },
}

const TOKEN_TIMER: u64 = u64::MAX;
const TOKEN_SIGNAL: u64 = u64::MAX - 1;
const TOKEN_CONTROL: u64 = u64::MAX - 2;
const TOKEN_HEALTH: u64 = u64::MAX - 3;

/// The loop's epoll set and the stop signals it owns.
pub(crate) struct EventLoop {
    epoll: Epoll,
    signals: Option<StopSignals>,
}

impl EventLoop {
    /// A loop watching the stop signals (when `handle_signals`: one run at a time per
    /// process may) and `control`'s descriptors.
    pub fn new(handle_signals: bool, control: Option<&Control>) -> Result<EventLoop, RunError> {
        let io = |e| RunError::io("event loop", e);
        let signals = handle_signals
            .then(StopSignals::install)
            .transpose()
            .map_err(|e| RunError::io("signals", e))?;
        let events = EventLoop {
            epoll: Epoll::new().map_err(io)?,
            signals,
        };
        if let Some(s) = &events.signals {
            events.epoll.add(s.fd(), TOKEN_SIGNAL).map_err(io)?;
        }
        for fd in control.map(Control::fds).unwrap_or_default() {
            events.epoll.add(fd, TOKEN_CONTROL).map_err(io)?;
        }
        Ok(events)
    }

    /// Watches the schedule's timer.
    pub fn watch_timer(&self, fd: RawFd) -> Result<(), RunError> {
        self.epoll
            .add(fd, TOKEN_TIMER)
            .map_err(|e| RunError::io("event loop", e))
    }

    /// Watches the health monitor's wakeup of the loop.
    pub fn watch_health(&self, fd: RawFd) -> Result<(), RunError> {
        self.epoll
            .add(fd, TOKEN_HEALTH)
            .map_err(|e| RunError::io("event loop", e))
    }

    /// Watches process `index`'s channel. Precondition: `fd` stays open until
    /// [`EventLoop::unwatch`].
    pub fn watch_channel(&self, index: usize, fd: RawFd) -> Result<(), RunError> {
        self.epoll
            .add(fd, index as u64)
            .map_err(|e| RunError::io("event loop", e))
    }

    /// Stops watching `fd`.
    pub fn unwatch(&self, fd: RawFd) {
        self.epoll.remove(fd);
    }

    /// Waits up to `timeout_ms` (-1: without limit) and says what is ready, in
    /// [`Wake`]'s order; an interruption by a signal wakes it with nothing.
    pub fn wait(&mut self, timeout_ms: i32) -> Result<Vec<Wake>, RunError> {
        let ready = self
            .epoll
            .wait(timeout_ms)
            .map_err(|e| RunError::io("epoll_wait", e))?;
        let has = |token| ready.iter().any(|r| r.token == token);
        let mut wakes = Vec::new();
        if has(TOKEN_TIMER) {
            wakes.push(Wake::Timer);
        }
        if has(TOKEN_SIGNAL) {
            if let Some(s) = &self.signals {
                s.drain();
            }
            wakes.push(Wake::Stop);
        }
        if has(TOKEN_CONTROL) {
            wakes.push(Wake::Control);
        }
        if has(TOKEN_HEALTH) {
            wakes.push(Wake::Health);
        }
        let channels = ready.iter().filter(|r| r.token < TOKEN_HEALTH);
        wakes.extend(channels.map(|r| Wake::Channel {
            index: r.token as usize,
            hung_up: r.closed(),
        }));
        Ok(wakes)
    }
}
