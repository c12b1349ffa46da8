//! Open-file-description locks on single bytes (`F_OFD_SETLK`, `F_OFD_GETLK`): a lock is
//! held as long as its open file description, and the kernel drops it when the last
//! descriptor of that description closes, also when its process is killed. The channels'
//! liveness and the partitions' uid reservations rest on them. Also the whole-file lock
//! that serializes the runs taking CPUs exclusively on a test machine
//! ([`exclusive_cpus`]).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The file locked (`flock`) by whatever takes CPUs exclusively on a test or benchmark
/// machine: the rt test suites, the benchmarks (`flock /run/bulkhead-rt-tests.lock
/// bench/...`) and any test that needs a CPU no other run holds as an exclusive cpuset.
/// Two such runs at once would refuse each other's cpusets.
pub const EXCLUSIVE_CPUS_LOCK: &str = "/run/bulkhead-rt-tests.lock";

/// Waits for [`EXCLUSIVE_CPUS_LOCK`]; it is held until the returned file is dropped.
pub fn exclusive_cpus() -> io::Result<File> {
    let lock = File::create(EXCLUSIVE_CPUS_LOCK)?;
    whole_file(&lock)?;
    Ok(lock)
}

/// Waits for an exclusive `flock` on `file`, held until its open file description
/// closes (a signal's interruption waits again).
pub fn whole_file(file: &File) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor `file` keeps open for the call.
        match crate::check(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Which lock: shared (any number of readers) or exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
}

/// Takes a lock of `kind` on byte `byte` of `fd`'s file without waiting. `Ok(false)`
/// when another open file description holds a conflicting lock.
pub fn try_lock_byte(fd: BorrowedFd<'_>, byte: u64, kind: Kind) -> io::Result<bool> {
    let kind = match kind {
        Kind::Read => libc::F_RDLCK,
        Kind::Write => libc::F_WRLCK,
    };
    match fcntl_lock(fd, libc::F_OFD_SETLK, kind, byte) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether an open file description other than `fd`'s holds a lock on byte `byte` (one
/// of `fd`'s own does not count). Needs no access to the file.
pub fn locked_by_others(fd: BorrowedFd<'_>, byte: u64) -> io::Result<bool> {
    let l = fcntl_lock(fd, libc::F_OFD_GETLK, libc::F_WRLCK, byte)?;
    Ok(l.l_type != libc::F_UNLCK as libc::c_short)
}

/// One `fcntl` record-lock command on the single byte `byte` of `fd`.
fn fcntl_lock(fd: BorrowedFd<'_>, cmd: i32, kind: i32, byte: u64) -> io::Result<libc::flock> {
    let start =
        libc::off_t::try_from(byte).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: an all-zero flock is valid (l_pid must be 0 for the OFD commands).
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = start;
    l.l_len = 1;
    // SAFETY: fcntl with a record-lock command and a pointer to a local flock, which the
    // kernel reads (and for GETLK writes) only during the call.
    crate::check(unsafe { libc::fcntl(fd.as_raw_fd(), cmd, &mut l) })?;
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_byte_locked_by_one_description_is_refused_to_another_until_it_closes() {
        let path = std::env::temp_dir().join(format!("bulkhead-os-lock-{}", std::process::id()));
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .unwrap()
        };
        let (a, b) = (open(), open());
        assert!(try_lock_byte(a.as_fd(), 3, Kind::Write).unwrap());
        assert!(!locked_by_others(a.as_fd(), 3).unwrap(), "its own lock");
        assert!(locked_by_others(b.as_fd(), 3).unwrap());
        assert!(!try_lock_byte(b.as_fd(), 3, Kind::Read).unwrap());
        assert!(
            try_lock_byte(b.as_fd(), 4, Kind::Read).unwrap(),
            "another byte"
        );
        drop(a);
        assert!(try_lock_byte(b.as_fd(), 3, Kind::Write).unwrap());
        std::fs::remove_file(&path).unwrap();
    }
}
