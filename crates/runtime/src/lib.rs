//! bulkhead's supervisor for DEmOS window schedules (`bulkhead run`).
//!
//! [`run`] executes a system description's window schedule on this machine:
//! every windowed partition becomes a cgroup with a cpuset, every process a frozen
//! child cgroup (see [`bulkhead_os::cgroup::CgroupManager`] for both layouts); processes are spawned straight
//! into their cgroups ([`spawn`]); the DEmOS semantics come from the pure state
//! machine of `bulkhead-windows`, driven by a timerfd and an epoll loop; the
//! processes talk to the supervisor through the client library (`bulkhead-client`,
//! the DEmOS protocol: `DEMOS_PARAMETERS`). Cgroups and processes left by a
//! supervisor that died are removed first ([`leftovers`]); everything a run
//! creates is killed and removed when it ends, also on errors.

mod affinity;
pub mod confine;
mod control;
pub mod cpufreq;
pub mod enforce;
mod event_loop;
#[cfg(test)]
mod fake_cgroups;
mod health;
pub mod housekeeping;
mod isolation;
pub mod leftovers;
mod limits;
mod links;
mod mailbox;
mod modes;
mod output;
mod power;
pub mod prio;
mod requests;
mod rt;
pub mod spawn;
mod stop_start;
mod supervisor;
pub mod tasks;
mod unwindowed;
mod wake;

pub use bulkhead_os::cgroup::Hierarchy;
pub use isolation::IdentityError;
pub use links::{shell_words, stage_var};
pub use power::PowerOptions;
pub use supervisor::{clean_leftovers, plan_version, Outcome, HANDOVER_FREEZE_DELAY};

use bulkhead_model::System;
use std::path::PathBuf;
use std::time::Duration;

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Seed of the budget jitter (`--seed`).
    pub seed: u64,
    /// Where fresh budgets are drawn from: bulkhead's portable streams, or DEmOS's own
    /// (`demos-sched` with `DEMOS_RAND_SEED`).
    pub jitter: bulkhead_windows::Jitter,
    /// Stop this long after the schedule starts (`--timeout`); also bounds the init phase.
    pub timeout: Option<Duration>,
    /// Printed as a line on stdout at each window start (`--window-message`).
    pub window_message: Option<String>,
    /// Printed as a line on stdout at each major-frame start, before the window line.
    pub frame_message: Option<String>,
    /// JSON-lines schedule log (`--schedule-log`).
    pub schedule_log: Option<PathBuf>,
    /// Perfetto JSON trace (`--trace`).
    pub trace: Option<PathBuf>,
    /// Working directory of the processes (the description's directory when `set_cwd`).
    pub workdir: PathBuf,
    /// The cgroups to use; `None` = detect ([`Hierarchy::detect`]).
    pub hierarchy: Option<Hierarchy>,
    /// Stop on SIGINT/SIGTERM (the CLI); tests leave the process's handlers alone. One
    /// run at a time per process may ask for it (another fails to start).
    pub handle_signals: bool,
    /// Run the supervisor under SCHED_FIFO at this priority (as DEmOS does), so that
    /// window switches are not delayed by other work; processes it spawns get the
    /// normal policy (SCHED_RESET_ON_FORK). `None`: leave the policy alone.
    pub realtime_priority: Option<i32>,
    /// Where the window and frame messages go; `None` = stdout (flushed per line).
    pub messages: Option<Messages>,
    /// While rt partitions run, move IRQs, unbound workqueues and unbound kernel threads
    /// off their CPUs (`crate::housekeeping`; restored at the end).
    pub isolate_housekeeping: bool,
    /// With `isolate_housekeeping`, the rt CPUs to move that work off; `None`: every rt
    /// CPU. When rt partitions own every CPU, the work needs one of them to go to (e.g.
    /// an `edf` partition's, whose tasks the kernel's SCHED_DEADLINE protects).
    pub housekeeping_cpus: Option<bulkhead_model::CpuSet>,
    /// The power policy and the CPUFreq tree it controls (`--power-policy`,
    /// `--cpufreq-root`); `None` leaves CPUFreq alone.
    pub power: Option<PowerOptions>,
    /// Serve the control socket at this path (`--control`; docs/control.md); `None`: no socket.
    pub control: Option<PathBuf>,
    /// The system's name in `status` (the description's file stem).
    pub name: String,
    /// be processes write straight to the supervisor's standard output and error, as
    /// DEmOS's do (`demos-sched`, whose users and tests read their programs' lines as
    /// they are); by default each of their lines is labelled with its partition
    /// ([`crate::output`]), so that none can pass for the supervisor's.
    pub raw_output: bool,
}

/// A shared buffer receiving the window/frame message lines (for embedding and tests).
pub type Messages = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;

/// Per-task figures of the rt partitions, refreshed by the drain thread (`rt`), read by
/// the control socket's `status` (`control`) and the stop-start manager (`stop_start`).
pub(crate) type LiveTasks = std::sync::Arc<std::sync::Mutex<Vec<crate::tasks::TaskSummary>>>;

/// Why a run could not be carried out.
#[derive(Debug)]
pub enum RunError {
    /// The description cannot run here (no windows, CPUs missing, bad command).
    Invalid(Unrunnable),
    /// No usable cgroup hierarchy.
    Cgroups(CgroupsUnusable),
    /// A cgroup operation failed (typically: no permission).
    Cgroup(bulkhead_os::cgroup::CgroupError),
    /// A process could not be spawned: which one (`what`) and the system's reason.
    Spawn {
        what: String,
        source: std::io::Error,
    },
    /// The rt partitions (reservations, tasks, their mode and stop-start ports) or a
    /// bus's interface could not be set up: for what, and the reservation error.
    Reserve {
        what: String,
        source: tasks::RtError,
    },
    /// A channel between partitions could not be created or handed over: for what,
    /// and the channel error.
    Channel {
        what: String,
        source: bulkhead_chan::OpenError,
    },
    /// This partition's private network namespace could not be created.
    Netns {
        partition: String,
        source: std::io::Error,
    },
    /// The control socket cannot be bound at its path.
    Control(bulkhead_control::BindError),
    /// A CPU frequency cannot be set: the cluster, the frequency and the system's reason.
    Cpufreq {
        cluster: String,
        khz: u64,
        source: std::io::Error,
    },
    /// Files, timers, threads, the event loop: what the supervisor was doing and the
    /// system's reason.
    Io {
        what: String,
        source: std::io::Error,
    },
    /// An output file (`--schedule-log`, `--trace`) cannot be created or written.
    Output {
        flag: String,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Why a description cannot run on this machine ([`RunError::Invalid`]).
#[derive(Debug)]
pub enum Unrunnable {
    /// A check of the description against this machine failed (CPUs offline, nothing to
    /// run, too few descriptors), or a layer that reports in text refused it (commands,
    /// users, triggers): the message, naming what it is about.
    Check(String),
    /// The power policy cannot be carried out on this machine's clusters.
    Power(bulkhead_power::PowerError),
    /// CPUFreq cannot be taken over (`--power-policy`, `--cpufreq-root`).
    Cpufreq(cpufreq::CpufreqError),
    /// The window schedule cannot be built from the description.
    Schedule(bulkhead_windows::ScheduleError),
    /// A task's or process's program cannot be found or run (`bulkhead-plan`).
    Program(Box<bulkhead_plan::ProgramError>),
    /// A best-effort partition cannot be placed in this host's cgroups (`bulkhead-plan`).
    Unplaceable(Box<bulkhead_plan::Unplaceable>),
    /// The reservations refuse the rt partitions' description (their commands and
    /// parameters) or the housekeeping isolation.
    Reserve(tasks::RtError),
    /// A process's program cannot be prepared for exec: which process, and the reason.
    Exec {
        what: String,
        source: std::io::Error,
    },
    /// A partition has no uid and gid to run as.
    Identity {
        partition: String,
        source: isolation::IdentityError,
    },
}

impl std::fmt::Display for Unrunnable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unrunnable::Check(m) => f.write_str(m),
            Unrunnable::Power(e) => write!(f, "power policy: {e}"),
            Unrunnable::Cpufreq(e) => write!(f, "{e}"),
            Unrunnable::Schedule(e) => write!(f, "{e}"),
            Unrunnable::Program(e) => write!(f, "{e}"),
            Unrunnable::Unplaceable(e) => write!(f, "{}: {e}", e.key_path),
            Unrunnable::Reserve(e) => write!(f, "{e}"),
            Unrunnable::Exec { what, source } => write!(f, "{what}: {source}"),
            Unrunnable::Identity { partition, source } => {
                write!(f, "partition `{partition}`: {source}")
            }
        }
    }
}

impl std::error::Error for Unrunnable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Unrunnable::Check(_) => None,
            Unrunnable::Power(e) => Some(e),
            Unrunnable::Cpufreq(e) => Some(e),
            Unrunnable::Schedule(e) => Some(e),
            Unrunnable::Program(e) => Some(e.as_ref()),
            Unrunnable::Unplaceable(e) => Some(e.as_ref()),
            Unrunnable::Reserve(e) => Some(e),
            Unrunnable::Exec { source, .. } => Some(source),
            Unrunnable::Identity { source, .. } => Some(source),
        }
    }
}

/// Why the cgroups cannot be used ([`RunError::Cgroups`]).
#[derive(Debug)]
pub enum CgroupsUnusable {
    /// No hierarchy for the window partitions.
    Detect(bulkhead_os::cgroup::DetectError),
    /// No cpuset mount for the rt partitions' reservations.
    Cpuset(bulkhead_os::Error),
    /// bulkhead's cpuset cgroup `base` is not under the reservations' cpuset `mount`.
    Outside { base: PathBuf, mount: PathBuf },
    /// A partition's v1 resource-limit cgroup cannot be made: the partition, the
    /// controller and the reservations' error.
    Limit {
        partition: String,
        controller: String,
        source: bulkhead_os::Error,
    },
}

impl std::fmt::Display for CgroupsUnusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CgroupsUnusable::Detect(e) => write!(f, "{e}"),
            CgroupsUnusable::Cpuset(e) => write!(f, "{e}"),
            CgroupsUnusable::Outside { base, mount } => write!(
                f,
                "bulkhead's cpuset cgroup {} is not under the cpuset mount {} of the reservations",
                base.display(),
                mount.display()
            ),
            CgroupsUnusable::Limit {
                partition,
                controller,
                source,
            } => write!(f, "partition `{partition}`: {controller} limit: {source}"),
        }
    }
}

impl std::error::Error for CgroupsUnusable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CgroupsUnusable::Outside { .. } => None,
            CgroupsUnusable::Detect(e) => Some(e),
            CgroupsUnusable::Cpuset(e) | CgroupsUnusable::Limit { source: e, .. } => Some(e),
        }
    }
}

impl RunError {
    /// The description cannot run here: `message` names what and why.
    pub(crate) fn invalid(message: impl Into<String>) -> RunError {
        RunError::Invalid(Unrunnable::Check(message.into()))
    }

    /// A failed system call or file operation, `what` saying what was being done.
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> RunError {
        RunError::Io {
            what: what.into(),
            source,
        }
    }

    /// A reservation error while setting up `what`.
    pub(crate) fn reserve(what: impl Into<String>, source: impl Into<tasks::RtError>) -> RunError {
        RunError::Reserve {
            what: what.into(),
            source: source.into(),
        }
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Invalid(e) => write!(f, "{e}"),
            RunError::Cgroups(e) => write!(f, "{e}"),
            RunError::Cpufreq {
                cluster,
                khz,
                source,
            } => write!(f, "CPUFreq: cannot set {khz} kHz for {cluster}: {source}"),
            RunError::Cgroup(e) => write!(f, "{e}"),
            RunError::Spawn { what, source } => write!(f, "cannot spawn {what}: {source}"),
            RunError::Reserve { what, source } => write!(f, "cannot spawn {what}: {source}"),
            RunError::Channel { what, source } => write!(f, "cannot spawn {what}: {source}"),
            RunError::Netns { partition, source } => write!(
                f,
                "cannot spawn partition `{partition}`: a private network namespace: {source} (needs CAP_SYS_ADMIN)"
            ),
            RunError::Control(e) => write!(f, "control socket: {e}"),
            RunError::Io { what, source } => write!(f, "{what}: {source}"),
            RunError::Output { flag, path, source } => {
                write!(f, "{flag} {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Invalid(e) => e.source(),
            RunError::Cgroups(e) => e.source(),
            RunError::Cgroup(e) => Some(e),
            RunError::Reserve { source, .. } => Some(source),
            RunError::Channel { source, .. } => Some(source),
            RunError::Control(e) => Some(e),
            RunError::Spawn { source, .. }
            | RunError::Netns { source, .. }
            | RunError::Cpufreq { source, .. }
            | RunError::Io { source, .. }
            | RunError::Output { source, .. } => Some(source),
        }
    }
}

/// Runs `system`'s window schedule until every process exited, a stop signal
/// (with [`RunOptions::handle_signals`]) or the timeout. Kills every process and
/// removes every cgroup it created before returning, also on errors.
///
/// The calling process keeps `oom_score_adj` -1000 from here on (as root;
/// [`bulkhead_os::oom`]): no partition's memory limit, nor the machine's, kills it.
pub fn run(system: &System, options: &RunOptions) -> Result<Outcome, RunError> {
    // Not root: the partitions run as this user and the score stays as it was.
    let _ = bulkhead_os::oom::shield_supervisor();
    supervisor::run(system, options)
}

/// A short phrase for why a run stopped.
pub trait StopReasonText {
    fn text(&self) -> &'static str;
}

impl StopReasonText for bulkhead_windows::StopReason {
    fn text(&self) -> &'static str {
        match self {
            bulkhead_windows::StopReason::AllExited => "every process exited",
            bulkhead_windows::StopReason::Timeout => "timeout reached",
            bulkhead_windows::StopReason::Requested => "stopped by a signal",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CgroupsUnusable, RunError, Unrunnable};
    use std::error::Error;
    use std::io;

    #[test]
    fn run_errors_keep_their_source_and_say_what_failed() {
        let e = RunError::Spawn {
            what: "`/bin/x`".into(),
            source: io::Error::from_raw_os_error(bulkhead_os::errno::ENOENT),
        };
        assert!(e.to_string().starts_with("cannot spawn `/bin/x`: "), "{e}");
        let source = e.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(
            source.and_then(io::Error::raw_os_error),
            Some(bulkhead_os::errno::ENOENT)
        );
        let e = RunError::Output {
            flag: "--trace".into(),
            path: "/nope/t.json".into(),
            source: io::Error::from_raw_os_error(bulkhead_os::errno::EACCES),
        };
        assert!(e.to_string().starts_with("--trace /nope/t.json: "), "{e}");
        assert!(e.source().is_some());
        let e = RunError::Netns {
            partition: "p".into(),
            source: io::Error::from_raw_os_error(bulkhead_os::errno::EPERM),
        };
        let text = e.to_string();
        assert!(text.starts_with("cannot spawn partition `p`: a private network namespace: "));
        assert!(text.ends_with("(needs CAP_SYS_ADMIN)"), "{text}");
        assert!(RunError::invalid("x").source().is_none());
    }

    /// The typed causes print as the strings they replaced did and keep the lower
    /// crate's error (or the system's) as the source.
    #[test]
    fn invalid_and_cgroups_causes_keep_their_source() {
        let e = RunError::Invalid(Unrunnable::Exec {
            what: "partition `p`, process 0 (`x`)".into(),
            source: io::Error::from_raw_os_error(bulkhead_os::errno::EINVAL),
        });
        assert!(
            e.to_string()
                .starts_with("partition `p`, process 0 (`x`): "),
            "{e}"
        );
        let source = e.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(
            source.and_then(io::Error::raw_os_error),
            Some(bulkhead_os::errno::EINVAL)
        );
        let reserve = bulkhead_os::Error::Invalid("runtime > deadline".into());
        let e = RunError::Invalid(Unrunnable::Reserve(reserve.into()));
        assert_eq!(e.to_string(), "runtime > deadline");
        assert!(e.source().is_some_and(|s| s.is::<crate::tasks::RtError>()));
        let e = RunError::Cgroups(CgroupsUnusable::Outside {
            base: "/sys/fs/cgroup/cpuset/a".into(),
            mount: "/sys/fs/cgroup/b".into(),
        });
        assert_eq!(
            e.to_string(),
            "bulkhead's cpuset cgroup /sys/fs/cgroup/cpuset/a is not under the cpuset mount \
             /sys/fs/cgroup/b of the reservations"
        );
        assert!(e.source().is_none());
        let e = RunError::Cgroups(CgroupsUnusable::Limit {
            partition: "p".into(),
            controller: "memory".into(),
            source: bulkhead_os::Error::Invalid("no v1 memory mount".into()),
        });
        assert_eq!(
            e.to_string(),
            "partition `p`: memory limit: no v1 memory mount"
        );
        assert!(e.source().is_some());
    }

    #[test]
    fn a_cpufreq_error_names_cluster_and_frequency_and_keeps_its_source() {
        let e = RunError::Cpufreq {
            cluster: "policy0".into(),
            khz: 1_200_000,
            source: io::Error::from_raw_os_error(bulkhead_os::errno::EACCES),
        };
        let text = e.to_string();
        assert!(
            text.starts_with("CPUFreq: cannot set 1200000 kHz for policy0: "),
            "{text}"
        );
        let source = e.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(
            source.and_then(io::Error::raw_os_error),
            Some(bulkhead_os::errno::EACCES)
        );
    }
}
