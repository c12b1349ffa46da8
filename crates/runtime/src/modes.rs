//! Mode switches of a running system (docs/modes.md, M2-Xen: Li et al., "Multi-Mode
//! Virtualization for Soft Real-Time Systems", RTAS 2018, Sec. IV-V).
//!
//! The **mode manager** (M2-Xen's HMM) lives in the supervisor's event loop, behind the
//! control socket: it drives the same pure state machine as `bulkhead sim`
//! ([`bulkhead_modes::Switch`]), so for the same acknowledgements it takes the same steps
//! in the same order and records the same trace events. It performs each step at once
//! (an interface change) or hands it to the partition's **mode agent** (M2-Xen's DMM), a
//! thread of the supervisor, and feeds each agent's acknowledgement back to the machine.
//!
//! An agent changes its partition's task set (Sec. IV-C: "the task engine sends SIGSTOP
//! signals and SIGCONT signals to the tasks to be stopped and started"): a task that
//! leaves is stopped (or, asleep, frozen where it sleeps until its start, so that the
//! park need not wait for it to run: [`ParkFreezers`]), a changed task gets its new
//! reservation with `sched_setattr`, a task that joins gets its reservation and is
//! continued; in that order. Then it publishes the new mode in every running task's
//! control block and waits for the programs' acknowledgements (at most one agent
//! period), and acknowledges itself. A parked task's SCHED_DEADLINE reservation (shrunk
//! to an empty one, then SCHED_OTHER while parked: [`leave_deadline`]) is given back
//! after the acknowledgement, once the switch is over ([`ReleaseWindow`]): a parked task
//! runs nothing, so its reservation is only the kernel's admission count, which a start
//! the kernel refuses (EBUSY) gives back first.
//!
//! Interfaces are held by the kernel: every task of a partition runs under its own
//! SCHED_DEADLINE reservation (the kernel throttles it at its runtime), so a partition
//! never takes more than the sum of its running tasks' reservations; the manager keeps
//! that sum within the partition's interface at every step (checked, and recorded in
//! `agent_ack` as `demand_ppm` against `interface_ppm`), and the kernel's deadline
//! admission control keeps each pool's sum within the pool's capacity (each pool is one
//! exclusive cpuset, a root domain of its own; `sched_rt_runtime_us/sched_rt_period_us`
//! of each CPU). cgroup CPU bandwidth (`cpu.max`) would not do: it limits SCHED_OTHER
//! tasks only.
//!
//! Boost, the Linux way (Sec. V-B: "temporarily boost the priority of the VCPU hosting
//! the DMM ... and then return the DMM to its normal priority after the HMM receives
//! the acknowledgement"): agents run under SCHED_OTHER; under the `boost` policy the
//! manager raises the agent of the partition being switched to SCHED_FIFO
//! [`BOOST_PRIORITY`], a priority nothing else of bulkhead uses (above the supervisor's
//! 40, below the kernel's threaded interrupts at 50), before it sends the request, and
//! lowers it back when it has the acknowledgement. When nothing in a partition's local
//! switch waits (its programs acknowledge at once, its parks find their tasks asleep,
//! the kernel admits its reservations at once), the manager carries it out itself at
//! that priority, in the agent's place ([`ModeManager::switch_here`]): the agent is a
//! thread of the manager's own process, and handing it the request was about half of
//! each step's time.

use crate::mailbox::{self, Receiver, Sender};
use crate::tasks::{lock_pid, TaskPort};
use bulkhead_analysis::report::Options;
use bulkhead_control::{ErrorCode, InterfaceStatus, ModeOutcome, Response, StepRecord, Ticket};
use bulkhead_model::{CpuSet, Nanos, SwitchPolicy, System, Task};
use bulkhead_modes::{Interface, Step, Switch, Table};
use bulkhead_os::cgroup::{
    hold_moves, procs, procs_file, set_frozen, write_file, FreezerState, Version::V1,
};
use bulkhead_os::event::Wakeup;
use bulkhead_os::sched::{self, DeadlineParams, Policy, ProcFiles};
use bulkhead_trace::{Event, EventKind};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// SCHED_FIFO priority of a boosted mode agent.
pub const BOOST_PRIORITY: u32 = 45;

/// The mode events of a run (`mode_request`, `interface_change`, `agent_request`,
/// `agent_ack`, `mode_done`), on the rt partitions' time line.
pub type ModeEvents = Arc<Mutex<Vec<Event>>>;

/// What an agent does to one task of its partition.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Action {
    /// Stop it and give its reservation back.
    Park,
    /// Give it this reservation and these times (it keeps running).
    Set(DeadlineParams, Times),
    /// Give it this reservation and these times, and continue it.
    Start(DeadlineParams, Times),
}

/// A task's budget, period and deadline in a mode (ns), which its program's releases
/// follow from its next release on ([`bulkhead_task::link::ModePort::set_timing`]).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Times {
    budget: Nanos,
    period: Nanos,
    deadline: Nanos,
}

impl Times {
    fn of(t: &Task) -> Times {
        Times {
            budget: t.budget,
            period: t.period,
            deadline: t.deadline,
        }
    }

    /// Publishes them to a task its agent starts, on a grid whose first release is now
    /// (a joining task's first job is released at its start, as in the simulation).
    fn start(self, t: &TaskPort) {
        t.port.start_timing(self.budget, self.period, self.deadline);
    }

    /// Publishes them to the task's program unless it has them already.
    fn publish(self, t: &TaskPort) {
        let now = t.port.timing();
        if (now.budget_ns, now.period_ns, now.deadline_ns)
            != (self.budget, self.period, self.deadline)
        {
            t.port.set_timing(self.budget, self.period, self.deadline);
        }
    }
}

/// A request to an agent: switch to `mode` (index in the table).
struct Command {
    mode: u32,
    /// Per task of the agent (its index), what to do, in the order to do it.
    actions: Vec<(usize, Action)>,
    /// The tasks that run in the new mode: told the mode, awaited.
    notify: Vec<usize>,
}

/// An agent's acknowledgement, or (`late`) what went wrong after it, giving back the
/// parked tasks' reservations ([`ReleaseWindow`]).
struct Done {
    member: usize,
    /// Tasks that did not acknowledge in time, and what failed.
    problems: Vec<String>,
    late: bool,
}

impl Done {
    fn new(member: usize, problems: Vec<String>, late: bool) -> Done {
        Done {
            member,
            problems,
            late,
        }
    }
}

/// When the agents give back the reservations of the tasks they parked
/// ([`leave_deadline`]): after their acknowledgement, once the window opens: at the end
/// of the switch (the manager opens it once it has taken the switch's latency), or as
/// soon as any agent's start is refused by the kernel's admission (EBUSY), which may be
/// waiting for those reservations.
///
/// Why not in the park itself: the reservation of a parked task is only the kernel's
/// admission count (the task runs nothing, stopped or frozen), and giving it back means
/// reading the task's `/proc/TID/sched` (does it owe runtime) and two `sched_setattr`
/// per thread, 12 µs of each 35 µs step of a Boost switch on the development VM, each
/// step waiting for the one before it (docs/modes.md, *Reservations given back after the
/// switch*).
///
/// Concurrency: the count only grows, under the mutex; an agent reads it when it takes a
/// command and waits, after acknowledging, until it is larger. The manager opens the
/// window at the end of every switch (finished or abandoned) and when it stops, so no
/// agent waits past the switch it acknowledged, nor past the run.
#[derive(Default)]
struct ReleaseWindow {
    opened: Mutex<u64>,
    changed: Condvar,
}

impl ReleaseWindow {
    /// How many times the window has opened.
    fn count(&self) -> u64 {
        *self.opened.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn open(&self) {
        *self.opened.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.changed.notify_all();
    }

    /// Waits until the window has opened after `count` ([`ReleaseWindow::count`]).
    fn wait_past(&self, count: u64) {
        let opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        let waited = self.changed.wait_while(opened, |n| *n <= count);
        drop(waited.unwrap_or_else(|e| e.into_inner()));
    }
}

/// The tasks an agent parked whose reservations it has not given back yet: index and pid.
type Pending = Vec<(usize, u32)>;

struct Agent {
    tx: Option<Sender<Work>>,
    thread: Option<JoinHandle<()>>,
    /// The agent thread's id, which the manager boosts.
    tid: i32,
    /// Boosted for the request in progress (lowered at its acknowledgement).
    boosted: bool,
    /// Its tasks and what it keeps across switches, which the manager uses when it
    /// carries out a local switch itself ([`ModeManager::switch_here`]).
    shared: Arc<AgentShared>,
}

/// What an agent thread is handed.
enum Work {
    /// A local switch to carry out and acknowledge.
    Switch(Command),
    /// Give back the reservations of the tasks the manager parked in the agent's place
    /// ([`ModeManager::switch_here`]) once the release window has opened after this
    /// count ([`ReleaseWindow::count`]).
    Release(u64),
}

/// An agent's tasks, and what it keeps across switches under a lock that its thread
/// holds while it acts (from before the manager learns its id to the end of its
/// warm-up, during each local switch and while it gives reservations back) and the
/// manager takes, when free, for a local switch it carries out itself.
struct AgentShared {
    tasks: Vec<TaskPort>,
    kept: Mutex<Kept>,
}

impl AgentShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What an agent keeps across switches.
struct Kept {
    freezers: Option<ParkFreezers>,
    /// Per task, its /proc files ([`proc_files`]).
    files: Vec<Option<ProcFiles>>,
    /// The tasks parked whose reservations are still to be given back.
    pending: Pending,
}

impl Kept {
    /// Lends it to one local switch.
    fn held<'a>(&'a mut self, releases: &'a ReleaseWindow) -> Held<'a> {
        Held {
            freezers: &mut self.freezers,
            files: &mut self.files,
            pending: &mut self.pending,
            releases,
        }
    }
}

/// A switch in progress.
struct Running {
    switch: Switch,
    from: usize,
    to: usize,
    started: Instant,
    ticket: Option<Ticket>,
    steps: Vec<StepRecord>,
    /// The manager's thread and its CPUs before the switch kept it with the agents
    /// ([`ModeManager::pin_apart`]), given back at the end.
    pinned: Option<(i32, Vec<u32>)>,
    /// The release window's count at the request ([`ReleaseWindow::count`]).
    opened: u64,
}

/// The manager's thread at [`BOOST_PRIORITY`] for the local switches it carries out in
/// the agents' place ([`ModeManager::switch_here`]), until the switch ends or a request
/// goes to an agent thread.
enum Raised {
    /// It ran at least there already.
    Already,
    /// Raised; its own policy comes back when this is dropped.
    Entered { _restores: sched::Realtime },
}

/// The mode manager.
pub struct ModeManager {
    table: Table,
    system: System,
    current: usize,
    agents: Vec<Option<Agent>>,
    /// Per member: the mode whose task set runs now, and its interface now.
    tasks_in: Vec<usize>,
    interfaces: Vec<Option<Interface>>,
    running: Option<Running>,
    last_request: Option<Instant>,
    agent_period: Duration,
    events: ModeEvents,
    epoch_ns: u64,
    done_rx: Receiver<Done>,
    wake: Arc<Wakeup>,
    /// Problems of past switches, for the run's warnings.
    warnings: Vec<String>,
    /// The CPUs of the agents ([`agent_cpus`]), where the manager runs during a switch.
    cpus: Option<Vec<u32>>,
    /// Per mode, the switch to it from the current mode, built ahead ([`ModeManager::prepare`]).
    prepared: Vec<Option<Switch>>,
    /// Opened at the end of each switch: the agents then give back their parked tasks'
    /// reservations.
    releases: Arc<ReleaseWindow>,
    /// The acknowledgements of the local switches the manager carried out itself, to
    /// take in order ([`ModeManager::settle`]).
    acked: std::collections::VecDeque<Done>,
    /// The members whose tasks the manager parked in their agents' place, whose agents
    /// are yet to be told to give the reservations back ([`ModeManager::hand_back`]).
    to_release: Vec<usize>,
    raised: Option<Raised>,
}

impl ModeManager {
    /// Starts an agent per modal partition over the tasks in `ports` (every rt task,
    /// started by `crate::tasks` in the initial mode) and publishes the initial
    /// mode in their control blocks. The mode table is computed with `options`, the
    /// ones admission used ([`crate::tasks::RtPartitions::machine_options`]). Events are recorded in
    /// `events` with times since `epoch_ns` (CLOCK_MONOTONIC). The agents run on this
    /// thread's CPUs outside `rt_cpus` (those of the rt tasks), where it has any
    /// ([`agent_cpus`]).
    pub fn start(
        system: &System,
        options: &Options,
        ports: Vec<TaskPort>,
        epoch_ns: u64,
        rt_cpus: Option<&CpuSet>,
        events: ModeEvents,
    ) -> std::io::Result<ModeManager> {
        let modes = system.modes.as_ref().expect("a system with modes");
        let table = bulkhead_analysis::modes::mode_table(system, options);
        let current = table.mode(&modes.initial).expect("the initial mode");
        let wake = Arc::new(Wakeup::new()?);
        let (done_tx, done_rx) = mailbox::channel();
        let releases = Arc::new(ReleaseWindow::default());
        let agent_period = Duration::from_nanos(modes.agent.period);
        let mut ports: Vec<Option<TaskPort>> = ports.into_iter().map(Some).collect();
        let cpus = agent_cpus(rt_cpus);
        let mut agents = Vec::new();
        for (k, member) in table.members.iter().enumerate() {
            let mine: Vec<TaskPort> = ports
                .iter_mut()
                .filter(|p| p.as_ref().is_some_and(|p| p.partition == member.name))
                .filter_map(Option::take)
                .collect();
            for p in &mine {
                p.port.set_mode(current as u32);
            }
            if !modes.is_modal(&member.name) {
                agents.push(None);
                continue;
            }
            agents.push(Some(spawn_agent(
                k,
                &member.name,
                mine,
                (done_tx.clone(), wake.clone(), releases.clone()),
                agent_period,
                // The stop-start worker moves the tasks into freezer cgroups of its own.
                system.stop_start.is_none(),
                cpus.clone(),
            )?));
        }
        let interfaces = table.modes[current]
            .locals
            .iter()
            .map(|l| l.interface)
            .collect();
        let mut manager = ModeManager {
            tasks_in: vec![current; table.members.len()],
            interfaces,
            table,
            system: system.clone(),
            current,
            agents,
            running: None,
            last_request: None,
            agent_period,
            events,
            epoch_ns,
            done_rx,
            wake,
            warnings: Vec::new(),
            cpus,
            prepared: Vec::new(),
            releases,
            acked: Default::default(),
            to_release: Vec::new(),
            raised: None,
        };
        manager.prepare();
        Ok(manager)
    }

    /// Builds the switches from the current mode to every mode it may switch to, so that
    /// a request starts its switch without building it: the machine's allocations took
    /// 31 µs at the median at the start of a Boost switch of 12 partitions on the
    /// development VM, 5 % of the switch (docs/modes.md, *Fewer files per step*).
    fn prepare(&mut self) {
        let modes = self.system.modes.as_ref().expect("a system with modes");
        let from = &self.table.modes[self.current].name;
        let table = &self.table;
        self.prepared = (0..table.modes.len())
            .map(|to| {
                let policy = modes.policy(from, &table.modes[to].name);
                let policy = policy.filter(|_| to != self.current)?;
                Some(Switch::new(table, self.current, to, policy))
            })
            .collect();
    }

    /// The descriptor that becomes readable when an agent acknowledged.
    pub fn fd(&self) -> i32 {
        self.wake.fd()
    }

    /// The current mode's name, and the one a switch in progress goes to.
    pub fn mode(&self) -> (String, Option<String>) {
        let to = self
            .running
            .as_ref()
            .map(|r| self.table.modes[r.to].name.clone());
        (self.table.modes[self.current].name.clone(), to)
    }

    /// The interface in force of partition `name` (a partition scheduled as a server).
    pub fn interface(&self, name: &str) -> Option<InterfaceStatus> {
        let k = self.table.members.iter().position(|m| m.name == name)?;
        self.interfaces[k].map(|i| InterfaceStatus {
            budget_ns: i.budget,
            period_ns: i.period,
        })
    }

    /// The problems seen so far (one line each), emptied.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Whether a switch is in progress (requested and not yet over).
    pub fn switching(&self) -> bool {
        self.running.is_some()
    }

    /// A `mode` request (from the control socket with its `ticket`, or from the health
    /// monitor without): starts the switch to `name`. Returns the reply when it is over
    /// at once or refused; `None` when the reply comes later (from [`Self::collect`]).
    pub fn request(&mut self, name: &str, ticket: Option<Ticket>) -> Option<Response> {
        let refuse = |code, message: String| Some(Response::error(None, code, message));
        let modes = self.system.modes.as_ref().expect("a system with modes");
        let Some(to) = self.table.mode(name) else {
            return refuse(ErrorCode::UnknownMode, format!("no mode `{name}`"));
        };
        if let Some(r) = &self.running {
            let going = &self.table.modes[r.to].name;
            return refuse(
                ErrorCode::Busy,
                format!("a switch to `{going}` is in progress"),
            );
        }
        let from = &self.table.modes[self.current].name;
        if to == self.current {
            return refuse(ErrorCode::NotAllowed, format!("already in mode `{name}`"));
        }
        let Some(policy) = modes.policy(from, name) else {
            return refuse(
                ErrorCode::NotAllowed,
                format!("the switch {from} -> {name} is not in `modes.transitions`"),
            );
        };
        if let Some(last) = self.last_request {
            if last.elapsed() < self.agent_period {
                return refuse(
                    ErrorCode::Refused,
                    format!(
                        "sooner than the agent period ({}) after the last switch",
                        bulkhead_model::units::format_duration(self.agent_period.as_nanos() as u64)
                    ),
                );
            }
        }
        Some(self.begin(to, policy, ticket)).flatten()
    }

    fn begin(
        &mut self,
        to: usize,
        policy: SwitchPolicy,
        ticket: Option<Ticket>,
    ) -> Option<Response> {
        let started = Instant::now();
        self.last_request = Some(started);
        let pinned = self.pin_apart();
        let prepared = self.prepared.get_mut(to).and_then(Option::take);
        let mut switch = prepared
            .filter(|s| s.policy() == policy)
            .unwrap_or_else(|| Switch::new(&self.table, self.current, to, policy));
        self.record(started, switch.request_event());
        let first = switch.start();
        self.running = Some(Running {
            switch,
            from: self.current,
            to,
            started,
            ticket,
            steps: Vec::new(),
            pinned,
            opened: self.releases.count(),
        });
        self.go_on(first).or_else(|| self.settle())
    }

    /// Keeps the calling thread, the manager, on the agents' CPUs for the switch, and
    /// returns what to give back (`None`: nothing changed). An agent's acknowledgement
    /// wakes the manager while the agent, boosted above it, still runs: the kernel
    /// (`select_task_rq_rt`) then woke the manager on another CPU it may use, a pool's,
    /// where every task an agent had just started preempted it (SCHED_DEADLINE above
    /// SCHED_FIFO) and ran its job before the manager could send the next request:
    /// 170-270 µs between an acknowledgement and the next request instead of 40
    /// (docs/modes.md, An agent on its tasks' CPU).
    fn pin_apart(&self) -> Option<(i32, Vec<u32>)> {
        let apart = self.cpus.as_ref()?;
        let own = sched::own_cpus();
        let both: Vec<u32> = own.iter().copied().filter(|c| apart.contains(c)).collect();
        if both.is_empty() || both.len() == own.len() {
            return None;
        }
        sched::set_affinity(0, both).ok()?;
        Some((bulkhead_os::proc::tid(), own))
    }

    /// Performs `steps`; the reply once the switch is over or failed.
    fn go_on(&mut self, steps: Result<Vec<Step>, bulkhead_modes::SwitchError>) -> Option<Response> {
        let steps = match steps {
            Ok(steps) => steps,
            Err(e) => return self.fail(e.into()),
        };
        for step in steps {
            if let Err(e) = self.perform(step) {
                return self.fail(e);
            }
            if step == Step::Done {
                return self.finish();
            }
        }
        None
    }

    /// Records one step and does what it asks.
    fn perform(&mut self, step: Step) -> Result<(), SwitchFailure> {
        let r = self.running.as_ref().expect("a switch in progress");
        let now = Instant::now();
        let latency = now.duration_since(r.started).as_nanos() as Nanos;
        let event = r.switch.event(&step, latency);
        let record = StepRecord {
            t_ns: latency,
            event: step_name(&step).to_string(),
            partition: match step {
                Step::Interface { member, .. }
                | Step::Request { member, .. }
                | Step::Ack { member, .. } => Some(self.table.members[member].name.clone()),
                Step::Done => None,
            },
            boost: matches!(step, Step::Request { boost: true, .. }),
        };
        self.record(now, event);
        let to = r.to;
        self.running
            .as_mut()
            .expect("a switch in progress")
            .steps
            .push(record);
        match step {
            Step::Interface {
                member,
                interface,
                bandwidth,
                ..
            } => {
                self.interfaces[member] = Some(interface);
                self.check_demand(member, bandwidth)
            }
            Step::Request { member, boost } => self.ask(member, to, boost),
            Step::Ack { member, .. } => {
                self.tasks_in[member] = to;
                match self.interfaces[member] {
                    Some(i) => {
                        let n = self.table.members[member].cpus;
                        self.check_demand(member, bulkhead_modes::bandwidth(i.budget, i.period, n))
                    }
                    None => Ok(()),
                }
            }
            Step::Done => Ok(()),
        }
    }

    /// A partition's running task set must fit its interface (no VM overload).
    fn check_demand(
        &self,
        member: usize,
        interface: bulkhead_modes::Ppm,
    ) -> Result<(), SwitchFailure> {
        let local = &self.table.modes[self.tasks_in[member]].locals[member];
        let demand = bulkhead_modes::demand(&local.tasks);
        match demand <= interface {
            true => Ok(()),
            false => Err(SwitchFailure::Overload {
                partition: self.table.members[member].name.clone(),
                demand,
                interface,
            }),
        }
    }

    /// Hands member `member`'s switch to mode `to` to its agent; under Boost the manager
    /// carries it out itself when it can ([`Self::switch_here`]).
    fn ask(&mut self, member: usize, to: usize, boost: bool) -> Result<(), SwitchFailure> {
        let old = &self.table.modes[self.current].locals[member].tasks;
        let new = &self.table.modes[to].locals[member].tasks;
        let name = &self.table.members[member].name;
        let reclaim = self
            .system
            .partitions
            .iter()
            .find(|p| &p.name == name)
            .is_some_and(|p| p.reclaim);
        let agent = self.agents[member]
            .as_ref()
            .ok_or_else(|| SwitchFailure::NoAgent(name.clone()))?;
        let (actions, notify) = plan(&agent.shared.tasks, old, new, reclaim)?;
        let mut command = Command {
            mode: to as u32,
            actions,
            notify,
        };
        if boost {
            command = match self.switch_here(member, command) {
                Ok(()) => return Ok(()),
                Err(rest) => rest,
            };
        }
        let opened = self.running.as_ref().map_or(0, |r| r.opened);
        self.hand_back(opened);
        let name = &self.table.members[member].name;
        let agent = self.agents[member].as_mut().expect("checked above");
        if boost {
            // The manager boosts the agent before it sends the request (M2-Xen V-B), so
            // that the agent runs at once whatever else waits on the supervisor's CPUs.
            sched::set(
                agent.tid,
                &Policy::Fifo {
                    priority: BOOST_PRIORITY,
                },
            )
            .map_err(|source| SwitchFailure::Boost {
                partition: name.clone(),
                source,
            })?;
            agent.boosted = true;
        }
        agent
            .tx
            .as_ref()
            .and_then(|tx| tx.send(Work::Switch(command)).ok())
            .ok_or_else(|| SwitchFailure::AgentStopped(name.clone()))
    }

    /// Boost in the agent's place: the manager carries out member `member`'s local
    /// switch itself, at [`BOOST_PRIORITY`] or above, when nothing in it waits: its
    /// agent is idle (its lock free), every program told the mode acknowledges at once,
    /// every park finds its task asleep and every reservation is admitted at once. M2-Xen
    /// boosts the agent so that it runs at once (Sec. V-B); here the agent is a thread of
    /// the manager's own process, and handing it the request cost two context switches,
    /// a wake-up and two `sched_setattr` per step, about half of each step of a Boost
    /// switch (docs/modes.md, The agent's step in the manager). Its acknowledgement is
    /// queued for [`Self::settle`]. Returns what is left of the command when the agent
    /// must do it (an action that would wait, and every action after it).
    fn switch_here(&mut self, member: usize, command: Command) -> Result<(), Command> {
        let agent = self.agents[member].as_ref().expect("asked");
        let shared = agent.shared.clone();
        let tasks = &shared.tasks;
        if !command.notify.iter().all(|&i| tasks[i].port.acks_at_once()) {
            return Err(command);
        }
        let mut kept = match shared.kept.try_lock() {
            Ok(kept) => kept,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(command),
        };
        if !self.raise() {
            return Err(command);
        }
        let releases = self.releases.clone();
        let mut held = kept.held(&releases);
        let mut problems = Vec::new();
        if let Some(k) = act_at_once(tasks, &command.actions, &mut held, &mut problems) {
            self.warn(member, problems);
            let actions = command.actions[k..].to_vec();
            return Err(Command { actions, ..command });
        }
        for &i in &command.notify {
            tasks[i].port.publish_mode(command.mode);
        }
        if !kept.pending.is_empty() {
            self.to_release.push(member);
        }
        self.acked.push_back(Done::new(member, problems, false));
        Ok(())
    }

    /// Raises the manager's thread to [`BOOST_PRIORITY`] unless it runs there or above
    /// or is raised already; `false` if the kernel refuses.
    fn raise(&mut self) -> bool {
        if self.raised.is_none() {
            self.raised = match sched::Realtime::at_least(BOOST_PRIORITY as i32) {
                Ok(None) => Some(Raised::Already),
                Ok(Some(r)) => Some(Raised::Entered { _restores: r }),
                Err(_) => None,
            };
        }
        self.raised.is_some()
    }

    /// Before a request goes to an agent thread, and at the end of a switch: the
    /// manager's own priority comes back (a boosted agent then runs at once, above it),
    /// and each agent whose tasks the manager parked in its place is told to give their
    /// reservations back once the release window opens (at the end of the switch, or
    /// when a start the kernel refuses opens it).
    /// `opened`: the release window's count at the switch's request.
    fn hand_back(&mut self, opened: u64) {
        self.raised = None;
        for member in self.to_release.drain(..) {
            let tx = self.agents[member].as_ref().and_then(|a| a.tx.as_ref());
            if let Some(tx) = tx {
                let _ = tx.send(Work::Release(opened));
            }
        }
    }

    /// Takes the agents' acknowledgements; returns the replies of switches that ended.
    pub fn collect(&mut self) -> Vec<(Ticket, Response)> {
        self.wake.clear();
        let mut replies = Vec::new();
        // A boosted agent on the manager's CPUs preempts it as soon as it has its request
        // and has mostly acknowledged by the time the request's `send` returns: its
        // acknowledgement is taken here at once, not after a round of the event loop for
        // its wake-up (a round per step took the bench's Boost switch of 12 steps from
        // about 350 to 450-550 µs at the median on the development VM: docs/modes.md,
        // *Fewer files per step*).
        while let Some(done) = self.done_rx.try_recv() {
            let ticket = self.running.as_ref().and_then(|r| r.ticket);
            if let Some(response) = self.take(done).or_else(|| self.settle()) {
                if let Some(t) = ticket {
                    replies.push((t, response));
                }
            }
        }
        replies
    }

    /// Takes the acknowledgements of the local switches the manager carried out itself,
    /// in order; the reply once the switch is over or failed.
    fn settle(&mut self) -> Option<Response> {
        while let Some(done) = self.acked.pop_front() {
            if let Some(response) = self.take(done) {
                return Some(response);
            }
        }
        None
    }

    /// Takes one acknowledgement (or late problems) of agent `done.member`; the reply
    /// once the switch is over or failed.
    fn take(&mut self, done: Done) -> Option<Response> {
        self.warn(done.member, done.problems);
        if done.late {
            return None;
        }
        if let Err(e) = self.lower(done.member) {
            self.warn(done.member, [format!("lowering the boost: {e}")]);
        }
        let steps = self.running.as_mut()?.switch.ack(done.member);
        self.go_on(steps)
    }

    /// Adds what went wrong in member `member`'s local switches (its agent's, or the
    /// manager's in its place) to the run's warnings.
    fn warn(&mut self, member: usize, problems: impl IntoIterator<Item = String>) {
        let name = &self.table.members[member].name;
        let lines = problems
            .into_iter()
            .map(|p| format!("mode agent of `{name}`: {p}"));
        self.warnings.extend(lines);
    }

    /// Returns a boosted agent to normal priority, now that the manager has its
    /// acknowledgement (M2-Xen V-B: "return the DMM to its normal priority after the HMM
    /// receives the acknowledgement"). Lowering itself before it acknowledged would put
    /// the agent's last step, the acknowledgement, behind every normal thread of the
    /// supervisor's CPUs.
    fn lower(&mut self, member: usize) -> Result<(), bulkhead_os::Error> {
        let Some(agent) = self.agents[member].as_mut().filter(|a| a.boosted) else {
            return Ok(());
        };
        agent.boosted = false;
        sched::set(agent.tid, &Policy::Other { nice: 0 })
    }

    /// The switch is over: the new mode is current.
    fn finish(&mut self) -> Option<Response> {
        let r = self.running.take().expect("a switch in progress");
        // The switch is over at its last acknowledgement: what follows is done after it.
        let latency_ns = r.started.elapsed().as_nanos() as u64;
        self.releases.open();
        self.hand_back(r.opened);
        unpin(r.pinned.as_ref());
        self.current = r.to;
        self.prepare();
        let outcome = ModeOutcome {
            from: self.table.modes[r.from].name.clone(),
            to: self.table.modes[r.to].name.clone(),
            policy: r.switch.policy().name().to_string(),
            latency_ns,
            steps: r.steps,
        };
        Some(Response::mode(None, outcome))
    }

    /// The switch cannot go on (an agent stopped, a check failed): it is abandoned
    /// where it is and reported; the system keeps running.
    fn fail(&mut self, why: SwitchFailure) -> Option<Response> {
        let r = self.running.take().expect("a switch in progress");
        self.releases.open();
        self.hand_back(r.opened);
        self.acked.clear();
        unpin(r.pinned.as_ref());
        self.prepare();
        let line = format!(
            "switch to `{}` abandoned: {why}",
            self.table.modes[r.to].name
        );
        eprintln!("bulkhead: {line}");
        self.warnings.push(line);
        Some(Response::error(None, ErrorCode::Internal, why.to_string()))
    }

    fn record(&self, at: Instant, kind: EventKind) {
        let t = monotonic_of(at).saturating_sub(self.epoch_ns);
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Event::new(t, kind));
    }
}

impl Drop for ModeManager {
    fn drop(&mut self) {
        for a in self.agents.iter_mut().flatten() {
            a.tx = None;
        }
        self.releases.open();
        for a in self.agents.iter_mut().flatten() {
            if let Some(t) = a.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// Gives the manager's thread back the CPUs it had before the switch
/// ([`ModeManager::pin_apart`]); on failure it keeps the agents' (nothing wrong).
fn unpin(pinned: Option<&(i32, Vec<u32>)>) {
    if let Some((tid, own)) = pinned {
        let _ = sched::set_affinity(*tid, own.iter().copied());
    }
}

/// The trace event name of a step.
fn step_name(step: &Step) -> &'static str {
    match step {
        Step::Interface { .. } => "interface_change",
        Step::Request { .. } => "agent_request",
        Step::Ack { .. } => "agent_ack",
        Step::Done => "mode_done",
    }
}

/// CLOCK_MONOTONIC nanoseconds of `at` (an `Instant` is CLOCK_MONOTONIC on Linux).
fn monotonic_of(at: Instant) -> u64 {
    let now = bulkhead_task::clock::now_ns();
    let ago = Instant::now().saturating_duration_since(at).as_nanos() as u64;
    now.saturating_sub(ago)
}

/// Per task (its index in the agent's list) what to do, in order; and the tasks to notify.
type Plan = (Vec<(usize, Action)>, Vec<usize>);

/// Why a mode switch cannot go on: it is abandoned where it is ([`ModeManager::fail`]).
#[derive(Debug, thiserror::Error)]
enum SwitchFailure {
    #[error(transparent)]
    Machine(#[from] bulkhead_modes::SwitchError),
    #[error(
        "partition `{partition}` would demand {demand} ppm on an interface of {interface} ppm"
    )]
    Overload {
        partition: String,
        demand: bulkhead_modes::Ppm,
        interface: bulkhead_modes::Ppm,
    },
    #[error("partition `{0}` has no mode agent")]
    NoAgent(String),
    #[error("boosting the mode agent of `{partition}`: {source}")]
    Boost {
        partition: String,
        source: bulkhead_os::Error,
    },
    #[error("the mode agent of `{0}` has stopped")]
    AgentStopped(String),
    /// A task's parameters are no SCHED_DEADLINE reservation.
    #[error("task `{task}`: {source}")]
    Reservation {
        task: String,
        source: bulkhead_os::Error,
    },
}

/// Why an agent could not carry out one task's action (reported, the switch goes on).
#[derive(Debug, thiserror::Error)]
enum ActError {
    #[error(transparent)]
    Sched(#[from] bulkhead_os::Error),
    #[error(transparent)]
    Stat(#[from] std::io::Error),
    /// Thawing the task's freezer cgroup at its start ([`ParkFreezers`]).
    #[error("thawing its freezer cgroup: {0}")]
    Thaw(std::io::Error),
    /// The task's state in /proc/PID/stat when the agent gave up waiting.
    #[error("not stopped yet (state {0:?}) after SIGSTOP")]
    NotStopped(Option<char>),
    /// The action would have to wait (for the task to take its stop, or for the kernel
    /// to admit its reservation), and its caller may not ([`act`] without `until`):
    /// nothing was signalled nor reserved.
    #[error("the action would have to wait")]
    WouldWait,
}

/// What an agent does to go from task set `old` to `new` (mode agent excluded): tasks
/// that leave first, then changed ones, smaller reservations before larger ones, then
/// tasks that join; and which tasks run afterwards (to notify).
fn plan<'a>(
    tasks: &[TaskPort],
    old: &'a [Task],
    new: &'a [Task],
    reclaim: bool,
) -> Result<Plan, SwitchFailure> {
    let find = |set: &'a [Task], name: &str| set.iter().find(|t| t.name == name);
    let params = |t: &Task| {
        DeadlineParams::for_task(t.budget, t.deadline, t.period)
            .map(|p| p.reclaiming(reclaim))
            .map_err(|source| SwitchFailure::Reservation {
                task: t.name.clone(),
                source,
            })
    };
    let (mut leave, mut change, mut join, mut notify) = (vec![], vec![], vec![], vec![]);
    for (i, name) in tasks.iter().map(|t| &t.task).enumerate() {
        match (find(old, name), find(new, name)) {
            (Some(_), None) => leave.push((i, Action::Park)),
            (None, Some(t)) => join.push((i, Action::Start(params(t)?, Times::of(t)))),
            (Some(a), Some(b)) if a != b => {
                let delta =
                    b.budget as i128 * a.period as i128 - a.budget as i128 * b.period as i128;
                change.push((delta, (i, Action::Set(params(b)?, Times::of(b)))));
            }
            _ => {}
        }
        if find(new, name).is_some() {
            notify.push(i);
        }
    }
    change.sort_by_key(|(delta, _)| *delta);
    leave.extend(change.into_iter().map(|(_, a)| a));
    leave.extend(join);
    Ok((leave, notify))
}

/// The CPUs the mode agents run on: the calling thread's that no rt task uses, or `None`
/// (they keep every CPU) if there is none. An agent free to run on a pool's CPU stayed
/// there once it had run there (as SCHED_OTHER it is balanced anywhere; boosted, the
/// kernel wakes it on the CPU it last ran on): then every task it started preempted it
/// (SCHED_DEADLINE above SCHED_FIFO) and ran its first job before the agent could
/// acknowledge, 170 µs per start, and a switch took three times as long
/// (docs/modes.md, An agent on its tasks' CPU).
fn agent_cpus(rt_cpus: Option<&CpuSet>) -> Option<Vec<u32>> {
    let rt = rt_cpus?;
    let free: Vec<u32> = (sched::own_cpus().into_iter())
        .filter(|&c| !rt.contains(c))
        .collect();
    (!free.is_empty()).then_some(free)
}

fn spawn_agent(
    member: usize,
    name: &str,
    tasks: Vec<TaskPort>,
    (done, wake, releases): (Sender<Done>, Arc<Wakeup>, Arc<ReleaseWindow>),
    ack_timeout: Duration,
    freeze_parks: bool,
    cpus: Option<Vec<u32>>,
) -> std::io::Result<Agent> {
    let (tx, rx) = mailbox::channel();
    let (tid_tx, tid_rx) = mailbox::channel();
    let kept = Kept {
        freezers: None,
        files: tasks.iter().map(|_| None).collect(),
        pending: Pending::new(),
    };
    let shared = Arc::new(AgentShared {
        tasks,
        kept: Mutex::new(kept),
    });
    let mine = shared.clone();
    let thread = std::thread::Builder::new()
        .name(format!("mode-agent-{name}"))
        .spawn(move || {
            // Agents run at normal priority except while boosted.
            let _ = sched::set_current(&Policy::Other { nice: 0 });
            if let Some(cpus) = cpus {
                // On failure the agent keeps every CPU: slower switches, nothing wrong.
                let _ = sched::set_affinity(0, cpus);
            }
            // Held through the warm-up: meanwhile the manager hands every local switch
            // to this thread, which takes it after.
            let mut kept = mine.lock();
            let _ = tid_tx.send(bulkhead_os::proc::tid());
            warm_up(&mine.tasks);
            if freeze_parks {
                let pids = mine.tasks.iter().map(|t| *lock_pid(&t.pid));
                kept.freezers = ParkFreezers::create(member, pids);
            }
            drop(kept);
            while let Some(work) = rx.recv() {
                let opened = match work {
                    Work::Switch(command) => {
                        let opened = releases.count();
                        let mut kept = mine.lock();
                        let held = kept.held(&releases);
                        let problems = switch_tasks(&mine.tasks, &command, ack_timeout, held);
                        drop(kept);
                        send_done(Done::new(member, problems, false), (&done, &wake));
                        opened
                    }
                    Work::Release(opened) => opened,
                };
                let problems = release_after(&mine, opened, &releases, ack_timeout);
                report_late(member, problems, (&done, &wake));
            }
            if let Some(f) = mine.lock().freezers.take() {
                f.remove();
            }
        })?;
    let tid = tid_rx
        .recv()
        .ok_or_else(|| std::io::Error::other("the mode agent thread ended at start"))?;
    Ok(Agent {
        tx: Some(tx),
        thread: Some(thread),
        tid,
        boosted: false,
        shared,
    })
}

/// Gives back the reservations of the tasks the agent (or the manager in its place)
/// parked, once the release window has opened after `opened`; returns what failed.
fn release_after(
    agent: &AgentShared,
    opened: u64,
    releases: &ReleaseWindow,
    ack_timeout: Duration,
) -> Vec<String> {
    if agent.lock().pending.is_empty() {
        return Vec::new();
    }
    releases.wait_past(opened);
    let until = Instant::now() + ack_timeout;
    let mut kept = agent.lock();
    let Kept { pending, files, .. } = &mut *kept;
    release(&agent.tasks, (pending, files), until)
}

/// Sends agent `member`'s `problems` after its acknowledgement, if any, to the manager's
/// warnings.
fn report_late(member: usize, problems: Vec<String>, to: (&Sender<Done>, &Wakeup)) {
    if !problems.is_empty() {
        send_done(Done::new(member, problems, true), to);
    }
}

/// Hands `d` to the manager and wakes its event loop.
fn send_done(d: Done, (done, wake): (&Sender<Done>, &Wakeup)) {
    let _ = done.send(d);
    wake.notify();
}

/// Longest a parked task is given to load its program and reach its start gate in
/// [`warm_up`].
const WARM_UP_LIMIT: Duration = Duration::from_secs(2);

/// Lets the tasks created parked (held at their start gate and stopped at spawn) load
/// their programs once: each is continued, given up to [`WARM_UP_LIMIT`] to reach its
/// gate (where it waits, running no job), and stopped again. So the switch that first
/// starts a task only continues a program waiting at its gate, instead of waiting for
/// an exec and the library's start-up under the task's small reservation. The agent
/// waits for the gate, not for the attach: what the program declares between the two
/// (that it acknowledges modes at once) must be seen by the first switch.
fn warm_up(tasks: &[TaskPort]) {
    let parked: Vec<&TaskPort> = tasks.iter().filter(|t| t.parked).collect();
    for t in &parked {
        signal(*lock_pid(&t.pid), bulkhead_os::proc::SIGCONT);
    }
    let until = Instant::now() + WARM_UP_LIMIT;
    for t in &parked {
        while !t.port.waits_at_gate() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        signal(*lock_pid(&t.pid), bulkhead_os::proc::SIGSTOP);
    }
}

/// Sends `sig` to task process `pid`.
fn signal(pid: u32, sig: i32) {
    // The pid, read under its lock, is a task child of this process not yet reaped: a
    // restart reaps it only under the same lock, the run's stop after the agents stopped.
    let _ = bulkhead_os::proc::kill(pid as i32, sig);
}

/// One local switch (M2-Xen IV-B, Step 4): the task engine, then the programs'
/// acknowledgements (a boosted agent stays boosted: the manager lowers it when it has
/// the acknowledgement). Returns what went wrong (nothing stops the switch).
fn switch_tasks(
    tasks: &[TaskPort],
    command: &Command,
    ack_timeout: Duration,
    mut held: Held,
) -> Vec<String> {
    let mut problems = Vec::new();
    let until = Instant::now() + ack_timeout;
    for &(i, action) in &command.actions {
        if let Err(e) = act_on(tasks, i, action, until, &mut held, &mut problems) {
            problems.push(format!("task `{}`: {e}", tasks[i].task));
        }
    }
    // A program that acknowledges every request at once has acknowledged already: its
    // mode is published without waking it (it reads the mode when it asks, and would
    // only wake on the pool's CPU to acknowledge what nobody waits for: a wake-up across
    // CPUs for the agent and a job's overhead on that CPU per task and switch). The
    // others are woken, and each one's acknowledgement wakes the agent through its
    // control block's futex.
    let seqs: Vec<(usize, u32)> = command
        .notify
        .iter()
        .filter_map(|&i| match tasks[i].port.acks_at_once() {
            true => {
                tasks[i].port.publish_mode(command.mode);
                None
            }
            false => Some((i, tasks[i].port.request_mode(command.mode))),
        })
        .collect();
    let deadline = bulkhead_task::clock::now_ns() + ack_timeout.as_nanos() as u64;
    let waiting = seqs
        .into_iter()
        .filter(|&(i, seq)| !tasks[i].port.wait_mode_ack(seq, deadline));
    for (i, _) in waiting {
        problems.push(format!(
            "task `{}` did not acknowledge the mode within {}",
            tasks[i].task,
            bulkhead_model::units::format_duration(ack_timeout.as_nanos() as u64)
        ));
    }
    problems
}

/// What an agent keeps across switches ([`Kept`]), lent to one local switch.
struct Held<'a> {
    freezers: &'a mut Option<ParkFreezers>,
    files: &'a mut [Option<ProcFiles>],
    pending: &'a mut Pending,
    releases: &'a ReleaseWindow,
}

/// Carries out `actions` on `tasks` in order without waiting ([`act`] without `until`),
/// a parked task's reservation left pending, up to the first action that would wait,
/// whose index it returns (`None`: all were carried out). What went wrong is added to
/// `problems`.
fn act_at_once(
    tasks: &[TaskPort],
    actions: &[(usize, Action)],
    held: &mut Held,
    problems: &mut Vec<String>,
) -> Option<usize> {
    for (k, &(i, action)) in actions.iter().enumerate() {
        let freezer = held.freezers.as_mut().map(|f| (f, i));
        match act(&tasks[i], action, None, freezer, &mut held.files[i]) {
            Ok(pid) if action == Action::Park => held.pending.push((i, pid)),
            Ok(_) => {}
            Err(ActError::WouldWait) => return Some(k),
            Err(e) => problems.push(format!("task `{}`: {e}", tasks[i].task)),
        }
    }
    None
}

/// Carries out `action` on task `i` ([`act`]). A parked task's reservation is left
/// pending ([`ReleaseWindow`]). A reservation the kernel refuses at once (EBUSY) is asked
/// again, with retries until `until`, after the agent gave back its own pending ones
/// (what went wrong is added to `problems`) and opened the window for the other agents'.
fn act_on(
    tasks: &[TaskPort],
    i: usize,
    action: Action,
    until: Instant,
    held: &mut Held,
    problems: &mut Vec<String>,
) -> Result<(), ActError> {
    let act_until = |held: &mut Held, until| {
        let freezer = held.freezers.as_mut().map(|f| (f, i));
        act(&tasks[i], action, Some(until), freezer, &mut held.files[i])
    };
    if action == Action::Park {
        let pid = act_until(held, until)?;
        held.pending.push((i, pid));
        return Ok(());
    }
    match act_until(held, Instant::now()) {
        Err(ActError::Sched(e)) if e.errno() == Some(bulkhead_os::errno::EBUSY) => {
            problems.extend(release(tasks, (held.pending, held.files), until));
            held.releases.open();
            act_until(held, until).map(drop)
        }
        r => r.map(drop),
    }
}

/// Gives back the reservations of the tasks in `pending` ([`leave_deadline`], waiting for
/// a thread's replenishment until `until`), each under its pid's lock, and empties it. A
/// task restarted since its park is skipped: a new process, and the parked one's
/// reservation went with it. Returns what failed.
fn release(
    tasks: &[TaskPort],
    (pending, files): (&mut Pending, &mut [Option<ProcFiles>]),
    until: Instant,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, pid) in pending.drain(..) {
        let guard = lock_pid(&tasks[i].pid);
        if *guard != pid {
            continue;
        }
        let left = proc_files(&mut files[i], pid as i32).and_then(|f| leave_deadline(f, until));
        if let Err(e) = left {
            let task = &tasks[i].task;
            problems.push(format!("task `{task}`: giving back its reservation: {e}"));
        }
    }
    problems
}

/// Carries out `action` on task `t`'s process, holding its pid's lock (a restart of the
/// task waits, [`crate::tasks::SharedPid`]), and returns the pid; a park goes through
/// the task's freezer cgroup when it has one (`freezer`: the agent's cgroups and the
/// task's index) and leaves the task's reservation to [`release`]. `files`: the task's
/// /proc files, kept open across switches ([`proc_files`]). It waits until `until` for
/// the task to take its stop and for the kernel's admission; without `until` it waits
/// for neither: a park that does not find its task asleep, or a reservation the kernel
/// refuses at once, is [`ActError::WouldWait`], and nothing was signalled or reserved.
fn act(
    t: &TaskPort,
    action: Action,
    until: Option<Instant>,
    freezer: Option<(&mut ParkFreezers, usize)>,
    files: &mut Option<ProcFiles>,
) -> Result<u32, ActError> {
    let guard = lock_pid(&t.pid);
    let pid = *guard as i32;
    let kill = |sig| signal(*guard, sig);
    let admit = |files, p| match until {
        Some(until) => reserve(files, p, until),
        None => match reserve(files, p, Instant::now()) {
            Err(ActError::Sched(e)) if e.errno() == Some(bulkhead_os::errno::EBUSY) => {
                Err(ActError::WouldWait)
            }
            r => r,
        },
    };
    match action {
        Action::Park => {
            t.judged_from.store(u64::MAX, Ordering::Release);
            // Frozen where it slept, it stays frozen until its start ([`ParkFreezers`]),
            // its stop queued for whenever it thaws; otherwise it is stopped, and
            // waited for.
            let frozen = freezer.is_some_and(|(f, i)| f.freeze_asleep(i, *guard));
            let wait = match (frozen, until) {
                (true, _) => None,
                (false, Some(until)) => Some(until),
                (false, None) => return Err(ActError::WouldWait),
            };
            kill(bulkhead_os::proc::SIGSTOP);
            if let Some(until) = wait {
                wait_stopped(*guard, until)?;
            }
            let now = bulkhead_task::clock::now_ns();
            t.parked_at.store(now, Ordering::Release);
            Ok(*guard)
        }
        Action::Set(p, times) => {
            admit(proc_files(files, pid)?, p)?;
            times.publish(t);
            Ok(*guard)
        }
        Action::Start(p, times) => {
            admit(proc_files(files, pid)?, p)?;
            t.judged_from
                .store(bulkhead_task::clock::now_ns(), Ordering::Release);
            times.start(t);
            t.port.release();
            // The SIGCONT discards a stop still queued on a task its park left frozen,
            // which is then thawed; one stopped (at spawn, or by a park that found it
            // running or outside its park cgroup) is continued by it.
            kill(bulkhead_os::proc::SIGCONT);
            if let Some((f, i)) = freezer {
                f.thaw_parked(i, *guard).map_err(ActError::Thaw)?;
            }
            Ok(*guard)
        }
    }
}

/// Task process `pid`'s /proc files, kept open in `slot` across switches (a park and a
/// start read them: docs/modes.md, *Fewer files per step*) and opened again for a new
/// process, a restarted task. A pid reused by another process within a restart is not
/// told apart (the kernel hands pids out in turn).
fn proc_files(
    slot: &mut Option<ProcFiles>,
    pid: i32,
) -> Result<&mut ProcFiles, bulkhead_os::Error> {
    let files = match slot.take() {
        Some(f) if f.pid() == pid => f,
        _ => ProcFiles::open(pid)?,
    };
    Ok(slot.insert(files))
}

/// The reservation a leaving task passes through: 1024 ns every 4 s, whose bandwidth the
/// kernel counts as 0 (`to_ratio`: 1024 << 20 / 4e9 < 1).
const EMPTY_RESERVATION: DeadlineParams = DeadlineParams {
    runtime: bulkhead_os::sched::MIN_RUNTIME,
    deadline: 4_000_000_000,
    period: 4_000_000_000,
    reclaim: false,
};

/// How often [`leave_deadline`] looks again whether a throttled thread was replenished.
const REPLENISH_POLL: Duration = Duration::from_micros(100);

/// Takes stopped process `pid` out of SCHED_DEADLINE (to SCHED_OTHER) and gives its
/// bandwidth back to the root domain at once. Leaving directly would not: the kernel
/// (kernel/sched/deadline.c) subtracts a leaving task's bandwidth from the root domain's
/// total only at its 0-lag time, through the inactive timer, and a task that leaves while
/// not runnable past that time has no timer armed, so its bandwidth stays counted until
/// the root domain is rebuilt: every park leaked its reservation, and after a few
/// switches the kernel refused the starts the analysis admitted (EBUSY; docs/modes.md,
/// Boost and the kernel's bandwidth). A change within the class is accounted at once, so
/// each thread first shrinks to [`EMPTY_RESERVATION`] and then leaves with nothing left
/// to leak.
///
/// Precondition: the process is stopped or frozen, so no thread runs or is woken under the empty
/// reservation (one that did would overrun it until the next tick and owe the kernel
/// hours of its period: it then hung at its next start). A thread with no runtime left
/// (throttled as it stopped or fell asleep) has a replenishment pending, which under the
/// empty reservation would do the same; nor may it leave before it: its replenishment
/// timer does nothing for a task no longer SCHED_DEADLINE, the throttle stays, and at
/// its next start the kernel never queued it again (`R` for minutes, `dl.runtime`
/// -232 µs and its deadline long past in /proc/PID/sched, unkillable until made
/// SCHED_OTHER; docs/modes.md, A park that keeps the task frozen). So it is left under
/// its own reservation until replenished (at most a period), and given up on at `until`
/// (then it leaves directly, as before, and its bandwidth stays counted).
fn leave_deadline(files: &mut ProcFiles, until: Instant) -> Result<(), bulkhead_os::Error> {
    let pid = files.pid();
    for tid in files.threads()? {
        let owes = || {
            files
                .sched(tid)
                .map(|s| s.dl_runtime.is_some_and(|r| r <= 0))
        };
        let mut owes_now = owes();
        while owes_now.as_ref().is_ok_and(|&o| o) && Instant::now() < until {
            std::thread::sleep(REPLENISH_POLL);
            owes_now = owes();
        }
        let owes = owes_now;
        let step = |policy| match sched::set(tid, policy) {
            // A thread that exited between listing and setting needs nothing.
            Err(e) if e.errno() == Some(libc::ESRCH) && tid != pid => Ok(()),
            r => r,
        };
        if owes.is_ok_and(|owes| !owes) {
            step(&Policy::Deadline(EMPTY_RESERVATION))?;
        }
        step(&Policy::Other { nice: 0 })?;
    }
    Ok(())
}

/// The v1 freezer cgroups through which an agent parks its tasks without waiting for
/// them to run (docs/modes.md, A park that does not need the task to run): one per task,
/// under a directory of the agent's, and beside them one empty cgroup, `anchor`, held
/// frozen for the agent's life.
///
/// A SIGSTOP needs its task to run on the pool's CPU to take it, with the task's current
/// EDF deadline, which it shares with every job released at the same instant: 2-4 % of
/// the parks waited 0.3-1.5 ms behind those jobs. The v1 freezer (kernel >= 6.1,
/// `freeze_task` and `__set_task_frozen` in kernel/freezer.c) freezes a task asleep in a
/// freezable sleep (`futex` and `clock_nanosleep` waits: a task between its jobs) where
/// it sleeps, without waking it. So a park freezes the task's cgroup; if it reads
/// `FROZEN` at once (with the task in it), the agent queues the SIGSTOP (a frozen task
/// records it and stays frozen), gives the bandwidth back ([`leave_deadline`]: nothing
/// runs under the empty reservation, the task is frozen) and leaves it frozen: no thaw,
/// nothing of the task runs on the pool's CPU (docs/modes.md, A park that keeps the task
/// frozen). Its start sends SIGCONT, which discards the queued stop, and thaws it (a
/// wake-up that came while it was frozen, its timer, is delivered then). Whatever else
/// thaws it first (the stop-start worker, which moves the tasks into cgroups of its own
/// and thaws them at a resume; the agent's end) lets it take its stop before any of its
/// program runs: it stays parked, as a task parked by SIGSTOP. A task that is not asleep
/// (in the middle of a job) is thawed at once and parked by SIGSTOP, the agent waiting
/// for the stop; a task parked at spawn is stopped, never frozen, and continued by
/// SIGCONT.
///
/// A v1-frozen task does not die of SIGKILL until thawed: a restart or the run's stop
/// thaws the park cgroup of a parked task after its SIGKILL
/// ([`crate::tasks::thaw_park_of`]).
///
/// The anchor (as the window switch's, docs/runtime.md): the kernel enables the static key `freezer_active` when the first
/// cgroup freezes and disables it when the last one thaws, each a patch of the kernel's
/// code with interrupts to every CPU (a freeze 84-94 µs, a thaw 80-90 µs on the
/// 2-vCPU VM); with one cgroup frozen throughout, 6 and 3 µs.
struct ParkFreezers {
    /// The freezer hierarchy's root, where the tasks go back at the end.
    root: PathBuf,
    /// The agent's directory.
    dir: PathBuf,
    /// Per task (the agent's index).
    tasks: Vec<ParkCgroup>,
}

/// One task's park cgroup.
struct ParkCgroup {
    dir: PathBuf,
    state: FreezerState,
    /// The pid last placed in it (0: none), and the count of the supervisor's cgroup
    /// moves then ([`bulkhead_os::cgroup::hold_moves`]).
    placed: u32,
    moves: u64,
    /// The pid a park left frozen in it (0: none), which its start thaws.
    frozen: u32,
}

impl ParkFreezers {
    /// Makes the cgroups of agent `member`'s tasks and places each task (process `pids`,
    /// in the agent's order) in its own; `None` (parks by SIGSTOP alone) without a v1
    /// freezer hierarchy or if any step fails.
    fn create(member: usize, pids: impl ExactSizeIterator<Item = u32>) -> Option<ParkFreezers> {
        let count = pids.len();
        let mounts = bulkhead_os::cgroup::Mounts::read().ok()?;
        let root = mounts.v1("freezer")?.to_path_buf();
        let dir = root.join(park_cgroup_name(&crate::leftovers::instance_name(), member));
        std::fs::create_dir(&dir).ok()?;
        let mut made = ParkFreezers {
            root,
            tasks: Vec::new(),
            dir,
        };
        let anchor = made.dir.join("anchor");
        let ok = std::fs::create_dir(&anchor).is_ok() && set_frozen(&anchor, V1, true).is_ok();
        for (i, pid) in pids.enumerate().take_while(|_| ok) {
            let cg = made.dir.join(i.to_string());
            let Some(state) = std::fs::create_dir(&cg)
                .and_then(|_| FreezerState::open(&cg))
                .ok()
            else {
                break;
            };
            made.tasks.push(ParkCgroup {
                dir: cg,
                state,
                placed: 0,
                moves: 0,
                frozen: 0,
            });
            if !made.place(i, pid, *hold_moves()) {
                break;
            }
        }
        match made.tasks.len() == count && ok {
            true => Some(made),
            false => {
                made.remove();
                None
            }
        }
    }

    /// Puts process `pid` in task `i`'s cgroup unless it is there: placed, and no cgroup
    /// move of the supervisor's since (`moves`, its count now: the caller holds
    /// [`hold_moves`]). A restarted task is a new pid.
    fn place(&mut self, i: usize, pid: u32, moves: u64) -> bool {
        let t = &mut self.tasks[i];
        if t.placed != pid || t.moves != moves {
            if write_file(&procs_file(&t.dir), &pid.to_string()).is_err() {
                t.placed = 0;
                return false;
            }
            (t.placed, t.moves) = (pid, moves);
        }
        true
    }

    /// Freezes task `i`, process `pid`, if every thread of it is asleep (then frozen at
    /// once, where it sleeps, and left so until [`ParkFreezers::thaw_parked`]);
    /// otherwise leaves it thawed. Returns whether it is frozen.
    ///
    /// The cgroup reads `FROZEN` empty too: the task counts as frozen only if it is in
    /// it. The stop-start worker moves the tasks into freezer cgroups of its own (at its
    /// start and at each suspend, [`crate::stop_start`], through
    /// [`bulkhead_os::cgroup::move_into`]), so the park holds off the supervisor's cgroup
    /// moves from its placement check to its reading of the state, and places the task
    /// again if any was made since it last placed it (one read of the cgroup's processes
    /// per park, 9 µs at the median in a Boost switch, did this before).
    fn freeze_asleep(&mut self, i: usize, pid: u32) -> bool {
        let moves = hold_moves();
        if !self.place(i, pid, *moves) {
            return false;
        }
        let t = &mut self.tasks[i];
        if t.state.set(true).is_err() {
            return false;
        }
        let frozen = t.state.frozen() == Some(true);
        drop(moves);
        match frozen {
            true => t.frozen = pid,
            false => {
                let _ = t.state.set(false);
            }
        }
        frozen
    }

    /// Thaws task `i`, process `pid`, if a park left it frozen; returns whether it did
    /// (`false`: the task is stopped, at spawn or by a park that found it running, or is
    /// a new process since, restarted).
    fn thaw_parked(&mut self, i: usize, pid: u32) -> std::io::Result<bool> {
        let t = &mut self.tasks[i];
        if t.frozen != pid || pid == 0 {
            return Ok(false);
        }
        t.state.set(false)?;
        t.frozen = 0;
        Ok(true)
    }

    /// Thaws every cgroup, moves the processes still in them back to the root and
    /// removes them. A task still frozen by a park takes the SIGSTOP its park queued at
    /// the thaw, before any of its program runs: it stays parked, stopped.
    fn remove(self) {
        let anchor = self.dir.join("anchor");
        let dirs = self.tasks.iter().map(|t| &t.dir).chain([&anchor]);
        for cg in dirs {
            let _ = set_frozen(cg, V1, false);
            for pid in procs(cg) {
                let _ = write_file(&procs_file(&self.root), &pid.to_string());
            }
            let _ = std::fs::remove_dir(cg);
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The name of agent `member`'s park cgroups' directory in run `instance`: named as an
/// instance, so that a supervisor killed mid-run leaves a cgroup that `bulkhead clean`
/// and the next run's start recognise ([`crate::leftovers`]).
pub(crate) fn park_cgroup_name(instance: &str, member: usize) -> String {
    format!("{instance}-park-{member}")
}

/// How long [`wait_stopped`] asks again at once (yielding the CPU between two looks)
/// before it sleeps between them: a task on the pool's CPU takes its SIGSTOP a median
/// 28 µs after the `kill` and within 80 µs in 9 of 10 parks (ftrace, docs/modes.md,
/// Where a Boost switch's time goes), while a sleep of 20 µs lasted 40 µs at the median
/// on the supervisor's CPU, and each look at /proc/PID/stat 21 µs. The spin cannot delay
/// the stop: the task runs under SCHED_DEADLINE, above a boosted agent's SCHED_FIFO,
/// even on the same CPU.
const STOP_SPIN: Duration = Duration::from_micros(200);

/// Waits until process `pid` is stopped, every thread of it: `kill` only queues the
/// SIGSTOP, which a task running on another CPU takes a moment later, and a task that
/// leaves must not run once its agent has acknowledged (nor under the empty reservation
/// of [`leave_deadline`]). A task is a child of the supervisor, whose stop the kernel's
/// wait state tells in one system call ([`bulkhead_os::proc::child_stopped`], which
/// leaves it to be waited for); for [`STOP_SPIN`] the agent looks again at once, then
/// every 20 µs, also at /proc/PID/stat (a process that is no child, or whose stop someone
/// else waited for). Gives up at `until`.
fn wait_stopped(pid: u32, until: Instant) -> Result<(), ActError> {
    let spin_until = Instant::now() + STOP_SPIN;
    loop {
        if bulkhead_os::proc::child_stopped(pid)? == Some(true) {
            return Ok(());
        }
        let now = Instant::now();
        if now < spin_until {
            std::thread::yield_now();
            continue;
        }
        let state = Some(bulkhead_os::proc::proc_stat(pid)?.state());
        if matches!(state, Some('T' | 't')) {
            return Ok(());
        }
        if now >= until {
            return Err(ActError::NotStopped(state));
        }
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// How often [`reserve`] asks the kernel again after a refusal.
const ADMISSION_RETRY: Duration = Duration::from_micros(50);

/// Gives process `pid` the reservation `p`. Should the kernel refuse admission (EBUSY)
/// although the analysis admits the step (the pool's root domain shared with
/// reservations outside bulkhead's, or one rebuilt by a cpuset change elsewhere), the
/// request is asked again every [`ADMISSION_RETRY`] until `until`, and the last refusal
/// is returned. Parked tasks give their bandwidth back at once ([`leave_deadline`]).
fn reserve(files: &mut ProcFiles, p: DeadlineParams, until: Instant) -> Result<(), ActError> {
    loop {
        match files.set_process(&Policy::Deadline(p)) {
            Err(e) if e.errno() == Some(bulkhead_os::errno::EBUSY) && Instant::now() < until => {
                std::thread::sleep(ADMISSION_RETRY)
            }
            r => return Ok(r.map(|_| ())?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child process asleep for 10 s (killed by the test), once it sleeps.
    fn sleeping_child() -> std::process::Child {
        let child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        state_soon(child.id(), 'S');
        child
    }

    #[test]
    fn wait_stopped_returns_once_the_process_is_stopped_and_gives_up_otherwise() {
        let mut child = sleeping_child();
        let soon = || Instant::now() + Duration::from_millis(200);
        let running = wait_stopped(child.id(), soon()).unwrap_err();
        assert!(
            matches!(running, ActError::NotStopped(Some('S' | 'R'))),
            "{running:?}"
        );
        assert!(running.to_string().contains("not stopped yet"), "{running}");
        signal(child.id(), bulkhead_os::proc::SIGSTOP);
        let stopped = wait_stopped(child.id(), Instant::now() + Duration::from_secs(5));
        assert!(stopped.is_ok(), "{stopped:?}");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Waits up to 1 s for process `pid` to be in state `want` (/proc/PID/stat).
    fn state_soon(pid: u32, want: char) -> char {
        let state = || bulkhead_os::proc::proc_stat(pid).unwrap().state();
        let end = Instant::now() + Duration::from_secs(1);
        while state() != want && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        state()
    }

    /// A sleeping child in a park cgroup of its own, frozen by a park.
    /// (as [`act`]'s park: frozen, its stop queued).
    fn parked_frozen_child() -> (std::process::Child, u32, ParkFreezers) {
        let child = sleeping_child();
        let pid = child.id();
        let mut f = ParkFreezers::create(usize::MAX, [pid].into_iter()).expect("a v1 freezer");
        assert!(f.freeze_asleep(0, pid));
        signal(pid, bulkhead_os::proc::SIGSTOP);
        (child, pid, f)
    }

    #[test]
    #[ignore = "needs root: cgroups"]
    fn a_sleeping_task_is_parked_frozen_and_its_start_thaws_it() {
        let (mut child, pid, mut f) = parked_frozen_child();
        let dir = f.dir.clone();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(state_soon(pid, 'D'), 'D', "frozen where it sleeps");
        // The start (as [`act`]'s): the SIGCONT discards the queued stop, then the thaw.
        signal(pid, bulkhead_os::proc::SIGCONT);
        assert!(f.thaw_parked(0, pid).unwrap());
        assert_eq!(state_soon(pid, 'S'), 'S', "asleep again, not stopped");
        // Thawed once: a second start, or one of another process, continues by SIGCONT.
        assert!(!f.thaw_parked(0, pid).unwrap());
        assert!(!f.thaw_parked(0, pid + 1).unwrap());
        f.remove();
        assert!(!dir.exists());
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    #[ignore = "needs root: cgroups"]
    fn a_task_taken_out_of_its_park_cgroup_stops_and_is_placed_again_at_its_next_park() {
        let (mut child, pid, mut f) = parked_frozen_child();
        // Another owner of the freezer hierarchy (the stop-start worker) moves it to a
        // thawed cgroup: it thaws there and takes its queued stop.
        bulkhead_os::cgroup::move_into(&f.root, &[pid]).unwrap();
        assert_eq!(state_soon(pid, 'T'), 'T', "stopped, not running on");
        signal(pid, bulkhead_os::proc::SIGCONT);
        assert_eq!(state_soon(pid, 'S'), 'S');
        // Its park cgroup, empty, reads FROZEN: the next park, seeing the move, places
        // it again before it freezes, and so freezes the task, not an empty cgroup.
        assert!(f.freeze_asleep(0, pid));
        assert_eq!(state_soon(pid, 'D'), 'D', "frozen where it sleeps");
        assert!(procs(&f.tasks[0].dir).contains(&(pid as i32)));
        f.remove();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    #[ignore = "needs root: cgroups"]
    fn a_task_still_parked_frozen_at_the_agents_end_stops_instead_of_running_on() {
        let (mut child, pid, f) = parked_frozen_child();
        f.remove();
        assert_eq!(state_soon(pid, 'T'), 'T');
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    #[ignore = "needs root: cgroups"]
    fn a_task_parked_frozen_dies_of_sigkill_once_its_park_cgroup_is_thawed() {
        let (mut child, pid, f) = parked_frozen_child();
        signal(pid, bulkhead_os::proc::SIGKILL);
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            child.try_wait().unwrap().is_none(),
            "a frozen task outlives SIGKILL"
        );
        crate::tasks::thaw_park_of(pid);
        let end = Instant::now() + Duration::from_secs(1);
        let mut ended = child.try_wait().unwrap();
        while ended.is_none() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
            ended = child.try_wait().unwrap();
        }
        let ended = ended.expect("dead once thawed");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&ended),
            Some(9)
        );
        f.remove();
    }
}
