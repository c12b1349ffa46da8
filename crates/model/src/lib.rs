//! The bulkhead system model: typed structs for a system description, loaded from
//! YAML with errors that name file, line, column and key path, validated, and
//! printable in canonical form.
//!
//! Native descriptions (with a `system` section) and every DEmOS configuration
//! (canonical and simplified forms, DEmOS thesis Appendix 2) load into the same
//! [`System`]. Needs no privileges and no Linux specifics.

pub mod bridge;
mod buffering;
mod canonical;
pub mod cpuset;
mod de;
mod demos_form;
pub mod excerpt;
pub mod health;
pub mod host;
pub mod input;
pub mod modes;
mod normalize;
mod path_error;
pub mod pipes;
pub mod platform;
pub mod power;
pub mod priority;
mod raw;
pub mod stop_start;
pub mod types;
pub mod units;
pub mod users;
mod validate;
mod yaml;

pub use canonical::to_canonical_yaml;
pub use cpuset::{CpuListError, CpuSet};
pub use demos_form::{to_demos_yaml, NotDemos};
pub use modes::{
    Agent, LocalMode, Mode, ModeTask, Modes, Requester, ServerInterface, SwitchPolicy, SwitchWhen,
    Transition,
};
pub use pipes::{EdgeBuffer, Endpoint, Pipeline, Qos, Stage};
pub use stop_start::{Compare, Stale, StopStart, Trigger};
pub use types::*;

use std::fmt;
use std::path::Path;
use yaml::{Mark, Node};

/// A loaded, valid description and its warnings.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub system: System,
    pub warnings: Vec<Diagnostic>,
}

/// An error or warning about a place in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    /// 1-based line and column; 0 when the problem is the file itself (unreadable).
    pub line: usize,
    pub column: usize,
    /// Key path such as `partitions[1].tasks[0].budget`; empty for the whole document.
    pub path: String,
    pub message: String,
}

/// Why a description could not be loaded.
pub type LoadError = Diagnostic;

impl fmt::Display for Diagnostic {
    /// `file:line:col: key.path: message`, a long key path and long values in the
    /// message cut ([`excerpt`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", excerpt::shorten(&self.path))?;
        }
        write!(f, ": {}", excerpt::values(&self.message))
    }
}

impl std::error::Error for Diagnostic {}

/// Loads and validates the description in `path` (a regular file or a FIFO of at most
/// [`input::DEFAULT_MAX_INPUT_SIZE`] bytes).
pub fn load_file(path: &Path) -> Result<Loaded, LoadError> {
    load_file_with(path, input::DEFAULT_MAX_INPUT_SIZE)
}

/// Loads and validates the description in `path`, a regular file or a FIFO of at most
/// `limit` bytes.
pub fn load_file_with(path: &Path, limit: u64) -> Result<Loaded, LoadError> {
    let file = path.display().to_string();
    let bytes = input::read_file(path, limit, input::Fifo::Accept)
        .map_err(|e| file_error(&file, e.to_string()))?;
    load_bytes(&bytes, &file)
}

/// An error about a whole file (no position).
fn file_error(file: &str, message: String) -> Diagnostic {
    Diagnostic {
        file: file.to_string(),
        line: 0,
        column: 0,
        path: String::new(),
        message,
    }
}

/// Loads and validates a description from raw bytes: UTF-8, with or without a byte
/// order mark; a byte that is not UTF-8 is reported at its line, column and offset.
pub fn load_bytes(bytes: &[u8], file_name: &str) -> Result<Loaded, LoadError> {
    load_bytes_with(bytes, file_name, &|_, _| Ok(()))
}

/// A check a caller adds to loading, for what the model cannot see itself (e.g. a
/// signal in a bus's DBC file, the machine's limits: [`host::Host::check`]): an error is
/// a key path and a message, positioned in the file like the loader's own errors.
pub type ExtraCheck<'a> = &'a dyn Fn(&System, &Places) -> Result<(), (String, String)>;

/// Where a loaded description defined its partitions and window slices (key paths), so
/// that a check added to loading ([`ExtraCheck`]) names them as the loader does: a
/// DEmOS form defines a partition inside a window, for instance.
pub struct Places<'a> {
    partitions: &'a [String],
    slices: &'a [Vec<String>],
}

impl Places<'_> {
    /// The key path of partition `i`'s definition.
    pub fn partition(&self, i: usize) -> &str {
        &self.partitions[i]
    }

    /// The key path of slice `s` of window `w`.
    pub fn slice(&self, w: usize, s: usize) -> &str {
        &self.slices[w][s]
    }
}

/// [`load_bytes`], then `extra` on the valid description.
pub fn load_bytes_with(
    bytes: &[u8],
    file_name: &str,
    extra: ExtraCheck<'_>,
) -> Result<Loaded, LoadError> {
    match std::str::from_utf8(bytes) {
        Ok(src) => load_str_with(src, file_name, extra),
        Err(e) => Err(not_utf8(bytes, e.valid_up_to(), file_name)),
    }
}

/// The error for the first byte that is not UTF-8, at `offset`.
fn not_utf8(bytes: &[u8], offset: usize, file_name: &str) -> Diagnostic {
    let before = &bytes[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    // Valid UTF-8 up to `offset`: the column counts characters.
    let column = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    Diagnostic {
        file: file_name.to_string(),
        line,
        column,
        path: String::new(),
        message: format!(
            "not UTF-8: byte {:#04x} at byte offset {offset}",
            bytes[offset]
        ),
    }
}

/// Loads and validates a description from `src`; `file_name` is used in messages.
/// A leading byte order mark is skipped.
pub fn load_str(src: &str, file_name: &str) -> Result<Loaded, LoadError> {
    load_str_with(src, file_name, &|_, _| Ok(()))
}

/// [`load_str`], then `extra` on the valid description.
pub fn load_str_with(
    src: &str,
    file_name: &str,
    extra: ExtraCheck<'_>,
) -> Result<Loaded, LoadError> {
    let src = src.strip_prefix('\u{feff}').unwrap_or(src);
    let at = |mark: Mark, path: String, message: String| Diagnostic {
        file: file_name.to_string(),
        line: mark.line,
        column: mark.col,
        path,
        message,
    };
    let root = yaml::parse(src).map_err(|e| at(e.mark, String::new(), e.message))?;
    check_document(&root).map_err(|(mark, path, msg)| at(mark, path, msg))?;
    let mut raw: raw::RawFile =
        de::from_node(&root, "").map_err(|e| at(e.mark.unwrap_or(root.mark), e.path, e.message))?;
    let raw_pipelines = raw.pipelines.take();
    let locate = |e: normalize::PathError| {
        let message = other_positions(&root, &e.message);
        at(locate(&root, &e.path), e.path, message)
    };
    let mut normalized = normalize::normalize(raw).map_err(locate)?;
    let warnings = validate::validate(&normalized).map_err(locate)?;
    normalized.system.pipelines = pipes::normalize(raw_pipelines, &normalized.system)
        .map_err(|e| at(pipe_mark(&root, &e), e.path, e.message))?;
    normalize::add_gateway_tasks(&mut normalized.system);
    bridge::add_tasks(&mut normalized.system);
    let places = Places {
        partitions: &normalized.partition_paths,
        slices: &normalized.slice_paths,
    };
    extra(&normalized.system, &places)
        .map_err(|(path, message)| at(self::locate(&root, &path), path, message))?;
    Ok(Loaded {
        system: normalized.system,
        warnings: warnings.into_iter().map(locate).collect(),
    })
}

/// A diagnostic about the node at key path `path` (`a.b[2].c`, or its deepest existing
/// ancestor) of the description `src`, for checks made after loading (e.g. what `run`
/// executes). A `src` that does not parse gives line 0.
pub fn diagnostic_at(src: &str, file_name: &str, path: &str, message: String) -> Diagnostic {
    let src = src.strip_prefix('\u{feff}').unwrap_or(src);
    let mark = yaml::parse(src).map_or(Mark { line: 0, col: 0 }, |root| locate(&root, path));
    Diagnostic {
        file: file_name.to_string(),
        line: mark.line,
        column: mark.col,
        path: path.to_string(),
        message,
    }
}

/// Whether the description `src` sets the top-level key `key` (false when `src` is not
/// a YAML mapping), for a caller whose default for a key is not the model's: DEmOS's
/// `-C` configuration, whose `set_cwd` is false and may not be given.
pub fn sets_key(src: &str, key: &str) -> bool {
    let src = src.strip_prefix('\u{feff}').unwrap_or(src);
    yaml::parse(src).is_ok_and(|root| root.get(key).is_some())
}

/// The document must be a mapping and must not use a section that is not implemented yet.
fn check_document(root: &Node) -> Result<(), (Mark, String, String)> {
    if !matches!(root.value, yaml::Value::Map(_)) {
        return Err((
            root.mark,
            String::new(),
            "a system description must be a YAML mapping".into(),
        ));
    }
    for section in raw::RESERVED_SECTIONS {
        if let Some(node) = root.get(section) {
            let msg = format!("`{section}` is not supported yet by this version of bulkhead");
            return Err((node.mark, section.to_string(), msg));
        }
    }
    Ok(())
}

/// Where a pipelines error is: the node at its path or, for an error inside `spec`, the
/// character at its offset in the string (one column further for a quoted scalar).
fn pipe_mark(root: &Node, e: &pipes::PipeError) -> Mark {
    let mark = locate(root, &e.path);
    let Some(offset) = e.offset else { return mark };
    let node_at = |path: &str| {
        let mut node = root;
        for segment in path.split('.') {
            let (key, index) = segment.split_once('[').unwrap_or((segment, ""));
            node = node.get(key)?;
            if let Ok(i) = index.trim_end_matches(']').parse::<usize>() {
                match &node.value {
                    yaml::Value::Seq(items) => node = items.get(i)?,
                    _ => return None,
                }
            }
        }
        Some(node)
    };
    let quoted = node_at(&e.path)
        .is_some_and(|n| matches!(n.value, yaml::Value::Scalar { plain: false, .. }));
    Mark {
        line: mark.line,
        col: mark.col + offset + usize::from(quoted),
    }
}

/// `message` with each `{at PATH}` replaced by the `line:col` of the node at PATH (a
/// message about two places names the second this way).
fn other_positions(root: &Node, message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some((before, after)) = rest.split_once("{at ") {
        let Some((path, tail)) = after.split_once('}') else {
            break;
        };
        let mark = locate(root, path);
        out.push_str(before);
        out.push_str(&format!("line {}:{}", mark.line, mark.col));
        rest = tail;
    }
    out.push_str(rest);
    out
}

fn locate(root: &Node, path: &str) -> Mark {
    let mut node = root;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (key, indices) = segment
            .split_once('[')
            .map_or((segment, ""), |(k, rest)| (k, rest));
        if !key.is_empty() {
            match node.get(key) {
                Some(n) => node = n,
                None => return node.mark,
            }
        }
        for index in indices
            .split('[')
            .map(|i| i.trim_end_matches(']'))
            .filter(|i| !i.is_empty())
        {
            match (&node.value, index.parse::<usize>()) {
                (yaml::Value::Seq(items), Ok(i)) if i < items.len() => node = &items[i],
                _ => return node.mark,
            }
        }
    }
    node.mark
}
