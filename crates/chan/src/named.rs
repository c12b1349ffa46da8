//! Named channels, `/dev/shm/bulkhead-chan-<name>` objects: their path, whether one
//! exists, and the removal of stale ones.

use crate::error::{OpenError, Result};
use crate::layout::check_name;
use crate::map::read_header;
use bulkhead_os::proc::start_time;
use rustix::fd::AsFd;
use rustix::fs::Mode;

/// Prefix of every channel object in `/dev/shm` and of every memfd name.
pub const PREFIX: &str = "bulkhead-chan-";

pub(crate) fn shm_path(name: &str) -> String {
    format!("/{PREFIX}{name}")
}

fn alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

/// Whether the named channel is stale: its header is valid, its creator is
/// dead (or its pid was reused) and no endpoint holds an end's lock ([`crate::alive`]).
/// An unreadable or invalid object is never called stale.
pub(crate) fn is_stale(name: &str) -> bool {
    let Ok(fd) = rustix::shm::open(
        shm_path(name).as_str(),
        rustix::shm::OFlags::RDONLY,
        Mode::empty(),
    ) else {
        return false;
    };
    let Ok(st) = rustix::fs::fstat(&fd) else {
        return false;
    };
    let Ok((meta, l)) = read_header(fd.as_fd(), st.st_size as u64) else {
        return false;
    };
    if alive(meta.creator_pid, meta.creator_start) {
        return false;
    }
    [l.writer_off, l.reader_off]
        .iter()
        .all(|&off| !crate::alive::held(fd.as_fd(), off))
}

/// Removes every stale named channel from `/dev/shm` (creator dead, no live
/// endpoint; see DriveOS section 5.1.2 on destroying channels) and returns
/// their names. Live, foreign or unreadable objects are left alone.
pub fn cleanup_stale() -> Result<Vec<String>, OpenError> {
    let dir = std::fs::read_dir("/dev/shm").map_err(|e| OpenError::io("read /dev/shm", e))?;
    let mut removed = Vec::new();
    for entry in dir.flatten() {
        let file = entry.file_name();
        let Some(name) = file.to_str().and_then(|f| f.strip_prefix(PREFIX)) else {
            continue;
        };
        if check_name(name).is_ok()
            && is_stale(name)
            && rustix::shm::unlink(shm_path(name).as_str()).is_ok()
        {
            removed.push(name.to_string());
        }
    }
    Ok(removed)
}

/// Whether a named channel exists (for tests and tools).
pub fn named_exists(name: &str) -> bool {
    std::path::Path::new(&format!("/dev/shm/{PREFIX}{name}")).exists()
}
