//! `bulkhead-app probe`: the platform's floor, beside the tasks (bench/vehicle).

use super::{names, periodic, report, R};
use bulkhead_task::clock::now_ns;

/// Wake-up lateness thresholds of the probe's counters, ns.
pub const PROBE_OVER_NS: [u64; 6] = [50_000, 100_000, 200_000, 1_000_000, 2_000_000, 10_000_000];

/// The platform's floor: an rt task that does nothing but note how late it woke
/// (start of its job minus its release), so that what the other tasks suffer can be
/// laid beside what the machine gives a task that needs nothing. Counters: `wakeups`,
/// `late_sum_ns`, `late_max_ns`, and `over_<us>us` for each of [`PROBE_OVER_NS`].
pub fn run() -> R<()> {
    let mut counters = names(&["wakeups", "late_sum_ns", "late_max_ns"]);
    counters.extend(PROBE_OVER_NS.iter().map(|t| format!("over_{}us", t / 1000)));
    let mut n = vec![0u64; counters.len()];
    let result = periodic(&counters, |a, v| {
        let late = now_ns().saturating_sub(a.release_ns);
        n[0] += 1;
        n[1] += late;
        n[2] = n[2].max(late);
        for (slot, t) in n[3..].iter_mut().zip(PROBE_OVER_NS) {
            *slot += u64::from(late > t);
        }
        v.copy_from_slice(&n);
        Ok(())
    });
    let named: Vec<(String, u64)> = counters.into_iter().zip(n).collect();
    report("probe", &named);
    result
}
