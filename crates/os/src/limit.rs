//! Resource limits of a partition in a cgroup v1 controller hierarchy of their own
//! (`memory`, `pids`): on v1 each controller is a separate tree, so a partition's limit
//! is a cgroup `<mount>/<name>` its processes join besides their cpuset and freezer.
//! `name` starts with the run's instance name (`bulkhead-<pid>-<start>-<n>-...`), so the
//! leftover cleanup of a later run recognises it.

use crate::error::{Error, Result};
use std::fs;
use std::path::{Path, PathBuf};

/// Where the cgroup v1 `controller` hierarchy is mounted, if it is.
pub fn v1_mount(controller: &str) -> Option<PathBuf> {
    let mounts = crate::cgroup::Mounts::read().ok()?;
    mounts.v1(controller).map(Path::to_path_buf)
}

/// A limit: the cgroup `<mount of controller>/<name>` with `value` written to `file`;
/// removed on drop (after its processes are gone).
pub struct V1Limit {
    dir: PathBuf,
}

impl V1Limit {
    /// Creates the cgroup and writes the limit; on error nothing is left.
    pub fn create(controller: &str, name: &str, file: &str, value: u64) -> Result<V1Limit> {
        let mount = v1_mount(controller).ok_or_else(|| {
            Error::Invalid(format!(
                "a {controller} limit needs the {controller} controller"
            ))
        })?;
        let dir = mount.join(name);
        fs::create_dir(&dir)
            .map_err(|e| Error::os(format!("creating cgroup {}", dir.display()), e, ""))?;
        let limit = V1Limit { dir };
        let path = limit.dir.join(file);
        fs::write(&path, value.to_string())
            .map_err(|e| Error::os(format!("writing {value} to {}", path.display()), e, ""))?;
        Ok(limit)
    }

    /// The cgroup directory (its `cgroup.procs` is what a process joins).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for V1Limit {
    fn drop(&mut self) {
        for _ in 0..200 {
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        eprintln!("bulkhead: could not remove {}", self.dir.display());
    }
}
