//! `/proc/PID/stat`, parsed in one place.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd};

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

/// The start time of process `pid` (see [`ProcStat::start_time`]) if it runs: `None`
/// when it does not exist or has ended and waits to be reaped (a zombie). Every
/// "is this owner still alive" check compares it with a recorded start time; a
/// supervisor killed a moment ago is a zombie until its parent reaps it, and is gone.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = proc_stat(pid).ok()?;
    match stat.state() {
        'Z' | 'X' => None,
        _ => stat.start_time(),
    }
}

/// This process's effective uid (0: it acts as root).
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// This process's real uid.
pub fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The signals the supervisor sends its processes: stop, continue, kill.
pub use libc::{SIGCONT, SIGKILL, SIGSTOP};

/// The calling thread's id.
pub fn tid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Reaps child `pid` if it has ended, without waiting: its wait status, or `None` while
/// it runs.
pub fn try_wait(pid: i32) -> io::Result<Option<i32>> {
    let mut status = 0;
    // SAFETY: waitpid on a pid with a valid status pointer; WNOHANG does not block.
    let r = crate::check(unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) })?;
    Ok((r != 0).then_some(status))
}

/// Whether child `pid` of this process (of any of its threads) is stopped by a signal,
/// every thread of it: asked of the kernel's wait state, `waitid(WSTOPPED | WNOHANG |
/// WNOWAIT)`, a system call and no /proc read. `WNOWAIT` leaves the stop to be waited for
/// by anyone else; a continued process reports no stop. `None` when `pid` is no child of
/// this process (ECHILD), which only /proc can tell about.
pub fn child_stopped(pid: u32) -> io::Result<Option<bool>> {
    // SAFETY: an all-zero siginfo_t is a valid value (plain integers and a union of them).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WSTOPPED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: waitid with a valid siginfo pointer; WNOHANG does not block, WNOWAIT reaps
    // nothing and leaves the child's state as it was.
    let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ECHILD) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: waitid filled `info` (si_pid stays 0 when no child changed state).
    let who = unsafe { info.si_pid() };
    Ok(Some(who != 0 && info.si_code == libc::CLD_STOPPED))
}

/// Sends signal `sig` to process `pid`.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill(2) takes two integers and touches no memory.
    crate::check(unsafe { libc::kill(pid, sig) }).map(drop)
}

/// Waits until child `pid` has ended and reaps it: its wait status.
pub fn wait(pid: i32) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid on a pid with a valid status pointer.
        match crate::check(unsafe { libc::waitpid(pid, &mut status, 0) }) {
            Ok(_) => return Ok(status),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A process whose end can be waited for: a pidfd, which names the process itself, so
/// that a pid reused after it ended is never waited for instead.
pub struct Process(std::os::fd::OwnedFd);

impl Process {
    /// Opens process `pid`; `None` if no process has that pid (it has ended).
    pub fn open(pid: u32) -> io::Result<Option<Process>> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ESRCH) => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: pidfd_open returned a new descriptor that nothing else owns.
        Ok(Some(Process(unsafe {
            std::os::fd::OwnedFd::from_raw_fd(fd as i32)
        })))
    }

    /// The pidfd, to watch in an epoll set: readable once the process has ended (and
    /// until the descriptor is closed, reaped or not).
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.0.as_raw_fd()
    }

    /// Blocks until the process has ended (the pidfd polls readable).
    pub fn wait_exit(&self) -> io::Result<()> {
        let mut poll = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: one valid pollfd; no timeout.
            match crate::check(unsafe { libc::poll(&mut poll, 1, -1) }) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // The test reaps the child by its pid, through `try_wait`.
    #[allow(clippy::zombie_processes)]
    fn a_child_is_reaped_with_its_status() {
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let status = loop {
            if let Some(s) = try_wait(pid).unwrap() {
                break s;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert_eq!(libc::WEXITSTATUS(status), 3);
        assert!(try_wait(pid).is_err());
    }

    #[test]
    fn waiting_for_an_exit_returns_once_the_process_ended() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let process = Process::open(child.id()).unwrap().expect("it runs");
        process.wait_exit().unwrap();
        assert!(started.elapsed() >= std::time::Duration::from_millis(100));
        assert!(child.try_wait().unwrap().is_some(), "it has ended");
        // A pid no process can have (above pid_max): nothing to wait for.
        let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(Process::open(pid_max + 1).unwrap().is_none());
    }

    #[test]
    fn a_stopped_child_is_seen_stopped_and_left_to_be_waited_for() {
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert_eq!(child_stopped(pid).unwrap(), Some(false), "it runs");
        kill(pid as i32, SIGSTOP).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while child_stopped(pid).unwrap() != Some(true) {
            assert!(std::time::Instant::now() < deadline, "never seen stopped");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(proc_stat(pid).unwrap().state(), 'T');
        // WNOWAIT: the stop is still there for a waiter, and for the next look.
        assert_eq!(child_stopped(pid).unwrap(), Some(true));
        let mut status = 0;
        // SAFETY: waitpid on our child with a valid status pointer; WNOHANG does not block.
        let r = unsafe { libc::waitpid(pid as i32, &mut status, libc::WUNTRACED | libc::WNOHANG) };
        assert_eq!(r, pid as i32);
        assert!(libc::WIFSTOPPED(status), "{status:#x}");
        kill(pid as i32, SIGCONT).unwrap();
        assert_eq!(child_stopped(pid).unwrap(), Some(false), "continued");
        // Not a child of this process: only /proc knows.
        assert_eq!(child_stopped(1).unwrap(), None);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_zombie_has_no_start_time() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while proc_stat(pid).unwrap().state() != 'Z' {
            assert!(std::time::Instant::now() < deadline, "`true` never ended");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(proc_stat(pid).unwrap().start_time().is_some());
        assert_eq!(start_time(pid), None, "ended, not yet reaped");
        child.wait().unwrap();
        assert!(start_time(std::process::id()).is_some());
    }

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
