//! rt partitions that share their CPUs with best-effort partitions (`exclusive: false`,
//! issue 39.4), as DriveOS's Linux side runs its SCHED_DEADLINE tasks beside
//! non-timing-critical background tasks on its core (DriveOS 7.1) and Boomerang's ProcData
//! runs beside the load of Core 1 (Boomerang IV-A).
//!
//! The be work runs as SCHED_OTHER tasks, which the kernel runs only when no
//! SCHED_DEADLINE or SCHED_FIFO task of the CPU is runnable, with one exception: the
//! kernel's fair server ([`FAIR_SERVER`], Linux 6.12 and later), a SCHED_DEADLINE server
//! of 50 ms every second that runs SCHED_OTHER tasks starved by real-time ones.
//!
//! * SCHED_DEADLINE tasks (`scheduler: edf`): the fair server is one more reservation of
//!   the CPU's EDF schedule, and its bandwidth is already deducted from what the admission
//!   gives the tasks ([`crate::reservation::task_bandwidth`]); EDF with a total bandwidth
//!   within the CPU keeps every reservation's C every T, so the be work adds nothing.
//! * SCHED_FIFO tasks (`fixed-priority`): the fair server runs above every FIFO level,
//!   up to its runtime every period. It is analysed as a blocking term of each task:
//!   `ceil(D / T_fs) * C_fs`, at least the interference of the highest-priority task
//!   (C_fs, T_fs) in any window of length R <= D (Lehoczky's `ceil(R / T) * C`; a task
//!   with R > D fails either way).
//! * What neither bounds: the kernel's non-preemptible sections a be process can enter
//!   (system calls, page faults, interrupts it causes). Their length is a property of the
//!   kernel and the machine, which `bulkhead probe` measures beside the be work (the
//!   wake-up latency of a SCHED_FIFO timer): the report names them, it does not bound them.

use crate::reservation::FAIR_SERVER;
use crate::task::{Task, Time};
use bulkhead_model::{Cpus, Partition, PartitionKind, Scheduler, System};

/// The fair server in nanoseconds (runtime, period); [`FAIR_SERVER`] is in microseconds.
pub const FAIR_SERVER_NS: (Time, Time) = (FAIR_SERVER.0 * 1_000, FAIR_SERVER.1 * 1_000);

/// The best-effort partitions that run on CPU `cpu` of the non-exclusive rt partition `p`
/// (none for an exclusive one).
pub fn sharers<'a>(system: &'a System, p: &Partition, cpu: u32) -> Vec<&'a str> {
    if p.exclusive {
        return Vec::new();
    }
    system
        .partitions
        .iter()
        .filter(|b| b.kind == PartitionKind::Be)
        .filter(|b| matches!(&b.cpus, Some(Cpus::Set(set)) if set.contains(cpu)))
        .map(|b| b.name.as_str())
        .collect()
}

/// The fair server's interference on a SCHED_FIFO task of deadline `deadline` beside be
/// work: `ceil(D / T_fs) * C_fs`.
pub fn fair_server_interference(deadline: Time) -> Time {
    deadline.div_ceil(FAIR_SERVER_NS.1) * FAIR_SERVER_NS.0
}

/// `tasks` (those of partition `p` on a CPU be partitions share) with the fair server's
/// interference added to their blocking, for a fixed-priority partition; unchanged for
/// an EDF one.
pub fn with_fair_server(p: &Partition, tasks: &[Task]) -> Vec<Task> {
    let fifo = p.scheduler == Scheduler::FixedPriority;
    tasks
        .iter()
        .map(|t| Task {
            blocking: t.blocking
                + if fifo {
                    fair_server_interference(t.deadline)
                } else {
                    0
                },
            ..*t
        })
        .collect()
}

/// What the report says of a CPU partition `p` shares with the best-effort partitions
/// `be`.
pub fn note(p: &Partition, be: &[&str]) -> String {
    let names = be
        .iter()
        .map(|b| format!("`{b}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let (c, t) = (FAIR_SERVER_NS.0 / 1_000_000, FAIR_SERVER_NS.1 / 1_000_000);
    let server = match p.scheduler {
        Scheduler::Edf => format!(
            "the kernel's fair server ({c} ms every {t} ms) is deducted from the SCHED_DEADLINE admission, so they cannot take the tasks' reservations"
        ),
        Scheduler::FixedPriority => format!(
            "the kernel's fair server can run them above SCHED_FIFO for {c} ms every {t} ms, added to each task's blocking"
        ),
    };
    format!(
        "shared with best-effort partition(s) {names} (SCHED_OTHER below the reservations, DriveOS 7.1): {server}; non-preemptible kernel sections they enter are not bounded here: `bulkhead probe` beside them measures them"
    )
}
