//! Stalls of the platform (docs/platform.md): a CPU taken away for a while, as a host
//! descheduling a vCPU or a system management interrupt does. While a CPU is stalled
//! nothing runs on it: its job stops where it is (and uses no budget) and goes on when
//! the stall ends; a multi-CPU domain goes on with its other CPUs. `--inject-stall` and
//! `--stalls` of `bulkhead sim` give them, so that a description's tolerance of its
//! `platform:` stall is checked deterministically.

use super::{Ev, Sim};
use bulkhead_model::Nanos;
use rand::{RngExt, SeedableRng};
use rand_xorshift::XorShiftRng;

/// CPU `cpu` runs nothing from `at` for `duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    pub cpu: u32,
    pub at: Nanos,
    pub duration: Nanos,
}

/// Random stalls of each of `cpus` before `until`: a Poisson process of `per_s` stalls
/// a second per CPU (exponential gaps, the next counted from the end of the last), each
/// lasting uniformly 1 ns to `max`; the same `seed` gives the same stalls.
pub fn random_stalls(cpus: &[u32], seed: u64, per_s: f64, max: Nanos, until: Nanos) -> Vec<Stall> {
    let mut rng = XorShiftRng::seed_from_u64(seed);
    let mut out = Vec::new();
    if per_s <= 0.0 || max == 0 {
        return out;
    }
    let mean_gap = 1e9 / per_s;
    for &cpu in cpus {
        let mut t: Nanos = 0;
        loop {
            let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
            let gap = (-u.ln() * mean_gap).min(until as f64) as Nanos;
            let at = t.saturating_add(gap);
            if at >= until {
                break;
            }
            let duration = rng.random_range(1..=max);
            out.push(Stall { cpu, at, duration });
            t = at + duration;
        }
    }
    out.sort_by_key(|s| (s.at, s.cpu));
    out
}

impl Sim<'_> {
    /// Queues the start and end of every stall.
    pub(super) fn init_stalls(&mut self) {
        for (i, s) in self.opts.stalls.iter().enumerate() {
            self.heap.push(s.at, Ev::Stall(i as u32), 0);
            self.heap
                .push(s.at.saturating_add(s.duration), Ev::Stall(i as u32), 1);
        }
    }

    /// A job of `domain` released at `t`: each of the domain's idle CPUs on which
    /// background be work ran since before `t` and declares a non-preemptible section
    /// (`crate::background::section`) runs nothing for that section's length, as if
    /// the be work had just entered it. A CPU already busy or stalled is left alone, so
    /// a busy period is blocked at most once.
    pub(super) fn block_by_background(&mut self, domain: usize, t: Nanos) {
        for k in 0..self.domains[domain].slots.len() {
            let slot = &self.domains[domain].slots[k];
            if slot.running.is_some() || slot.stalled > 0 || slot.idle_from >= t {
                continue;
            }
            let cpu = slot.cpu;
            let Some(duration) = crate::background::section(&self.spec.background, cpu) else {
                continue;
            };
            let i = self.opts.stalls.len();
            self.opts.stalls.push(Stall {
                cpu,
                at: t,
                duration,
            });
            self.stall(i, false, t);
            self.heap
                .push(t.saturating_add(duration), Ev::Stall(i as u32), 1);
        }
    }

    /// Stall `i` starts (`end` false) or ends at `t`: the CPU's slot stops or resumes.
    pub(super) fn stall(&mut self, i: usize, end: bool, t: Nanos) {
        let cpu = self.opts.stalls[i].cpu;
        for d in 0..self.domains.len() {
            let Some(k) = self.domains[d].slots.iter().position(|s| s.cpu == cpu) else {
                continue;
            };
            self.touch(d, t);
            let slot = &mut self.domains[d].slots[k];
            match end {
                false => slot.stalled += 1,
                true => slot.stalled = slot.stalled.saturating_sub(1),
            }
        }
    }
}
