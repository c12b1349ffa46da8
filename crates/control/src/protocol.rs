//! The requests and replies of the control protocol: one JSON object per line
//! (documented in `docs/control.md`).
//!
//! A request is `{"request": "<name>", ...}` with an optional `"id"` (an unsigned
//! integer) that the reply echoes; a reply is `{"id": .., "ok": true, "<name>": {..}}`
//! or `{"id": .., "ok": false, "error": {"code": "..", "message": ".."}}`.

use serde::{Deserialize, Serialize};

/// Version of the protocol, reported by `status`.
pub const PROTOCOL_VERSION: u32 = 1;

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Partitions, tasks and their reservations, the current mode, channels and counters.
    Status,
    /// Switch to mode `name`; the reply comes when the switch is over (or refused).
    Mode { name: String },
    /// Suspend the whole system (stop-start); the reply comes when it is suspended.
    Suspend,
    /// Resume a suspended system; the reply comes when it runs again.
    Resume,
}

/// A request line: the request and its optional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLine {
    pub id: Option<u64>,
    pub request: Request,
}

impl RequestLine {
    /// Parses one line. Errors are replies to send back (with the id, if it could be read).
    pub fn parse(line: &str) -> Result<RequestLine, Response> {
        let malformed = |id, message: String| Response::error(id, ErrorCode::Malformed, message);
        let mut value =
            unique_keys(line).map_err(|e| malformed(None, format!("not a JSON object: {e}")))?;
        let Some(object) = value.as_object_mut() else {
            return Err(malformed(None, "a request is a JSON object".into()));
        };
        let id = match object.remove("id") {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or_else(|| malformed(None, "`id` must be an unsigned integer".into()))?,
            ),
        };
        let name = object
            .get("request")
            .and_then(|r| r.as_str())
            .map(str::to_string);
        let keys: Vec<String> = object.keys().cloned().collect();
        let request: Request = serde_json::from_value(value).map_err(|e| match name {
            Some(n) if !KNOWN.contains(&n.as_str()) => Response::error(
                id,
                ErrorCode::UnknownRequest,
                format!("unknown request `{n}` (known: {})", KNOWN.join(", ")),
            ),
            _ => malformed(id, e.to_string()),
        })?;
        // Serde ignores unknown keys of unit variants: compare with what the request has.
        let known = serde_json::to_value(&request).expect("a request serializes");
        if let Some(extra) = keys.iter().find(|k| known.get(k.as_str()).is_none()) {
            return Err(malformed(id, format!("unknown field `{extra}`")));
        }
        Ok(RequestLine { id, request })
    }

    /// The line to send, newline included.
    pub fn to_line(&self) -> String {
        let mut value = serde_json::to_value(&self.request).expect("a request serializes");
        if let (Some(id), Some(object)) = (self.id, value.as_object_mut()) {
            object.insert("id".into(), id.into());
        }
        let mut line = value.to_string();
        line.push('\n');
        line
    }
}

const KNOWN: [&str; 4] = ["status", "mode", "suspend", "resume"];

/// Parses `line` as JSON whose objects name each key once. serde_json keeps the last of
/// two equal keys, so `{"request":"status","request":"suspend"}` would suspend a client
/// (or a proxy that checked the first key) that meant `status`: a duplicate is an error.
fn unique_keys(line: &str) -> Result<serde_json::Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(line);
    let value = Unique::deserialize(&mut de)?;
    de.end()?;
    Ok(value.0)
}

/// A JSON value read with [`UniqueVisitor`]: every object's keys distinct.
struct Unique(serde_json::Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Unique, D::Error> {
        d.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Unique(value) = map.next_value()?;
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format!("duplicate key `{key}`")));
            }
            object.insert(key, value);
        }
        Ok(serde_json::Value::Object(object))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(serde_json::Value::Array(items))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
}

/// A reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Box<Status>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Box<ModeOutcome>>,
    /// The outcome of `suspend` or `resume`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<Box<PowerOutcome>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReply>,
}

impl Response {
    fn ok(id: Option<u64>) -> Response {
        Response {
            id,
            ok: true,
            status: None,
            mode: None,
            power: None,
            error: None,
        }
    }

    pub fn status(id: Option<u64>, status: Status) -> Response {
        Response {
            status: Some(Box::new(status)),
            ..Response::ok(id)
        }
    }

    pub fn mode(id: Option<u64>, outcome: ModeOutcome) -> Response {
        Response {
            mode: Some(Box::new(outcome)),
            ..Response::ok(id)
        }
    }

    pub fn power(id: Option<u64>, outcome: PowerOutcome) -> Response {
        Response {
            power: Some(Box::new(outcome)),
            ..Response::ok(id)
        }
    }

    pub fn error(id: Option<u64>, code: ErrorCode, message: impl Into<String>) -> Response {
        Response {
            ok: false,
            error: Some(ErrorReply {
                code,
                message: message.into(),
            }),
            ..Response::ok(id)
        }
    }

    /// The line to send, newline included.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("a reply serializes");
        line.push('\n');
        line
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub code: ErrorCode,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Not a JSON object, or not a valid request.
    Malformed,
    /// A line longer than [`crate::MAX_REQUEST`].
    TooLong,
    UnknownRequest,
    /// `mode` names no mode of the system.
    UnknownMode,
    /// The switch is not allowed from the current mode, or the system has no modes.
    NotAllowed,
    /// Another switch, suspension or resumption is in progress.
    Busy,
    /// The request was valid but the system refused it (e.g. too soon after the last).
    Refused,
    /// The peer is neither root nor the user the system runs as.
    PermissionDenied,
    /// This system does not do that (yet).
    Unsupported,
    Internal,
}

impl ErrorCode {
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::Malformed => "malformed",
            ErrorCode::TooLong => "too_long",
            ErrorCode::UnknownRequest => "unknown_request",
            ErrorCode::UnknownMode => "unknown_mode",
            ErrorCode::NotAllowed => "not_allowed",
            ErrorCode::Busy => "busy",
            ErrorCode::Refused => "refused",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Internal => "internal",
        }
    }
}

/// The state of a running system (`status`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub protocol: u32,
    /// The system's name (its description's file stem).
    pub system: String,
    /// The supervisor's process id.
    pub pid: u32,
    pub uptime_ns: u64,
    /// `running` or `suspended`.
    pub state: String,
    /// The current mode (`null` for a system without modes).
    pub mode: Option<String>,
    /// The mode a switch in progress goes to.
    pub switching_to: Option<String>,
    pub partitions: Vec<PartitionStatus>,
    pub channels: Vec<ChannelStatus>,
    /// Stop-start: its state and the last latencies (`null` where the system cannot
    /// be suspended).
    #[serde(default)]
    pub stop_start: Option<StopStartStatus>,
    /// The window schedule's position (`null` for a system without windows).
    #[serde(default)]
    pub windows: Option<WindowsStatus>,
    /// Each supervision of the `health:` keys (none for a system without them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<SupervisionStatus>,
}

/// Where one supervision of a `health:` key stands (docs/health.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupervisionStatus {
    pub partition: String,
    /// The supervised rt task, or the index of the supervised process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<u32>,
    /// `on_miss`, `on_overrun`, `on_exit` or `watchdog`.
    pub supervision: String,
    /// How often it fired.
    pub fired: u64,
    /// The action its next firing takes, as written (`mode: NAME`).
    pub next_action: String,
    /// `on_miss`: misses within its window now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misses: Option<u32>,
    /// `watchdog`: the time since the last heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silent_ns: Option<u64>,
}

/// Where the window schedule is: the window running now and how far into it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowsStatus {
    /// The window running now (0-based, in the major frame's order).
    pub window: u32,
    /// Windows in a major frame.
    pub count: u32,
    /// The running window's length and the time since it started.
    pub length_ns: u64,
    pub elapsed_ns: u64,
    /// The position in the major frame (the earlier windows' lengths plus `elapsed_ns`)
    /// and the frame's length.
    pub frame_position_ns: u64,
    pub major_frame_ns: u64,
    /// Windows started since the schedule started.
    pub started: u64,
    /// The partitions of the running window's slices.
    pub partitions: Vec<String>,
}

/// The stop-start part of `status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopStartStatus {
    /// `running`, `suspending`, `suspended` or `resuming`.
    pub state: String,
    /// Completed suspend/resume cycles.
    pub cycles: u64,
    /// Request to the last partition frozen, of the last suspend.
    pub last_suspend_ns: Option<u64>,
    /// Request to the last partition thawed, of the last resume.
    pub last_resume_ns: Option<u64>,
    /// The suspend order.
    pub order: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PartitionStatus {
    pub name: String,
    /// `rt` or `be`.
    pub kind: String,
    pub cpus: String,
    /// The resource interface in force (a partition scheduled as a server).
    pub interface: Option<InterfaceStatus>,
    pub tasks: Vec<TaskStatus>,
    /// Memory in use against the limit (`null` for a partition without `memory`).
    #[serde(default)]
    pub memory: Option<MemoryStatus>,
}

/// A partition's memory: what its cgroups charge now and their limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStatus {
    pub used_bytes: u64,
    pub limit_bytes: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceStatus {
    pub budget_ns: u64,
    pub period_ns: u64,
}

/// An rt task and its reservation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStatus {
    pub name: String,
    pub pid: Option<u32>,
    /// `deadline` (SCHED_DEADLINE) or `fifo` (SCHED_FIFO with budget enforcement).
    pub policy: String,
    pub budget_ns: u64,
    pub period_ns: u64,
    pub deadline_ns: u64,
    /// SCHED_FIFO priority.
    pub priority: Option<u32>,
    pub jobs: u64,
    pub misses: u64,
    /// Response time of the last job and the longest so far, ns.
    #[serde(default)]
    pub last_response_ns: u64,
    #[serde(default)]
    pub max_response_ns: u64,
    /// The task's named counters (`bulkhead_task::Task::counter`) at the last drain.
    #[serde(default)]
    pub counters: std::collections::BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelStatus {
    pub name: String,
    /// `fifo` or `latest`.
    pub kind: String,
    pub writer: String,
    pub readers: Vec<String>,
    /// Messages the writer wrote.
    pub written: u64,
    /// Messages the reader read (a latest message read twice counts twice).
    pub read: u64,
    /// `dropped` + `overwritten`.
    pub lost: u64,
    /// Writes refused, or dropped (`overflow: drop_newest`), because the fifo was full.
    #[serde(default)]
    pub dropped: u64,
    /// Messages of a latest channel overwritten, or of a `drop_oldest` fifo dropped,
    /// before the reader saw them.
    #[serde(default)]
    pub overwritten: u64,
    /// Each end's state: `attached` (with its `pid`), `closed` or `waiting` (never attached).
    #[serde(default)]
    pub writer_end: EndStatus,
    #[serde(default)]
    pub reader_end: EndStatus,
}

/// One end of a channel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndStatus {
    /// `attached`, `closed` or `waiting`.
    pub state: String,
    pub pid: Option<u32>,
}

/// How a mode switch went (`mode`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeOutcome {
    pub from: String,
    pub to: String,
    pub policy: String,
    /// Request to the last acknowledgement.
    pub latency_ns: u64,
    /// The steps in order, each with its time since the request.
    pub steps: Vec<StepRecord>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRecord {
    pub t_ns: u64,
    /// `interface_change`, `agent_request`, `agent_ack` or `mode_done`.
    pub event: String,
    pub partition: Option<String>,
    #[serde(default)]
    pub boost: bool,
}

/// How a suspension or resumption went (`suspend`, `resume`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerOutcome {
    /// `suspended` or `running`.
    pub state: String,
    /// Request to the last partition done.
    pub latency_ns: u64,
    /// Per partition, in the order they were handled.
    pub partitions: Vec<PartitionPower>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionPower {
    pub name: String,
    pub latency_ns: u64,
    /// Whether its programs acknowledged before their deadline.
    pub acknowledged: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_with_and_without_id() {
        let r = RequestLine::parse(r#"{"request":"status"}"#).unwrap();
        assert_eq!((r.id, r.request), (None, Request::Status));
        let r = RequestLine::parse(r#"{"id":7,"request":"mode","name":"highway"}"#).unwrap();
        assert_eq!(r.id, Some(7));
        assert_eq!(
            r.request,
            Request::Mode {
                name: "highway".into()
            }
        );
        assert_eq!(RequestLine::parse(&r.to_line()).unwrap(), r);
    }

    #[test]
    fn bad_requests_are_replies() {
        let code = |line: &str| RequestLine::parse(line).unwrap_err().error.unwrap().code;
        assert_eq!(code("status"), ErrorCode::Malformed);
        assert_eq!(code("[1]"), ErrorCode::Malformed);
        assert_eq!(code(r#"{"request":"reboot"}"#), ErrorCode::UnknownRequest);
        assert_eq!(code(r#"{"request":"mode"}"#), ErrorCode::Malformed);
        assert_eq!(
            code(r#"{"request":"status","extra":1}"#),
            ErrorCode::Malformed
        );
        assert_eq!(
            code(r#"{"id":-1,"request":"status"}"#),
            ErrorCode::Malformed
        );
        let e = RequestLine::parse(r#"{"id":3,"request":"mode","name":7}"#).unwrap_err();
        assert_eq!(e.id, Some(3), "the id is echoed when it could be read");
    }

    /// serde_json keeps the last of two equal keys: this suspended the system.
    #[test]
    fn a_key_given_twice_is_refused_wherever_it_is() {
        for line in [
            r#"{"request":"status","request":"suspend"}"#,
            r#"{"id":1,"request":"mode","name":"a","name":"b"}"#,
            r#"{"id":1,"id":2,"request":"status"}"#,
            r#"{"request":"status","x":[{"k":1,"k":2}]}"#,
        ] {
            let e = RequestLine::parse(line).unwrap_err().error.unwrap();
            assert_eq!(e.code, ErrorCode::Malformed, "{line}");
            assert!(e.message.contains("duplicate key"), "{line}: {}", e.message);
        }
        let nested = r#"{"request":"status","x":[1,2.5,null,true,"s",{"k":{}}]}"#;
        let e = RequestLine::parse(nested).unwrap_err().error.unwrap();
        assert_eq!(
            e.message, "unknown field `x`",
            "parsed, then refused as unknown"
        );
    }

    #[test]
    fn replies_are_one_line_with_ok_and_their_part() {
        let line = Response::error(Some(2), ErrorCode::UnknownMode, "no mode `x`").to_line();
        assert_eq!(
            line,
            "{\"id\":2,\"ok\":false,\"error\":{\"code\":\"unknown_mode\",\"message\":\"no mode `x`\"}}\n"
        );
        let status = Response::status(None, Status::default()).to_line();
        assert!(
            status.starts_with("{\"ok\":true,\"status\":{\"protocol\":0,"),
            "{status}"
        );
        assert!(serde_json::from_str::<Response>(&status).unwrap().ok);
    }
}
