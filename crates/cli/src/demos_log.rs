//! What `demos-sched` writes besides its programs' output, in DEmOS's formats: its log
//! lines on stderr (spdlog's `>>> HH:MM:SS.mmm [level] message`, or `>>> [level]
//! message` with `DEMOS_PLAIN_LOG`, filtered by `SPDLOG_LEVEL`), and the schedule log
//! `DEMOS_SCHEDULE_LOG` names (one line per grant, `    10: cpus=0 cmd='dummy' budget=5`,
//! [`bulkhead_windows::drive::demos_line`]), made from the run's own schedule log.

use std::fs::File;
use std::io::{BufReader, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};

/// spdlog's levels, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
    Critical,
    Off,
}

impl Level {
    /// spdlog's name of a level (`SPDLOG_LEVEL` also takes `warn` and `err`).
    fn parse(name: &str) -> Option<Level> {
        Some(match name.trim() {
            "trace" => Level::Trace,
            "debug" => Level::Debug,
            "info" => Level::Info,
            "warning" | "warn" => Level::Warn,
            "error" | "err" => Level::Error,
            "critical" => Level::Critical,
            "off" => Level::Off,
            _ => return None,
        })
    }

    /// How spdlog prints it.
    fn name(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warning",
            Level::Error => "error",
            Level::Critical => "critical",
            Level::Off => "off",
        }
    }
}

/// demos-sched's logger (DEmOS's `main` logger).
#[derive(Debug, Clone, Copy)]
pub struct Log {
    level: Level,
    plain: bool,
}

impl Log {
    /// From the environment: `SPDLOG_LEVEL` (a level, `main=LEVEL`, or a comma-separated
    /// list of both; default `info`; a name spdlog does not know is ignored) and
    /// `DEMOS_PLAIN_LOG` (set: no time).
    pub fn from_env() -> Log {
        let spec = std::env::var("SPDLOG_LEVEL").unwrap_or_default();
        Log {
            level: level_of_main(&spec).unwrap_or(Level::Info),
            plain: std::env::var_os("DEMOS_PLAIN_LOG").is_some(),
        }
    }

    pub fn error(&self, message: impl std::fmt::Display) {
        self.write(Level::Error, message);
    }

    pub fn warn(&self, message: impl std::fmt::Display) {
        self.write(Level::Warn, message);
    }

    pub fn info(&self, message: impl std::fmt::Display) {
        self.write(Level::Info, message);
    }

    /// One line on stderr in one write (the programs share stderr).
    fn write(&self, level: Level, message: impl std::fmt::Display) {
        if level < self.level {
            return;
        }
        let line = match self.plain {
            true => format!(">>> [{}] {message}\n", level.name()),
            false => format!(">>> {} [{}] {message}\n", clock(), level.name()),
        };
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

/// The level `SPDLOG_LEVEL`'s text `spec` gives DEmOS's `main` logger: its own entry
/// (`main=LEVEL`) before the global one (`LEVEL`).
fn level_of_main(spec: &str) -> Option<Level> {
    let mut global = None;
    for entry in spec.split(',') {
        match entry.split_once('=') {
            Some((logger, level)) if logger.trim() == "main" => return Level::parse(level),
            Some(_) => {}
            None => global = Level::parse(entry).or(global),
        }
    }
    global
}

/// The local time of day as spdlog's `%H:%M:%S.%e`.
fn clock() -> String {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    // SAFETY: an all-zero tm is a valid value for localtime_r to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r reads the time_t and writes the tm, both valid for the call.
    unsafe { libc::localtime_r(&now.tv_sec, &mut tm) };
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        now.tv_nsec / 1_000_000
    )
}

/// `DEMOS_SCHEDULE_LOG`: the run writes its JSON-lines schedule log into an anonymous
/// memory file (named to it by its `/proc/self/fd` path); [`ScheduleLog::finish`] turns
/// it into DEmOS's lines in the file DEmOS's variable names.
pub struct ScheduleLog {
    out: File,
    out_path: PathBuf,
    json: File,
}

impl ScheduleLog {
    /// Creates (truncates) `path` now, so that a path that cannot be written is
    /// reported before anything runs.
    pub fn create(path: &Path) -> Result<ScheduleLog, String> {
        let what = |e: std::io::Error| format!("DEMOS_SCHEDULE_LOG {}: {e}", path.display());
        let out = File::create(path).map_err(what)?;
        // SAFETY: memfd_create takes a NUL-terminated name and flags; it returns a new fd
        // or -1.
        let fd = unsafe { libc::memfd_create(c"demos-schedule-log".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(what(std::io::Error::last_os_error()));
        }
        // SAFETY: fd was just returned by memfd_create and is owned by nobody else.
        let json = unsafe { File::from_raw_fd(fd) };
        Ok(ScheduleLog {
            out,
            out_path: path.to_path_buf(),
            json,
        })
    }

    /// Where the run writes its own schedule log (`RunOptions::schedule_log`).
    pub fn run_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.json.as_raw_fd()))
    }

    /// Writes DEmOS's line of each grant the run logged.
    pub fn finish(mut self) -> Result<(), String> {
        let what = |e: String| format!("DEMOS_SCHEDULE_LOG {}: {e}", self.out_path.display());
        self.json.rewind().map_err(|e| what(e.to_string()))?;
        let events = bulkhead_trace::schedule_log::read_schedule_log(BufReader::new(&self.json))
            .map_err(|e| what(e.to_string()))?;
        let text: String = events
            .iter()
            .filter_map(bulkhead_windows::drive::demos_line)
            .map(|line| line + "\n")
            .collect();
        self.out
            .write_all(text.as_bytes())
            .map_err(|e| what(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spdlog_level_takes_mains_entry_before_the_global_one() {
        assert_eq!(level_of_main(""), None);
        assert_eq!(level_of_main("warning"), Some(Level::Warn));
        assert_eq!(level_of_main("debug,process=info"), Some(Level::Debug));
        assert_eq!(
            level_of_main("process=trace,main=err,info"),
            Some(Level::Error)
        );
        assert_eq!(level_of_main("loud"), None);
    }

    #[test]
    fn the_schedule_log_becomes_demos_lines() {
        let dir = std::env::temp_dir().join(format!("demos-log-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("demos-schedule.log");
        let log = ScheduleLog::create(&path).unwrap();
        let run = bulkhead_trace::EventKind::Run {
            cpus: bulkhead_model::CpuSet::parse("0").unwrap(),
            partition: "SC".into(),
            cmd: "dummy 1".into(),
            budget_ns: 2_000_000,
        };
        let mut json = File::create(log.run_path()).unwrap();
        for t in [0, 10_000_000] {
            let line =
                bulkhead_trace::schedule_log::line(&bulkhead_trace::Event::new(t, run.clone()));
            json.write_all(line.as_bytes()).unwrap();
        }
        drop(json);
        log.finish().unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "     0: cpus=0 cmd='dummy 1' budget=2\n    10: cpus=0 cmd='dummy 1' budget=2\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
