//! The plan of a system description: what is decided about it once, before anything
//! runs, so that `check`, `analyze`, `sim` and `run` never decide it again each in its
//! own way.
//!
//! Today the plan holds the programs ([`programs`]): every command of the description
//! resolved to the file it executes, how it is executed, the `PATH` its partition's
//! processes get, and the files the sandbox must keep visible for it; and where every
//! rt task runs ([`placement`]), as the analysis that admits the system placed it; and
//! whether the host's cgroup hierarchy can hold its best-effort partitions ([`cgroups`]);
//! and which of its keys `run` does not carry out yet, which `check` refuses too
//! ([`scope`]).
//! The fixed-priority order is the model's one function, `bulkhead_model::priority::ranks`.
//!
//! The crate is pure apart from looking files up (it reads the file system, it changes
//! nothing), needs no privileges and builds anywhere.

pub mod admission;
pub mod cgroups;
pub mod placement;
pub mod programs;
pub mod scope;

pub use admission::{admit, FairServer, Options, Refusal};
pub use bulkhead_analysis::system::Placement;
pub use cgroups::{CgroupVersion, Unplaceable};
pub use placement::Placements;
pub use programs::{CommandError, Exec, Host, ProgramError, Programs, Search};

#[cfg(test)]
mod tests {
    /// The system a description in `yaml` loads to (the plan's tests' inputs).
    pub fn load(yaml: &str) -> bulkhead_model::System {
        bulkhead_model::load_bytes(yaml.as_bytes(), "t.yaml")
            .unwrap()
            .system
    }
}
