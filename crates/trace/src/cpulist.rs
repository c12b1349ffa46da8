//! CPU lists in the kernel's cpulist syntax (`0`, `0-2`, `0,2,5-7`), serialized as
//! that string so that the simulator and the runtime write identical bytes.
//!
//! The trace crate is a low layer and does not depend on `bulkhead-model`; this is
//! the small part of its `CpuSet` the trace needs.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A sorted, duplicate-free list of CPU numbers; displays and serializes as a cpulist.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuList(Vec<u32>);

impl CpuList {
    /// The list of the given CPUs, sorted and without duplicates.
    pub fn new(cpus: impl IntoIterator<Item = u32>) -> CpuList {
        let mut cpus: Vec<u32> = cpus.into_iter().collect();
        cpus.sort_unstable();
        cpus.dedup();
        CpuList(cpus)
    }

    /// Parses a cpulist such as `0,2,5-7`; the empty string is the empty list.
    pub fn parse(text: &str) -> Result<CpuList, String> {
        let mut cpus = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (parse_cpu(lo, text)?, parse_cpu(hi, text)?),
                None => (parse_cpu(part, text)?, parse_cpu(part, text)?),
            };
            if lo > hi {
                return Err(format!("cpulist `{text}`: range {part} runs backwards"));
            }
            cpus.extend(lo..=hi);
        }
        Ok(CpuList::new(cpus))
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn parse_cpu(text: &str, whole: &str) -> Result<u32, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("cpulist `{whole}`: `{text}` is not a CPU number"))
}

impl fmt::Display for CpuList {
    /// Ascending, runs of consecutive CPUs as ranges (`0-2,5`, `0-1`): the same text as
    /// `bulkhead_model::CpuSet`'s `Display`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let mut j = i;
            while j + 1 < self.0.len() && self.0[j + 1] == self.0[j] + 1 {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            match j - i {
                0 => write!(f, "{}", self.0[i])?,
                _ => write!(f, "{}-{}", self.0[i], self.0[j])?,
            }
            i = j + 1;
        }
        Ok(())
    }
}

impl FromIterator<u32> for CpuList {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> CpuList {
        CpuList::new(iter)
    }
}

impl Serialize for CpuList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<CpuList, D::Error> {
        let text = String::deserialize(deserializer)?;
        CpuList::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_like_the_kernel() {
        assert_eq!(CpuList::new([0]).to_string(), "0");
        assert_eq!(CpuList::new([1, 0]).to_string(), "0-1");
        assert_eq!(CpuList::new([0, 2]).to_string(), "0,2");
        assert_eq!(CpuList::new([0, 1, 2, 5, 7, 8, 9]).to_string(), "0-2,5,7-9");
        assert_eq!(CpuList::new([]).to_string(), "");
    }

    #[test]
    fn parses_what_it_displays() {
        for text in ["0", "0,1", "0-2,5,7-9", "", "3-4"] {
            assert_eq!(
                CpuList::parse(text).unwrap(),
                CpuList::parse(&CpuList::parse(text).unwrap().to_string()).unwrap()
            );
        }
        assert_eq!(
            CpuList::parse("2-0").unwrap_err(),
            "cpulist `2-0`: range 2-0 runs backwards"
        );
        assert!(CpuList::parse("a").is_err());
    }
}
