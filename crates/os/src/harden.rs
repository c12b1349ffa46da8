//! What a be process may neither change nor see of the host (systemd's `ProtectSystem=`,
//! `ProtectKernelTunables=`, `ProtectControlGroups=`, `InaccessiblePaths=`,
//! `PrivateIPC=` and `PrivateUsers=`), set in the child between clone and exec
//! ([`crate::launch`]) while it is still root, before its uid change and seccomp filter:
//! - read-only mounts of the host's system files, kernel settings and cgroups
//!   ([`Protections`]): uid 0 without capabilities still owns them, and a `user: root`
//!   partition with the host's root froze an rt partition, lifted its own limits and
//!   wrote `/etc/passwd` and the bulkhead binary;
//! - bulkhead's runtime directory hidden under an empty mount nobody may enter (its uid
//!   locks, control sockets and records);
//! - an IPC namespace of its own (System V objects, POSIX message queues);
//! - root as the root of a user namespace of its own mapped to an unprivileged uid
//!   ([`enter_user_namespace`]): it owns nothing of the host's.

use crate::sandbox::{decimal, errno, ok, private_mount_namespace};
use std::ffi::CString;
use std::path::Path;

/// bulkhead's runtime directory (uid locks, control sockets, records).
pub const RUNTIME_DIR: &str = "/run/bulkhead";

/// Which protections apply (the parts of a be partition's sandbox).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Protect {
    /// `/usr`, `/etc`, `/boot` and the running program's directory read-only.
    pub system: bool,
    /// `/proc/sys` and `/proc/sysrq-trigger` read-only.
    pub kernel: bool,
    /// `/sys/fs/cgroup` read-only.
    pub cgroups: bool,
    /// [`RUNTIME_DIR`] hidden.
    pub runtime_dir: bool,
    /// An IPC namespace of its own.
    pub ipc: bool,
}

impl Protect {
    fn any(&self) -> bool {
        self.system || self.kernel || self.cgroups || self.runtime_dir || self.ipc
    }
}

/// The protections of one launch, prepared before the clone ([`Protections::new`]) and
/// applied in the child ([`Protections::apply`]).
pub struct Protections {
    /// Made read-only with everything mounted below (each bound onto itself first).
    read_only: Vec<CString>,
    /// A directory hidden under an empty mount of mode 0.
    hidden: Option<CString>,
    ipc: bool,
    /// `/dev/mqueue` exists: it gets the new IPC namespace's message queues.
    mqueue: bool,
}

impl Protections {
    /// The protections `protect` asks for; `None` for none. The running program's
    /// directory is that of `std::env::current_exe`. The runtime directory is created
    /// (as root) if missing, so that it cannot appear unhidden later.
    pub fn new(protect: Protect) -> Option<Protections> {
        if !protect.any() {
            return None;
        }
        let mut read_only: Vec<String> = Vec::new();
        if protect.system {
            read_only.extend(["/usr", "/etc", "/boot"].map(String::from));
            let own = std::env::current_exe().ok();
            if let Some(dir) = own.as_deref().and_then(Path::parent) {
                read_only.push(dir.display().to_string());
            }
        }
        if protect.kernel {
            read_only.extend(["/proc/sys", "/proc/sysrq-trigger"].map(String::from));
        }
        if protect.cgroups {
            read_only.push("/sys/fs/cgroup".into());
        }
        let hidden = protect.runtime_dir.then(|| {
            let _ = std::fs::create_dir_all(RUNTIME_DIR);
            CString::new(RUNTIME_DIR).expect("no NUL")
        });
        Some(Protections {
            read_only: read_only
                .into_iter()
                .filter_map(|p| CString::new(p).ok())
                .collect(),
            hidden,
            ipc: protect.ipc,
            mqueue: protect.ipc && Path::new("/dev/mqueue").is_dir(),
        })
    }

    /// Applies them: in the calling child's mount namespace if `in_mount_namespace`,
    /// else in a new private one. A path that does not exist (e.g. the program's
    /// directory under a fresh `/tmp`) is left out. Needs CAP_SYS_ADMIN. A working
    /// directory under a read-only path stays read-only.
    ///
    /// # Safety
    /// Only in a child between clone and exec, after its other mounts (a fresh `/tmp`,
    /// `/proc`); async-signal-safe (unshare, mount, mount_setattr, access) on strings
    /// prepared before the clone.
    pub unsafe fn apply(&self, in_mount_namespace: bool) -> Result<(), i32> {
        // SAFETY: the caller's contract; every pointer is a NUL-terminated string that
        // lives through the call.
        unsafe {
            if !in_mount_namespace {
                private_mount_namespace()?;
            }
            if self.ipc {
                ok(libc::unshare(libc::CLONE_NEWIPC))?;
            }
            if self.mqueue {
                let mqueue = c"mqueue".as_ptr();
                let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                let to = c"/dev/mqueue".as_ptr();
                ok(libc::mount(mqueue, to, mqueue, flags, std::ptr::null()))?;
            }
            for path in &self.read_only {
                bind_read_only(path)?;
            }
            if let Some(dir) = &self.hidden {
                let tmpfs = c"tmpfs".as_ptr();
                let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                let options = c"mode=000,size=4k".as_ptr().cast();
                // Missing only if it could not be made (not root): nothing to hide.
                if libc::mount(tmpfs, dir.as_ptr(), tmpfs, flags, options) != 0
                    && errno() != libc::ENOENT
                {
                    return Err(errno());
                }
            }
        }
        Ok(())
    }
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 1;

/// Binds `path` onto itself with everything mounted below it and makes all of that
/// read-only; nothing if `path` does not exist.
///
/// # Safety
/// Only in a child between clone and exec, in a private mount namespace.
unsafe fn bind_read_only(path: &CString) -> Result<(), i32> {
    let none = std::ptr::null();
    // SAFETY: the caller's contract; `path` is NUL-terminated, `attr` a valid struct.
    unsafe {
        let bind = libc::MS_BIND | libc::MS_REC;
        if libc::mount(path.as_ptr(), path.as_ptr(), none, bind, none.cast()) != 0 {
            return match errno() {
                libc::ENOENT => Ok(()),
                e => Err(e),
            };
        }
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        let r = libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        );
        if r == 0 {
            return Ok(());
        }
        if errno() != libc::ENOSYS {
            return Err(errno());
        }
        // Before Linux 5.12: the top mount alone.
        let flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY;
        ok(libc::mount(none, path.as_ptr(), none, flags, none.cast()))
    }
}

/// Makes the calling child, which already runs as `uid` and `gid` (unprivileged),
/// root of a new user namespace in which uid 0 and gid 0 are `uid` and `gid` outside
/// (and nothing else is mapped): it has every capability there, over nothing of the
/// host's, and the host sees `uid`. It is made dumpable for the time of the mapping
/// (its `/proc/self` files are then its own), not dumpable again after.
///
/// # Safety
/// Only in a child between clone and exec, after its uid change and before its seccomp
/// filter (which refuses `unshare`); async-signal-safe (unshare, prctl, open, write).
pub unsafe fn enter_user_namespace(uid: u32, gid: u32) -> Result<(), i32> {
    // SAFETY: the caller's contract; the paths are static, the buffers local.
    unsafe {
        ok(libc::unshare(libc::CLONE_NEWUSER))?;
        ok(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0))?;
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_map(c"/proc/self/uid_map", uid)?;
        write_map(c"/proc/self/gid_map", gid)?;
        ok(libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0))
    }
}

/// Writes the one-line map `0 <outside> 1` to `path`.
///
/// # Safety
/// As [`enter_user_namespace`].
unsafe fn write_map(path: &std::ffi::CStr, outside: u32) -> Result<(), i32> {
    let mut line = [0u8; 24];
    line[..2].copy_from_slice(b"0 ");
    let len = 2 + decimal(outside.into(), &mut line[2..]);
    line[len..len + 2].copy_from_slice(b" 1");
    // SAFETY: the caller's contract.
    unsafe { write_file(path, &line[..len + 2]) }
}

/// Writes `bytes` to the file `path` in one write.
///
/// # Safety
/// Only in a child between clone and exec (async-signal-safe: open, write, close).
pub(crate) unsafe fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> Result<(), i32> {
    // SAFETY: open, write and close of a local buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(errno());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let e = errno();
        libc::close(fd);
        if written != bytes.len() as isize {
            return Err(e);
        }
    }
    Ok(())
}
