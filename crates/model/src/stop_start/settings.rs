//! The stop-start settings' types: what the `stop_start:` section says once loaded
//! ([`super`] reads, validates and writes it), apart from the system that holds them, so
//! that the system's types name them without importing the section's reader.

use crate::units::Nanos;
use serde::Deserialize;

/// What the gateway does with frames around a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stale {
    /// Frames received before the resume completes are never delivered to restartable
    /// tasks; fresh frames from the first instant after it are buffered until they are
    /// ready. (The only choice: a restartable task exists not to act on old data,
    /// JuMP2start 2.2; a continuable task keeps whatever it had read.)
    #[default]
    Drop,
}

/// The stop-start settings of a system; [`StopStart::defaults`] for a system without
/// the section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopStart {
    /// Every partition once, in suspend order; resume goes in reverse.
    pub order: Vec<String>,
    /// How long each program has to acknowledge a suspend request.
    pub ack_deadline: Nanos,
    pub stale: Stale,
    /// Enter suspend-to-RAM once every partition is frozen.
    pub suspend_to_ram: bool,
    pub suspend_when: Option<Trigger>,
    pub resume_when: Option<Trigger>,
}

/// The default acknowledgement deadline: 5 ms, the suspend latency target of a
/// system-wide stop (JuMP2start's Quest userspace suspend took 6.5-58 ms, Table 5).
pub const DEFAULT_ACK_DEADLINE: Nanos = 5_000_000;

/// A condition on a decoded CAN signal that the bus's gateway watches.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub bus: String,
    /// The signal's name in the bus's DBC.
    pub signal: String,
    pub compare: Compare,
    /// The threshold, a finite physical value (the DBC's unit).
    pub threshold: f64,
    /// How long the condition must hold without a break (0: one frame is enough).
    pub hold: Nanos,
}

impl PartialEq for Trigger {
    fn eq(&self, o: &Trigger) -> bool {
        (&self.bus, &self.signal, self.compare, self.hold) == (&o.bus, &o.signal, o.compare, o.hold)
            && self.threshold.to_bits() == o.threshold.to_bits()
    }
}

/// Finite thresholds only (checked at load), so equality is an equivalence.
impl Eq for Trigger {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compare {
    /// The signal is strictly below the threshold.
    Below,
    /// The signal is strictly above the threshold.
    Above,
}

impl Trigger {
    /// Whether `value` meets the condition (not counting `hold`).
    pub fn met(&self, value: f64) -> bool {
        match self.compare {
            Compare::Below => value < self.threshold,
            Compare::Above => value > self.threshold,
        }
    }

    /// `SIGNAL<VALUE` or `SIGNAL>VALUE`, with `@HOLD_NS` when it must hold: the form
    /// the gateway's command line takes.
    pub fn spec(&self) -> String {
        let op = match self.compare {
            Compare::Below => '<',
            Compare::Above => '>',
        };
        format!("{}{op}{}@{}", self.signal, self.threshold, self.hold)
    }
}
