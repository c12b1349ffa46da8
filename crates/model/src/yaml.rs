//! A YAML document as a tree of nodes that remember where they were written.
//!
//! yaml-rust2's event parser gives every event a line and column; this module builds
//! a tree from those events so that every later error (type, unknown key, semantic
//! check) can name the line and column of the offending node. Duplicate mapping keys
//! are rejected here, since a mapping type would silently keep only one of them, and
//! so are inputs that would cost without bound: nesting deeper than [`MAX_DEPTH`]
//! (the events are read in a loop, not by recursion) and aliases that expand to more
//! than [`MAX_ALIAS_NODES`] nodes.

use std::collections::{HashMap, HashSet};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// 1-based line and column of a node in its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mark {
    pub line: usize,
    pub col: usize,
}

impl From<Marker> for Mark {
    fn from(m: Marker) -> Self {
        Mark {
            line: m.line(),
            col: m.col() + 1,
        }
    }
}

/// A YAML node with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub mark: Mark,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A scalar; `plain` is false for quoted and block scalars, which are always strings.
    Scalar {
        text: String,
        plain: bool,
    },
    Seq(Vec<Node>),
    /// Entries in source order; keys are scalars (checked on load).
    Map(Vec<(Node, Node)>),
}

/// A syntax error: position and message.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub mark: Mark,
    pub message: String,
}

impl Node {
    /// The scalar text if this node is a scalar.
    pub fn as_scalar(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// True for a plain scalar that YAML reads as null (`~`, `null`, empty).
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar { text, plain: true } if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// The value of key `key` if this node is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_scalar() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

/// At most this many nodes may be added by aliases in one document: each alias counts
/// the nodes of the subtree it copies, so a "billion laughs" file (anchors of anchors)
/// is refused after copying at most this many nodes.
pub const MAX_ALIAS_NODES: usize = 100_000;

/// Sequences and mappings may nest at most this deep (a description needs about ten).
pub const MAX_DEPTH: usize = 100;

/// Parses a file holding exactly one YAML document. An empty file (comments only) and
/// a second document (after `---`) are errors.
pub fn parse(src: &str) -> Result<Node, SyntaxError> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(src);
    let mut documents = 0;
    loop {
        let (event, marker) = parser.next_token().map_err(|e| SyntaxError {
            mark: (*e.marker()).into(),
            message: e.info().to_string(),
        })?;
        let mark = Mark::from(marker);
        match event {
            Event::StreamEnd => break,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    let message = "a second YAML document; a description is one document".into();
                    return Err(SyntaxError { mark, message });
                }
            }
            event => builder.on_event(event, mark)?,
        }
    }
    builder.root.ok_or(SyntaxError {
        mark: Mark { line: 1, col: 1 },
        message: "the description is empty".into(),
    })
}

/// Builds the tree from parser events; keeps anchors (with their sizes) for aliases.
#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    root: Option<Node>,
    anchors: HashMap<usize, (Node, usize)>,
    /// Nodes added by aliases so far.
    aliased: usize,
}

/// An open sequence or mapping; `key` holds a mapping key until its value arrives;
/// `size` counts the nodes below it; `keys` are the keys seen (duplicates are errors).
struct Frame {
    node: Node,
    anchor: usize,
    key: Option<Node>,
    size: usize,
    keys: HashSet<String>,
}

impl Builder {
    fn open(&mut self, node: Node, anchor: usize) -> Result<(), SyntaxError> {
        if self.stack.len() >= MAX_DEPTH {
            let message = format!("nested deeper than {MAX_DEPTH} levels");
            return Err(SyntaxError {
                mark: node.mark,
                message,
            });
        }
        self.stack.push(Frame {
            node,
            anchor,
            key: None,
            size: 0,
            keys: HashSet::new(),
        });
        Ok(())
    }

    /// Adds a finished node of `size` nodes to the open collection (or makes it the root).
    fn push_value(&mut self, node: Node, anchor: usize, size: usize) -> Result<(), SyntaxError> {
        if anchor > 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        frame.size += size;
        match (&mut frame.node.value, frame.key.take()) {
            (Value::Seq(items), _) => items.push(node),
            (Value::Map(entries), Some(key)) => entries.push((key, node)),
            (Value::Map(_), None) => {
                check_key(&mut frame.keys, &node)?;
                frame.key = Some(node);
            }
            (Value::Scalar { .. }, _) => unreachable!("scalars are never opened"),
        }
        Ok(())
    }

    /// Copies the node anchored as `id`, unless that takes the copies past [`MAX_ALIAS_NODES`].
    fn alias(&mut self, id: usize, mark: Mark) -> Result<(), SyntaxError> {
        let Some((node, size)) = self.anchors.get(&id) else {
            let message = "unknown alias".to_string();
            return Err(SyntaxError { mark, message });
        };
        let size = *size;
        self.aliased = self.aliased.saturating_add(size);
        if self.aliased > MAX_ALIAS_NODES {
            let message = format!(
                "aliases expand to more than {MAX_ALIAS_NODES} nodes (nested anchors copy \
                 their nodes once per use)"
            );
            return Err(SyntaxError { mark, message });
        }
        let node = node.clone();
        self.push_value(node, 0, size)
    }

    fn on_event(&mut self, ev: Event, mark: Mark) -> Result<(), SyntaxError> {
        let collection = |value| Node { mark, value };
        match ev {
            Event::Scalar(text, style, anchor, _tag) => {
                let plain = style == TScalarStyle::Plain;
                let value = Value::Scalar { text, plain };
                self.push_value(Node { mark, value }, anchor, 1)
            }
            Event::SequenceStart(anchor, _) => {
                self.open(collection(Value::Seq(Vec::new())), anchor)
            }
            Event::MappingStart(anchor, _) => self.open(collection(Value::Map(Vec::new())), anchor),
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(mut frame) => {
                    frame.node.mark = start_mark(&frame.node);
                    self.push_value(frame.node, frame.anchor, frame.size + 1)
                }
                None => Ok(()),
            },
            Event::Alias(id) => self.alias(id, mark),
            _ => Ok(()),
        }
    }
}

/// Where a collection starts. The parser marks a block collection at its first
/// value; its first key or item is where a reader looks for it.
fn start_mark(node: &Node) -> Mark {
    let first = match &node.value {
        Value::Seq(items) => items.first().map(|n| n.mark),
        Value::Map(entries) => entries.first().map(|(k, _)| k.mark),
        Value::Scalar { .. } => None,
    };
    let key = |m: &Mark| (m.line, m.col);
    first
        .into_iter()
        .chain([node.mark])
        .min_by_key(key)
        .unwrap_or(node.mark)
}

/// A key must be a scalar not already in `seen` (the mapping's keys so far).
fn check_key(seen: &mut HashSet<String>, key: &Node) -> Result<(), SyntaxError> {
    let Some(text) = key.as_scalar() else {
        return Err(SyntaxError {
            mark: key.mark,
            message: "mapping keys must be plain strings".into(),
        });
    };
    if seen.insert(text.to_string()) {
        return Ok(());
    }
    Err(SyntaxError {
        mark: key.mark,
        message: format!("duplicate key `{text}`"),
    })
}

/// A YAML double-quoted scalar.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        let doc = parse("a: 1\nb:\n  - x\n").unwrap();
        let b = doc.get("b").unwrap();
        let Value::Seq(items) = &b.value else {
            panic!("not a seq")
        };
        assert_eq!(items[0].mark, Mark { line: 3, col: 5 });
        assert_eq!(doc.get("a").unwrap().mark, Mark { line: 1, col: 4 });
    }

    #[test]
    fn block_mappings_start_at_their_first_key() {
        let doc = parse("items:\n  - name: c\n    kind: rt\n").unwrap();
        let Value::Seq(items) = &doc.get("items").unwrap().value else {
            panic!("not a seq")
        };
        assert_eq!(items[0].mark, Mark { line: 2, col: 5 });
        let flow = parse("items: [ {name: c} ]").unwrap();
        let Value::Seq(items) = &flow.get("items").unwrap().value else {
            panic!("not a seq")
        };
        assert_eq!(items[0].mark, Mark { line: 1, col: 10 });
    }

    #[test]
    fn duplicate_keys_are_rejected_with_position() {
        let err = parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(err.mark, Mark { line: 3, col: 1 });
        assert!(err.message.contains("duplicate key `a`"), "{}", err.message);
    }

    #[test]
    fn aliases_copy_the_anchored_node() {
        let doc = parse("a: &x {c: 1}\nb: *x\n").unwrap();
        assert_eq!(
            doc.get("b").unwrap().get("c").unwrap().as_scalar(),
            Some("1")
        );
    }

    #[test]
    fn quoted_scalars_are_not_plain() {
        let doc = parse("a: '1'\nb: 1\n").unwrap();
        assert!(matches!(
            doc.get("a").unwrap().value,
            Value::Scalar { plain: false, .. }
        ));
        assert!(matches!(
            doc.get("b").unwrap().value,
            Value::Scalar { plain: true, .. }
        ));
    }

    /// The "billion laughs" file: nine levels of ten aliases each would copy 10^9 nodes.
    #[test]
    fn nested_aliases_stop_at_the_alias_that_crosses_the_limit() {
        let mut src = String::from("a0: &a0 [lol]\n");
        for level in 1..10 {
            let prev = format!("*a{}", level - 1);
            let items = [prev.as_str(); 10].join(", ");
            src.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        let err = parse(&src).unwrap_err();
        assert!(
            err.message.contains("aliases expand to more than"),
            "{}",
            err.message
        );
        // 10^5 nodes are copied at level 5: the error is on line 6, at an alias.
        assert_eq!(err.mark.line, 6, "{err:?}");
        assert!(src.lines().nth(5).unwrap()[err.mark.col - 1..].starts_with("*a4"));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let err = parse(&"[".repeat(100_000)).unwrap_err();
        assert!(err.message.contains("recursion limit"), "{}", err.message);
        let err = parse(&format!("{}x\n", "- ".repeat(100_000))).unwrap_err();
        assert!(
            err.message.contains("nested deeper than"),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_second_document_and_an_empty_file_are_errors() {
        let err = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert_eq!(err.mark.line, 2);
        assert!(
            err.message.contains("second YAML document"),
            "{}",
            err.message
        );
        let err = parse("# nothing\n").unwrap_err();
        assert!(err.message.contains("empty"), "{}", err.message);
        assert!(parse("---\na: 1\n...\n").is_ok());
    }
}
