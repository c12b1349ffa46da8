//! Best-effort hogs for isolation experiments: each one tries, in its own
//! way, to take what a best-effort partition must not take from a real-time one.
//!
//! * [`cpu`]: `threads` busy loops.
//! * [`memory`]: allocates and keeps touching memory in 1 MiB steps up to `bytes` (or
//!   forever), so it meets the partition's memory limit.
//! * [`fork`]: a fork bomb: every process forks as fast as it can and spins; a failed
//!   fork (the partition's `pids.max`) is retried after a yield. Bounded only by pids.max.
//! * [`io`]: writes and `fsync`s a file in `dir` (created and unlinked at once, so a
//!   killed hog leaves nothing behind), then reads it back, in a loop.
//! * [`can`]: writes frames of one CAN id into its partition's channel to the CAN gateway
//!   as fast as the channel takes them (or one every `every`), so it meets its limits at
//!   the gateway.
//!
//! The real-time tasks' counterpart is `bulkhead-periodic` in bulkhead-task. Every hog
//! runs until it is killed; the supervisor kills it with its partition.

pub mod be;

/// Why a workload could not open, or use, a channel or a facility of its process.
#[derive(Debug, thiserror::Error)]
pub enum EndError {
    #[error(transparent)]
    Chan(#[from] bulkhead_chan::OpenError),
    #[error(transparent)]
    Can(#[from] bulkhead_gateway_protocol::ClientError),
    #[error(transparent)]
    Task(#[from] bulkhead_task::Error),
    #[error(transparent)]
    StopStart(#[from] bulkhead_client::Error),
    /// Writing a frame to bus `bus` failed.
    #[error("bus {bus}: {source}")]
    Send { bus: String, source: SendError },
    /// A channel whose messages are `size` bytes where the workload writes or reads
    /// `want` (`bulkhead-periodic`'s job messages).
    #[error(
        "its messages are {size} bytes; a job message is {want} (index and release, u64 each)"
    )]
    MessageSize { size: u32, want: usize },
}

use bulkhead_chan::SendError;
use bulkhead_gateway_protocol::{client_channels, join, CanId, FRAME_SIZE};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::FromRawFd;
use std::path::Path;
use std::time::Duration;

/// `threads` busy loops, forever (as many as the partition's pids.max lets it start).
pub fn cpu(threads: u32) -> ! {
    for _ in 1..threads.max(1) {
        if std::thread::Builder::new().spawn(|| spin()).is_err() {
            break;
        }
    }
    spin()
}

fn spin() -> ! {
    let mut x = 1u64;
    loop {
        x = std::hint::black_box(
            x.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
}

/// Allocates and touches memory in 1 MiB steps until `bytes` (None: forever), then keeps
/// touching it all so none of it can stay swapped out or reclaimed quietly.
pub fn memory(bytes: Option<u64>) -> ! {
    const STEP: usize = 1 << 20;
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut pass = 0u8;
    loop {
        let total = chunks.len() as u64 * STEP as u64;
        if bytes.is_none_or(|b| total < b) {
            chunks.push(vec![1u8; STEP]);
        } else {
            pass = pass.wrapping_add(1);
            for c in &mut chunks {
                for i in (0..STEP).step_by(4096) {
                    c[i] = pass;
                }
            }
        }
    }
}

/// A fork bomb: every process forks forever and spins between forks. A failed fork is
/// retried after `sched_yield`.
pub fn fork() -> ! {
    loop {
        // SAFETY: the child only loops, calling fork and sched_yield (async-signal-safe),
        // never returning into Rust code that could observe the duplicated state.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            // SAFETY: no preconditions.
            unsafe { libc::sched_yield() };
        }
    }
}

/// Frames of `id` into the channel of bus `bus` to the CAN gateway ([`client_channels`]):
/// one every `every`, or as fast as the channel takes them (a full channel is retried
/// after a yield), `count` of them or forever. Each frame carries the time it was
/// written, ns since the Unix epoch (u64, little-endian), as its 8 data bytes: the
/// virtual bus's timestamps are of the same clock, so a dump of the bus gives each
/// frame's latency through the gateway. Returns the frames written.
pub fn can(
    bus: &str,
    id: CanId,
    every: Option<Duration>,
    count: Option<u64>,
) -> Result<u64, EndError> {
    let (_, to_gateway) = client_channels(bus)?;
    let mut tx = to_gateway.sender()?;
    let mut frame = [0u8; FRAME_SIZE];
    let flag = if id.is_extended() { 0x8000_0000 } else { 0 };
    frame[..4].copy_from_slice(&(id.raw() | flag).to_le_bytes());
    frame[4] = 8;
    let start = std::time::Instant::now();
    let mut sent = 0u64;
    while count.is_none_or(|n| sent < n) {
        if let Some(every) = every {
            let due = start + every * sent as u32;
            std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
        }
        frame[8..].copy_from_slice(&unix_ns().to_le_bytes());
        match tx.try_write(&join(0, 0, &frame)) {
            Ok(()) => sent += 1,
            Err(SendError::Full) => std::thread::yield_now(),
            Err(source) => {
                let bus = bus.to_string();
                return Err(EndError::Send { bus, source });
            }
        }
    }
    Ok(sent)
}

/// The time now, ns since the Unix epoch.
fn unix_ns() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_nanos() as u64)
}

/// Writes `file_bytes` with `fsync` to an unlinked file in `dir` and reads it back, forever.
pub fn io(dir: &Path, file_bytes: usize) -> std::io::Result<std::convert::Infallible> {
    let mut file = unlinked_file(dir)?;
    let block = vec![0x5au8; 64 * 1024];
    let mut back = vec![0u8; block.len()];
    loop {
        file.seek(SeekFrom::Start(0))?;
        let mut written = 0;
        while written < file_bytes {
            file.write_all(&block)?;
            written += block.len();
        }
        file.sync_all()?;
        file.seek(SeekFrom::Start(0))?;
        while file.read(&mut back)? > 0 {}
    }
}

/// A file in `dir` with no name: O_TMPFILE, or create-then-unlink where unsupported.
fn unlinked_file(dir: &Path) -> std::io::Result<std::fs::File> {
    let cdir = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())?;
    // SAFETY: open reads a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            cdir.as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd >= 0 {
        // SAFETY: fd was just opened and is owned by nobody else.
        return Ok(unsafe { std::fs::File::from_raw_fd(fd) });
    }
    let path = dir.join(format!("bulkhead-hog-io-{}", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}
