//! Processor supply: how much execution time a resource guarantees in any interval.
//!
//! Every test in this crate is written against a [`Supply`], so the same response-time
//! analysis and demand test serve a dedicated CPU, a periodic resource (Shin & Lee), a
//! server (periodic, sporadic, deferrable), a SCHED_DEADLINE reservation or a static
//! window schedule.

use crate::task::Time;
use serde::Serialize;

/// A supply bound function and its pseudo-inverse.
pub trait Supply {
    /// sbf(t): the least execution time supplied in any interval of length `t`.
    fn sbf(&self, t: Time) -> Time;
    /// The least `t` with `sbf(t) >= demand` (`Some(0)` for zero demand); `None` when the
    /// resource never supplies that much (zero rate) or the answer overflows.
    fn time_for(&self, demand: Time) -> Option<Time>;
    /// Long-run rate as a fraction `(numerator, denominator)`.
    fn rate(&self) -> (Time, Time);
    /// A delay `Δ` with `sbf(t) >= rate * (t - Δ)` for every `t` (a linear lower bound).
    fn linear_delay(&self) -> Time;
    /// True for a whole, dedicated processor (`sbf(t) = t`).
    fn is_dedicated(&self) -> bool {
        false
    }
}

/// A periodic supply pattern: after an initial `blackout`, `budget` units are supplied,
/// then none for `period - budget`, repeatedly. This is the worst-case supply of
///
/// * a dedicated processor: `blackout = 0`, `budget = period` ([`PeriodicSupply::dedicated`]);
/// * the periodic resource model Γ(Π, Θ) of Shin & Lee, "Periodic Resource Model for
///   Compositional Real-Time Guarantees", RTSS 2003, the supply bound function sbf_Γ:
///   `blackout = 2(Π - Θ)` ([`PeriodicSupply::prm`]);
/// * a periodic, sporadic or deferrable server (budget Q, period P) whose budget is
///   served with worst-case response time R: `blackout = P + R - 2Q` (Davis & Burns,
///   "Hierarchical Fixed Priority Pre-emptive Scheduling", RTSS 2005: the budget
///   is supplied as early as possible in one period and as late as possible in the next)
///   ([`PeriodicSupply::server`]); with R = P this is the PRM bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PeriodicSupply {
    pub period: Time,
    pub budget: Time,
    pub blackout: Time,
}

impl PeriodicSupply {
    /// A whole processor.
    pub fn dedicated() -> Self {
        PeriodicSupply {
            period: 1,
            budget: 1,
            blackout: 0,
        }
    }

    /// Shin & Lee's periodic resource Γ(Π = `period`, Θ = `budget`); precondition `budget <= period`.
    pub fn prm(period: Time, budget: Time) -> Self {
        PeriodicSupply {
            period,
            budget,
            blackout: (period - budget).saturating_mul(2),
        }
    }

    /// A server with `budget` per `period` whose budget completes within `response`
    /// of each replenishment; precondition `budget <= response <= period`.
    pub fn server(period: Time, budget: Time, response: Time) -> Self {
        PeriodicSupply {
            period,
            budget,
            blackout: period + response - 2 * budget,
        }
    }
}

impl Supply for PeriodicSupply {
    fn sbf(&self, t: Time) -> Time {
        if t <= self.blackout || self.budget == 0 {
            return 0;
        }
        let x = t - self.blackout;
        (x / self.period) * self.budget + (x % self.period).min(self.budget)
    }

    fn time_for(&self, demand: Time) -> Option<Time> {
        if self.is_dedicated() || demand == 0 {
            return Some(demand);
        }
        if self.budget == 0 {
            return None;
        }
        let k = (demand - 1) / self.budget;
        let r = demand - k * self.budget;
        self.blackout
            .checked_add(k.checked_mul(self.period)?)?
            .checked_add(r)
    }

    fn rate(&self) -> (Time, Time) {
        (self.budget, self.period)
    }

    fn linear_delay(&self) -> Time {
        self.blackout
    }

    fn is_dedicated(&self) -> bool {
        self.budget == self.period && self.blackout == 0
    }
}

/// The linear lower bound of a periodic supply, `lsbf(t) = (Θ/Π)(t - Δ)`; for the PRM,
/// Shin & Lee RTSS 2003, the linear bound lsbf_Γ: `lsbf(t) = (Θ/Π)(t - 2(Π - Θ))`. Evaluated
/// exactly on integers (`floor`, which is exact against integral demands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LinearSupply(pub PeriodicSupply);

impl Supply for LinearSupply {
    fn sbf(&self, t: Time) -> Time {
        let p = self.0;
        let x = t.saturating_sub(p.blackout) as u128;
        (x * p.budget as u128 / p.period as u128) as Time
    }

    fn time_for(&self, demand: Time) -> Option<Time> {
        let p = self.0;
        if demand == 0 {
            return Some(0);
        }
        if p.budget == 0 {
            return None;
        }
        let x = (demand as u128 * p.period as u128).div_ceil(p.budget as u128);
        Time::try_from(x).ok()?.checked_add(p.blackout)
    }

    fn rate(&self) -> (Time, Time) {
        self.0.rate()
    }

    fn linear_delay(&self) -> Time {
        self.0.blackout
    }
}

/// The supply a static cyclic window schedule gives one partition on one CPU: the
/// partition runs in the intervals `[start, start + len)` of every major frame.
/// sbf(t) is the minimum over all interval starts of the supply in `[a, a + t)`, which
/// is attained where a gap begins (the standard TDMA/ARINC 653 supply bound, e.g.
/// Easwaran, Lee, Shin, Sokolsky, "Compositional Analysis Framework Using EDP Resource
/// Models", RTSS 2007; Mok, Feng, Chen, "Resource Partition for Real-Time
/// Systems", RTAS 2001, the supply function of a static partition). The windows
/// come from the DEmOS schedule (thesis Sec. 3.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WindowSupply {
    frame: Time,
    /// Sorted, disjoint, non-empty `(start, len)` within `[0, frame)`; adjacent ones merged.
    intervals: Vec<(Time, Time)>,
    /// Supply accumulated before each interval within a frame.
    before: Vec<Time>,
    total: Time,
}

impl WindowSupply {
    /// Builds the supply from `(start, len)` intervals inside a frame of length `frame`.
    /// Intervals must lie within the frame and not overlap.
    pub fn new(frame: Time, mut intervals: Vec<(Time, Time)>) -> Self {
        intervals.retain(|&(_, len)| len > 0);
        intervals.sort_unstable();
        let mut merged: Vec<(Time, Time)> = Vec::new();
        for (s, l) in intervals {
            match merged.last_mut() {
                Some(last) if last.0 + last.1 == s => last.1 += l,
                _ => merged.push((s, l)),
            }
        }
        if merged.len() > 1 && merged[0].0 == 0 {
            let (ls, ll) = *merged.last().expect("len > 1");
            if ls + ll == frame {
                // The last interval runs into the first one of the next frame: rotate
                // the frame so that it starts at a gap (sbf is rotation-invariant).
                return Self::new(frame, shift(&merged, frame, frame - ls));
            }
        }
        let mut before = Vec::with_capacity(merged.len());
        let mut total = 0;
        for &(_, l) in &merged {
            before.push(total);
            total += l;
        }
        WindowSupply {
            frame,
            intervals: merged,
            before,
            total,
        }
    }

    /// Supplied time per major frame.
    pub fn per_frame(&self) -> Time {
        self.total
    }

    /// Cumulative supply F(x) in `[0, x)`.
    fn cumulative(&self, x: Time) -> Time {
        let (k, r) = (x / self.frame, x % self.frame);
        let j = self.intervals.partition_point(|&(s, _)| s < r);
        let within = if j == 0 {
            0
        } else {
            let (s, l) = self.intervals[j - 1];
            self.before[j - 1] + (r - s).min(l)
        };
        k.saturating_mul(self.total).saturating_add(within)
    }

    /// Least x with F(x) >= v (v >= 1).
    fn reach(&self, v: Time) -> Option<Time> {
        let k = (v - 1) / self.total;
        let rest = v - k * self.total;
        let j = self.before.partition_point(|&b| b < rest) - 1;
        let (s, _) = self.intervals[j];
        k.checked_mul(self.frame)?
            .checked_add(s + rest - self.before[j])
    }

    /// Starts of gaps: the worst-case interval starts.
    fn gap_starts(&self) -> impl Iterator<Item = Time> + '_ {
        self.intervals.iter().map(|&(s, l)| s + l)
    }
}

fn shift(intervals: &[(Time, Time)], frame: Time, by: Time) -> Vec<(Time, Time)> {
    let mut out = Vec::new();
    for &(s, l) in intervals {
        let s2 = (s + by) % frame;
        if s2 + l > frame {
            out.push((s2, frame - s2));
            out.push((0, s2 + l - frame));
        } else {
            out.push((s2, l));
        }
    }
    out
}

impl Supply for WindowSupply {
    fn sbf(&self, t: Time) -> Time {
        if self.total == 0 {
            return 0;
        }
        self.gap_starts()
            .map(|a| self.cumulative(a + t) - self.cumulative(a))
            .min()
            .unwrap_or(0)
    }

    fn time_for(&self, demand: Time) -> Option<Time> {
        if demand == 0 {
            return Some(0);
        }
        if self.total == 0 {
            return None;
        }
        let mut worst = 0;
        for a in self.gap_starts() {
            worst = worst.max(self.reach(self.cumulative(a).checked_add(demand)?)? - a);
        }
        Some(worst)
    }

    fn rate(&self) -> (Time, Time) {
        (self.total, self.frame)
    }

    /// `sbf(t) >= floor(t / frame) * total >= rate * (t - frame)`.
    fn linear_delay(&self) -> Time {
        self.frame
    }

    fn is_dedicated(&self) -> bool {
        self.total == self.frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prm_sbf_matches_shin_lee_shape() {
        // Γ(5, 2): blackout 2(5-2) = 6, then 2 units, then 3 idle, ...
        let p = PeriodicSupply::prm(5, 2);
        let sbf: Vec<Time> = (0..=14).map(|t| p.sbf(t)).collect();
        assert_eq!(sbf, vec![0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 3, 4, 4]);
        for d in 0..10 {
            let t = p.time_for(d).unwrap();
            assert!(p.sbf(t) >= d && (t == 0 || p.sbf(t - 1) < d), "d={d}");
        }
    }

    #[test]
    fn dedicated_is_identity() {
        let d = PeriodicSupply::dedicated();
        assert!(d.is_dedicated());
        assert_eq!(d.sbf(17), 17);
        assert_eq!(d.time_for(17), Some(17));
    }

    #[test]
    fn linear_bound_is_below_exact() {
        let p = PeriodicSupply::prm(7, 3);
        let l = LinearSupply(p);
        for t in 0..100 {
            assert!(l.sbf(t) <= p.sbf(t));
        }
        assert_eq!(l.time_for(3), Some(8 + 7));
    }

    #[test]
    fn window_supply_worst_offset() {
        // Frame 10, supply in [0,2) and [5,6): worst interval starts at 2 (gap of 3)
        // or at 6 (gap of 4).
        let w = WindowSupply::new(10, vec![(5, 1), (0, 2)]);
        assert_eq!(w.per_frame(), 3);
        assert_eq!(w.sbf(4), 0);
        assert_eq!(w.sbf(5), 1);
        assert_eq!(w.time_for(1), Some(5));
        assert_eq!(w.time_for(3), Some(10));
        for d in 1..12 {
            let t = w.time_for(d).unwrap();
            assert!(w.sbf(t) >= d && w.sbf(t - 1) < d, "d={d}");
        }
    }

    #[test]
    fn window_wrapping_the_frame_is_merged() {
        let w = WindowSupply::new(10, vec![(0, 2), (8, 2)]);
        assert_eq!(w.sbf(6), 0);
        assert_eq!(w.sbf(7), 1);
        assert_eq!(w.time_for(4), Some(10));
    }
}
