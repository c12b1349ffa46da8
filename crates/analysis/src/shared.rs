//! rt partitions that share their CPUs with best-effort partitions (`exclusive: false`,
//! issue 39.4), as DriveOS's Linux side runs its SCHED_DEADLINE tasks beside
//! non-timing-critical background tasks on its core (DriveOS 7.1) and Boomerang's ProcData
//! runs beside the load of Core 1 (Boomerang IV-A).
//!
//! The be work runs as SCHED_OTHER tasks, which the kernel runs only when no
//! SCHED_DEADLINE or SCHED_FIFO task of the CPU is runnable, with two exceptions: the
//! kernel's fair server ([`FAIR_SERVER`], Linux 6.12 and later), a SCHED_DEADLINE server
//! of 50 ms every second that runs SCHED_OTHER tasks starved by real-time ones, and the
//! non-preemptible kernel sections the be work is inside when a task wakes.
//!
//! * SCHED_DEADLINE tasks (`scheduler: edf`): the fair server is one more reservation of
//!   the CPU's EDF schedule, and its bandwidth is already deducted from what the admission
//!   gives the tasks ([`crate::reservation::Kernel::task_bandwidth`]); EDF with a total bandwidth
//!   within the CPU keeps every reservation's C every T, so the fair server takes nothing
//!   from them.
//! * SCHED_FIFO tasks (`fixed-priority`): normal tasks can run above every FIFO level,
//!   through the fair server (up to its runtime every period) on kernels that have it,
//!   or, on older ones, while RT throttling holds the FIFO tasks (`sched_rt_period_us -
//!   sched_rt_runtime_us` of every `sched_rt_period_us`). Linux 6.12 replaced the default
//!   RT throttling with the fair server ("sched/rt: Remove default bandwidth control"),
//!   so a kernel has one or the other: the larger of the two is analysed as a blocking
//!   term of each task, `ceil(D / T) * C`, at least the interference of a
//!   highest-priority task (C, T) in any window of length R <= D (Lehoczky's
//!   `ceil(R / T) * C`; a task with R > D fails either way).
//! * Both: the kernel's non-preemptible sections a be process can enter (system calls,
//!   page faults, interrupts it causes) delay a task's job once per busy period: the
//!   be work runs only when no rt task is runnable, so it can have entered at most one
//!   section when the busy period begins (blocking by lower-priority non-preemptive
//!   work: Baker 1991 for fixed priority, one term `B` in the demand test
//!   `dbf(t) + B <= t` for EDF, George, Rivierre & Spuri 1996). Its length is a property
//!   of the kernel and the machine, which `bulkhead probe` measures beside the be work
//!   (the wake-up latency of a SCHED_FIFO timer); a be partition declares it
//!   (`nonpreemptible:`), else [`DEFAULT_NONPREEMPTIBLE`] applies.
//!
//! The fair server's runtime and period are the kernel's defaults unless the caller
//! read the machine's (`/sys/kernel/debug/sched/fair_server/cpuN/{runtime,period}`,
//! root and an unlocked debugfs: [`FairServer::read`]).

use crate::reservation::FAIR_SERVER;
use crate::task::{Task, Time};
use bulkhead_model::{Cpus, Partition, PartitionKind, Scheduler, System};
use serde::Serialize;

/// The fair server in nanoseconds (runtime, period); [`FAIR_SERVER`] is in microseconds.
pub const FAIR_SERVER_NS: (Time, Time) = (FAIR_SERVER.0 * 1_000, FAIR_SERVER.1 * 1_000);

/// The non-preemptible section of be work that declares none: 1 ms. On this 2-vCPU VM
/// `bulkhead probe` beside a hog measured wake-up latencies of 17-32 µs (median) and
/// 42-917 µs (p99) (docs/platform.md); the longer tail is the host taking the vCPU away,
/// which `platform:` accounts for, not the be work.
pub const DEFAULT_NONPREEMPTIBLE: Time = 1_000_000;

/// The kernel's fair server of the CPUs: runtime and period in nanoseconds, and whether
/// they were read from the machine or are the kernel's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FairServer {
    pub runtime_ns: Time,
    pub period_ns: Time,
    pub read: bool,
}

impl Default for FairServer {
    fn default() -> Self {
        FairServer {
            runtime_ns: FAIR_SERVER_NS.0,
            period_ns: FAIR_SERVER_NS.1,
            read: false,
        }
    }
}

impl FairServer {
    /// The server with the largest bandwidth of `servers` (runtime, period in ns, one
    /// per CPU that could be read), as read from the machine; the defaults if none.
    /// The largest, because one value is analysed for every CPU and the interference
    /// grows with it.
    pub fn read(servers: impl IntoIterator<Item = (Time, Time)>) -> FairServer {
        let valid = servers.into_iter().filter(|&(c, t)| t > 0 && c <= t);
        let largest = valid.max_by_key(|&(c, t)| (c as u128) * 1_000_000 / t as u128);
        largest.map_or_else(FairServer::default, |(runtime_ns, period_ns)| FairServer {
            runtime_ns,
            period_ns,
            read: true,
        })
    }
}

/// What the kernel and the be work can still take from the rt tasks of one CPU that
/// best-effort partitions share (the report's per-CPU `sharing`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sharing {
    /// The best-effort partitions naming the CPU.
    pub partitions: Vec<String>,
    pub fair_server: FairServer,
    /// RT throttling: the time (ns) SCHED_FIFO tasks are held every period (ns), from
    /// the bandwidth cap `sched_rt_runtime_us / sched_rt_period_us`.
    pub rt_throttle_ns: (Time, Time),
    /// The longest non-preemptible section of the be work: the largest `nonpreemptible`
    /// of `partitions`, [`DEFAULT_NONPREEMPTIBLE`] for one that declares none.
    pub nonpreemptible_ns: Time,
    /// Whether every one of `partitions` declared its own.
    pub nonpreemptible_declared: bool,
    /// The partition's scheduler is SCHED_FIFO: normal tasks can run above it.
    pub fifo: bool,
}

impl Sharing {
    /// What be work adds to the blocking of a task of deadline `deadline`: the
    /// non-preemptible section, and for SCHED_FIFO the larger of the fair server's
    /// and RT throttling's `ceil(D / T) * C`.
    pub fn blocking(&self, deadline: Time) -> Time {
        let above = |(c, t): (Time, Time)| match t {
            0 => 0,
            t => deadline.div_ceil(t).saturating_mul(c),
        };
        let fair = (self.fair_server.runtime_ns, self.fair_server.period_ns);
        let normal = match self.fifo {
            true => above(fair).max(above(self.rt_throttle_ns)),
            false => 0,
        };
        self.nonpreemptible_ns.saturating_add(normal)
    }
}

/// The best-effort partitions that run on CPU `cpu` of the non-exclusive rt partition `p`
/// (none for an exclusive one).
pub fn sharers<'a>(system: &'a System, p: &Partition, cpu: u32) -> Vec<&'a Partition> {
    if p.exclusive {
        return Vec::new();
    }
    system
        .partitions
        .iter()
        .filter(|b| b.kind == PartitionKind::Be)
        .filter(|b| matches!(&b.cpus, Some(Cpus::Set(set)) if set.contains(cpu)))
        .collect()
}

/// What CPU `cpu` of rt partition `p` shares with best-effort partitions, with the
/// kernel's `fair_server` and bandwidth cap `deadline_cap` (`sched_rt_runtime_us`,
/// `sched_rt_period_us`); `None` if it shares nothing.
pub fn sharing(
    system: &System,
    p: &Partition,
    cpu: u32,
    (fair_server, deadline_cap): (FairServer, (Time, Time)),
) -> Option<Sharing> {
    let be = sharers(system, p, cpu);
    if be.is_empty() {
        return None;
    }
    let each = be.iter().map(|b| b.nonpreemptible);
    let longest = each
        .clone()
        .map(|n| n.unwrap_or(DEFAULT_NONPREEMPTIBLE))
        .max();
    let (runtime, period) = deadline_cap;
    Some(Sharing {
        partitions: be.iter().map(|b| b.name.clone()).collect(),
        fair_server,
        rt_throttle_ns: (
            period.saturating_sub(runtime).saturating_mul(1_000),
            period.saturating_mul(1_000),
        ),
        nonpreemptible_ns: longest.unwrap_or(DEFAULT_NONPREEMPTIBLE),
        nonpreemptible_declared: each.clone().all(|n| n.is_some()),
        fifo: p.scheduler == Scheduler::FixedPriority,
    })
}

/// `tasks` (those of a partition on a CPU be partitions share) with what the be work
/// can still do to them added to their blocking ([`Sharing::blocking`]).
pub fn with_sharing(sharing: &Sharing, tasks: &[Task]) -> Vec<Task> {
    tasks
        .iter()
        .map(|t| Task {
            blocking: t.blocking.saturating_add(sharing.blocking(t.deadline)),
            ..*t
        })
        .collect()
}

/// The tasks of an EDF CPU with their longest blocking `B` as one more demand: a job of
/// `B` with the shortest deadline of `tasks`, once every ten of their longest periods.
/// Its demand is `B` at every deadline `t` the test checks up to that period, which
/// makes QPA check `dbf(t) + B <= t` (George, Rivierre & Spuri 1996), and more after
/// it, on the safe side. `tasks` unchanged when no task is blocked.
pub fn with_blocking_demand(tasks: &[Task]) -> Vec<Task> {
    let mut all = tasks.to_vec();
    let b = tasks.iter().map(|t| t.blocking).max().unwrap_or(0);
    if b > 0 {
        let d_min = tasks.iter().map(|t| t.deadline).min().unwrap_or(b);
        let longest = tasks.iter().map(|t| t.period).max().unwrap_or(b);
        all.push(Task::new(b, longest.saturating_mul(10).max(b), d_min));
    }
    all
}

fn ms(ns: Time) -> String {
    let whole = ns / 1_000_000;
    match ns % 1_000_000 {
        0 => format!("{whole} ms"),
        _ => format!("{} µs", ns as f64 / 1e3),
    }
}

/// What the report says of a CPU partition `p` shares with best-effort partitions.
pub fn note(p: &Partition, s: &Sharing) -> String {
    let names = s
        .partitions
        .iter()
        .map(|b| format!("`{b}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let fs = s.fair_server;
    let (c, t) = (ms(fs.runtime_ns), ms(fs.period_ns));
    let source = match fs.read {
        true => "read from debugfs",
        false => "the kernel's default",
    };
    let server = match p.scheduler {
        Scheduler::Edf => format!(
            "the kernel's fair server ({c} every {t}, {source}) is deducted from the SCHED_DEADLINE admission, so they cannot take the tasks' reservations"
        ),
        Scheduler::FixedPriority => format!(
            "the kernel's fair server can run them above SCHED_FIFO for {c} every {t} ({source}), or RT throttling on kernels without it for {} every {}: the larger is added to each task's blocking",
            ms(s.rt_throttle_ns.0),
            ms(s.rt_throttle_ns.1)
        ),
    };
    let np = match s.nonpreemptible_declared {
        true => "declared by `nonpreemptible`; `bulkhead probe` beside them measures it",
        false => {
            "the default: measure it with `bulkhead probe` beside them and declare `nonpreemptible`"
        }
    };
    format!(
        "shared with best-effort partition(s) {names} (SCHED_OTHER below the reservations, DriveOS 7.1): {server}; a non-preemptible kernel section they enter blocks each job once for up to {} ({np})",
        ms(s.nonpreemptible_ns)
    )
}
