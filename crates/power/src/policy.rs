//! Power policies by name, as DEmOS's `-p` option takes them (DEmOS
//! `src/power_policy/_power_policy.cpp`): `NAME` or `NAME:ARG,ARG,...`, case-insensitive.

use crate::PolicyError;

/// A power policy (DEmOS thesis 3.6; DEmOS `src/power_policy/*.hpp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// Leaves CPUFreq alone (DEmOS `none`, and DEmOS without `-p`).
    None,
    /// Every cluster at its highest frequency for the whole run (DEmOS `high`).
    High,
    /// Every cluster at its lowest frequency for the whole run (DEmOS `low`).
    Low,
    /// Safety-critical partitions at the highest frequency, best-effort ones at the lowest
    /// (DEmOS `minbe`, thesis 4.8, Fig. 7): highest at each window start, lowest once
    /// every slice of the window finished its SC partition.
    MinBe,
    /// Each process's `frequency` on the clusters of its slice while it runs (DEmOS
    /// `per_process`; `imx8_per_process` is the same policy).
    PerProcess,
    /// Each slice's `frequency` on the clusters of its CPUs for its window (DEmOS
    /// `imx8_per_slice`, for any cluster layout).
    PerSlice,
    /// One fixed frequency per cluster, by index into its ascending list of available
    /// frequencies, one index per cluster in CPUFreq policy order (DEmOS `imx8_fixed`,
    /// whose two indices are the A53 cluster `policy0` and the A72 cluster `policy4`).
    Fixed(Vec<usize>),
    /// Per cluster two frequency indices, alternated at each window start (DEmOS
    /// `imx8_alternating:A53_1,A53_2,A72_1,A72_2`); a cluster whose two are equal is fixed.
    Alternating(Vec<(usize, usize)>),
}

/// The names [`Policy::parse`] accepts, for messages.
pub const NAMES: &str = "none, high, low, minbe, per_process, per_slice, fixed:I,I,..., \
alternating:I,J,I,J,... (DEmOS's imx8_per_process, imx8_per_slice, imx8_fixed:I,I and \
imx8_alternating:I,J,I,J as well)";

impl Policy {
    /// Parses DEmOS's `-p` syntax.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let (name, args) = match text.split_once(':') {
            Some((name, args)) => (name, args.split(',').map(str::trim).collect()),
            None => (text, Vec::new()),
        };
        let name = name.trim().to_ascii_lowercase();
        let no_args = |policy: Policy| {
            if args.is_empty() {
                Ok(policy)
            } else {
                Err(PolicyError::TakesNoArguments { name: name.clone() })
            }
        };
        match name.as_str() {
            "none" | "" => no_args(Policy::None),
            "high" => no_args(Policy::High),
            "low" => no_args(Policy::Low),
            "minbe" => no_args(Policy::MinBe),
            "per_process" | "imx8_per_process" => no_args(Policy::PerProcess),
            "per_slice" | "imx8_per_slice" => no_args(Policy::PerSlice),
            "fixed" | "imx8_fixed" => {
                let indices = indices(&name, &args)?;
                exact_count(&name, &indices, 2)?;
                Ok(Policy::Fixed(indices))
            }
            "alternating" | "imx8_alternating" => {
                let indices = indices(&name, &args)?;
                exact_count(&name, &indices, 4)?;
                if indices.len() % 2 != 0 {
                    return Err(PolicyError::OddIndices {
                        name: name.clone(),
                        got: indices.len(),
                    });
                }
                Ok(Policy::Alternating(
                    indices.chunks(2).map(|p| (p[0], p[1])).collect(),
                ))
            }
            _ => Err(PolicyError::Unknown { name: name.clone() }),
        }
    }

    /// Whether the policy uses the `frequency` of processes.
    pub fn uses_process_frequencies(&self) -> bool {
        *self == Policy::PerProcess
    }

    /// Whether the policy uses the `frequency` of slices.
    pub fn uses_slice_frequencies(&self) -> bool {
        *self == Policy::PerSlice
    }
}

fn indices(name: &str, args: &[&str]) -> Result<Vec<usize>, PolicyError> {
    if args.is_empty() {
        return Err(PolicyError::NeedsIndices { name: name.into() });
    }
    args.iter()
        .map(|a| {
            a.parse().map_err(|_| PolicyError::NotAnIndex {
                name: name.into(),
                arg: a.to_string(),
            })
        })
        .collect()
}

/// DEmOS's `imx8_*` policies take an exact argument count (two clusters).
fn exact_count(name: &str, indices: &[usize], imx8: usize) -> Result<(), PolicyError> {
    if name.starts_with("imx8_") && indices.len() != imx8 {
        return Err(PolicyError::ArgumentCount {
            name: name.into(),
            got: indices.len(),
            expected: imx8,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demos_names_are_accepted() {
        assert_eq!(Policy::parse("MinBE"), Ok(Policy::MinBe));
        assert_eq!(Policy::parse("imx8_per_process"), Ok(Policy::PerProcess));
        assert_eq!(Policy::parse("imx8_per_slice"), Ok(Policy::PerSlice));
        assert_eq!(
            Policy::parse("imx8_fixed:0,3"),
            Ok(Policy::Fixed(vec![0, 3]))
        );
        assert_eq!(
            Policy::parse("imx8_alternating:0,3,1,1"),
            Ok(Policy::Alternating(vec![(0, 3), (1, 1)]))
        );
        assert_eq!(Policy::parse("fixed:2"), Ok(Policy::Fixed(vec![2])));
    }

    #[test]
    fn bad_names_and_arguments_say_what_is_wrong() {
        let e = Policy::parse("turbo").unwrap_err().to_string();
        assert!(
            e.contains("unknown power policy `turbo`") && e.contains("minbe"),
            "{e}"
        );
        let e = Policy::parse("imx8_fixed:1").unwrap_err().to_string();
        assert!(e.contains("got 1, expected 2"), "{e}");
        assert_eq!(
            Policy::parse("high:1"),
            Err(PolicyError::TakesNoArguments {
                name: "high".into()
            })
        );
        let e = Policy::parse("high:1").unwrap_err().to_string();
        assert!(e.contains("takes no arguments"), "{e}");
        let e = Policy::parse("fixed:x").unwrap_err().to_string();
        assert!(e.contains("`x` is not a frequency index"), "{e}");
        let e = Policy::parse("alternating:1,2,3").unwrap_err().to_string();
        assert!(e.contains("two frequency indices per cluster"), "{e}");
    }
}
