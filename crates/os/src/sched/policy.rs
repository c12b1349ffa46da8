//! Scheduling policies of threads: `sched_setattr(2)` / `sched_getattr(2)`, and reading
//! them back as the kernel reports them in `/proc/PID/sched`.
//!
//! Real-time policies are always set with `SCHED_FLAG_RESET_ON_FORK`: a reserved task may
//! fork (a SCHED_DEADLINE task without the flag cannot), and its children start as
//! SCHED_OTHER, so a task cannot hand its reservation or priority to processes it spawns.

use crate::error::{Error, Result};
/// Nanoseconds.
type Nanos = u64;
use std::io;
use std::mem::size_of;

/// `SCHED_DEADLINE` (include/uapi/linux/sched.h).
pub const SCHED_DEADLINE: u32 = 6;
/// `SCHED_FLAG_RESET_ON_FORK`.
const RESET_ON_FORK: u64 = 0x01;
/// `SCHED_FLAG_RECLAIM`: GRUB bandwidth reclaiming for a SCHED_DEADLINE thread.
const RECLAIM: u64 = 0x02;
/// The smallest runtime the kernel accepts (`1 << DL_SCALE` ns, kernel/sched/deadline.c).
pub const MIN_RUNTIME: Nanos = 1024;

/// SCHED_DEADLINE parameters: the thread gets `runtime` ns of CPU time every `period` ns,
/// within `deadline` ns of each period's start.
///
/// Invariant (checked by [`DeadlineParams::new`]): `MIN_RUNTIME <= runtime <= deadline <= period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlineParams {
    pub runtime: Nanos,
    pub deadline: Nanos,
    pub period: Nanos,
    /// `SCHED_FLAG_RECLAIM`: GRUB (Lipari and Baruah, ECRTS 2000; in Linux: Abeni et al.,
    /// "Greedy CPU reclaiming for SCHED_DEADLINE", RTLWS 2014, and
    /// Documentation/scheduler/sched-deadline.rst 2.2). The runtime is depleted at the
    /// rate of the CPU's active utilization rather than 1, so the thread may use bandwidth
    /// the others leave idle; every thread keeps its runtime-per-period guarantee, so
    /// admission is unchanged. Off by [`DeadlineParams::new`]; see [`Self::reclaiming`].
    pub reclaim: bool,
}

impl DeadlineParams {
    /// Checks `MIN_RUNTIME <= runtime <= deadline <= period`, as the kernel will.
    pub fn new(runtime: Nanos, deadline: Nanos, period: Nanos) -> Result<DeadlineParams> {
        if runtime < MIN_RUNTIME || runtime > deadline || deadline > period {
            return Err(Error::Invalid(format!(
                "SCHED_DEADLINE needs {MIN_RUNTIME} ns <= runtime <= deadline <= period, \
                 got runtime {runtime} ns, deadline {deadline} ns, period {period} ns"
            )));
        }
        Ok(DeadlineParams {
            runtime,
            deadline,
            period,
            reclaim: false,
        })
    }

    /// The same reservation with `SCHED_FLAG_RECLAIM` set or cleared.
    pub fn reclaiming(self, reclaim: bool) -> DeadlineParams {
        DeadlineParams { reclaim, ..self }
    }

    /// The reservation of a task with budget C, relative deadline D and period T.
    /// A deadline beyond the period is clamped to the period: the kernel requires
    /// `deadline <= period`, and finishing by T also finishes by D > T.
    pub fn for_task(budget: Nanos, deadline: Nanos, period: Nanos) -> Result<DeadlineParams> {
        DeadlineParams::new(budget, deadline.min(period), period)
    }
}

/// A thread's scheduling policy and its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Other {
        nice: i32,
    },
    Batch {
        nice: i32,
    },
    Idle,
    /// SCHED_FIFO at `priority` (1..=99, 99 highest).
    Fifo {
        priority: u32,
    },
    RoundRobin {
        priority: u32,
    },
    Deadline(DeadlineParams),
}

impl Policy {
    /// The kernel's name of the policy, as `chrt -p` prints it.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Other { .. } => "SCHED_OTHER",
            Policy::Batch { .. } => "SCHED_BATCH",
            Policy::Idle => "SCHED_IDLE",
            Policy::Fifo { .. } => "SCHED_FIFO",
            Policy::RoundRobin { .. } => "SCHED_RR",
            Policy::Deadline(_) => "SCHED_DEADLINE",
        }
    }

    /// The kernel's `sched_attr` for this policy (what the launcher sets in a child,
    /// [`crate::launch::Launch::sched`]).
    pub fn to_attr(self) -> libc::sched_attr {
        let mut a = empty_attr();
        match self {
            Policy::Other { nice } | Policy::Batch { nice } => {
                a.sched_policy = if matches!(self, Policy::Other { .. }) {
                    0
                } else {
                    3
                };
                a.sched_nice = nice;
            }
            Policy::Idle => a.sched_policy = 5,
            Policy::Fifo { priority } | Policy::RoundRobin { priority } => {
                a.sched_policy = if matches!(self, Policy::Fifo { .. }) {
                    1
                } else {
                    2
                };
                a.sched_priority = priority;
                a.sched_flags = RESET_ON_FORK;
            }
            Policy::Deadline(d) => {
                a.sched_policy = SCHED_DEADLINE;
                a.sched_runtime = d.runtime;
                a.sched_deadline = d.deadline;
                a.sched_period = d.period;
                a.sched_flags = RESET_ON_FORK | if d.reclaim { RECLAIM } else { 0 };
            }
        }
        a
    }

    fn from_attr(a: &libc::sched_attr) -> Result<Policy> {
        Ok(match a.sched_policy {
            0 => Policy::Other { nice: a.sched_nice },
            3 => Policy::Batch { nice: a.sched_nice },
            5 => Policy::Idle,
            1 => Policy::Fifo {
                priority: a.sched_priority,
            },
            2 => Policy::RoundRobin {
                priority: a.sched_priority,
            },
            SCHED_DEADLINE => Policy::Deadline(DeadlineParams {
                runtime: a.sched_runtime,
                deadline: a.sched_deadline,
                period: a.sched_period,
                reclaim: a.sched_flags & RECLAIM != 0,
            }),
            p => return Err(Error::Invalid(format!("unknown scheduling policy {p}"))),
        })
    }
}

fn empty_attr() -> libc::sched_attr {
    libc::sched_attr {
        size: size_of::<libc::sched_attr>() as u32,
        sched_policy: 0,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: 0,
        sched_deadline: 0,
        sched_period: 0,
    }
}

/// Sets the policy of the calling thread with one system call and no allocation, so it
/// may run in a forked child before `exec` (e.g. from `CommandExt::pre_exec`): the
/// program then starts under its reservation. Precondition for SCHED_DEADLINE: the
/// thread is already in its exclusive cpuset (see [`crate::cpuset`]).
pub fn set_current(policy: &Policy) -> io::Result<()> {
    let attr = policy.to_attr();
    // SAFETY: `attr` is a valid, initialized sched_attr whose `size` field is its size;
    // the kernel only reads it. tid 0 = the calling thread.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0,
            &attr as *const libc::sched_attr,
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the policy of thread `tid` (0 = the calling thread).
pub fn set(tid: i32, policy: &Policy) -> Result<()> {
    let attr = policy.to_attr();
    // SAFETY: as in `set_current`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid,
            &attr as *const libc::sched_attr,
            0,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    let hint = hint(policy, e.raw_os_error().unwrap_or(0));
    Err(Error::os(
        format!("sched_setattr({}) on thread {tid}", describe(policy)),
        e,
        hint,
    ))
}

/// The policy of thread `tid` (0 = the calling thread), from `sched_getattr(2)`.
pub fn get(tid: i32) -> Result<Policy> {
    let mut attr = empty_attr();
    // SAFETY: the kernel writes at most `size` bytes into `attr`, which is that large.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut attr as *mut libc::sched_attr,
            size_of::<libc::sched_attr>() as u32,
            0,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(Error::os(format!("sched_getattr on thread {tid}"), e, ""));
    }
    Policy::from_attr(&attr)
}

/// The thread ids of process `pid` (from `/proc/PID/task`).
pub fn threads(pid: i32) -> Result<Vec<i32>> {
    TaskDir::open(pid)?.list()
}

/// A process's `/proc/PID/task` directory, open as a stream that lists it again from
/// its start at each [`TaskDir::list`].
struct TaskDir {
    pid: i32,
    stream: *mut libc::DIR,
}

// SAFETY: the DIR stream is owned by this value alone and used only through `&mut self`,
// so one thread at a time; glibc's DIR carries no thread-local state.
unsafe impl Send for TaskDir {}

impl TaskDir {
    fn path(pid: i32) -> String {
        format!("/proc/{pid}/task")
    }

    /// Process `pid`'s directory could not be read: `e`.
    fn error(pid: i32, e: io::Error) -> Error {
        let path = TaskDir::path(pid);
        Error::os(format!("reading {path}"), e, "no such process?")
    }

    fn open(pid: i32) -> Result<TaskDir> {
        let c_path = std::ffi::CString::new(TaskDir::path(pid)).expect("no NUL in a path");
        // SAFETY: `c_path` is a valid NUL-terminated path; the stream is closed in Drop.
        let stream = unsafe { libc::opendir(c_path.as_ptr()) };
        if stream.is_null() {
            return Err(TaskDir::error(pid, io::Error::last_os_error()));
        }
        Ok(TaskDir { pid, stream })
    }

    /// The thread ids listed now, sorted (none once the process is gone).
    fn list(&mut self) -> Result<Vec<i32>> {
        let mut tids = Vec::new();
        // SAFETY: `self.stream` is the open stream of `open`, used by this thread alone
        // (`&mut self`); each entry is read before the next call to readdir.
        // readdir returns NULL at the end and on an error, which only errno tells apart.
        let errno = unsafe {
            libc::rewinddir(self.stream);
            loop {
                *libc::__errno_location() = 0;
                let entry = libc::readdir(self.stream);
                if entry.is_null() {
                    break *libc::__errno_location();
                }
                let name = std::ffi::CStr::from_ptr((*entry).d_name.as_ptr());
                if let Some(tid) = name.to_str().ok().and_then(|n| n.parse().ok()) {
                    tids.push(tid);
                }
            }
        };
        if errno != 0 {
            return Err(TaskDir::error(
                self.pid,
                io::Error::from_raw_os_error(errno),
            ));
        }
        tids.sort_unstable();
        Ok(tids)
    }
}

impl Drop for TaskDir {
    fn drop(&mut self) {
        // SAFETY: the stream opened in `open`, closed once here.
        unsafe { libc::closedir(self.stream) };
    }
}

/// Sets the policy of every thread of process `pid`; returns how many threads it set.
/// Threads created concurrently inherit the policy of their creator (for real-time
/// policies: SCHED_OTHER, as the reset-on-fork flag applies to threads too).
pub fn set_process(pid: i32, policy: &Policy) -> Result<usize> {
    let tids = threads(pid)?;
    set_threads(pid, &tids, policy)?;
    Ok(tids.len())
}

/// Sets the policy of threads `tids` of process `pid`, just listed; one that exited
/// since (other than the main thread) needs nothing.
fn set_threads(pid: i32, tids: &[i32], policy: &Policy) -> Result<()> {
    for &tid in tids {
        match set(tid, policy) {
            Err(e) if e.errno() == Some(libc::ESRCH) && tid != pid => continue,
            r => r?,
        }
    }
    Ok(())
}

fn describe(policy: &Policy) -> String {
    match policy {
        Policy::Deadline(d) => format!(
            "SCHED_DEADLINE runtime {} ns, deadline {} ns, period {} ns{}",
            d.runtime,
            d.deadline,
            d.period,
            if d.reclaim {
                ", SCHED_FLAG_RECLAIM"
            } else {
                ""
            }
        ),
        Policy::Fifo { priority } | Policy::RoundRobin { priority } => {
            format!("{} {priority}", policy.name())
        }
        Policy::Other { nice } | Policy::Batch { nice } => format!("{} nice {nice}", policy.name()),
        Policy::Idle => policy.name().to_string(),
    }
}

/// The usual cause of `errno` from sched_setattr for `policy`.
fn hint(policy: &Policy, errno: i32) -> String {
    let dl = matches!(policy, Policy::Deadline(_));
    match errno {
        libc::EPERM if dl => "SCHED_DEADLINE needs CAP_SYS_NICE (run as root) and a thread whose allowed CPUs \
             cover its whole root domain: put it in an exclusive cpuset (bulkhead_os::cpuset::ExclusiveDomain)"
            .into(),
        libc::EPERM => "real-time policies need CAP_SYS_NICE (run as root) or RLIMIT_RTPRIO; with \
             CONFIG_RT_GROUP_SCHED the thread's cpu cgroup also needs cpu.rt_runtime_us > 0"
            .into(),
        libc::EBUSY if dl => "the kernel refused admission: the root domain's SCHED_DEADLINE bandwidth \
             (sched_rt_runtime_us / sched_rt_period_us of each CPU) is used up"
            .into(),
        libc::EINVAL if dl => "the kernel rejected the parameters: it needs 1024 ns <= runtime <= deadline <= \
             period, with period within /proc/sys/kernel/sched_deadline_period_{min,max}_us; or it lacks SCHED_DEADLINE"
            .into(),
        libc::EINVAL => "the kernel rejected the policy or priority (SCHED_FIFO/SCHED_RR: 1..=99)".into(),
        libc::ESRCH => "no such thread".into(),
        _ => String::new(),
    }
}

/// What `/proc/PID/sched` reports about a thread's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcSched {
    /// The policy number (0 other, 1 fifo, 2 rr, 3 batch, 5 idle, 6 deadline).
    pub policy: u32,
    /// The kernel's internal priority (`-1` for SCHED_DEADLINE, `99 - rt_priority` for FIFO/RR).
    pub prio: i32,
    /// SCHED_DEADLINE: runtime left in the current period, ns: at most the configured
    /// runtime, negative after an overrun (until the replenishment).
    pub dl_runtime: Option<i64>,
    /// SCHED_DEADLINE: the current absolute deadline, ns of the kernel's clock.
    pub dl_deadline: Option<u64>,
}

/// Parses `/proc/PID/sched` (the main thread of `pid`).
pub fn proc_sched(pid: i32) -> Result<ProcSched> {
    let path = format!("/proc/{pid}/sched");
    let file =
        std::fs::File::open(&path).map_err(|e| Error::os(format!("reading {path}"), e, ""))?;
    read_sched(&file, &path)
}

/// Reads and parses open `/proc/PID/sched` file `file` (at `path`) from its start, in
/// pieces of 4 KiB: the whole file (about 1.5 KiB) in one `pread` (`fs::read_to_string`
/// reads a file without a size, as procfs's are, in growing pieces: eight system calls
/// here, and a mode agent reads it at every park; docs/modes.md, An agent on its tasks'
/// CPU). procfs builds the file anew at each read from offset 0.
fn read_sched(file: &std::fs::File, path: &str) -> Result<ProcSched> {
    const PIECE: usize = 4096;
    let mut text = Vec::with_capacity(PIECE);
    loop {
        let start = text.len();
        text.resize(start + PIECE, 0);
        let n = std::os::unix::fs::FileExt::read_at(file, &mut text[start..], start as u64)
            .map_err(|e| Error::os(format!("reading {path}"), e, ""))?;
        text.truncate(start + n);
        if n < PIECE {
            break;
        }
    }
    parse_proc_sched(&String::from_utf8_lossy(&text))
        .ok_or_else(|| Error::Invalid(format!("{path}: no `policy` or `prio` line")))
}

/// The fields [`ProcSched`] needs, in one pass over the file.
fn parse_proc_sched(text: &str) -> Option<ProcSched> {
    let (mut policy, mut prio, mut dl_runtime, mut dl_deadline) = (None, None, None, None);
    for (k, v) in text.lines().filter_map(|l| l.split_once(':')) {
        let v = v.trim();
        match k.trim() {
            "policy" => policy = v.parse().ok(),
            "prio" => prio = v.parse().ok(),
            "dl.runtime" => dl_runtime = v.parse().ok(),
            "dl.deadline" => dl_deadline = v.parse().ok(),
            _ => {}
        }
    }
    Some(ProcSched {
        policy: policy?,
        prio: prio?,
        dl_runtime,
        dl_deadline,
    })
}

/// A process's scheduling files in /proc held open: its thread list and its main
/// thread's `sched` file each take one system call to read again, instead of an open,
/// the reads and a close (a mode agent reads both at every park, one after the other in
/// a Boost switch: docs/modes.md, *Fewer files per step*).
pub struct ProcFiles {
    pid: i32,
    tasks: TaskDir,
    /// `/proc/PID/sched`, read again from offset 0 ([`read_sched`]).
    sched: std::fs::File,
}

impl ProcFiles {
    /// Opens the files of process `pid`.
    pub fn open(pid: i32) -> Result<ProcFiles> {
        let sched_path = format!("/proc/{pid}/sched");
        let sched = std::fs::File::open(&sched_path)
            .map_err(|e| Error::os(format!("opening {sched_path}"), e, "no such process?"))?;
        let tasks = TaskDir::open(pid)?;
        Ok(ProcFiles { pid, tasks, sched })
    }

    /// The process these files are of.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The thread ids of the process, as [`threads`] lists them; an error once the
    /// process is gone (its directory, held open, lists nothing).
    pub fn threads(&mut self) -> Result<Vec<i32>> {
        let tids = self.tasks.list()?;
        if tids.is_empty() {
            let e = io::Error::from_raw_os_error(libc::ESRCH);
            return Err(TaskDir::error(self.pid, e));
        }
        Ok(tids)
    }

    /// Sets the policy of every thread of the process, as [`set_process`] does.
    pub fn set_process(&mut self, policy: &Policy) -> Result<usize> {
        let tids = self.threads()?;
        set_threads(self.pid, &tids, policy)?;
        Ok(tids.len())
    }

    /// What `/proc/TID/sched` says of thread `tid` of the process (the main thread's
    /// from the file held open, another's by [`proc_sched`]).
    pub fn sched(&self, tid: i32) -> Result<ProcSched> {
        if tid != self.pid {
            return proc_sched(tid);
        }
        read_sched(&self.sched, &format!("/proc/{}/sched", self.pid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_params_follow_the_kernel_rules() {
        assert!(DeadlineParams::new(100_000, 1_000_000, 1_000_000).is_ok());
        assert!(DeadlineParams::new(1000, 1_000_000, 1_000_000).is_err());
        assert!(DeadlineParams::new(200, 100, 1000).is_err());
        assert!(DeadlineParams::new(2000, 3000, 2500).is_err());
        let clamped = DeadlineParams::for_task(50_000, 3_000_000, 1_000_000).unwrap();
        assert_eq!(clamped.deadline, 1_000_000);
    }

    #[test]
    fn attr_round_trips() {
        let policies = [
            Policy::Other { nice: 5 },
            Policy::Batch { nice: -3 },
            Policy::Idle,
            Policy::Fifo { priority: 42 },
            Policy::RoundRobin { priority: 7 },
            Policy::Deadline(DeadlineParams::new(100_000, 900_000, 1_000_000).unwrap()),
            Policy::Deadline(
                DeadlineParams::new(50_000, 1_000_000, 2_000_000)
                    .unwrap()
                    .reclaiming(true),
            ),
        ];
        for p in policies {
            assert_eq!(Policy::from_attr(&p.to_attr()).unwrap(), p);
        }
        assert_eq!(
            Policy::Fifo { priority: 1 }.to_attr().sched_flags,
            RESET_ON_FORK
        );
        let dl = DeadlineParams::new(50_000, 1_000_000, 1_000_000).unwrap();
        let flags = |d: DeadlineParams| Policy::Deadline(d).to_attr().sched_flags;
        assert_eq!(flags(dl), RESET_ON_FORK);
        assert_eq!(flags(dl.reclaiming(true)), RESET_ON_FORK | RECLAIM);
    }

    #[test]
    fn parses_proc_sched() {
        let text = "sleep (24570, #threads: 1)\n----\nse.sum_exec_runtime  :  1.812391\n\
                    policy                                       :                    6\n\
                    prio                                         :                   -1\n\
                    dl.runtime                                   :                12531\n\
                    dl.deadline                                  :        1626200757541\n";
        let s = parse_proc_sched(text).unwrap();
        assert_eq!(
            (s.policy, s.prio, s.dl_runtime, s.dl_deadline),
            (6, -1, Some(12531), Some(1626200757541))
        );
        let overrun = text.replace("12531", "-20481");
        assert_eq!(parse_proc_sched(&overrun).unwrap().dl_runtime, Some(-20481));
        assert!(parse_proc_sched("nothing here").is_none());
    }

    #[test]
    fn proc_files_read_again_what_a_fresh_open_reads() {
        let pid = std::process::id() as i32;
        let mut files = ProcFiles::open(pid).unwrap();
        let before = files.threads().unwrap();
        assert_eq!(before, threads(pid).unwrap());
        // A thread started after the open is listed at the next read.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let extra = std::thread::spawn(move || rx.recv().unwrap_or(()));
        let during = files.threads().unwrap();
        assert_eq!(during, threads(pid).unwrap());
        assert!(during.len() > before.len(), "{during:?} after {before:?}");
        tx.send(()).unwrap();
        extra.join().unwrap();
        assert_eq!(files.sched(pid).unwrap(), proc_sched(pid).unwrap());
        assert_eq!(
            files.sched(pid).unwrap(),
            proc_sched(pid).unwrap(),
            "read again"
        );
    }

    #[test]
    fn proc_files_of_a_process_that_is_gone_fail_with_an_error() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        let mut files = ProcFiles::open(pid).unwrap();
        child.wait().unwrap();
        assert!(files.threads().is_err());
        assert!(files.sched(pid).is_err());
    }

    #[test]
    fn hints_name_the_cause() {
        let dl = Policy::Deadline(DeadlineParams::new(100_000, 1_000_000, 1_000_000).unwrap());
        assert!(hint(&dl, libc::EPERM).contains("exclusive cpuset"));
        assert!(hint(&dl, libc::EBUSY).contains("bandwidth"));
        assert!(hint(&Policy::Fifo { priority: 3 }, libc::EPERM).contains("rt_runtime_us"));
    }
}
