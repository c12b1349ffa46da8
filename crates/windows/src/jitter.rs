//! Budget jitter: each fresh budget is drawn uniformly from `budget ± jitter/2`
//! (DEmOS thesis, section 3.5.1 "Process scheduling": "the actual budget is selected
//! uniformly from the range [budget - jitter/2, budget + jitter/2]").
//!
//! Like DEmOS (`Process` uses `uniform_int_distribution(-jitter/2, jitter - jitter/2)`),
//! the range is the integers `budget - jitter/2 ..= budget + (jitter - jitter/2)`
//! (`jitter/2` rounded down); `jitter <= 2 * budget` keeps it non-negative. Where the
//! draws come from is [`Jitter`]:
//!
//! - [`Jitter::Portable`] (the default): in nanoseconds, every process from its own
//!   ChaCha8 stream, keyed by the 32-byte seed `seed.to_le_bytes() ++
//!   process.to_le_bytes() ++ [0; 16]` (process = flat index in
//!   [`crate::Schedule::processes`]). Draws take `next_u64` words and map them to the
//!   range by rejection (no modulo bias): with `n = jitter + 1`, a word `x` is accepted
//!   when `x < 2^64 - (2^64 mod n)` and the draw is `x mod n`; rejected words are
//!   skipped. Budgets therefore depend only on (seed, process, how many fresh budgets
//!   that process drew before), not on how processes interleave, and not on the platform.
//! - [`Jitter::Demos`]: DEmOS's own draws, so that `demos-sched` with
//!   `DEMOS_RAND_SEED=N` gives the budgets DEmOS gives: whole milliseconds, from one
//!   `std::mt19937` ([`Mt19937`]) seeded with the low 32 bits of the seed and shared by
//!   all processes in the order they draw, mapped to the range as libstdc++'s
//!   `uniform_int_distribution<long>` does ([`libstdcxx_uniform`]). As in DEmOS, every
//!   fresh budget takes a draw, also a process's without jitter.

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

/// Where fresh budgets are drawn from (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Jitter {
    /// bulkhead's portable draws: one ChaCha8 stream per process, in nanoseconds.
    #[default]
    Portable,
    /// DEmOS's draws: one `std::mt19937` for all processes, in whole milliseconds.
    Demos,
}

const MS: Nanos = 1_000_000;

/// The budget draws of every process of a schedule.
#[derive(Debug)]
pub enum Draws {
    /// [`Jitter::Portable`]: a stream per process.
    Portable(Vec<BudgetDraw>),
    /// [`Jitter::Demos`]: one generator; per process its (budget, jitter).
    Demos {
        rng: Box<Mt19937>,
        processes: Vec<(Nanos, Nanos)>,
    },
}

impl Draws {
    /// The draws of processes with these (budget, jitter), in flat process order.
    ///
    /// Precondition: `jitter <= 2 * budget` for each (the model validates it).
    pub fn new(jitter: Jitter, seed: u64, processes: &[(Nanos, Nanos)]) -> Draws {
        match jitter {
            Jitter::Portable => Draws::Portable(
                processes
                    .iter()
                    .enumerate()
                    .map(|(id, &(budget, jitter))| BudgetDraw::new(seed, id, budget, jitter))
                    .collect(),
            ),
            Jitter::Demos => Draws::Demos {
                // DEmOS seeds with `std::stoi(DEMOS_RAND_SEED)`; the generator keeps 32 bits.
                rng: Box::new(Mt19937::new(seed as u32)),
                processes: processes.to_vec(),
            },
        }
    }

    /// The next fresh budget of `process`.
    pub fn next_budget(&mut self, process: usize) -> Nanos {
        match self {
            Draws::Portable(streams) => streams[process].next_budget(),
            Draws::Demos { rng, processes } => {
                let (budget, jitter) = processes[process];
                // DEmOS's jitter is whole milliseconds (an `int` in its configuration).
                let jitter = (jitter / MS) as i64;
                let offset = libstdcxx_uniform(rng, -(jitter / 2), jitter - jitter / 2);
                budget.saturating_add_signed(offset * MS as i64)
            }
        }
    }
}

/// The 32-bit Mersenne Twister MT19937 (Matsumoto and Nishimura, "Mersenne Twister: a
/// 623-dimensionally equidistributed uniform pseudo-random number generator", ACM
/// TOMACS 8(1), 1998, section 2, equation (2.1) and the tempering of (2.2)-(2.5), with
/// the parameters of Table II), seeded as C++'s `std::mt19937` (ISO C++ [rand.eng.mers]:
/// `x[i] = 1812433253 * (x[i-1] ^ (x[i-1] >> 30)) + i`), which DEmOS draws its jitter from.
#[derive(Clone)]
pub struct Mt19937 {
    state: [u32; N],
    index: usize,
}

const N: usize = 624;
const M: usize = 397;

impl std::fmt::Debug for Mt19937 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mt19937 {{ index: {} }}", self.index)
    }
}

impl Mt19937 {
    /// The generator `std::mt19937(seed)` is.
    pub fn new(seed: u32) -> Mt19937 {
        let mut state = [0u32; N];
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, index: N }
    }

    /// The next output word.
    pub fn next_u32(&mut self) -> u32 {
        if self.index == N {
            self.twist();
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// Equation (2.1) for the whole state at once.
    fn twist(&mut self) {
        for i in 0..N {
            let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % N] & 0x7fff_ffff);
            let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
            self.state[i] = self.state[(i + M) % N] ^ (y >> 1) ^ mag;
        }
        self.index = 0;
    }
}

/// An integer in `low..=high` as libstdc++'s `std::uniform_int_distribution<long>` draws
/// it from a 32-bit generator (GCC 11 and later, `_S_nd` in `bits/uniform_int_dist.h`):
/// Lemire's nearly divisionless method (D. Lemire, "Fast random integer generation in
/// an interval", ACM TOMACS 29(1), 2019, Algorithm 5). Every call takes at least one
/// word, also for `low == high`.
///
/// Precondition: `low <= high` and `high - low < 2^32 - 1` (a wider range takes
/// libstdc++'s other path; it is cut to this one).
pub fn libstdcxx_uniform(rng: &mut Mt19937, low: i64, high: i64) -> i64 {
    let range = u32::try_from(high - low + 1).unwrap_or(u32::MAX);
    let mut product = u64::from(rng.next_u32()) * u64::from(range);
    if (product as u32) < range {
        let threshold = range.wrapping_neg() % range;
        while (product as u32) < threshold {
            product = u64::from(rng.next_u32()) * u64::from(range);
        }
    }
    low + (product >> 32) as i64
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

    #[test]
    fn mt19937_gives_the_standards_10000th_value() {
        // ISO C++ [rand.predef]: the 10000th consecutive invocation of a
        // default-constructed std::mt19937 (seed 5489) produces 4123659995; the first
        // is 3499211612 (Matsumoto and Nishimura's mt19937ar.c, init_genrand(5489)).
        let mut rng = Mt19937::new(5489);
        assert_eq!(rng.next_u32(), 3_499_211_612);
        let last = (1..10_000).map(|_| rng.next_u32()).last();
        assert_eq!(last, Some(4_123_659_995));
    }

    #[test]
    fn libstdcxx_draws_are_those_of_gcc() {
        // Printed by g++ 12 (Debian 12.2.0) for std::mt19937(seed) and
        // std::uniform_int_distribution<long>(low, high).
        let draws = |seed: u32, low, high, n| {
            let mut rng = Mt19937::new(seed);
            (0..n)
                .map(|_| libstdcxx_uniform(&mut rng, low, high))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            draws(2, -1, 1, 12),
            [0, -1, -1, 1, 0, 1, 0, 0, 0, -1, -1, -1]
        );
        assert_eq!(
            draws(7, -250, 250, 8),
            [-212, -137, 140, -91, -31, 240, 112, -22]
        );
        // An empty range still takes a word: the fourth word of seed 2^32 - 1 follows.
        let mut rng = Mt19937::new(u32::MAX);
        assert!((0..3).all(|_| libstdcxx_uniform(&mut rng, 0, 0) == 0));
        assert_eq!(rng.next_u32(), 2_416_749_639);
    }

    #[test]
    fn demos_draws_share_one_generator_in_whole_milliseconds() {
        // Two processes, budget 1 ms and jitter 2 ms, seed 2: the first five words of
        // the generator go to them in the order they draw.
        let mut draws = Draws::new(Jitter::Demos, 2, &[(MS, 2 * MS), (MS, 2 * MS)]);
        let got: Vec<Nanos> = [0, 1, 1, 0, 1]
            .into_iter()
            .map(|p| draws.next_budget(p) / MS)
            .collect();
        assert_eq!(got, [1, 0, 0, 2, 1]);
        // Without jitter the budget is kept, but the word is still taken.
        let mut draws = Draws::new(Jitter::Demos, 2, &[(5 * MS, 0), (MS, 2 * MS)]);
        assert_eq!(draws.next_budget(0), 5 * MS);
        assert_eq!(draws.next_budget(1), 0);
    }
}
