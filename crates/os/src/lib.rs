//! bulkhead's one operating-system layer: the Linux mechanisms the supervisor
//! (`bulkhead-runtime`), the tasks' and programs' libraries and the channels
//! (`bulkhead-chan`) use, each written once.
//!
//! - [`cgroup`]: the machine's cgroup mounts and the calling process's cgroups;
//! - [`cpuset`]: exclusive cpuset root domains (v1 and v2) and the v1 shield of rt CPUs;
//!   [`limit`]: a partition's v1 memory and pids limit cgroups;
//! - [`sched`]: the calling process's CPUs, SCHED_FIFO for the supervisor, its fd limit;
//!   `sched_setattr` for SCHED_DEADLINE (C, D, T) and SCHED_FIFO reservations
//!   ([`sched::Policy`]), and whether the kernel offers them ([`sched::detect`]);
//!   [`bandwidth`]: the machine's SCHED_DEADLINE bandwidth cap;
//! - [`netdev`]: a network interface moved into a namespace of its own and back, also
//!   after a SIGKILL; [`owner`]: the owner line of what a run must put back;
//! - [`probe`]: the platform's floor measured per CPU as cyclictest does;
//! - [`proc`]: `/proc/PID/stat` ([`proc::proc_stat`]), a process's end on a pidfd;
//! - [`futex`]: waiting on and waking words in shared memory; [`shm`]: the sealed memfd
//!   pages they live in, and their mappings;
//! - [`lock`]: open-file-description locks on single bytes;
//! - [`fd`]: descriptors handed to children, numbered above the ones moved into place,
//!   reads and writes on descriptor numbers; [`errno`]: the thread's error number;
//! - [`clock`]: CLOCK_MONOTONIC, the clock every bulkhead time is on, and the other clocks;
//! - [`event`]: the supervisor's event loop: epoll, a timerfd on absolute CLOCK_MONOTONIC
//!   times, non-blocking reads and writes of its channel sockets, reaping children;
//! - [`signal`]: SIGINT and SIGTERM as a readable descriptor;
//! - [`launch`]: the one launcher of every process bulkhead starts (window and be
//!   processes, rt tasks): cgroups joined before the program runs (`clone3` with
//!   `CLONE_INTO_CGROUP`, or join-before-exec), scheduling policy, credentials,
//!   namespaces, capabilities, seccomp, descriptor limit, death with the parent, the
//!   descriptors handed over; with [`sandbox`] (what the child sets on itself),
//!   [`harden`] (read-only host, hidden runtime directory, IPC and user namespaces),
//!   [`oom`] (the OOM scores of the supervisor and of programs) and `pidns` (a pid
//!   namespace under a minimal init);
//! - [`cpu_latency`]: a bound on the CPUs' wake-up latency (PM QoS), held while a run lasts;
//! - [`ipc`]: what a uid left in the host's System V IPC and shared directories;
//! - [`name`]: the one rule for names bulkhead makes for the file system.
//!
//! It sits at the bottom of the OS layers: it imports no other bulkhead crate; the
//! crates above (`plan` decides, `runtime` carries out) decide *what* to start, it
//! decides *how*. Its errors are `std::io::Error` where one system call fails, and
//! [`Error`] where an operation of several steps says which step failed and why.
//!
//! One system-call crate, `libc`: the launcher needs `clone3` with `CLONE_INTO_CGROUP`,
//! `clone` with `CLONE_VM` on a stack of its own, `sched_setattr` and async-signal-safe
//! child code between clone and exec, which neither `rustix` nor `nix` offers, and the
//! code taken over from `runtime` and `reserve` was written against `libc` already.

pub mod bandwidth;
pub mod cgroup;
pub mod clock;
pub mod cpu_latency;
/// The exclusive cpusets, in [`cgroup`] with the rest of the cgroup files.
pub use cgroup::cpuset;
pub mod errno;
mod error;
pub mod event;
pub mod fd;
pub mod futex;
pub mod harden;
pub mod host;
pub mod ipc;
pub mod launch;
pub mod limit;
pub mod lock;
pub mod name;
pub mod netdev;
pub mod oom;
pub mod owner;
mod pidns;
pub mod probe;
pub mod proc;
pub mod sandbox;
pub mod sched;
pub mod shm;
pub mod signal;
mod spawner;

pub use error::{Error, Result};

/// `Ok(r)` for a non-negative system call result, the thread's `errno` otherwise.
pub fn check(r: i32) -> std::io::Result<i32> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}
