//! `/proc/PID/stat`, parsed in one place.

use std::io;

/// The fields of `/proc/PID/stat` after the command name: field 3 (the state) is
/// `fields[0]`, field N is `fields[N - 3]` (proc(5) numbers them from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub fields: Vec<String>,
}

impl ProcStat {
    /// Parses the text of a stat file. The command name (field 2) may hold spaces
    /// and parentheses: the fields start after its last `)`.
    pub fn parse(text: &str) -> Option<ProcStat> {
        let rest = text.get(text.rfind(')')? + 1..)?;
        let fields: Vec<String> = rest.split_whitespace().map(str::to_owned).collect();
        (fields.len() >= 20).then_some(ProcStat { fields })
    }

    /// Field `n` as proc(5) numbers it (3 = state, 4 = ppid, ...), parsed.
    pub fn field<T: std::str::FromStr>(&self, n: usize) -> Option<T> {
        self.fields.get(n.checked_sub(3)?)?.parse().ok()
    }

    /// The state letter (field 3): `R`, `S`, `T`, `Z`, ...
    pub fn state(&self) -> char {
        self.fields[0].chars().next().unwrap_or('?')
    }

    /// The parent's pid (field 4).
    pub fn ppid(&self) -> Option<i32> {
        self.field(4)
    }

    /// The kernel flags (field 9, `PF_*`).
    pub fn flags(&self) -> Option<u64> {
        self.field(9)
    }

    /// The start time in clock ticks since boot (field 22): with the pid, it names a
    /// process even after its pid is reused.
    pub fn start_time(&self) -> Option<u64> {
        self.field(22)
    }
}

/// `/proc/PID/stat` of process `pid`; an error names the file (the process does not
/// exist, or its stat could not be parsed).
pub fn proc_stat(pid: u32) -> io::Result<ProcStat> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    ProcStat::parse(&text)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("{path}: unparsable")))
}

/// The start time of process `pid` (see [`ProcStat::start_time`]), if it exists.
pub fn start_time(pid: u32) -> Option<u64> {
    proc_stat(pid).ok()?.start_time()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_start_after_the_last_parenthesis_of_the_command_name() {
        let text = "42 (a) (b c)) T 7 42 42 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 123456 9 10\n";
        let s = ProcStat::parse(text).expect("parses");
        assert_eq!(s.state(), 'T');
        assert_eq!(s.ppid(), Some(7));
        assert_eq!(s.flags(), Some(4194560));
        assert_eq!(s.start_time(), Some(123456));
    }

    #[test]
    fn a_truncated_stat_is_refused() {
        assert_eq!(ProcStat::parse("42 (a) R 1 2"), None);
        assert_eq!(ProcStat::parse("no parenthesis"), None);
    }

    #[test]
    fn this_process_has_a_start_time_and_lives() {
        let me = proc_stat(std::process::id()).expect("own stat");
        assert!(matches!(me.state(), 'R' | 'S'), "{me:?}");
        assert!(me.start_time().is_some());
        assert_eq!(me.ppid(), Some(std::os::unix::process::parent_id() as i32));
    }

    #[test]
    fn a_missing_process_is_an_error_naming_its_file() {
        let e = proc_stat(u32::MAX).unwrap_err();
        assert!(
            e.to_string().contains(&format!("/proc/{}/stat", u32::MAX)),
            "{e}"
        );
    }
}
