//! Frequencies and energy of a simulated window schedule: the power policy's
//! [`Governor`] (the one `bulkhead run` drives) fed the window machine's actions, each
//! CPU's energy integrated over time from the description's operating points, and the
//! speed at which a process's work progresses at its CPUs' frequency.
//!
//! Model (docs/power.md): a busy CPU draws its cluster's operating-point power at the
//! current frequency, an idle one the cluster's idle power; work takes `f_max / f` times
//! as long at frequency `f` as at the top frequency (the usual approximation: a
//! CPU-bound process's speed is proportional to the clock). Clusters start at their top
//! frequency (also under `none`, which leaves the frequency to the kernel).

use crate::spec::Nanos;
use bulkhead_model::power::PowerCluster;
use bulkhead_model::CpuSet;
use bulkhead_power::{Change, Cluster, Governor, Policy};
use bulkhead_trace::EventKind;
use bulkhead_windows::{Action, Schedule};
use serde::Serialize;

/// A power policy on a power model, to simulate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerSpec {
    pub policy: Policy,
    pub clusters: Vec<PowerCluster>,
}

/// Energy per CPU over the simulation (`--stats-json`: `energy`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct EnergyStats {
    pub cpus: Vec<CpuEnergy>,
    pub total_joules: f64,
    /// Why the policy stopped changing frequencies (processes running at the same time on
    /// one cluster asked for different ones); `null` when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_error: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CpuEnergy {
    pub cpu: u32,
    pub joules: f64,
    pub mean_frequency_hz: f64,
}

/// The governor, the frequency of each cluster, and the integrals.
pub(crate) struct Power {
    governor: Governor,
    clusters: Vec<PowerCluster>,
    khz: Vec<u64>,
    /// Per cluster and CPU (in `cpus` order): µW·ns and kHz·ns so far.
    energy: Vec<Vec<u128>>,
    cycles: Vec<Vec<u128>>,
    error: Option<String>,
    changes: Vec<Change>,
}

impl Power {
    pub fn new(spec: &PowerSpec, schedule: &Schedule) -> Result<Power, String> {
        let clusters: Vec<Cluster> = spec
            .clusters
            .iter()
            .map(|c| {
                let list: Vec<u64> = c.points.iter().map(|p| p.khz).collect();
                Cluster {
                    name: c.name.clone(),
                    cpus: c.cpus.clone(),
                    min_khz: list[0],
                    max_khz: *list.last().expect("a cluster has operating points"),
                    available_khz: Some(list),
                }
            })
            .collect();
        let mut governor = Governor::new(spec.policy.clone(), clusters, schedule)
            .map_err(|e| format!("power policy: {e}"))?;
        let mut changes = Vec::new();
        governor
            .start(&mut changes)
            .map_err(|e| format!("power policy: {e}"))?;
        let per_cpu = |c: &PowerCluster| vec![0u128; c.cpus.len()];
        let mut power = Power {
            governor,
            khz: spec.clusters.iter().map(top).collect(),
            energy: spec.clusters.iter().map(per_cpu).collect(),
            cycles: spec.clusters.iter().map(per_cpu).collect(),
            clusters: spec.clusters.clone(),
            error: None,
            changes,
        };
        // The settings made before the start are logged with the first action.
        for c in &power.changes {
            power.khz[c.cluster] = c.khz;
        }
        Ok(power)
    }

    /// Feeds `action` to the policy; returns the `cpu_frequency` events of its changes.
    pub fn on_action(&mut self, schedule: &Schedule, action: &Action) -> Vec<(Nanos, EventKind)> {
        if self.error.is_none() {
            if let Err(e) = self.governor.on_action(schedule, action, &mut self.changes) {
                self.error = Some(e);
            }
        }
        let events = self
            .changes
            .iter()
            .flat_map(|c| self.governor.events(c))
            .map(|e| (e.t_ns, e.kind))
            .collect();
        self.apply_changes();
        events
    }

    fn apply_changes(&mut self) {
        for c in self.changes.drain(..) {
            self.khz[c.cluster] = c.khz;
        }
    }

    /// Accounts `dt` ns during which the CPUs in `busy` ran and the others idled.
    pub fn account(&mut self, dt: Nanos, busy: &[u32]) {
        for (c, cluster) in self.clusters.iter().enumerate() {
            let khz = self.khz[c];
            let point = cluster
                .points
                .iter()
                .find(|p| p.khz == khz)
                .expect("the governor sets operating points only");
            for (i, cpu) in cluster.cpus.iter().enumerate() {
                let watts = if busy.contains(&cpu) {
                    point.microwatts
                } else {
                    cluster.idle_microwatts
                };
                self.energy[c][i] += dt as u128 * watts as u128;
                self.cycles[c][i] += dt as u128 * khz as u128;
            }
        }
    }

    /// Speed of work on `cpus` as a fraction `(num, den)` of the top frequency: the
    /// slowest cluster the CPUs meet.
    pub fn speed(&self, cpus: &CpuSet) -> (u64, u64) {
        self.clusters
            .iter()
            .enumerate()
            .filter(|(_, c)| c.cpus.intersects(cpus))
            .map(|(i, c)| (self.khz[i], top(c)))
            .min_by(|a, b| (a.0 as u128 * b.1 as u128).cmp(&(b.0 as u128 * a.1 as u128)))
            .unwrap_or((1, 1))
    }

    pub fn stats(&self, duration: Nanos) -> EnergyStats {
        let mut cpus = Vec::new();
        for (c, cluster) in self.clusters.iter().enumerate() {
            for (i, cpu) in cluster.cpus.iter().enumerate() {
                cpus.push(CpuEnergy {
                    cpu,
                    joules: self.energy[c][i] as f64 * 1e-15,
                    mean_frequency_hz: if duration == 0 {
                        0.0
                    } else {
                        self.cycles[c][i] as f64 * 1e3 / duration as f64
                    },
                });
            }
        }
        cpus.sort_by_key(|c| c.cpu);
        EnergyStats {
            total_joules: cpus.iter().map(|c| c.joules).sum(),
            cpus,
            policy_error: self.error.clone(),
        }
    }
}

fn top(c: &PowerCluster) -> u64 {
    c.points.last().expect("a cluster has operating points").khz
}
