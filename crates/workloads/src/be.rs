//! A best-effort partition's cgroups for isolation experiments (cgroup v1): freezer and
//! pids always, memory and cpuset when limited; its processes run as uid/gid `nobody`.
//! Used by the isolation test and `bench/rt-isolation` until `bulkhead run` starts
//! best-effort partitions that are in no window.

use bulkhead_os::cgroup::{self, Version};
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// uid and gid of `nobody`.
pub const NOBODY: u32 = 65534;

/// What a best-effort partition is limited to.
#[derive(Debug, Clone, Copy)]
pub struct BeLimits<'a> {
    /// cpuset CPUs (a cpulist); `None`: no cpuset cgroup.
    pub cpus: Option<&'a str>,
    /// memory.limit_in_bytes; `None`: no memory cgroup.
    pub memory: Option<u64>,
    pub pids_max: u32,
}

/// The partition's cgroups. Dropping it freezes the partition, kills everything in it,
/// thaws it and removes the cgroups.
pub struct BeCgroups {
    dirs: Vec<PathBuf>,
    freezer: PathBuf,
}

impl BeCgroups {
    /// Creates `/sys/fs/cgroup/{freezer,pids,memory,cpuset}/NAME` as `limits` asks.
    pub fn create(name: &str, limits: BeLimits) -> std::io::Result<BeCgroups> {
        let root = Path::new("/sys/fs/cgroup");
        let mut be = BeCgroups {
            dirs: Vec::new(),
            freezer: root.join("freezer").join(name),
        };
        let mut add = |ctrl: &str| -> std::io::Result<PathBuf> {
            let dir = root.join(ctrl).join(name);
            fs::create_dir(&dir)?;
            be.dirs.push(dir.clone());
            Ok(dir)
        };
        add("freezer")?;
        fs::write(add("pids")?.join("pids.max"), limits.pids_max.to_string())?;
        if let Some(bytes) = limits.memory {
            fs::write(
                add("memory")?.join("memory.limit_in_bytes"),
                bytes.to_string(),
            )?;
        }
        if let Some(cpus) = limits.cpus {
            let cpuset = add("cpuset")?;
            fs::write(cpuset.join("cpuset.cpus"), cpus)?;
            let mems = fs::read_to_string(root.join("cpuset/cpuset.mems"))?;
            fs::write(cpuset.join("cpuset.mems"), mems.trim())?;
        }
        Ok(be)
    }

    /// The partition's cgroup directory of controller `ctrl` (`cpuset`, `memory`, ...),
    /// if it has one.
    pub fn dir(&self, ctrl: &str) -> Option<&Path> {
        let of = |d: &&PathBuf| d.parent().and_then(|p| p.file_name()) == Some(ctrl.as_ref());
        self.dirs.iter().find(of).map(PathBuf::as_path)
    }

    /// The processes in the partition.
    pub fn procs(&self) -> Vec<i32> {
        cgroup::procs(&self.freezer)
    }

    /// Spawns `cmd` inside every cgroup, as uid/gid nobody, before it runs its program;
    /// its stdin is /dev/null.
    pub fn spawn(&self, cmd: &mut Command) -> std::io::Result<Child> {
        let files: Vec<fs::File> = self
            .dirs
            .iter()
            .map(|d| {
                fs::OpenOptions::new()
                    .write(true)
                    .open(cgroup::procs_file(d))
            })
            .collect::<std::io::Result<_>>()?;
        let fds: Vec<i32> = files.iter().map(|f| f.as_raw_fd()).collect();
        // SAFETY: the closure runs in the forked child and only makes system calls
        // (write, setgroups, setgid, setuid) on data prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                for &fd in &fds {
                    if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(NOBODY) != 0
                    || libc::setuid(NOBODY) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.stdin(Stdio::null()).spawn();
        drop(files);
        child
    }

    fn kill_all(&self) {
        for pid in self.procs() {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

impl Drop for BeCgroups {
    fn drop(&mut self) {
        // Frozen while killed, so that nothing forks meanwhile; stragglers below.
        cgroup::kill_cgroup(&self.freezer, Version::V1);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.procs().is_empty() && Instant::now() < deadline {
            self.kill_all();
            std::thread::sleep(Duration::from_millis(10));
        }
        for dir in &self.dirs {
            for _ in 0..200 {
                if fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}
