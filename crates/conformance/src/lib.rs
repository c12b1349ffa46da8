//! `bulkhead-conformance`: what `analyze` admits is what `sim` shows and what `run`
//! does, checked on scenarios (in the spirit of iceoryx2's conformance suites and
//! youki's contest: one suite of scenarios, several implementations behind one
//! interface).
//!
//! A [`Scenario`] is data (`scenarios/NAME.yaml` and its header, [`scenario`]). An
//! [`Executor`] executes it and reports an [`Observation`]: the [`Sim`]ulator, the
//! window [`Machine`] and `bulkhead run` ([`run::Run`], root). Each observation is
//! checked against the promises of `analyze` and `solve` ([`Bounds`],
//! [`check::against_bounds`]) and against the simulation of the same scenario
//! ([`check::against_reference`]): the same jobs complete in the same order on each
//! CPU, the same messages are consumed, the same window grants, mode-switch steps,
//! stop-protocol steps and frequencies. docs/conformance.md lists the scenarios.

pub mod bounds;
pub mod check;
pub mod machine;
pub mod observation;
pub mod run;
pub mod scenario;
pub mod sim;

pub use bounds::Bounds;
pub use check::Verdict;
pub use machine::Machine;
pub use observation::Observation;
pub use scenario::{Scenario, ScenarioError};
pub use sim::Sim;

/// Why an executor could not execute a scenario at all.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error(transparent)]
    Simulate(#[from] sim::SimulateError),
    #[error(transparent)]
    Schedule(#[from] bulkhead_windows::ScheduleError),
    #[error(transparent)]
    Run(#[from] run::RunError),
}

/// One implementation of bulkhead's semantics that executes scenarios.
pub trait Executor {
    fn name(&self) -> &'static str;

    /// Why this executor cannot execute `scenario` (`None`: it can).
    fn cannot(&self, scenario: &Scenario) -> Option<String>;

    /// Executes `scenario` and reports what it showed; an error when it could not run
    /// it at all.
    fn execute(&self, scenario: &Scenario) -> Result<Observation, ExecuteError>;
}

/// The verdict on `executor`'s execution of `s`: its observation against the bounds
/// and against the simulation of `s` with its stimuli when the execution received them
/// ([`Scenario::retimed`]), or why it could not run.
pub fn conform(executor: &dyn Executor, s: &Scenario) -> Verdict {
    let bounds = match s.solved() {
        Ok(system) => Bounds::of(&system),
        Err(e) => return failed(e.to_string()),
    };
    match executor.execute(s) {
        Ok(o) => {
            let retimed = s.retimed(&o.stimuli);
            let reference = match Sim.execute(retimed.as_ref().unwrap_or(s)) {
                Ok(reference) => reference,
                Err(e) => return failed(format!("sim could not execute it: {e}")),
            };
            let mut v = check::against_bounds(s, &o, &bounds);
            let cross = check::against_reference(s, &o, &reference, &bounds);
            v.failures.extend(cross.failures);
            v.excused.extend(cross.excused);
            v
        }
        Err(e) => failed(format!("{} could not execute it: {e}", executor.name())),
    }
}

fn failed(why: String) -> Verdict {
    Verdict {
        failures: vec![why],
        excused: Vec::new(),
    }
}
