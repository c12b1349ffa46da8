//! The discrete-event engine: integer-nanosecond time, a heap of timed events, and
//! per-domain dispatching of servers onto CPUs.
//!
//! Determinism: the only randomness is a `XorShiftRng` seeded from
//! [`Options::seed`], drawn in a fixed order (one draw per job for a ranged
//! execution time, one per release with jitter or sporadic gaps). Events at the same
//! instant are applied in a fixed order (CPU completions, replenishments, releases,
//! deadline checks, suspensions), then every touched domain is dispatched once.

use crate::channels::{Channels, Origin};
use crate::error::SimError;
use crate::report::{Report, TaskStats};
use crate::spec::*;
use crate::windows::Driver;
use bulkhead_trace::{Event, EventKind, Sink};
use rand::{RngExt, SeedableRng};
use rand_xorshift::XorShiftRng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;

mod health;
mod io;
mod modes;
mod resume;
mod servers;
mod stalls;

pub use health::{Fault, FaultKind};
pub use stalls::{random_stalls, Stall};

/// Jobs a task may have queued; releases beyond this backlog (a heavily overloaded
/// task over a long simulation) are dropped and counted as misses, so that memory
/// stays bounded.
pub const MAX_BACKLOG: usize = 100_000;

/// A system suspension at system time `at` lasting `duration` of wall-clock time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Suspension {
    pub at: Nanos,
    pub duration: Nanos,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Releases happen before this time; the simulation ends here unless `drain`.
    pub until: Nanos,
    /// Keep simulating after `until`, without new releases, until no work is left
    /// (to observe every response of the jobs released before `until`).
    pub drain: bool,
    pub seed: u64,
    /// JuMP2start suspensions (`--suspend AT:DURATION`), in system time.
    pub suspensions: Vec<Suspension>,
    /// Mode switch requests (`--mode-switch AT:MODE`), in system time.
    pub mode_switches: Vec<crate::modes::ModeSwitch>,
    /// How a suspension's stop protocol runs (suspend order, acknowledgement deadline).
    pub stop: crate::stop::StopSpec,
    /// CPUs taken away for a while (`--inject-stall`, `--stalls`).
    pub stalls: Vec<Stall>,
    /// The supervised tasks and processes (the description's `health:` keys); the
    /// tasks among them are monitored ([`health`]).
    pub health: Vec<bulkhead_model::health::Supervised>,
    /// Faults injected on purpose (`--inject-miss`, `--inject-exit`).
    pub faults: Vec<Fault>,
}

impl Options {
    pub fn until(until: Nanos) -> Options {
        Options {
            until,
            drain: false,
            seed: 0,
            suspensions: Vec::new(),
            mode_switches: Vec::new(),
            stop: crate::stop::StopSpec::default(),
            stalls: Vec::new(),
            health: Vec::new(),
            faults: Vec::new(),
        }
    }
}

/// A timed event in the queue. At one instant, CPU decision points (a job's
/// completion or its server running dry, kept in the slots, not in the queue) apply
/// first, then these in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    /// Stall `i` starts (generation 0) or ends (1).
    Stall(u32),
    Replenish(u32),
    Release(u32),
    /// Deadline of job `job` (low 32 bits of its index) of a task; only when tracing.
    Check {
        task: u32,
        job: u32,
    },
    Suspend(u32),
    /// The window schedule's next event.
    Windows,
    /// Mode request `i` arrives.
    Mode(u32),
    /// The agent of member `i` of the mode table has completed its job.
    Ack(u32),
    /// Injected fault `i` happens.
    Fault(u32),
    /// The health monitor's next watchdog expiry.
    HealthTick,
}

/// The event queue: a binary heap of `(time, class | index | generation)` packed in
/// two words, so that comparisons are cheap. An event whose 32-bit generation no
/// longer matches its owner's is stale and skipped.
#[derive(Default)]
struct Queue(BinaryHeap<Reverse<(Nanos, u64)>>);

impl Queue {
    fn push(&mut self, at: Nanos, ev: Ev, gen: u64) {
        let (class, index, gen) = match ev {
            Ev::Stall(i) => (0u64, i, gen as u32),
            Ev::Replenish(i) => (1u64, i, gen as u32),
            Ev::Release(i) => (2, i, gen as u32),
            Ev::Check { task, job } => (3, task, job),
            Ev::Suspend(i) => (4, i, 0),
            Ev::Windows => (5, 0, gen as u32),
            Ev::Mode(i) => (6, i, 0),
            Ev::Ack(i) => (7, i, 0),
            Ev::Fault(i) => (8, i, 0),
            Ev::HealthTick => (9, 0, gen as u32),
        };
        debug_assert!(index < 1 << 28);
        self.0.push(Reverse((
            at,
            class << 60 | (index as u64) << 32 | gen as u64,
        )));
    }

    fn peek_time(&self) -> Option<Nanos> {
        self.0.peek().map(|Reverse((t, _))| *t)
    }

    /// The next event: time, event and generation.
    fn pop(&mut self) -> Option<(Nanos, Ev, u32)> {
        let Reverse((t, packed)) = self.0.pop()?;
        let index = (packed >> 32) as u32 & ((1 << 28) - 1);
        let gen = packed as u32;
        let ev = match packed >> 60 {
            0 => Ev::Stall(index),
            1 => Ev::Replenish(index),
            2 => Ev::Release(index),
            3 => Ev::Check {
                task: index,
                job: gen,
            },
            4 => Ev::Suspend(index),
            5 => Ev::Windows,
            6 => Ev::Mode(index),
            7 => Ev::Ack(index),
            8 => Ev::Fault(index),
            _ => Ev::HealthTick,
        };
        Some((t, ev, gen))
    }
}

#[derive(Debug, Clone)]
struct Job {
    index: u64,
    release: Nanos,
    deadline: Nanos,
    remaining: Nanos,
    started: bool,
}

struct TaskState {
    jobs: VecDeque<Job>,
    /// Nominal time of the next release (before jitter), and its heap generation.
    next_nominal: Nanos,
    next_at: usize,
    /// When the next release is due, if one is scheduled.
    pending_release: Option<Nanos>,
    gen: u64,
    released: u64,
    last_release: Option<Nanos>,
    /// Origins of the latest messages the current job read (merged, the newest per
    /// source).
    inputs: Vec<Origin>,
    /// The fifo messages the current job read, in order: each is forwarded on its own.
    fifo_inputs: Vec<Rc<[Origin]>>,
    /// Its head job has done its work but waits for room in a fifo it writes
    /// (`overflow: block`).
    blocked: Option<io::Blocked>,
    stats: TaskStats,
    /// Whether the task runs in the current mode (always, without modes).
    active: bool,
    /// Its parameters since a mode switch changed them (`None`: the spec's).
    params: Option<crate::modes::TaskParams>,
    /// Restartable, resumed, and no job has completed on fresh input yet.
    fresh_pending: bool,
}

struct ServerState {
    /// Tasks served, highest priority first.
    tasks: Vec<u32>,
    pending: u32,
    budget: Nanos,
    used: Nanos,
    active_since: Option<Nanos>,
    /// Sporadic: future replenishments (amount, time), by time.
    repl: VecDeque<(Nanos, Nanos)>,
    /// Deferrable: end of the current period (the budget is full again there).
    period_end: Nanos,
    /// CBS: scheduling deadline; throttled until it.
    deadline: Nanos,
    throttled: bool,
    /// I/O: eligible again from this time.
    eligible_at: Nanos,
    gen: u64,
    slot: Option<u32>,
    /// Budget and period since a mode switch changed them (`None`: the spec's).
    params: Option<(Nanos, Nanos)>,
    /// Boosted for this agent task: runs at once, above all, without using budget.
    boost: Option<u32>,
}

#[derive(Clone, Copy)]
struct Running {
    server: u32,
    task: u32,
    job: u64,
}

struct Slot {
    cpu: u32,
    /// When the running job completes or its server runs dry (or, for a deferrable
    /// server, its period ends): the slot's next decision point.
    armed: Option<Nanos>,
    running: Option<Running>,
    since: Nanos,
    /// How fast the running job has progressed since `since`, as a fraction of its
    /// speed at the top frequencies (`energy::task_speed`).
    speed: (u64, u64),
    /// Stalls of the CPU under way: nothing runs on it while above 0.
    stalled: u32,
    /// When its last job stopped running (0 before any): from then until the next
    /// starts, background be work runs on the CPU.
    idle_from: Nanos,
}

struct DomainState {
    servers: Vec<u32>,
    slots: Vec<Slot>,
    dirty: bool,
}

/// A running simulation.
pub struct Sim<'a> {
    spec: &'a Spec,
    opts: Options,
    rng: XorShiftRng,
    heap: Queue,
    now: Nanos,
    tasks: Vec<TaskState>,
    servers: Vec<ServerState>,
    domains: Vec<DomainState>,
    dirty: Vec<u32>,
    /// Reused by `dispatch`: the chosen servers' keys.
    scratch: Vec<(Nanos, u32)>,
    channels: Channels,
    /// Per task: whether it originates data (none of its inputs has a writer task in
    /// the simulation), so that every job writes its outputs.
    sources: Vec<bool>,
    tracing: bool,
    events: Vec<Event>,
    jobs_done: u64,
    /// Per CPU, the time an rt job ran on it (indexed by CPU number).
    busy: Vec<Nanos>,
    finished: bool,
    windows: Option<Driver>,
    windows_gen: u64,
    modes: Option<modes::ModeState>,
    /// Servers boosted now.
    boosted: u32,
    /// The stop protocol's events so far.
    stop_events: Vec<crate::stop::StopEvent>,
    /// Wall-clock time minus system time: what the stops took so far.
    wall_offset: Nanos,
    /// Tasks whose head job waits for room in a fifo.
    blocked_writers: u32,
    /// The health monitor, when tasks are supervised or faults injected.
    health: Option<health::HealthState>,
}

impl<'a> Sim<'a> {
    /// Prepares a simulation of `spec`; `tracing` says whether to record events.
    pub fn new(spec: &'a Spec, opts: Options, tracing: bool) -> Result<Sim<'a>, SimError> {
        spec.validate()?;
        if let Some(windows) = &spec.windows {
            windows.check()?;
        }
        let modes = modes::ModeState::new(spec, &opts.mode_switches)?;
        let health = health::HealthState::new(spec, &opts.health, &opts.faults)?;
        let mut sim = Sim {
            spec,
            rng: XorShiftRng::seed_from_u64(opts.seed),
            heap: Queue::default(),
            now: 0,
            tasks: Vec::new(),
            servers: Vec::new(),
            domains: Vec::new(),
            dirty: Vec::new(),
            scratch: Vec::new(),
            channels: Channels::new(&spec.channels, readers(spec)),
            sources: sources(spec),
            tracing,
            events: Vec::new(),
            jobs_done: 0,
            busy: Vec::new(),
            finished: false,
            windows: None,
            windows_gen: 0,
            modes,
            boosted: 0,
            stop_events: Vec::new(),
            wall_offset: 0,
            blocked_writers: 0,
            health,
            opts,
        };
        sim.init();
        Ok(sim)
    }

    fn init(&mut self) {
        self.init_domains();
        self.init_servers();
        self.init_tasks();
        for (i, s) in self.opts.suspensions.iter().enumerate() {
            self.heap.push(s.at, Ev::Suspend(i as u32), 0);
        }
        self.init_stalls();
        self.init_modes();
        self.init_health();
        if let Some(windows) = &self.spec.windows {
            let mut driver = Driver::new(windows, self.opts.seed, self.opts.until);
            let mut out = Vec::new();
            driver.start(&mut out);
            self.windows = Some(driver);
            self.emit_windows(out);
            self.arm_windows();
        }
    }

    /// Each domain's CPUs, idle.
    fn init_domains(&mut self) {
        let spec = self.spec;
        self.domains = spec
            .domains
            .iter()
            .map(|d| DomainState {
                servers: Vec::new(),
                slots: d
                    .cpus
                    .iter()
                    .map(|&cpu| Slot {
                        cpu,
                        running: None,
                        since: 0,
                        speed: (1, 1),
                        armed: None,
                        stalled: 0,
                        idle_from: 0,
                    })
                    .collect(),
                dirty: false,
            })
            .collect();
    }

    /// Each server's state, with its tasks in priority order; in a fixed-priority
    /// domain its servers in theirs.
    fn init_servers(&mut self) {
        let spec = self.spec;
        let mut served: Vec<Vec<u32>> = vec![Vec::new(); spec.servers.len()];
        for (t, task) in spec.tasks.iter().enumerate() {
            served[task.server].push(t as u32);
        }
        for (i, s) in spec.servers.iter().enumerate() {
            self.domains[s.domain].servers.push(i as u32);
            let mut tasks = std::mem::take(&mut served[i]);
            tasks.sort_by_key(|&t| spec.tasks[t as usize].priority);
            self.servers.push(ServerState {
                tasks,
                pending: 0,
                budget: if s.kind == ServerKind::Unlimited {
                    Nanos::MAX
                } else {
                    s.budget
                },
                used: 0,
                active_since: None,
                repl: VecDeque::new(),
                period_end: s.period,
                deadline: 0,
                throttled: false,
                eligible_at: 0,
                gen: 0,
                slot: None,
                params: None,
                boost: None,
            });
        }
        for (d, domain) in self.domains.iter_mut().enumerate() {
            if spec.domains[d].policy == Policy::FixedPriority {
                domain
                    .servers
                    .sort_by_key(|&s| (spec.servers[s as usize].priority, s));
            }
        }
    }

    /// Each task's state; the first release of each task active in the initial mode.
    fn init_tasks(&mut self) {
        let spec = self.spec;
        for (i, t) in spec.tasks.iter().enumerate() {
            let active = spec
                .modes
                .as_ref()
                .is_none_or(|m| m.params[m.initial][i].is_some());
            let first = match &t.release {
                Release::Periodic { offset, .. } | Release::Sporadic { offset, .. } => {
                    Some(*offset)
                }
                Release::At(times) => times.first().copied(),
            }
            .filter(|_| active);
            self.tasks.push(TaskState {
                jobs: VecDeque::new(),
                next_nominal: first.unwrap_or(Nanos::MAX),
                next_at: 1,
                pending_release: None,
                gen: 0,
                released: 0,
                last_release: None,
                inputs: Vec::new(),
                fifo_inputs: Vec::new(),
                blocked: None,
                stats: TaskStats {
                    partition: t.partition.to_string(),
                    name: t.name.to_string(),
                    ..Default::default()
                },
                active,
                params: None,
                fresh_pending: false,
            });
            if let Some(first) = first {
                self.schedule_release(i, first);
            }
        }
    }

    /// Handles the window schedule's event at `t` and waits for its next one.
    fn advance_windows(&mut self, t: Nanos) {
        let Some(driver) = &mut self.windows else {
            return;
        };
        let mut out = Vec::new();
        driver.advance(t, &mut out);
        self.touch_changed(t, &out);
        self.emit_windows(out);
        self.arm_windows();
    }

    /// After frequency changes among `events`: synchronizes the domains with CPUs whose
    /// frequency changed (their jobs progressed at the old speed up to `t`) so that
    /// their dispatch re-arms the jobs at the new speed.
    fn touch_changed(&mut self, t: Nanos, events: &[(Nanos, EventKind)]) {
        let changed: Vec<u32> = events
            .iter()
            .filter_map(|(_, e)| match e {
                EventKind::CpuFrequency { cpu, .. } => Some(*cpu),
                _ => None,
            })
            .collect();
        if changed.is_empty() {
            return;
        }
        for d in 0..self.domains.len() {
            if self.spec.domains[d]
                .cpus
                .iter()
                .any(|c| changed.contains(c))
            {
                self.touch(d, t);
            }
        }
    }

    fn arm_windows(&mut self) {
        if let Some(t) = self.windows.as_ref().and_then(Driver::next_time) {
            self.windows_gen += 1;
            self.heap.push(t, Ev::Windows, self.windows_gen);
        }
    }

    fn emit_windows(&mut self, out: Vec<(Nanos, EventKind)>) {
        for (t, kind) in out {
            self.emit(t, kind);
        }
    }

    /// Current simulated time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Jobs completed so far.
    pub fn jobs_done(&self) -> u64 {
        self.jobs_done
    }

    /// Whether the simulation has reached its end.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// Runs until simulated time `limit` (or the end of the simulation); events
    /// recorded so far are moved to `sink`.
    pub fn run_until(&mut self, limit: Nanos, sink: &mut dyn Sink) {
        let end = if self.opts.drain {
            Nanos::MAX
        } else {
            self.opts.until
        };
        while let Some(t) = self.next_time() {
            if t >= end || t > limit || self.ended_by_health() {
                break;
            }
            self.step(t);
        }
        if self.ended_by_health() {
            self.finish(self.now);
        } else if self.next_time().is_none_or(|t| t >= end) {
            self.finish(if self.opts.drain { self.now } else { end });
        } else {
            // Nothing happens before the next event: time has reached `limit`.
            self.now = self.now.max(limit);
        }
        for event in self.events.drain(..) {
            sink.emit(event);
        }
    }

    /// Whether a health action (`stop`, `suspend`) ended the simulation.
    fn ended_by_health(&self) -> bool {
        self.health.as_ref().is_some_and(|h| h.ended.is_some())
    }

    /// Runs to the end and returns the statistics.
    pub fn run(mut self, sink: &mut dyn Sink) -> Report {
        self.run_until(Nanos::MAX, sink);
        self.report()
    }

    /// The earliest pending event: a queued one or a CPU decision point.
    fn next_time(&self) -> Option<Nanos> {
        let done = self
            .domains
            .iter()
            .flat_map(|d| &d.slots)
            .filter_map(|s| s.armed)
            .min();
        match (self.heap.peek_time(), done) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn step(&mut self, t: Nanos) {
        debug_assert!(t >= self.now, "time goes backwards: {t} < {}", self.now);
        self.now = t;
        for d in 0..self.domains.len() {
            if self.domains[d].slots.iter().any(|s| s.armed == Some(t)) {
                self.touch(d, t);
            }
        }
        while self.heap.peek_time() == Some(t) {
            let (_, ev, gen) = self.heap.pop().expect("peeked");
            self.apply(t, ev, gen);
        }
        // Every dirty domain was synchronized to `t` when it was first touched.
        while let Some(d) = self.dirty.pop() {
            self.domains[d as usize].dirty = false;
            self.dispatch(d as usize, t);
        }
    }

    fn touch(&mut self, domain: usize, t: Nanos) {
        if !self.domains[domain].dirty {
            self.domains[domain].dirty = true;
            self.dirty.push(domain as u32);
            self.sync(domain, t);
        }
    }

    fn apply(&mut self, t: Nanos, ev: Ev, gen: u32) {
        match ev {
            Ev::Stall(i) => self.stall(i as usize, gen == 1, t),
            Ev::Replenish(s) => {
                if self.servers[s as usize].gen as u32 == gen {
                    let domain = self.spec.servers[s as usize].domain;
                    self.touch(domain, t);
                    self.replenish(s as usize, t);
                }
            }
            Ev::Release(task) => {
                if self.tasks[task as usize].gen as u32 == gen {
                    self.tasks[task as usize].pending_release = None;
                    let domain = self.spec.servers[self.spec.tasks[task as usize].server].domain;
                    self.touch(domain, t);
                    self.block_by_background(domain, t);
                    self.release(task as usize, t);
                }
            }
            Ev::Check { task, job } => self.check_deadline(task as usize, job, t),
            Ev::Suspend(i) => self.suspend(i as usize, t),
            Ev::Windows => {
                if self.windows_gen as u32 == gen {
                    self.advance_windows(t);
                }
            }
            Ev::Mode(i) => self.mode_request(i as usize, t),
            Ev::Ack(member) => self.agent_done(member as usize, t),
            Ev::Fault(i) => self.fault(i as usize, t),
            Ev::HealthTick => self.health_tick(gen, t),
        }
    }

    // ----- releases and completions -----

    fn schedule_release(&mut self, task: usize, nominal: Nanos) {
        let jitter = match self.spec.tasks[task].release {
            Release::Periodic { jitter, .. } if jitter > 0 => self.rng.random_range(0..=jitter),
            _ => 0,
        };
        let at = nominal.saturating_add(jitter);
        if self.opts.drain && at >= self.opts.until {
            return;
        }
        let state = &mut self.tasks[task];
        state.next_nominal = nominal;
        state.pending_release = Some(at);
        state.gen += 1;
        self.heap.push(at, Ev::Release(task as u32), state.gen);
    }

    fn release(&mut self, task: usize, t: Nanos) {
        let spec = self.task_spec(task);
        let params = self.tasks[task].params;
        let exec = match params.map_or(spec.exec, |p| p.exec) {
            Exec::Fixed(c) => c,
            Exec::Uniform { min, max } => self.rng.random_range(min..=max),
        };
        let relative_deadline = params.map_or(spec.deadline, |p| p.deadline);
        let exec = exec
            + self
                .health
                .as_mut()
                .map_or(0, |h| h.take_overrun(task, relative_deadline));
        let state = &mut self.tasks[task];
        let index = state.released;
        state.released += 1;
        state.stats.released += 1;
        state.last_release = Some(t);
        let deadline = t.saturating_add(relative_deadline);
        let dropped = state.jobs.len() >= MAX_BACKLOG;
        if dropped {
            state.stats.dropped += 1;
            state.stats.misses += 1;
        } else {
            state.jobs.push_back(Job {
                index,
                release: t,
                deadline,
                remaining: exec.max(1),
                started: false,
            });
        }
        let next = match &spec.release {
            Release::Periodic { period, .. } => {
                let period = params.map_or(*period, |p| p.period);
                Some(state.next_nominal.saturating_add(period))
            }
            Release::Sporadic {
                min_gap, max_extra, ..
            } => {
                let min_gap = params.map_or(*min_gap, |p| p.period);
                let extra = if *max_extra > 0 {
                    self.rng.random_range(0..=*max_extra)
                } else {
                    0
                };
                Some(t.saturating_add(min_gap + extra))
            }
            Release::At(times) => {
                let next = times.get(state.next_at).copied();
                state.next_at += 1;
                next
            }
        };
        if let Some(next) = next {
            self.schedule_release(task, next);
        }
        if dropped {
            return;
        }
        if self.tracing {
            let cpu = self.task_cpu(task);
            let (partition, name) = (spec.partition.clone(), spec.name.clone());
            self.emit(
                t,
                EventKind::JobRelease {
                    cpu,
                    partition,
                    task: name,
                    job: index,
                    deadline_ns: deadline,
                },
            );
        }
        if self.tracing || self.health.as_ref().is_some_and(|h| h.watches_misses(task)) {
            let check = Ev::Check {
                task: task as u32,
                job: index as u32,
            };
            self.heap.push(deadline, check, 0);
        }
        let s = spec.server;
        self.servers[s].pending += 1;
        if self.servers[s].pending == 1 {
            self.activate(s, t);
        }
    }

    /// The head job of `task` has done its work at `t` on `cpu`: it completes, unless
    /// a fifo it writes with `overflow: block` has no room for its messages, in which
    /// case it waits for room ([`Self::block_writer`]).
    fn complete(&mut self, task: usize, cpu: u32, t: Nanos) {
        let spec = self.task_spec(task);
        if spec.outputs.is_empty() && spec.inputs.is_empty() {
            self.finish_job(task, cpu, t, Vec::new());
            return;
        }
        let messages = self.outgoing(task);
        if self.would_block(task, messages.len()) {
            self.block_writer(task, cpu, messages, t);
            return;
        }
        self.finish_job(task, cpu, t, messages);
    }

    /// The head job of `task` completes at `t` on `cpu`, writing `messages` to every
    /// output (a sink delivers what it read instead).
    fn finish_job(&mut self, task: usize, cpu: u32, t: Nanos, messages: Vec<Rc<[Origin]>>) {
        let job = self.tasks[task]
            .jobs
            .pop_front()
            .expect("a completing job is queued");
        let spec = self.task_spec(task);
        let response = t - job.release;
        let missed = t > job.deadline;
        let stats = &mut self.tasks[task].stats;
        stats.jobs += 1;
        stats.max_response_ns = stats.max_response_ns.max(response);
        stats.total_response_ns += response as u128;
        stats.misses += missed as u64;
        self.jobs_done += 1;
        if self.tracing {
            let kind = EventKind::JobComplete {
                cpu,
                partition: spec.partition.clone(),
                task: spec.name.clone(),
                job: job.index,
                response_ns: response,
            };
            self.emit(t, kind);
        }
        if !spec.outputs.is_empty() || !spec.inputs.is_empty() {
            self.write_outputs(task, cpu, t, messages);
        }
        self.fresh_frame(task, t);
        self.evidence(
            task,
            bulkhead_model::health::monitor::Evidence::Heartbeat,
            t,
        );
        let s = spec.server;
        self.servers[s].pending -= 1;
        if self.servers[s].pending == 0 {
            self.idle(s, t);
        }
        if let Some(member) = self.spec.modes.as_ref().and_then(|m| m.agent_of(task)) {
            self.heap.push(t, Ev::Ack(member as u32), 0);
        }
    }

    fn check_deadline(&mut self, task: usize, job: u32, t: Nanos) {
        let missed = self.tasks[task]
            .jobs
            .iter()
            .find(|j| j.index as u32 == job && j.deadline == t);
        if let Some(job) = missed.map(|j| j.index) {
            let spec = &self.spec.tasks[task];
            let kind = EventKind::DeadlineMiss {
                cpu: self.task_cpu(task),
                partition: spec.partition.clone(),
                task: spec.name.clone(),
                job,
                deadline_ns: t,
            };
            self.emit(t, kind);
            self.evidence(task, bulkhead_model::health::monitor::Evidence::Miss, t);
        }
    }

    // ----- dispatching -----

    /// Accounts the execution on every CPU of `domain` up to `t`; completes jobs and
    /// notices exhausted budgets. Afterwards no slot runs a finished job or an
    /// exhausted server.
    fn sync(&mut self, domain: usize, t: Nanos) {
        for k in 0..self.domains[domain].slots.len() {
            let slot = &mut self.domains[domain].slots[k];
            let Some(run) = slot.running else { continue };
            let elapsed = t - slot.since;
            slot.since = t;
            let cpu = slot.cpu as usize;
            if self.busy.len() <= cpu {
                self.busy.resize(cpu + 1, 0);
            }
            self.busy[cpu] += elapsed;
            let work = bulkhead_windows::drive::work(elapsed, slot.speed);
            let s = run.server as usize;
            let job = &mut self.tasks[run.task as usize].jobs[0];
            job.remaining = job.remaining.saturating_sub(work);
            let job_done = job.remaining == 0;
            let boosted = self.servers[s].boost.is_some();
            if self.spec.servers[s].kind != ServerKind::Unlimited && !boosted {
                let server = &mut self.servers[s];
                server.budget -= elapsed;
                server.used += elapsed;
                if elapsed > 0 {
                    self.trace_budget(s, t);
                }
            }
            if job_done {
                let cpu = self.domains[domain].slots[k].cpu;
                self.stop(domain, k, t, false);
                self.complete(run.task as usize, cpu, t);
            }
            if self.servers[s].budget == 0 && self.servers[s].pending > 0 && !boosted {
                if !job_done {
                    self.stop(domain, k, t, true);
                }
                self.exhausted(s, t);
            }
        }
    }

    /// Chooses what runs on the CPUs of `domain` from `t` on (those not stalled).
    fn dispatch(&mut self, domain: usize, t: Nanos) {
        let slots = self.domains[domain].slots.len();
        let m = self.domains[domain]
            .slots
            .iter()
            .filter(|s| s.stalled == 0)
            .count();
        let mut chosen = std::mem::take(&mut self.scratch);
        chosen.clear();
        let fixed_priority = self.spec.domains[domain].policy == Policy::FixedPriority;
        for i in 0..self.domains[domain].servers.len() {
            if m == 0 {
                break;
            }
            let s = self.domains[domain].servers[i] as usize;
            if !self.eligible(s, t) {
                continue;
            }
            let key = self.key(s);
            if chosen.len() == m && key >= chosen[m - 1] {
                continue;
            }
            let pos = chosen.partition_point(|&k| k < key);
            chosen.insert(pos, key);
            chosen.truncate(m);
            // Fixed-priority domains keep their servers by priority: the first m
            // eligible ones are the ones to run.
            if fixed_priority && chosen.len() == m && self.boosted == 0 {
                break;
            }
        }
        // Stop what should not run (or should run another of its tasks), and what runs
        // on a stalled CPU.
        for k in 0..slots {
            if let Some(run) = self.domains[domain].slots[k].running {
                let keep = self.domains[domain].slots[k].stalled == 0
                    && chosen.iter().any(|&(_, s)| s == run.server)
                    && self.current_task(run.server as usize) == run.task;
                if !keep {
                    self.stop(domain, k, t, true);
                }
            }
        }
        for &(_, s) in &chosen {
            if self.servers[s as usize].slot.is_none() {
                let k = (0..slots)
                    .find(|&k| {
                        let slot = &self.domains[domain].slots[k];
                        slot.running.is_none() && slot.stalled == 0
                    })
                    .expect("a free CPU");
                self.start(domain, k, s as usize, t);
            }
        }
        self.scratch = chosen;
        for k in 0..slots {
            self.arm(domain, k, t);
        }
    }

    fn start(&mut self, domain: usize, k: usize, s: usize, t: Nanos) {
        let task = self.current_task(s);
        let job = &mut self.tasks[task as usize].jobs[0];
        let first = !job.started;
        job.started = true;
        let index = job.index;
        let slot = &mut self.domains[domain].slots[k];
        slot.running = Some(Running {
            server: s as u32,
            task,
            job: index,
        });
        slot.since = t;
        self.servers[s].slot = Some(k as u32);
        if self.tracing {
            let spec = &self.spec.tasks[task as usize];
            let kind = EventKind::JobStart {
                cpu: self.domains[domain].slots[k].cpu,
                partition: spec.partition.clone(),
                task: spec.name.clone(),
                job: index,
            };
            self.emit(t, kind);
        }
        if first && !self.spec.tasks[task as usize].inputs.is_empty() {
            self.read_inputs(task as usize, t);
        }
    }

    /// Takes the job off CPU slot `k`; `preempted` when it has not completed.
    fn stop(&mut self, domain: usize, k: usize, t: Nanos, preempted: bool) {
        let slot = &mut self.domains[domain].slots[k];
        let Some(run) = slot.running.take() else {
            return;
        };
        slot.armed = None;
        slot.idle_from = t;
        self.servers[run.server as usize].slot = None;
        if preempted && self.tracing {
            let spec = &self.spec.tasks[run.task as usize];
            let kind = EventKind::JobPreempt {
                cpu: slot.cpu,
                partition: spec.partition.clone(),
                task: spec.name.clone(),
                job: run.job,
            };
            self.emit(t, kind);
        }
    }

    /// Schedules the next decision point of slot `k`: its job's completion, its
    /// server's exhaustion, or (deferrable) the end of the server's period.
    fn arm(&mut self, domain: usize, k: usize, t: Nanos) {
        let slot = &self.domains[domain].slots[k];
        let Some(run) = slot.running else { return };
        let s = run.server as usize;
        let speed = self
            .windows
            .as_ref()
            .map_or((1, 1), |w| w.task_speed(run.task as usize));
        let remaining = self.tasks[run.task as usize].jobs[0].remaining;
        let budget = match self.servers[s].boost {
            Some(_) => Nanos::MAX,
            None => self.servers[s].budget,
        };
        let mut at =
            t.saturating_add(bulkhead_windows::drive::time_for(remaining, speed).min(budget));
        let spec = &self.spec.servers[s];
        if spec.kind == ServerKind::Deferrable {
            at = at.min(self.servers[s].period_end);
        }
        let slot = &mut self.domains[domain].slots[k];
        slot.armed = Some(at);
        slot.speed = speed;
    }

    // ----- output -----

    fn spec_ref(&self) -> &'a Spec {
        self.spec
    }

    fn task_spec(&self, task: usize) -> &'a TaskSpec {
        &self.spec_ref().tasks[task]
    }

    fn task_cpu(&self, task: usize) -> u32 {
        let s = self.spec.tasks[task].server;
        let domain = self.spec.servers[s].domain;
        match self.servers[s].slot {
            Some(k) => self.domains[domain].slots[k as usize].cpu,
            None => self.spec.domains[domain].cpus[0],
        }
    }

    fn trace_budget(&mut self, s: usize, t: Nanos) {
        if !self.tracing || self.spec.servers[s].kind == ServerKind::Unlimited {
            return;
        }
        for i in 0..self.servers[s].tasks.len() {
            let task = self.servers[s].tasks[i] as usize;
            let spec = &self.spec.tasks[task];
            let kind = EventKind::Budget {
                cpu: self.task_cpu(task),
                partition: spec.partition.clone(),
                task: spec.name.clone(),
                remaining_ns: self.servers[s].budget,
            };
            self.emit(t, kind);
        }
    }

    fn emit(&mut self, t: Nanos, kind: EventKind) {
        if self.tracing {
            self.events.push(Event::new(t, kind));
        }
    }

    fn finish(&mut self, end: Nanos) {
        if self.finished {
            return;
        }
        self.finished = true;
        // The window schedule handles what is planned at the end itself (a window
        // starting exactly then is started, as DEmOS does at its timeout).
        while let Some(t) = self
            .windows
            .as_ref()
            .and_then(Driver::next_time)
            .filter(|&t| t <= end)
        {
            self.advance_windows(t);
        }
        self.now = end;
        for d in 0..self.domains.len() {
            self.sync(d, end);
        }
        for state in &mut self.tasks {
            state.stats.misses += state.jobs.iter().filter(|j| j.deadline <= end).count() as u64;
            state.stats.pending = state.jobs.len() as u64;
        }
    }

    /// The statistics of the simulation so far.
    pub fn report(&self) -> Report {
        let name = |t: u32| {
            let spec = &self.spec.tasks[t as usize];
            format!("{}/{}", spec.partition, spec.name)
        };
        Report {
            duration_ns: self.now,
            seed: self.opts.seed,
            jobs: self.jobs_done,
            tasks: self.tasks.iter().map(|t| t.stats.finished()).collect(),
            chains: self.channels.chain_stats(self.now, name),
            channels: self.channels.channel_stats(),
            windows: self.windows.as_ref().map(Driver::stats),
            switches: self.switch_stats(),
            pipelines: Vec::new(),
            energy: self.windows.as_ref().and_then(Driver::energy),
            stops: self.stop_events.clone(),
            health_ended: self.health.as_ref().and_then(|h| h.ended.clone()),
            background: crate::background::stats(&self.spec.background, self.now, |cpu| {
                self.busy.get(cpu as usize).copied().unwrap_or(0)
            }),
        }
    }
}

/// The readers of each channel.
fn readers(spec: &Spec) -> Vec<Vec<u32>> {
    let mut readers = vec![Vec::new(); spec.channels.len()];
    for (i, t) in spec.tasks.iter().enumerate() {
        for &c in &t.inputs {
            readers[c].push(i as u32);
        }
    }
    readers
}

/// Whether each task originates data: no channel it reads is written by a task.
fn sources(spec: &Spec) -> Vec<bool> {
    let mut written = vec![false; spec.channels.len()];
    for t in &spec.tasks {
        for &c in &t.outputs {
            written[c] = true;
        }
    }
    spec.tasks
        .iter()
        .map(|t| t.inputs.iter().all(|&c| !written[c]))
        .collect()
}
