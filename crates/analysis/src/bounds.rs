//! Utilization-based quick tests for rate-monotonic scheduling. Both are sufficient,
//! not necessary, and apply only to implicit deadlines (D = T), no jitter and no
//! blocking, with rate-monotonic priorities on a dedicated processor.

use crate::task::{utilization, Task};
use serde::Serialize;

/// Outcome of a quick test: not applicable, passed (schedulable) or inconclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Quick {
    NotApplicable,
    Passed,
    Inconclusive,
}

/// The Liu & Layland bound `n (2^(1/n) - 1)`: Liu & Layland, "Scheduling Algorithms for
/// Multiprogramming in a Hard-Real-Time Environment", JACM 20(1), 1973, Theorem 5.
/// Boomerang (II-A, III-E) admits tuned pipes with exactly this bound.
pub fn liu_layland_bound(n: usize) -> f64 {
    let n = n.max(1) as f64;
    n * (2f64.powf(1.0 / n) - 1.0)
}

/// Whether the quick tests apply to `tasks` (implicit deadlines, no jitter, no blocking).
/// The caller must also know that priorities are rate monotonic.
pub fn quick_tests_apply(tasks: &[Task]) -> bool {
    tasks
        .iter()
        .all(|t| t.deadline == t.period && t.jitter == 0 && t.blocking == 0)
}

/// Liu & Layland test: `U <= n (2^(1/n) - 1)` (JACM 1973, Theorem 5).
pub fn liu_layland(tasks: &[Task]) -> Quick {
    if !quick_tests_apply(tasks) {
        return Quick::NotApplicable;
    }
    verdict(utilization(tasks) <= liu_layland_bound(tasks.len()))
}

/// Hyperbolic bound `Π (U_i + 1) <= 2`: Bini, Buttazzo, Buttazzo, "Rate Monotonic
/// Analysis: the Hyperbolic Bound", IEEE Trans. Computers 52(7), 2003 (the hyperbolic bound theorem).
/// It dominates the Liu & Layland bound.
pub fn hyperbolic(tasks: &[Task]) -> Quick {
    if !quick_tests_apply(tasks) {
        return Quick::NotApplicable;
    }
    verdict(tasks.iter().map(|t| t.utilization() + 1.0).product::<f64>() <= 2.0)
}

fn verdict(pass: bool) -> Quick {
    if pass {
        Quick::Passed
    } else {
        Quick::Inconclusive
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_known_values() {
        assert!((liu_layland_bound(1) - 1.0).abs() < 1e-12);
        assert!((liu_layland_bound(2) - 0.828427).abs() < 1e-6);
        assert!((liu_layland_bound(3) - 0.779763).abs() < 1e-6);
    }

    /// U1 = 0.6, U2 = 0.25 gives U = 0.85 > 0.828 (L&L
    /// inconclusive) but (1.6)(1.25) = 2 <= 2 (hyperbolic passes).
    #[test]
    fn hyperbolic_dominates_liu_layland() {
        let ts = [Task::new(6, 10, 10), Task::new(5, 20, 20)];
        assert_eq!(liu_layland(&ts), Quick::Inconclusive);
        assert_eq!(hyperbolic(&ts), Quick::Passed);
        let constrained = [Task::new(1, 10, 5)];
        assert_eq!(hyperbolic(&constrained), Quick::NotApplicable);
    }
}
