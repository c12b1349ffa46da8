//! DEmOS power policies as one pure machine, the [`Governor`], driven by the actions of
//! the window scheduler ([`bulkhead_windows::Machine`]) in `bulkhead run` and
//! `bulkhead sim` alike. It does no I/O: it turns scheduler actions into frequency
//! [`Change`]s per CPU cluster; the runtime writes them to CPUFreq, the simulator
//! accounts them.
//!
//! # Model (DEmOS thesis 2.6, 2.7)
//!
//! CPUs are grouped in clusters (CPUFreq policies, thesis 2.7) whose CPUs always share
//! one frequency; a cluster offers a few discrete frequencies (P-states, thesis 2.6),
//! or, with `intel_pstate` in passive mode, any frequency between its minimum and maximum
//! (thesis 2.7.1). Frequencies are in kHz, as CPUFreq counts them.
//!
//! # Policies (DEmOS thesis 3.6, 4.8; DEmOS `src/power_policy`)
//!
//! A policy observes the scheduler's events and sets frequencies: at the start
//! (DEmOS's policy constructors), at each window start (`on_window_start`,
//! `on_sc_start`), when the best-effort partitions start (`on_be_start`), and when a
//! process starts and stops (`on_process_start`, `on_process_end`). See [`Policy`].
//!
//! Differences from DEmOS (deliberate): a frequency is written only when it differs
//! from the one set last (a CPUFreq write costs on the order of 100 µs on the i.MX8,
//! thesis 4.8 and DEmOS `CpufreqPolicy::write_frequency`), so the schedule log lists
//! changes, not writes; the `imx8_*` policies address clusters by order instead of the
//! names `policy0` and `policy4`, so they work on any cluster layout.

mod error;
mod policy;

pub use error::{Offer, PolicyError, PowerError};
pub use policy::{Policy, NAMES};

use bulkhead_model::CpuSet;
use bulkhead_trace::{Event, EventKind, Nanos};
use bulkhead_windows::{Action, ProcessId, Schedule};

/// A group of CPUs sharing one frequency (a CPUFreq policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// Its name, e.g. `policy0`.
    pub name: String,
    /// Its CPUs (CPUFreq `affected_cpus`).
    pub cpus: CpuSet,
    /// Lowest and highest frequency, kHz (`cpuinfo_min_freq`, `cpuinfo_max_freq`).
    pub min_khz: u64,
    pub max_khz: u64,
    /// The frequencies it offers, ascending (`scaling_available_frequencies`); `None`
    /// when the driver lists none (`intel_pstate`): any value in `min..=max` is taken.
    pub available_khz: Option<Vec<u64>>,
}

impl Cluster {
    /// Whether the cluster can run at `khz` (DEmOS `CpufreqPolicy::validate_frequency`).
    pub fn offers(&self, khz: u64) -> bool {
        match &self.available_khz {
            Some(list) => list.contains(&khz),
            None => (self.min_khz..=self.max_khz).contains(&khz),
        }
    }

    /// The `index`-th lowest available frequency (DEmOS `CpufreqPolicy::get_freq`).
    pub fn frequency_at(&self, index: usize) -> Result<u64, PowerError> {
        let list = self
            .available_khz
            .as_ref()
            .ok_or_else(|| PowerError::NoFrequencyList {
                cluster: self.name.clone(),
            })?;
        list.get(index)
            .copied()
            .ok_or_else(|| PowerError::IndexOutOfRange {
                cluster: self.name.clone(),
                count: list.len(),
                offered: khz_list(list),
                index,
            })
    }

    /// What it offers, for an error about a frequency it does not.
    fn not_offering(&self) -> Box<error::Offer> {
        Box::new(error::Offer {
            cluster: self.name.clone(),
            cpus: self.cpus.to_string(),
            offer: self.describe_offer(),
        })
    }

    fn describe_offer(&self) -> String {
        match &self.available_khz {
            Some(list) => khz_list(list),
            None => format!("{}..{} kHz", self.min_khz, self.max_khz),
        }
    }
}

fn khz_list(list: &[u64]) -> String {
    let items: Vec<String> = list.iter().map(|f| f.to_string()).collect();
    format!("{} kHz", items.join(", "))
}

/// Cluster `cluster` runs at `khz` from schedule time `t` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub t: Nanos,
    pub cluster: usize,
    pub khz: u64,
}

/// The power policy in force: turns scheduler actions into frequency changes.
#[derive(Debug)]
pub struct Governor {
    policy: Policy,
    clusters: Vec<Cluster>,
    /// The frequency set last per cluster (`None`: not set by us yet).
    current: Vec<Option<u64>>,
    /// `alternating`: the first of each pair comes next.
    first_next: bool,
    /// `per_process`: per slice of the current window, the process running there.
    running: Vec<Option<ProcessId>>,
}

impl Governor {
    /// A governor for `policy` on `clusters`, after checking what DEmOS's `validate()`
    /// checks: every frequency the description asks for (that the policy uses) is one
    /// the clusters of its slice offer, and index arguments are in range.
    pub fn new(
        policy: Policy,
        clusters: Vec<Cluster>,
        schedule: &Schedule,
    ) -> Result<Governor, PowerError> {
        if policy != Policy::None && clusters.is_empty() {
            return Err(PowerError::NoCluster);
        }
        check_arguments(&policy, &clusters)?;
        if policy.uses_process_frequencies() {
            check_process_frequencies(&clusters, schedule)?;
        }
        if policy.uses_slice_frequencies() {
            check_slice_frequencies(&clusters, schedule)?;
        }
        let n = clusters.len();
        Ok(Governor {
            policy,
            clusters,
            current: vec![None; n],
            first_next: true,
            running: Vec::new(),
        })
    }

    pub fn clusters(&self) -> &[Cluster] {
        &self.clusters
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// A warning when the description asks for frequencies the policy ignores (DEmOS
    /// warns the same way).
    pub fn unused_frequencies(&self, schedule: &Schedule) -> Option<String> {
        let process = schedule.processes.iter().any(|p| p.frequency_khz.is_some());
        let slice = schedule
            .windows
            .iter()
            .flat_map(|w| &w.slices)
            .any(|s| s.frequency_khz.is_some());
        if process && !self.policy.uses_process_frequencies() {
            Some(
                "processes give a `frequency`, which only the per_process power policy uses".into(),
            )
        } else if slice && !self.policy.uses_slice_frequencies() {
            Some("slices give a `frequency`, which only the per_slice power policy uses".into())
        } else {
            None
        }
    }

    /// The settings before the schedule starts (DEmOS's policy constructors), at time 0.
    pub fn start(&mut self, out: &mut Vec<Change>) -> Result<(), PowerError> {
        match self.policy.clone() {
            Policy::High | Policy::MinBe => self.all(0, |c| c.max_khz, out),
            Policy::Low => self.all(0, |c| c.min_khz, out),
            Policy::Fixed(indices) => {
                for (cluster, &index) in indices.iter().enumerate() {
                    let khz = self.clusters[cluster].frequency_at(index)?;
                    self.set(0, cluster, khz, out);
                }
            }
            Policy::Alternating(pairs) => {
                for (cluster, &(a, b)) in pairs.iter().enumerate() {
                    if a == b {
                        let khz = self.clusters[cluster].frequency_at(a)?;
                        self.set(0, cluster, khz, out);
                    }
                }
            }
            Policy::None | Policy::PerProcess | Policy::PerSlice => {}
        }
        Ok(())
    }

    /// The changes `action` brings about. An error stops the run: processes running at
    /// the same time on one cluster ask for different frequencies (DEmOS fails the same way).
    pub fn on_action(
        &mut self,
        schedule: &Schedule,
        action: &Action,
        out: &mut Vec<Change>,
    ) -> Result<(), PowerError> {
        match action {
            Action::WindowStart { t, window } => self.window_start(schedule, *t, *window, out),
            Action::BeStart { t, .. } => {
                if self.policy == Policy::MinBe {
                    self.all(*t, |c| c.min_khz, out);
                }
                Ok(())
            }
            Action::Grant(g) => {
                if let Some(slot) = self.running.get_mut(g.slice) {
                    *slot = Some(g.process);
                }
                match (&self.policy, schedule.processes[g.process].frequency_khz) {
                    (Policy::PerProcess, Some(khz)) => {
                        self.process_start(schedule, g.t, g.window, g.slice, khz, out)
                    }
                    _ => Ok(()),
                }
            }
            Action::Freeze { process } => {
                for slot in &mut self.running {
                    if *slot == Some(*process) {
                        *slot = None;
                    }
                }
                Ok(())
            }
            Action::WindowEnd { .. } => {
                self.running.iter_mut().for_each(|s| *s = None);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn window_start(
        &mut self,
        schedule: &Schedule,
        t: Nanos,
        window: usize,
        out: &mut Vec<Change>,
    ) -> Result<(), PowerError> {
        self.running = vec![None; schedule.windows[window].slices.len()];
        match self.policy.clone() {
            Policy::MinBe => self.all(t, |c| c.max_khz, out),
            Policy::Alternating(pairs) => {
                for (cluster, &(a, b)) in pairs.iter().enumerate() {
                    if a != b {
                        let index = if self.first_next { a } else { b };
                        let khz = self.clusters[cluster].frequency_at(index)?;
                        self.set(t, cluster, khz, out);
                    }
                }
                self.first_next = !self.first_next;
            }
            Policy::PerSlice => {
                for cluster in 0..self.clusters.len() {
                    if let Some(khz) = self.slice_frequency(schedule, window, cluster)? {
                        self.set(t, cluster, khz, out);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// DEmOS `PowerPolicy_Imx8_PerSlice::on_window_start` for one cluster: the one
    /// frequency the window's slices on it ask for.
    fn slice_frequency(
        &self,
        schedule: &Schedule,
        window: usize,
        cluster: usize,
    ) -> Result<Option<u64>, PowerError> {
        let cpus = &self.clusters[cluster].cpus;
        let mut chosen = None;
        for slice in &schedule.windows[window].slices {
            let Some(khz) = slice.frequency_khz else {
                continue;
            };
            if !slice.cpus.intersects(cpus) {
                continue;
            }
            match chosen {
                Some(other) if other != khz => {
                    return Err(PowerError::SlicesDisagree {
                        window,
                        cpus: cpus.to_string(),
                        cluster: self.clusters[cluster].name.clone(),
                        first_khz: other,
                        second_khz: khz,
                    })
                }
                _ => chosen = Some(khz),
            }
        }
        Ok(chosen)
    }

    /// DEmOS `PowerPolicy_PerProcess::on_process_start`.
    fn process_start(
        &mut self,
        schedule: &Schedule,
        t: Nanos,
        window: usize,
        slice: usize,
        khz: u64,
        out: &mut Vec<Change>,
    ) -> Result<(), PowerError> {
        let slices = &schedule.windows[window].slices;
        let me = self.running[slice];
        for cluster in 0..self.clusters.len() {
            let cpus = &self.clusters[cluster].cpus;
            if !slices[slice].cpus.intersects(cpus) {
                continue;
            }
            for (other_slice, other) in self.running.iter().enumerate() {
                let Some(other) = *other else { continue };
                let asks = schedule.processes[other].frequency_khz;
                if Some(other) == me || !slices[other_slice].cpus.intersects(cpus) {
                    continue;
                }
                if let Some(other_khz) = asks.filter(|&f| f != khz) {
                    return Err(PowerError::ProcessesDisagree {
                        cpus: cpus.to_string(),
                        cluster: self.clusters[cluster].name.clone(),
                        other_khz,
                        other_cmd: schedule.processes[other].cmd.clone(),
                        khz,
                        cmd: schedule.processes[me.expect("granted")].cmd.clone(),
                    });
                }
            }
            self.set(t, cluster, khz, out);
        }
        Ok(())
    }

    fn all(&mut self, t: Nanos, pick: impl Fn(&Cluster) -> u64, out: &mut Vec<Change>) {
        for cluster in 0..self.clusters.len() {
            let khz = pick(&self.clusters[cluster]);
            self.set(t, cluster, khz, out);
        }
    }

    fn set(&mut self, t: Nanos, cluster: usize, khz: u64, out: &mut Vec<Change>) {
        if self.current[cluster] != Some(khz) {
            self.current[cluster] = Some(khz);
            out.push(Change { t, cluster, khz });
        }
    }

    /// The trace events of a change: `cpu_frequency` for each CPU of its cluster.
    pub fn events(&self, change: &Change) -> Vec<Event> {
        self.clusters[change.cluster]
            .cpus
            .iter()
            .map(|cpu| {
                Event::new(
                    change.t,
                    EventKind::CpuFrequency {
                        cpu,
                        khz: change.khz,
                    },
                )
            })
            .collect()
    }
}

fn check_arguments(policy: &Policy, clusters: &[Cluster]) -> Result<(), PowerError> {
    let indices: Vec<usize> = match policy {
        Policy::Fixed(i) => i.clone(),
        Policy::Alternating(pairs) => pairs.iter().flat_map(|&(a, b)| [a, b]).collect(),
        _ => return Ok(()),
    };
    let per_cluster = indices.len()
        / match policy {
            Policy::Alternating(_) => 2,
            _ => 1,
        };
    if per_cluster != clusters.len() {
        return Err(PowerError::ClusterCount {
            given: per_cluster,
            clusters: clusters.iter().map(|c| c.name.clone()).collect(),
        });
    }
    let step = indices.len() / clusters.len();
    for (i, &index) in indices.iter().enumerate() {
        clusters[i / step].frequency_at(index)?;
    }
    Ok(())
}

/// The clusters whose CPUs meet `cpus`.
fn clusters_of<'a>(clusters: &'a [Cluster], cpus: &'a CpuSet) -> impl Iterator<Item = &'a Cluster> {
    clusters.iter().filter(move |c| c.cpus.intersects(cpus))
}

fn check_process_frequencies(clusters: &[Cluster], schedule: &Schedule) -> Result<(), PowerError> {
    for slice in schedule.windows.iter().flat_map(|w| &w.slices) {
        for partition in [slice.sc, slice.be].into_iter().flatten() {
            for p in schedule.partitions[partition].processes.clone() {
                let process = &schedule.processes[p];
                let Some(khz) = process.frequency_khz else {
                    continue;
                };
                if let Some(c) = clusters_of(clusters, &slice.cpus).find(|c| !c.offers(khz)) {
                    return Err(PowerError::ProcessFrequency {
                        cmd: process.cmd.clone(),
                        partition: schedule.partitions[partition].name.clone(),
                        khz,
                        offer: c.not_offering(),
                    });
                }
            }
        }
    }
    Ok(())
}

fn check_slice_frequencies(clusters: &[Cluster], schedule: &Schedule) -> Result<(), PowerError> {
    for (w, window) in schedule.windows.iter().enumerate() {
        for (s, slice) in window.slices.iter().enumerate() {
            let Some(khz) = slice.frequency_khz else {
                continue;
            };
            if let Some(c) = clusters_of(clusters, &slice.cpus).find(|c| !c.offers(khz)) {
                return Err(PowerError::SliceFrequency {
                    slice: s,
                    window: w,
                    khz,
                    offer: c.not_offering(),
                });
            }
        }
    }
    Ok(())
}
