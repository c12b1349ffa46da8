//! Multi-mode systems (M2-Xen, Li et al., "Multi-Mode Virtualization for Soft Real-Time
//! Systems", RTAS 2018, Sec. III-IV): partitions scheduled as servers with a resource
//! interface, and the `modes:` section, a global mode table that gives, per mode and
//! partition, the task set that runs and the interface it runs in, with the switches
//! allowed between modes and the policy of each.
//!
//! ```yaml
//! partitions:
//!   - {name: nav, kind: rt, cpus: 0-1, interface: {period: 5ms}, tasks: [...]}
//! modes:
//!   initial: urban
//!   agent: {budget: 100us, period: 100ms}
//!   table:
//!     - name: urban
//!       partitions:
//!         nav: {tasks: [route, {name: map, budget: 2ms}], interface: {period: 5ms, budget: 2ms}}
//!     - name: highway
//!       partitions:
//!         nav: {tasks: [route]}
//!   transitions:
//!     - {from: urban, to: highway, policy: greedy}
//!   switch_when:
//!     - {to: highway, bus: rav4, signal: SPEED, above: 80, for: 2s}
//! ```
//!
//! A partition a mode does not list runs all its declared tasks in that mode; the tasks
//! bulkhead adds itself (a bus's gateway tasks) run in every mode. A partition listed by
//! some mode is *modal*: it has a mode agent (M2-Xen's DMM), a task of `agent.budget`
//! every `agent.period` (the minimum time between two mode requests) above all its tasks.

pub(crate) mod table;

pub use table::{
    Agent, LocalMode, Mode, ModeTask, Modes, Requester, ServerInterface, SwitchPolicy, SwitchWhen,
    Transition, AGENT_TASK, DEFAULT_AGENT_BUDGET, DEFAULT_AGENT_PERIOD,
};

use crate::path_error::{err, Result};
use crate::stop_start::{trigger, RawTrigger, TriggerReader};
use crate::types::{Bus, Cpus, Partition, PartitionKind, Resume, Service, System, Task};
use crate::units::parse_duration;
use crate::units::Nanos;
use serde::de::{self, value::MapAccessDeserializer, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::fmt;

impl System {
    /// The system as it runs in mode `name`: each partition with the task set and
    /// interface of that mode (the mode's period and budget where it gives them, the
    /// partition's otherwise) and, if modal, its mode agent as its first task (priority
    /// 0, above every task); no `modes`. `None` for an unknown mode. A system without
    /// modes is returned unchanged for any name.
    pub fn in_mode(&self, name: &str) -> Option<System> {
        let Some(modes) = &self.modes else {
            return Some(self.clone());
        };
        let mode = modes.mode(name)?;
        let mut system = self.clone();
        system.modes = None;
        for p in &mut system.partitions {
            let local = mode.partitions.iter().find(|l| l.partition == p.name);
            if let Some(local) = local {
                p.tasks = local_tasks(p, local);
                if let (Some(mine), Some(base)) = (local.interface, p.interface) {
                    p.interface = Some(ServerInterface {
                        period: mine.period.or(base.period),
                        budget: mine.budget.or(base.budget),
                    });
                }
            }
            if modes.is_modal(&p.name) {
                p.tasks.insert(0, agent_task(modes.agent));
            }
        }
        Some(system)
    }
}

/// The declared tasks `local` names, with its parameters, then the service tasks.
fn local_tasks(p: &Partition, local: &LocalMode) -> Vec<Task> {
    let named = local.tasks.iter().filter_map(|m| {
        let declared = p.tasks.iter().find(|t| t.name == m.name)?;
        let period = m.period.unwrap_or(declared.period);
        let implicit = declared.deadline == declared.period;
        Some(Task {
            budget: m.budget.unwrap_or(declared.budget),
            period,
            deadline: m
                .deadline
                .unwrap_or(if implicit { period } else { declared.deadline }),
            ..declared.clone()
        })
    });
    let services = p.tasks.iter().filter(|t| t.service.is_some()).cloned();
    named.chain(services).collect()
}

fn agent_task(agent: Agent) -> Task {
    Task {
        priority: Some(0),
        resume: Resume::Restartable,
        service: Some(Service::ModeAgent),
        ..Task::periodic(AGENT_TASK, agent.budget, agent.period)
    }
}

// ----- the file as written -----

/// `interface:` of a partition or of a partition in a mode.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RawInterface {
    pub period: Option<String>,
    pub budget: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawModes {
    pub initial: String,
    pub agent: Option<RawAgent>,
    pub table: Vec<RawMode>,
    pub transitions: Option<Vec<RawTransition>>,
    pub requesters: Option<Vec<RawRequester>>,
    pub switch_when: Option<Vec<RawSwitchWhen>>,
}

/// One `modes.switch_when` entry: the target mode, and a stop-start trigger's keys read
/// beside it by the trigger's reader.
#[derive(Debug)]
pub struct RawSwitchWhen {
    pub to: String,
    pub when: RawTrigger,
}

impl<'de> Deserialize<'de> for RawSwitchWhen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let (to, when) = d.deserialize_map(TriggerReader { to: true })?;
        Ok(RawSwitchWhen { to, when })
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawRequester {
    pub partition: String,
    pub modes: Option<Vec<String>>,
    pub suspend: Option<bool>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawAgent {
    pub budget: Option<String>,
    pub period: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawMode {
    pub name: String,
    pub partitions: Option<Ordered<RawLocalMode>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawLocalMode {
    pub tasks: Option<Vec<RawModeTask>>,
    pub interface: Option<RawInterface>,
}

/// A task in a mode: its name, or a mapping with changed parameters.
#[derive(Debug)]
pub struct RawModeTask {
    pub name: String,
    pub budget: Option<String>,
    pub period: Option<String>,
    pub deadline: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModeTaskMap {
    name: String,
    budget: Option<String>,
    period: Option<String>,
    deadline: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawTransition {
    pub from: String,
    pub to: String,
    pub policy: Option<SwitchPolicy>,
}

/// A mapping with keys chosen by the user, kept in source order.
#[derive(Debug)]
pub struct Ordered<T>(pub Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct OrderedVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for OrderedVisitor<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping from partition names")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, T>()? {
                    entries.push((key, value));
                }
                Ok(Ordered(entries))
            }
        }
        d.deserialize_map(OrderedVisitor(std::marker::PhantomData))
    }
}

impl<'de> Deserialize<'de> for RawModeTask {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct TaskVisitor;
        impl<'de> Visitor<'de> for TaskVisitor {
            type Value = RawModeTask;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a task name or a mapping {name, budget, period, deadline}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<RawModeTask, E> {
                Ok(RawModeTask {
                    name: v.to_string(),
                    budget: None,
                    period: None,
                    deadline: None,
                })
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                map: A,
            ) -> std::result::Result<RawModeTask, A::Error> {
                let m = RawModeTaskMap::deserialize(MapAccessDeserializer::new(map))?;
                Ok(RawModeTask {
                    name: m.name,
                    budget: m.budget,
                    period: m.period,
                    deadline: m.deadline,
                })
            }
        }
        d.deserialize_any(TaskVisitor)
    }
}

// ----- normalization -----

/// Durations in this section: `bare` is the unit of a bare number (DEmOS files: ms).
struct Units {
    bare: Option<Nanos>,
}

impl Units {
    fn positive(&self, text: &str, path: &str) -> Result<Nanos> {
        match parse_duration(text, self.bare) {
            Ok(0) => err(path, "must be a positive duration"),
            Ok(ns) => Ok(ns),
            Err(e) => err(path, e),
        }
    }

    fn optional(&self, text: Option<String>, path: &str) -> Result<Option<Nanos>> {
        text.map(|t| self.positive(&t, path)).transpose()
    }
}

/// The interface of a partition or of a partition in a mode.
pub fn interface(
    raw: Option<RawInterface>,
    bare: Option<Nanos>,
    path: &str,
) -> Result<Option<ServerInterface>> {
    let Some(raw) = raw else { return Ok(None) };
    let units = Units { bare };
    let interface = ServerInterface {
        period: units.optional(raw.period, &format!("{path}.period"))?,
        budget: units.optional(raw.budget, &format!("{path}.budget"))?,
    };
    if let (Some(p), Some(b)) = (interface.period, interface.budget) {
        if b > p {
            return err(format!("{path}.budget"), "exceeds the period");
        }
    }
    Ok(Some(interface))
}

/// The `modes:` section, checked on its own (names against the partitions are checked
/// by [`validate`]).
pub fn normalize(
    raw: Option<RawModes>,
    buses: &[Bus],
    bare: Option<Nanos>,
) -> Result<Option<Modes>> {
    let Some(raw) = raw else { return Ok(None) };
    let units = Units { bare };
    let agent = match raw.agent {
        None => Agent {
            budget: DEFAULT_AGENT_BUDGET,
            period: DEFAULT_AGENT_PERIOD,
        },
        Some(a) => Agent {
            budget: units
                .optional(a.budget, "modes.agent.budget")?
                .unwrap_or(DEFAULT_AGENT_BUDGET),
            period: units
                .optional(a.period, "modes.agent.period")?
                .unwrap_or(DEFAULT_AGENT_PERIOD),
        },
    };
    if agent.budget > agent.period {
        return err("modes.agent.budget", "exceeds the agent's period");
    }
    if raw.table.is_empty() {
        return err("modes.table", "must list at least one mode");
    }
    let table = raw
        .table
        .into_iter()
        .enumerate()
        .map(|(i, m)| mode(m, &units, &format!("modes.table[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let transitions = raw.transitions.map(|list| {
        list.into_iter()
            .map(|t| Transition {
                from: t.from,
                to: t.to,
                policy: t.policy.unwrap_or_default(),
            })
            .collect()
    });
    let requesters = raw.requesters.unwrap_or_default().into_iter();
    let requesters = requesters.map(|r| Requester {
        partition: r.partition,
        modes: r.modes.unwrap_or_default(),
        suspend: r.suspend.unwrap_or(false),
    });
    let switch_when = raw.switch_when.unwrap_or_default().into_iter().enumerate();
    let switch_when = switch_when.map(|(i, s)| {
        let when = trigger(s.when, buses, &format!("modes.switch_when[{i}]"), bare)?;
        Ok(SwitchWhen { to: s.to, when })
    });
    Ok(Some(Modes {
        initial: raw.initial,
        agent,
        table,
        transitions,
        requesters: requesters.collect(),
        switch_when: switch_when.collect::<Result<Vec<_>>>()?,
    }))
}

fn mode(raw: RawMode, units: &Units, path: &str) -> Result<Mode> {
    if raw.name.trim().is_empty() {
        return err(format!("{path}.name"), "must not be empty");
    }
    let mut partitions = Vec::new();
    for (name, local) in raw.partitions.map(|o| o.0).unwrap_or_default() {
        let lpath = format!("{path}.partitions.{name}");
        let tasks = local
            .tasks
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(j, t)| mode_task(t, units, &format!("{lpath}.tasks[{j}]")))
            .collect::<Result<Vec<_>>>()?;
        let interface = interface(local.interface, units.bare, &format!("{lpath}.interface"))?;
        partitions.push(LocalMode {
            partition: name,
            tasks,
            interface,
        });
    }
    Ok(Mode {
        name: raw.name,
        partitions,
    })
}

fn mode_task(raw: RawModeTask, units: &Units, path: &str) -> Result<ModeTask> {
    Ok(ModeTask {
        budget: units.optional(raw.budget, &format!("{path}.budget"))?,
        period: units.optional(raw.period, &format!("{path}.period"))?,
        deadline: units.optional(raw.deadline, &format!("{path}.deadline"))?,
        name: raw.name,
    })
}

// ----- validation -----

/// Whether two partitions may share CPUs: both are scheduled as servers on the same
/// CPU set (a pool whose bandwidth their interfaces divide).
pub fn same_pool(a: &Partition, b: &Partition) -> bool {
    a.interface.is_some() && b.interface.is_some() && a.cpus == b.cpus
}

/// Checks the interfaces of partitions and the `modes:` section against the partitions
/// (`paths[i]` is where partition i is defined).
pub fn validate(system: &System, paths: &[String]) -> Result<()> {
    for (p, path) in system.partitions.iter().zip(paths) {
        if p.interface.is_some() && p.kind != PartitionKind::Rt {
            return err(
                format!("{path}.interface"),
                "only rt partitions are scheduled as servers",
            );
        }
        if p.interface.is_some() && p.cpus == Some(Cpus::All) && system.cpus.is_none() {
            return err(
                format!("{path}.cpus"),
                "a partition scheduled as a server on `all` CPUs needs `system.cpus` (the CPUs of its pool)",
            );
        }
    }
    let Some(modes) = &system.modes else {
        return Ok(());
    };
    let mut names = HashSet::new();
    for (i, m) in modes.table.iter().enumerate() {
        if !names.insert(m.name.as_str()) {
            return err(
                format!("modes.table[{i}].name"),
                format!("duplicate mode name `{}`", m.name),
            );
        }
        check_mode(system, m, &format!("modes.table[{i}]"))?;
    }
    if !names.contains(modes.initial.as_str()) {
        return err("modes.initial", format!("unknown mode `{}`", modes.initial));
    }
    check_transitions(modes, &names)?;
    check_requesters(system, modes, &names)?;
    check_switch_when(modes)?;
    check_agent_names(system, modes, paths)
}

/// Each requester names a declared partition, at most once, modes of the table, and
/// asks for something (a mode or the suspend).
fn check_requesters(system: &System, modes: &Modes, names: &HashSet<&str>) -> Result<()> {
    for (i, r) in modes.requesters.iter().enumerate() {
        let path = format!("modes.requesters[{i}]");
        if system.partition(&r.partition).is_none() {
            let known: Vec<&str> = system.partitions.iter().map(|p| p.name.as_str()).collect();
            return err(
                format!("{path}.partition"),
                format!(
                    "unknown partition `{}` (partitions: {})",
                    r.partition,
                    known.join(", ")
                ),
            );
        }
        if modes.requesters[..i]
            .iter()
            .any(|o| o.partition == r.partition)
        {
            return err(
                format!("{path}.partition"),
                format!("partition `{}` is listed twice", r.partition),
            );
        }
        if let Some(j) = r.modes.iter().position(|m| !names.contains(m.as_str())) {
            let known: Vec<&str> = modes.table.iter().map(|m| m.name.as_str()).collect();
            return err(
                format!("{path}.modes[{j}]"),
                format!(
                    "unknown mode `{}` (modes: {})",
                    r.modes[j],
                    known.join(", ")
                ),
            );
        }
        if r.modes.is_empty() && !r.suspend {
            return err(path, "allows nothing: give `modes` or `suspend: true`");
        }
    }
    Ok(())
}

fn check_mode(system: &System, m: &Mode, path: &str) -> Result<()> {
    for local in &m.partitions {
        let lpath = format!("{path}.partitions.{}", local.partition);
        let Some(p) = system.partition(&local.partition) else {
            return err(lpath, format!("unknown partition `{}`", local.partition));
        };
        if p.kind != PartitionKind::Rt {
            return err(
                lpath,
                format!(
                    "`{}` is not an rt partition: only rt partitions change task sets with modes",
                    p.name
                ),
            );
        }
        if local.interface.is_some() && p.interface.is_none() {
            return err(format!("{lpath}.interface"), format!("partition `{}` owns its CPUs: give it an `interface` in `partitions` to schedule it as a server", p.name));
        }
        let declared: HashMap<&str, &Task> = p
            .tasks
            .iter()
            .filter(|t| t.service.is_none())
            .map(|t| (t.name.as_str(), t))
            .collect();
        for (j, t) in local.tasks.iter().enumerate() {
            let tpath = format!("{lpath}.tasks[{j}]");
            if !declared.contains_key(t.name.as_str()) {
                return err(
                    tpath,
                    format!("partition `{}` declares no task `{}`", p.name, t.name),
                );
            }
            if local.tasks[..j].iter().any(|o| o.name == t.name) {
                return err(tpath, format!("task `{}` is listed twice", t.name));
            }
        }
    }
    Ok(())
}

/// Each `switch_when` goes to a mode of the table that some allowed switch leads to.
fn check_switch_when(modes: &Modes) -> Result<()> {
    let allowed = modes.allowed();
    for (i, s) in modes.switch_when.iter().enumerate() {
        let path = format!("modes.switch_when[{i}].to");
        if modes.mode(&s.to).is_none() {
            let known: Vec<&str> = modes.table.iter().map(|m| m.name.as_str()).collect();
            let known = known.join(", ");
            return err(path, format!("unknown mode `{}` (modes: {known})", s.to));
        }
        if !allowed.iter().any(|(_, to, _)| *to == s.to) {
            return err(
                path,
                format!("no transition in `modes.transitions` leads to `{}`", s.to),
            );
        }
    }
    Ok(())
}

fn check_transitions(modes: &Modes, names: &HashSet<&str>) -> Result<()> {
    let Some(list) = &modes.transitions else {
        return Ok(());
    };
    for (i, t) in list.iter().enumerate() {
        let path = format!("modes.transitions[{i}]");
        for (key, name) in [("from", &t.from), ("to", &t.to)] {
            if !names.contains(name.as_str()) {
                return err(format!("{path}.{key}"), format!("unknown mode `{name}`"));
            }
        }
        if t.from == t.to {
            return err(format!("{path}.to"), "a switch goes to another mode");
        }
        if list[..i].iter().any(|o| o.from == t.from && o.to == t.to) {
            return err(
                path,
                format!("the switch {} -> {} is listed twice", t.from, t.to),
            );
        }
    }
    Ok(())
}

fn check_agent_names(system: &System, modes: &Modes, paths: &[String]) -> Result<()> {
    for (p, path) in system.partitions.iter().zip(paths) {
        if !modes.is_modal(&p.name) {
            continue;
        }
        if let Some(i) = p.tasks.iter().position(|t| t.name == AGENT_TASK) {
            return err(
                format!("{path}.tasks[{i}].name"),
                format!("`{AGENT_TASK}` is the name of the partition's mode agent"),
            );
        }
    }
    Ok(())
}

// ----- canonical form -----

/// The `interface` value in canonical form, e.g. `{period: 5ms, budget: 2ms}`.
pub fn interface_text(i: &ServerInterface) -> String {
    let fields: Vec<String> = [("period", i.period), ("budget", i.budget)]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}: {}", crate::units::format_duration(v))))
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// The lines of the `modes:` section (after its key), indented by two spaces.
pub fn canonical_lines(modes: &Modes, quote: impl Fn(&str) -> String) -> Vec<String> {
    let dur = crate::units::format_duration;
    let mut lines = vec![
        format!("initial: {}", quote(&modes.initial)),
        format!(
            "agent: {{budget: {}, period: {}}}",
            dur(modes.agent.budget),
            dur(modes.agent.period)
        ),
        "table:".to_string(),
    ];
    for m in &modes.table {
        lines.push(format!("  - name: {}", quote(&m.name)));
        if m.partitions.is_empty() {
            lines.push("    partitions: {}".to_string());
            continue;
        }
        lines.push("    partitions:".to_string());
        for local in &m.partitions {
            let tasks: Vec<String> = local
                .tasks
                .iter()
                .map(|t| mode_task_text(t, &quote))
                .collect();
            let interface = local
                .interface
                .map(|i| format!(", interface: {}", interface_text(&i)))
                .unwrap_or_default();
            lines.push(format!(
                "      {}: {{tasks: [{}]{interface}}}",
                quote(&local.partition),
                tasks.join(", ")
            ));
        }
    }
    match &modes.transitions {
        Some(list) if list.is_empty() => lines.push("transitions: []".to_string()),
        Some(_) => lines.push("transitions:".to_string()),
        None => {}
    }
    if let Some(list) = &modes.transitions {
        lines.extend(list.iter().map(|t| {
            format!(
                "  - {{from: {}, to: {}, policy: {}}}",
                quote(&t.from),
                quote(&t.to),
                t.policy.name()
            )
        }));
    }
    if !modes.requesters.is_empty() {
        lines.push("requesters:".to_string());
    }
    lines.extend(modes.requesters.iter().map(|r| {
        let allowed: Vec<String> = r.modes.iter().map(|m| quote(m)).collect();
        format!(
            "  - {{partition: {}, modes: [{}], suspend: {}}}",
            quote(&r.partition),
            allowed.join(", "),
            r.suspend
        )
    }));
    if !modes.switch_when.is_empty() {
        lines.push("switch_when:".to_string());
    }
    lines.extend(modes.switch_when.iter().map(|s| {
        let when = crate::stop_start::trigger_text(&s.when, &quote);
        format!("  - {{to: {}, {when}}}", quote(&s.to))
    }));
    lines
}

fn mode_task_text(t: &ModeTask, quote: &impl Fn(&str) -> String) -> String {
    let changed: Vec<String> = [
        ("budget", t.budget),
        ("period", t.period),
        ("deadline", t.deadline),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| format!("{k}: {}", crate::units::format_duration(v))))
    .collect();
    if changed.is_empty() {
        return quote(&t.name);
    }
    format!("{{name: {}, {}}}", quote(&t.name), changed.join(", "))
}
