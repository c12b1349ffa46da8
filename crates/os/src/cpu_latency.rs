//! A bound on how long the CPUs may take to wake up, held while a run lasts.
//!
//! An idle CPU enters an idle state (C-state) that it takes time to leave; on a virtual
//! machine the deepest one is `halt`, which hands the vCPU back to the host, and waking
//! it costs a round trip through the host: a futex wake across the two vCPUs of this
//! project's VM took 28-31 µs at the median without a bound and 2 µs with it. A window
//! switch, a mode switch and a channel's wake-up each wait for such a wake-up.
//!
//! The bound is the kernel's PM QoS CPU latency request (Documentation/power/
//! pm_qos_interface.rst): a 32-bit value written to `/dev/cpu_dma_latency`, in force as
//! long as the descriptor stays open, withdrawn by the kernel when it is closed, also
//! when the process dies by SIGKILL: nothing is left behind. cyclictest holds the same
//! request (0) for its measurements. Its cost: idle CPUs poll instead of sleeping.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};

const DEVICE: &str = "/dev/cpu_dma_latency";

/// A PM QoS CPU latency request, withdrawn when dropped.
#[derive(Debug)]
pub struct CpuLatency {
    _file: File,
}

/// Asks the kernel to keep every CPU's wake-up latency at or under `us` microseconds
/// (0: idle CPUs poll) until the returned request is dropped. An error where the device
/// is absent or not writable (it is root's only).
pub fn request(us: u32) -> std::io::Result<CpuLatency> {
    let mut file = OpenOptions::new().write(true).open(DEVICE)?;
    file.write_all(&us.to_ne_bytes())?;
    Ok(CpuLatency { _file: file })
}

/// Whether process `pid` holds a request (has the device open).
pub fn held_by(pid: u32) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .any(|target| target == std::path::Path::new(DEVICE))
}

/// The bound in force now, in microseconds (the smallest request of all processes;
/// the kernel's "no bound" is 2,000,000,000).
pub fn current() -> std::io::Result<u32> {
    let mut bytes = [0u8; 4];
    File::open(DEVICE)?.read_exact(&mut bytes)?;
    Ok(u32::from_ne_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a process has the device open (cyclictest of another test holds 0).
    fn held_elsewhere() -> bool {
        let pids = std::fs::read_dir("/proc").into_iter().flatten().flatten();
        pids.filter_map(|p| p.file_name().to_str()?.parse().ok())
            .any(held_by)
    }

    /// The request is in force while held and withdrawn when dropped.
    #[test]
    #[ignore = "needs root: /dev/cpu_dma_latency"]
    fn a_request_holds_while_it_lives() {
        let before = current().expect("read the bound");
        if before <= 1000 {
            eprintln!("skipped: another process holds a bound of {before} us already");
            return;
        }
        let held = request(1000).expect("request a bound");
        assert!(current().unwrap() <= 1000);
        drop(held);
        let after = current().unwrap();
        assert!(
            after == before || held_elsewhere(),
            "{after} us still bound"
        );
    }
}
