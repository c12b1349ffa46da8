//! Spawning a window or be process through the one launcher ([`bulkhead_os::launch`])
//! so that it is inside its cgroups before it runs one instruction of its command, and
//! inherits no file descriptor of the supervisor but its own channel (fd
//! [`CHILD_CHANNEL_FD`]) and its partition's passed descriptors (its channels).
//!
//! - cgroup v2: the child is created directly in its (frozen) process cgroup
//!   ([`Join::Into`]): it is born frozen and runs nothing until its first thaw.
//! - cgroup v1: the child joins its cpuset, its (still thawed) freezer cgroup and its
//!   limit cgroups, then hand-shakes on its channel ([`Join::Hold`]): the supervisor
//!   freezes the freezer cgroup and releases it, and it execs only when first thawed.
//!
//! Its partition's sandbox applies in full ([`Confinement::launch`]): mount, network and
//! pid namespaces, no capabilities, the seccomp filter, its user, no new privileges; it
//! dies with the supervisor.

use crate::confine::{partition_env, Confinement};
use crate::output::Output;
use bulkhead_os::cgroup::{CgroupManager, Joins, Process};
use bulkhead_os::launch::{self, Confine, Env, Fds, Join, Launch, Program};
use bulkhead_plan::Exec;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;

pub use bulkhead_os::launch::ChildMemory;

/// The fd number of the channel in the child (`DEMOS_PARAMETERS=3,3,<init>`).
pub const CHILD_CHANNEL_FD: i32 = launch::CHANNEL_FD;

/// A window or be process's command, ready to launch: every string is allocated
/// before the clone.
pub struct Prepared {
    program: Program,
    /// Its partition's user, namespaces and sandbox (its `env` is unused: the
    /// environment is the [`Environment`]).
    confine: Confine,
    /// The partition's passed descriptors, kept open until the child has exec'd.
    pass_fds: Vec<RawFd>,
    /// Where its standard output and error go, labelled (`<partition>[<k>]`); `None`:
    /// the supervisor's own.
    output: Option<(Output, String)>,
}

/// A partition's environment block, which outlives the spawns using it.
pub struct Environment(Env);

impl Environment {
    /// A partition's environment ([`partition_env`]: bulkhead's variables for the
    /// partition, `confine.env`, relaxed as `confine.sandbox` says) with
    /// `DEMOS_PARAMETERS` set to `3,3,<init>` (completion fd, continue fd,
    /// has-initialization: the DEmOS protocol; both fds are the one channel).
    pub fn demos(init: bool, confine: &Confinement) -> Environment {
        Environment::with_channel(init, confine, &[])
    }

    /// [`Environment::demos`] of a best-effort partition in no window, whose channels
    /// the supervisor reads for heartbeats (`BULKHEAD_HEARTBEAT=1`).
    pub fn unwindowed(confine: &Confinement) -> Environment {
        Environment::with_channel(false, confine, &[(bulkhead_client::HEARTBEAT_VAR, "1")])
    }

    fn with_channel(init: bool, confine: &Confinement, extra: &[(&str, &str)]) -> Environment {
        let mut vars = partition_env(&confine.env, confine.sandbox.clean_env);
        let ours = |k: &str| k == "DEMOS_PARAMETERS" || extra.iter().any(|(e, _)| *e == k);
        vars.retain(|(k, _)| !ours(k));
        let value = format!("{CHILD_CHANNEL_FD},{CHILD_CHANNEL_FD},{}", u8::from(init));
        vars.push(("DEMOS_PARAMETERS".to_string(), value));
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Environment(Env::new(vars))
    }
}

impl Prepared {
    /// The resolved program `exec`, started in `cwd`.
    pub fn new(exec: &Exec, cwd: Option<&Path>) -> io::Result<Prepared> {
        Ok(Prepared {
            program: Program::new(&exec.path, &exec.argv, cwd)?.needing(&exec.needs),
            confine: Confine::default(),
            pass_fds: Vec::new(),
            output: None,
        })
    }

    /// The command's output goes through `output`'s relay, each line labelled
    /// `<partition>[<k>]: ` ([`crate::output`]); with no relay, straight to the
    /// supervisor's streams.
    pub fn labelled(mut self, output: Option<&Output>, partition: &str, k: usize) -> Prepared {
        self.output = output.map(|o| (o.clone(), format!("{partition}[{k}]")));
        self
    }

    /// The command run as `confine` says (user, network namespace, sandbox), keeping
    /// its passed descriptors (all of which must stay open until the child has exec'd).
    pub fn confined(mut self, confine: &Confinement) -> Prepared {
        // Channels work across pid namespaces: their ends' liveness is a lock the
        // kernel releases when the holder dies (`bulkhead_chan`), not a pid.
        self.confine = confine.launch(true);
        self.pass_fds = confine.pass_fds.clone();
        self
    }
}

/// A spawned child: its pid, the supervisor's end of its channel, and (v1) the
/// memory it uses until it execs: keep it until the child is dead.
pub struct Child {
    pub pid: i32,
    pub channel: OwnedFd,
    pub memory: Option<ChildMemory>,
}

/// Spawns `command` with environment `env` into the frozen process cgroup `cg` of
/// `cgroups`: on v2 straight into it; on v1 the child joins its partition's cpuset,
/// `cg` and the pids limit, and the process that execs the program joins its memory
/// limit, before it execs ([`CgroupManager::joins`]). The child is frozen when this
/// returns.
pub fn spawn_into(
    command: &Prepared,
    env: &Environment,
    cgroups: &mut dyn CgroupManager,
    cg: Process,
) -> io::Result<Child> {
    let (parent_end, child_end) = socketpair()?;
    // Closed once the child has them (it has its own table from the clone on).
    let pipes = match &command.output {
        Some((output, label)) => Some(output.pipes(label)?),
        None => None,
    };
    let fds = Fds {
        channel: Some(child_end.as_raw_fd()),
        keep: &command.pass_fds,
        close_others: true,
        null_stdin: false,
        output: pipes.as_ref().map(|(o, e)| (o.as_raw_fd(), e.as_raw_fd())),
    };
    let child = match cgroups.joins(cg) {
        Joins::Into(dir) => launch::spawn(plan(command, env, fds, Join::Into(&dir)))?,
        Joins::Hold { procs, program } => {
            cgroups.set_frozen(cg, false).map_err(io::Error::other)?;
            let mut freeze = || cgroups.set_frozen(cg, true).map_err(io::Error::other);
            let join = Join::Hold {
                procs: &procs,
                program_procs: &program,
                peer: parent_end.as_raw_fd(),
                freeze: &mut freeze,
            };
            launch::spawn(plan(command, env, fds, join))?
        }
    };
    Ok(Child {
        pid: child.pid,
        channel: parent_end,
        memory: child.memory,
    })
}

/// The launch of `command` with `fds` into `join`, not waited for (the child is frozen
/// before it execs).
fn plan<'a>(
    command: &'a Prepared,
    env: &'a Environment,
    fds: Fds<'a>,
    join: Join<'a>,
) -> Launch<'a> {
    Launch {
        program: &command.program,
        env: &env.0,
        join,
        sched: None,
        confine: command.confine,
        fds,
        wait_exec: false,
    }
}

/// A connected pair of close-on-exec stream sockets: (supervisor's end, child's end).
fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let (ours, theirs) = UnixStream::pair()?;
    Ok((ours.into(), theirs.into()))
}
