//! End-to-end timing of chains of periodic stages (tuned pipes, CAN gateway pipelines).

use crate::task::Time;

/// Worst-case end-to-end delay of a chain whose stages each read their input at the
/// start of their period and forward the result within that period (`R_i <= T_i`):
/// the sum of the periods (Boomerang, Sec. III-E: "the sum of all the periods of the
/// tuned pipes in the longest path"; DriveOS, ACM TECS 2023, Sec. 7.2: 11 ms for the ADAS
/// controller pipeline). `stages` are `(period, wcrt)`; `None` when a stage's WCRT exceeds
/// its period (then the assumption fails; use [`sampling_chain_bound`]).
pub fn sum_of_periods(stages: &[(Time, Time)]) -> Option<Time> {
    stages
        .iter()
        .try_fold(0, |acc: Time, &(t, r)| (r <= t).then(|| acc + t))
}

/// End-to-end bound for a chain of independently released periodic stages that sample
/// their input (register/four-slot communication): each stage may just miss the data
/// (up to `T_i`) and then take up to `R_i`, so the delay is at most `Σ (T_i + R_i)`
/// (Davare, Zhu, Di Natale, Pinello, Kanajan, Sangiovanni-Vincentelli, "Period Optimization
/// for Hard Real-Time Distributed Automotive Systems", DAC 2007, the end-to-end latency of
/// a path of sampling tasks).
pub fn sampling_chain_bound(stages: &[(Time, Time)]) -> Time {
    stages.iter().map(|&(t, r)| t + r).sum()
}

/// FIFO depth (in messages) that keeps a producer (`m_p` messages per period `t_p`) from
/// blocking on a consumer of period `t_c`: `m_p (⌈T_c / T_p⌉ + 1)` (Boomerang, Sec. III-E).
pub fn fifo_depth(m_p: u64, t_p: Time, t_c: Time) -> u64 {
    m_p * (t_c.div_ceil(t_p) + 1)
}

/// Worst-case fraction of messages a four-slot (latest value) reader of period `t_c`
/// never sees from a writer of period `t_p`: `max(0, 1 - T_p / T_c)` (Boomerang, Sec. III-E).
pub fn four_slot_loss(t_p: Time, t_c: Time) -> f64 {
    (1.0 - t_p as f64 / t_c as f64).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DriveOS Sec. 7.2: USB BH (A) → mhydra_rx (B) → ADAS read mapper Quest (E) → Linux
    /// (K) → longitudinal controller (G) → ADAS write mapper Linux (L) → Quest (F) →
    /// mhydra_tx (H) → USB BH (A), periods from Table 3: 1+1+2+1+1+1+2+1+1 = 11 ms.
    #[test]
    fn driveos_controller_pipeline_is_11_ms() {
        let ms = 1_000_000;
        let periods = [1, 1, 2, 1, 1, 1, 2, 1, 1];
        let stages: Vec<(Time, Time)> = periods.iter().map(|&p| (p * ms, p * ms / 2)).collect();
        assert_eq!(sum_of_periods(&stages), Some(11 * ms));
        assert_eq!(sampling_chain_bound(&stages), 11 * ms + 11 * ms / 2);
        assert_eq!(sum_of_periods(&[(ms, 2 * ms)]), None);
    }

    #[test]
    fn buffers_of_tuned_pipes() {
        // Producer every 2 ms, consumer every 5 ms: ⌈5/2⌉ + 1 = 4 messages; the four-slot
        // reader misses up to 60% of the values.
        assert_eq!(fifo_depth(1, 2, 5), 4);
        assert!((four_slot_loss(2, 5) - 0.6).abs() < 1e-12);
        assert_eq!(four_slot_loss(5, 2), 0.0);
    }
}
