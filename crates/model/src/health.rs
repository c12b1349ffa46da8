//! The `health:` key of an rt task and of a best-effort process: what the supervisor
//! watches and what it does when a supervision fires (docs/health.md). ARINC 653's
//! health monitor (error → recovery action per partition) and AUTOSAR's platform health
//! management (supervised entities, deadline and alive supervision, recovery actions)
//! are the models.
//!
//! ```yaml
//! health:
//!   on_miss: {misses: 3, within: 1s, action: {mode: safe}}     # rt tasks only
//!   on_overrun: {action: log}                                  # rt tasks only
//!   on_exit: {action: restart, then: {after: 3, action: stop}}
//!   watchdog: {timeout: 100ms, action: restart_partition}
//! ```
//!
//! An action is `log`, `restart`, `restart_partition`, `suspend`, `stop` or
//! `{mode: NAME}`; `then: {after: N, action: A}` escalates: once the supervision's
//! action was taken `N` times (default 1), the next firing takes `A` (which may have a
//! `then:` of its own).

pub mod monitor;

use crate::path_error::{err, Result};
use crate::units::Nanos;
use crate::units::{format_duration, parse_duration};
use serde::de::{self, value::MapAccessDeserializer, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    pub on_miss: Option<RawSupervision>,
    pub on_overrun: Option<RawSupervision>,
    pub on_exit: Option<RawSupervision>,
    pub watchdog: Option<RawSupervision>,
}

/// One supervision as written; which keys apply depends on the supervision.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawSupervision {
    pub misses: Option<u32>,
    pub within: Option<String>,
    pub timeout: Option<String>,
    pub action: RawAction,
    pub then: Option<Box<RawThen>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawThen {
    pub after: Option<u32>,
    pub action: RawAction,
    pub then: Option<Box<RawThen>>,
}

/// An action: its name, or `{mode: NAME}`.
#[derive(Debug)]
pub enum RawAction {
    Name(String),
    Mode(RawModeAction),
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawModeAction {
    pub mode: String,
}

impl<'de> Deserialize<'de> for RawAction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(ActionVisitor)
    }
}

struct ActionVisitor;

impl<'de> Visitor<'de> for ActionVisitor {
    type Value = RawAction;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an action (log, restart, restart_partition, suspend, stop) or {mode: NAME}")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(RawAction::Name(v.to_string()))
    }

    fn visit_map<A: de::MapAccess<'de>>(
        self,
        map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        RawModeAction::deserialize(MapAccessDeserializer::new(map)).map(RawAction::Mode)
    }
}

/// What the supervisor does when a supervision fires.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// A warning line and a `health_action` event, nothing else.
    Log,
    /// The task or process is started again (a task as its `resume` declares).
    Restart,
    /// Every task or process of its partition is started again.
    RestartPartition,
    /// The system switches to this mode (through the mode manager, as `ctl mode`).
    Mode(String),
    /// The system is suspended (through the stop-start manager, as `ctl suspend`).
    Suspend,
    /// The run stops and fails (exit status 1).
    Stop,
}

impl Action {
    /// The action as written (`mode: NAME` for a mode switch).
    pub fn text(&self) -> String {
        match self {
            Action::Log => "log".into(),
            Action::Restart => "restart".into(),
            Action::RestartPartition => "restart_partition".into(),
            Action::Mode(m) => format!("mode: {m}"),
            Action::Suspend => "suspend".into(),
            Action::Stop => "stop".into(),
        }
    }
}

/// An action and its escalation: `steps[0]` is taken first; once `steps[i]` was
/// taken `steps[i + 1].after` times, the next firing takes `steps[i + 1]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// How many times the previous step is taken before this one (0 for the first).
    pub after: u32,
    pub action: Action,
}

/// `on_miss`: `misses` deadline misses within `within` fire it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissSupervision {
    pub misses: u32,
    pub within: Nanos,
    pub escalation: Escalation,
}

/// `watchdog`: fires when no heartbeat came for `timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watchdog {
    pub timeout: Nanos,
    pub escalation: Escalation,
}

/// The supervisions of one task or process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Health {
    pub on_miss: Option<MissSupervision>,
    pub on_overrun: Option<Escalation>,
    pub on_exit: Option<Escalation>,
    pub watchdog: Option<Watchdog>,
}

/// What a [`Supervised`] entry supervises.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Member {
    /// The rt task of this name.
    Task(String),
    /// The process at this index of the partition's `processes`.
    Process(usize),
}

/// A task or process with a `health:` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supervised {
    pub partition: String,
    pub member: Member,
    pub health: Health,
}

impl Health {
    /// Every escalation with its supervision's key, in a fixed order.
    pub fn escalations(&self) -> Vec<(&'static str, &Escalation)> {
        let mut out = Vec::new();
        if let Some(m) = &self.on_miss {
            out.push(("on_miss", &m.escalation));
        }
        if let Some(e) = &self.on_overrun {
            out.push(("on_overrun", e));
        }
        if let Some(e) = &self.on_exit {
            out.push(("on_exit", e));
        }
        if let Some(w) = &self.watchdog {
            out.push(("watchdog", &w.escalation));
        }
        out
    }
}

/// Parses a `health:` key at `path` (syntax, units and which keys apply to which
/// supervision); [`validate`] checks it against the rest of the system.
pub fn parse(raw: RawHealth, path: &str, bare_unit: Option<u64>) -> Result<Health> {
    let duration = |text: &str, path: String| match parse_duration(text, bare_unit) {
        Ok(0) => err(path, "must be a positive duration"),
        Ok(ns) => Ok(ns),
        Err(e) => err(path, e),
    };
    let on_miss = match raw.on_miss {
        None => None,
        Some(s) => {
            let p = format!("{path}.on_miss");
            only(&s, &p, &["misses", "within"])?;
            let misses = match s.misses {
                None => return err(&p, "missing `misses` (how many misses fire it)"),
                Some(0) => return err(format!("{p}.misses"), "must be at least 1"),
                Some(n) => n,
            };
            let within = match &s.within {
                None => return err(&p, "missing `within` (the window the misses fall in)"),
                Some(w) => duration(w, format!("{p}.within"))?,
            };
            let escalation = escalation(s.action, s.then, &p)?;
            Some(MissSupervision {
                misses,
                within,
                escalation,
            })
        }
    };
    let plain = |s: Option<RawSupervision>, key: &str| -> Result<Option<Escalation>> {
        let Some(s) = s else { return Ok(None) };
        let p = format!("{path}.{key}");
        only(&s, &p, &[])?;
        escalation(s.action, s.then, &p).map(Some)
    };
    let on_overrun = plain(raw.on_overrun, "on_overrun")?;
    let on_exit = plain(raw.on_exit, "on_exit")?;
    let watchdog = match raw.watchdog {
        None => None,
        Some(s) => {
            let p = format!("{path}.watchdog");
            only(&s, &p, &["timeout"])?;
            let timeout = match &s.timeout {
                None => {
                    return err(
                        &p,
                        "missing `timeout` (how long without a heartbeat fires it)",
                    )
                }
                Some(t) => duration(t, format!("{p}.timeout"))?,
            };
            Some(Watchdog {
                timeout,
                escalation: escalation(s.action, s.then, &p)?,
            })
        }
    };
    Ok(Health {
        on_miss,
        on_overrun,
        on_exit,
        watchdog,
    })
}

/// Refuses the keys of `s` that its supervision (at `path`) does not take.
fn only(s: &RawSupervision, path: &str, allowed: &[&str]) -> Result<()> {
    let given = [
        ("misses", s.misses.is_some()),
        ("within", s.within.is_some()),
        ("timeout", s.timeout.is_some()),
    ];
    match given.iter().find(|(k, g)| *g && !allowed.contains(k)) {
        Some((key, _)) => err(
            format!("{path}.{key}"),
            "does not apply here: `misses` and `within` belong to `on_miss`, `timeout` to `watchdog`",
        ),
        None => Ok(()),
    }
}

fn escalation(action: RawAction, mut then: Option<Box<RawThen>>, path: &str) -> Result<Escalation> {
    let mut steps = vec![Step {
        after: 0,
        action: parse_action(action, &format!("{path}.action"))?,
    }];
    let mut p = path.to_string();
    while let Some(t) = then {
        p.push_str(".then");
        let after = match t.after {
            Some(0) => return err(format!("{p}.after"), "must be at least 1"),
            a => a.unwrap_or(1),
        };
        let action = parse_action(t.action, &format!("{p}.action"))?;
        steps.push(Step { after, action });
        then = t.then;
    }
    Ok(Escalation { steps })
}

fn parse_action(raw: RawAction, path: &str) -> Result<Action> {
    match raw {
        RawAction::Mode(m) if m.mode.trim().is_empty() => {
            err(format!("{path}.mode"), "must name a mode")
        }
        RawAction::Mode(m) => Ok(Action::Mode(m.mode)),
        RawAction::Name(name) => match name.as_str() {
            "log" => Ok(Action::Log),
            "restart" => Ok(Action::Restart),
            "restart_partition" => Ok(Action::RestartPartition),
            "suspend" => Ok(Action::Suspend),
            "stop" => Ok(Action::Stop),
            "mode" => err(path, "give the mode: `{mode: NAME}`"),
            other => err(
                path,
                format!(
                    "unknown action `{other}`: expected log, restart, restart_partition, suspend, stop or {{mode: NAME}}"
                ),
            ),
        },
    }
}

/// The canonical text of a `health:` value (one flow mapping).
pub fn canonical(h: &Health) -> String {
    let mut parts = Vec::new();
    if let Some(m) = &h.on_miss {
        parts.push(format!(
            "on_miss: {{misses: {}, within: {}, {}}}",
            m.misses,
            format_duration(m.within),
            escalation_text(&m.escalation)
        ));
    }
    if let Some(e) = &h.on_overrun {
        parts.push(format!("on_overrun: {{{}}}", escalation_text(e)));
    }
    if let Some(e) = &h.on_exit {
        parts.push(format!("on_exit: {{{}}}", escalation_text(e)));
    }
    if let Some(w) = &h.watchdog {
        parts.push(format!(
            "watchdog: {{timeout: {}, {}}}",
            format_duration(w.timeout),
            escalation_text(&w.escalation)
        ));
    }
    format!("{{{}}}", parts.join(", "))
}

fn escalation_text(e: &Escalation) -> String {
    let action = |a: &Action| match a {
        Action::Mode(m) => format!("{{mode: {}}}", crate::yaml::quote(m)),
        other => other.text(),
    };
    let mut text = format!("action: {}", action(&e.steps[0].action));
    let mut closing = String::new();
    for s in &e.steps[1..] {
        text.push_str(&format!(
            ", then: {{after: {}, action: {}",
            s.after,
            action(&s.action)
        ));
        closing.push('}');
    }
    text + &closing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(health: &str) -> std::result::Result<crate::Loaded, crate::Diagnostic> {
        let doc = format!(
            "system: {{}}\npartitions:\n  - name: a\n    kind: be\n    processes:\n      - cmd: x\n        health: {health}\n"
        );
        crate::load_bytes(doc.as_bytes(), "t.yaml")
    }

    #[test]
    fn an_escalation_keeps_its_steps_in_order_with_their_counts() {
        let loaded = load(
            "{on_exit: {action: restart, then: {after: 3, action: log, then: {action: stop}}}}",
        )
        .expect("valid");
        let s = &loaded.system.health[0];
        assert_eq!(s.partition, "a");
        assert_eq!(s.member, Member::Process(0));
        let steps = &s.health.on_exit.as_ref().expect("on_exit").steps;
        let got: Vec<(u32, Action)> = steps.iter().map(|s| (s.after, s.action.clone())).collect();
        assert_eq!(
            got,
            vec![(0, Action::Restart), (3, Action::Log), (1, Action::Stop)]
        );
    }

    #[test]
    fn a_health_key_survives_the_canonical_form() {
        let doc = "system: {}\nmodes:\n  initial: normal\n  table: [{name: normal}, {name: safe}]\npartitions:\n  - name: r\n    cpus: 1\n    tasks:\n      - {name: t, budget: 1ms, period: 10ms, health: {on_miss: {misses: 3, within: 1s, action: {mode: safe}, then: {after: 2, action: stop}}, on_overrun: {action: log}, watchdog: {timeout: 100ms, action: restart}}}\n";
        let first = crate::load_bytes(doc.as_bytes(), "t.yaml")
            .expect("valid")
            .system;
        let text = crate::to_canonical_yaml(&first);
        let again = crate::load_bytes(text.as_bytes(), "c.yaml")
            .expect("canonical valid")
            .system;
        assert_eq!(again.health, first.health);
        let miss = first.health[0].health.on_miss.as_ref().expect("on_miss");
        assert_eq!((miss.misses, miss.within), (3, 1_000_000_000));
        assert_eq!(miss.escalation.steps[1].action, Action::Stop);
    }

    #[test]
    fn a_process_cannot_supervise_misses() {
        let e = load("{on_miss: {misses: 1, within: 1s, action: log}}").unwrap_err();
        assert_eq!(e.path, "partitions[0].processes[0].health.on_miss");
        assert!(e.message.contains("applies to rt tasks"), "{e}");
    }

    #[test]
    fn a_mode_action_needs_modes() {
        let e = load("{on_exit: {action: {mode: safe}}}").unwrap_err();
        assert_eq!(e.path, "partitions[0].processes[0].health.on_exit.action");
        assert!(e.message.contains("`modes:`"), "{e}");
    }
}
