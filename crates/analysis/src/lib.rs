//! Schedulability analysis for bulkhead: pure functions, no privileges, no Linux
//! specifics.
//!
//! The core works on plain task sets ([`Task`]: C, T, D, J, B in integer ticks, exact
//! where the inputs are integral) against a processor [`Supply`]:
//!
//! * fixed priority: exact response-time analysis with arbitrary deadlines, jitter and
//!   blocking ([`rta`]), Liu & Layland and hyperbolic quick tests ([`bounds`]);
//! * EDF: the exact processor-demand test QPA and the demand test under any supply ([`edf`]);
//! * reservations: SCHED_DEADLINE admission and Quest's I/O reservation ([`reservation`]),
//!   servers as supply ([`supply::PeriodicSupply::server`]);
//! * compositional analysis: periodic resource model (sbf, lsbf, minimal budgets) and the
//!   multiprocessor periodic resource model ([`prm`]), static window supply
//!   ([`supply::WindowSupply`], [`windows`]);
//! * an adapter from the system model with verdicts per task, partition and CPU
//!   ([`system::analyze_system`]) and its text form ([`text::render_text`]); the verdicts
//!   and what builds them in [`report`], below the analyses of one mode ([`system`]), of
//!   partitions as servers ([`servers`]) and of every mode and switch ([`modes`]);
//! * end-to-end bounds of stage chains and tuned-pipe buffer sizes ([`pipeline`]);
//! * UUniFast-discard task-set generation ([`generate`]).

pub mod assign;
pub mod bounds;
pub mod edf;
pub mod energy;
pub mod generate;
mod levels;
pub mod modes;
pub mod pipeline;
pub mod pipes;
pub mod platform;
pub mod prm;
pub mod report;
pub mod reservation;
pub mod rta;
pub mod sensitivity;
pub mod servers;
pub mod shared;
pub mod supply;
pub mod system;
pub mod task;
pub mod text;
pub mod windows;

pub use supply::{LinearSupply, PeriodicSupply, Supply, WindowSupply};
pub use system::{analyze_system, Report};
pub use task::{hyperperiod, priority_order, PriorityRule, Task, Time};
