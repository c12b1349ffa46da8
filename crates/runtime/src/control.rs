//! The control socket of a running system (`docs/control.md`), served from the
//! supervisor's own event loop: the [`Server`] is one pollable descriptor, and
//! [`Control::poll`] does what is ready without blocking.
//!
//! `status` is answered from the description and what the kernel says now: each rt
//! task's policy and reservation are read back with `sched_getattr` (what `chrt -p`
//! shows), its jobs and misses from the drain thread's latest figures. Peers that are
//! neither root nor the supervisor's user are refused by the server and logged here.

use crate::health::{Managers, SharedHealth};
use crate::links::Links;
use crate::modes::ModeManager;
use crate::stop_start::{Phase, StopStartManager};
use crate::tasks::TaskSummary;
use crate::{LiveTasks, RunError};
use bulkhead_chan::Channel;
use bulkhead_control::{
    ChannelStatus, EndStatus, ErrorCode, Handled, Handler, MemoryStatus, PartitionStatus, Peer,
    Request, Response, Server, Status, StopStartStatus, TaskStatus, Ticket, WindowsStatus,
    PROTOCOL_VERSION,
};
use bulkhead_model::{ChannelKind, Cpus, PartitionKind, System, Task};
use bulkhead_os::sched::{self, Policy};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// The variable naming a monitor partition's status connection (`fd:N`).
pub const STATUS_VAR: &str = "BULKHEAD_STATUS";

/// The socket and what it answers from.
pub struct Control {
    server: Server,
    state: State,
}

struct State {
    name: String,
    system: System,
    started: Instant,
    tasks: LiveTasks,
    /// Refused peers, for the run's warnings.
    refused: Vec<String>,
    /// The mode manager of a system with modes.
    modes: Option<ModeManager>,
    /// The description's channels, in its order.
    channels: Vec<Arc<Channel>>,
    /// The stop-start manager of a system without windows.
    stop_start: Option<StopStartManager>,
    /// Best-effort partitions' cgroup directories holding their memory limit (an rt
    /// partition's are found from its tasks' pids).
    memory: Vec<(String, PathBuf)>,
    /// The window schedule of a system with windows, and where it is.
    windows: Option<Windows>,
    /// The run's health monitor, if any task or process has a `health:` key.
    health: Option<SharedHealth>,
}

/// The windows of one major frame and the one running now.
struct Windows {
    /// Per window: its length and the partitions of its slices.
    frame: Vec<(u64, Vec<String>)>,
    /// The running window and when it started.
    now: Option<(usize, Instant)>,
    started: u64,
}

impl Control {
    /// Listens at `path` for root and the supervisor's own user.
    pub fn bind(path: &Path, name: &str, system: &System) -> Result<Control, RunError> {
        let uid = bulkhead_os::proc::uid();
        let mut server = Server::bind(path, &[0, uid]).map_err(RunError::Control)?;
        // Every cgroup bulkhead makes for a partition (of this run or another) is named
        // `bulkhead-...` or lies under one that is.
        server.refuse_cgroups_named("bulkhead-");
        Ok(Control {
            server,
            state: State {
                name: name.to_string(),
                system: system.clone(),
                started: Instant::now(),
                tasks: LiveTasks::default(),
                refused: Vec::new(),
                modes: None,
                channels: Vec::new(),
                stop_start: None,
                memory: Vec::new(),
                windows: None,
                health: None,
            },
        })
    }

    /// Gives each partition with `monitor: true` a read-only status connection: one
    /// end of a socket pair its processes inherit (`BULKHEAD_STATUS=fd:N`), the other
    /// served here like a connection to the socket, but for `status` only.
    pub fn hand_status(&mut self, system: &System, links: &mut Links) -> Result<(), RunError> {
        for p in system.partitions.iter().filter(|p| p.monitor) {
            let (ours, theirs) = UnixStream::pair()
                .map_err(|e| RunError::io(format!("status connection of {}", p.name), e))?;
            self.server
                .adopt(ours, true)
                .map_err(|e| RunError::io(format!("status connection of {}", p.name), e))?;
            links
                .hand(&p.name, STATUS_VAR, OwnedFd::from(theirs))
                .map_err(|e| RunError::io(format!("status connection of {}", p.name), e))?;
        }
        Ok(())
    }

    /// Answers `status` with these tasks' figures from now on.
    pub fn follow(&mut self, tasks: LiveTasks) {
        self.state.tasks = tasks;
    }

    /// Answers `status` with these channels' counters (the description's, in its order).
    pub fn count_channels(&mut self, channels: Vec<Arc<Channel>>) {
        self.state.channels = channels;
    }

    /// Answers `status` with the memory of these cgroups: (partition, the directory
    /// holding its memory limit).
    pub fn measure_memory(&mut self, dirs: impl IntoIterator<Item = (String, PathBuf)>) {
        self.state.memory.extend(dirs);
    }

    /// Answers `status` with the position in `schedule`'s major frame, as told by
    /// [`Control::window_started`].
    pub fn follow_windows(&mut self, schedule: &bulkhead_windows::Schedule) {
        let name = |p: usize| schedule.partitions[p].name.clone();
        let frame = schedule
            .windows
            .iter()
            .map(|w| {
                let mut names: Vec<String> = w
                    .slices
                    .iter()
                    .flat_map(|s| s.sc.into_iter().chain(s.be))
                    .map(name)
                    .collect();
                names.dedup();
                (w.length, names)
            })
            .collect();
        self.state.windows = Some(Windows {
            frame,
            now: None,
            started: 0,
        });
    }

    /// Window `window` of the major frame started now.
    pub fn window_started(&mut self, window: usize) {
        if let Some(w) = &mut self.state.windows {
            w.now = Some((window, Instant::now()));
            w.started += 1;
        }
    }

    /// Answers `status` with the supervisions of `health` from now on.
    pub fn supervise(&mut self, health: SharedHealth) {
        self.state.health = Some(health);
    }

    /// Serves `mode` requests with `modes` from now on.
    pub fn manage(&mut self, modes: ModeManager) {
        self.state.modes = Some(modes);
    }

    /// Serves `suspend` and `resume` with `manager` from now on.
    pub fn stop_start(&mut self, manager: StopStartManager) {
        self.state.stop_start = Some(manager);
    }

    /// Stops the stop-start manager, resuming a suspended system (before the tasks are
    /// stopped: a frozen task cannot stop).
    pub fn stop_stop_start(&mut self) {
        self.state.stop_start = None;
    }

    /// The mode and stop-start managers, for the health monitor's switches and suspends.
    pub fn managers(&mut self) -> Managers<'_> {
        Managers {
            modes: self.state.modes.as_mut(),
            stop_start: self.state.stop_start.as_mut(),
        }
    }

    /// Stops the mode manager and its agents (before the tasks are stopped).
    pub fn stop_modes(&mut self) {
        if let Some(mut m) = self.state.modes.take() {
            self.state.refused.extend(m.take_warnings());
        }
    }

    /// The descriptors the event loop watches for readability: the server's, and the
    /// mode and stop-start managers' replies. Precondition: the managers are handed over
    /// ([`Control::manage`], [`Control::stop_start`]) before the loop starts.
    pub fn fds(&self) -> Vec<i32> {
        let modes = self.state.modes.as_ref().map(ModeManager::fd);
        let stop_start = self.state.stop_start.as_ref().map(StopStartManager::fd);
        let server = self.server.as_fd().as_raw_fd();
        std::iter::once(server)
            .chain(modes)
            .chain(stop_start)
            .collect()
    }

    /// Serves what is ready; never blocks. A failure of the server's own epoll instance
    /// is returned (the run stops); a bad request only gets its error reply.
    pub fn poll(&mut self) -> Result<(), RunError> {
        self.server
            .poll(&mut self.state)
            .map_err(|e| RunError::io("control socket", e))?;
        if let Some(m) = &mut self.state.modes {
            for (ticket, response) in m.collect() {
                self.server.reply(ticket, response);
            }
            self.state.release_suspends();
        }
        if let Some(m) = &mut self.state.stop_start {
            for (ticket, response) in m.collect() {
                self.server.reply(ticket, response);
            }
        }
        Ok(())
    }

    /// The peers refused so far and the mode switches' problems (one line each), emptied.
    pub fn take_refused(&mut self) -> Vec<String> {
        if let Some(m) = &mut self.state.modes {
            self.state.refused.extend(m.take_warnings());
        }
        std::mem::take(&mut self.state.refused)
    }
}

impl State {
    /// Holds off (or releases) suspends for a mode switch; `Err` with the stop-start
    /// phase when the system is not running. A system without stop-start has nothing to
    /// hold.
    fn hold_suspends(&self, held: bool) -> Result<(), Phase> {
        self.stop_start.as_ref().map_or(Ok(()), |m| m.hold(held))
    }

    /// Releases the hold once no switch is in progress.
    fn release_suspends(&self) {
        if !self.modes.as_ref().is_some_and(ModeManager::switching) {
            let _ = self.hold_suspends(false);
        }
    }
}

impl Handler for State {
    fn request(&mut self, request: Request, _peer: Peer, ticket: Ticket) -> Handled {
        Handled::Reply(match request {
            Request::Status => Response::status(None, self.status()),
            Request::Mode { name } if self.modes.is_some() => {
                if let Err(phase) = self.hold_suspends(true) {
                    return Handled::Reply(Response::error(
                        None,
                        ErrorCode::NotAllowed,
                        format!(
                            "the system is {}: a mode switch needs it running (resume it first)",
                            phase.name()
                        ),
                    ));
                }
                let modes = self.modes.as_mut().expect("checked");
                let reply = modes.request(&name, Some(ticket));
                self.release_suspends();
                match reply {
                    Some(reply) => reply,
                    None => return Handled::Later,
                }
            }
            Request::Mode { .. } => Response::error(
                None,
                ErrorCode::NotAllowed,
                "this system has no modes (no `modes:` section)",
            ),
            Request::Suspend | Request::Resume if self.stop_start.is_some() => {
                let manager = self.stop_start.as_mut().expect("checked");
                match manager.request(request == Request::Suspend, ticket) {
                    Some(reply) => reply,
                    None => return Handled::Later,
                }
            }
            Request::Suspend | Request::Resume => Response::error(
                None,
                ErrorCode::Unsupported,
                "suspend and resume need a system without a window schedule (run with --control)",
            ),
        })
    }

    fn refused(&mut self, peer: Peer, why: &str) {
        let line = format!(
            "control socket: refused a peer (uid {}, pid {}): {why}",
            peer.uid, peer.pid
        );
        eprintln!("bulkhead: {line}");
        self.refused.push(line);
    }

    fn refused_read_only(&mut self, request: &Request, peer: Peer) {
        let line = format!(
            "status connection: refused {request:?} from pid {} (read-only connection)",
            peer.pid
        );
        eprintln!("bulkhead: {line}");
        self.refused.push(line);
    }
}

impl State {
    fn status(&self) -> Status {
        let live = self.tasks.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Status {
            protocol: PROTOCOL_VERSION,
            system: self.name.clone(),
            pid: std::process::id(),
            uptime_ns: self.started.elapsed().as_nanos() as u64,
            state: self
                .stop_start
                .as_ref()
                .map_or("running", |m| m.snapshot().phase.name())
                .into(),
            mode: self.modes.as_ref().map(|m| m.mode().0),
            switching_to: self.modes.as_ref().and_then(|m| m.mode().1),
            partitions: self
                .system
                .partitions
                .iter()
                .map(|p| PartitionStatus {
                    name: p.name.clone(),
                    kind: match p.kind {
                        PartitionKind::Rt => "rt".into(),
                        PartitionKind::Be => "be".into(),
                    },
                    cpus: match &p.cpus {
                        Some(Cpus::Set(set)) => set.to_string(),
                        Some(Cpus::All) => "all".into(),
                        None => "windows".into(),
                    },
                    interface: self.modes.as_ref().and_then(|m| m.interface(&p.name)),
                    tasks: live
                        .iter()
                        .filter(|t| t.partition == p.name)
                        .map(|t| task_status(t, p.tasks.iter().find(|m| m.name == t.task)))
                        .collect(),
                    memory: self.memory(&p.name, &live),
                })
                .collect(),
            channels: self
                .system
                .channels
                .iter()
                .zip(&self.channels)
                .map(|(c, live)| channel_status(c, live))
                .collect(),
            stop_start: self.stop_start.as_ref().map(|m| {
                let s = m.snapshot();
                StopStartStatus {
                    state: s.phase.name().into(),
                    cycles: s.cycles,
                    last_suspend_ns: s.last_suspend_ns,
                    last_resume_ns: s.last_resume_ns,
                    order: self.system.stop_start().order,
                }
            }),
            windows: self.windows.as_ref().and_then(Windows::status),
            health: self
                .health
                .as_ref()
                .map(crate::health::statuses)
                .unwrap_or_default(),
        }
    }

    /// Partition `name`'s memory in use and limit, summed over its cgroups that have a
    /// limit; `None` when none has.
    fn memory(&self, name: &str, live: &[TaskSummary]) -> Option<MemoryStatus> {
        let mut dirs: Vec<PathBuf> = self
            .memory
            .iter()
            .filter(|(p, _)| p == name)
            .map(|(_, d)| d.clone())
            .chain(
                live.iter()
                    .filter(|t| t.partition == name)
                    .filter_map(|t| bulkhead_os::cgroup::memory_dir_of(t.pid)),
            )
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs.iter()
            .filter_map(|d| memory_of(d))
            .reduce(|a, b| MemoryStatus {
                used_bytes: a.used_bytes + b.used_bytes,
                limit_bytes: a.limit_bytes + b.limit_bytes,
            })
    }
}

impl Windows {
    fn status(&self) -> Option<WindowsStatus> {
        let (window, since) = self.now?;
        let length_ns = self.frame[window].0;
        let elapsed_ns = (since.elapsed().as_nanos() as u64).min(length_ns);
        let before: u64 = self.frame[..window].iter().map(|w| w.0).sum();
        Some(WindowsStatus {
            window: window as u32,
            count: self.frame.len() as u32,
            length_ns,
            elapsed_ns,
            frame_position_ns: before + elapsed_ns,
            major_frame_ns: self.frame.iter().map(|w| w.0).sum(),
            started: self.started,
            partitions: self.frame[window].1.clone(),
        })
    }
}

/// What the memory cgroup `dir` charges and its limit (v2 `memory.current` and
/// `memory.max`, v1 `memory.usage_in_bytes` and `memory.limit_in_bytes`); `None`
/// without a limit.
fn memory_of(dir: &Path) -> Option<MemoryStatus> {
    let read = |file: &str| std::fs::read_to_string(dir.join(file)).ok();
    let (used, limit) = match read("memory.current") {
        Some(used) => (used, read("memory.max")?),
        None => (
            read("memory.usage_in_bytes")?,
            read("memory.limit_in_bytes")?,
        ),
    };
    // v2 says `max` without a limit, v1 a number near 2^63.
    let limit_bytes = limit.trim().parse().ok().filter(|&l: &u64| l < 1 << 62)?;
    Some(MemoryStatus {
        used_bytes: used.trim().parse().ok()?,
        limit_bytes,
    })
}

/// A channel and what its ends counted (zero when its control words cannot be mapped).
fn channel_status(c: &bulkhead_model::Channel, live: &Channel) -> ChannelStatus {
    let n = live.counters().unwrap_or_default();
    let end = |e: &bulkhead_chan::EndCounters| EndStatus {
        state: match (e.pid, e.closed) {
            (0, true) => "closed",
            (0, false) => "waiting",
            _ => "attached",
        }
        .into(),
        pid: (e.pid != 0).then_some(e.pid),
    };
    ChannelStatus {
        name: c.name.clone(),
        kind: match c.kind {
            ChannelKind::Fifo => "fifo".into(),
            ChannelKind::Latest => "latest".into(),
        },
        writer: c.writer.clone(),
        readers: c.readers.clone(),
        written: n.writer.count,
        read: n.reader.count,
        lost: n.writer.lost + n.reader.lost,
        dropped: n.writer.lost,
        overwritten: n.reader.lost,
        writer_end: end(&n.writer),
        reader_end: end(&n.reader),
    }
}

/// A running task as the kernel schedules it now; a SCHED_FIFO task's budget and
/// period are its description's (`model`), enforced by the supervisor.
fn task_status(t: &TaskSummary, model: Option<&Task>) -> TaskStatus {
    let mut status = TaskStatus {
        name: t.task.clone(),
        pid: Some(t.pid),
        policy: t.policy.into(),
        budget_ns: model.map_or(0, |m| m.budget),
        period_ns: model.map_or(0, |m| m.period),
        deadline_ns: model.map_or(0, |m| m.deadline),
        priority: None,
        jobs: t.jobs,
        misses: t.misses,
        last_response_ns: t.last_response_ns,
        max_response_ns: t.max_response_ns,
        counters: t.counters.iter().cloned().collect(),
    };
    match sched::get(t.pid as i32) {
        Ok(Policy::Deadline(d)) => {
            status.policy = "deadline".into();
            status.budget_ns = d.runtime;
            status.deadline_ns = d.deadline;
            status.period_ns = d.period;
        }
        Ok(Policy::Fifo { priority }) => {
            status.policy = "fifo".into();
            status.priority = Some(priority);
        }
        Ok(other) => status.policy = other.name().to_lowercase(),
        Err(_) => status.policy = "exited".into(),
    }
    status
}
