//! The `stop_start:` section: how the whole system is suspended and resumed
//! (JuMP2start 2.1-2.2, Fig. 2; docs/stop-start.md).
//!
//! ```yaml
//! stop_start:
//!   order: [hmi, control, gw]   # suspend order (resume: reversed); default: be partitions,
//!                               # then rt partitions, then the buses' gateway partitions
//!   ack_deadline: 5ms           # how long a program may take to acknowledge a suspend
//!   stale: drop                 # frames from before the resume never reach restartable tasks
//!   suspend_to_ram: false       # after freezing every partition, write `mem` to /sys/power/state
//!   suspend_when: {bus: rav4, signal: SPEED, below: 0.5, for: 3s}
//!   resume_when: {bus: rav4, signal: GAS_PEDAL, above: 0}
//! ```
//!
//! The suspend order is the paper's master power manager order: the less critical
//! partitions go first, the partition that holds the vehicle's I/O last (2.1: "the
//! master sandbox's BSP core is the last to suspend"); the resume runs it backwards.

pub(crate) mod settings;

pub use settings::{Compare, Stale, StopStart, Trigger, DEFAULT_ACK_DEADLINE};

use crate::path_error::{err, Result};
use crate::types::{Bus, PartitionKind, System};
use crate::units::{format_duration, parse_duration};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawStopStart {
    pub order: Option<Vec<String>>,
    pub ack_deadline: Option<String>,
    pub stale: Option<Stale>,
    pub suspend_to_ram: Option<bool>,
    pub suspend_when: Option<RawTrigger>,
    pub resume_when: Option<RawTrigger>,
}

/// A trigger's keys as written: `suspend_when` and `resume_when`, and each
/// `modes.switch_when` entry beside its `to` ([`TriggerReader`] reads them all).
#[derive(Debug)]
pub struct RawTrigger {
    pub bus: String,
    pub signal: String,
    pub below: Option<f64>,
    pub above: Option<f64>,
    /// `for`.
    pub hold: Option<String>,
}

impl<'de> Deserialize<'de> for RawTrigger {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let (_, trigger) = d.deserialize_map(TriggerReader { to: false })?;
        Ok(trigger)
    }
}

/// The one reader of a trigger's keys, with a `to` beside them when `to` is set (then
/// required): a mapping of these keys only, as `deny_unknown_fields` reads it (serde's
/// `flatten` cannot deny unknown keys). What it reads: `to`'s value (empty without
/// `to`), and the trigger.
pub(crate) struct TriggerReader {
    pub to: bool,
}

impl TriggerReader {
    /// The keys it takes, in the order an unknown key's error lists them.
    fn keys(&self) -> &'static [&'static str] {
        match self.to {
            true => &["to", "bus", "signal", "below", "above", "for"],
            false => &["bus", "signal", "below", "above", "for"],
        }
    }
}

impl<'de> Visitor<'de> for TriggerReader {
    type Value = (String, RawTrigger);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a mapping of {}", self.keys().join(", "))
    }

    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let (mut to, mut bus, mut signal) = (None, None, None);
        let (mut below, mut above, mut hold) = (None, None, None);
        while let Some(key) = map.next_key_seed(Key(self.keys()))? {
            match key {
                "to" => to = Some(map.next_value()?),
                "bus" => bus = Some(map.next_value()?),
                "signal" => signal = Some(map.next_value()?),
                "below" => below = map.next_value()?,
                "above" => above = map.next_value()?,
                _ => hold = map.next_value()?, // `for`, the last key `Key` lets through
            }
        }
        let missing = de::Error::missing_field;
        if self.to && to.is_none() {
            return Err(missing("to"));
        }
        let trigger = RawTrigger {
            bus: bus.ok_or_else(|| missing("bus"))?,
            signal: signal.ok_or_else(|| missing("signal"))?,
            below,
            above,
            hold,
        };
        Ok((to.unwrap_or_default(), trigger))
    }
}

/// A key of a trigger's mapping: one of these, else refused where it stands (its line,
/// column and key path), as a derived reader refuses it.
struct Key(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Key {
    type Value = &'static str;

    fn deserialize<D: Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<&'static str, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = &'static str;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "one of {}", self.0.join(", "))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> std::result::Result<&'static str, E> {
        let known = self.0.iter().find(|k| **k == key);
        known.copied().ok_or_else(|| E::unknown_field(key, self.0))
    }
}

impl StopStart {
    /// The settings of a system without a `stop_start:` section.
    pub fn defaults(system: &System) -> StopStart {
        StopStart {
            order: default_order(system),
            ack_deadline: DEFAULT_ACK_DEADLINE,
            stale: Stale::Drop,
            suspend_to_ram: false,
            suspend_when: None,
            resume_when: None,
        }
    }

    /// The triggers, each with its name (`suspend_when`, `resume_when`).
    pub fn triggers(&self) -> impl Iterator<Item = (&'static str, &Trigger)> {
        [
            ("suspend_when", self.suspend_when.as_ref()),
            ("resume_when", self.resume_when.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, t)| t.map(|t| (k, t)))
    }

    /// The partitions that stay awake while the others are suspended: the gateway
    /// partitions of the buses a trigger watches (they must see the resume condition).
    pub fn awake<'a>(&'a self, system: &'a System) -> Vec<&'a str> {
        let mut out: Vec<&str> = Vec::new();
        for (_, t) in self.triggers() {
            let gateway = system.buses.iter().find(|b| b.name == t.bus);
            if let Some(g) = gateway.map(|b| b.gateway.as_str()) {
                if !out.contains(&g) {
                    out.push(g);
                }
            }
        }
        out
    }
}

impl System {
    /// The stop-start settings: the section's, or the defaults.
    pub fn stop_start(&self) -> StopStart {
        self.stop_start
            .clone()
            .unwrap_or_else(|| StopStart::defaults(self))
    }
}

/// Best-effort partitions first, rt partitions after, the buses' gateway partitions last;
/// declaration order within each group.
pub fn default_order(system: &System) -> Vec<String> {
    let gateway = |name: &str| system.buses.iter().any(|b| b.gateway == name);
    let rank = |kind: PartitionKind, name: &str| match (gateway(name), kind) {
        (true, _) => 2,
        (false, PartitionKind::Rt) => 1,
        (false, PartitionKind::Be) => 0,
    };
    let mut order: Vec<(u8, usize, &str)> = system
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| (rank(p.kind, &p.name), i, p.name.as_str()))
        .collect();
    order.sort();
    order.into_iter().map(|(_, _, n)| n.to_string()).collect()
}

/// Normalizes the section against the rest of the system (partitions and buses known);
/// errors name the key path.
pub fn normalize(
    raw: Option<RawStopStart>,
    system: &System,
    bare_unit: Option<u64>,
) -> Result<Option<StopStart>> {
    let Some(raw) = raw else { return Ok(None) };
    let mut out = StopStart::defaults(system);
    if let Some(order) = raw.order {
        out.order = order_list(order, system)?;
    }
    if let Some(text) = raw.ack_deadline {
        let path = "stop_start.ack_deadline";
        out.ack_deadline = match parse_duration(&text, bare_unit) {
            Ok(0) => return err(path, "must be a positive duration"),
            Ok(ns) => ns,
            Err(e) => return err(path, e),
        };
    }
    out.stale = raw.stale.unwrap_or_default();
    out.suspend_to_ram = raw.suspend_to_ram.unwrap_or(false);
    out.suspend_when = raw
        .suspend_when
        .map(|t| trigger(t, &system.buses, "stop_start.suspend_when", bare_unit))
        .transpose()?;
    out.resume_when = raw
        .resume_when
        .map(|t| trigger(t, &system.buses, "stop_start.resume_when", bare_unit))
        .transpose()?;
    Ok(Some(out))
}

/// `order`: every partition exactly once.
fn order_list(order: Vec<String>, system: &System) -> Result<Vec<String>> {
    for (i, name) in order.iter().enumerate() {
        let path = format!("stop_start.order[{i}]");
        if system.partition(name).is_none() {
            return err(path, format!("unknown partition `{name}`"));
        }
        if order[..i].contains(name) {
            return err(path, format!("partition `{name}` is listed twice"));
        }
    }
    if let Some(p) = system.partitions.iter().find(|p| !order.contains(&p.name)) {
        return err(
            "stop_start.order",
            format!(
                "does not list partition `{}`: the order names every partition once",
                p.name
            ),
        );
    }
    Ok(order)
}

/// A trigger checked against the buses; errors name `path`'s keys.
pub(crate) fn trigger(
    t: RawTrigger,
    buses: &[Bus],
    path: &str,
    bare_unit: Option<u64>,
) -> Result<Trigger> {
    if !buses.iter().any(|b| b.name == t.bus) {
        let names: Vec<&str> = buses.iter().map(|b| b.name.as_str()).collect();
        let known = match names.is_empty() {
            true => "the system has no `buses`".to_string(),
            false => format!("buses: {}", names.join(", ")),
        };
        return err(
            format!("{path}.bus"),
            format!("unknown bus `{}` ({known})", t.bus),
        );
    }
    if t.signal.trim().is_empty() {
        return err(format!("{path}.signal"), "must not be empty");
    }
    let (compare, threshold) = match (t.below, t.above) {
        (Some(v), None) => (Compare::Below, v),
        (None, Some(v)) => (Compare::Above, v),
        (None, None) => return err(path, "give `below` or `above` (the signal's threshold)"),
        (Some(_), Some(_)) => {
            return err(
                format!("{path}.above"),
                "give either `below` or `above`, not both",
            )
        }
    };
    let hold = match t.hold {
        None => 0,
        Some(text) => {
            parse_duration(&text, bare_unit).or_else(|e| err(format!("{path}.for"), e))?
        }
    };
    Ok(Trigger {
        bus: t.bus,
        signal: t.signal,
        compare,
        threshold,
        hold,
    })
}

/// The canonical lines of the section (under `stop_start:`).
pub fn canonical_lines(s: &StopStart, quote: impl Fn(&str) -> String) -> Vec<String> {
    let order: Vec<String> = s.order.iter().map(|n| quote(n)).collect();
    let mut lines = vec![
        format!("order: [{}]", order.join(", ")),
        format!("ack_deadline: {}", format_duration(s.ack_deadline)),
        "stale: drop".to_string(),
        format!("suspend_to_ram: {}", s.suspend_to_ram),
    ];
    for (key, t) in s.triggers() {
        lines.push(format!("{key}: {{{}}}", trigger_text(t, &quote)));
    }
    lines
}

/// A trigger's keys in canonical form: `bus: B, signal: S, below: V, for: D`.
pub fn trigger_text(t: &Trigger, quote: &impl Fn(&str) -> String) -> String {
    let compare = match t.compare {
        Compare::Below => "below",
        Compare::Above => "above",
    };
    format!(
        "bus: {}, signal: {}, {compare}: {:?}, for: {}",
        quote(&t.bus),
        quote(&t.signal),
        t.threshold,
        format_duration(t.hold)
    )
}
