//! The window scheduler state machine (DEmOS semantics; see the crate docs).

use crate::jitter::{Draws, Jitter};
use crate::schedule::{PartitionId, ProcessId, Schedule};
use bulkhead_model::{CpuSet, Nanos};

/// Settings of one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Config {
    /// Seed of the budget-jitter streams (`--seed`; `demos-sched`: `DEMOS_RAND_SEED`).
    pub seed: u64,
    /// Where fresh budgets are drawn from.
    pub jitter: Jitter,
    /// Stop at this schedule time (`--timeout`): every event planned at or before it
    /// is handled first (a window starting exactly then is still started, as DEmOS
    /// does), then the machine stops.
    pub stop_at: Option<Nanos>,
}

/// Something that happened, reported by the driver (the runtime or the simulator).
///
/// Times are schedule times: nanoseconds since the schedule started (after the init
/// phase). A time earlier than one already handled is treated as that time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The timer reached `t`. Handles every planned event (window ends, budget
    /// ends, the timeout) at or before `t`, in time order. Drivers pass the planned
    /// time ([`Machine::next_timer`]), so the log does not depend on timer latency.
    Timer { t: Nanos },
    /// The process signalled completion at `t` (the client library's `completed()`
    /// or `demos_completed()`; during the init phase: `initialization_completed()`).
    /// A completion from a process that is not running now is ignored: it was
    /// already stopped (budget or window end), and stays blocked in the library
    /// until its next grant.
    Completed { process: ProcessId, t: Nanos },
    /// Every process of the process's cgroup exited at `t`.
    Exited { process: ProcessId, t: Nanos },
    /// SIGINT or SIGTERM (or any external stop) at `t`.
    Stop { t: Nanos },
}

/// Why the machine stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Every process exited.
    AllExited,
    /// [`Config::stop_at`] was reached.
    Timeout,
    /// [`Event::Stop`].
    Requested,
}

/// One grant of CPUs to a process: a line `"event": "run"` of the schedule log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Schedule time of the grant (planned, except after a yield or exit).
    pub t: Nanos,
    pub process: ProcessId,
    pub partition: PartitionId,
    /// Window and slice granting it.
    pub window: usize,
    pub slice: usize,
    /// The slice's CPUs.
    pub cpus: CpuSet,
    /// Budget granted: a fresh (jittered) budget or what a best-effort process had left.
    pub budget: Nanos,
}

/// What the driver must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Init phase begins: each listed process is thawed (on its partition's widest
    /// CPUs, where the partition cgroup starts) and runs until it completes
    /// initialization or exits.
    InitStart { processes: Vec<ProcessId> },
    /// The schedule starts now: schedule time 0.
    ScheduleStart,
    /// A major frame starts at `t` (always before the [`Action::WindowStart`] of its
    /// first window): print the frame message.
    FrameStart { t: Nanos },
    /// Window `window` starts at `t`: print the window message.
    WindowStart { t: Nanos, window: usize },
    /// Every slice of window `window` finished its safety-critical partition at `t`, and
    /// the best-effort partitions were started (their grants precede this action, as
    /// DEmOS calls its power policy's `on_be_start` after starting them, thesis 4.8).
    BeStart { t: Nanos, window: usize },
    /// Window `window` ends at `t` (its running processes were frozen just before).
    WindowEnd { t: Nanos, window: usize },
    /// Restrict the partition's cgroup to `cpus` (emitted only on change).
    SetCpus {
        partition: PartitionId,
        cpus: CpuSet,
    },
    /// Let the process run (thaw its cgroup; if it is blocked in the client library
    /// after a completion, release it).
    Thaw { process: ProcessId },
    /// Stop the process (freeze its cgroup).
    Freeze { process: ProcessId },
    /// Record a grant (it follows the [`Action::Thaw`] it describes).
    Grant(Grant),
    /// The machine stopped: kill everything and end the run.
    Stop { t: Nanos, reason: StopReason },
}

/// Where the machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// [`Machine::start`] not called yet.
    Created,
    /// `init: true` processes are initializing.
    Init,
    /// The window schedule runs.
    Running,
    /// Stopped; events are ignored.
    Stopped,
}

#[derive(Debug)]
struct ProcessState {
    alive: bool,
    /// Completed (yielded, budget used up or skipped) since its partition was last started.
    completed: bool,
    /// Initializing (init phase only).
    initializing: bool,
    /// Budget left over by a best-effort run cut by a window end.
    carried: Option<Nanos>,
}

#[derive(Debug, Clone)]
struct PartitionState {
    /// Round-robin position (0-based inside the partition).
    cursor: usize,
    /// CPUs of its cgroup now.
    cpus: CpuSet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Running (or done with) its safety-critical partition.
    Sc,
    /// Running its best-effort partition.
    Be,
}

#[derive(Debug, Clone, Copy)]
struct Running {
    process: ProcessId,
    deadline: Nanos,
}

#[derive(Debug, Clone, Copy)]
struct SliceState {
    role: Role,
    running: Option<Running>,
}

/// The DEmOS window scheduler as a pure state machine. See the crate documentation.
#[derive(Debug)]
pub struct Machine {
    schedule: Schedule,
    config: Config,
    phase: Phase,
    processes: Vec<ProcessState>,
    draws: Draws,
    partitions: Vec<PartitionState>,
    slices: Vec<SliceState>,
    window: usize,
    window_end: Nanos,
    sc_done: usize,
    now: Nanos,
}

impl Machine {
    /// A machine for `schedule`; every process is alive and frozen, and every
    /// partition cgroup is on its widest CPU set.
    pub fn new(schedule: Schedule, config: Config) -> Machine {
        let processes = schedule
            .processes
            .iter()
            .map(|_| ProcessState {
                alive: true,
                completed: false,
                initializing: false,
                carried: None,
            })
            .collect();
        let budgets: Vec<(Nanos, Nanos)> = schedule
            .processes
            .iter()
            .map(|p| (p.budget, p.jitter))
            .collect();
        let draws = Draws::new(config.jitter, config.seed, &budgets);
        let partitions = schedule
            .partitions
            .iter()
            .map(|p| PartitionState {
                cursor: 0,
                cpus: p.widest_cpus.clone(),
            })
            .collect();
        Machine {
            schedule,
            config,
            phase: Phase::Created,
            processes,
            draws,
            partitions,
            slices: Vec::new(),
            window: 0,
            window_end: 0,
            sc_done: 0,
            now: 0,
        }
    }

    /// The schedule this machine runs.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The earliest planned event (window end, budget end, timeout) while the
    /// schedule runs; `None` in the other phases.
    pub fn next_timer(&self) -> Option<Nanos> {
        let planned = self.next_planned()?;
        Some(
            self.config
                .stop_at
                .map_or(planned, |stop| stop.min(planned)),
        )
    }

    /// The earliest window or budget end while the schedule runs.
    fn next_planned(&self) -> Option<Nanos> {
        if self.phase != Phase::Running {
            return None;
        }
        let budgets = self
            .slices
            .iter()
            .filter_map(|s| s.running.map(|r| r.deadline));
        budgets.chain([self.window_end]).min()
    }

    /// Starts: the init phase if some process has `init: true`, else the schedule.
    ///
    /// Precondition: called once, before any [`Machine::handle`].
    pub fn start(&mut self, out: &mut Vec<Action>) {
        assert_eq!(self.phase, Phase::Created, "Machine::start called twice");
        let init: Vec<ProcessId> = (0..self.processes.len())
            .filter(|&p| self.schedule.processes[p].init)
            .collect();
        if init.is_empty() {
            self.start_schedule(out);
            return;
        }
        for &p in &init {
            self.processes[p].initializing = true;
        }
        self.phase = Phase::Init;
        out.push(Action::InitStart { processes: init });
    }

    /// Handles one event, appending the resulting actions to `out`.
    pub fn handle(&mut self, event: Event, out: &mut Vec<Action>) {
        match (self.phase, event) {
            (Phase::Created | Phase::Stopped, _) => {}
            (_, Event::Stop { t }) => self.stop(t.max(self.now), StopReason::Requested, out),
            (Phase::Init, Event::Completed { process, .. }) => self.init_done(process, true, out),
            (Phase::Init, Event::Exited { process, .. }) => {
                self.processes[process].alive = false;
                self.init_done(process, false, out);
            }
            (Phase::Init, Event::Timer { .. }) => {}
            (Phase::Running, Event::Timer { t }) => self.advance_to(t, out),
            (Phase::Running, Event::Completed { process, t }) => {
                self.advance_to(t, out);
                self.completed(process, out);
            }
            (Phase::Running, Event::Exited { process, t }) => {
                self.advance_to(t, out);
                self.exited(process, out);
            }
        }
    }

    /// A running process yielded: it is done for this window.
    fn completed(&mut self, process: ProcessId, out: &mut Vec<Action>) {
        let Some(slice) = self.slice_running(process) else {
            return;
        };
        out.push(Action::Freeze { process });
        self.processes[process].completed = true;
        self.slices[slice].running = None;
        self.start_next(slice, out);
    }

    /// A process exited: it never runs again; if it was running, its slice moves on.
    fn exited(&mut self, process: ProcessId, out: &mut Vec<Action>) {
        if self.phase != Phase::Running {
            return;
        }
        self.processes[process].alive = false;
        self.processes[process].carried = None;
        if !self.processes.iter().any(|p| p.alive) {
            self.stop(self.now, StopReason::AllExited, out);
            return;
        }
        if let Some(slice) = self.slice_running(process) {
            self.slices[slice].running = None;
            self.start_next(slice, out);
        }
    }

    fn init_done(&mut self, process: ProcessId, alive: bool, out: &mut Vec<Action>) {
        let state = &mut self.processes[process];
        if !state.initializing {
            return;
        }
        state.initializing = false;
        if alive {
            out.push(Action::Freeze { process });
        }
        if self.processes.iter().any(|p| p.initializing) {
            return;
        }
        if self.processes.iter().any(|p| p.alive) {
            self.start_schedule(out);
        } else {
            self.stop(0, StopReason::AllExited, out);
        }
    }

    fn start_schedule(&mut self, out: &mut Vec<Action>) {
        self.phase = Phase::Running;
        out.push(Action::ScheduleStart);
        if !self.processes.iter().any(|p| p.alive) {
            self.stop(0, StopReason::AllExited, out);
            return;
        }
        self.start_window(0, 0, out);
    }

    /// Handles every planned event at or before `t` (timers win ties with the
    /// driver's events, as in DEmOS), then moves the clock to `t`.
    fn advance_to(&mut self, t: Nanos, out: &mut Vec<Action>) {
        let t = t.max(self.now);
        self.advance(t, out);
        if self.phase == Phase::Running {
            self.now = t;
        }
    }

    /// Handles every planned event at or before `t`, in time order; stops at the
    /// timeout once every event planned at the timeout itself was handled.
    fn advance(&mut self, t: Nanos, out: &mut Vec<Action>) {
        while let Some(next) = self.next_planned() {
            if let Some(stop) = self.config.stop_at.filter(|&s| s <= t && s < next) {
                self.now = self.now.max(stop);
                self.stop(stop, StopReason::Timeout, out);
                return;
            }
            if next > t {
                return;
            }
            self.now = next;
            if next == self.window_end {
                self.end_window(out);
                let following = (self.window + 1) % self.schedule.windows.len();
                self.start_window(following, next, out);
            } else if let Some(slice) = self
                .slices
                .iter()
                .position(|s| s.running.is_some_and(|r| r.deadline == next))
            {
                let process = self.slices[slice]
                    .running
                    .take()
                    .expect("found above")
                    .process;
                out.push(Action::Freeze { process });
                self.processes[process].completed = true;
                self.start_next(slice, out);
            }
        }
    }

    fn start_window(&mut self, window: usize, t: Nanos, out: &mut Vec<Action>) {
        self.window = window;
        self.window_end = t + self.schedule.windows[window].length;
        if window == 0 {
            out.push(Action::FrameStart { t });
        }
        out.push(Action::WindowStart { t, window });
        let count = self.schedule.windows[window].slices.len();
        self.slices = vec![
            SliceState {
                role: Role::Sc,
                running: None
            };
            count
        ];
        self.sc_done = 0;
        for slice in 0..count {
            match self.schedule.windows[window].slices[slice].sc {
                Some(partition) => {
                    self.reset_partition(partition, true);
                    self.start_next(slice, out);
                }
                None => self.sc_finished(out),
            }
        }
    }

    /// Freezes what runs, keeps best-effort leftovers, and closes the window.
    fn end_window(&mut self, out: &mut Vec<Action>) {
        let t = self.window_end;
        for slice in 0..self.slices.len() {
            let Some(run) = self.slices[slice].running.take() else {
                continue;
            };
            out.push(Action::Freeze {
                process: run.process,
            });
            let left = run.deadline - t;
            if left == 0 {
                // Budget and window ended together: the run is complete, and the
                // partition's cursor moves on as if the next process were looked up
                // (DEmOS `Slice::stop`).
                self.processes[run.process].completed = true;
                let partition = self.schedule.processes[run.process].partition;
                self.seek_pending(partition);
            } else if self.slices[slice].role == Role::Be {
                self.processes[run.process].carried = Some(left);
            }
        }
        out.push(Action::WindowEnd {
            t,
            window: self.window,
        });
    }

    /// DEmOS `Partition::reset`: a new run of the partition; SC partitions start
    /// again from their first process, BE partitions continue where they were.
    fn reset_partition(&mut self, partition: PartitionId, to_first: bool) {
        for p in self.schedule.partitions[partition].processes.clone() {
            self.processes[p].completed = false;
        }
        if to_first {
            self.partitions[partition].cursor = 0;
        }
    }

    /// DEmOS `Partition::seek_pending_process`: from the cursor, the first process
    /// that is alive and not completed; if there is none, the cursor moves one step
    /// so that the next run continues round the queue.
    fn seek_pending(&mut self, partition: PartitionId) -> Option<ProcessId> {
        let range = self.schedule.partitions[partition].processes.clone();
        let count = range.len();
        if count == 0 {
            return None;
        }
        let cursor = &mut self.partitions[partition].cursor;
        for _ in 0..count {
            let p = range.start + *cursor;
            let state = &self.processes[p];
            if state.alive && !state.completed {
                return Some(p);
            }
            *cursor = (*cursor + 1) % count;
        }
        *cursor = (*cursor + 1) % count;
        None
    }

    /// Starts the next pending process of the slice's current partition at `self.now`,
    /// or moves on (SC done, or the BE partition has nothing left this window).
    fn start_next(&mut self, slice: usize, out: &mut Vec<Action>) {
        let t = self.now;
        let spec = &self.schedule.windows[self.window].slices[slice];
        let role = self.slices[slice].role;
        let partition = match role {
            Role::Sc => spec.sc,
            Role::Be => spec.be,
        };
        let Some(partition) = partition else { return };
        while let Some(process) = self.seek_pending(partition) {
            let state = &mut self.processes[process];
            let budget = state
                .carried
                .take()
                .unwrap_or_else(|| self.draws.next_budget(process));
            if budget == 0 {
                // Jitter can draw an empty budget: the process has nothing to do now.
                state.completed = true;
                continue;
            }
            let cpus = &self.schedule.windows[self.window].slices[slice].cpus;
            if self.partitions[partition].cpus != *cpus {
                self.partitions[partition].cpus = cpus.clone();
                out.push(Action::SetCpus {
                    partition,
                    cpus: cpus.clone(),
                });
            }
            out.push(Action::Thaw { process });
            out.push(Action::Grant(Grant {
                t,
                process,
                partition,
                window: self.window,
                slice,
                cpus: cpus.clone(),
                budget,
            }));
            self.slices[slice].running = Some(Running {
                process,
                deadline: t + budget,
            });
            return;
        }
        if role == Role::Sc {
            self.sc_finished(out);
        }
    }

    /// One more slice finished its SC partition; when all have, every slice
    /// starts its BE partition (DEmOS `Window::slice_sc_end_cb`, option 2).
    fn sc_finished(&mut self, out: &mut Vec<Action>) {
        self.sc_done += 1;
        if self.sc_done < self.slices.len() {
            return;
        }
        for slice in 0..self.slices.len() {
            self.slices[slice].role = Role::Be;
            if let Some(partition) = self.schedule.windows[self.window].slices[slice].be {
                self.reset_partition(partition, false);
                self.start_next(slice, out);
            }
        }
        out.push(Action::BeStart {
            t: self.now,
            window: self.window,
        });
    }

    fn slice_running(&self, process: ProcessId) -> Option<usize> {
        self.slices
            .iter()
            .position(|s| s.running.is_some_and(|r| r.process == process))
    }

    fn stop(&mut self, t: Nanos, reason: StopReason, out: &mut Vec<Action>) {
        self.phase = Phase::Stopped;
        self.slices.clear();
        out.push(Action::Stop { t, reason });
    }
}
