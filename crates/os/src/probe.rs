//! The platform's floor, measured (`bulkhead probe`, docs/platform.md): per CPU, how late
//! a periodic timer wake-up of the highest real-time priority comes, the way cyclictest
//! (rt-tests) measures it: a thread per CPU, pinned and at SCHED_FIFO, sleeps until an
//! absolute CLOCK_MONOTONIC instant every interval and records how long after it it
//! runs. What the thread cannot see, it cannot run either: the latencies are the
//! kernel's wake-up path, non-preemptible sections and, in a VM, the host taking the
//! vCPU away (a stall). With SCHED_DEADLINE the threads are not pinned (the kernel
//! refuses a deadline task narrower than its root domain) and each wake-up counts for
//! the CPU it ran on.

use crate::clock::{now_ns, sleep_until};
use crate::error::{Error, Result};
use crate::sched::{self, DeadlineParams, Policy};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub type Nanos = u64;

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// CPUs to probe.
    pub cpus: Vec<u32>,
    /// Time between wake-ups.
    pub interval: Nanos,
    /// How long to measure.
    pub duration: Nanos,
    pub policy: ProbePolicy,
    /// CPUs that run a load beside the probes (a memory-walking hog at SCHED_OTHER,
    /// below them).
    pub load: Vec<u32>,
}

/// The policy of the probing threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbePolicy {
    /// SCHED_FIFO at this priority (cyclictest's `-p`).
    Fifo(u32),
    /// SCHED_DEADLINE with a runtime of a tenth of the interval (at most 100 µs) every
    /// interval.
    Deadline,
}

/// The wake-up latencies seen on one CPU, ns, in the order they came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Samples {
    pub cpu: u32,
    pub latencies: Vec<Nanos>,
}

/// Upper ends of the stall histogram's buckets, ns (the last bucket has none).
pub const BUCKETS: [Nanos; 8] = [
    10_000, 100_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000, 50_000_000,
];

/// One CPU's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub cpu: u32,
    pub samples: u64,
    pub min_ns: Nanos,
    pub median_ns: Nanos,
    pub p99_ns: Nanos,
    pub p999_ns: Nanos,
    pub max_ns: Nanos,
    /// Wake-ups later than one interval: a periodic task of this interval would have
    /// missed a release.
    pub missed: u64,
    /// Wake-ups per latency range: `counts[i]` below `BUCKETS[i]` (and at least the
    /// bucket before), the last at least `BUCKETS[7]`.
    pub histogram: [u64; BUCKETS.len() + 1],
}

/// The `q`-th quantile (0..=1) of sorted `values`, nearest rank.
fn quantile(sorted: &[Nanos], q: f64) -> Nanos {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The figures of `s` for wake-ups every `interval`.
pub fn summarize(s: &Samples, interval: Nanos) -> Summary {
    let mut sorted = s.latencies.clone();
    sorted.sort_unstable();
    let mut histogram = [0u64; BUCKETS.len() + 1];
    for &l in &sorted {
        histogram[BUCKETS.partition_point(|&b| b <= l)] += 1;
    }
    Summary {
        cpu: s.cpu,
        samples: sorted.len() as u64,
        min_ns: sorted.first().copied().unwrap_or(0),
        median_ns: quantile(&sorted, 0.5),
        p99_ns: quantile(&sorted, 0.99),
        p999_ns: quantile(&sorted, 0.999),
        max_ns: sorted.last().copied().unwrap_or(0),
        missed: sorted.iter().filter(|&&l| l > interval).count() as u64,
        histogram,
    }
}

/// Measures `spec`: starts the load, one probing thread per CPU, waits for them and
/// stops the load. Memory is locked first (`mlockall`, as cyclictest's `-m`) so that no
/// page fault adds to a latency. Needs CAP_SYS_NICE (root) for the real-time policy.
pub fn measure(spec: &Spec) -> Result<Vec<Samples>> {
    if spec.interval == 0 || spec.cpus.is_empty() {
        return Err(Error::Invalid(
            "a probe needs a positive interval and at least one CPU".into(),
        ));
    }
    // SAFETY: mlockall takes flags only; failing (no privilege) leaves memory unlocked.
    unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = spec
        .load
        .iter()
        .map(|&cpu| {
            let stop = stop.clone();
            std::thread::spawn(move || hog(cpu, &stop))
        })
        .collect();
    let start = now_ns() + 10 * spec.interval.max(1_000_000);
    let probes: Vec<_> = spec
        .cpus
        .iter()
        .map(|&cpu| {
            let spec = spec.clone();
            std::thread::spawn(move || probe(cpu, &spec, start))
        })
        .collect();
    let results: Vec<Result<Vec<(u32, Nanos)>>> = probes
        .into_iter()
        .map(|p| p.join().expect("a probe thread does not panic"))
        .collect();
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        let _ = h.join();
    }
    let mut out: Vec<Samples> = spec
        .cpus
        .iter()
        .map(|&cpu| Samples {
            cpu,
            latencies: Vec::new(),
        })
        .collect();
    for r in results {
        for (cpu, latency) in r? {
            match out.iter_mut().find(|s| s.cpu == cpu) {
                Some(s) => s.latencies.push(latency),
                None => out.push(Samples {
                    cpu,
                    latencies: vec![latency],
                }),
            }
        }
    }
    Ok(out)
}

/// One probing thread: wake-ups every `spec.interval` from `start` for `spec.duration`;
/// each latency with the CPU it ran on.
fn probe(cpu: u32, spec: &Spec, start: Nanos) -> Result<Vec<(u32, Nanos)>> {
    let policy = match spec.policy {
        ProbePolicy::Fifo(priority) => {
            pin(cpu)?;
            Policy::Fifo { priority }
        }
        ProbePolicy::Deadline => {
            let runtime = (spec.interval / 10).clamp(1_000, 100_000);
            Policy::Deadline(DeadlineParams::new(runtime, spec.interval, spec.interval)?)
        }
    };
    sched::set(0, &policy)?;
    let count = (spec.duration / spec.interval) as usize;
    let mut out = Vec::with_capacity(count);
    let mut next = start;
    for _ in 0..count {
        sleep_until(next);
        let late = now_ns().saturating_sub(next);
        out.push((current_cpu().unwrap_or(cpu), late));
        next += spec.interval;
    }
    sched::set(0, &Policy::Other { nice: 0 })?;
    Ok(out)
}

/// The load on `cpu` until `stop`: writes over 8 MiB, a cache line at a time, at
/// SCHED_OTHER (so that it also moves memory, not only takes the CPU).
fn hog(cpu: u32, stop: &AtomicBool) {
    if pin(cpu).is_err() {
        return;
    }
    let mut buf = vec![0u8; 8 << 20];
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..4096 {
            buf[i] = buf[i].wrapping_add(1);
            i = (i + 64) % buf.len();
        }
    }
    std::hint::black_box(&buf);
}

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: u32) -> Result<()> {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(Error::Invalid(format!("CPU {cpu} is out of range")));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it for cpu < CPU_SETSIZE.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    match r {
        0 => Ok(()),
        _ => Err(Error::os(
            format!("pinning a thread to CPU {cpu}"),
            std::io::Error::last_os_error(),
            "the CPU must be online and in this process's cpuset",
        )),
    }
}

/// The CPU the calling thread runs on.
fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments.
    u32::try_from(unsafe { libc::sched_getcpu() }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_of_a_known_sample() {
        // 1,000 wake-ups: 990 of 5 µs, 9 of 3 ms, one of 27 ms (the vehicle benchmark's
        // stall of CPU 0), every 1 ms.
        let mut latencies = vec![5_000; 990];
        latencies.extend([3_000_000; 9]);
        latencies.push(27_000_000);
        let s = summarize(&Samples { cpu: 0, latencies }, 1_000_000);
        assert_eq!((s.samples, s.min_ns, s.median_ns), (1000, 5_000, 5_000));
        assert_eq!(
            (s.p99_ns, s.p999_ns, s.max_ns),
            (5_000, 3_000_000, 27_000_000)
        );
        assert_eq!(s.missed, 10);
        assert_eq!(s.histogram, [990, 0, 0, 0, 9, 0, 0, 1, 0]);
        assert_eq!(quantile(&[], 0.5), 0);
    }
}
