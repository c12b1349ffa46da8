//! Which signals of a message share bits while both can be present in one frame
//! (cantools' strict mode: "are overlapping"), without comparing every pair: a
//! message of 200,000 signals is checked in about a second.
//!
//! A signal's presence is a path of switches from the root (a switch that is always
//! present) to the switch it hangs on, each with the raw values it needs ([`paths`]).
//! A switch's own presence is unique, so two paths agree above their deepest common
//! switch, and two signals can be present together exactly when they have no common
//! switch or their values at the deepest common one meet. Signals are taken in order;
//! each looks, at each of its bits, for an earlier signal there that it can be present
//! with: one of another root (or always present), one that stops at a switch of its
//! path with values that meet its own there, or one that leaves its path there for
//! another switch whose values meet. Each signal is reported at most once, with the
//! first such signal found. Cost per signal: its bits (at most 64) times its depth (at
//! most [`MAX_DEPTH`]) times a logarithm, plus, for nested multiplexing only, the other
//! switches hanging on a switch of its path at a bit.

use crate::dbc_def::{MessageDef, Presence};
use std::collections::{BTreeMap, HashMap};

/// The deepest multiplexing accepted (real DBCs nest one or two levels); a deeper
/// signal, or one whose switches form a cycle, is an error of the DBC.
pub const MAX_DEPTH: usize = 16;

/// Largest payload of any CAN frame (CAN FD), in bits: signal bits beyond it are
/// beyond every message.
pub const MAX_BITS: usize = 64 * 8;

/// A signal's switches from the root down, each with the values the next step (or the
/// signal itself, at the last) needs.
pub type Path<'a> = Vec<(usize, &'a [(u64, u64)])>;

/// Each signal's path; None for one nested deeper than [`MAX_DEPTH`] or in a cycle.
pub fn paths(m: &MessageDef) -> Vec<Option<Path<'_>>> {
    (0..m.signals.len()).map(|i| path(m, i)).collect()
}

fn path(m: &MessageDef, mut i: usize) -> Option<Path<'_>> {
    let mut path = Vec::new();
    while let Presence::When { switch, ranges } = &m.signals[i].presence {
        if path.len() == MAX_DEPTH {
            return None;
        }
        path.push((*switch, ranges.as_slice()));
        i = *switch;
    }
    path.reverse();
    Some(path)
}

/// For each signal that shares a bit with an earlier one it can be present with: the
/// signal and that earlier one. `bits[i]` are signal i's payload bits; signals without
/// a path are left out.
pub fn overlaps(m: &MessageDef, paths: &[Option<Path>], bits: &[Vec<u32>]) -> Vec<(usize, usize)> {
    let mut seen = Occupants::default();
    let mut out = Vec::new();
    for (j, path) in paths.iter().enumerate() {
        let Some(path) = path else { continue };
        let own: Vec<usize> = bits[j]
            .iter()
            .map(|&b| b as usize)
            .filter(|&b| b < MAX_BITS)
            .collect();
        if let Some(i) = own.iter().find_map(|&b| seen.partner(m, path, b)) {
            out.push((j, i));
        }
        for &b in &own {
            seen.add(path, b, j);
        }
    }
    out
}

/// What earlier signals occupy, per bit.
#[derive(Default)]
struct Occupants {
    /// Per bit, the first signals of up to two different roots (None: always present).
    roots: HashMap<usize, Vec<(Option<usize>, usize)>>,
    /// Per bit and switch, the values of the signals that stop at that switch.
    stops: HashMap<(usize, usize), Values>,
    /// Per bit and switch, the switches hanging on it that signals there pass through,
    /// each with its first such signal.
    passes: HashMap<(usize, usize), Vec<(usize, usize)>>,
}

impl Occupants {
    /// An earlier signal at bit `b` that can be present with the one whose path this is.
    fn partner(&self, m: &MessageDef, path: &Path, b: usize) -> Option<usize> {
        let root = path.first().map(|&(s, _)| s);
        let roots = self.roots.get(&b)?;
        if let Some(&(_, i)) = roots.iter().find(|&&(r, _)| root.is_none() || r != root) {
            return Some(i);
        }
        for (t, &(switch, values)) in path.iter().enumerate().rev() {
            let next = path.get(t + 1).map(|&(s, _)| s);
            let stopped = self.stops.get(&(b, switch));
            if let Some(i) = stopped.and_then(|v| v.meeting(values)) {
                return Some(i);
            }
            let passing = self.passes.get(&(b, switch)).into_iter().flatten();
            let other = passing.filter(|&&(child, _)| Some(child) != next);
            if let Some(&(_, i)) = other
                .into_iter()
                .find(|&&(child, _)| meet(needs(m, child), values))
            {
                return Some(i);
            }
        }
        None
    }

    fn add(&mut self, path: &Path, b: usize, j: usize) {
        let root = path.first().map(|&(s, _)| s);
        let roots = self.roots.entry(b).or_default();
        if roots.len() < 2 && roots.iter().all(|&(r, _)| r != root) {
            roots.push((root, j));
        }
        for (t, &(switch, values)) in path.iter().enumerate() {
            match path.get(t + 1) {
                Some(&(child, _)) => {
                    let passes = self.passes.entry((b, switch)).or_default();
                    if passes.iter().all(|&(c, _)| c != child) {
                        passes.push((child, j));
                    }
                }
                None => {
                    let stops = self.stops.entry((b, switch)).or_default();
                    for &(lo, hi) in values {
                        stops.insert(lo, hi, j);
                    }
                }
            }
        }
    }
}

/// The values switch `child` needs of the switch it hangs on.
fn needs(m: &MessageDef, child: usize) -> &[(u64, u64)] {
    match &m.signals[child].presence {
        Presence::When { ranges, .. } => ranges,
        Presence::Always => &[],
    }
}

fn meet(a: &[(u64, u64)], b: &[(u64, u64)]) -> bool {
    a.iter()
        .any(|&(lo, hi)| b.iter().any(|&(l, h)| lo <= h && l <= hi))
}

/// Value ranges of signals, each with a signal that needs it, kept without the ranges
/// another range contains (that one meets whatever they meet): by start, the ends then
/// rise, so the range of the greatest start at or below a query's end is the one to
/// test.
#[derive(Default)]
struct Values(BTreeMap<u64, (u64, usize)>);

impl Values {
    fn insert(&mut self, lo: u64, hi: u64, signal: usize) {
        if let Some((_, &(end, _))) = self.0.range(..=lo).next_back() {
            if end >= hi {
                return;
            }
        }
        let inside: Vec<u64> = self
            .0
            .range(lo..)
            .take_while(|(_, &(end, _))| end <= hi)
            .map(|(&start, _)| start)
            .collect();
        for start in inside {
            self.0.remove(&start);
        }
        self.0.insert(lo, (hi, signal));
    }

    /// A signal whose range meets one of `values`.
    fn meeting(&self, values: &[(u64, u64)]) -> Option<usize> {
        values.iter().find_map(|&(lo, hi)| {
            let (_, &(end, signal)) = self.0.range(..=hi).next_back()?;
            (end >= lo).then_some(signal)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_that_contain_others_stand_for_them() {
        let mut v = Values::default();
        v.insert(10, 20, 1);
        v.insert(12, 15, 2);
        v.insert(30, 40, 3);
        v.insert(5, 35, 4);
        assert_eq!(v.meeting(&[(0, 4)]), None);
        assert_eq!(v.meeting(&[(13, 13)]), Some(4));
        assert_eq!(v.meeting(&[(38, 50)]), Some(3));
        assert_eq!(v.meeting(&[(41, 50), (0, 5)]), Some(4));
        assert_eq!(v.0.len(), 2, "(10, 20) and (12, 15) are inside (5, 35)");
    }
}
