use super::*;
use std::os::unix::fs::PermissionsExt;

/// A directory of its own under the system's temporary directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("plan-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(std::fs::canonicalize(&dir).unwrap())
    }

    /// An executable script `name` in the directory (or a plain file without `exec`).
    fn file(&self, name: &str, exec: bool) -> PathBuf {
        let path = self.0.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "#!/bin/sh\necho hi\n").unwrap();
        let mode = if exec { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn host(workdir: &Path, own: Option<&Path>) -> Host {
    Host {
        workdir: workdir.to_path_buf(),
        own_dir: own.map(Path::to_path_buf),
        path: "/usr/bin:/bin".into(),
    }
}

fn plan_in(cmd: &str, host: &Host) -> Result<Exec, CommandError> {
    plan_command(cmd, &host.workdir, &Search::new(host, None, true))
}

#[test]
fn plain_words_are_execd_directly_by_absolute_path() {
    let h = host(Path::new("/"), None);
    let e = plan_in("sleep 1", &h).unwrap();
    assert!(e.path.is_absolute() && e.path.ends_with("sleep"), "{e:?}");
    assert_eq!(e.argv, ["sleep", "1"]);
}

#[test]
fn a_simple_shell_command_names_its_resolved_program() {
    let dir = Dir::new("simple");
    let prog = dir.file("bin/tool", true);
    let h = host(&dir.0, Some(&dir.0.join("bin")));
    let e = plan_in("tool \"a b\" $HOME", &h).unwrap();
    let want = format!("exec {} \"a b\" $HOME", prog.display());
    assert_eq!(e.argv, ["/bin/sh", "-c", want.as_str()]);
    let e = plan_in("cat < /dev/null", &h).unwrap();
    assert!(e.argv[2].starts_with("exec /") && e.argv[2].ends_with("cat < /dev/null"));
    // A word the shell runs itself is left to it, without `exec` (which runs programs
    // only: `exec umask` or `exec exit` is "not found"), even with nothing to expand.
    assert_eq!(
        plan_in("umask 077 >/dev/null", &h).unwrap().argv[2],
        "umask 077 >/dev/null"
    );
    assert_eq!(plan_in("exit", &h).unwrap().argv, ["/bin/sh", "-c", "exit"]);
    assert_eq!(plan_in("cd /tmp", &h).unwrap().argv[2], "cd /tmp");
    assert_eq!(
        plan_in("exec tool \"$X\"", &h).unwrap().argv[2],
        "exec tool \"$X\""
    );
}

#[test]
fn compound_commands_keep_the_shell() {
    let h = host(Path::new("/"), None);
    assert_eq!(plan_in("true; false", &h).unwrap().argv[2], "true; false");
    assert_eq!(plan_in("a | b", &h).unwrap().argv[2], "a | b");
    assert_eq!(plan_in("X=1 prog", &h).unwrap().argv[2], "X=1 prog");
    let quoted = plan_in("echo 'a;b'", &h).unwrap();
    assert!(quoted.argv[2].ends_with("echo 'a;b'") && quoted.argv[2].starts_with("exec /"));
}

#[test]
fn bulkheads_own_directory_is_searched_first() {
    let dir = Dir::new("own");
    let own = dir.file("release/sleep", true);
    let h = host(Path::new("/"), Some(own.parent().unwrap()));
    assert_eq!(plan_in("sleep 1", &h).unwrap().path, own);
    let search = Search::new(&h, None, true);
    let want = format!("{}:{DEFAULT_PATH}", own.parent().unwrap().display());
    assert_eq!(search.env_path(), want);
}

#[test]
fn a_path_key_sets_the_search_and_the_partitions_path() {
    let dir = Dir::new("pathkey");
    let tool = dir.file("opt/tool", true);
    let h = host(Path::new("/"), None);
    let opt = tool.parent().unwrap().display().to_string();
    let search = Search::new(&h, Some(&opt), true);
    assert_eq!(search.env_path(), opt);
    let e = plan_command("tool", Path::new("/"), &search).unwrap();
    assert_eq!(e.path, tool);
    // Without it, the supervisor's PATH is searched and `tool` is not on it.
    assert!(matches!(
        plan_in("tool", &h),
        Err(CommandError::NotFound { .. })
    ));
}

#[test]
fn the_supervisors_path_follows_bulkheads_directory_without_a_clean_environment() {
    let h = host(Path::new("/"), Some(Path::new("/opt/bulkhead")));
    let search = Search::new(&h, None, false);
    assert_eq!(search.env_path(), "/opt/bulkhead:/usr/bin:/bin");
}

#[test]
fn missing_programs_say_what_was_searched() {
    let h = host(Path::new("/tmp"), Some(Path::new("/opt/own")));
    let e = plan_in("no-such-program-bulkhead x", &h).unwrap_err();
    assert_eq!(
        e.to_string(),
        "program `no-such-program-bulkhead` not found (searched: /opt/own, /usr/bin, /bin)"
    );
    let e = plan_in("./missing", &h).unwrap_err();
    assert_eq!(
        e.to_string(),
        "program `./missing` does not exist (relative to /tmp)"
    );
    assert_eq!(plan_in("   ", &h).unwrap_err(), CommandError::Empty);
    let dir = Dir::new("noexec");
    dir.file("data", false);
    let e = plan_in("./data", &host(&dir.0, None)).unwrap_err();
    assert_eq!(e.to_string(), "program `./data` is not an executable file");
    // A shell command's program too: `check` finds it missing, not the shell at run time.
    let e = plan_in("no-such-program-bulkhead \"$X\"", &h).unwrap_err();
    assert!(matches!(e, CommandError::NotFound { .. }), "{e:?}");
}

#[test]
fn relative_programs_are_found_from_the_working_directory() {
    let dir = Dir::new("relative");
    let prog = dir.file("sub/prog", true);
    let h = host(&dir.0, None);
    let e = plan_in("./sub/prog --flag", &h).unwrap();
    assert_eq!(e.path, prog);
    assert_eq!(e.argv, ["./sub/prog", "--flag"]);
}

#[test]
fn a_process_needs_its_program_its_script_and_its_path() {
    let dir = Dir::new("needs");
    let prog = dir.file("bin/prog", true);
    let script = dir.file("work/run.py", false);
    let h = host(&dir.0.join("work"), Some(&dir.0.join("bin")));
    let e = plan_in("prog -u run.py", &h).unwrap();
    assert!(e.needs.contains(&prog), "{e:?}");
    assert!(e.needs.contains(&script), "{e:?}");
    assert!(e.needs.contains(&dir.0.join("bin")), "{e:?}");
    // An argument naming no file is not a script.
    let e = plan_in("prog --flag absent.py", &h).unwrap();
    assert!(!e.needs.iter().any(|p| p.ends_with("absent.py")), "{e:?}");
}

/// A file named anywhere in the arguments (a log to replay, `--flag=FILE`), by a
/// relative or an absolute path, is kept visible too: under a private /tmp the program
/// would not find it otherwise.
#[test]
fn a_process_needs_every_file_its_arguments_name() {
    let dir = Dir::new("args");
    let prog = dir.file("bin/prog", true);
    let log = dir.file("data/log.gz", false);
    let conf = dir.file("work/c.yaml", false);
    let h = host(&dir.0.join("work"), Some(&dir.0.join("bin")));
    let cmd = format!(
        "prog plant --replay {} --config=c.yaml --iface can0",
        log.display()
    );
    let e = plan_in(&cmd, &h).unwrap();
    assert!(e.needs.contains(&prog), "{e:?}");
    assert!(e.needs.contains(&log), "{e:?}");
    assert!(e.needs.contains(&conf), "{e:?}");
    assert!(
        !e.needs
            .iter()
            .any(|p| p.ends_with("can0") || p.ends_with("plant")),
        "{e:?}"
    );
    // The same through the shell (a redirection): the program's arguments still count.
    let e = plan_in(&format!("{cmd} > out.txt"), &h).unwrap();
    assert!(e.needs.contains(&log), "{e:?}");
}

/// A program named through a link (a virtual environment's `bin/python`) keeps the link's
/// directory and the environment's prefix visible besides the file the link leads to:
/// the interpreter finds its environment from the path it was started by.
#[test]
fn a_program_reached_through_a_link_needs_its_directory_and_prefix() {
    let dir = Dir::new("link");
    let real = dir.file("real/python3", true);
    let venv = dir.0.join("venv");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    std::os::unix::fs::symlink(&real, venv.join("bin/python")).unwrap();
    let h = host(&dir.0, None);
    let e = plan_in("venv/bin/python app.py", &h).unwrap();
    assert!(e.needs.contains(&real), "{e:?}");
    assert!(e.needs.contains(&venv.join("bin")), "{e:?}");
    assert!(e.needs.contains(&venv), "{e:?}");
    // A program that is no link, outside a `bin` directory, needs only itself.
    let e = plan_in("real/python3", &h).unwrap();
    let below: Vec<&PathBuf> = e.needs.iter().filter(|p| p.starts_with(&dir.0)).collect();
    assert_eq!(below, [&real], "{e:?}");
}

/// A program in a `bin` directory keeps its parent visible only when that is an
/// installation prefix: one with `lib/`, or a virtual environment (`pyvenv.cfg`); a
/// project's directory holding `bin/tool` is not one.
#[test]
fn only_an_install_prefix_or_a_virtual_environment_is_kept_visible() {
    let dir = Dir::new("prefix");
    let h = host(&dir.0, None);
    let needs = |cmd: &str| plan_in(cmd, &h).unwrap().needs;
    dir.file("project/bin/tool", true);
    let project = dir.0.join("project");
    assert!(!needs("project/bin/tool").contains(&project), "no prefix");
    dir.file("usr/bin/tool", true);
    std::fs::create_dir_all(dir.0.join("usr/lib")).unwrap();
    assert!(needs("usr/bin/tool").contains(&dir.0.join("usr")), "lib/");
    dir.file("env/bin/tool", true);
    dir.file("env/pyvenv.cfg", false);
    assert!(
        needs("env/bin/tool").contains(&dir.0.join("env")),
        "pyvenv.cfg"
    );
}

use crate::tests::load;

#[test]
fn every_task_and_process_is_resolved_and_the_first_missing_one_named() {
    let system = load(
        "system: {cpus: 0-1}\n\
         partitions:\n\
         - {name: ctl, kind: rt, cpus: 0, tasks: [{name: t, cmd: sleep 1, budget: 1ms, period: 10ms}, {name: u, budget: 1ms, period: 10ms}]}\n\
         - {name: ivi, kind: be, cpus: 1, processes: [{cmd: sleep 2}, {cmd: bulkhead-app ivi-mapper}]}\n",
    );
    let h = host(Path::new("/"), None);
    let e = Programs::resolve(&system, &h).unwrap_err();
    assert_eq!(e.key_path, "partitions[1].processes[1].cmd");
    assert_eq!(
        e.to_string(),
        "partition `ivi`, process 1 (partitions[1].processes[1].cmd `bulkhead-app ivi-mapper`): \
         program `bulkhead-app` not found (searched: /usr/bin, /bin)"
    );
    let dir = Dir::new("resolve");
    dir.file("bulkhead-app", true);
    let programs = Programs::resolve(&system, &host(Path::new("/"), Some(&dir.0))).unwrap();
    let task = programs
        .get(Site::Task {
            partition: 0,
            task: 0,
        })
        .unwrap();
    assert_eq!(task.argv, ["sleep", "1"]);
    // A task without a command has none (analysis and sim need none).
    assert!(programs
        .get(Site::Task {
            partition: 0,
            task: 1
        })
        .is_none());
    let app = programs
        .get(Site::Process {
            partition: 1,
            process: 1,
        })
        .unwrap();
    assert_eq!(app.path, dir.0.join("bulkhead-app"));
}

#[test]
fn a_partitions_path_is_its_own_or_the_systems() {
    let system = load(
        "system: {cpus: 0-1, path: /opt/a:/usr/bin}\n\
         partitions:\n\
         - {name: a, kind: be, cpus: 0, processes: [{cmd: sleep 1}]}\n\
         - {name: b, kind: be, cpus: 1, path: /usr/bin:/bin, processes: [{cmd: sleep 1}]}\n",
    );
    let programs = Programs::resolve(&system, &host(Path::new("/"), None)).unwrap();
    assert_eq!(programs.env_path(0), Some("/opt/a:/usr/bin"));
    assert_eq!(programs.env_path(1), Some("/usr/bin:/bin"));
}
