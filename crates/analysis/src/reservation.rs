//! Reservations: SCHED_DEADLINE admission and the I/O reservation of Quest.

use crate::task::{Task, Time};
use serde::Serialize;

/// Linux's bandwidth fixed point: `to_ratio(period, runtime) = (runtime << 20) / period`
/// (kernel/sched/core.c, `BW_SHIFT = 20`).
pub const BW_SHIFT: u32 = 20;

/// The kernel's default cap: `sched_rt_runtime_us / sched_rt_period_us = 950000 / 1000000`.
pub const DEFAULT_CAP: (Time, Time) = (950_000, 1_000_000);

/// The kernel's fair server (Linux 6.12 and later, kernel/sched/deadline.c
/// `sched_init_dl_servers`: `dl_server_apply_params(dl_se, 50 * NSEC_PER_MSEC,
/// 1000 * NSEC_PER_MSEC, ...)`): a SCHED_DEADLINE server on every CPU that keeps 50 ms
/// of each second for SCHED_OTHER tasks, its bandwidth added to the root domain's
/// admission total. Reservations of tasks get the cap less this (measured on this
/// machine's 6.18 kernel: 90% of a CPU is admitted, 93% refused with EBUSY). On an
/// older kernel, which has no fair server, the analysis refuses what lies between the
/// two, a margin on the safe side.
pub const FAIR_SERVER: (Time, Time) = (50_000, 1_000_000);

/// What the kernel keeps of every CPU before SCHED_DEADLINE admits tasks: the bandwidth
/// cap (`sched_rt_runtime_us / sched_rt_period_us`) and the fair server (runtime,
/// period; any unit, only their ratio counts), whose share the kernel counts in the same
/// admission total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    pub cap: (Time, Time),
    pub fair_server: (Time, Time),
}

/// The kernel's defaults: [`DEFAULT_CAP`] and [`FAIR_SERVER`].
pub const DEFAULT_KERNEL: Kernel = Kernel {
    cap: DEFAULT_CAP,
    fair_server: FAIR_SERVER,
};

impl Kernel {
    /// The default fair server under `cap`.
    pub fn with_cap(cap: (Time, Time)) -> Kernel {
        Kernel {
            cap,
            ..DEFAULT_KERNEL
        }
    }

    /// What SCHED_DEADLINE reservations of tasks may take of one CPU, in the kernel's
    /// fixed point: the cap less the fair server's share; a cap of the whole period
    /// (`sched_rt_runtime_us = -1`) is no admission control at all.
    pub fn task_bandwidth(self) -> u64 {
        let (runtime, period) = self.fair_server;
        let whole = to_ratio(self.cap.1, self.cap.0);
        match self.cap.0 >= self.cap.1 {
            true => whole,
            false => whole.saturating_sub(to_ratio(period, runtime)),
        }
    }

    /// [`Kernel::task_bandwidth`] in ppm of a CPU (rounded down), as the mode table
    /// counts a pool's capacity.
    pub fn cap_ppm(self) -> bulkhead_modes::Ppm {
        let ppm = |(runtime, period): (Time, Time)| {
            (runtime as u128 * CPU as u128 / period.max(1) as u128) as bulkhead_modes::Ppm
        };
        match self.cap.0 >= self.cap.1 {
            true => ppm(self.cap),
            false => ppm(self.cap).saturating_sub(ppm(self.fair_server)),
        }
    }
}

/// A SCHED_DEADLINE reservation (runtime, deadline, period), all in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Reservation {
    pub runtime: Time,
    pub deadline: Time,
    pub period: Time,
}

/// Why the kernel would refuse a reservation set on one CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Admission {
    pub admitted: bool,
    /// Sum of bandwidths in the kernel's fixed point (`1 << 20` = one CPU).
    pub total_bw: u64,
    /// The cap in the same unit.
    pub cap_bw: u64,
    /// Index of the first reservation that breaks `runtime <= deadline <= period`.
    pub invalid: Option<usize>,
}

/// `(runtime << 20) / period`, as the kernel's `to_ratio`.
pub fn to_ratio(period: Time, runtime: Time) -> u64 {
    if period == 0 {
        return 1 << BW_SHIFT;
    }
    ((runtime as u128) << BW_SHIFT).div_euclid(period as u128) as u64
}

/// SCHED_DEADLINE admission of `reservations` on `cpus` CPUs of one root domain, as the
/// kernel enforces it (Documentation/scheduler/sched-deadline.rst, Sec. 5 "Bandwidth
/// management"; kernel/sched/deadline.c `__dl_overflow`): each reservation must satisfy
/// `0 < runtime <= deadline <= period`, and `Σ to_ratio(period, runtime) <= cpus ×`
/// [`Kernel::task_bandwidth`] (the cap less the fair servers' shares, which the kernel
/// counts in the same total). With one CPU per partition's cpuset this is the per-CPU
/// cap.
pub fn admit(reservations: &[Reservation], cpus: u64, kernel: Kernel) -> Admission {
    let invalid = reservations
        .iter()
        .position(|r| r.runtime == 0 || r.runtime > r.deadline || r.deadline > r.period);
    let total_bw = reservations
        .iter()
        .map(|r| to_ratio(r.period, r.runtime))
        .sum();
    let cap_bw = cpus * kernel.task_bandwidth();
    Admission {
        admitted: invalid.is_none() && total_bw <= cap_bw,
        total_bw,
        cap_bw,
        invalid,
    }
}

/// The reservation a task runs under: runtime = C, deadline = D, period = T.
pub fn reservation_of(task: &Task) -> Reservation {
    Reservation {
        runtime: task.wcet,
        deadline: task.deadline,
        period: task.period,
    }
}

/// The I/O reservation for the task it serves, as Quest's I/O VCPUs: an I/O VCPU of
/// utilization `U_io = io_num / io_den` that serves a Main VCPU (task) of period T runs
/// with budget `U_io × T` and period T (Danish, Li, West, "Virtual-CPU Scheduling in the
/// Quest Operating System", RTAS 2011, I/O VCPUs; Boomerang, Sec. II-A: budget
/// `U_IO × T_Main`, period `T_Main`; DriveOS, ACM TECS 2023, Sec. 4.1: the bottom-half
/// thread gets the waiting task's period and `U_io ×` that period as budget).
/// The budget is rounded up to a whole tick so the reservation never under-provisions.
pub fn io_reservation(served: &Task, io_num: Time, io_den: Time) -> Task {
    let budget = (served.period as u128 * io_num as u128).div_ceil(io_den as u128) as Time;
    Task::new(budget.max(1), served.period, served.period)
}

/// One CPU in ppm.
pub const CPU: bulkhead_modes::Ppm = bulkhead_modes::CPU_PPM;

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's 95% cap less its fair server's 5%: 90% of a CPU (on this machine
    /// 0.9 ms every 1 ms is admitted, 0.93 ms refused); with no limit (a cap of the
    /// whole period) everything is.
    #[test]
    fn kernel_cap_at_95_percent_less_the_fair_server() {
        let ms = 1_000_000;
        let r = |rt: Time, p: Time| Reservation {
            runtime: rt,
            deadline: p,
            period: p,
        };
        assert!(
            admit(
                &[r(40 * ms / 100, ms), r(50 * ms / 100, ms)],
                1,
                DEFAULT_KERNEL
            )
            .admitted
        );
        assert!(!admit(&[r(93 * ms / 100, ms)], 1, DEFAULT_KERNEL).admitted);
        assert!(admit(&[r(99 * ms / 100, ms)], 1, Kernel::with_cap((ms, ms))).admitted);
        let over = admit(
            &[r(50 * ms / 100, ms), r(46 * ms / 100, ms)],
            1,
            DEFAULT_KERNEL,
        );
        assert!(!over.admitted);
        assert!(over.total_bw > over.cap_bw);
        assert!(
            admit(
                &[r(50 * ms / 100, ms), r(46 * ms / 100, ms)],
                2,
                DEFAULT_KERNEL
            )
            .admitted
        );
        let bad = Reservation {
            runtime: 3,
            deadline: 2,
            period: 10,
        };
        assert_eq!(admit(&[bad], 1, DEFAULT_KERNEL).invalid, Some(0));
    }

    /// The machine's fair server counts, not the default: disabled (runtime 0, as
    /// real-time set-ups often write it) 0.93 ms every 1 ms is admitted under the 95% cap;
    /// at 100 ms every second, 0.88 ms is refused (85% is left).
    #[test]
    fn the_machines_fair_server_is_deducted_not_the_default() {
        let ms = 1_000_000;
        let r = |rt: Time| Reservation {
            runtime: rt,
            deadline: ms,
            period: ms,
        };
        let kernel = |fair_server| Kernel {
            cap: DEFAULT_CAP,
            fair_server,
        };
        assert!(!admit(&[r(93 * ms / 100)], 1, DEFAULT_KERNEL).admitted);
        assert!(admit(&[r(93 * ms / 100)], 1, kernel((0, 1_000))).admitted);
        assert!(admit(&[r(88 * ms / 100)], 1, DEFAULT_KERNEL).admitted);
        assert!(!admit(&[r(88 * ms / 100)], 1, kernel((100, 1_000))).admitted);
        assert_eq!(kernel((100, 1_000)).cap_ppm(), 850_000);
        assert_eq!(DEFAULT_KERNEL.cap_ppm(), 900_000);
    }

    /// DriveOS TECS 2023, Sec. 4.1 worked example: an I/O VCPU with U_io = 10% serving
    /// a task of period 1 ms gets a 100 µs budget every 1 ms.
    #[test]
    fn io_budget_follows_the_served_task() {
        let served = Task::new(200_000, 1_000_000, 1_000_000);
        let io = io_reservation(&served, 1, 10);
        assert_eq!((io.wcet, io.period), (100_000, 1_000_000));
    }
}
