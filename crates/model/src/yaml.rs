//! A YAML document as a tree of nodes that remember where they were written.
//!
//! yaml-rust2's event parser gives every event a line and column; this module builds
//! a tree from those events so that every later error (type, unknown key, semantic
//! check) can name the line and column of the offending node. Duplicate mapping keys
//! are rejected here, since a mapping type would silently keep only one of them.

use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
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

/// Parses one YAML document. An empty document is an empty mapping.
pub fn parse(src: &str) -> Result<Node, SyntaxError> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(src);
    parser.load(&mut builder, false).map_err(|e| SyntaxError {
        mark: (*e.marker()).into(),
        message: e.info().to_string(),
    })?;
    if let Some(err) = builder.error {
        return Err(err);
    }
    Ok(builder.root.unwrap_or(Node {
        mark: Mark { line: 1, col: 1 },
        value: Value::Map(Vec::new()),
    }))
}

/// Builds the tree from parser events; keeps anchors for aliases.
#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    root: Option<Node>,
    anchors: HashMap<usize, Node>,
    error: Option<SyntaxError>,
}

/// An open sequence or mapping; `key` holds a mapping key until its value arrives.
struct Frame {
    node: Node,
    anchor: usize,
    key: Option<Node>,
}

impl Builder {
    fn open(&mut self, node: Node, anchor: usize) {
        self.stack.push(Frame {
            node,
            anchor,
            key: None,
        });
    }

    fn push_value(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return;
        };
        match (&mut frame.node.value, frame.key.take()) {
            (Value::Seq(items), _) => items.push(node),
            (Value::Map(entries), Some(key)) => entries.push((key, node)),
            (Value::Map(entries), None) => {
                let error = check_key(entries, &node);
                if let Some(e) = error {
                    self.error.get_or_insert(e);
                }
                frame.key = Some(node);
            }
            (Value::Scalar { .. }, _) => unreachable!("scalars are never opened"),
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

/// A key must be a scalar not already present in the mapping.
fn check_key(entries: &[(Node, Node)], key: &Node) -> Option<SyntaxError> {
    let Some(text) = key.as_scalar() else {
        return Some(SyntaxError {
            mark: key.mark,
            message: "mapping keys must be plain strings".into(),
        });
    };
    let duplicate = entries.iter().any(|(k, _)| k.as_scalar() == Some(text));
    duplicate.then(|| SyntaxError {
        mark: key.mark,
        message: format!("duplicate key `{text}`"),
    })
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, marker: Marker) {
        let mark = Mark::from(marker);
        match ev {
            Event::Scalar(text, style, anchor, _tag) => {
                let plain = style == TScalarStyle::Plain;
                self.push_value(
                    Node {
                        mark,
                        value: Value::Scalar { text, plain },
                    },
                    anchor,
                );
            }
            Event::SequenceStart(anchor, _) => {
                self.open(
                    Node {
                        mark,
                        value: Value::Seq(Vec::new()),
                    },
                    anchor,
                );
            }
            Event::MappingStart(anchor, _) => {
                self.open(
                    Node {
                        mark,
                        value: Value::Map(Vec::new()),
                    },
                    anchor,
                );
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(mut frame) = self.stack.pop() {
                    frame.node.mark = start_mark(&frame.node);
                    self.push_value(frame.node, frame.anchor);
                }
            }
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some(node) => self.push_value(node, 0),
                None => {
                    let message = "unknown alias".to_string();
                    self.error.get_or_insert(SyntaxError { mark, message });
                }
            },
            _ => {}
        }
    }
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
}
