//! A scenario: a system description and what is expected of every execution of it,
//! as data. `scenarios/NAME.yaml` is the description, its leading comment lines the
//! scenario's header; `scenarios/NAME.log`, when present, the window schedule every
//! execution must grant, in DEmOS's notation (`test/0300-schedule.t`,
//! [`bulkhead_windows::drive::demos_line`]).
//!
//! Header lines are `# KEY: VALUE`; other comment lines are the scenario's prose. The
//! keys the DEmOS corpus has too are read by its reader ([`Header`]: `until:`, the schedule
//! time the executions are compared over, required; `seed:`, the seed of budget jitter,
//! default 0; `process: CMD=BEHAVIOUR`, what a window process does, default busy); the
//! suite's own are:
//!
//! - `paper:` the paper section the scenario exercises (required);
//! - `exec: P%` the deterministic workload: every rt job executes P percent of its
//!   budget (default 50), in `sim` as a fixed execution time, in `run` as
//!   `bulkhead-periodic --exec-us` of the task; `exec: PARTITION/TASK=P%` sets one
//!   task's share, above 100% an overrun (the task then has no promise to keep: the
//!   checks hold the others to theirs);
//! - `mode-switch: AT:MODE` a switch request at schedule time AT (repeatable);
//! - `suspend: AT:DURATION` a stop at schedule time AT for DURATION (repeatable);
//! - `power-policy: NAME` the power policy of the window schedule;
//! - `wcrt: PARTITION/TASK=DURATION` a WCRT the analysis must give, reached exactly
//!   by a simulation at WCET from the synchronous release (the critical instant;
//!   repeatable);
//! - `run-cannot: REASON` why `run` cannot execute it on a machine like this one
//!   ([`crate::run::Run`]'s `cannot` prints it and skips the scenario).

use crate::observation::Stimuli;
use bulkhead_model::units::{parse_duration, UnitError};
use bulkhead_model::{LoadError, Nanos, System};
use bulkhead_sim::{ModeSwitch, ModeSwitchError, Suspension};
use bulkhead_windows::corpus::{CorpusError, Header};
use std::path::{Path, PathBuf};

/// Why a scenario could not be read, or gives no system to execute.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The directory's listing or a header line (`NAME.yaml:LINE`).
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error("{name}.yaml: no `# paper:` line")]
    NoPaper { name: String },
    #[error("{name}: {source}")]
    Description { name: String, source: LoadError },
    #[error("{name}: pipeline `{pipeline}` is infeasible")]
    Infeasible { name: String, pipeline: String },
}

/// What is wrong with a header line of the suite's own keys.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("want {0}")]
    Syntax(&'static str),
    #[error("`{text}`: want 1% to {max}%")]
    Percent { text: String, max: u32 },
    #[error(transparent)]
    Duration(#[from] UnitError),
    #[error(transparent)]
    ModeSwitch(#[from] ModeSwitchError),
}

/// One scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file name without `.yaml`.
    pub name: String,
    /// The system description.
    pub yaml: String,
    /// The prose of the header.
    pub about: String,
    /// The paper section it exercises.
    pub paper: String,
    /// The schedule time compared, the jitter's seed, the window processes' behaviours.
    pub header: Header,
    /// Percent of its budget every rt job executes.
    pub exec_pct: u32,
    /// Per task (`partition/task`), a share of its own.
    pub exec_of: Vec<(String, u32)>,
    pub mode_switches: Vec<ModeSwitch>,
    pub suspensions: Vec<Suspension>,
    /// The power policy's name as `sim` and `run` take it (`--power-policy`).
    pub power_policy: Option<String>,
    /// Pinned WCRTs: (`partition/task`, WCRT).
    pub wcrts: Vec<(String, Nanos)>,
    /// Why `run` cannot execute it on a machine like this one (`run-cannot:`).
    pub run_cannot: Option<String>,
    /// The window schedule's grants in DEmOS's notation (`NAME.log`), if given.
    pub expected_log: Option<Vec<String>>,
}

/// The scenario directory (in the source tree).
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// Every scenario of `dir`, by name.
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, ScenarioError> {
    let names = bulkhead_windows::corpus::names(dir, "")?;
    names.iter().map(|n| Scenario::load(dir, n)).collect()
}

/// Every scenario of the directory.
pub fn all() -> Vec<Scenario> {
    load_dir(&dir()).unwrap_or_else(|e| panic!("the scenarios load: {e}"))
}

impl Scenario {
    /// Reads `dir/NAME.yaml` and, if it exists, `dir/NAME.log`.
    pub fn load(dir: &Path, name: &str) -> Result<Scenario, ScenarioError> {
        let yaml = read(&dir.join(format!("{name}.yaml")))?;
        let log = dir.join(format!("{name}.log"));
        let expected_log = match log.exists() {
            true => Some(read(&log)?.lines().map(String::from).collect()),
            false => None,
        };
        let mut scenario = Scenario {
            name: name.to_string(),
            yaml: yaml.clone(),
            about: String::new(),
            paper: String::new(),
            header: Header::default(),
            exec_pct: 50,
            exec_of: Vec::new(),
            mode_switches: Vec::new(),
            suspensions: Vec::new(),
            power_policy: None,
            wcrts: Vec::new(),
            run_cannot: None,
            expected_log,
        };
        scenario.header = Header::read(name, &yaml, |line| {
            scenario.key(line).err().map(|e| e.to_string())
        })?;
        if scenario.paper.is_empty() {
            let name = name.to_string();
            return Err(ScenarioError::NoPaper { name });
        }
        Ok(scenario)
    }

    /// Reads a header line of the suite's own keys; other lines are prose.
    fn key(&mut self, line: &str) -> Result<(), KeyError> {
        let duration = |v: &str| parse_duration(v, None);
        let Some((key, value)) = line.split_once(':') else {
            self.prose(line);
            return Ok(());
        };
        let value = value.trim();
        match key {
            "paper" => self.paper = value.to_string(),
            "run-cannot" => self.run_cannot = Some(value.to_string()),
            "exec" => match value.split_once('=') {
                Some((task, pct)) => self.exec_of.push((task.to_string(), percent(pct, 1000)?)),
                None => self.exec_pct = percent(value, 100)?,
            },
            "mode-switch" => self.mode_switches.push(ModeSwitch::parse(value)?),
            "suspend" => {
                let (at, long) = value
                    .split_once(':')
                    .ok_or(KeyError::Syntax("AT:DURATION"))?;
                self.suspensions.push(Suspension {
                    at: duration(at)?,
                    duration: duration(long)?,
                });
            }
            "power-policy" => self.power_policy = Some(value.to_string()),
            "wcrt" => {
                let (task, wcrt) = value
                    .split_once('=')
                    .ok_or(KeyError::Syntax("PARTITION/TASK=DURATION"))?;
                self.wcrts.push((task.to_string(), duration(wcrt)?));
            }
            _ => self.prose(line),
        }
        Ok(())
    }

    /// The percent of its budget each job of `task` (`partition/task`) executes.
    pub fn exec_pct_of(&self, task: &str) -> u32 {
        let own = self.exec_of.iter().find(|(t, _)| t == task);
        own.map_or(self.exec_pct, |&(_, p)| p)
    }

    /// Whether the jobs of `task` (`partition/task`) overrun their budget.
    pub fn overruns(&self, task: &str) -> bool {
        self.exec_pct_of(task) > 100
    }

    fn prose(&mut self, line: &str) {
        if !self.about.is_empty() {
            self.about.push(' ');
        }
        self.about.push_str(line);
    }

    /// The description as a system.
    pub fn system(&self) -> Result<System, ScenarioError> {
        bulkhead_model::load_str(&self.yaml, &format!("{}.yaml", self.name))
            .map(|l| l.system)
            .map_err(|source| ScenarioError::Description {
                name: self.name.clone(),
                source,
            })
    }

    /// The system every execution runs: its pipelines solved and lowered
    /// (`bulkhead_analysis::pipes::apply`, as `sim` and `run` do); an infeasible
    /// pipeline is an error naming it.
    pub fn solved(&self) -> Result<System, ScenarioError> {
        let system = self.system()?;
        if system.pipelines.is_empty() {
            return Ok(system);
        }
        let options = bulkhead_analysis::system::Options::default();
        let solutions = bulkhead_analysis::pipes::solve(&system, &options);
        if let Some(s) = solutions.iter().find(|s| !s.feasible) {
            return Err(ScenarioError::Infeasible {
                name: self.name.clone(),
                pipeline: s.name.clone(),
            });
        }
        Ok(bulkhead_analysis::pipes::apply(&system, &solutions))
    }

    /// The scenario with its mode switches and stops at the instants an execution
    /// received them (`at`, in schedule time; a real run's requests come through its
    /// control socket late), so that a simulation of it decides on the same inputs;
    /// `None` when the execution did not receive each of them.
    pub fn retimed(&self, at: &Stimuli) -> Option<Scenario> {
        let counts = (at.mode_requests.len(), at.suspends.len());
        if counts != (self.mode_switches.len(), self.suspensions.len()) {
            return None;
        }
        let mut s = self.clone();
        for (m, &t) in s.mode_switches.iter_mut().zip(&at.mode_requests) {
            m.at = t;
        }
        for (x, &(t, duration)) in s.suspensions.iter_mut().zip(&at.suspends) {
            *x = Suspension { at: t, duration };
        }
        Some(s)
    }
}

/// `P%` with `1 <= P <= max`.
fn percent(text: &str, max: u32) -> Result<u32, KeyError> {
    let pct = text
        .trim()
        .strip_suffix('%')
        .ok_or(KeyError::Syntax("P%, e.g. 50%"))?;
    match pct.parse() {
        Ok(p) if (1..=max).contains(&p) => Ok(p),
        _ => Err(KeyError::Percent {
            text: text.to_string(),
            max,
        }),
    }
}

fn read(path: &Path) -> Result<String, ScenarioError> {
    std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_set_how_a_scenario_runs_and_errors_name_the_line() {
        let dir = std::env::temp_dir().join(format!("bulkhead-conform-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let yaml = "# Two tasks: a note.\n# paper: DEmOS 3.2\n# until: 20ms\n# seed: 2\n# process: a b=yield:1ms\n# exec: 40%\n# exec: p/hog=150%\n# mode-switch: 5ms:two\n# suspend: 7ms:3ms\n# wcrt: p/a=8ms\n# run-cannot: no CAN here\nwindows: []\n";
        std::fs::write(dir.join("s.yaml"), yaml).unwrap();
        std::fs::write(dir.join("s.log"), "x\n").unwrap();
        std::fs::write(dir.join("bad.yaml"), "# paper: x\n# exec: 0%\n").unwrap();
        std::fs::write(dir.join("nopaper.yaml"), "# until: 1ms\n").unwrap();
        let s = Scenario::load(&dir, "s").unwrap();
        assert_eq!(
            (s.header.until, s.header.seed, s.exec_pct),
            (20_000_000, 2, 40)
        );
        assert_eq!((s.exec_pct_of("p/hog"), s.exec_pct_of("p/a")), (150, 40));
        assert!(s.overruns("p/hog") && !s.overruns("p/a"));
        assert_eq!(s.about, "Two tasks: a note.");
        assert_eq!(s.paper, "DEmOS 3.2");
        assert!(s.header.is_timed_by_processes());
        assert_eq!(
            s.header.behaviours[0].1,
            bulkhead_sim::Behaviour::YieldAfter(1_000_000)
        );
        assert_eq!(s.run_cannot.as_deref(), Some("no CAN here"));
        assert_eq!(
            (s.mode_switches[0].at, s.mode_switches[0].mode.as_str()),
            (5_000_000, "two")
        );
        assert_eq!(s.suspensions[0].duration, 3_000_000);
        assert_eq!(s.wcrts, [("p/a".to_string(), 8_000_000)]);
        assert_eq!(s.expected_log.as_deref(), Some(&["x".to_string()][..]));
        let e = Scenario::load(&dir, "bad").unwrap_err().to_string();
        assert!(e.starts_with("bad.yaml:2: "), "{e}");
        let e = Scenario::load(&dir, "nopaper").unwrap_err().to_string();
        assert!(e.contains("no `# paper:` line"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A run whose stop froze it at 153 ms (schedule time) for 102 ms is compared with
    /// the simulation of that stop, not of the scenario's at 150 ms for 100 ms; a stop
    /// it did not receive leaves nothing to retime.
    #[test]
    fn stimuli_are_retimed_to_when_the_execution_received_them() {
        let ms = 1_000_000;
        let s = Scenario::load(&dir(), "stop-start-order").unwrap();
        assert_eq!(
            (s.suspensions[0].at, s.suspensions[0].duration),
            (150 * ms, 100 * ms)
        );
        let at = Stimuli {
            mode_requests: Vec::new(),
            suspends: vec![(153 * ms, 102 * ms)],
        };
        let r = s.retimed(&at).unwrap();
        assert_eq!(
            (r.suspensions[0].at, r.suspensions[0].duration),
            (153 * ms, 102 * ms)
        );
        assert!(s.retimed(&Stimuli::default()).is_none());
    }
}
