//! The `platform:` section: the floor of the machine the system runs on, as an input to
//! the design (docs/platform.md). A stall is a stretch of time in which a CPU runs none
//! of the system's tasks: a hypervisor descheduling a vCPU, a system management
//! interrupt, firmware. `bulkhead probe` measures it (`--write-platform` writes this
//! section); `analyze` adds it to every rt task and `solve` sizes pipelines for it.
//!
//! ```yaml
//! platform:
//!   stall: 5ms                  # the longest stall of any CPU to tolerate
//!   cpus:                       # optional: CPUs whose stall differs from `stall`
//!     - {cpu: 0, stall: 8ms}
//! ```

use crate::path_error::{err, Result};
use crate::units::Nanos;
use crate::units::{format_duration, parse_duration};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawPlatform {
    pub stall: String,
    pub cpus: Option<Vec<RawCpuStall>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawCpuStall {
    pub cpu: u32,
    pub stall: String,
}

/// The longest stall the system tolerates, per CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    /// The stall of every CPU not in `per_cpu`.
    pub stall: Nanos,
    /// CPUs with a stall of their own.
    pub per_cpu: BTreeMap<u32, Nanos>,
}

impl Platform {
    /// The stall of `cpu`.
    pub fn stall_of(&self, cpu: u32) -> Nanos {
        self.per_cpu.get(&cpu).copied().unwrap_or(self.stall)
    }

    /// The longest stall of any of `cpus` (`None`: any CPU of the machine).
    pub fn stall_of_any(&self, cpus: Option<&crate::CpuSet>) -> Nanos {
        match cpus {
            Some(set) => set.iter().map(|c| self.stall_of(c)).max().unwrap_or(0),
            None => self.per_cpu.values().copied().fold(self.stall, Nanos::max),
        }
    }
}

/// Normalizes the section; errors name the key path.
pub fn normalize(raw: Option<RawPlatform>) -> Result<Option<Platform>> {
    let Some(raw) = raw else { return Ok(None) };
    let stall = duration(&raw.stall, "platform.stall")?;
    let mut per_cpu = BTreeMap::new();
    for (i, c) in raw.cpus.unwrap_or_default().into_iter().enumerate() {
        let path = format!("platform.cpus[{i}]");
        let d = duration(&c.stall, &format!("{path}.stall"))?;
        if per_cpu.insert(c.cpu, d).is_some() {
            return err(
                format!("{path}.cpu"),
                format!("CPU {} is listed twice", c.cpu),
            );
        }
    }
    Ok(Some(Platform { stall, per_cpu }))
}

/// A duration with a unit (`5ms`); zero is allowed (an ideal CPU).
fn duration(text: &str, path: &str) -> Result<Nanos> {
    parse_duration(text, None).or_else(|e| err(path, e))
}

/// The canonical lines of the section (under `platform:`).
pub fn canonical_lines(p: &Platform) -> Vec<String> {
    let mut lines = vec![format!("stall: {}", format_duration(p.stall))];
    if !p.per_cpu.is_empty() {
        lines.push("cpus:".into());
        for (cpu, d) in &p.per_cpu {
            lines.push(format!(
                "  - {{cpu: {cpu}, stall: {}}}",
                format_duration(*d)
            ));
        }
    }
    lines
}
