//! CPU sets in the kernel's cpulist syntax: `0`, `0-2`, `0,2,5-7`.

use std::collections::BTreeSet;
use std::fmt;

/// Highest CPU number accepted (the kernel's default NR_CPUS on x86-64 is 8192).
pub const MAX_CPU: u32 = 8191;

/// Why a text is not a CPU list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuListError {
    /// Not numbers and ranges separated by commas.
    NotAList { text: String },
    /// A range whose end is below its start.
    Backwards { text: String, range: String },
    /// A CPU number above [`MAX_CPU`].
    TooLarge { cpu: u32 },
}

impl fmt::Display for CpuListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuListError::NotAList { text } => write!(
                f,
                "`{text}` is not a CPU list (e.g. 0, 0-2, 0,2,5-7 or all)"
            ),
            CpuListError::Backwards { text, range } => {
                write!(f, "`{text}`: range {range} runs backwards")
            }
            CpuListError::TooLarge { cpu } => write!(
                f,
                "CPU {cpu} is beyond the largest supported CPU number {MAX_CPU}"
            ),
        }
    }
}

impl std::error::Error for CpuListError {}

/// The message, for the layers that report in text (command-line value parsers, the
/// description's diagnostics).
impl From<CpuListError> for String {
    fn from(e: CpuListError) -> String {
        e.to_string()
    }
}

/// A non-empty set of CPU numbers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet(BTreeSet<u32>);

impl CpuSet {
    /// Parses a cpulist such as `0,2,5-7`.
    pub fn parse(text: &str) -> Result<CpuSet, CpuListError> {
        let mut cpus = BTreeSet::new();
        for part in text.split(',').map(str::trim) {
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (parse_cpu(lo, text)?, parse_cpu(hi, text)?),
                None => {
                    let cpu = parse_cpu(part, text)?;
                    (cpu, cpu)
                }
            };
            if lo > hi {
                return Err(CpuListError::Backwards {
                    text: text.into(),
                    range: part.into(),
                });
            }
            cpus.extend(lo..=hi);
        }
        Ok(CpuSet(cpus))
    }

    /// A set from CPU numbers; `None` if empty.
    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> Option<CpuSet> {
        let set: BTreeSet<u32> = cpus.into_iter().collect();
        (!set.is_empty()).then_some(CpuSet(set))
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a `CpuSet` is never empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }

    pub fn intersects(&self, other: &CpuSet) -> bool {
        !self.0.is_disjoint(&other.0)
    }
}

fn parse_cpu(s: &str, whole: &str) -> Result<u32, CpuListError> {
    let cpu: u32 = s
        .trim()
        .parse()
        .map_err(|_| CpuListError::NotAList { text: whole.into() })?;
    if cpu > MAX_CPU {
        return Err(CpuListError::TooLarge { cpu });
    }
    Ok(cpu)
}

impl fmt::Display for CpuSet {
    /// The kernel's cpulist format: ascending, ranges for runs (`0-2,5`, `0-1`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpus: Vec<u32> = self.iter().collect();
        let mut parts = Vec::new();
        let mut start = 0;
        while start < cpus.len() {
            let mut end = start;
            while end + 1 < cpus.len() && cpus[end + 1] == cpus[end] + 1 {
                end += 1;
            }
            parts.push(match end - start {
                0 => cpus[start].to_string(),
                _ => format!("{}-{}", cpus[start], cpus[end]),
            });
            start = end + 1;
        }
        f.write_str(&parts.join(","))
    }
}

/// Serialized as its cpulist text (trace events, schedule-log lines).
impl serde::Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<CpuSet, D::Error> {
        let text = String::deserialize(deserializer)?;
        CpuSet::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_demos_forms() {
        assert_eq!(CpuSet::parse("1").unwrap().iter().collect::<Vec<_>>(), [1]);
        assert_eq!(
            CpuSet::parse("0-2").unwrap().iter().collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(
            CpuSet::parse("0,2,5-7").unwrap().iter().collect::<Vec<_>>(),
            [0, 2, 5, 6, 7]
        );
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "a", "1-", "3-1", "1,,2", "-1", "99999"] {
            assert!(CpuSet::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            CpuSet::parse("3-1"),
            Err(CpuListError::Backwards {
                text: "3-1".into(),
                range: "3-1".into()
            })
        );
        assert_eq!(
            CpuSet::parse("99999"),
            Err(CpuListError::TooLarge { cpu: 99999 })
        );
        assert_eq!(
            CpuSet::parse("a").unwrap_err().to_string(),
            "`a` is not a CPU list (e.g. 0, 0-2, 0,2,5-7 or all)"
        );
    }

    #[test]
    fn displays_as_cpulist() {
        assert_eq!(CpuSet::parse("7,5,6,0,2").unwrap().to_string(), "0,2,5-7");
        assert_eq!(CpuSet::parse("0,1").unwrap().to_string(), "0-1");
    }

    proptest! {
        #[test]
        fn display_parses_back(cpus in proptest::collection::btree_set(0u32..64, 1..20)) {
            let set = CpuSet::from_cpus(cpus).unwrap();
            prop_assert_eq!(CpuSet::parse(&set.to_string()).unwrap(), set);
        }
    }
}
