//! Durations and sizes as written in a system description, parsed exactly
//! (decimal arithmetic, no floating point) into integer nanoseconds and bytes.

/// A duration or instant in integer nanoseconds (the one time type; `types` re-exports it).
pub type Nanos = u64;

const UNITS_NS: [(&str, u64); 6] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("min", 60_000_000_000),
];

const UNITS_BYTES: [(&str, u64); 10] = [
    ("B", 1),
    ("kB", 1_000),
    ("KB", 1_000),
    ("KiB", 1 << 10),
    ("MB", 1_000_000),
    ("MiB", 1 << 20),
    ("GB", 1_000_000_000),
    ("GiB", 1 << 30),
    ("TB", 1_000_000_000_000),
    ("TiB", 1 << 40),
];

/// Why a text is not a duration or a size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitError {
    /// A bare number where no unit is implied.
    NeedsUnit { text: String },
    /// A unit that is not one of the time units.
    UnknownTimeUnit { unit: String },
    /// A unit that is not one of the size units.
    UnknownSizeUnit { unit: String },
    /// The number before the unit is not a non-negative decimal that fits.
    Number { text: String, problem: NumberError },
}

/// What is wrong with the number of a duration or size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberError {
    Negative,
    NotANumber,
    TooLarge,
    /// It would be a fraction of a nanosecond or of a byte.
    TooFine,
}

impl std::fmt::Display for UnitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnitError::NeedsUnit { text } => {
                write!(f, "`{text}` needs a unit, e.g. 500us, 2ms, 1s")
            }
            UnitError::UnknownTimeUnit { unit } => {
                write!(f, "unknown time unit `{unit}` (use ns, us, ms, s or min)")
            }
            UnitError::UnknownSizeUnit { unit } => write!(
                f,
                "unknown size unit `{unit}` (use B, KiB, MiB, GiB, kB, MB, GB)"
            ),
            UnitError::Number { text, problem } => write!(f, "`{text}`: {problem}"),
        }
    }
}

impl std::fmt::Display for NumberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NumberError::Negative => "must not be negative",
            NumberError::NotANumber => "not a number",
            NumberError::TooLarge => "too large",
            NumberError::TooFine => "finer than the smallest unit (1 ns or 1 byte)",
        })
    }
}

impl std::error::Error for UnitError {}

/// The message, for the layers that report in text (command-line value parsers, the
/// description's diagnostics).
impl From<UnitError> for String {
    fn from(e: UnitError) -> String {
        e.to_string()
    }
}

/// Parses a duration: a non-negative decimal number and a unit (`ns`, `us`, `ms`, `s`,
/// `min`), e.g. `500us`, `1.5ms`. A bare number is taken in `bare_unit_ns` units if
/// given (DEmOS files: milliseconds), and is an error otherwise.
pub fn parse_duration(text: &str, bare_unit_ns: Option<u64>) -> Result<Nanos, UnitError> {
    let text = text.trim();
    let (number, unit) = split_unit(text);
    let scale = match unit {
        "" => bare_unit_ns.ok_or_else(|| UnitError::NeedsUnit { text: text.into() })?,
        u => lookup(&UNITS_NS, u).ok_or_else(|| UnitError::UnknownTimeUnit { unit: u.into() })?,
    };
    scaled(text, number, scale)
}

fn scaled(text: &str, number: &str, scale: u64) -> Result<u64, UnitError> {
    scale_decimal(number, scale).map_err(|problem| UnitError::Number {
        text: text.into(),
        problem,
    })
}

/// Parses a size: a non-negative decimal number and a unit (`B`, `KiB`, `MiB`, `GiB`,
/// `kB`, `MB`, `GB`...). A bare integer means bytes.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let text = text.trim();
    let (number, unit) = split_unit(text);
    let scale = match unit {
        "" => 1,
        u => {
            lookup(&UNITS_BYTES, u).ok_or_else(|| UnitError::UnknownSizeUnit { unit: u.into() })?
        }
    };
    scaled(text, number, scale)
}

/// `12.5` (percent) as millionths: 125000; `None` above 100 or with more than 4 decimals.
pub fn percent_ppm(n: &str) -> Option<u32> {
    let (whole, frac) = n.split_once('.').unwrap_or((n, ""));
    if frac.len() > 4 || whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let frac_ppm: u64 = format!("{frac:0<4}").parse().ok()?;
    let ppm = whole.checked_mul(10_000)? + frac_ppm;
    (ppm <= 1_000_000).then_some(ppm as u32)
}

/// Formats a duration with the largest unit that represents it exactly: `2ms`, `500us`.
pub fn format_duration(ns: Nanos) -> String {
    let unit = [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)]
        .into_iter()
        .find(|(_, scale)| ns != 0 && ns % scale == 0);
    match unit {
        Some((name, scale)) => format!("{}{name}", ns / scale),
        None => format!("{ns}ns"),
    }
}

/// Formats a size with the largest binary unit that represents it exactly: `256MiB`.
pub fn format_size(bytes: u64) -> String {
    let unit = [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ]
    .into_iter()
    .find(|(_, scale)| bytes != 0 && bytes % scale == 0);
    match unit {
        Some((name, scale)) => format!("{}{name}", bytes / scale),
        None => format!("{bytes}B"),
    }
}

fn lookup(units: &[(&str, u64)], unit: &str) -> Option<u64> {
    units
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, scale)| *scale)
}

fn split_unit(text: &str) -> (&str, &str) {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(text.len());
    (text[..split].trim(), text[split..].trim())
}

/// `number * scale` exactly, for a decimal `number` such as `1.25`.
fn scale_decimal(number: &str, scale: u64) -> Result<u64, NumberError> {
    if number.starts_with('-') {
        return Err(NumberError::Negative);
    }
    let number = number.strip_prefix('+').unwrap_or(number);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !digits_ok(int_part)
        || !digits_ok(frac_part)
    {
        return Err(NumberError::NotANumber);
    }
    let too_big = || NumberError::TooLarge;
    let int: u64 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| too_big())?
    };
    let frac_part = frac_part.trim_end_matches('0');
    if frac_part.len() > 18 {
        return Err(NumberError::TooFine);
    }
    // frac_part = f / 10^len; its share of `scale` must be a whole number.
    let f: u128 = if frac_part.is_empty() {
        0
    } else {
        frac_part.parse().map_err(|_| too_big())?
    };
    let scaled = f * u128::from(scale);
    let denominator = 10u128.pow(frac_part.len() as u32);
    if scaled % denominator != 0 {
        return Err(NumberError::TooFine);
    }
    let frac = u64::try_from(scaled / denominator).map_err(|_| too_big())?;
    int.checked_mul(scale)
        .and_then(|t| t.checked_add(frac))
        .ok_or_else(too_big)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations_with_units() {
        assert_eq!(parse_duration("500us", None), Ok(500_000));
        assert_eq!(parse_duration("2ms", None), Ok(2_000_000));
        assert_eq!(parse_duration("1s", None), Ok(1_000_000_000));
        assert_eq!(parse_duration("1.5ms", None), Ok(1_500_000));
        assert_eq!(parse_duration("0.000001ms", None), Ok(1));
        assert_eq!(parse_duration("250 ns", None), Ok(250));
    }

    #[test]
    fn bare_numbers_need_a_context() {
        assert_eq!(
            parse_duration("5", None),
            Err(UnitError::NeedsUnit { text: "5".into() })
        );
        assert!(parse_duration("5", None)
            .unwrap_err()
            .to_string()
            .contains("needs a unit"));
        assert_eq!(parse_duration("5", Some(1_000_000)), Ok(5_000_000));
        assert_eq!(parse_duration("0.5", Some(1_000_000)), Ok(500_000));
    }

    #[test]
    fn bad_durations() {
        assert!(parse_duration("-1ms", None).is_err());
        assert!(parse_duration("1.5ns", None).is_err());
        assert!(parse_duration("abc", None).is_err());
        assert!(parse_duration("3 parsecs", None)
            .unwrap_err()
            .to_string()
            .contains("unknown time unit"));
        assert_eq!(
            parse_duration("1.5ns", None).unwrap_err().to_string(),
            "`1.5ns`: finer than the smallest unit (1 ns or 1 byte)"
        );
        assert!(parse_duration("99999999999999999999s", None).is_err());
        assert!(parse_duration("ms", None).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("1.5").is_err());
        assert!(parse_size("3 bananas").is_err());
    }

    #[test]
    fn formatting_picks_the_largest_exact_unit() {
        assert_eq!(format_duration(2_000_000), "2ms");
        assert_eq!(format_duration(1_500_000), "1500us");
        assert_eq!(format_duration(7), "7ns");
        assert_eq!(format_duration(0), "0ns");
    }

    #[test]
    fn sizes_format_exactly() {
        assert_eq!(format_size(256 << 20), "256MiB");
        assert_eq!(format_size(1536), "1536B");
        assert_eq!(format_size(3 << 30), "3GiB");
    }

    proptest! {
        #[test]
        fn format_size_then_parse_is_identity(bytes in any::<u64>()) {
            prop_assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }

        #[test]
        fn format_then_parse_is_identity(ns in any::<u64>()) {
            prop_assert_eq!(parse_duration(&format_duration(ns), None), Ok(ns));
        }
    }
}
