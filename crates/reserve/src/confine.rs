//! What confines a partition's processes besides cgroups: the user they run as and the
//! network namespace they see (DESIGN: "its own uid where configured, optionally its own
//! namespaces"; DriveOS 3.3.2: only the CAN gateway reaches the bus).
//!
//! A [`Confinement`] is prepared before fork ([`resolve_user`], [`private_netns`]) and
//! applied in the child between fork and exec by [`Confinement::apply_in_child`], which
//! makes only async-signal-safe system calls.

use bulkhead_model::types::Sandbox;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// How a partition's processes are confined (besides their cgroups).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    /// uid and gid to run as (supplementary groups are dropped); `None` = unchanged.
    pub identity: Option<(u32, u32)>,
    /// A network namespace to enter (an fd the caller keeps open until the child has
    /// exec'd); `None` = the supervisor's.
    pub netns: Option<RawFd>,
    /// Variables added to the environment.
    pub env: Vec<(String, String)>,
    /// Descriptors the child keeps open across exec, at the same numbers (e.g. its
    /// channels); the caller keeps them open until the child has exec'd. Every other
    /// descriptor of the caller is close-on-exec or closed by the launcher.
    pub pass_fds: Vec<RawFd>,
    /// The parts of the sandbox that apply ([`partition_env`] when `clean_env`,
    /// [`no_new_privs`] when `no_new_privs`); all by default.
    pub sandbox: Sandbox,
}

impl Confinement {
    /// Enters the network namespace, then gives up root for the identity. Returns the
    /// errno of the first call that failed.
    ///
    /// # Safety
    /// Only in a child between fork and exec (it changes the calling process's
    /// credentials and namespace); `netns`, if any, must be an open namespace fd.
    /// Makes only async-signal-safe system calls and touches no heap memory.
    pub unsafe fn apply_in_child(&self) -> Result<(), i32> {
        // SAFETY: the caller's contract.
        unsafe {
            self.enter_netns()?;
            self.take_identity()
        }
    }

    /// Enters the network namespace, if any.
    ///
    /// # Safety
    /// As [`Confinement::apply_in_child`].
    pub unsafe fn enter_netns(&self) -> Result<(), i32> {
        if let Some(fd) = self.netns {
            // SAFETY: the caller guarantees an open namespace fd; setns changes only this
            // (single-threaded, forked) process.
            check(unsafe { libc::setns(fd, libc::CLONE_NEWNET) })?;
        }
        Ok(())
    }

    /// Gives up root for the identity, if any (no supplementary groups).
    ///
    /// The credentials are changed by raw system calls, not by the C library's
    /// `setgroups`/`setgid`/`setuid`: in a process it believes multi-threaded, the C
    /// library changes the credentials of every thread (`__nptl_setxid`), holding its
    /// thread-list lock while it signals the threads and waits for them. A child cloned
    /// with `CLONE_VM` shares that lock with the supervisor, and a child killed in the
    /// middle (a run stopped while it starts) left it held: the supervisor then hung at
    /// its next thread exit. The raw calls change only the calling process, which is
    /// all a child between clone and exec has.
    ///
    /// # Safety
    /// As [`Confinement::apply_in_child`].
    pub unsafe fn take_identity(&self) -> Result<(), i32> {
        if let Some((uid, gid)) = self.identity {
            let (uid, gid) = (uid as libc::c_long, gid as libc::c_long);
            // SAFETY: credential system calls with no pointers (an empty group list);
            // they change only the calling (cloned, single-threaded) process.
            unsafe {
                check_raw(libc::syscall(
                    libc::SYS_setgroups,
                    0,
                    std::ptr::null::<libc::gid_t>(),
                ))?;
                check_raw(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
                check_raw(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
            }
        }
        Ok(())
    }
}

/// `Ok` for a raw system call's 0, else the errno it set.
fn check_raw(r: libc::c_long) -> Result<(), i32> {
    check(if r == 0 { 0 } else { -1 })
}

/// `Ok` for a system call's 0, else the errno it set.
fn check(r: libc::c_int) -> Result<(), i32> {
    if r == 0 {
        Ok(())
    } else {
        // SAFETY: errno of the calling thread, read right after the failed call.
        Err(unsafe { *libc::__errno_location() })
    }
}

impl Confinement {
    /// Clears close-on-exec on each of [`Confinement::pass_fds`], so that exactly
    /// those survive exec. Returns the errno of the first call that failed.
    ///
    /// # Safety
    /// Only in a child between fork and exec; the descriptors must be open. Makes only
    /// async-signal-safe system calls and touches no heap memory.
    pub unsafe fn keep_passed_fds(&self) -> Result<(), i32> {
        for &fd in &self.pass_fds {
            // SAFETY: fcntl on an open descriptor of this (forked) process.
            if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
                // SAFETY: errno of the calling thread, read right after the failed call.
                return Err(unsafe { *libc::__errno_location() });
            }
        }
        Ok(())
    }
}

/// Makes the calling child die (SIGKILL) with the thread that started it, `parent` the
/// supervisor's pid read before the fork. Called after the last credential change (a
/// change of uid or gid clears the parent-death signal). If the parent died before the
/// signal was set (then `getppid()` is no longer `parent`), returns `Err(ESRCH)`: the
/// caller must exit instead of exec'ing.
///
/// The signal follows the *thread* that forked: bulkhead starts processes from the thread
/// that runs until the partitions are stopped.
///
/// # Safety
/// Only in a child between fork and exec; async-signal-safe (prctl, getppid).
pub unsafe fn die_with_parent(parent: libc::pid_t) -> Result<(), i32> {
    // SAFETY: prctl with integer arguments changes only the calling process.
    if unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    } != 0
    {
        // SAFETY: errno of the calling thread, read right after the failed call.
        return Err(unsafe { *libc::__errno_location() });
    }
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        return Err(libc::ESRCH);
    }
    Ok(())
}

/// Forbids the calling child and everything it execs to gain privileges (setuid and
/// file-capability binaries run without them; `PR_SET_NO_NEW_PRIVS`). Returns the errno
/// if the call failed.
///
/// # Safety
/// Only in a child between fork and exec; async-signal-safe (one prctl).
pub unsafe fn no_new_privs() -> Result<(), i32> {
    // SAFETY: prctl with integer arguments changes only the calling process; the flag
    // is inherited across fork and exec and cannot be cleared.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        // SAFETY: errno of the calling thread, read right after the failed call.
        return Err(unsafe { *libc::__errno_location() });
    }
    Ok(())
}

/// The search path of a partition's processes.
pub const PARTITION_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The whole environment of a partition's processes: `PATH` ([`PARTITION_PATH`]),
/// the supervisor's `LANG` if it has one, then `own` (bulkhead's variables for the
/// partition, e.g. its channels), which override those. Nothing else of the
/// supervisor's environment (its `HOME`, `USER`, credentials in variables) reaches a
/// partition, unless `clean` is false (`sandbox: {clean_env: false}`): then the
/// supervisor's whole environment takes the place of `PATH` and `LANG`.
pub fn partition_env(own: &[(String, String)], clean: bool) -> Vec<(String, String)> {
    let mut env = vec![("PATH".to_string(), PARTITION_PATH.to_string())];
    if let Ok(lang) = std::env::var("LANG") {
        env.push(("LANG".to_string(), lang));
    }
    if !clean {
        env = std::env::vars().collect();
    }
    env.retain(|(k, _)| !own.iter().any(|(o, _)| o == k));
    env.extend(own.iter().cloned());
    env
}

pub use bulkhead_model::users::resolve as resolve_user;

/// A new network namespace holding only a loopback interface (up). Made on a thread of
/// its own (`unshare(CLONE_NEWNET)` changes the calling thread only), which ends after
/// opening it: the returned fd keeps it alive. Needs CAP_SYS_ADMIN.
pub fn private_netns() -> io::Result<OwnedFd> {
    std::thread::spawn(|| {
        // SAFETY: unshare affects only this short-lived thread.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let ns = std::fs::File::open("/proc/thread-self/ns/net")?;
        loopback_up()?;
        Ok(OwnedFd::from(ns))
    })
    .join()
    .map_err(|_| io::Error::other("netns thread panicked"))?
}

/// Sets `lo` up in the calling thread's network namespace.
fn loopback_up() -> io::Result<()> {
    // SAFETY: a fresh datagram socket, owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write `req`, a valid ifreq naming `lo`.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) != 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    /// A child confined to a private network namespace and uid 65534 sees only `lo`
    /// and runs as that uid, without supplementary groups.
    #[test]
    fn a_confined_child_has_its_own_network_and_uid() {
        if !is_root() {
            eprintln!("skipped: needs root (CAP_SYS_ADMIN for namespaces, setuid)");
            return;
        }
        let ns = private_netns().expect("private netns");
        let c = Confinement {
            identity: Some((65534, 65534)),
            netns: Some(ns.as_raw_fd()),
            env: Vec::new(),
            pass_fds: Vec::new(),
            sandbox: Sandbox::default(),
        };
        let mut cmd = Command::new("/bin/sh");
        // /proc/net/dev lists the interfaces of the reader's network namespace.
        cmd.args([
            "-c",
            "id -u; id -G; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
        ]);
        // SAFETY: apply_in_child only makes async-signal-safe calls; `ns` outlives the spawn.
        unsafe {
            cmd.pre_exec(move || c.apply_in_child().map_err(io::Error::from_raw_os_error));
        }
        let out = cmd.output().expect("runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, ["65534", "65534", "lo"], "{text}");
    }

    /// bulkhead's variables override the defaults; nothing else of the caller's
    /// environment is kept.
    #[test]
    fn a_partition_environment_is_path_lang_and_its_own_variables() {
        let own = [
            ("BULKHEAD_CHAN_A".to_string(), "fd:4:5".to_string()),
            ("PATH".to_string(), "/opt/bin".to_string()),
        ];
        let env = partition_env(&own, true);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert!(!names.contains(&"HOME"), "{env:?}");
        assert!(env.contains(&own[0]) && env.contains(&own[1]), "{env:?}");
        assert_eq!(names.iter().filter(|&&n| n == "PATH").count(), 1, "{env:?}");
        let lang = std::env::var("LANG").ok();
        assert_eq!(names.contains(&"LANG"), lang.is_some(), "{env:?}");
    }
}
