//! Frequency-aware analysis and the lowest static frequency per CPU cluster
//! (`bulkhead analyze --min-energy`; docs/power.md).
//!
//! A task's WCET is taken as measured at its `wcet_frequency` (the cluster's top
//! frequency `f_max` when not given); at frequency `f` its budget becomes
//! [`bulkhead_model::Task::wcet_at`]: `ceil(C x (m + (1 - m) x f_wcet / f))` with `m` its
//! `memory_bound` fraction, the usual approximation that the CPU-bound part's execution
//! time is inversely proportional to the clock (DEmOS thesis 2.6: the higher the
//! frequency, the more instructions per unit of time) and the memory-bound part's is
//! not. For each
//! cluster in turn (earlier clusters at their chosen frequency, later ones at the top),
//! the operating points are tried from the lowest up; the first at which the whole
//! system's analysis ([`analyze_system_with`]) passes is chosen. The energy per
//! hyperperiod of the rt tasks is then compared with every cluster at its top frequency:
//! a CPU is busy for the scaled demand of the tasks of its partitions (a partition's
//! demand spread evenly over its CPUs) at its operating point's power, idle otherwise.

use crate::system::{analyze_system_with, Options};
use bulkhead_model::power::PowerCluster;
use bulkhead_model::{Cpus, PartitionKind, System};
use serde::Serialize;

/// The choice for one cluster.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClusterChoice {
    pub cluster: String,
    pub cpus: String,
    /// The lowest frequency at which every verdict passes; `null` when none does (not
    /// even the top one).
    pub frequency_hz: Option<u64>,
    pub max_frequency_hz: u64,
}

/// What `--min-energy` found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MinEnergy {
    pub clusters: Vec<ClusterChoice>,
    pub hyperperiod_ns: u64,
    /// Energy of one hyperperiod at the chosen frequencies and at the top ones.
    pub joules: f64,
    pub joules_at_max: f64,
    pub saved_joules: f64,
}

/// The description has no `power:` section, which [`min_energy`] needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--min-energy needs the description's `power:` section")]
pub struct NoPowerSection;

/// Finds the lowest static frequency per cluster; needs the `power:` section.
pub fn min_energy(system: &System, options: &Options) -> Result<MinEnergy, NoPowerSection> {
    let power = system.power.as_ref().ok_or(NoPowerSection)?;
    let clusters = &power.clusters;
    let mut chosen: Vec<u64> = clusters.iter().map(top).collect();
    let mut found = vec![true; clusters.len()];
    // Each trial needs the verdict, not C max.
    let verdicts = Options {
        sensitivity: false,
        ..*options
    };
    for c in 0..clusters.len() {
        let passing = clusters[c].points.iter().map(|p| p.khz).find(|&khz| {
            let mut trial = chosen.clone();
            trial[c] = khz;
            analyze_system_with(&scaled(system, clusters, &trial), &verdicts).schedulable
        });
        match passing {
            Some(khz) => chosen[c] = khz,
            None => found[c] = false,
        }
    }
    let hyperperiod = hyperperiod(system);
    let joules = energy(system, clusters, &chosen, hyperperiod);
    let tops: Vec<u64> = clusters.iter().map(top).collect();
    let joules_at_max = energy(system, clusters, &tops, hyperperiod);
    Ok(MinEnergy {
        clusters: clusters
            .iter()
            .zip(&chosen)
            .zip(&found)
            .map(|((c, &khz), &ok)| ClusterChoice {
                cluster: c.name.clone(),
                cpus: c.cpus.to_string(),
                frequency_hz: ok.then_some(khz * 1000),
                max_frequency_hz: top(c) * 1000,
            })
            .collect(),
        hyperperiod_ns: hyperperiod,
        joules,
        joules_at_max,
        saved_joules: joules_at_max - joules,
    })
}

fn top(c: &PowerCluster) -> u64 {
    c.points.last().expect("a cluster has operating points").khz
}

/// `system` with every rt task's budget scaled to the frequencies `khz`; a partition
/// meeting several clusters takes the largest budget (its slowest CPUs).
fn scaled(system: &System, clusters: &[PowerCluster], khz: &[u64]) -> System {
    let mut out = system.clone();
    for p in out
        .partitions
        .iter_mut()
        .filter(|p| p.kind == PartitionKind::Rt)
    {
        let cpus = p.cpus.clone().unwrap_or(Cpus::All);
        let met: Vec<(u64, u64)> = clusters
            .iter()
            .zip(khz)
            .filter(|(c, _)| match &cpus {
                Cpus::All => true,
                Cpus::Set(set) => set.intersects(&c.cpus),
            })
            .map(|(c, &f)| (top(c), f))
            .collect();
        for t in &mut p.tasks {
            if let Some(budget) = met.iter().map(|&(top, f)| t.wcet_at(top, f)).max() {
                t.budget = budget;
            }
        }
    }
    out
}

/// The least common multiple of the rt task periods (1 s if there are none or it
/// overflows).
fn hyperperiod(system: &System) -> u64 {
    let mut periods = system
        .partitions
        .iter()
        .flat_map(|p| &p.tasks)
        .map(|t| t.period);
    periods
        .try_fold(1u64, |h, p| {
            let g = gcd(h, p);
            (h / g).checked_mul(p)
        })
        .filter(|&h| h > 1)
        .unwrap_or(1_000_000_000)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Joules of one hyperperiod at frequencies `khz`.
fn energy(system: &System, clusters: &[PowerCluster], khz: &[u64], h: u64) -> f64 {
    let scaled = scaled(system, clusters, khz);
    let mut total = 0.0;
    for (c, cluster) in clusters.iter().enumerate() {
        let point = cluster
            .points
            .iter()
            .find(|p| p.khz == khz[c])
            .expect("an operating point");
        for cpu in cluster.cpus.iter() {
            let busy = busy_ns(&scaled, cpu, h).min(h as f64);
            total += busy * point.microwatts as f64 * 1e-15
                + (h as f64 - busy) * cluster.idle_microwatts as f64 * 1e-15;
        }
    }
    total
}

/// Demand of the rt tasks on `cpu` in `h` ns, each partition's spread over its CPUs.
fn busy_ns(system: &System, cpu: u32, h: u64) -> f64 {
    let mut busy = 0.0;
    for p in system
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Rt)
    {
        let share = match &p.cpus {
            Some(Cpus::Set(set)) if set.contains(cpu) => set.len() as f64,
            _ => continue,
        };
        for t in &p.tasks {
            busy += (h / t.period) as f64 * t.budget as f64 / share;
        }
    }
    busy
}
