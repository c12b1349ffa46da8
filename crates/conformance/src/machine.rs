//! The `machine` executor: the window schedule's pure state machine
//! (`bulkhead_windows::Machine`) driven by the model of the processes' behaviour alone
//! ([`bulkhead_windows::drive::drive`]), without the simulator around it: the first
//! execution of the DEmOS corpus, for scenarios of a window schedule only.

use crate::observation::Observation;
use crate::scenario::Scenario;
use crate::{ExecuteError, Executor};
use bulkhead_model::{CpuSet, PartitionKind};
use bulkhead_windows::drive::{drive, run_events};
use bulkhead_windows::{Behaviour, Config, Schedule};

/// The window machine.
pub struct Machine;

impl Executor for Machine {
    fn name(&self) -> &'static str {
        "machine"
    }

    fn cannot(&self, s: &Scenario) -> Option<String> {
        let system = match s.system() {
            Ok(system) => system,
            Err(e) => return Some(e.to_string()),
        };
        let rt = system
            .partitions
            .iter()
            .any(|p| p.kind == PartitionKind::Rt && !p.tasks.is_empty());
        match (system.windows.is_empty(), rt || s.power_policy.is_some()) {
            (true, _) => Some("no window schedule".into()),
            (false, true) => {
                Some("rt tasks or a power policy: more than the window machine".into())
            }
            (false, false) => None,
        }
    }

    fn execute(&self, s: &Scenario) -> Result<Observation, ExecuteError> {
        let system = s.system()?;
        let all = CpuSet::parse("0-1").expect("a CPU list");
        let schedule = Schedule::from_system(&system, &all)?;
        let behaviours: Vec<Behaviour> = schedule
            .processes
            .iter()
            .map(|p| {
                let found = s.header.behaviours.iter().find(|(cmd, _)| *cmd == p.cmd);
                found.map_or(Behaviour::Busy, |&(_, b)| b)
            })
            .collect();
        let config = Config {
            seed: s.header.seed,
            stop_at: Some(s.header.until),
            ..Config::default()
        };
        let actions = drive(&schedule, config, &behaviours);
        Ok(Observation::from_events(
            &run_events(&schedule, &actions),
            s.header.until,
        ))
    }
}
