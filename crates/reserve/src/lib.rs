//! bulkhead-reserve: CPU reservations on Linux.
//!
//! A real-time task of an `rt` partition runs under a *reservation* (DriveOS section 3.2,
//! "Real-time Task as a Service": "the service task is given at least C time-units in
//! every T time-units"; Boomerang II-A: a processor capacity reserve (C, T) per Main VCPU).
//! On Linux that is one of:
//!
//! * [`sched::Policy::Deadline`]: SCHED_DEADLINE with runtime C, deadline D, period T
//!   (a constant bandwidth server scheduled EDF; the kernel throttles the task once it has
//!   used C until its next period). It needs a root domain that the task's allowed CPUs
//!   cover: [`cpuset::ExclusiveDomain`] makes a partition's cpuset one (cgroup v1
//!   `cpuset.cpu_exclusive` + `sched_load_balance`, cgroup v2 `cpuset.cpus.partition = root`).
//! * [`sched::Policy::Fifo`] at the task's rate/deadline-monotonic priority ([`prio`]), with
//!   the budget enforced by the supervisor ([`enforce::Enforcer`]), for partitions configured
//!   fixed-priority or machines without SCHED_DEADLINE ([`detect`]).
//!
//! Everything here acts on real processes through system calls; nothing is simulated.

pub mod bandwidth;
pub mod confine;
pub mod cpuset;
pub mod detect;
pub mod enforce;
mod error;
pub mod housekeeping;
pub mod limit;
pub mod netdev;
mod owner;
pub mod partition;
pub mod prio;
pub mod probe;
pub mod sched;

pub use error::{Error, Result};
