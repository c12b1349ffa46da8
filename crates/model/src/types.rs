//! The system model: what a system description says, after loading, normalization
//! and validation. Every duration is an integer number of nanoseconds ([`Nanos`]).
//!
//! The model is the single input of `check`, `analyze`, `sim` and `run`.

use crate::cpuset::CpuSet;

pub use crate::buffering::{ChannelKind, Overflow, Reads};
pub use crate::units::Nanos;

/// A whole system description.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct System {
    /// `system.cpus`: the CPUs bulkhead may use; `None` = whatever the machine offers.
    pub cpus: Option<CpuSet>,
    /// DEmOS `set_cwd`: run processes in the directory of the configuration file (default true).
    pub set_cwd: bool,
    /// DEmOS `demos_cpu`: CPUs the scheduler itself runs on, if pinned.
    pub supervisor_cpus: Option<CpuSet>,
    /// Partitions in declaration order; inline (anonymous) DEmOS partitions follow,
    /// in the order their windows define them.
    pub partitions: Vec<Partition>,
    /// The static window schedule (major frame = sum of lengths); empty = no window schedule.
    pub windows: Vec<Window>,
    /// Shared-memory channels between partitions.
    pub channels: Vec<Channel>,
    /// CAN buses, each owned by the gateway service of one rt partition.
    pub buses: Vec<Bus>,
    /// The global mode table (`modes:`); `None` for a system with one mode.
    pub modes: Option<crate::modes::table::Modes>,
    /// The power model (`power:`): clusters and operating points; `None` = not given.
    pub power: Option<crate::power::Power>,
    /// `system.user_range`: the uids (and equal gids) bulkhead gives partitions without
    /// `user:`, first and last included; `None` = [`DEFAULT_USER_RANGE`].
    pub user_range: Option<(u32, u32)>,
    /// `system.path`: the `PATH` of every partition's processes and tasks that sets none
    /// of its own, also where bare program names are looked up; `None`: bulkhead's own
    /// directory, then `/usr/local/bin:/usr/bin:/bin` (see `bulkhead-plan`).
    pub path: Option<String>,
    /// Pipelines of tuned pipes (`pipelines:`), their stages not yet tasks: the solver
    /// (`bulkhead-analysis`) derives their reservations.
    pub pipelines: Vec<crate::pipes::graph::Pipeline>,
    /// How the system is suspended and resumed (`stop_start:`); `None`: not given,
    /// [`System::stop_start`] gives the defaults.
    pub stop_start: Option<crate::stop_start::settings::StopStart>,
    /// The platform's floor (`platform:`): the longest stall of a CPU the system is
    /// designed to tolerate; `None` = an ideal machine.
    pub platform: Option<crate::platform::Platform>,
    /// The tasks and processes with a `health:` key, in declaration order.
    pub health: Vec<crate::health::Supervised>,
}

/// The uids of partitions without `user:`: systemd's DynamicUser range (61184-65519),
/// which no distribution gives to accounts.
pub const DEFAULT_USER_RANGE: (u32, u32) = (61184, 65519);

/// Criticality class of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartitionKind {
    /// Real-time: periodic tasks under reservations, admitted by analysis.
    Rt,
    /// Best-effort: ordinary Linux processes (optionally windowed, DEmOS style).
    Be,
}

/// Scheduling policy inside an rt partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    FixedPriority,
    Edf,
}

/// A CPU set as written in a description: an explicit list, or `all`
/// (every CPU the system may use, resolved at run time).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Cpus {
    All,
    Set(CpuSet),
}

/// A partition: a group of tasks or processes isolated from the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub name: String,
    pub kind: PartitionKind,
    /// Static CPU assignment (rt partitions, unwindowed be partitions); windowed
    /// partitions get their CPUs from the slices they appear in.
    pub cpus: Option<Cpus>,
    /// `exclusive` (rt partitions; default true): the partition owns its CPUs. `false`:
    /// best-effort partitions may name its CPUs and run there as normal (SCHED_OTHER)
    /// tasks in the time its tasks' reservations leave, as DriveOS's Linux side runs its
    /// background tasks beside its SCHED_DEADLINE tasks (DriveOS 7.1) and Boomerang's
    /// ProcData runs beside the load of its core (Boomerang IV-A). Two rt partitions
    /// still never share a CPU this way (only as servers of one pool, `interface`).
    pub exclusive: bool,
    /// `cpu` (be partitions): the CPU bandwidth of its processes together, in percent of
    /// one CPU (`cpu: 30%`), enforced by the cgroup's CFS bandwidth (`cpu.max` on v2,
    /// `cpu.cfs_quota_us` over a 100 ms period on v1); `None`: unlimited.
    pub cpu: Option<u32>,
    /// `nonpreemptible` (be partitions): the longest non-preemptible kernel section its
    /// processes can enter (system calls, page faults, interrupts they cause), which
    /// delays a task of a non-exclusive rt partition on its CPUs once per busy period;
    /// measured by `bulkhead probe` beside the be work. `None`: the analysis's default
    /// (`bulkhead_analysis::shared::DEFAULT_NONPREEMPTIBLE`).
    pub nonpreemptible: Option<Nanos>,
    /// Policy for `tasks` (meaningful for rt partitions; default fixed priority).
    pub scheduler: Scheduler,
    /// `reclaim` (edf partitions only): the tasks' SCHED_DEADLINE reservations carry
    /// `SCHED_FLAG_RECLAIM`, the kernel's GRUB bandwidth reclaiming (Lipari and Baruah,
    /// "Greedy reclamation of unused bandwidth in constant-bandwidth servers", ECRTS 2000;
    /// as implemented in Linux: Abeni, Lelli, Scordino and Palopoli, "Greedy CPU reclaiming
    /// for SCHED_DEADLINE", RTLWS 2014, Eq. (2) with the bound of Documentation/scheduler/
    /// sched-deadline.rst 2.2): a task may run past its runtime on bandwidth the other
    /// tasks of its CPU leave unused, while each keeps its C-every-T guarantee, so the
    /// admission test is unchanged.
    pub reclaim: bool,
    /// Memory limit in bytes.
    pub memory: Option<u64>,
    /// Limit on the number of processes and threads (`pids.max`): bounds a fork bomb.
    pub pids: Option<u32>,
    /// Periodic real-time tasks (rt partitions).
    pub tasks: Vec<Task>,
    /// Windowed processes (DEmOS semantics).
    pub processes: Vec<Process>,
    /// User (name or numeric uid) the partition's processes and tasks run as;
    /// `None` = a uid of its own from [`System::user_range`], allocated at run time.
    pub user: Option<String>,
    /// `shared_user`: the partition may name the same `user` as another partition (which
    /// must say so too): the two then have no boundary between them.
    pub shared_user: bool,
    /// `monitor` (be partitions): its processes get a read-only connection to the
    /// supervisor's control interface (`BULKHEAD_STATUS=fd:N`, `status` only).
    pub monitor: bool,
    /// `network`: which network namespace the partition's processes and tasks run in;
    /// `None` = the default, [`System::network_of`].
    pub network: Option<Network>,
    /// `listen` (be partitions): a TCP address the supervisor binds in the host's network
    /// and whose listening socket it hands to the partition's processes
    /// (`BULKHEAD_LISTEN=fd:N`): they accept connections on it from a private network.
    pub listen: Option<std::net::SocketAddr>,
    /// `interface` (rt partitions): the partition is scheduled as a server with this
    /// resource interface and may share its CPUs with other servers; `None`: it owns them.
    pub interface: Option<crate::modes::table::ServerInterface>,
    /// `sandbox`: which parts of the partition processes' sandbox apply (all by default).
    pub sandbox: Sandbox,
    /// `path`: the `PATH` of the partition's processes and tasks, also where their bare
    /// program names are looked up; `None`: [`System::path`]'s.
    pub path: Option<String>,
}

/// The parts of the sandbox of a partition's processes a description may relax
/// (e.g. `sandbox: {clean_env: false, seccomp: false}`); all hold by default.
/// `clean_env` and `no_new_privs` apply to rt tasks too; the others to the processes
/// of be partitions only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sandbox {
    /// Only `PATH`, `LANG` and bulkhead's variables; `false`: the supervisor's whole
    /// environment (plus bulkhead's variables).
    pub clean_env: bool,
    /// `PR_SET_NO_NEW_PRIVS` before exec; `false`: setuid programs keep their effect.
    pub no_new_privs: bool,
    /// An empty capability bounding set and no ambient or inheritable capabilities;
    /// `false`: a process running as root keeps root's capabilities.
    pub no_capabilities: bool,
    /// A seccomp filter refusing (EPERM) real-time scheduling, affinity changes and the
    /// other calls docs/security.md lists; `false`: no filter.
    pub seccomp: bool,
    /// A mount namespace of its own with a fresh `/tmp`, `/var/tmp` and `/dev/shm` (the
    /// working directory stays visible); `false`: the host's.
    pub private_tmp: bool,
    /// A pid namespace of its own under a minimal init (it sees only its own processes,
    /// and all of them die with the init); `false`: the host's.
    pub pid_namespace: bool,
    /// `user: root` is root of a user namespace of its own, mapped to a uid of its own
    /// (as a partition without `user:` gets); `false`: the host's root.
    pub private_users: bool,
    /// `/usr`, `/etc`, `/boot` and the directory of the running `bulkhead` read-only
    /// (systemd's `ProtectSystem=full`); `false`: as the host mounts them.
    pub protect_system: bool,
    /// `/proc/sys` and `/proc/sysrq-trigger` read-only (`ProtectKernelTunables=`).
    pub protect_kernel: bool,
    /// `/sys/fs/cgroup` read-only (`ProtectControlGroups=`).
    pub protect_cgroups: bool,
    /// bulkhead's runtime directory `/run/bulkhead` (uid locks, control sockets)
    /// hidden under an empty, inaccessible mount; `false`: visible.
    pub hide_runtime_dir: bool,
    /// An IPC namespace of its own: System V shared memory, message queues and
    /// semaphores and POSIX message queues (`PrivateIPC=`); `false`: the host's.
    pub private_ipc: bool,
    /// When the run releases the partition's uid of its own, its System V IPC objects
    /// and its files in the host's `/tmp`, `/var/tmp`, `/dev/shm` and `/dev/mqueue` are
    /// removed, and again when a run takes the uid (`RemoveIPC=`); `false`: left.
    pub remove_ipc: bool,
}

impl Default for Sandbox {
    fn default() -> Sandbox {
        Sandbox {
            clean_env: true,
            no_new_privs: true,
            no_capabilities: true,
            seccomp: true,
            private_tmp: true,
            pid_namespace: true,
            private_users: true,
            protect_system: true,
            protect_kernel: true,
            protect_cgroups: true,
            hide_runtime_dir: true,
            private_ipc: true,
            remove_ipc: true,
        }
    }
}

/// The network a partition's processes see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// The machine's network namespace.
    Host,
    /// A network namespace of the partition's own with only a loopback interface: it
    /// reaches no CAN interface, no virtual bus and no other partition's sockets.
    Private,
}

/// What a task does after a system suspension (JuMP2start 2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resume {
    /// Keeps its state, used and unused budget; its replenishments shift by the suspension.
    #[default]
    Continuable,
    /// Restarts from its checkpoint with a full budget at the resume time.
    Restartable,
}

/// A periodic (or sporadic, with `period` as minimum inter-arrival time) real-time task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub name: String,
    /// The program; empty when the description gives none (analysis and simulation
    /// need none, `run` refuses such a task) and for a gateway task until `run` fills it.
    pub cmd: String,
    /// Worst-case execution time C, also the reservation budget.
    pub budget: Nanos,
    /// Period (or minimum inter-arrival time) T.
    pub period: Nanos,
    /// Relative deadline D (defaults to the period; may exceed it).
    pub deadline: Nanos,
    /// Explicit priority, 1 = highest; `None` = deadline monotonic.
    pub priority: Option<u32>,
    /// Release jitter J (default 0).
    pub release_jitter: Nanos,
    /// Release offset O < T: `run` and `sim` release the task at `epoch + O + k * T`
    /// (the task's `offset` key, or a pipeline's phased releases, Boomerang III-E Fig. 7;
    /// a restartable task keeps it after a resume, counted from the resume instant). The
    /// analysis treats the releases as synchronous (O = 0), which bounds any offset.
    pub offset: Nanos,
    /// Worst-case blocking B by lower-priority tasks (default 0).
    pub blocking: Nanos,
    pub resume: Resume,
    /// The frequency (kHz) `budget` was measured at; `None`: the top frequency of the
    /// task's CPUs (docs/power.md).
    pub wcet_khz: Option<u64>,
    /// The fraction of `budget` that does not scale with the CPU frequency (memory
    /// stalls), in millionths (0 = fully CPU-bound).
    pub memory_bound_ppm: u32,
    /// A service bulkhead provides itself (its `cmd` is empty; `run` supplies the program).
    pub service: Option<Service>,
    /// `server` (of the task or its partition): the reservation `sim` models the task
    /// under; `None` = not declared. `run` always reserves with SCHED_DEADLINE.
    pub server: Option<TaskServer>,
}

/// The reservation a task runs under in `sim` (`server:`, `sim --task-server`; the
/// rules are in bulkhead-sim's `ServerKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskServer {
    /// No reservation: jobs run to completion.
    None,
    /// Sporadic server with replenishment lists, the task's budget and period.
    Sporadic,
    /// Deferrable server, the task's budget and period.
    Deferrable,
    /// Constant bandwidth server, the task's budget and period.
    Cbs,
    /// Quest I/O server: budget `permille/1000 * T` of the task's period T.
    Io { permille: u32 },
}

/// A `server:` (or `--task-server`) text that names no server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}`: expected none, sporadic, deferrable, cbs or io:PERMILLE (1-1000)")]
pub struct TaskServerError(pub String);

impl TaskServer {
    /// Parses `none`, `sporadic`, `deferrable`, `cbs` or `io:PERMILLE` (1..=1000).
    pub fn parse(text: &str) -> std::result::Result<TaskServer, TaskServerError> {
        match text {
            "none" => Ok(TaskServer::None),
            "sporadic" => Ok(TaskServer::Sporadic),
            "deferrable" => Ok(TaskServer::Deferrable),
            "cbs" => Ok(TaskServer::Cbs),
            _ => match text.strip_prefix("io:").map(str::parse::<u32>) {
                Some(Ok(permille)) if (1..=1000).contains(&permille) => {
                    Ok(TaskServer::Io { permille })
                }
                _ => Err(TaskServerError(text.into())),
            },
        }
    }

    /// The text [`TaskServer::parse`] reads back.
    pub fn text(&self) -> String {
        match self {
            TaskServer::None => "none".into(),
            TaskServer::Sporadic => "sporadic".into(),
            TaskServer::Deferrable => "deferrable".into(),
            TaskServer::Cbs => "cbs".into(),
            TaskServer::Io { permille } => format!("io:{permille}"),
        }
    }
}

/// A task bulkhead itself provides, generated from another section of the description.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Service {
    /// The CAN gateway's reader of bus `bus` (CAN to partitions; DriveOS 6.4.1, Program 4).
    CanReader { bus: String },
    /// The CAN gateway's writer of bus `bus` (partitions to CAN, allowlisted; Program 5).
    CanWriter { bus: String },
    /// The Zenoh bridge of channel `channel` ([`Bridge`]).
    Bridge { channel: String },
    /// The partition's mode agent (M2-Xen's DMM), in the view of one mode
    /// ([`System::in_mode`]).
    ModeAgent,
}

/// A CAN bus and the gateway service that alone holds it (DriveOS 3.3.2, 6.4.1).
///
/// The gateway is two rt tasks of partition `gateway`, named `<bus>-reader` and
/// `<bus>-writer`, each with its own reservation (`*_budget` every `period`); they are
/// added to that partition's `tasks`, so analysis admits them like any other task. The
/// writer is periodic; the reader is sporadic (a job per frame reception), served by its
/// reservation as a constant bandwidth server, whose demand is that of a periodic task
/// with the same budget and period (docs/analysis.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bus {
    pub name: String,
    /// SocketCAN interface (e.g. `can0`); `None` = the virtual bus called `name`.
    pub interface: Option<String>,
    /// Accept an `interface` that is not a CAN interface (link type `ARPHRD_CAN`), e.g.
    /// a veth end in tests. Without it such an interface is refused: `run` takes the
    /// bus's interface away from the machine for the run.
    pub allow_non_can: bool,
    /// `dbc`: the DBC file describing the bus's messages (as written; relative to the
    /// description's directory), for decoding signals such as stop-start triggers.
    pub dbc: Option<String>,
    /// The rt partition whose gateway tasks own the bus.
    pub gateway: String,
    pub period: Nanos,
    pub reader_budget: Nanos,
    pub writer_budget: Nanos,
    /// Capacity, in frames, of each channel between the gateway and a client.
    pub depth: u32,
    /// Partitions connected to the bus through the gateway.
    pub clients: Vec<BusClient>,
}

/// A partition's connection to a bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusClient {
    pub partition: String,
    /// CAN ids the partition may send (ids above 0x7FF are 29-bit); others are dropped.
    pub allow: Vec<u32>,
    /// `rate`: frames per second it may send through the gateway on average; `None`: the
    /// gateway derives it from `allow` (each id's DBC cycle time, else 1000 a second).
    pub rate: Option<u32>,
    /// `queue`: its frames that may wait in the gateway for the bus, and its largest
    /// burst; `None`: 4 per allowed id. Frames beyond `rate` or `queue` are dropped.
    pub queue: Option<u32>,
}

impl Bus {
    /// Name of the gateway task that reads the bus.
    pub fn reader_task(&self) -> String {
        format!("{}-reader", self.name)
    }

    /// Name of the gateway task that writes the bus.
    pub fn writer_task(&self) -> String {
        format!("{}-writer", self.name)
    }
}

/// A process of a windowed partition (DEmOS `processes` entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Command line; exec'd directly, or through `/bin/sh -c` when it needs a shell.
    pub cmd: String,
    /// Budget per window; 0 = none given, allowed only for processes of a partition
    /// that appears in no window (they run as ordinary processes on the partition's CPUs).
    pub budget: Nanos,
    /// Budget jitter: each budget is drawn uniformly in `budget ± jitter/2`; `jitter <= 2*budget`.
    pub jitter: Nanos,
    /// Initializes before the schedule starts, until it signals completion.
    pub init: bool,
    /// The CPU frequency it asks for while it runs, in kHz (DEmOS `frequency`, given in
    /// MHz; honoured by the `per_process` power policy, see docs/power.md).
    pub frequency_khz: Option<u64>,
    /// Whether `run` starts it again when it exits (systemd's `Restart=`); only for
    /// processes of a partition in no window. `None`: never.
    pub restart: Option<Restart>,
    /// Its exit before the stop fails the run (exit status 1), as the exit of a unit
    /// that others `Require=` does under systemd.
    pub required: bool,
}

/// When and how often a process is started again (systemd's `Restart=`, `RestartSec=`,
/// `StartLimitBurst=`, `StartLimitIntervalSec=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restart {
    pub when: RestartWhen,
    /// Wait this long after the exit before starting it again.
    pub delay: Nanos,
    /// At most this many starts within [`Restart::interval`]; the start that would
    /// exceed it is not made (the process has failed for good).
    pub burst: u32,
    pub interval: Nanos,
}

/// Which exits lead to a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartWhen {
    /// An exit with a status other than 0, or by a signal.
    OnFailure,
    /// Every exit.
    Always,
}

impl Restart {
    /// systemd's defaults: `RestartSec=100ms`, `StartLimitBurst=5`, `StartLimitIntervalSec=10s`.
    pub const DEFAULT_DELAY: Nanos = 100_000_000;
    pub const DEFAULT_BURST: u32 = 5;
    pub const DEFAULT_INTERVAL: Nanos = 10_000_000_000;
}

/// One window of the static schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub length: Nanos,
    /// Slices run in parallel on disjoint CPU sets; empty = an idle window.
    pub slices: Vec<Slice>,
}

/// A slice binds at most one safety-critical and one best-effort partition to CPUs for a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    pub cpus: Cpus,
    /// Name of the safety-critical partition (an entry of [`System::partitions`]).
    pub sc_partition: Option<String>,
    /// Name of the best-effort partition run after all SC partitions of the window finish.
    pub be_partition: Option<String>,
    /// The CPU frequency its CPUs run at during its window, in kHz (DEmOS `frequency`,
    /// given in MHz; honoured by the `per_slice` power policy, see docs/power.md).
    pub frequency_khz: Option<u64>,
}

/// A shared-memory channel with fixed message size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    pub name: String,
    pub kind: ChannelKind,
    pub message_size: u32,
    /// Ring capacity in messages (fifo); 1 for `latest`.
    pub depth: u32,
    /// What a write to a full fifo does (`latest` never fills: [`Overflow::Block`]).
    pub overflow: Overflow,
    /// How many messages its reading task takes per job (`fifo`; one for `latest`).
    pub reads: Reads,
    /// Partition that writes.
    pub writer: String,
    /// Partitions that read.
    pub readers: Vec<String>,
    /// The task of `writer` that writes (`writer: partition/task`), if named: the
    /// simulation binds it (else the partition's first task).
    pub writer_task: Option<String>,
    /// Per reader, the task that reads (`partition/task`), if named.
    pub reader_tasks: Vec<Option<String>>,
    /// `bridge`: the channel crosses to other machines over Zenoh; its end there (the
    /// reader of a published channel, the writer of a subscribed one) is the bridge's
    /// task in the bridge's partition.
    pub bridge: Option<Bridge>,
}

/// A channel's bridge to other machines over Zenoh (issue 40; docs/zenoh.md): an rt task
/// of its own, [`Bridge::task`], in partition `partition`, reserved `budget` every
/// `period` like the CAN gateway's tasks, in that partition's network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bridge {
    /// `partition` (default `bridge`): the rt partition the bridge runs in, never the
    /// channel's local writer's or reader's.
    pub partition: String,
    /// Publish the channel's messages on the key (the channel names a local writer), or
    /// write the key's samples into the channel (`writer: zenoh`).
    pub direction: BridgeDirection,
    pub period: Nanos,
    pub budget: Nanos,
    /// `latency`: the hop's one-way delay across the network, as declared (0 when not):
    /// `solve` adds it to the bounds of a pipeline whose stage reads or writes the
    /// channel through the bridge (`input`/`output: zenoh:CHANNEL`).
    pub latency: Nanos,
    /// `loss`: the fraction of messages the hop may lose, in millionths (0 when not
    /// declared; Zenoh's reliable TCP transport loses none while the peer is present).
    pub loss_ppm: u32,
    pub zenoh: Zenoh,
}

/// Which way a bridge carries messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BridgeDirection {
    /// Channel to key.
    Publish,
    /// Key to channel.
    Subscribe,
}

/// The Zenoh side of a bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zenoh {
    /// The key expression the messages travel on (no wildcards).
    pub key: String,
    /// Endpoints the bridge listens on (`tcp/ADDR:PORT`).
    pub listen: Vec<String>,
    /// Endpoints the bridge connects to.
    pub connect: Vec<String>,
    /// `peer` (default) or `client`.
    pub mode: ZenohMode,
}

/// A Zenoh session's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZenohMode {
    Peer,
    Client,
}

impl ZenohMode {
    /// The mode as the description and Zenoh spell it.
    pub fn name(self) -> &'static str {
        match self {
            ZenohMode::Peer => "peer",
            ZenohMode::Client => "client",
        }
    }
}

impl Channel {
    /// The name of the bridge task of channel `channel`.
    pub fn bridge_task(channel: &str) -> String {
        format!("{channel}-bridge")
    }
}

/// A channel endpoint `partition/task` split at its last `/`: (partition, task); one
/// without `/` is a partition. (The loader first takes a text that names a partition
/// whole, `/` or not, as that partition.)
pub fn endpoint(text: &str) -> (String, Option<String>) {
    match text.rsplit_once('/') {
        Some((p, t)) => (p.to_string(), Some(t.to_string())),
        None => (text.to_string(), None),
    }
}

impl System {
    /// The uids given to partitions without `user:` (first, last).
    pub fn user_range(&self) -> (u32, u32) {
        self.user_range.unwrap_or(DEFAULT_USER_RANGE)
    }

    /// The `path` that applies to partition `p`: its own, else the system's.
    pub fn path_of<'a>(&'a self, p: &'a Partition) -> Option<&'a str> {
        p.path.as_deref().or(self.path.as_deref())
    }

    /// The partition named `name`, if any.
    pub fn partition(&self, name: &str) -> Option<&Partition> {
        self.partitions.iter().find(|p| p.name == name)
    }

    /// Index of the partition named `name` in [`System::partitions`].
    pub fn partition_index(&self, name: &str) -> Option<usize> {
        self.partitions.iter().position(|p| p.name == name)
    }

    /// Names of the partitions some window slice schedules (SC or BE).
    pub fn windowed_partitions(&self) -> std::collections::HashSet<&str> {
        let slices = self.windows.iter().flat_map(|w| &w.slices);
        slices
            .flat_map(|s| [s.sc_partition.as_deref(), s.be_partition.as_deref()])
            .flatten()
            .collect()
    }

    /// The network partition `p` runs in: as configured, else private for a partition
    /// with `listen` (its socket comes from the host's network already) or in a system
    /// with buses (so that only the gateways reach a bus; DriveOS 3.3.2), host otherwise;
    /// a partition running a channel's Zenoh bridge is on the host's network.
    pub fn network_of(&self, p: &Partition) -> Network {
        let mut bridges = self.channels.iter().filter_map(|c| c.bridge.as_ref());
        let gateway = self.buses.iter().any(|b| b.gateway == p.name)
            || bridges.any(|b| b.partition == p.name);
        match p.network {
            Some(n) => n,
            None if p.listen.is_some() => Network::Private,
            None if self.buses.is_empty() || gateway => Network::Host,
            None => Network::Private,
        }
    }

    /// Length of the major frame: the sum of all window lengths.
    pub fn major_frame(&self) -> Nanos {
        self.windows.iter().map(|w| w.length).sum()
    }
}

impl Task {
    /// A periodic task `name` with WCET `budget` and period `period`, its deadline the
    /// period (implicit), and every other key at the description's default: no command,
    /// deadline-monotonic priority, no jitter, offset or blocking, continuable, CPU-bound
    /// at the top frequency, no service, no server.
    pub fn periodic(name: impl Into<String>, budget: Nanos, period: Nanos) -> Task {
        Task {
            name: name.into(),
            cmd: String::new(),
            budget,
            period,
            deadline: period,
            priority: None,
            release_jitter: 0,
            offset: 0,
            blocking: 0,
            resume: Resume::default(),
            wcet_khz: None,
            memory_bound_ppm: 0,
            service: None,
            server: None,
        }
    }

    /// A restartable task bulkhead provides itself (its `cmd` filled in by `run`),
    /// reserved `budget` every `period`, its deadline the period.
    pub fn service(
        name: impl Into<String>,
        budget: Nanos,
        period: Nanos,
        service: Service,
    ) -> Task {
        Task {
            resume: Resume::Restartable,
            service: Some(service),
            ..Task::periodic(name, budget, period)
        }
    }

    /// The WCET at `khz` on CPUs whose top frequency is `top_khz`, rounded up: with `m`
    /// the memory-bound fraction and `f_wcet` the measuring frequency (`top_khz` when
    /// not given), `C(f) = C x (m + (1 - m) x f_wcet / f)`. The standard linear model
    /// of frequency scaling: the on-chip part's cycles are fixed, so its time scales with
    /// `1/f` (DEmOS thesis 2.6: the higher the frequency, the more instructions per unit
    /// of time), while off-chip memory stalls take the same time at every frequency
    /// (Choi, Soma and Pedram, DATE 2004: execution time = on-chip time x f_ref / f +
    /// off-chip time). `m = 0` gives the CPU-bound `C x f_wcet / f`. `khz` > 0.
    pub fn wcet_at(&self, top_khz: u64, khz: u64) -> Nanos {
        const PPM: u128 = 1_000_000;
        let m = self.memory_bound_ppm as u128;
        let f_wcet = self.wcet_khz.unwrap_or(top_khz) as u128;
        let khz = khz as u128;
        let num = self.budget as u128 * (m * khz + (PPM - m) * f_wcet);
        num.div_ceil(PPM * khz).try_into().unwrap_or(Nanos::MAX)
    }

    /// Utilization C/T.
    pub fn utilization(&self) -> f64 {
        self.budget as f64 / self.period as f64
    }
}
