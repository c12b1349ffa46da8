//! What a uid leaves behind in the host's shared places (systemd's `RemoveIPC=`): its
//! System V shared memory segments, message queues and semaphore sets, and its files and
//! directories at the top of the world-writable directories that outlive a run. bulkhead
//! removes them when it releases a partition's uid of its own, and when it takes one,
//! so that a later run's partition given the same uid reads nothing an earlier one left.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The host's world-writable directories a partition without a private `/tmp` (or a
/// private IPC namespace) may leave files in.
pub const SHARED_DIRS: [&str; 4] = ["/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue"];

/// Removes every System V IPC object whose owner or creator is one of `uids`, and every
/// entry of [`SHARED_DIRS`] that one of them owns (a directory with all it holds), in one
/// pass over the tables and directories however many uids there are (a run of 10000
/// partitions releases 10000 uids at once); returns what it could not remove, one line
/// each.
pub fn remove_owned_by(uids: &BTreeSet<u32>) -> Vec<String> {
    let mut failed = Vec::new();
    for kind in SysV::ALL {
        for (id, uid) in kind.owned_by(uids) {
            if let Err(e) = kind.remove(id) {
                failed.push(format!("System V {} {id} of uid {uid}: {e}", kind.name()));
            }
        }
    }
    for dir in SHARED_DIRS {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let uid = meta.uid();
            if !uids.contains(&uid) {
                continue;
            }
            let removed = match meta.is_dir() {
                true => std::fs::remove_dir_all(&path),
                false => std::fs::remove_file(&path),
            };
            if let Err(e) = removed {
                failed.push(format!("{} of uid {uid}: {e}", path.display()));
            }
        }
    }
    failed
}

/// A kind of System V IPC object.
#[derive(Clone, Copy)]
enum SysV {
    Shm,
    Msg,
    Sem,
}

impl SysV {
    const ALL: [SysV; 3] = [SysV::Shm, SysV::Msg, SysV::Sem];

    fn name(self) -> &'static str {
        match self {
            SysV::Shm => "shared memory segment",
            SysV::Msg => "message queue",
            SysV::Sem => "semaphore set",
        }
    }

    /// `/proc/sysvipc/<file>` and the columns of the id, owner uid and creator uid.
    fn table(self) -> (&'static str, [usize; 3]) {
        match self {
            SysV::Shm => ("/proc/sysvipc/shm", [1, 7, 9]),
            SysV::Msg => ("/proc/sysvipc/msg", [1, 7, 9]),
            SysV::Sem => ("/proc/sysvipc/sem", [1, 4, 6]),
        }
    }

    /// The ids of the objects one of `uids` owns or created, each with that uid.
    fn owned_by(self, uids: &BTreeSet<u32>) -> Vec<(i32, u32)> {
        let (file, [id, owner, creator]) = self.table();
        let text = std::fs::read_to_string(Path::new(file)).unwrap_or_default();
        text.lines()
            .skip(1)
            .filter_map(|line| {
                let cols: Vec<&str> = line.split_whitespace().collect();
                let num = |i: usize| cols.get(i)?.parse::<u32>().ok();
                let uid = [owner, creator]
                    .iter()
                    .find_map(|&c| num(c).filter(|u| uids.contains(u)))?;
                Some((cols.get(id)?.parse().ok()?, uid))
            })
            .collect()
    }

    fn remove(self, id: i32) -> std::io::Result<()> {
        // SAFETY: IPC_RMID takes no buffer (a null one is allowed); the id is the
        // kernel's, and a wrong one is an error, not undefined behaviour.
        let r = unsafe {
            match self {
                SysV::Shm => libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                SysV::Msg => libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                SysV::Sem => libc::semctl(id, 0, libc::IPC_RMID),
            }
        };
        crate::check(r).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One call removes what each of several unused uids owns (a segment of one, a file
    /// of the other), and nothing of another uid.
    #[test]
    #[ignore = "needs root: chown, IPC_SET"]
    fn the_uids_segments_and_files_are_removed_and_no_one_elses() {
        let uid = 3_999_000 + std::process::id() % 1000;
        let uids = BTreeSet::from([uid, uid + 1000]);
        // SAFETY: a new private segment of one page, owned below.
        let shm = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, 0o600) };
        assert!(shm >= 0);
        // SAFETY: reading the segment's ids into a zeroed struct, then giving it `uid`.
        unsafe {
            let mut ds: libc::shmid_ds = std::mem::zeroed();
            assert_eq!(libc::shmctl(shm, libc::IPC_STAT, &mut ds), 0);
            ds.shm_perm.uid = uid;
            assert_eq!(libc::shmctl(shm, libc::IPC_SET, &mut ds), 0);
        }
        let file = Path::new("/dev/shm").join(format!("bulkhead-ipc-test-{uid}"));
        let other = Path::new("/dev/shm").join(format!("bulkhead-ipc-test-{uid}-root"));
        std::fs::write(&file, "x").unwrap();
        std::fs::write(&other, "x").unwrap();
        std::os::unix::fs::chown(&file, Some(uid + 1000), None).unwrap();
        let failed = remove_owned_by(&uids);
        let left = SysV::Shm.owned_by(&uids);
        let (file_left, other_left) = (file.exists(), other.exists());
        let _ = std::fs::remove_file(&other);
        assert!(failed.is_empty(), "{failed:?}");
        assert!(left.is_empty() && !file_left, "{left:?} {file_left}");
        assert!(other_left, "another uid's file was removed");
    }
}
