//! Stop-start triggers from the vehicle itself (JuMP2start 2.1: the master receives the
//! "stop" request as a CAN frame): the gateway reader decodes the configured signal of
//! every frame it takes from the bus with the bus's DBC and counts each time a
//! condition is met (`ss.suspend_when`, `ss.resume_when`, and `mode.switch_when.K` for
//! `modes.switch_when`); the supervisor watches the counters and suspends or resumes the
//! system, or switches its mode. The gateway keeps listening while the
//! rest of the system sleeps: its partition is frozen last and thawed first.

use crate::dbc::Database;
use crate::frame::{CanId, Frame};
use bulkhead_gateway_protocol::switch_when_counter;
pub use bulkhead_gateway_protocol::Trigger;

/// One watched condition.
struct Watch {
    /// The counter's name: `ss.suspend_when`, `ss.resume_when` or `mode.switch_when.K`.
    name: String,
    trigger: Trigger,
    /// The messages that carry the signal.
    ids: Vec<CanId>,
    /// Reception time of the first frame of the current unbroken run meeting it.
    met_since: Option<u64>,
    /// Whether the current run has been counted.
    counted: bool,
    count: u64,
    /// Reception time of the frame that last made it count.
    last_ns: Option<u64>,
}

/// A trigger on a signal no message of the DBC has: the flag, the trigger as written
/// and its signal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag} {spec}: no message of the DBC has signal {signal}")]
pub struct UnknownSignal {
    pub flag: &'static str,
    pub spec: String,
    pub signal: String,
}

/// The triggers of one bus reader.
pub struct Triggers {
    db: Database,
    watches: Vec<Watch>,
}

impl Triggers {
    /// Watches `suspend` and `resume` (either may be absent) and each of `switch` on
    /// frames decoded with `db`; refuses a signal no message of the DBC has.
    pub fn new(
        db: Database,
        suspend: Option<Trigger>,
        resume: Option<Trigger>,
        switch: Vec<Trigger>,
    ) -> Result<Triggers, UnknownSignal> {
        let mut watches = Vec::new();
        let stop_start = [
            ("ss.suspend_when".to_string(), "--suspend-when", suspend),
            ("ss.resume_when".to_string(), "--resume-when", resume),
        ];
        let switch = (switch.into_iter().enumerate())
            .map(|(k, t)| (switch_when_counter(k), "--switch-when", Some(t)));
        for (name, flag, trigger) in stop_start.into_iter().chain(switch) {
            let Some(trigger) = trigger else { continue };
            let ids: Vec<CanId> = db
                .messages()
                .iter()
                .filter(|m| m.signals.iter().any(|s| s.name == trigger.signal))
                .map(|m| m.id)
                .collect();
            if ids.is_empty() {
                return Err(UnknownSignal {
                    flag,
                    spec: trigger.spec(),
                    signal: trigger.signal,
                });
            }
            watches.push(Watch {
                name,
                trigger,
                ids,
                met_since: None,
                counted: false,
                count: 0,
                last_ns: None,
            });
        }
        Ok(Triggers { db, watches })
    }

    /// A frame received at `t_ns`: a frame carrying a watched signal either continues
    /// the run of frames meeting its condition (counted once the run has lasted the
    /// hold) or breaks it. Frames that do not decode are ignored.
    pub fn observe(&mut self, t_ns: u64, frame: &Frame) {
        for w in &mut self.watches {
            if !w.ids.contains(&frame.id()) {
                continue;
            }
            let Ok(decoded) = self.db.decode(frame) else {
                continue;
            };
            let Some(&(_, value)) = decoded.signals.iter().find(|(n, _)| *n == w.trigger.signal)
            else {
                continue;
            };
            if !w.trigger.met(value) {
                w.met_since = None;
                w.counted = false;
                continue;
            }
            let since = *w.met_since.get_or_insert(t_ns);
            if !w.counted && t_ns.saturating_sub(since) >= w.trigger.hold_ns {
                w.counted = true;
                w.count += 1;
                w.last_ns = Some(t_ns);
            }
        }
    }

    /// The counters, `(name, times met)`, suspend first.
    pub fn counts(&self) -> Vec<(String, u64)> {
        self.watches
            .iter()
            .map(|w| (w.name.clone(), w.count))
            .collect()
    }

    /// When condition `name` was last met (the reception time of the frame that made
    /// it count).
    pub fn last_met_ns(&self, name: &str) -> Option<u64> {
        self.watches.iter().find(|w| w.name == name)?.last_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkhead_gateway_protocol::parse_trigger;

    const DBC: &str = "BO_ 180 SPEED: 8 XXX\n SG_ SPEED : 47|16@0+ (0.01,0) [0|250] \"kph\" XXX\n";

    fn speed(kph: f64) -> Frame {
        let raw = (kph * 100.0).round() as u16;
        let mut data = [0u8; 8];
        data[5..7].copy_from_slice(&raw.to_be_bytes());
        Frame::new(CanId::Standard(180), &data).unwrap()
    }

    #[test]
    fn a_condition_counts_once_per_run_that_lasts_the_hold() {
        let db = Database::parse(DBC).unwrap();
        let below = parse_trigger("SPEED<10@100").unwrap();
        let mut t = Triggers::new(db, Some(below), None, Vec::new()).unwrap();
        let ms = |k: u64| k * 1_000_000;
        for (at, kph) in [(0, 20.0), (1, 5.0), (2, 5.0)] {
            t.observe(at * 60, &speed(kph));
        }
        assert_eq!(
            t.counts(),
            [("ss.suspend_when".to_string(), 0)],
            "60 ns < 100"
        );
        t.observe(200, &speed(9.0));
        t.observe(ms(1), &speed(1.0));
        assert_eq!(t.counts()[0].1, 1, "counted once per run");
        assert_eq!(t.last_met_ns("ss.suspend_when"), Some(200));
        t.observe(ms(2), &speed(30.0));
        t.observe(ms(3), &speed(3.0));
        t.observe(ms(3) + 100, &speed(3.0));
        assert_eq!(t.counts()[0].1, 2, "a new run after a break");
        let switches = ["SPEED>50@0", "SPEED<10@0"].map(|s| parse_trigger(s).unwrap());
        let mut t =
            Triggers::new(Database::parse(DBC).unwrap(), None, None, switches.into()).unwrap();
        t.observe(0, &speed(60.0));
        assert_eq!(
            t.counts(),
            [
                ("mode.switch_when.0".to_string(), 1),
                ("mode.switch_when.1".to_string(), 0)
            ],
            "each switch condition has its own counter, named by its rank"
        );
        let e = Triggers::new(
            Database::parse(DBC).unwrap(),
            None,
            Some(parse_trigger("GAS>0").unwrap()),
            Vec::new(),
        )
        .err()
        .unwrap();
        assert_eq!((e.flag, e.signal.as_str()), ("--resume-when", "GAS"));
        assert_eq!(
            e.to_string(),
            "--resume-when GAS>0@0: no message of the DBC has signal GAS"
        );
    }
}
