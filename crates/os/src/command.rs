//! How a configured command is executed (the one planner for rt tasks, window and be
//! processes; [`crate::launch`] starts what it plans): directly when it is a plain list of
//! words, through `/bin/sh -c 'exec CMD'` when it needs the shell only to expand
//! words (quotes, variables, globs, redirections), and through `/bin/sh -c CMD`
//! when it is a compound command (`;`, `&&`, `|`, ...), which `exec` would cut short.

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The program and arguments to exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    /// Resolved path of the program.
    pub path: PathBuf,
    pub argv: Vec<String>,
}

/// Characters that make the shell do more than split words.
const SHELL_WORD_CHARS: &str = "'\"\\$`*?[]{}~<>#";
/// Characters (outside quotes) that make a command compound.
const COMPOUND_CHARS: &str = ";&|()\n";

/// Decides how to exec `cmd`, run in `cwd`; errors say what is wrong with it.
pub fn plan(cmd: &str, cwd: &Path) -> Result<Exec, String> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    if words.is_empty() {
        return Err("the command is empty".into());
    }
    let needs_shell = cmd
        .chars()
        .any(|c| SHELL_WORD_CHARS.contains(c) || COMPOUND_CHARS.contains(c))
        || words[0].contains('=');
    if !needs_shell {
        let path = resolve(words[0], cwd)?;
        return Ok(Exec {
            path,
            argv: words.iter().map(|w| w.to_string()).collect(),
        });
    }
    let script = if is_compound(cmd) || words[0].contains('=') {
        cmd.to_string()
    } else {
        format!("exec {cmd}")
    };
    Ok(Exec {
        path: PathBuf::from("/bin/sh"),
        argv: vec!["/bin/sh".into(), "-c".into(), script],
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

/// Finds the program like execvp would (relative to `cwd` when it has a `/`).
fn resolve(program: &str, cwd: &Path) -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = if program.contains('/') {
        vec![cwd.join(program)]
    } else {
        let path =
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        std::env::split_paths(&path)
            .map(|dir| cwd.join(dir).join(program))
            .collect()
    };
    for candidate in &candidates {
        if is_executable(candidate) {
            return Ok(candidate.clone());
        }
    }
    if program.contains('/') {
        if candidates[0].exists() {
            return Err(format!("`{program}` is not an executable file"));
        }
        return Err(format!(
            "`{program}` does not exist (relative to {})",
            cwd.display()
        ));
    }
    Err(format!("`{program}`: command not found in PATH"))
}

fn is_executable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    path.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_in_tmp(cmd: &str) -> Result<Exec, String> {
        plan(cmd, Path::new("/tmp"))
    }

    #[test]
    fn plain_words_are_execd_directly() {
        let e = plan_in_tmp("sleep 1").unwrap();
        assert!(e.path.ends_with("sleep"), "{e:?}");
        assert_eq!(e.argv, ["sleep", "1"]);
    }

    #[test]
    fn word_expansion_uses_exec_in_the_shell() {
        let e = plan_in_tmp("echo \"a b\" $HOME").unwrap();
        assert_eq!(e.argv, ["/bin/sh", "-c", "exec echo \"a b\" $HOME"]);
        assert_eq!(
            plan_in_tmp("cat < /dev/null").unwrap().argv[2],
            "exec cat < /dev/null"
        );
    }

    #[test]
    fn compound_commands_keep_the_shell() {
        assert_eq!(plan_in_tmp("true; false").unwrap().argv[2], "true; false");
        assert_eq!(plan_in_tmp("a | b").unwrap().argv[2], "a | b");
        assert_eq!(plan_in_tmp("X=1 prog").unwrap().argv[2], "X=1 prog");
        assert_eq!(
            plan_in_tmp("echo 'a;b'").unwrap().argv[2],
            "exec echo 'a;b'"
        );
    }

    #[test]
    fn missing_programs_are_clear_errors() {
        assert!(plan_in_tmp("no-such-program-bulkhead x")
            .unwrap_err()
            .contains("command not found"));
        assert!(plan_in_tmp("./missing")
            .unwrap_err()
            .contains("does not exist"));
        assert!(plan_in_tmp("   ").unwrap_err().contains("empty"));
    }
}
