//! `demos-sched`'s configuration: read as DEmOS reads it (`-c FILE`, a FIFO too, or `-C
//! YAML`), loaded by the model as `bulkhead check` loads it, then DEmOS's own rules
//! (`set_cwd`, budgets), and errors worded as DEmOS words those its scripts and tests
//! match (with bulkhead's positioned message beside them, [`Failure`]).

use bulkhead_model::{input, Diagnostic, PartitionKind, System};
use std::path::{Path, PathBuf};

/// A configuration that could not be used: DEmOS's message, and bulkhead's own
/// positioned one where DEmOS's replaces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub message: String,
    pub detail: Option<String>,
}

impl Failure {
    /// A failure with no other message beside it.
    pub fn plain(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            detail: None,
        }
    }
}

/// Where the configuration comes from.
pub enum Source<'a> {
    /// `-c FILE`.
    File(&'a Path),
    /// `-C YAML`.
    Inline(&'a str),
}

/// A loaded configuration.
#[derive(Debug)]
pub struct Config {
    pub system: System,
    /// Its text, for positioned messages about it later.
    pub src: String,
    /// How messages name it: the file, or `<inline config>`.
    pub name: String,
    /// The file of `-c`.
    pub file: Option<PathBuf>,
}

/// How messages name an inline configuration.
pub const INLINE: &str = "<inline config>";

/// Reads and loads the configuration, with DEmOS's rules.
pub fn load(source: Source<'_>) -> Result<Config, Failure> {
    let (src, name, file, regular) = match source {
        Source::File(path) => {
            let (bytes, regular) = read(path)?;
            let src = String::from_utf8_lossy(&bytes).into_owned();
            let name = path.display().to_string();
            (src, name, Some(path.to_path_buf()), regular)
        }
        Source::Inline(text) => {
            if bulkhead_model::sets_key(text, "set_cwd") {
                return Err(Failure::plain(
                    "'set_cwd' cannot be used in inline config string",
                ));
            }
            (text.to_string(), INLINE.to_string(), None, true)
        }
    };
    let loaded = bulkhead_model::load_str(&src, &name).map_err(|d| failure(&d))?;
    let mut system = loaded.system;
    if file.is_none() {
        system.set_cwd = false;
    }
    if system.set_cwd && !regular {
        return Err(Failure::plain(
            "When config is passed through a FIFO or other special file type, 'set_cwd' \
             must be set to 'false'",
        ));
    }
    check_budgets(&system, &src, &name)?;
    Ok(Config {
        system,
        src,
        name,
        file,
    })
}

/// The file's bytes (a regular file, or a FIFO or device as DEmOS accepts them, both
/// bounded by the model's input limit) and whether it is a regular file.
fn read(path: &Path) -> Result<(Vec<u8>, bool), Failure> {
    let cannot = |e: String| Failure {
        message: format!("Cannot load configuration file: {}", path.display()),
        detail: Some(format!("{}: {e}", path.display())),
    };
    let meta = std::fs::metadata(path).map_err(|e| cannot(e.to_string()))?;
    if meta.is_file() {
        let bytes = input::read_file(path, input::DEFAULT_MAX_INPUT_SIZE, input::Fifo::Accept)
            .map_err(|e| cannot(e.to_string()))?;
        return Ok((bytes, true));
    }
    if meta.is_dir() {
        return Err(cannot("a directory, not a configuration".into()));
    }
    let special = std::fs::File::open(path).map_err(|e| cannot(e.to_string()))?;
    let bytes = input::read_limited(special, input::DEFAULT_MAX_INPUT_SIZE)
        .map_err(|e| cannot(e.to_string()))?;
    Ok((bytes, false))
}

/// DEmOS requires a budget of every process it loads, and a process in every
/// partition (a partition without one gets one without a budget); bulkhead lets a
/// best-effort partition outside the windows go without.
fn check_budgets(system: &System, src: &str, name: &str) -> Result<(), Failure> {
    for (i, p) in system.partitions.iter().enumerate() {
        if p.kind != PartitionKind::Be || !p.tasks.is_empty() {
            continue;
        }
        let missing = match p.processes.iter().position(|q| q.budget == 0) {
            Some(j) => format!("partitions[{i}].processes[{j}]"),
            None if p.processes.is_empty() => format!("partitions[{i}]"),
            None => continue,
        };
        let why = format!("partition `{}`: a process without a budget", p.name);
        return Err(Failure {
            message: "Missing budget in process definition".into(),
            detail: Some(bulkhead_model::diagnostic_at(src, name, &missing, why).to_string()),
        });
    }
    Ok(())
}

/// The failure for the model's diagnostic `d`: DEmOS's message where DEmOS has one for
/// the same mistake, else bulkhead's.
fn failure(d: &Diagnostic) -> Failure {
    match demos_message(d) {
        Some(message) => Failure {
            message,
            detail: Some(d.to_string()),
        },
        None => Failure::plain(d.to_string()),
    }
}

/// DEmOS's wording (its `config.cpp`) of the model's diagnostic `d`, for the mistakes
/// both find.
fn demos_message(d: &Diagnostic) -> Option<String> {
    let (window, slice) = window_and_slice(&d.path);
    let quoted = d.message.split('`').nth(1);
    if d.path.is_empty() && d.message.ends_with("must be a YAML mapping") {
        return Some("Config must be YAML mapping node".into());
    }
    if let Some(key) = quoted.filter(|_| d.message.starts_with("unknown field")) {
        let place = match (window, slice, d.path.matches('.').count()) {
            (Some(_), Some(_), 2) => " in slice definition",
            (Some(_), _, 1) => " in window definition",
            _ => "",
        };
        return Some(format!("Unexpected config key{place}: {key}"));
    }
    if d.message.starts_with("missing `cpu`") && slice.is_some() {
        return Some("Missing cpu set in slice definition (`cpu` property)".into());
    }
    if let (Some(name), Some(w)) = (quoted, window) {
        if d.message.starts_with("unknown partition") {
            let s = slice.unwrap_or(0);
            return Some(format!(
                "Reference to unknown partition '{name}' in window #{w}, slice #{s}"
            ));
        }
    }
    if let (true, Some(w)) = (
        d.message.contains("overlaps the CPUs of another slice"),
        window,
    ) {
        return Some(format!("Slices in window #{w} have overlapping CPU sets"));
    }
    None
}

/// The window and slice indices a key path names (`windows[1].slices[2].cpu`).
fn window_and_slice(path: &str) -> (Option<usize>, Option<usize>) {
    let index = |prefix: &str, text: &str| -> Option<usize> {
        let rest = text.strip_prefix(prefix)?;
        rest[..rest.find(']')?].parse().ok()
    };
    let window = index("windows[", path);
    let slice = path
        .split('.')
        .nth(1)
        .and_then(|part| index("slices[", part));
    (window, slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inline(src: &str) -> Result<Config, Failure> {
        load(Source::Inline(src))
    }

    fn message(src: &str) -> String {
        inline(src).expect_err("accepted").message
    }

    #[test]
    fn demos_messages_for_the_mistakes_demos_names() {
        assert_eq!(message("bad config"), "Config must be YAML mapping node");
        assert_eq!(
            message("{windows: [], partitions: [], garbage: garbage}"),
            "Unexpected config key: garbage"
        );
        assert_eq!(
            message("windows: [{length: 1, slices: [{cpu: 0, oops: 1}]}]"),
            "Unexpected config key in slice definition: oops"
        );
        assert_eq!(
            message("windows: [{length: 1, oops: 1}]"),
            "Unexpected config key in window definition: oops"
        );
        assert_eq!(
            message("windows: [{length: 100, slices: [{}]}]"),
            "Missing cpu set in slice definition (`cpu` property)"
        );
        assert_eq!(
            message("{windows: [{length: 1, cpu: 0, sc_partition: NONE}], partitions: []}"),
            "Reference to unknown partition 'NONE' in window #0, slice #0"
        );
        assert_eq!(
            message("windows: [{length: 1, slices: [{cpu: 0, sc_processes: a}, {cpu: 0-1, sc_processes: b}]}]"),
            "Slices in window #0 have overlapping CPU sets"
        );
        assert_eq!(
            message("set_cwd: yes"),
            "'set_cwd' cannot be used in inline config string"
        );
    }

    #[test]
    fn bulkheads_positioned_message_stays_beside_demos_one() {
        let f = inline("windows: [{length: 100, slices: [{}]}]").unwrap_err();
        let detail = f.detail.unwrap();
        assert!(
            detail.starts_with("<inline config>:1:34: windows[0].slices[0]: missing `cpu`"),
            "{detail}"
        );
        // Without a DEmOS wording the message is bulkhead's own.
        let f = inline("windows: [{length: 0, sc_processes: a}]").unwrap_err();
        assert!(
            f.message
                .starts_with("<inline config>:1:20: windows[0].length"),
            "{}",
            f.message
        );
        assert_eq!(f.detail, None);
    }

    #[test]
    fn every_process_needs_a_budget_as_in_demos() {
        for src in [
            "{partitions: [ name: p1, processes: [ cmd: proc1 ] ], windows: [{length: 100, sc_partition: p1}]}",
            "partitions: [{name: p, processes: [{cmd: a}]}]",
        ] {
            let f = inline(src).unwrap_err();
            assert_eq!(f.message, "Missing budget in process definition", "{src}");
            assert!(f.detail.unwrap().contains("partitions[0]"), "{src}");
        }
        // Budgets a window gives by default are budgets.
        assert!(inline("windows: [{length: 10, sc_processes: [a, b]}]").is_ok());
    }

    #[test]
    fn set_cwd_is_false_inline_and_true_in_a_file_by_default() {
        assert!(!inline("{}").unwrap().system.set_cwd);
        let dir = std::env::temp_dir().join(format!("demos-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.yaml");
        std::fs::write(&file, "{}").unwrap();
        assert!(load(Source::File(&file)).unwrap().system.set_cwd);
        std::fs::write(&file, "set_cwd: no").unwrap();
        assert!(!load(Source::File(&file)).unwrap().system.set_cwd);
        let f = load(Source::File(&dir)).unwrap_err();
        assert_eq!(
            f.message,
            format!("Cannot load configuration file: {}", dir.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fifo_needs_set_cwd_false() {
        let dir = std::env::temp_dir().join(format!("demos-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("config");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let feed = |text: &'static str| {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, text).unwrap())
        };
        let writer = feed("set_cwd: false");
        assert!(!load(Source::File(&fifo)).unwrap().system.set_cwd);
        writer.join().unwrap();
        let writer = feed("{}");
        let f = load(Source::File(&fifo)).unwrap_err();
        assert!(
            f.message
                .starts_with("When config is passed through a FIFO"),
            "{}",
            f.message
        );
        writer.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
