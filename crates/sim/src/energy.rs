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

use crate::error::SimError;
use bulkhead_model::power::PowerCluster;
use bulkhead_model::CpuSet;
use bulkhead_model::Nanos;
use bulkhead_power::{Change, Cluster, Governor, Policy};
use bulkhead_trace::EventKind;
use bulkhead_windows::{Action, Schedule};
use serde::Serialize;

/// A power policy on a power model, to simulate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerSpec {
    pub policy: Policy,
    pub clusters: Vec<PowerCluster>,
    /// Per rt task (index into [`crate::Spec::tasks`]): how its execution scales with
    /// frequency; `None` (or a shorter list) for a task outside every cluster.
    pub tasks: Vec<Option<TaskScaling>>,
}

/// How an rt task's execution time depends on its clusters' frequencies (docs/power.md):
/// at frequency `f` a cluster's WCET is `C x (m + (1 - m) x f_wcet / f)`; a job on CPUs
/// of several clusters takes the longest of their times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskScaling {
    /// The memory-bound fraction `m`, in millionths.
    pub memory_bound_ppm: u32,
    /// Per cluster its CPUs meet: the cluster's index and `f_wcet` (kHz) there.
    pub clusters: Vec<(usize, u64)>,
}

const PPM: u128 = 1_000_000;

impl TaskScaling {
    /// `C(f) / C` on cluster `(c, f_wcet)` at `khz`, as a fraction (times 10^6).
    fn factor(&self, f_wcet: u64, khz: u64) -> (u128, u128) {
        let m = self.memory_bound_ppm as u128;
        (m * khz as u128 + (PPM - m) * f_wcet as u128, khz as u128)
    }

    /// The largest factor over the task's clusters, each at `khz(cluster)`.
    fn slowest(&self, khz: impl Fn(usize) -> u64) -> (u128, u128) {
        self.clusters
            .iter()
            .map(|&(c, f_wcet)| self.factor(f_wcet, khz(c)))
            .max_by(|a, b| (a.0 * b.1).cmp(&(b.0 * a.1)))
            .unwrap_or((1, 1))
    }
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
    tasks: Vec<Option<TaskScaling>>,
}

impl Power {
    pub fn new(spec: &PowerSpec, schedule: &Schedule) -> Result<Power, SimError> {
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
        let mut governor =
            Governor::new(spec.policy.clone(), clusters, schedule).map_err(SimError::Power)?;
        let mut changes = Vec::new();
        governor.start(&mut changes).map_err(SimError::Power)?;
        let per_cpu = |c: &PowerCluster| vec![0u128; c.cpus.len()];
        let mut power = Power {
            governor,
            khz: spec.clusters.iter().map(top).collect(),
            energy: spec.clusters.iter().map(per_cpu).collect(),
            cycles: spec.clusters.iter().map(per_cpu).collect(),
            clusters: spec.clusters.clone(),
            error: None,
            changes,
            tasks: spec.tasks.clone(),
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
                self.error = Some(e.to_string());
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

    /// How fast `task`'s job progresses now, as a fraction `(num, den)` of its speed
    /// with every cluster at its top frequency (the simulation's execution times are
    /// taken there): `C(top) / C(now)`.
    pub fn task_speed(&self, task: usize) -> (u64, u64) {
        let Some(Some(scaling)) = self.tasks.get(task) else {
            return (1, 1);
        };
        let (tn, td) = scaling.slowest(|c| top(&self.clusters[c]));
        let (nn, nd) = scaling.slowest(|c| self.khz[c]);
        reduce(tn * nd, td * nn)
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

/// `num / den` in lowest terms, approximated to fit in `u64` if it does not.
fn reduce(num: u128, den: u128) -> (u64, u64) {
    let g = gcd(num, den).max(1);
    let (mut num, mut den) = (num / g, den / g);
    while num > u64::MAX as u128 || den > u64::MAX as u128 {
        num = (num >> 1).max(1);
        den = (den >> 1).max(1);
    }
    (num as u64, den as u64)
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn top(c: &PowerCluster) -> u64 {
    c.points.last().expect("a cluster has operating points").khz
}
