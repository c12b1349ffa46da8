//! One trace record per completed activation, as it travels through the trace ring.

/// Activation flags (also in `include/bulkhead/task.h`).
pub mod flags {
    /// The activation started after its release because the previous one ran past it.
    pub const OVERRUN: u32 = 1;
    /// Whole periods passed without an activation; [`crate::Activation::skipped`] says how
    /// many releases were skipped (each one is a missed deadline).
    pub const SKIPPED: u32 = 2;
    /// The first activation of a process the supervisor restarted, or of a restartable
    /// task after a system resume (it starts again from its checkpoint).
    pub const RESTARTED: u32 = 4;
    /// The first activation after a system resume (stop-start).
    pub const RESUMED: u32 = 8;
    /// In a record only: the task's thread used more CPU time than its budget from the
    /// activation's start to its completion (the task library's own budget accounting,
    /// the evidence of `health.on_overrun`).
    pub const OVER_BUDGET: u32 = 16;
}

/// Size of a record in the ring, bytes.
pub const RECORD_SIZE: u32 = 48;

/// What the task reports about one activation. All times are CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    /// Activation index k (release = epoch + k * period).
    pub index: u64,
    /// Planned release time.
    pub release_ns: u64,
    /// When the task started the activation (returned from `wait_next_period`).
    pub start_ns: u64,
    /// When it completed it.
    pub end_ns: u64,
    /// [`flags`] of the activation.
    pub flags: u32,
    /// Releases skipped just before this activation.
    pub skipped: u32,
    /// The reporting process.
    pub pid: u32,
}

impl Record {
    /// Response time: completion minus release (0 if the task reported an end before the
    /// release, which only a corrupt record can).
    pub fn response_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.release_ns)
    }

    /// Whether the activation completed after `release + deadline`.
    pub fn missed(&self, deadline_ns: u64) -> bool {
        self.end_ns > self.release_ns.saturating_add(deadline_ns)
    }

    /// Little-endian wire form.
    pub fn to_bytes(&self) -> [u8; RECORD_SIZE as usize] {
        let mut b = [0u8; RECORD_SIZE as usize];
        b[0..8].copy_from_slice(&self.index.to_le_bytes());
        b[8..16].copy_from_slice(&self.release_ns.to_le_bytes());
        b[16..24].copy_from_slice(&self.start_ns.to_le_bytes());
        b[24..32].copy_from_slice(&self.end_ns.to_le_bytes());
        b[32..36].copy_from_slice(&self.flags.to_le_bytes());
        b[36..40].copy_from_slice(&self.skipped.to_le_bytes());
        b[40..44].copy_from_slice(&self.pid.to_le_bytes());
        b
    }

    /// Parses the wire form.
    pub fn from_bytes(b: &[u8; RECORD_SIZE as usize]) -> Record {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Record {
            index: u64_at(0),
            release_ns: u64_at(8),
            start_ns: u64_at(16),
            end_ns: u64_at(24),
            flags: u32_at(32),
            skipped: u32_at(36),
            pid: u32_at(40),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_judges() {
        let r = Record {
            index: 7,
            release_ns: 1_000,
            start_ns: 1_200,
            end_ns: 1_900,
            flags: flags::OVERRUN | flags::RESTARTED,
            skipped: 2,
            pid: 42,
        };
        assert_eq!(Record::from_bytes(&r.to_bytes()), r);
        assert_eq!(r.response_ns(), 900);
        assert!(r.missed(899));
        assert!(!r.missed(900));
    }
}
