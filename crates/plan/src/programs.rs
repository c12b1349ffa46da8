//! The programs of a description, resolved once before anything starts, the same way
//! for `check` and `run`, for rt tasks, window processes, be processes and pipeline
//! stages.
//!
//! How a command is executed ([`plan_command`]): directly when it is a plain list of
//! words; through `/bin/sh -c 'exec CMD'` when it needs the shell only to expand words
//! (quotes, variables, globs, redirections); through `/bin/sh -c CMD` when it is a
//! compound command (`;`, `&&`, `|`, ...), which `exec` would cut short, or starts with
//! a word the shell runs itself (`exit`, `cd`, ...), which `exec` cannot run.
//!
//! Where a program is found ([`Search`]): a name with a `/` relative to the working
//! directory (the description's directory, or the current one with `set_cwd: false`);
//! a bare name in bulkhead's own directory first (the directory of the running
//! `bulkhead`, which holds `bulkhead-app`, `bulkhead-periodic`,
//! `demos-signal-completion`, ...), then in the `path` the description sets for the
//! partition, else in the supervisor's `PATH`. A simple shell command (`exec CMD`) has
//! its program resolved the same way and named by its absolute path in the script, so
//! the shell runs the file `check` found. A compound command is run by `/bin/sh`, which
//! looks its programs up in the partition's `PATH`: bulkhead's directory, then
//! `/usr/local/bin:/usr/bin:/bin` ([`DEFAULT_PATH`]), unless `path` says otherwise.
//!
//! What the sandbox must keep visible ([`Exec::needs`]): the program (with the directory
//! of a link to it and its installation prefix, a virtual environment or a directory
//! with `lib/`, [`program_needs`]), the files its
//! arguments name (the script an interpreter is given, a log to replay), and the directories of the partition's
//! `PATH`, each as an absolute path with its symbolic links resolved. The launcher
//! shows those that a private `/tmp` or `/dev/shm` would hide, read-only
//! (`bulkhead_os::sandbox::Mounts`).

use bulkhead_model::{PartitionKind, System};
use std::ffi::OsString;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The `PATH` of a partition's processes after bulkhead's own directory.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What of the machine the resolution reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The directory programs start in: relative program names are found from it.
    pub workdir: PathBuf,
    /// bulkhead's own directory (of the running `bulkhead`), searched first for a bare
    /// name; `None`: not searched.
    pub own_dir: Option<PathBuf>,
    /// The supervisor's `PATH`: where a bare name is looked up after `own_dir` when the
    /// description sets no `path`.
    pub path: OsString,
}

impl Host {
    /// This process's view: `own_dir` the directory of the running executable, `path`
    /// its `PATH` (the default when it has none).
    pub fn current(workdir: &Path) -> Host {
        let own_dir = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf));
        Host {
            workdir: workdir.to_path_buf(),
            own_dir,
            path: std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into()),
        }
    }
}

/// Where one partition's bare program names are found, and the `PATH` its processes get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// Searched in order for a bare name.
    dirs: Vec<PathBuf>,
    /// The partition's `PATH`.
    env_path: String,
}

impl Search {
    /// The search of a partition whose `path` key (its own or the system's) is
    /// `path_key`, with a clean environment (`clean_env`) or the supervisor's.
    pub fn new(host: &Host, path_key: Option<&str>, clean_env: bool) -> Search {
        let own = host.own_dir.as_ref().map(|d| d.display().to_string());
        let lookup: OsString = path_key.map_or_else(|| host.path.clone(), OsString::from);
        let dirs = host
            .own_dir
            .iter()
            .cloned()
            .chain(std::env::split_paths(&lookup))
            .collect();
        let after_own = match clean_env {
            true => DEFAULT_PATH.to_string(),
            false => host.path.to_string_lossy().into_owned(),
        };
        let env_path = match (path_key, own) {
            (Some(p), _) => p.to_string(),
            (None, Some(own)) => format!("{own}:{after_own}"),
            (None, None) => after_own,
        };
        Search { dirs, env_path }
    }

    /// The `PATH` of the partition's processes and tasks.
    pub fn env_path(&self) -> &str {
        &self.env_path
    }

    /// The existing absolute directories of [`Search::env_path`].
    fn path_dirs(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.env_path
            .split(':')
            .filter(|d| d.starts_with('/'))
            .filter_map(|d| std::fs::canonicalize(d).ok())
    }
}

/// The program and arguments to exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    /// The program's absolute path (`/bin/sh` for a command run by the shell).
    pub path: PathBuf,
    pub argv: Vec<String>,
    /// What the process must see at these paths (absolute, links resolved): the
    /// program ([`program_needs`]), an interpreter's script, the directories of its
    /// `PATH`.
    pub needs: Vec<PathBuf>,
}

/// Why a command cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// No words at all.
    Empty,
    /// A bare name found in none of the directories searched.
    NotFound {
        program: String,
        searched: Vec<PathBuf>,
    },
    /// A name with a `/` that names no file (from `cwd`).
    Missing { program: String, cwd: PathBuf },
    /// A file that is not an executable regular file.
    NotExecutable { program: String },
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::Empty => write!(f, "the command is empty"),
            CommandError::NotFound { program, searched } => {
                let dirs: Vec<String> = searched.iter().map(|d| d.display().to_string()).collect();
                write!(
                    f,
                    "program `{program}` not found (searched: {})",
                    dirs.join(", ")
                )
            }
            CommandError::Missing { program, cwd } => write!(
                f,
                "program `{program}` does not exist (relative to {})",
                cwd.display()
            ),
            CommandError::NotExecutable { program } => {
                write!(f, "program `{program}` is not an executable file")
            }
        }
    }
}

impl std::error::Error for CommandError {}

/// Characters that make the shell do more than split words.
const SHELL_WORD_CHARS: &str = "'\"\\$`*?[]{}~<>#";
/// Characters (outside quotes) that make a command compound.
const COMPOUND_CHARS: &str = ";&|()\n";
/// Words the shell runs itself (POSIX special and regular built-ins without a file of
/// their own, and reserved words): a simple command starting with one is left to it.
const SHELL_OWN_WORDS: [&str; 38] = [
    ".", ":", "break", "continue", "eval", "exec", "exit", "export", "readonly", "return", "set",
    "shift", "times", "trap", "unset", "alias", "bg", "cd", "command", "fg", "getopts", "hash",
    "jobs", "read", "type", "ulimit", "umask", "unalias", "wait", "local", "if", "case", "for",
    "while", "until", "!", "{", "function",
];

/// Decides how to exec `cmd`, run in `cwd` with `search`; the error says what is wrong.
pub fn plan_command(cmd: &str, cwd: &Path, search: &Search) -> Result<Exec, CommandError> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let Some(&first) = words.first() else {
        return Err(CommandError::Empty);
    };
    let shell_own = SHELL_OWN_WORDS.contains(&first);
    let needs_shell = cmd
        .chars()
        .any(|c| SHELL_WORD_CHARS.contains(c) || COMPOUND_CHARS.contains(c))
        || first.contains('=')
        || shell_own;
    let mut needs: Vec<PathBuf> = search.path_dirs().collect();
    if !needs_shell {
        let path = resolve(first, cwd, search)?;
        needs.extend(program_needs(&path));
        needs.extend(file_arguments(&words, cwd));
        let argv = words.iter().map(|w| w.to_string()).collect();
        return Ok(Exec { path, argv, needs });
    }
    needs.extend(file_arguments(&words, cwd));
    // `exec` runs programs only: a word the shell runs itself (`exit`, `cd`, `umask`,
    // `exec` itself) is left to the shell as it is.
    let script = if is_compound(cmd) || first.contains('=') || shell_own {
        cmd.to_string()
    } else if is_plain(first) {
        let path = resolve(first, cwd, search)?;
        needs.extend(program_needs(&path));
        let rest = &cmd.trim_start()[first.len()..];
        format!("exec {}{rest}", quoted(&path.display().to_string()))
    } else {
        format!("exec {cmd}")
    };
    Ok(Exec {
        path: PathBuf::from("/bin/sh"),
        argv: vec!["/bin/sh".into(), "-c".into(), script],
        needs,
    })
}

/// Whether `cmd` has a control operator outside quotes.
fn is_compound(cmd: &str) -> bool {
    let (mut single, mut double, mut escaped) = (false, false, false);
    for c in cmd.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            _ if !single && !double && (COMPOUND_CHARS.contains(c) || c == '`') => return true,
            _ => {}
        }
    }
    false
}

/// A word the shell takes as it is (nothing to expand or quote).
fn is_plain(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:,+@%".contains(c))
}

/// `word` as one shell word.
fn quoted(word: &str) -> String {
    match is_plain(word) {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

/// Finds `program` like execvp would, but searching `search`'s directories (relative to
/// `cwd` when it has a `/`); the result is absolute.
fn resolve(program: &str, cwd: &Path, search: &Search) -> Result<PathBuf, CommandError> {
    if program.contains('/') {
        let path = std::path::absolute(cwd.join(program)).unwrap_or_else(|_| cwd.join(program));
        return match std::fs::metadata(&path) {
            Err(_) => Err(CommandError::Missing {
                program: program.to_string(),
                cwd: cwd.to_path_buf(),
            }),
            Ok(_) if !is_executable(&path) => Err(CommandError::NotExecutable {
                program: program.to_string(),
            }),
            Ok(_) => Ok(path),
        };
    }
    let found = search
        .dirs
        .iter()
        .map(|dir| cwd.join(dir).join(program))
        .find(|candidate| is_executable(candidate));
    match found {
        Some(path) => Ok(std::path::absolute(&path).unwrap_or(path)),
        None => Err(CommandError::NotFound {
            program: program.to_string(),
            searched: search.dirs.clone(),
        }),
    }
}

/// A regular file some execute bit is set on (what root may exec).
fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What running the program at `path` (absolute, as named) needs to see: the file its
/// links lead to; the directory that holds it as named, when it is reached through a
/// link (a Python virtual environment's `bin/python`), so that the name resolves as
/// outside; and the installation prefix of a program in a `bin` directory (its parent),
/// which the program finds from the path it was started by, when it is one
/// ([`is_prefix`]).
fn program_needs(path: &Path) -> Vec<PathBuf> {
    let target = canonical(path);
    let dir = path.parent().and_then(canonical);
    let prefix = dir
        .as_ref()
        .filter(|d| d.file_name().is_some_and(|n| n == "bin"))
        .and_then(|d| d.parent().map(Path::to_path_buf))
        .filter(|p| is_prefix(p));
    let named_dir = dir.filter(|_| target.as_deref() != Some(path));
    target.into_iter().chain(named_dir).chain(prefix).collect()
}

/// Whether the parent `dir` of a `bin` directory is an installation prefix its programs
/// read: a virtual environment (it holds `pyvenv.cfg`, beside its packages) or a prefix
/// with a `lib` directory. Any other parent (a project's directory holding `bin/tool`)
/// is not made visible: read-only, it would hide what the partition writes there.
fn is_prefix(dir: &Path) -> bool {
    dir.join("pyvenv.cfg").is_file() || dir.join("lib").is_dir()
}

/// `path` with its links resolved, if it exists.
fn canonical(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// The files a command names as arguments (`script.py`, `--replay=log.gz`, `/tmp/x/log`),
/// relative to `cwd` unless absolute: a plain word, or the value of a `--flag=value`,
/// that is an existing regular file. The program's own script is the first of them.
fn file_arguments(words: &[&str], cwd: &Path) -> Vec<PathBuf> {
    let values = words.iter().skip(1);
    let values = values.map(|w| w.split_once('=').map_or(*w, |(_, v)| v));
    let files = values.filter(|v| is_plain(v) && !v.starts_with('-'));
    files
        .map(|v| cwd.join(v))
        .filter(|p| p.is_file())
        .filter_map(|p| canonical(&p))
        .collect()
}

/// Where a command is in the description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Site {
    /// Task `task` of partition `partition` (indices into the description).
    Task { partition: usize, task: usize },
    /// Process `process` of partition `partition`.
    Process { partition: usize, process: usize },
}

/// A command that cannot run, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramError {
    /// Its key path (`partitions[1].processes[0].cmd`).
    pub key_path: String,
    /// Its partition and what it is there (`task `t``, `process 0`).
    pub partition: String,
    pub what: String,
    pub cmd: String,
    pub source: CommandError,
}

impl fmt::Display for ProgramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "partition `{}`, {} ({} `{}`): {}",
            self.partition, self.what, self.key_path, self.cmd, self.source
        )
    }
}

impl std::error::Error for ProgramError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Every program of a description, resolved ([`Programs::resolve`]), and the `PATH` of
/// each partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Programs {
    execs: std::collections::BTreeMap<Site, Exec>,
    /// Per partition (in the description's order), its `PATH`.
    env_paths: Vec<String>,
}

impl Programs {
    /// Resolves the command of every rt task and every process of `system` on `host`;
    /// the first that cannot run is the error. A command that is empty is left out
    /// (analysis and simulation need none; `run` refuses such a task), so is a task of
    /// a bulkhead service whose command is not set yet.
    pub fn resolve(system: &System, host: &Host) -> Result<Programs, Box<ProgramError>> {
        let mut out = Programs::default();
        for (pi, p) in system.partitions.iter().enumerate() {
            let search = Search::new(host, system.path_of(p), p.sandbox.clean_env);
            out.env_paths.push(search.env_path().to_string());
            let tasks = p.tasks.iter().filter(|_| p.kind == PartitionKind::Rt);
            let tasks = tasks.enumerate().map(|(task, t)| {
                let site = Site::Task {
                    partition: pi,
                    task,
                };
                (site, &t.cmd, format!("task `{}`", t.name), "tasks", task)
            });
            let processes = p.processes.iter().enumerate().map(|(process, q)| {
                let site = Site::Process {
                    partition: pi,
                    process,
                };
                (
                    site,
                    &q.cmd,
                    format!("process {process}"),
                    "processes",
                    process,
                )
            });
            for (site, cmd, what, key, k) in tasks.chain(processes) {
                if cmd.trim().is_empty() {
                    continue;
                }
                let exec = plan_command(cmd, &host.workdir, &search).map_err(|source| {
                    Box::new(ProgramError {
                        key_path: format!("partitions[{pi}].{key}[{k}].cmd"),
                        partition: p.name.clone(),
                        what,
                        cmd: cmd.clone(),
                        source,
                    })
                })?;
                out.execs.insert(site, exec);
            }
        }
        Ok(out)
    }

    /// The resolved command at `site`; `None` for one without a command.
    pub fn get(&self, site: Site) -> Option<&Exec> {
        self.execs.get(&site)
    }

    /// The `PATH` of partition `index`'s processes and tasks.
    pub fn env_path(&self, index: usize) -> Option<&str> {
        self.env_paths.get(index).map(String::as_str)
    }
}

#[cfg(test)]
mod tests;
