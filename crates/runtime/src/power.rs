//! A power policy in a run: the pure [`Governor`] (crate `bulkhead-power`) fed the window
//! machine's actions, its changes written to CPUFreq ([`crate::cpufreq`]) and logged as
//! `cpu_frequency` events (schedule log and trace). See docs/power.md.

use crate::cpufreq::{self, Cpufreq};
use crate::{leftovers, RunError, Unrunnable};
use bulkhead_power::{Change, Governor, Policy};
use bulkhead_trace::Event;
use bulkhead_windows::{Action, Schedule};
use std::path::{Path, PathBuf};

/// The power policy of a run (`--power-policy`, `--cpufreq-root`).
#[derive(Debug, Clone)]
pub struct PowerOptions {
    pub policy: Policy,
    /// The directory standing for `/sys` (a tree imitating CPUFreq in tests).
    pub cpufreq_root: PathBuf,
}

/// The policy in force and the CPUFreq it controls (restored on drop).
pub(crate) struct Power {
    governor: Governor,
    cpufreq: Cpufreq,
    /// Changes made before the schedule started, logged with the first action.
    pending: Vec<Change>,
}

/// Restores the CPUFreq settings of supervisors that died (SIGKILL).
pub(crate) fn clean_leftovers() -> Vec<String> {
    cpufreq::restore_stale(Path::new(cpufreq::RECORD_DIR))
}

impl Power {
    /// Takes control of CPUFreq and applies the policy's initial frequencies; `None` for
    /// the `none` policy, which leaves CPUFreq alone.
    pub(crate) fn start(
        options: &PowerOptions,
        schedule: &Schedule,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Power>, RunError> {
        if options.policy == Policy::None {
            return Ok(None);
        }
        let cpufreq = Cpufreq::take(
            &options.cpufreq_root,
            Path::new(cpufreq::RECORD_DIR),
            &leftovers::instance_name(),
        )
        .map_err(|e| RunError::Invalid(Unrunnable::Cpufreq(e)))?;
        let governor = Governor::new(options.policy.clone(), cpufreq.clusters(), schedule)
            .map_err(|e| RunError::Invalid(Unrunnable::Power(e)))?;
        warnings.extend(governor.unused_frequencies(schedule));
        let mut power = Power {
            governor,
            cpufreq,
            pending: Vec::new(),
        };
        let mut changes = Vec::new();
        power
            .governor
            .start(&mut changes)
            .map_err(|e| RunError::Invalid(Unrunnable::Power(e)))?;
        power.apply(&changes)?;
        power.pending = changes;
        Ok(Some(power))
    }

    /// Carries out what `action` asks of the policy; returns the events to log.
    pub(crate) fn on_action(
        &mut self,
        schedule: &Schedule,
        action: &Action,
    ) -> Result<Vec<Event>, RunError> {
        let mut changes = std::mem::take(&mut self.pending);
        let done = changes.len();
        self.governor
            .on_action(schedule, action, &mut changes)
            .map_err(|e| RunError::Invalid(Unrunnable::Power(e)))?;
        self.apply(&changes[done..])?;
        Ok(changes
            .iter()
            .flat_map(|c| self.governor.events(c))
            .collect())
    }

    fn apply(&self, changes: &[Change]) -> Result<(), RunError> {
        for c in changes {
            self.cpufreq.set(c.cluster, c.khz)?;
        }
        Ok(())
    }
}
