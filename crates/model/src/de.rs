//! A serde `Deserializer` over a positioned YAML tree ([`crate::yaml::Node`]).
//!
//! Every error is stamped with the line, column and key path of the innermost node
//! that caused it, so that type errors, unknown keys and missing keys all read
//! `file:line:col: partitions[1].tasks[0]: ...`.
//!
//! Scalars follow YAML 1.2 core resolution, except that typed booleans also accept
//! YAML 1.1's `yes`/`no`/`on`/`off`, which DEmOS configurations use.

use crate::yaml::{Mark, Node, Value};
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use std::fmt;

/// A deserialization error with the position and key path of the node it concerns.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub message: String,
    pub mark: Option<Mark>,
    pub path: String,
}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error {
            message: plain_words(&msg.to_string()),
            mark: None,
            path: String::new(),
        }
    }
}

/// serde's words for what a type accepts, in the words of a description's reader.
const PLAIN: [(&str, &str); 9] = [
    ("u8", "a whole number from 0 to 255"),
    ("u16", "a whole number from 0 to 65535"),
    ("u32", "a whole number from 0 to 4294967295"),
    ("u64", "a whole number from 0 to 18446744073709551615"),
    ("i32", "a whole number"),
    ("i64", "a whole number"),
    ("f32", "a number"),
    ("f64", "a number"),
    ("a boolean", "true or false"),
];

/// Rewrites serde's `invalid type: string "x", expected u32` (and `invalid value:`) as
/// `expected a whole number from 0 to 4294967295, found "x"`; other messages as they are.
fn plain_words(msg: &str) -> String {
    let Some(rest) = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "))
    else {
        return msg.to_string();
    };
    let Some((found, expected)) = rest.rsplit_once(", expected ") else {
        return msg.to_string();
    };
    let expected = PLAIN
        .iter()
        .find(|(serde, _)| *serde == expected)
        .map_or(expected, |(_, plain)| plain);
    // `string "x"`, `integer `3``, `floating point `1.5``: the value is what a reader wrote.
    let found = match found {
        "sequence" => "a list",
        "map" => "a mapping",
        found => ["string ", "integer ", "floating point ", "boolean "]
            .iter()
            .find_map(|kind| found.strip_prefix(kind))
            .unwrap_or(found),
    };
    format!("expected {expected}, found {found}")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for Error {}

/// Deserializes `T` from `node`, whose key path is `path` (empty at the root).
pub fn from_node<'de, T: de::Deserialize<'de>>(node: &'de Node, path: &str) -> Result<T, Error> {
    T::deserialize(NodeDe {
        node,
        path: path.to_string(),
    })
}

/// The key path of entry `key` below `path`.
pub fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

struct NodeDe<'a> {
    node: &'a Node,
    path: String,
}

impl<'a> NodeDe<'a> {
    /// Stamps `e` with this node's position unless a deeper node already did.
    fn locate(&self, mut e: Error) -> Error {
        if e.mark.is_none() {
            e.mark = Some(self.node.mark);
            e.path = self.path.clone();
        }
        e
    }

    fn expected(&self, what: &str) -> Error {
        let found = match &self.node.value {
            Value::Scalar { .. } if self.node.is_null() => "nothing (null)".to_string(),
            Value::Scalar { text, .. } => format!("`{text}`"),
            Value::Seq(_) => "a list".to_string(),
            Value::Map(_) => "a mapping".to_string(),
        };
        self.locate(de::Error::custom(format!("expected {what}, found {found}")))
    }

    fn scalar(&self) -> Option<&'a str> {
        self.node.as_scalar()
    }
}

/// YAML 1.1 and 1.2 spellings of booleans.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

impl<'de> de::Deserializer<'de> for NodeDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match &self.node.value {
            Value::Scalar { text, plain: true } => visit_plain(text, self.node.is_null(), visitor),
            Value::Scalar { text, plain: false } => visitor.visit_str(text),
            Value::Seq(items) => visitor.visit_seq(SeqAcc {
                items: items.iter(),
                path: &self.path,
                index: 0,
            }),
            Value::Map(entries) => visitor.visit_map(MapAcc {
                entries: entries.iter(),
                path: &self.path,
                value: None,
            }),
        };
        result.map_err(|e| self.locate(e))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.scalar().and_then(parse_bool) {
            Some(b) => visitor.visit_bool(b).map_err(|e| self.locate(e)),
            None => Err(self.expected("true or false")),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.scalar() {
            Some(text) if !self.node.is_null() => {
                visitor.visit_str(text).map_err(|e| self.locate(e))
            }
            _ => Err(self.expected("a string")),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.node.is_null() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.value {
            Value::Seq(_) => self.deserialize_any(visitor),
            _ => Err(self.expected("a list")),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.value {
            Value::Map(_) => self.deserialize_any(visitor),
            _ => Err(self.expected("a mapping")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.scalar() {
            Some(text) => visitor
                .visit_enum(text.into_deserializer())
                .map_err(|e| self.locate(e)),
            None => Err(self.expected(&format!("one of {}", variants.join(", ")))),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char
        bytes byte_buf unit unit_struct newtype_struct tuple tuple_struct
    }
}

/// Resolves a plain scalar: null, boolean, integer, float, else string.
fn visit_plain<'de, V: Visitor<'de>>(
    text: &str,
    null: bool,
    visitor: V,
) -> Result<V::Value, Error> {
    if null {
        return visitor.visit_unit();
    }
    if let Ok(n) = text.parse::<u64>() {
        return visitor.visit_u64(n);
    }
    // YAML 1.2 core schema: hexadecimal and octal integers (CAN ids are written in hex).
    let radix = [("0x", 16), ("0o", 8)]
        .into_iter()
        .find_map(|(prefix, radix)| {
            text.strip_prefix(prefix)
                .and_then(|digits| u64::from_str_radix(digits, radix).ok())
        });
    if let Some(n) = radix {
        return visitor.visit_u64(n);
    }
    if let Ok(n) = text.parse::<i64>() {
        return visitor.visit_i64(n);
    }
    match text {
        "true" | "True" | "TRUE" => return visitor.visit_bool(true),
        "false" | "False" | "FALSE" => return visitor.visit_bool(false),
        _ => {}
    }
    // Rust also parses `inf` and `nan`, which YAML reads as strings.
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => visitor.visit_f64(x),
        _ => visitor.visit_str(text),
    }
}

struct SeqAcc<'a, 'p> {
    items: std::slice::Iter<'a, Node>,
    path: &'p str,
    index: usize,
}

impl<'de> de::SeqAccess<'de> for SeqAcc<'de, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some(node) = self.items.next() else {
            return Ok(None);
        };
        let path = format!("{}[{}]", self.path, self.index);
        self.index += 1;
        seed.deserialize(NodeDe { node, path }).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct MapAcc<'a, 'p> {
    entries: std::slice::Iter<'a, (Node, Node)>,
    path: &'p str,
    value: Option<(&'a Node, String)>,
}

impl<'de> de::MapAccess<'de> for MapAcc<'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        let path = child_path(self.path, key.as_scalar().unwrap_or_default());
        self.value = Some((value, path.clone()));
        seed.deserialize(NodeDe { node: key, path }).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let (node, path) = self
            .value
            .take()
            .expect("serde calls next_value after next_key");
        seed.deserialize(NodeDe { node, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse;
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        name: String,
        count: u32,
        on: Option<bool>,
    }

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        items: Vec<Item>,
    }

    fn err(src: &str) -> Error {
        let node = parse(src).unwrap();
        from_node::<Doc>(&node, "").unwrap_err()
    }

    #[test]
    fn unknown_key_names_key_and_position() {
        let e = err("items:\n  - {name: a, count: 1}\n  - {name: b, count: 2, colour: red}\n");
        assert_eq!(e.path, "items[1].colour");
        assert_eq!(e.mark, Some(Mark { line: 3, col: 25 }));
        assert!(
            e.message.contains("unknown field `colour`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn type_error_names_the_value() {
        let e = err("items:\n  - name: a\n    count: many\n");
        assert_eq!(e.path, "items[0].count");
        assert_eq!(e.mark, Some(Mark { line: 3, col: 12 }));
    }

    #[test]
    fn serde_type_words_become_plain_words() {
        let e = err("items:\n  - name: a\n    count: many\n");
        assert_eq!(
            e.message,
            "expected a whole number from 0 to 4294967295, found \"many\""
        );
        let e = err("items:\n  - name: a\n    count: -3\n");
        assert_eq!(
            e.message,
            "expected a whole number from 0 to 4294967295, found `-3`"
        );
    }

    #[test]
    fn missing_key_is_reported_at_its_mapping() {
        let e = err("items:\n  - name: a\n");
        assert_eq!(e.path, "items[0]");
        assert!(e.message.contains("missing field `count`"), "{}", e.message);
    }

    #[test]
    fn non_list_is_rejected() {
        let e = err("items: {name: a, count: 1}\n");
        assert_eq!(e.path, "items");
        assert_eq!(e.message, "expected a list, found a mapping");
    }

    #[test]
    fn yaml11_booleans_are_accepted_where_a_boolean_is_expected() {
        let node = parse("items: [{name: a, count: 1, on: yes}]").unwrap();
        let doc: Doc = from_node(&node, "").unwrap();
        assert_eq!(doc.items[0].on, Some(true));
    }
}
