//! CAN identifiers: 11-bit standard or 29-bit extended.

use std::fmt;

/// Largest 11-bit (standard) identifier.
pub const MAX_STANDARD_ID: u32 = 0x7FF;
/// Largest 29-bit (extended) identifier.
pub const MAX_EXTENDED_ID: u32 = 0x1FFF_FFFF;

/// A CAN identifier: 11-bit standard or 29-bit extended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CanId {
    Standard(u16),
    Extended(u32),
}

impl CanId {
    /// A standard id, if `id` fits in 11 bits.
    pub fn standard(id: u32) -> Option<CanId> {
        (id <= MAX_STANDARD_ID).then_some(CanId::Standard(id as u16))
    }

    /// An extended id, if `id` fits in 29 bits.
    pub fn extended(id: u32) -> Option<CanId> {
        (id <= MAX_EXTENDED_ID).then_some(CanId::Extended(id))
    }

    /// `id` as the gateway's allowlists read it: standard if it fits in 11 bits, else
    /// extended if it fits in 29.
    pub fn from_raw(id: u32) -> Option<CanId> {
        CanId::standard(id).or_else(|| CanId::extended(id))
    }

    /// The numeric identifier (without any flag).
    pub fn raw(self) -> u32 {
        match self {
            CanId::Standard(id) => u32::from(id),
            CanId::Extended(id) => id,
        }
    }

    pub fn is_extended(self) -> bool {
        matches!(self, CanId::Extended(_))
    }
}

impl fmt::Display for CanId {
    /// candump spelling: 3 hex digits for standard ids, 8 for extended ones.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CanId::Standard(id) => write!(f, "{id:03X}"),
            CanId::Extended(id) => write!(f, "{id:08X}"),
        }
    }
}

/// An `--allow` (or `--id`) text that is not a list of CAN ids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("`{text}` is not a CAN id (hex 0x1A0 or decimal)")]
    NotAnId {
        text: String,
        source: std::num::ParseIntError,
    },
    #[error("CAN id {0} is above 0x1FFFFFFF")]
    TooLarge(String),
}

/// The message, for the programs that report in text (`bulkhead-app`'s flags).
impl From<IdError> for String {
    fn from(e: IdError) -> String {
        e.to_string()
    }
}

/// Parses `--allow` ids: `0x1A0` (hex) or `416` (decimal), comma separated; ids above
/// 0x7FF are 29-bit (extended).
pub fn parse_ids(text: &str) -> Result<Vec<CanId>, IdError> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let value = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(hex) => u32::from_str_radix(hex, 16),
                None => s.parse::<u32>(),
            }
            .map_err(|source| IdError::NotAnId {
                text: s.into(),
                source,
            })?;
            CanId::from_raw(value).ok_or_else(|| IdError::TooLarge(s.into()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_ids_are_hex_or_decimal_and_long_ones_extended() {
        assert_eq!(
            parse_ids("0x1A0,416, 0x800").unwrap(),
            vec![
                CanId::Standard(0x1A0),
                CanId::Standard(416),
                CanId::Extended(0x800)
            ]
        );
        assert!(parse_ids("0x2000_0000").is_err());
        assert_eq!(
            parse_ids("0x20000000"),
            Err(IdError::TooLarge("0x20000000".into()))
        );
        let e = parse_ids("speed").unwrap_err();
        assert!(matches!(&e, IdError::NotAnId { text, .. } if text == "speed"));
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(
            e.to_string(),
            "`speed` is not a CAN id (hex 0x1A0 or decimal)"
        );
        assert_eq!(CanId::from_raw(0x7FF), Some(CanId::Standard(0x7FF)));
        assert_eq!(CanId::from_raw(0x2000_0000), None);
    }
}
