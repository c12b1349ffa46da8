//! Who the kernel's OOM killer may pick: never a process of bulkhead's own.
//!
//! A partition's memory limit triggers an OOM kill among the processes of its memory
//! cgroup; the killer picks the one with the highest badness (its resident memory, swap
//! and page tables, plus `oom_score_adj`) and, when that process shares its memory with
//! others (`CLONE_VM`), kills all of them. A cgroup v1 pid namespace's monitor shares the
//! supervisor's memory, so a partition filling its limit once killed the supervisor and
//! every rt task. Two rules hold it now:
//! - the supervisor takes `oom_score_adj` -1000 ([`shield_supervisor`]), which every
//!   process it starts inherits, the monitor and the init of a pid namespace included
//!   (the killer passes over -1000, and a monitor sharing the supervisor's memory shares
//!   its score: the kernel keeps one value for all sharers of a memory);
//! - the process that execs a partition's program gives itself back the supervisor's
//!   original score ([`program_score`], set in the child by [`set_score`]), in a
//!   process of its own memory (the kernel would otherwise pass the value on to the
//!   supervisor): a program is a candidate of its partition's OOM killer as it was
//!   without bulkhead, and nothing else of the partition is.
//!
//! On cgroup v1 the monitor and the init also stay out of the partition's memory
//! cgroup (only the program joins it, [`crate::launch::Join::Hold`]); on v2 they are born
//! in its leaf cgroup (`CLONE_INTO_CGROUP`) as copy-on-write copies of the supervisor,
//! with memory of their own and the score -1000.

use std::sync::atomic::{AtomicI32, Ordering};

/// The `oom_score_adj` that keeps a process from the OOM killer (`OOM_SCORE_ADJ_MIN`).
pub const UNKILLABLE: i32 = -1000;

/// The supervisor's `oom_score_adj` before [`shield_supervisor`]; `i32::MIN` until then.
static ORIGINAL: AtomicI32 = AtomicI32::new(i32::MIN);

const FILE: &str = "/proc/self/oom_score_adj";

/// Gives the calling process `oom_score_adj` [`UNKILLABLE`], keeping the value it had
/// for [`program_score`]; a second call changes nothing. An error (not root: lowering
/// the score needs CAP_SYS_RESOURCE) leaves the score as it was.
pub fn shield_supervisor() -> std::io::Result<()> {
    let current: i32 = std::fs::read_to_string(FILE)?
        .trim()
        .parse()
        .map_err(|_| std::io::Error::other(format!("{FILE}: not a number")))?;
    if ORIGINAL
        .compare_exchange(i32::MIN, current, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return Ok(());
    }
    std::fs::write(FILE, UNKILLABLE.to_string())
}

/// The score a partition's program starts with: the supervisor's before
/// [`shield_supervisor`] (0 if it was never called: then the program keeps what it
/// inherits, which is no lower).
pub fn program_score() -> i32 {
    match ORIGINAL.load(Ordering::SeqCst) {
        i32::MIN => 0,
        score => score,
    }
}

/// Sets the calling process's `oom_score_adj` to `score`, which must not be below its
/// current one (raising needs no privilege). The process is made dumpable first, so
/// that its `/proc/self` files are its own after a uid change (it execs next, which
/// makes it dumpable anyway).
///
/// # Safety
/// Only in a child between clone and exec, with memory of its own (not `CLONE_VM`: the
/// kernel gives every process sharing a memory the same score). Async-signal-safe.
pub(crate) unsafe fn set_score(score: i32) -> Result<(), i32> {
    let mut text = [0u8; 12];
    let len = crate::sandbox::decimal(score.into(), &mut text);
    // SAFETY: prctl with integer arguments; a write of a local buffer.
    unsafe {
        crate::sandbox::ok(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0))?;
        crate::harden::write_file(c"/proc/self/oom_score_adj", &text[..len])
    }
}
