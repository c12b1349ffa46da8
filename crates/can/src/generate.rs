//! Generating frames as can-utils' `cangen` does: ids, lengths and payloads random,
//! incrementing or fixed, one frame every gap (`bulkhead can gen`).

use crate::bus::CanBus;
use crate::frame::{CanId, Frame, CLASSIC_MAX_LEN, MAX_EXTENDED_ID, MAX_STANDARD_ID};
use rand::{RngExt, SeedableRng};
use rand_xorshift::XorShiftRng;
use std::io;
use std::time::{Duration, Instant};

/// How one field of the frames is generated (cangen's `r`, `i` or a hex value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode<T> {
    Random,
    Increment,
    Fixed(T),
}

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub id: Mode<u32>,
    pub len: Mode<usize>,
    pub data: Mode<Vec<u8>>,
    /// 29-bit ids (cangen `-e`).
    pub extended: bool,
    /// Remote frames (cangen `-R`).
    pub remote: bool,
}

/// A fixed value of a [`Spec`] that does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("id {id:X} does not fit in {max_id:X}")]
    Id { id: u32, max_id: u32 },
    #[error("length {0}: a classic frame holds 0..8 bytes")]
    Length(usize),
    #[error("{0} data bytes: a classic frame holds 0..8")]
    Data(usize),
    #[error("the fixed payload has {data} bytes, the fixed length is {len}")]
    Mismatch { data: usize, len: usize },
    #[error("a fixed payload fixes the length: give no length mode")]
    LengthMode,
}

impl Spec {
    /// Checks that fixed values fit: the id its kind, the length 0..8, the data its
    /// length (a fixed payload fixes the length).
    pub fn check(&self) -> Result<(), SpecError> {
        let max_id = if self.extended {
            MAX_EXTENDED_ID
        } else {
            MAX_STANDARD_ID
        };
        if let Mode::Fixed(id) = self.id {
            if id > max_id {
                return Err(SpecError::Id { id, max_id });
            }
        }
        if let Mode::Fixed(len) = self.len {
            if len > CLASSIC_MAX_LEN {
                return Err(SpecError::Length(len));
            }
        }
        match (&self.data, &self.len) {
            (Mode::Fixed(d), _) if d.len() > CLASSIC_MAX_LEN => Err(SpecError::Data(d.len())),
            (Mode::Fixed(d), Mode::Fixed(len)) if d.len() != *len => Err(SpecError::Mismatch {
                data: d.len(),
                len: *len,
            }),
            (Mode::Fixed(_), Mode::Random | Mode::Increment) => Err(SpecError::LengthMode),
            _ => Ok(()),
        }
    }
}

/// Makes the frames of a [`Spec`]; random choices come from a seeded generator, so a
/// seed reproduces a sequence.
pub struct Generator {
    spec: Spec,
    rng: XorShiftRng,
    n: u64,
}

impl Generator {
    pub fn new(spec: Spec, seed: u64) -> Generator {
        Generator {
            spec,
            rng: XorShiftRng::seed_from_u64(seed),
            n: 0,
        }
    }

    /// The next frame.
    pub fn next_frame(&mut self) -> Frame {
        let n = self.n;
        self.n += 1;
        let max_id = if self.spec.extended {
            MAX_EXTENDED_ID
        } else {
            MAX_STANDARD_ID
        };
        let raw = match self.spec.id {
            Mode::Random => self.rng.random_range(0..=max_id),
            Mode::Increment => (n % (u64::from(max_id) + 1)) as u32,
            Mode::Fixed(id) => id,
        };
        let id = if self.spec.extended {
            CanId::Extended(raw)
        } else {
            CanId::Standard(raw as u16)
        };
        let len = match (&self.spec.len, &self.spec.data) {
            (_, Mode::Fixed(d)) => d.len(),
            (Mode::Random, _) => self.rng.random_range(0..=CLASSIC_MAX_LEN),
            (Mode::Increment, _) => (n % (CLASSIC_MAX_LEN as u64 + 1)) as usize,
            (Mode::Fixed(len), _) => *len,
        };
        if self.spec.remote {
            return Frame::remote(id, len as u8).expect("checked length");
        }
        let data: Vec<u8> = match &self.spec.data {
            Mode::Random => (0..len).map(|_| self.rng.random()).collect(),
            Mode::Increment => n.to_le_bytes()[..len].to_vec(),
            Mode::Fixed(d) => d.clone(),
        };
        Frame::new(id, &data).expect("checked length")
    }
}

/// Sends frames of `generator` to `bus`, one every `gap` on an absolute grid (a late
/// frame does not delay the next ones), until `count` frames (for ever if None).
/// With `phase`, the grid is CLOCK_MONOTONIC's instants `k * gap + phase` (the first
/// frame at the next of them), so that the frames keep a known phase to tasks released
/// on the same clock's grid (a `bulkhead run`'s rt tasks, whose release 0 is a multiple
/// of 10 ms); without, it starts now. `sent` sees each frame after it was sent.
/// Returns the number sent.
pub fn run(
    generator: &mut Generator,
    bus: &mut dyn CanBus,
    gap: Duration,
    phase: Option<Duration>,
    count: Option<u64>,
    sent: &mut dyn FnMut(&Frame) -> io::Result<()>,
) -> io::Result<u64> {
    let start = Instant::now() + phase.map_or(Duration::ZERO, |p| until_phase(gap, p));
    let mut n = 0u64;
    while count.is_none_or(|c| n < c) {
        let offset = gap.as_nanos().saturating_mul(u128::from(n));
        let due = start + Duration::from_nanos(u64::try_from(offset).unwrap_or(u64::MAX));
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let frame = generator.next_frame();
        bus.send(&frame)?;
        sent(&frame)?;
        n += 1;
    }
    Ok(n)
}

/// How long from now until CLOCK_MONOTONIC's next instant `k * gap + phase` (`Instant`
/// is CLOCK_MONOTONIC on Linux).
fn until_phase(gap: Duration, phase: Duration) -> Duration {
    let now = bulkhead_task::clock::now_ns();
    let gap = u64::try_from(gap.as_nanos()).unwrap_or(u64::MAX);
    let phase = u64::try_from(phase.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(next_at(now, gap, phase) - now)
}

/// The first instant at or after `now` that is `phase` (mod `gap`) after a multiple of
/// `gap`, ns.
fn next_at(now: u64, gap: u64, phase: u64) -> u64 {
    let gap = gap.max(1);
    let phase = phase % gap;
    now.saturating_sub(phase).div_ceil(gap) * gap + phase
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phased_grid_starts_at_the_next_instant_of_its_phase() {
        let ms = 1_000_000;
        assert_eq!(next_at(10 * ms, 2 * ms, ms), 11 * ms);
        assert_eq!(next_at(11 * ms, 2 * ms, ms), 11 * ms);
        assert_eq!(next_at(11 * ms + 1, 2 * ms, ms), 13 * ms);
        assert_eq!(next_at(10 * ms, 2 * ms, 0), 10 * ms);
        assert_eq!(
            next_at(10 * ms + 1, 2 * ms, 5 * ms),
            11 * ms,
            "phase modulo gap"
        );
        assert_eq!(next_at(500, 2 * ms, ms), ms, "before the first instant");
    }

    fn spec(id: Mode<u32>, len: Mode<usize>, data: Mode<Vec<u8>>) -> Spec {
        Spec {
            id,
            len,
            data,
            extended: false,
            remote: false,
        }
    }

    #[test]
    fn increment_and_fixed_modes_are_cangens() {
        let mut g = Generator::new(spec(Mode::Increment, Mode::Increment, Mode::Increment), 1);
        let frames: Vec<Frame> = (0..10).map(|_| g.next_frame()).collect();
        assert_eq!(frames[0].id(), CanId::Standard(0));
        assert_eq!(frames[9].id(), CanId::Standard(9));
        assert_eq!(frames[3].data(), &[3, 0, 0]);
        assert_eq!(frames[9].len(), 0);
        let mut g = Generator::new(
            spec(
                Mode::Fixed(0x123),
                Mode::Fixed(0),
                Mode::Fixed(vec![0xDE, 0xAD]),
            ),
            1,
        );
        assert_eq!(g.next_frame().data(), &[0xDE, 0xAD]);
    }

    #[test]
    fn random_frames_are_valid_and_reproducible() {
        let mut spec = spec(Mode::Random, Mode::Random, Mode::Random);
        spec.extended = true;
        let frames = |seed| {
            let mut g = Generator::new(spec.clone(), seed);
            (0..200).map(|_| g.next_frame()).collect::<Vec<_>>()
        };
        let a = frames(7);
        assert_eq!(a, frames(7));
        assert_ne!(a, frames(8));
        assert!(a.iter().all(|f| f.id().is_extended() && f.len() <= 8));
        let lens: std::collections::BTreeSet<usize> = a.iter().map(Frame::len).collect();
        assert_eq!(lens.len(), 9, "every length 0..8 occurs: {lens:?}");
    }

    #[test]
    fn fixed_values_must_fit() {
        assert!(spec(Mode::Fixed(0x800), Mode::Random, Mode::Random)
            .check()
            .is_err());
        assert!(spec(Mode::Random, Mode::Fixed(9), Mode::Random)
            .check()
            .is_err());
        assert!(spec(Mode::Random, Mode::Random, Mode::Fixed(vec![1]))
            .check()
            .is_err());
        let mismatch = spec(Mode::Random, Mode::Fixed(2), Mode::Fixed(vec![1])).check();
        assert_eq!(mismatch, Err(SpecError::Mismatch { data: 1, len: 2 }));
        assert_eq!(
            mismatch.unwrap_err().to_string(),
            "the fixed payload has 1 bytes, the fixed length is 2"
        );
        let mut ext = spec(Mode::Fixed(0x1FFF_FFFF), Mode::Random, Mode::Random);
        assert!(ext.check().is_err());
        ext.extended = true;
        assert!(ext.check().is_ok());
    }
}
