//! The mode manager of a multi-mode bulkhead system (M2-Xen's Host Mode Manager) as a
//! pure, deterministic state machine.
//!
//! `bulkhead sim` (simulated time) and, later, `bulkhead run` both drive one [`Switch`]
//! per mode switch, so that for the same acknowledgements they take the same steps in
//! the same order and record the same trace events ([`Switch::event`]). The machine
//! does no I/O and reads no clock: the driver performs each [`Step`] it returns and
//! reports each agent's acknowledgement with [`Switch::ack`].
//!
//! The [`Table`] is the global mode table with every derived value filled in (the
//! analysis resolves interfaces the description leaves open): per mode and partition,
//! the task set and, for partitions scheduled as servers, the interface drawn from
//! their pool of CPUs. [`dry_run`] and [`verify`] replay a switch and check, at every
//! step and independently of the machine, that no pool is overloaded and no partition
//! demands more than its interface.
//!
//! ```
//! use bulkhead_modes::{Interface, Local, Member, Pool, Step, Switch, Table, TableMode, CPU_PPM};
//! use bulkhead_model::{CpuSet, SwitchPolicy};
//! // M2-Xen Table I: Dom 1 goes from (10 ms, 10 ms) to (4 ms, 10 ms).
//! let local = |budget| Local {
//!     interface: Some(Interface { budget, period: 10_000_000 }),
//!     tasks: vec![],
//! };
//! let table = Table {
//!     pools: vec![Pool { cpus: CpuSet::parse("1").unwrap(), capacity: CPU_PPM, reserve: 0 }],
//!     members: vec![Member { name: "dom1".into(), pool: Some(0), cpus: 1 }],
//!     modes: vec![
//!         TableMode { name: "0".into(), locals: vec![local(10_000_000)] },
//!         TableMode { name: "1".into(), locals: vec![local(4_000_000)] },
//!     ],
//! };
//! let mut switch = Switch::new(&table, 0, 1, SwitchPolicy::Sequential);
//! let steps = switch.start().unwrap();
//! assert!(matches!(steps[..], [Step::Interface { bandwidth: 400_000, .. }, Step::Done]));
//! ```

mod replay;
mod switch;
mod table;

pub use replay::{dry_run, verify, AckOrder, Peaks, Replay, Stopped, Violation};
pub use switch::{Step, Switch, SwitchError};
pub use table::{
    bandwidth, demand, Change, Interface, Local, Member, Pool, Ppm, Table, TableMode, CPU_PPM,
};
