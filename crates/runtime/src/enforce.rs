//! Budget enforcement for SCHED_FIFO reservations.
//!
//! SCHED_DEADLINE enforces its budget itself. SCHED_FIFO does not: an overrunning
//! high-priority task would starve every lower one. Quest bounds each Main VCPU to C per T
//! with a sporadic server (Boomerang II-A; DriveOS 4.1: each task "is given at least C
//! time-units in every T", and no more). bulkhead does it from the supervisor:
//!
//! * One enforcer thread per real-time CPU, pinned to it, at SCHED_FIFO 99 (above every
//!   task, [`crate::prio::TOP`] is 98). At each release of a task it samples the task's
//!   CPU clock; it then sleeps (high-resolution timer, 1 ns slack) until the earliest
//!   instant the budget could be exhausted (CPU time grows no faster than wall time),
//!   samples again and, once the task has used C since its release, demotes it to
//!   SCHED_IDLE until its next release, when it gets its SCHED_FIFO priority back.
//! * Because the enforcer runs on the tasks' CPU, the tasks are not running when it
//!   samples: their CPU time was brought up to date by the context switch, so the sample is
//!   exact (a process CPU clock read from another CPU can lag by up to a scheduler tick).
//!   Overrun detection is late by at most [`GRANULARITY`] plus the enforcer's wake-up
//!   latency.
//! * SCHED_IDLE rather than a stop: a throttled task uses only time its CPU would
//!   otherwise idle, so it never delays another task, yet it stays responsive to signals
//!   and to the freezer, and its job can finish late instead of never.
//!
//! Why not the cpu controller's `cpu.rt_runtime_us`/`cpu.rt_period_us` (RT group
//! scheduling): its period is a per-group timer unaligned with the task's releases, so a job
//! can be throttled in the middle of its period although it is within its budget, or get
//! 2C across a replenishment boundary, which breaks the response-time analysis; it needs one
//! cgroup per task with the runtime granted down the whole hierarchy; and cgroup v2 has no
//! RT group scheduling in most kernels. `cpu.max` throttles SCHED_OTHER only.

use bulkhead_model::Nanos;
use bulkhead_os::sched::{self, Policy};
use bulkhead_os::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

/// The longest the enforcer sleeps, so that [`Enforcer::stop`] returns promptly.
const MAX_SLEEP: Nanos = 10_000_000;
/// The shortest: each look costs the CPU a few microseconds, so looking again sooner
/// would leave the task too little time to use up the last of its budget. A task may
/// therefore overrun its budget by up to this much plus the enforcer's wake-up latency.
pub const GRANULARITY: Nanos = 50_000;

/// A task whose SCHED_FIFO budget is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgeted {
    /// The task's process (all its threads are demoted and restored).
    pub pid: i32,
    /// SCHED_FIFO priority while within budget.
    pub priority: u32,
    /// Budget C per period, ns of CPU time.
    pub budget: Nanos,
    /// Period T, ns.
    pub period: Nanos,
    /// CLOCK_MONOTONIC time of release 0; releases are `first_release + k * period`.
    pub first_release: Nanos,
}

/// What the enforcer did to one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub pid: i32,
    /// Periods in which the task exhausted its budget and was demoted.
    pub throttled: u64,
    /// Periods the enforcer observed (releases passed while it watched).
    pub periods: u64,
}

/// A running enforcer thread; [`Enforcer::stop`] (or drop) ends it.
pub struct Enforcer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Stats>>>,
}

impl Enforcer {
    /// Starts enforcing `tasks`, which all run on `cpu` (the enforcer pins itself there;
    /// `None` leaves it unpinned, with less exact samples). Every task must already run at
    /// its SCHED_FIFO priority. Fails if the thread cannot get SCHED_FIFO 99 or the CPU.
    pub fn start(cpu: Option<u32>, tasks: Vec<Budgeted>) -> Result<Enforcer> {
        for t in &tasks {
            if t.budget == 0 || t.budget > t.period {
                return Err(Error::Invalid(format!(
                    "pid {}: budget {} ns must be in 1..=period ({} ns)",
                    t.pid, t.budget, t.period
                )));
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bulkhead-enforce".into())
            .spawn(move || {
                let setup = prepare_thread(cpu);
                let ok = setup.is_ok();
                let _ = ready_tx.send(setup);
                if ok {
                    run(tasks, &flag)
                } else {
                    Vec::new()
                }
            })
            .map_err(|e| Error::os("spawning the enforcer thread", e, ""))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Enforcer {
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(Error::Invalid(
                "the enforcer thread died while starting".into(),
            )),
        }
    }

    /// Stops the thread, gives throttled tasks their priority back and returns the stats.
    pub fn stop(mut self) -> Vec<Stats> {
        self.finish()
    }

    fn finish(&mut self) -> Vec<Stats> {
        self.stop.store(true, Ordering::Release);
        self.thread
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for Enforcer {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Pins the calling thread to `cpu`, makes it SCHED_FIFO 99 with 1 ns timer slack.
fn prepare_thread(cpu: Option<u32>) -> Result<()> {
    if let Some(cpu) = cpu {
        bulkhead_os::probe::pin(cpu)?;
    }
    sched::set(0, &Policy::Fifo { priority: 99 })?;
    sched::set_timer_slack_ns(1);
    Ok(())
}

/// Per-task state of the enforcement loop.
struct Watch {
    task: Budgeted,
    next_release: Nanos,
    /// CPU time at the last release.
    base: Nanos,
    throttled: bool,
    stats: Stats,
    gone: bool,
}

fn run(tasks: Vec<Budgeted>, stop: &AtomicBool) -> Vec<Stats> {
    let mut watches: Vec<Watch> = tasks
        .into_iter()
        .map(|task| Watch {
            base: cpu_time(task.pid).unwrap_or(0),
            next_release: task.first_release,
            throttled: false,
            stats: Stats {
                pid: task.pid,
                throttled: 0,
                periods: 0,
            },
            gone: false,
            task,
        })
        .collect();
    while !stop.load(Ordering::Acquire) && watches.iter().any(|w| !w.gone) {
        let now = monotonic_ns();
        let mut wake = now + MAX_SLEEP;
        for w in watches.iter_mut().filter(|w| !w.gone) {
            wake = wake.min(w.step(now));
        }
        bulkhead_task::clock::sleep_until(wake);
    }
    for w in watches.iter_mut().filter(|w| w.throttled && !w.gone) {
        let _ = sched::set_process(
            w.task.pid,
            &Policy::Fifo {
                priority: w.task.priority,
            },
        );
    }
    watches.into_iter().map(|w| w.stats).collect()
}

impl Watch {
    /// Handles a release or an exhausted budget at `now`; returns when to look again.
    fn step(&mut self, now: Nanos) -> Nanos {
        let Some(cpu) = cpu_time(self.task.pid) else {
            self.gone = true;
            return Nanos::MAX;
        };
        if now >= self.next_release {
            let t = &self.task;
            let k = (now - t.first_release) / t.period + 1;
            self.next_release = t.first_release + k * t.period;
            self.base = cpu;
            self.stats.periods += 1;
            if self.throttled {
                self.throttled = !self.set(Policy::Fifo {
                    priority: t.priority,
                });
            }
        }
        if !self.throttled {
            let used = cpu.saturating_sub(self.base);
            if used >= self.task.budget {
                self.throttled = self.set(Policy::Idle);
                self.stats.throttled += 1;
            } else {
                let left = (self.task.budget - used).max(GRANULARITY);
                return self.next_release.min(now + left);
            }
        }
        self.next_release
    }

    /// Sets the task's policy; false (and `gone`) if the process has exited.
    fn set(&mut self, policy: Policy) -> bool {
        match sched::set_process(self.task.pid, &policy) {
            Ok(_) => true,
            Err(_) => {
                self.gone = cpu_time(self.task.pid).is_none();
                false
            }
        }
    }
}

/// CPU time of process `pid` in ns (its CPUCLOCK_SCHED process clock), or `None` if it
/// has exited.
pub fn cpu_time(pid: i32) -> Option<Nanos> {
    if pid <= 0 {
        return None; // pid 0 would encode the calling process's own clock
    }
    // The kernel's encoding of a process CPU clock: ((~pid) << 3) | CPUCLOCK_SCHED (2).
    bulkhead_task::clock::read_ns(((!pid) << 3) | 2)
}

/// CLOCK_MONOTONIC now, in ns (the task library's clock, shared by every crate).
pub use bulkhead_task::clock::now_ns as monotonic_ns;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_budgets_beyond_the_period() {
        let t = Budgeted {
            pid: 1,
            priority: 10,
            budget: 2_000,
            period: 1_000,
            first_release: 0,
        };
        assert!(Enforcer::start(None, vec![t]).is_err());
    }

    #[test]
    fn reads_cpu_clocks() {
        let me = std::process::id() as i32;
        assert!(cpu_time(me).unwrap() > 0);
        // Above PID_MAX_LIMIT (2^22): no such process.
        assert!(cpu_time((1 << 22) + 1).is_none());
        assert!(cpu_time(0).is_none());
    }
}
