//! A tiny exact reference scheduler: event-driven simulation of synchronous periodic
//! releases on one processor, preemptive fixed priority or EDF, jobs never aborted.
//! Used only to hold the analysis against an independent computation.

use bulkhead_analysis::task::{hyperperiod, Task, Time};

struct Job {
    task: usize,
    release: Time,
    deadline: Time,
    left: Time,
}

/// Per task (indexed like `tasks`), the largest response time of its jobs released in
/// `[0, H)`, and whether any of them missed its deadline. `rank[i]` orders fixed priority
/// (lower = higher); `edf` switches to earliest deadline first (ties: lower task index).
/// Precondition: U <= 1 (the schedule from 0 then repeats every hyperperiod H).
pub fn simulate(tasks: &[Task], rank: &[usize], edf: bool) -> (Vec<Time>, bool) {
    let h = hyperperiod(tasks).expect("small hyperperiod");
    let mut next: Vec<Time> = vec![0; tasks.len()];
    let mut active: Vec<Job> = Vec::new();
    let mut worst = vec![0; tasks.len()];
    let mut missed = false;
    let mut now = 0;
    let mut pending_in_window: usize = 0;
    loop {
        for (i, t) in tasks.iter().enumerate() {
            while next[i] <= now {
                if next[i] < h {
                    pending_in_window += 1;
                }
                active.push(Job {
                    task: i,
                    release: next[i],
                    deadline: next[i] + t.deadline,
                    left: t.wcet,
                });
                next[i] += t.period;
            }
        }
        if pending_in_window == 0 && now >= h {
            return (worst, missed);
        }
        let release = *next.iter().min().expect("tasks");
        let Some(pick) = pick(&active, rank, edf) else {
            now = release;
            continue;
        };
        let run = active[pick].left.min(release - now);
        now += run;
        active[pick].left -= run;
        if active[pick].left == 0 {
            let job = active.swap_remove(pick);
            if job.release < h {
                pending_in_window -= 1;
                worst[job.task] = worst[job.task].max(now - job.release);
                missed |= now > job.deadline;
            }
        }
    }
}

fn pick(active: &[Job], rank: &[usize], edf: bool) -> Option<usize> {
    (0..active.len()).min_by_key(|&k| {
        let j = &active[k];
        let key = if edf {
            j.deadline
        } else {
            rank[j.task] as Time
        };
        // Within a task, the older job first (jobs of one task run in order).
        (key, rank[j.task] as Time, j.release)
    })
}

/// Global preemptive EDF on `cpus` identical CPUs, synchronous periodic release: whether
/// any job released in `[0, H)` misses its deadline (U <= cpus).
pub fn global_edf_misses(tasks: &[Task], cpus: usize) -> bool {
    let h = hyperperiod(tasks).expect("small hyperperiod");
    let mut next: Vec<Time> = vec![0; tasks.len()];
    let mut active: Vec<Job> = Vec::new();
    let mut now = 0;
    loop {
        for (i, t) in tasks.iter().enumerate() {
            while next[i] <= now && next[i] < h {
                active.push(Job {
                    task: i,
                    release: next[i],
                    deadline: next[i] + t.deadline,
                    left: t.wcet,
                });
                next[i] += t.period;
            }
        }
        if active.iter().any(|j| j.deadline <= now && j.left > 0) {
            return true;
        }
        if active.is_empty() && next.iter().all(|&n| n >= h) {
            return false;
        }
        active.sort_by_key(|j| (j.deadline, j.task, j.release));
        let release = next
            .iter()
            .copied()
            .filter(|&n| n < h)
            .min()
            .unwrap_or(Time::MAX);
        let running = active.len().min(cpus);
        let Some(step) = active[..running].iter().map(|j| j.left).min() else {
            now = release;
            continue;
        };
        let step = step.min(release - now);
        now += step;
        for j in &mut active[..running] {
            j.left -= step;
        }
        if active.iter().any(|j| j.left == 0 && now > j.deadline) {
            return true;
        }
        active.retain(|j| j.left > 0);
    }
}

/// Fixed priority, synchronous release at 0, on a processor that is available only at
/// the ticks where `available(t)` holds; unit-tick simulation. Returns the largest response
/// of each task over the jobs released in `[0, horizon)` (all of them are run to completion).
pub fn simulate_fp_on_supply(
    tasks: &[Task],
    rank: &[usize],
    horizon: Time,
    available: impl Fn(Time) -> bool,
) -> Vec<Time> {
    let mut active: Vec<Job> = Vec::new();
    let mut worst = vec![0; tasks.len()];
    let mut pending = 0usize;
    let mut now: Time = 0;
    loop {
        for (i, t) in tasks.iter().enumerate() {
            if now < horizon && now % t.period == 0 {
                pending += 1;
                active.push(Job {
                    task: i,
                    release: now,
                    deadline: now + t.deadline,
                    left: t.wcet,
                });
            }
        }
        if pending == 0 && now >= horizon {
            return worst;
        }
        if available(now) {
            if let Some(k) = pick(&active, rank, false) {
                active[k].left -= 1;
                if active[k].left == 0 {
                    let job = active.swap_remove(k);
                    pending -= 1;
                    worst[job.task] = worst[job.task].max(now + 1 - job.release);
                }
            }
        }
        now += 1;
    }
}
