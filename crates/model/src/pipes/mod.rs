//! The `pipelines:` section: pipelines of tuned pipes (Boomerang, RTAS 2020, III-A to
//! III-D), each a graph of stages written in the paper's expression language, with an
//! end-to-end QoS the solver (`bulkhead-analysis`, `pipes.rs`) turns into periods,
//! budgets and buffer depths.
//!
//! ```yaml
//! pipelines:
//!   - name: p1
//!     spec: "*CanRead|ProcData|CanWrite[500/s,10ms]"
//!     stages:
//!       CanRead:  {partition: quest, cmd: "...", wcet: 100us, input: can:rav4}
//!       ProcData: {partition: linux, cmd: "...", wcet: 200us}
//!       CanWrite: {partition: quest, cmd: "...", wcet: 100us, output: can:rav4}
//! ```
//!
//! Grammar of `spec` (Boomerang III-D, `[*](A|B),C|D|E,F[e2e_tput|loss_rate,e2e_delay]`):
//!
//! ```text
//! spec     := ['*'] sequence ['[' qos ']']
//! sequence := parallel ('|' parallel)*     each sink of the left feeds each source of the right
//! parallel := item (',' item)*             sections side by side
//! item     := NAME | '(' sequence ')'
//! qos      := value [',' value]            500/s (throughput, fifo) or 20% (loss, four-slot),
//!                                          then the delay (10ms); a lone duration is the delay
//! ```

pub(crate) mod graph;

pub use graph::{EdgeBuffer, Endpoint, EndpointError, Pipeline, Qos, Stage};

use graph::topological;

use crate::path_error::PathError;
use crate::types::{BridgeDirection, ChannelKind, Overflow, PartitionKind, System};
use crate::units::Nanos;
use crate::units::{format_duration, parse_duration, percent_ppm};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawPipeline {
    pub name: String,
    pub spec: String,
    pub overflow: Option<Overflow>,
    pub stages: BTreeMap<String, RawStage>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawStage {
    pub partition: String,
    pub cmd: Option<String>,
    pub wcet: String,
    pub input: Option<String>,
    pub output: Option<String>,
    pub period: Option<String>,
    pub budget: Option<String>,
    pub priority: Option<u32>,
}

/// An error in the pipelines section: a key path and, for an error inside `spec`, the
/// character index in the string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipeError {
    pub path: String,
    pub offset: Option<usize>,
    pub message: String,
}

fn at<T>(path: impl Into<String>, message: impl Into<String>) -> Result<T, PipeError> {
    Err(PipeError {
        path: path.into(),
        offset: None,
        message: message.into(),
    })
}

impl From<PathError> for PipeError {
    fn from(e: PathError) -> PipeError {
        PipeError {
            path: e.path,
            offset: None,
            message: e.message,
        }
    }
}

/// Normalizes and validates the pipelines of `system` (whose other sections are loaded).
pub(crate) fn normalize(
    raw: Option<Vec<RawPipeline>>,
    system: &System,
) -> Result<Vec<Pipeline>, PipeError> {
    let raw = raw.unwrap_or_default();
    if !raw.is_empty() && system.modes.is_some() {
        return at(
            "pipelines",
            "pipelines in a system with modes are not supported yet",
        );
    }
    let mut out: Vec<Pipeline> = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let path = format!("pipelines[{i}]");
        if r.name.is_empty() {
            return at(format!("{path}.name"), "must not be empty");
        }
        if out.iter().any(|p| p.name == r.name) {
            return at(
                format!("{path}.name"),
                format!("a pipeline `{}` is already defined", r.name),
            );
        }
        let pipeline = pipeline(r, &path, system)?;
        check_task_names(&pipeline, &out, system, &path)?;
        out.push(pipeline);
    }
    Ok(out)
}

fn pipeline(r: RawPipeline, path: &str, system: &System) -> Result<Pipeline, PipeError> {
    let spec_path = format!("{path}.spec");
    let parsed = parse_spec(&r.spec).map_err(|(offset, message)| PipeError {
        path: spec_path.clone(),
        offset: Some(offset),
        message,
    })?;
    for (name, offset) in &parsed.names {
        if !r.stages.contains_key(name) {
            return Err(PipeError {
                path: spec_path,
                offset: Some(*offset),
                message: format!("stage `{name}` is not defined in `stages`"),
            });
        }
    }
    if let Some(name) = r.stages.keys().find(|k| !parsed.names.contains_key(*k)) {
        return at(
            format!("{path}.stages.{name}"),
            format!("stage `{name}` is not named in `spec`"),
        );
    }
    if let Err(cycle) = topological(parsed.order.len(), &parsed.edges) {
        let names: Vec<String> = cycle
            .iter()
            .map(|&i| format!("`{}`", parsed.order[i]))
            .collect();
        return at(
            spec_path,
            format!("a cycle through stages {}", names.join(", ")),
        );
    }
    let qos = qos(&parsed, &spec_path)?;
    let mut raw_stages = r.stages;
    let mut stages = Vec::new();
    for name in &parsed.order {
        let s = raw_stages.remove(name).expect("checked above");
        stages.push(stage(name, s, &format!("{path}.stages.{name}"), system)?);
    }
    let p = Pipeline {
        name: r.name,
        spec: r.spec,
        buffering: parsed.buffering,
        qos,
        stages,
        edges: parsed.edges,
        overflow: r.overflow.unwrap_or_default(),
        buffers: Vec::new(),
    };
    check_outputs(&p, path)?;
    Ok(p)
}

/// Every stage must reach a stage that declares an `output`.
fn check_outputs(p: &Pipeline, path: &str) -> Result<(), PipeError> {
    let mut reaches: Vec<bool> = p.stages.iter().map(|s| s.output.is_some()).collect();
    for &i in p.topological_order().iter().rev() {
        if p.edges.iter().any(|&(a, c)| a == i && reaches[c]) {
            reaches[i] = true;
        }
    }
    match reaches.iter().position(|r| !r) {
        Some(i) => {
            let name = &p.stages[i].name;
            at(
                format!("{path}.stages.{name}"),
                format!("stage `{name}` has no path to an output (a stage with `output:`)"),
            )
        }
        None => Ok(()),
    }
}

/// A stage becomes a task of its partition: its name must be free there.
fn check_task_names(
    p: &Pipeline,
    earlier: &[Pipeline],
    system: &System,
    path: &str,
) -> Result<(), PipeError> {
    for s in &p.stages {
        let partition = system.partition(&s.partition).expect("checked");
        let gateway = system.buses.iter().filter(|b| b.gateway == s.partition);
        let mut gateway_tasks = gateway.flat_map(|b| [b.reader_task(), b.writer_task()]);
        let taken = partition.tasks.iter().any(|t| t.name == s.name)
            || gateway_tasks.any(|t| t == s.name)
            || earlier
                .iter()
                .flat_map(|q| &q.stages)
                .any(|q| q.partition == s.partition && q.name == s.name);
        if taken {
            return at(
                format!("{path}.stages.{}", s.name),
                format!(
                    "partition `{}` already has a task `{}` (a stage becomes a task of its partition)",
                    s.partition, s.name
                ),
            );
        }
    }
    Ok(())
}

fn stage(name: &str, s: RawStage, path: &str, system: &System) -> Result<Stage, PipeError> {
    let duration = |text: &str, key: &str| -> Result<Nanos, PipeError> {
        match parse_duration(text, None) {
            Ok(0) => at(format!("{path}.{key}"), "must be a positive duration"),
            Ok(ns) => Ok(ns),
            Err(e) => at(format!("{path}.{key}"), e),
        }
    };
    match system.partition(&s.partition) {
        None => {
            return at(
                format!("{path}.partition"),
                format!("no partition `{}`", s.partition),
            )
        }
        Some(p) if p.kind != PartitionKind::Rt => {
            return at(
                format!("{path}.partition"),
                format!(
                    "partition `{}` is not an rt partition (a stage is an rt task)",
                    s.partition
                ),
            )
        }
        Some(_) => {}
    }
    if s.priority == Some(0) {
        return at(
            format!("{path}.priority"),
            "must be at least 1 (1 is the highest priority)",
        );
    }
    let wcet = duration(&s.wcet, "wcet")?;
    let period = s
        .period
        .as_deref()
        .map(|t| duration(t, "period"))
        .transpose()?;
    let budget = s
        .budget
        .as_deref()
        .map(|t| duration(t, "budget"))
        .transpose()?;
    if let Some(b) = budget {
        if b < wcet {
            return at(
                format!("{path}.budget"),
                format!(
                    "{} is less than the wcet {} of one message",
                    format_duration(b),
                    format_duration(wcet)
                ),
            );
        }
    }
    if let Some(t) = period {
        if t <= budget.unwrap_or(wcet) {
            return at(
                format!("{path}.period"),
                "must exceed the budget (T > C, Boomerang III-E)",
            );
        }
    }
    let endpoint = |text: Option<String>, key: &str, input: bool| -> Result<_, PipeError> {
        let Some(text) = text else { return Ok(None) };
        let e = Endpoint::parse(&text).or_else(|e| at(format!("{path}.{key}"), e.to_string()))?;
        check_endpoint(&e, &s.partition, input, system)
            .or_else(|e| at(format!("{path}.{key}"), e.to_string()))?;
        Ok(Some(e))
    };
    Ok(Stage {
        name: name.into(),
        partition: s.partition.clone(),
        cmd: s.cmd.clone().unwrap_or_default(),
        wcet,
        input: endpoint(s.input.clone(), "input", true)?,
        output: endpoint(s.output.clone(), "output", false)?,
        period,
        budget,
        priority: s.priority,
    })
}

/// The access rule: a stage reaches a bus only from the bus's gateway partition or a
/// client partition of that bus, and a bridged channel only as its local reader (an
/// `input`, of a subscribed channel) or writer (an `output`, of a published one); a task
/// endpoint must name a partition.
fn check_endpoint(
    e: &Endpoint,
    partition: &str,
    input: bool,
    system: &System,
) -> Result<(), EndpointError> {
    match e {
        Endpoint::Zenoh { channel } => check_bridged(channel, partition, input, system),
        Endpoint::Can { bus, .. } => {
            let Some(b) = system.buses.iter().find(|b| &b.name == bus) else {
                return Err(EndpointError::NoBus(bus.clone()));
            };
            let client = b.clients.iter().any(|c| c.partition == partition);
            match client || b.gateway == partition {
                true => Ok(()),
                false => Err(EndpointError::NotOnBus {
                    partition: partition.into(),
                    bus: bus.clone(),
                }),
            }
        }
        Endpoint::Task { partition: p, .. } => match system.partition(p) {
            Some(_) => Ok(()),
            None => Err(EndpointError::NoPartition(p.clone())),
        },
    }
}

/// `zenoh:CHANNEL` as a stage's input (`input`) or output, from `partition`.
fn check_bridged(
    channel: &str,
    partition: &str,
    input: bool,
    system: &System,
) -> Result<(), EndpointError> {
    let c = system.channels.iter().find(|c| c.name == channel);
    let Some((c, b)) = c.and_then(|c| Some((c, c.bridge.as_ref()?))) else {
        return Err(EndpointError::NoBridge(channel.into()));
    };
    let (key, want, end) = match input {
        true => (
            "input",
            "subscribed from a Zenoh key (`writer: zenoh`)",
            "reader",
        ),
        false => ("output", "published on a Zenoh key", "writer"),
    };
    let direction = match b.direction {
        BridgeDirection::Publish => "published",
        BridgeDirection::Subscribe => "subscribed (`writer: zenoh`)",
    };
    if (b.direction == BridgeDirection::Subscribe) != input {
        return Err(EndpointError::BridgeDirection {
            channel: channel.into(),
            direction,
            key,
            want,
        });
    }
    let local = match input {
        true => c.readers.iter().any(|r| r == partition),
        false => c.writer == partition,
    };
    match local {
        true => Ok(()),
        false => Err(EndpointError::NotOnBridge {
            partition: partition.into(),
            channel: channel.into(),
            end,
        }),
    }
}

/// The QoS values, each checked against the pipeline's buffering.
fn qos(parsed: &Parsed, path: &str) -> Result<Qos, PipeError> {
    let mut q = Qos::default();
    let fail = |offset: usize, message: String| PipeError {
        path: path.into(),
        offset: Some(offset),
        message,
    };
    let n = parsed.qos.len();
    for (k, (text, offset)) in parsed.qos.iter().enumerate() {
        let value = qos_value(text).map_err(|e| fail(*offset, e.to_string()))?;
        let fifo = parsed.buffering == ChannelKind::Fifo;
        match value {
            QosValue::Delay(_) if n == 2 && k == 0 => {
                return Err(fail(
                    *offset,
                    "expected a throughput (`500/s`) or a loss rate (`20%`) before the delay"
                        .into(),
                ))
            }
            QosValue::Delay(d) => q.delay = Some(d),
            _ if k == 1 => {
                return Err(fail(*offset, "expected the delay (e.g. `10ms`)".into()));
            }
            QosValue::Throughput(_) if !fifo => {
                return Err(fail(*offset, "a throughput applies to FIFO pipelines (`*` in front); a four-slot pipeline takes a loss rate such as `20%`".into()));
            }
            QosValue::Loss(_) if fifo => {
                return Err(fail(*offset, "a loss rate applies to four-slot pipelines; a FIFO pipeline (`*`) is lossless and takes a throughput such as `500/s`".into()));
            }
            QosValue::Throughput(t) => q.throughput_per_s = Some(t),
            QosValue::Loss(l) => q.loss_ppm = Some(l),
        }
    }
    Ok(q)
}

enum QosValue {
    Throughput(u64),
    Loss(u32),
    Delay(Nanos),
}

/// Why a QoS value is none of a throughput, a loss rate and a delay.
#[derive(Debug, thiserror::Error)]
enum QosError {
    #[error("`{0}`: a throughput is a positive whole number of messages per second, e.g. `500/s`")]
    Throughput(String),
    #[error("`{0}`: a loss rate is a percentage from 0% to 100%, e.g. `20%`")]
    Loss(String),
    #[error("`{0}`: the delay must be positive")]
    ZeroDelay(String),
    #[error("{0} (a QoS value is a throughput `500/s`, a loss rate `20%` or a delay `10ms`)")]
    Delay(#[source] crate::units::UnitError),
}

fn qos_value(text: &str) -> Result<QosValue, QosError> {
    if let Some(n) = text.strip_suffix("/s") {
        return match n.trim().parse::<u64>() {
            Ok(v) if v > 0 => Ok(QosValue::Throughput(v)),
            _ => Err(QosError::Throughput(text.into())),
        };
    }
    if let Some(n) = text.strip_suffix('%') {
        return percent_ppm(n.trim())
            .map(QosValue::Loss)
            .ok_or_else(|| QosError::Loss(text.into()));
    }
    match parse_duration(text, None) {
        Ok(0) => Err(QosError::ZeroDelay(text.into())),
        Ok(d) => Ok(QosValue::Delay(d)),
        Err(e) => Err(QosError::Delay(e)),
    }
}

/// A parsed spec: stages by first appearance, edges, buffering, QoS items.
#[derive(Debug)]
struct Parsed {
    buffering: ChannelKind,
    order: Vec<String>,
    /// Stage name -> character index of its first appearance.
    names: BTreeMap<String, usize>,
    edges: Vec<(usize, usize)>,
    /// QoS items: text and character index.
    qos: Vec<(String, usize)>,
}

/// The recursive-descent parser over the characters of a spec.
struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    out: &'a mut Parsed,
}

type ParseResult<T> = Result<T, (usize, String)>;

/// Sources and sinks of a parsed section.
struct Ends {
    sources: Vec<usize>,
    sinks: Vec<usize>,
}

/// Parses `spec`; an error is the character index and a message naming what was expected.
fn parse_spec(spec: &str) -> ParseResult<Parsed> {
    let mut out = Parsed {
        buffering: ChannelKind::Latest,
        order: Vec::new(),
        names: BTreeMap::new(),
        edges: Vec::new(),
        qos: Vec::new(),
    };
    let mut p = Parser {
        chars: spec.chars().collect(),
        pos: 0,
        out: &mut out,
    };
    p.skip_space();
    if p.peek() == Some('*') {
        p.out.buffering = ChannelKind::Fifo;
        p.pos += 1;
    }
    p.sequence()?;
    p.skip_space();
    if p.peek() == Some('[') {
        p.pos += 1;
        p.qos()?;
    }
    p.skip_space();
    match p.peek() {
        None => Ok(out),
        Some(_) => Err(p.expected("`|`, `,`, `[` or the end of the spec")),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    /// The error at the current character: what was expected and what was found.
    fn expected(&self, what: &str) -> (usize, String) {
        let found = match self.peek() {
            Some(c) => format!("`{c}`"),
            None => "the end of the spec".into(),
        };
        (self.pos, format!("expected {what}, found {found}"))
    }

    fn sequence(&mut self) -> ParseResult<Ends> {
        let first = self.parallel()?;
        let mut ends = Ends {
            sources: first.sources,
            sinks: first.sinks,
        };
        loop {
            self.skip_space();
            if self.peek() != Some('|') {
                return Ok(ends);
            }
            self.pos += 1;
            let next = self.parallel()?;
            for &p in &ends.sinks {
                for &c in &next.sources {
                    if !self.out.edges.contains(&(p, c)) {
                        self.out.edges.push((p, c));
                    }
                }
            }
            ends.sinks = next.sinks;
        }
    }

    fn parallel(&mut self) -> ParseResult<Ends> {
        let mut ends = self.item()?;
        loop {
            self.skip_space();
            if self.peek() != Some(',') {
                return Ok(ends);
            }
            self.pos += 1;
            let next = self.item()?;
            ends.sources.extend(next.sources);
            ends.sinks.extend(next.sinks);
        }
    }

    fn item(&mut self) -> ParseResult<Ends> {
        self.skip_space();
        match self.peek() {
            Some('(') => {
                self.pos += 1;
                let ends = self.sequence()?;
                self.skip_space();
                if self.peek() != Some(')') {
                    return Err(self.expected("`|`, `,` or `)`"));
                }
                self.pos += 1;
                Ok(ends)
            }
            Some(c) if is_name_start(c) => {
                let i = self.name();
                Ok(Ends {
                    sources: vec![i],
                    sinks: vec![i],
                })
            }
            _ => Err(self.expected("a stage name or `(`")),
        }
    }

    /// Reads a stage name; returns its index (a name seen before is the same stage).
    fn name(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(is_name_char) {
            self.pos += 1;
        }
        let name: String = self.chars[start..self.pos].iter().collect();
        if let Some(i) = self.out.order.iter().position(|n| *n == name) {
            return i;
        }
        self.out.names.insert(name.clone(), start);
        self.out.order.push(name);
        self.out.order.len() - 1
    }

    /// The bracket's items after `[`, up to and including `]`.
    fn qos(&mut self) -> ParseResult<()> {
        loop {
            self.skip_space();
            let start = self.pos;
            while self
                .peek()
                .is_some_and(|c| c != ',' && c != ']' && !c.is_whitespace())
            {
                self.pos += 1;
            }
            if self.pos == start {
                return Err(self.expected("a QoS value (`500/s`, `20%` or `10ms`)"));
            }
            let text: String = self.chars[start..self.pos].iter().collect();
            self.out.qos.push((text, start));
            self.skip_space();
            match self.peek() {
                Some(']') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(',') if self.out.qos.len() < 2 => self.pos += 1,
                _ if self.out.qos.len() < 2 => return Err(self.expected("`,` or `]`")),
                _ => return Err(self.expected("`]`")),
            }
        }
    }
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Canonical lines of the section (the list items' keys), every stage with its values.
pub(crate) fn canonical_lines(pipelines: &[Pipeline], quote: fn(&str) -> String) -> Vec<String> {
    let mut lines = Vec::new();
    for p in pipelines {
        lines.push(format!("- name: {}", quote(&p.name)));
        lines.push(format!("  spec: {}", quote(&p.spec)));
        lines.push(format!("  overflow: {}", p.overflow.name()));
        lines.push("  stages:".into());
        for s in &p.stages {
            let mut keys = vec![
                format!("partition: {}", quote(&s.partition)),
                format!("wcet: {}", format_duration(s.wcet)),
            ];
            if !s.cmd.is_empty() {
                keys.push(format!("cmd: {}", quote(&s.cmd)));
            }
            for (key, e) in [("input", &s.input), ("output", &s.output)] {
                if let Some(e) = e {
                    keys.push(format!("{key}: {}", quote(&e.to_string())));
                }
            }
            for (key, d) in [("period", s.period), ("budget", s.budget)] {
                if let Some(d) = d {
                    keys.push(format!("{key}: {}", format_duration(d)));
                }
            }
            if let Some(priority) = s.priority {
                keys.push(format!("priority: {priority}"));
            }
            lines.push(format!("    {}: {{{}}}", quote(&s.name), keys.join(", ")));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: &str) -> Parsed {
        parse_spec(spec).unwrap_or_else(|e| panic!("{spec}: {e:?}"))
    }

    fn edges(p: &Parsed) -> Vec<(String, String)> {
        let n = |i: usize| p.order[i].clone();
        p.edges.iter().map(|&(a, b)| (n(a), n(b))).collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// Boomerang III-D, Figure 6: B and C feed D; D feeds E and F.
    #[test]
    fn the_papers_mimo_example() {
        let p = parse("*(A|B),C|D|E,F[500/s,10ms]");
        assert_eq!(p.buffering, ChannelKind::Fifo);
        assert_eq!(p.order, ["A", "B", "C", "D", "E", "F"]);
        let want = [("A", "B"), ("B", "D"), ("C", "D"), ("D", "E"), ("D", "F")];
        assert_eq!(edges(&p), pairs(&want));
        let items: Vec<&str> = p.qos.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(items, ["500/s", "10ms"]);
        assert_eq!(p.qos[0].1, 15);
    }

    #[test]
    fn four_slot_chain_and_spaces() {
        let p = parse(" CanRead | ProcData | CanWrite [20%, 11ms] ");
        assert_eq!(p.buffering, ChannelKind::Latest);
        let want = [("CanRead", "ProcData"), ("ProcData", "CanWrite")];
        assert_eq!(edges(&p), pairs(&want));
        assert_eq!(parse("A").edges, vec![]);
        assert_eq!(parse("A|B[5ms]").qos.len(), 1);
    }

    #[test]
    fn malformed_specs_name_the_character_and_the_expected_token() {
        let cases = [
            ("A||B", 2, "expected a stage name or `(`, found `|`"),
            (
                "(A|B",
                4,
                "expected `|`, `,` or `)`, found the end of the spec",
            ),
            (
                "A|B[10ms",
                8,
                "expected `,` or `]`, found the end of the spec",
            ),
            (
                "A B",
                2,
                "expected `|`, `,`, `[` or the end of the spec, found `B`",
            ),
            ("A|B[]", 4, "expected a QoS value"),
            ("A|B[1%,2ms,3]", 10, "expected `]`, found `,`"),
            (
                "",
                0,
                "expected a stage name or `(`, found the end of the spec",
            ),
            ("*|A", 1, "expected a stage name or `(`, found `|`"),
        ];
        for (spec, offset, message) in cases {
            let (at, m) = parse_spec(spec).unwrap_err();
            assert_eq!(at, offset, "{spec}: {m}");
            assert!(m.starts_with(message), "{spec}: {m}");
        }
    }

    #[test]
    fn cycles_are_found() {
        let p = parse("A|B|A");
        assert!(topological(p.order.len(), &p.edges).is_err());
        let p = parse("A|(B,C)|D");
        assert_eq!(topological(p.order.len(), &p.edges), Ok(vec![0, 2, 1, 3]));
    }

    #[test]
    fn qos_values_have_units() {
        assert!(matches!(qos_value("500/s"), Ok(QosValue::Throughput(500))));
        assert!(matches!(qos_value("20%"), Ok(QosValue::Loss(200_000))));
        assert!(matches!(qos_value("2.5%"), Ok(QosValue::Loss(25_000))));
        assert!(matches!(qos_value("10ms"), Ok(QosValue::Delay(10_000_000))));
        let bare = qos_value("10").err().expect("no unit");
        assert!(matches!(bare, QosError::Delay(_)), "{bare:?}");
        assert!(std::error::Error::source(&bare).is_some());
        assert_eq!(
            bare.to_string(),
            "`10` needs a unit, e.g. 500us, 2ms, 1s (a QoS value is a throughput `500/s`, a \
             loss rate `20%` or a delay `10ms`)"
        );
        assert!(matches!(qos_value("120%"), Err(QosError::Loss(_))));
        assert!(matches!(qos_value("0/s"), Err(QosError::Throughput(_))));
        assert!(matches!(qos_value("0ms"), Err(QosError::ZeroDelay(_))));
    }

    #[test]
    fn the_canonical_form_loads_back_identically() {
        let src = "system: {}
partitions:
  - {name: q, kind: rt, cpus: 0}
pipelines:
  - name: p
    spec: '*(A|B),C|D[500/s, 10ms]'
    stages:
      A: {partition: q, wcet: 100us, cmd: ./a, input: q/x/in}
      B: {partition: q, wcet: 1ms, budget: 2ms, period: 5ms, priority: 3}
      C: {partition: q, wcet: 100us}
      D: {partition: q, wcet: 100us, output: q/y/out}
";
        let first = crate::load_str(src, "a.yaml").expect("loads").system;
        let canonical = crate::to_canonical_yaml(&first);
        let again = crate::load_str(&canonical, "b.yaml")
            .expect("loads back")
            .system;
        assert_eq!(first, again, "{canonical}");
        assert_eq!(first.pipelines[0].qos.throughput_per_s, Some(500));
        assert_eq!(first.pipelines[0].edges.len(), 3);
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            Endpoint::parse("can:rav4"),
            Ok(Endpoint::Can {
                bus: "rav4".into(),
                ids: Vec::new()
            })
        );
        let e = Endpoint::parse("can:rav4:0x100,512").unwrap();
        assert_eq!(
            e,
            Endpoint::Can {
                bus: "rav4".into(),
                ids: vec![0x100, 0x200]
            }
        );
        assert_eq!(e.to_string(), "can:rav4:0x100,0x200");
        assert!(Endpoint::parse("can:rav4:0x100,").is_err());
        assert_eq!(
            Endpoint::parse("can:rav4:0x20000000"),
            Err(EndpointError::CanId("0x20000000".into()))
        );
        assert!(Endpoint::parse("can:rav4:zz").is_err());
        let e = Endpoint::parse("linux/fusion/out").unwrap();
        assert_eq!(e.to_string(), "linux/fusion/out");
        assert_eq!(Endpoint::parse("can:"), Err(EndpointError::NoBusName));
        let e = Endpoint::parse("a/b").unwrap_err();
        assert_eq!(e, EndpointError::Syntax("a/b".into()));
        assert_eq!(
            e.to_string(),
            "`a/b` is not an endpoint: use `can:BUS`, `zenoh:CHANNEL` or `partition/task/endpoint`"
        );
        assert!(Endpoint::parse("a//c").is_err());
        let e = Endpoint::parse("zenoh:speed").unwrap();
        assert_eq!(
            e,
            Endpoint::Zenoh {
                channel: "speed".into()
            }
        );
        assert_eq!(e.to_string(), "zenoh:speed");
        assert_eq!(Endpoint::parse("zenoh:"), Err(EndpointError::NoChannelName));
    }
}
