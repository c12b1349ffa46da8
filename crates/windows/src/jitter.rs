//! Budget jitter: each fresh budget is drawn uniformly from `budget ± jitter/2`
//! (DEmOS thesis, section 3.5.1 "Process scheduling": "the actual budget is selected
//! uniformly from the range [budget - jitter/2, budget + jitter/2]").
//!
//! Like DEmOS (`Process` uses `uniform_int_distribution(-jitter/2, jitter - jitter/2)`),
//! the range is the integers `budget - jitter/2 ..= budget + (jitter - jitter/2)`
//! (`jitter/2` rounded down), here in nanoseconds; `jitter <= 2 * budget` keeps it
//! non-negative.
//!
//! Portability: every process has its own ChaCha8 stream, keyed by the 32-byte seed
//! `seed.to_le_bytes() ++ process.to_le_bytes() ++ [0; 16]` (process = flat index in
//! [`crate::Schedule::processes`]). Draws take `next_u64` words and map them to the
//! range by rejection (no modulo bias): with `n = jitter + 1`, a word `x` is accepted
//! when `x < 2^64 - (2^64 mod n)` and the draw is `x mod n`; rejected words are skipped.
//! Budgets therefore depend only on (seed, process, how many fresh budgets that
//! process drew before), not on how processes interleave, and not on the platform.

use bulkhead_model::Nanos;
use chacha20::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// The budget stream of one process.
#[derive(Debug)]
pub struct BudgetDraw {
    budget: Nanos,
    jitter: Nanos,
    rng: ChaCha8Rng,
}

impl BudgetDraw {
    /// The stream of `process` (flat index) under `seed`.
    ///
    /// Precondition: `jitter <= 2 * budget` (the model validates it).
    pub fn new(seed: u64, process: usize, budget: Nanos, jitter: Nanos) -> BudgetDraw {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        key[8..16].copy_from_slice(&(process as u64).to_le_bytes());
        BudgetDraw {
            budget,
            jitter,
            rng: ChaCha8Rng::from_seed(key),
        }
    }

    /// The next fresh budget. Without jitter it is the configured budget and no
    /// random word is consumed.
    pub fn next_budget(&mut self) -> Nanos {
        if self.jitter == 0 {
            return self.budget;
        }
        let low = self.budget - self.jitter / 2;
        low + uniform_below(&mut self.rng, self.jitter + 1)
    }
}

/// A uniform integer in `0..n` (n >= 1) by rejection sampling.
fn uniform_below(rng: &mut ChaCha8Rng, n: u64) -> u64 {
    // zone = the largest multiple of n that fits in 2^64 (as an exclusive bound).
    let rem = (u64::MAX % n + 1) % n; // 2^64 mod n
    loop {
        let x = rng.next_u64();
        // Accept x when x < 2^64 - rem, i.e. x lies in a complete block of n values.
        if rem == 0 || x < u64::MAX - rem + 1 {
            return x % n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_in_range_and_reaches_both_ends() {
        let mut d = BudgetDraw::new(7, 0, 1, 2);
        let draws: Vec<Nanos> = (0..200).map(|_| d.next_budget()).collect();
        assert!(draws.iter().all(|&b| b <= 2));
        assert!(draws.contains(&0) && draws.contains(&2) && draws.contains(&1));
    }

    #[test]
    fn odd_jitter_follows_demos_rounding() {
        // jitter 3 around 10: DEmOS range -1..=+2.
        let mut d = BudgetDraw::new(1, 3, 10, 3);
        let draws: Vec<Nanos> = (0..400).map(|_| d.next_budget()).collect();
        assert_eq!(*draws.iter().min().unwrap(), 9);
        assert_eq!(*draws.iter().max().unwrap(), 12);
    }

    #[test]
    fn no_jitter_is_the_budget() {
        let mut d = BudgetDraw::new(1, 0, 5_000_000, 0);
        assert!((0..10).all(|_| d.next_budget() == 5_000_000));
    }

    #[test]
    fn streams_depend_on_seed_and_process_only() {
        let draw = |seed, p| {
            let mut d = BudgetDraw::new(seed, p, 1_000_000, 1_000_000);
            (0..8).map(|_| d.next_budget()).collect::<Vec<_>>()
        };
        assert_eq!(draw(42, 1), draw(42, 1));
        assert_ne!(draw(42, 1), draw(43, 1));
        assert_ne!(draw(42, 1), draw(42, 2));
    }

    #[test]
    fn chacha8_stream_is_the_specified_one() {
        // The first output word of ChaCha8 with an all-zero key, nonce and counter
        // (keystream bytes 3e00ef2f895f40d6 read little-endian); pins the stream so a
        // dependency update that changed it would fail here rather than silently
        // changing every seeded schedule.
        let mut rng = ChaCha8Rng::from_seed([0u8; 32]);
        assert_eq!(
            rng.next_u64().to_le_bytes(),
            [0x3e, 0x00, 0xef, 0x2f, 0x89, 0x5f, 0x40, 0xd6]
        );
    }
}
