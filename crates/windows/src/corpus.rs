//! The DEmOS scenario corpus: the window scenarios of the conformance suite's directory
//! ([`dir`]: `crates/conformance/scenarios/windows-*`), each a system description
//! `NAME.yaml` and its expected schedule `NAME.log`, instantiated by five suites: the
//! pure machine ([`crate::drive::drive`]), the simulator, real cgroups
//! (`bulkhead-runtime`), `bulkhead run` against `bulkhead sim` (`bulkhead-cli`) and the
//! conformance suite (docs/conformance.md), which also reads the other scenarios there.
//!
//! The logs are in DEmOS's notation (`test/0300-schedule.t`,
//! [`crate::drive::demos_line`]). A description's leading comment lines set how it
//! runs: `# until: 20ms` (the stop time, required), `# seed: 2` (default 0) and
//! `# process: CMD=BEHAVIOUR` (per command, [`Behaviour::parse`]; default busy).
//!
//! The real executions run the scenarios whose schedule does not depend on how fast
//! the processes are ([`Header::is_timed_by_processes`] is false): a real process
//! yields or exits after its own CPU time, which a loaded machine gives it late, so
//! those few are checked with bounds in the real suites' own tests instead.

use crate::drive::{BadBehaviour, Behaviour};
use bulkhead_model::units::UnitError;
use bulkhead_model::{Nanos, System};
use std::path::{Path, PathBuf};

/// Why the corpus, or one of its scenarios, could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A header line of `NAME.yaml` (`line` counts from 1).
    #[error("{name}.yaml:{line}: {problem}")]
    Header {
        name: String,
        line: usize,
        problem: HeaderProblem,
    },
    #[error("{name}.yaml: no `# until:` line")]
    NoUntil { name: String },
}

/// What is wrong with one header line.
#[derive(Debug, thiserror::Error)]
pub enum HeaderProblem {
    #[error("{0}")]
    Duration(#[from] UnitError),
    #[error("bad seed")]
    Seed,
    #[error("want CMD=BEHAVIOUR")]
    Process,
    #[error("{0}")]
    Behaviour(#[from] BadBehaviour),
    /// A key of the reader that extends the header ([`Header::read`]'s `other`).
    #[error("{0}")]
    Other(String),
}

/// One scenario of the corpus.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file name without `.yaml`.
    pub name: String,
    /// The system description.
    pub yaml: String,
    pub header: Header,
    /// The expected schedule, one line per grant.
    pub expected: Vec<String>,
}

/// What a description's header says about how it runs: its leading `# KEY: VALUE`
/// comment lines `until:` (required), `seed:` and `process:`. The one reader of the
/// scenario directory's headers: the conformance suite reads its own keys through
/// [`Header::read`]'s `other`.
#[derive(Debug, Clone, Default)]
pub struct Header {
    pub until: Nanos,
    pub seed: u64,
    /// By command: how the process behaves (others are busy).
    pub behaviours: Vec<(String, Behaviour)>,
}

impl Header {
    /// Reads the header of description `NAME.yaml` (`yaml`): its leading lines that
    /// start with `# `. A line whose key is not `until`, `seed` or `process` (or that has
    /// none) goes to `other`, without the `# `, which answers what is wrong with it, if
    /// anything. Errors name `NAME.yaml:LINE`.
    pub fn read(
        name: &str,
        yaml: &str,
        mut other: impl FnMut(&str) -> Option<String>,
    ) -> Result<Header, CorpusError> {
        let mut header = Header::default();
        for (i, line) in yaml.lines().enumerate() {
            let Some(rest) = line.strip_prefix("# ") else {
                break;
            };
            let problem = match header.key(rest) {
                Ok(true) => None,
                Ok(false) => other(rest).map(HeaderProblem::Other),
                Err(e) => Some(e),
            };
            if let Some(problem) = problem {
                let (name, line) = (name.to_string(), i + 1);
                return Err(CorpusError::Header {
                    name,
                    line,
                    problem,
                });
            }
        }
        if header.until == 0 {
            return Err(CorpusError::NoUntil { name: name.into() });
        }
        Ok(header)
    }

    /// Reads `line` if its key is one of the header's; false if it is not.
    fn key(&mut self, line: &str) -> Result<bool, HeaderProblem> {
        let duration = |v: &str| bulkhead_model::units::parse_duration(v.trim(), None);
        match line.split_once(':') {
            Some(("until", v)) => self.until = duration(v)?,
            Some(("seed", v)) => self.seed = v.trim().parse().map_err(|_| HeaderProblem::Seed)?,
            Some(("process", v)) => {
                let (cmd, b) = v.trim().rsplit_once('=').ok_or(HeaderProblem::Process)?;
                self.behaviours
                    .push((cmd.to_string(), Behaviour::parse(b)?));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether a process yields or exits by itself, so that the schedule depends on
    /// how fast it runs.
    pub fn is_timed_by_processes(&self) -> bool {
        self.behaviours
            .iter()
            .any(|(_, b)| matches!(b, Behaviour::YieldAfter(_) | Behaviour::ExitAfter(_)))
    }

    /// Whether a process initializes first (`init:DUR`), so that the schedule starts
    /// when the processes say so.
    pub fn has_init_phase(&self) -> bool {
        self.behaviours
            .iter()
            .any(|(_, b)| matches!(b, Behaviour::InitFor(_)))
    }
}

/// The names of the descriptions (`NAME.yaml`) of `dir` that start with `prefix`, sorted.
pub fn names(dir: &Path, prefix: &str) -> Result<Vec<String>, CorpusError> {
    let entries = std::fs::read_dir(dir).map_err(|source| CorpusError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".yaml")
                .filter(|n| n.starts_with(prefix))
                .map(String::from)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// The directory of the corpus (in the source tree): the conformance suite's scenarios,
/// of which the window schedules' are the corpus.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/scenarios")
}

/// The prefix of the corpus's scenarios among the conformance suite's.
pub const PREFIX: &str = "windows-";

/// Every scenario of `dir` whose name starts with [`PREFIX`], by name.
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, CorpusError> {
    let names = names(dir, PREFIX)?;
    names.iter().map(|n| Scenario::load(dir, n)).collect()
}

/// Every scenario of the corpus.
pub fn all() -> Vec<Scenario> {
    load_dir(&dir()).expect("the scenario corpus loads")
}

impl Scenario {
    /// Reads `dir/NAME.yaml` and `dir/NAME.log`.
    pub fn load(dir: &Path, name: &str) -> Result<Scenario, CorpusError> {
        let read = |ext: &str| {
            let path = dir.join(format!("{name}.{ext}"));
            std::fs::read_to_string(&path).map_err(|source| CorpusError::Read { path, source })
        };
        let yaml = read("yaml")?;
        let expected = read("log")?.lines().map(String::from).collect();
        // Other lines are prose.
        let header = Header::read(name, &yaml, |_| None)?;
        Ok(Scenario {
            name: name.to_string(),
            yaml,
            header,
            expected,
        })
    }

    /// The description as a system.
    pub fn system(&self) -> System {
        bulkhead_model::load_str(&self.yaml, &format!("{}.yaml", self.name))
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
            .system
    }

    /// The behaviour of the process running `cmd`.
    pub fn behaviour(&self, cmd: &str) -> Behaviour {
        self.header
            .behaviours
            .iter()
            .find(|(c, _)| c == cmd)
            .map_or(Behaviour::Busy, |&(_, b)| b)
    }

    /// The system with every process's command replaced by one that behaves as the
    /// scenario says: `SPIN #CMD` with `spin` a program that spins forever
    /// (`bulkhead-spin`), `PROBE /dev/null #CMD` for an `init` process with `probe` a
    /// spinner that signals initialization completed (`bulkhead-probe OUT`); the original
    /// command is kept as a shell comment. Returns the system and, per real command, the
    /// original. Only for scenarios not [timed by their processes](Header::is_timed_by_processes).
    pub fn real_system(&self, spin: &str, probe: &str) -> (System, Vec<(String, String)>) {
        assert!(
            !self.header.is_timed_by_processes(),
            "{}: timed by its processes",
            self.name
        );
        let mut system = self.system();
        let mut names = Vec::new();
        for process in system.partitions.iter_mut().flat_map(|p| &mut p.processes) {
            let real = match process.init {
                true => format!("{probe} /dev/null #{}", process.cmd),
                false => format!("{spin} #{}", process.cmd),
            };
            names.push((real.clone(), process.cmd.clone()));
            process.cmd = real;
        }
        (system, names)
    }
}

/// Whether `actual` is `expected`; the error shows both.
pub fn check(actual: &[String], expected: &[String]) -> Result<(), Mismatch> {
    match actual == expected {
        true => Ok(()),
        false => Err(Mismatch {
            expected: expected.to_vec(),
            actual: actual.to_vec(),
        }),
    }
}

/// A schedule that is not the expected one ([`check`]).
#[derive(Debug, thiserror::Error)]
#[error("expected:\n{}\nactual:\n{}", expected.join("\n"), actual.join("\n"))]
pub struct Mismatch {
    pub expected: Vec<String>,
    pub actual: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_set_how_a_scenario_runs() {
        let dir = std::env::temp_dir().join(format!("bulkhead-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let yaml = "# until: 20ms\n# seed: 2\n# process: a b=yield:1ms\nwindows: []\n";
        std::fs::write(dir.join("s.yaml"), yaml).unwrap();
        std::fs::write(dir.join("s.log"), "x\n").unwrap();
        std::fs::write(dir.join("bad.yaml"), "# seed: x\n").unwrap();
        std::fs::write(dir.join("bad.log"), "").unwrap();
        let s = Scenario::load(&dir, "s").unwrap();
        assert_eq!((s.header.until, s.header.seed), (20_000_000, 2));
        assert!(s.header.is_timed_by_processes());
        assert_eq!(s.behaviour("a b"), Behaviour::YieldAfter(1_000_000));
        assert_eq!(s.expected, ["x"]);
        let e = Scenario::load(&dir, "bad").unwrap_err().to_string();
        assert_eq!(e, "bad.yaml:1: bad seed");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
