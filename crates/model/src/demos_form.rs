//! DEmOS's canonical form of a description: what `demos-sched -d` prints (DEmOS
//! `Config::normalize`, thesis Appendix 2). Keys `set_cwd`, `demos_cpu`, `partitions`
//! (each `name` and `processes`: `cmd`, `budget`, `jitter`, `init`, `frequency`) and
//! `windows` (each `length` and `slices`: `cpu`, `sc_partition`, `be_partition`,
//! `frequency`), in block style with two-space indents as yaml-cpp writes it, an empty
//! list as `~`; durations as bare milliseconds (decimal when not whole), frequencies
//! in MHz. Keys come in this fixed order (DEmOS keeps the order they were written in).
//!
//! Only what DEmOS's form can say is printed: a description that uses more (rt
//! partitions, channels, buses, sandboxes, ...) is refused ([`NotDemos`]) rather than
//! printed in part. The test is that the printed form loads back to the same model.

use crate::types::*;
use std::fmt::Write;

/// The description uses what DEmOS's form cannot say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotDemos;

impl std::fmt::Display for NotDemos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "DEmOS's form cannot show this description (it uses bulkhead keys); \
             `bulkhead check --canonical` prints it whole",
        )
    }
}

impl std::error::Error for NotDemos {}

/// `system` in DEmOS's canonical form, without a final newline (as DEmOS prints it).
pub fn to_demos_yaml(system: &System) -> Result<String, NotDemos> {
    let text = emit(system);
    match crate::load_str(&text, "<DEmOS form>") {
        Ok(loaded) if loaded.system == *system => Ok(text),
        _ => Err(NotDemos),
    }
}

fn emit(system: &System) -> String {
    let mut out = String::new();
    writeln!(out, "set_cwd: {}", system.set_cwd).unwrap();
    let demos_cpu = system
        .supervisor_cpus
        .as_ref()
        .map_or_else(|| "all".to_string(), |c| c.to_string());
    writeln!(out, "demos_cpu: {demos_cpu}").unwrap();
    list(&mut out, "partitions", &system.partitions, partition);
    list(&mut out, "windows", &system.windows, window);
    out.truncate(out.trim_end().len());
    out
}

/// Writes the [`nested`] lines of `key` at the top level.
fn list<T>(out: &mut String, key: &str, items: &[T], lines: impl Fn(&T) -> Vec<String>) {
    for line in nested(key, items, lines) {
        writeln!(out, "{line}").unwrap();
    }
}

/// `key:` and its items as block-sequence lines, or `key: ~` for none.
fn nested<T>(key: &str, items: &[T], lines: impl Fn(&T) -> Vec<String>) -> Vec<String> {
    match items.is_empty() {
        true => vec![format!("{key}: ~")],
        false => crate::canonical::block_list(key, items, lines),
    }
}

fn partition(p: &Partition) -> Vec<String> {
    let mut lines = vec![format!("name: {}", scalar(&p.name))];
    lines.extend(nested("processes", &p.processes, process));
    lines
}

fn process(q: &Process) -> Vec<String> {
    let mut lines = vec![format!("cmd: {}", scalar(&q.cmd))];
    if q.budget != 0 {
        lines.push(format!("budget: {}", ms(q.budget)));
    }
    lines.push(format!("jitter: {}", ms(q.jitter)));
    lines.push(format!("init: {}", q.init));
    lines.extend(
        q.frequency_khz
            .map(|f| format!("frequency: {}", crate::power::mhz(f))),
    );
    lines
}

fn window(w: &Window) -> Vec<String> {
    let mut lines = vec![format!("length: {}", ms(w.length))];
    if !w.slices.is_empty() {
        lines.extend(nested("slices", &w.slices, slice));
    }
    lines
}

fn slice(s: &Slice) -> Vec<String> {
    let cpu = match &s.cpus {
        Cpus::All => "all".to_string(),
        Cpus::Set(set) => set.to_string(),
    };
    let mut lines = vec![format!("cpu: {cpu}")];
    let partitions = [
        ("sc_partition", &s.sc_partition),
        ("be_partition", &s.be_partition),
    ];
    for (key, name) in partitions {
        lines.extend(name.as_ref().map(|n| format!("{key}: {}", scalar(n))));
    }
    lines.extend(
        s.frequency_khz
            .map(|f| format!("frequency: {}", crate::power::mhz(f))),
    );
    lines
}

/// Nanoseconds as bare milliseconds.
fn ms(ns: Nanos) -> String {
    crate::power::decimal(ns, 1_000_000)
}

/// A string as a plain scalar when YAML reads it back as that same string, else
/// double-quoted.
fn scalar(s: &str) -> String {
    if plain_is_safe(s) {
        s.to_string()
    } else {
        crate::yaml::quote(s)
    }
}

/// Whether `s` written plain in a block mapping value reads back as the string `s`:
/// no leading indicator, no `: ` or ` #`, no control character or edge space, and not
/// a word or number YAML gives another type.
fn plain_is_safe(s: &str) -> bool {
    const INDICATORS: &str = "-?:,[]{}#&*!|>'\"%@`";
    const OTHER_TYPES: [&str; 12] = [
        "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ".inf", ".nan",
    ];
    let Some(first) = s.chars().next() else {
        return false;
    };
    !INDICATORS.contains(first)
        && s.trim() == s
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':')
        && !s.chars().any(char::is_control)
        && !OTHER_TYPES.contains(&s.to_ascii_lowercase().as_str())
        && s.parse::<f64>().is_err()
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demos(src: &str) -> Result<String, NotDemos> {
        to_demos_yaml(&crate::load_str(src, "t.yaml").expect("valid").system)
    }

    #[test]
    fn prints_the_simplified_form_as_demos_normalizes_it() {
        let text = demos("windows: [ {length: 500, sc_processes: [proc1, proc2]} ]").unwrap();
        assert_eq!(
            text,
            "set_cwd: true\ndemos_cpu: all\npartitions:\n  - name: anonymous_0\n    processes:\n      - cmd: proc1\n        budget: 150\n        jitter: 0\n        init: false\n      - cmd: proc2\n        budget: 150\n        jitter: 0\n        init: false\nwindows:\n  - length: 500\n    slices:\n      - cpu: all\n        sc_partition: anonymous_0"
        );
    }

    #[test]
    fn empty_lists_are_null_and_an_idle_window_has_no_slices() {
        assert_eq!(
            demos("{windows: [{length: 1000}]}").unwrap(),
            "set_cwd: true\ndemos_cpu: all\npartitions: ~\nwindows:\n  - length: 1000"
        );
        assert_eq!(
            demos("{set_cwd: no, demos_cpu: 1}").unwrap(),
            "set_cwd: false\ndemos_cpu: 1\npartitions: ~\nwindows: ~"
        );
    }

    #[test]
    fn keeps_cpus_frequencies_and_fractions_of_milliseconds() {
        let text = demos("windows: [{length: 10, slices: [{cpu: 0-1, frequency: 1200, be_processes: [{cmd: a, budget: 1.5, frequency: 600}]}]}]").unwrap();
        assert!(
            text.contains(
                "\n      - cpu: 0-1\n        be_partition: anonymous_0\n        frequency: 1200"
            ),
            "{text}"
        );
        assert!(text.contains("budget: 1.5\n"), "{text}");
        assert!(text.contains("frequency: 600"), "{text}");
    }

    #[test]
    fn quotes_what_would_read_back_otherwise() {
        for s in [
            "true", "No", "42", "0-1", "a: b", "- x", "", " a", "x #y", "~",
        ] {
            assert!(!plain_is_safe(s), "{s:?}");
        }
        for s in [
            "echo hello",
            "./a.out",
            "sleep 0.050; echo SC1-1 done",
            "a:b",
        ] {
            assert!(plain_is_safe(s), "{s:?}");
        }
        let text = demos("windows: [{length: 10, sc_partition: [ true ]}]").unwrap();
        assert!(text.contains("cmd: \"true\""), "{text}");
    }

    #[test]
    fn refuses_what_demos_cannot_say() {
        assert_eq!(
            demos("partitions: [{name: P, kind: rt, cpus: 1, tasks: [{name: t, budget: 1ms, period: 10ms}]}]"),
            Err(NotDemos)
        );
        assert_eq!(
            demos("partitions: [{name: P, processes: [{cmd: a, budget: 1}], sandbox: {clean_env: false}}]\nwindows: [{length: 5, sc_partition: P}]"),
            Err(NotDemos)
        );
    }
}
