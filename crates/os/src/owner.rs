//! Records of system settings a process changed and must put back: each record starts
//! with an owner line, `owner PID START` (START = the process's start time in clock
//! ticks since boot, `/proc/PID/stat` field 22), so the next run can tell a record
//! whose owner died without restoring (SIGKILL) from one whose owner still lives, and a
//! reused pid is never taken for the owner.

use std::fs;
use std::path::Path;

/// A record's owner: pid and start time.
pub type Owner = (i32, u64);

/// (ppid, flags, start time) from `/proc/PID/stat`.
pub fn stat_fields(pid: i32) -> Option<(i32, u64, u64)> {
    let stat = crate::proc::proc_stat(u32::try_from(pid).ok()?).ok()?;
    Some((stat.ppid()?, stat.flags()?, stat.start_time()?))
}

/// The owner line of a record written by this process, with its newline.
pub fn line() -> String {
    let me = std::process::id() as i32;
    let start = stat_fields(me).map_or(0, |f| f.2);
    format!("owner {me} {start}\n")
}

/// The owner of the record at `path` (`None`: not a record, or unreadable).
pub fn of_record(path: &Path) -> Option<Owner> {
    let text = fs::read_to_string(path).ok()?;
    let mut f = text
        .lines()
        .next()?
        .strip_prefix("owner ")?
        .split_whitespace();
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// Whether the owner still runs (same pid, same start time; a zombie has ended).
pub fn alive((pid, start): Owner) -> bool {
    u32::try_from(pid).is_ok_and(|pid| crate::proc::start_time(pid) == Some(start))
}
