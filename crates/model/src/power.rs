//! The `power:` section: each CPU cluster's operating points (frequency and the power a
//! fully busy CPU of the cluster draws at it) and idle power, for energy in simulation
//! and frequency-aware analysis (docs/power.md; DEmOS thesis 2.6: P-states trade
//! capacity for power).
//!
//! ```yaml
//! power:
//!   clusters:
//!     - name: a53                 # optional: cluster<i>
//!       cpus: 0-3
//!       idle_power: 0.05          # W per idle CPU, optional (0)
//!       operating_points:         # ascending frequency, MHz; power in W per busy CPU
//!         - {frequency: 600, power: 0.2}
//!         - {frequency: 1200, power: 0.6}
//! ```

use crate::cpuset::CpuSet;
use crate::path_error::{err, Result};
use serde::Deserialize;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawPower {
    pub clusters: Vec<RawCluster>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    pub name: Option<String>,
    pub cpus: String,
    pub idle_power: Option<f64>,
    pub operating_points: Vec<RawPoint>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawPoint {
    pub frequency: f64,
    pub power: f64,
}

/// The power model of the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Power {
    pub clusters: Vec<PowerCluster>,
}

/// CPUs sharing one frequency, with their operating points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerCluster {
    pub name: String,
    pub cpus: CpuSet,
    /// Power of one idle CPU, µW.
    pub idle_microwatts: u64,
    /// Ascending by frequency; at least one.
    pub points: Vec<OperatingPoint>,
}

/// A frequency and the power one fully busy CPU draws at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperatingPoint {
    pub khz: u64,
    /// µW.
    pub microwatts: u64,
}

impl PowerCluster {
    /// Whether `khz` is one of its operating points.
    pub fn offers(&self, khz: u64) -> bool {
        self.points.iter().any(|p| p.khz == khz)
    }
}

impl Power {
    /// The clusters whose CPUs meet `cpus` (all of them for `None`: `cpu: all`).
    pub fn clusters_of<'a>(
        &'a self,
        cpus: Option<&'a CpuSet>,
    ) -> impl Iterator<Item = &'a PowerCluster> {
        self.clusters
            .iter()
            .filter(move |c| cpus.is_none_or(|s| s.intersects(&c.cpus)))
    }
}

/// Normalizes the section; errors name the key path.
pub fn normalize(raw: Option<RawPower>) -> Result<Option<Power>> {
    let Some(raw) = raw else { return Ok(None) };
    if raw.clusters.is_empty() {
        return err("power.clusters", "must list at least one cluster");
    }
    let mut clusters: Vec<PowerCluster> = Vec::new();
    for (i, c) in raw.clusters.into_iter().enumerate() {
        let path = format!("power.clusters[{i}]");
        let cpus = CpuSet::parse(&c.cpus).or_else(|e| err(format!("{path}.cpus"), e))?;
        if let Some(other) = clusters.iter().find(|o| o.cpus.intersects(&cpus)) {
            return err(
                format!("{path}.cpus"),
                format!("overlaps the CPUs of cluster `{}`", other.name),
            );
        }
        let idle = watts(
            c.idle_power.unwrap_or(0.0),
            &format!("{path}.idle_power"),
            true,
        )?;
        if c.operating_points.is_empty() {
            return err(format!("{path}.operating_points"), "must list at least one");
        }
        let mut points: Vec<OperatingPoint> = Vec::new();
        for (j, p) in c.operating_points.iter().enumerate() {
            let ppath = format!("{path}.operating_points[{j}]");
            let khz = (p.frequency * 1000.0).round();
            if !p.frequency.is_finite() || !(1.0..=1e9).contains(&khz) {
                return err(
                    format!("{ppath}.frequency"),
                    "must be a positive frequency in MHz",
                );
            }
            let khz = khz as u64;
            if let Some(prev) = points.last().filter(|prev| prev.khz >= khz) {
                return err(
                    format!("{ppath}.frequency"),
                    format!(
                        "operating points must be in ascending frequency order: {} MHz follows {} MHz",
                        mhz(khz),
                        mhz(prev.khz)
                    ),
                );
            }
            let microwatts = watts(p.power, &format!("{ppath}.power"), false)?;
            points.push(OperatingPoint { khz, microwatts });
        }
        clusters.push(PowerCluster {
            name: c.name.unwrap_or_else(|| format!("cluster{i}")),
            cpus,
            idle_microwatts: idle,
            points,
        });
    }
    Ok(Some(Power { clusters }))
}

/// Watts in µW: positive (or zero where `zero_ok`), finite, at most 1 MW.
fn watts(w: f64, path: &str, zero_ok: bool) -> Result<u64> {
    let uw = (w * 1e6).round();
    let low = if zero_ok { 0.0 } else { 1.0 };
    if !w.is_finite() || !(low..=1e12).contains(&uw) {
        let what = if zero_ok { "non-negative" } else { "positive" };
        return err(path, format!("must be a {what} power in W"));
    }
    Ok(uw as u64)
}

/// A frequency in kHz as MHz, decimals only when needed (`345.6`).
pub fn mhz(khz: u64) -> String {
    decimal(khz, 1000)
}

/// `value / unit` as a decimal, digits after the point only when needed.
pub(crate) fn decimal(value: u64, unit: u64) -> String {
    let digits = unit.ilog10() as usize;
    match value % unit {
        0 => (value / unit).to_string(),
        rest => format!("{}.{:0digits$}", value / unit, rest)
            .trim_end_matches('0')
            .to_string(),
    }
}

/// The canonical lines of the section (under `power:`).
pub fn canonical_lines(power: &Power, quote: impl Fn(&str) -> String) -> Vec<String> {
    let mut lines = vec!["clusters:".to_string()];
    for c in &power.clusters {
        lines.push(format!("  - name: {}", quote(&c.name)));
        lines.push(format!("    cpus: {}", quote(&c.cpus.to_string())));
        lines.push(format!(
            "    idle_power: {}",
            decimal(c.idle_microwatts, 1_000_000)
        ));
        lines.push("    operating_points:".into());
        for p in &c.points {
            lines.push(format!(
                "      - {{frequency: {}, power: {}}}",
                mhz(p.khz),
                decimal(p.microwatts, 1_000_000)
            ));
        }
    }
    lines
}
