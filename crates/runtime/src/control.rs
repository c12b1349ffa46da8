//! The control socket of a running system (`docs/control.md`), served from the
//! supervisor's own event loop: the [`Server`] is one pollable descriptor, and
//! [`Control::poll`] does what is ready without blocking.
//!
//! `status` is answered from the description and what the kernel says now: each rt
//! task's policy and reservation are read back with `sched_getattr` (what `chrt -p`
//! shows), its jobs and misses from the drain thread's latest figures. Peers that are
//! neither root nor the supervisor's user are refused by the server and logged here.

use crate::RunError;
use bulkhead_control::{
    ErrorCode, Handled, Handler, PartitionStatus, Peer, Request, Response, Server, Status,
    TaskStatus, Ticket, PROTOCOL_VERSION,
};
use bulkhead_model::{Cpus, PartitionKind, System, Task};
use bulkhead_reserve::partition::TaskSummary;
use bulkhead_reserve::sched::{self, Policy};
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Per-task figures of the rt partitions, refreshed by the drain thread.
pub type LiveTasks = Arc<Mutex<Vec<TaskSummary>>>;

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
}

impl Control {
    /// Listens at `path` for root and the supervisor's own user.
    pub fn bind(path: &Path, name: &str, system: &System) -> Result<Control, RunError> {
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let server = Server::bind(path, &[0, uid])
            .map_err(|e| RunError::Io(format!("control socket: {e}")))?;
        Ok(Control {
            server,
            state: State {
                name: name.to_string(),
                system: system.clone(),
                started: Instant::now(),
                tasks: LiveTasks::default(),
                refused: Vec::new(),
            },
        })
    }

    /// Answers `status` with these tasks' figures from now on.
    pub fn follow(&mut self, tasks: LiveTasks) {
        self.state.tasks = tasks;
    }

    /// The descriptor to watch for readability.
    pub fn fd(&self) -> i32 {
        self.server.as_fd().as_raw_fd()
    }

    /// Serves what is ready; never blocks. A failure of the server's own epoll instance
    /// is returned (the run stops); a bad request only gets its error reply.
    pub fn poll(&mut self) -> Result<(), RunError> {
        self.server
            .poll(&mut self.state)
            .map_err(|e| RunError::Io(format!("control socket: {e}")))
    }

    /// The peers refused so far (one line each), emptied.
    pub fn take_refused(&mut self) -> Vec<String> {
        std::mem::take(&mut self.state.refused)
    }
}

impl Handler for State {
    fn request(&mut self, request: Request, _peer: Peer, _ticket: Ticket) -> Handled {
        Handled::Reply(match request {
            Request::Status => Response::status(None, self.status()),
            Request::Mode { .. } => Response::error(
                None,
                ErrorCode::NotAllowed,
                "this system has no modes (no `modes:` section)",
            ),
            Request::Suspend | Request::Resume => Response::error(
                None,
                ErrorCode::Unsupported,
                "suspend and resume are not supported by `bulkhead run` yet",
            ),
        })
    }

    fn refused(&mut self, peer: Peer) {
        let line = format!(
            "control socket: refused a peer that is not root nor this system's user (uid {}, pid {})",
            peer.uid, peer.pid
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
            state: "running".into(),
            mode: None,
            switching_to: None,
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
                    interface: None,
                    tasks: live
                        .iter()
                        .filter(|t| t.partition == p.name)
                        .map(|t| task_status(t, p.tasks.iter().find(|m| m.name == t.task)))
                        .collect(),
                })
                .collect(),
            channels: Vec::new(),
        }
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
