//! The ways a window switch can stop and resume a partition, measured side by side
//! without the rest of the supervisor: a loop of this program (SCHED_FIFO 40, like
//! bulkhead's supervisor, when it may) wakes every W ms as the supervisor does (an epoll
//! wait on a timerfd armed at the absolute time) and switches spins pinned to CPU 1 with
//! one mechanism:
//!
//! - `v1`: the v1 freezer (`freezer.state` FROZEN / THAWED), in the freezer hierarchy,
//!   beside an empty cgroup kept frozen meanwhile as bulkhead keeps one (its instance's
//!   `anchor`): the kernel's count of frozen v1 cgroups then never falls to 0, whose
//!   every crossing patches the kernel's code (`freezer_active`, about 200 µs);
//! - `v2`: the v2 `cgroup.freeze` (1 / 0), in the cgroup2 hierarchy (on a hybrid host
//!   its `unified` mount);
//! - `sigstop`: SIGSTOP / SIGCONT to the process;
//! - `cpuset`: no stop at all: the outgoing spin is moved to a cpuset on CPU 0 and the
//!   incoming one to CPU 1 (v1 cpuset hierarchy). The outgoing one keeps running on
//!   another CPU, so no time is taken from it: only the switcher's time is reported;
//! - `none`: nothing (a partition granted again at the instant its window ends).
//!
//! Two scenarios: `same` (one spin stopped and resumed at every boundary, what a
//! partition alone in a repeating window costs) and `alternate` (two spins with the
//! same work, one running per window: the outgoing stopped, the incoming resumed),
//! the latter both `stop first` and `resume first` (thaw the next, then freeze the
//! last [`HANDOVER_FREEZE_DELAY`] later, as bulkhead hands one CPU over). Overhead per
//! switch = (wall time of the first spin to finish - spins x baseline) / switches
//! meanwhile, the baseline run just before; also the switcher's
//! own time per switch (the two writes or signals, and the wait between them).

use crate::{baseline, baseline_of, first_spin_ns, median, min, switch_losses};
use bulkhead_os::clock::{now_ns, spin_for};
use bulkhead_os::event::{Epoll, Timer};
use bulkhead_os::proc::kill;
use bulkhead_runtime::HANDOVER_FREEZE_DELAY;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 5;
const WINDOW_MS: u64 = 1;

#[derive(Clone, Copy, PartialEq)]
enum Mechanism {
    V1,
    V2,
    Sigstop,
    Cpuset,
    None,
}

impl Mechanism {
    fn name(self) -> &'static str {
        match self {
            Mechanism::V1 => "v1",
            Mechanism::V2 => "v2",
            Mechanism::Sigstop => "sigstop",
            Mechanism::Cpuset => "cpuset",
            Mechanism::None => "none",
        }
    }
}

/// The cgroup hierarchies of this host the mechanisms use.
struct Mounts {
    v1_freezer: Option<PathBuf>,
    v1_cpuset: Option<PathBuf>,
    v2: Option<PathBuf>,
}

fn mounts() -> Mounts {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut m = Mounts {
        v1_freezer: None,
        v1_cpuset: None,
        v2: None,
    };
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let Some(dash) = f.iter().position(|&x| x == "-") else {
            continue;
        };
        let (mount, fstype, opts) = (f[4], f[dash + 1], f.get(dash + 3).unwrap_or(&""));
        let has = |c: &str| opts.split(',').any(|o| o == c);
        match fstype {
            "cgroup2" if m.v2.is_none() => m.v2 = Some(PathBuf::from(mount)),
            "cgroup" if has("freezer") => m.v1_freezer = Some(PathBuf::from(mount)),
            "cgroup" if has("cpuset") => m.v1_cpuset = Some(PathBuf::from(mount)),
            _ => {}
        }
    }
    m
}

/// A cgroup created for the benchmark, removed on drop (its processes are gone by then).
struct Group(PathBuf);

impl Group {
    fn new(base: &Path, name: &str) -> Group {
        let dir = base.join(name);
        fs::create_dir(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        Group(dir)
    }

    fn write(&self, file: &str, value: &str) {
        let path = self.0.join(file);
        fs::write(&path, value).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// The file kept open for switches, as bulkhead keeps each freeze file open.
    fn open(&self, file: &str) -> fs::File {
        fs::OpenOptions::new()
            .write(true)
            .open(self.0.join(file))
            .expect("open a cgroup file")
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for _ in 0..1000 {
            if fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Stops or resumes a spin.
type Action = Box<dyn FnMut()>;

/// One spin under switching: how to stop and resume it.
struct Target {
    child: Child,
    stop: Action,
    resume: Action,
    _groups: Vec<Group>,
}

fn writer(mut file: fs::File, value: &'static [u8]) -> Action {
    Box::new(move || file.write_all(value).expect("cgroup write"))
}

fn signaller(pid: i32, signal: i32) -> Action {
    Box::new(move || {
        let _ = kill(pid, signal);
    })
}

/// Starts a spin of `work` on CPU 1 under `mechanism` (`scratch` names its cgroups);
/// `spin_args`: the spin's arguments before the work (`--gaps TAG`, or none).
fn target(
    spin: &str,
    spin_args: &[String],
    work: u64,
    mechanism: Mechanism,
    mounts: &Mounts,
    scratch: &str,
) -> Target {
    // Pinned to CPU 1 by taskset, or under `cpuset` by its cpuset alone: a taskset
    // still setting its affinity when the first switch takes CPU 1 from its cpuset
    // would fail (EINVAL) and leave no spin.
    let mut command = match mechanism {
        Mechanism::Cpuset => Command::new(spin),
        _ => {
            let mut c = Command::new("taskset");
            c.args(["-c", "1", spin]);
            c
        }
    };
    let child = command
        .args(spin_args)
        .arg(work.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the spin");
    let pid = child.id() as i32;
    let mut groups = Vec::new();
    let (stop, resume): (Action, Action) = match mechanism {
        Mechanism::V1 | Mechanism::V2 => {
            let (base, file, on, off): (_, _, &[u8], &[u8]) = match mechanism {
                Mechanism::V1 => (&mounts.v1_freezer, "freezer.state", b"FROZEN", b"THAWED"),
                _ => (&mounts.v2, "cgroup.freeze", b"1", b"0"),
            };
            let g = Group::new(base.as_ref().expect("mounted"), scratch);
            g.write("cgroup.procs", &pid.to_string());
            let (a, b) = (g.open(file), g.open(file));
            groups.push(g);
            (writer(a, on), writer(b, off))
        }
        Mechanism::Sigstop => (signaller(pid, libc::SIGSTOP), signaller(pid, libc::SIGCONT)),
        Mechanism::Cpuset => {
            let base = mounts.v1_cpuset.as_ref().expect("mounted");
            let g = Group::new(base, scratch);
            g.write(
                "cpuset.mems",
                fs::read_to_string(base.join("cpuset.mems")).unwrap().trim(),
            );
            g.write("cpuset.cpus", "1");
            g.write("cgroup.procs", &pid.to_string());
            let (a, b) = (g.open("cpuset.cpus"), g.open("cpuset.cpus"));
            groups.push(g);
            (writer(a, b"0"), writer(b, b"1"))
        }
        Mechanism::None => (Box::new(|| ()), Box::new(|| ())),
    };
    Target {
        child,
        stop,
        resume,
        _groups: groups,
    }
}

/// Waits until CLOCK_MONOTONIC time `at_ns` as the supervisor does: an epoll wait on a
/// timerfd armed at that absolute time.
fn wait_until(timer: &Timer, epoll: &mut Epoll, at_ns: u64) {
    timer.set(Some(at_ns)).expect("timerfd_settime");
    while epoll.wait(-1).expect("epoll_wait").is_empty() {}
}

fn exited(child: &mut Child) -> bool {
    child.try_wait().expect("wait").is_some()
}

/// Switches the spins until one exits; `resume_first`: resume the incoming one
/// before stopping the outgoing one. Returns the wall time of the first to finish,
/// the median time the switcher spent in one switch (both ns), and the spins' output
/// (all of it: the others are resumed and run to their end); `None` if the spin failed
/// (CPU 1 taken exclusively by another cgroup meanwhile, for instance).
fn switch(mut targets: Vec<Target>, resume_first: bool) -> Option<(f64, f64, String)> {
    for t in targets.iter_mut().skip(1) {
        (t.stop)();
    }
    let timer = Timer::new().expect("timerfd_create");
    let mut epoll = Epoll::new().expect("epoll_create");
    epoll.add(timer.fd(), 0).expect("epoll_ctl");
    let period = WINDOW_MS * 1_000_000;
    let mut at = now_ns() + period;
    let mut running = 0;
    let mut finished = None;
    let mut spent = Vec::new();
    while finished.is_none() {
        wait_until(&timer, &mut epoll, at);
        at += period;
        let next = (running + 1) % targets.len();
        let start = Instant::now();
        if resume_first && next != running {
            (targets[next].resume)();
            spin_for(HANDOVER_FREEZE_DELAY);
            (targets[running].stop)();
        } else {
            (targets[running].stop)();
            (targets[next].resume)();
        }
        spent.push(start.elapsed().as_nanos() as f64);
        running = next;
        finished = targets.iter_mut().position(|t| exited(&mut t.child));
    }
    for t in &mut targets {
        (t.resume)();
    }
    let mut out = Vec::new();
    for t in &mut targets {
        let stdout = t.child.stdout.as_mut().expect("piped");
        stdout.read_to_end(&mut out).expect("spin output");
        let _ = t.child.wait();
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let ns = Some(first_spin_ns(text.as_bytes())).filter(|t| t.is_finite());
    ns.map(|ns| (ns, median(spent), text))
}

/// One run of a scenario: the overhead per switch, the switcher's time per switch and,
/// for spins that printed their gaps, the median CPU time a switch took from the work
/// (all µs).
type Figures = (f64, f64, Option<f64>);

/// One scenario under `m`, RUNS times. Two spins or more print their gaps
/// (`bulkhead-spin --gaps`), their baseline too.
fn measure(spin: &str, work: u64, m: Mechanism, spins: usize, resume_first: bool) -> Vec<Figures> {
    let mounts = mounts();
    let gaps = spins > 1;
    let work_arg = work.to_string();
    (0..RUNS)
        .filter_map(|run| {
            let base = if gaps {
                baseline_of(&[spin, "--gaps", "base", &work_arg])
            } else {
                baseline(spin, work)
            };
            let targets = (0..spins)
                .map(|k| {
                    let scratch = format!("{}-switch-{run}-{k}", instance());
                    let args = if gaps {
                        vec!["--gaps".into(), k.to_string()]
                    } else {
                        vec![]
                    };
                    target(spin, &args, work, m, &mounts, &scratch)
                })
                .collect();
            let _anchor = (m == Mechanism::V1).then(|| anchor(&mounts, run));
            let (t, spent, out) = switch(targets, resume_first)?;
            let switches = t / (WINDOW_MS as f64 * 1e6);
            let (lost, _) = switch_losses(&out, WINDOW_MS * 1_000_000);
            let lost = (!lost.is_empty())
                .then(|| median(lost.iter().map(|&ns| ns as f64 / 1e3).collect()));
            Some((
                (t - spins as f64 * base) / switches / 1e3,
                spent / 1e3,
                lost,
            ))
        })
        .collect()
}

/// This benchmark's instance name: its cgroups are named as a run's instance
/// (`bulkhead-PID-START-N-switch-...`), so that `bulkhead clean` and the next run's start
/// remove what a killed benchmark left behind.
fn instance() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(bulkhead_runtime::leftovers::instance_name)
}

/// An empty v1 freezer cgroup, frozen until dropped (see the module's `v1`).
fn anchor(mounts: &Mounts, run: usize) -> Group {
    let base = mounts.v1_freezer.as_ref().expect("mounted");
    let name = format!("{}-switch-{run}-anchor", instance());
    let g = Group::new(base, &name);
    g.write("freezer.state", "FROZEN");
    g
}

/// This thread under SCHED_FIFO 40 with SCHED_RESET_ON_FORK, as bulkhead's supervisor
/// runs (if allowed), until dropped: the spins it starts keep the normal policy, as
/// bulkhead's processes do (without the reset they ran at FIFO 40 too, so that a thawed
/// spin could not preempt the running one).
fn realtime() -> Option<bulkhead_os::sched::Realtime> {
    bulkhead_os::sched::Realtime::enter(40).ok()
}

/// The floor of the alternating case: the median CPU time lost per switch (µs, median
/// of [`RUNS`] runs) when this program's own loop switches the same two spins with the
/// mechanism, order and placement `bulkhead run` uses for them (the v1 freezer where it
/// is mounted, else v2; one CPU handed over, so the next is thawed first and the last
/// frozen [`HANDOVER_FREEZE_DELAY`] later; the switcher on CPU 0, off the spins' CPU 1,
/// where bulkhead starts its supervisor); with the mechanism's name.
pub fn floor(spin: &str, work: u64) -> Option<(f64, &'static str)> {
    let _realtime = realtime();
    let m = match mounts().v1_freezer {
        Some(_) => Mechanism::V1,
        None => Mechanism::V2,
    };
    let all = bulkhead_os::sched::own_cpus();
    // On failure the switcher stays where it is (the floor is then taken from there).
    let _ = bulkhead_os::sched::set_affinity(0, [0]);
    let losts: Vec<f64> = measure(spin, work, m, 2, true)
        .iter()
        .filter_map(|r| r.2)
        .collect();
    let _ = bulkhead_os::sched::set_affinity(0, all);
    (!losts.is_empty()).then(|| (median(losts), m.name()))
}

/// Measures every mechanism this host has; returns the JSON members.
pub fn main(spin: &str, work: u64) -> Vec<String> {
    let _realtime = realtime();
    let m = mounts();
    let mut available = vec![Mechanism::None, Mechanism::Sigstop];
    if m.v1_freezer.is_some() {
        available.push(Mechanism::V1);
    }
    if m.v2.is_some() {
        available.push(Mechanism::V2);
    }
    if m.v1_cpuset.is_some() {
        available.push(Mechanism::Cpuset);
    }
    println!(
        "mechanisms alone ({WINDOW_MS} ms windows, overhead per switch, min / median of {RUNS}):"
    );
    let mut json = Vec::new();
    let mut row = |scenario: &str, spins: usize, mech: Mechanism, resume_first: bool| {
        let runs = measure(spin, work, mech, spins, resume_first);
        if runs.is_empty() {
            println!("  {scenario:<24} {:<8} failed", mech.name());
            return;
        }
        let us: Vec<f64> = runs.iter().map(|r| r.0).collect();
        let spent = median(runs.iter().map(|r| r.1).collect());
        let (lo, med) = (min(&us), median(us.clone()));
        let losts: Vec<f64> = runs.iter().filter_map(|r| r.2).collect();
        let lost = (!losts.is_empty()).then(|| median(losts));
        let (lost_shown, lost_json) = lost.map_or((String::new(), String::new()), |l| {
            (
                format!("; CPU time lost per switch {l:6.2} us"),
                format!(",\"gap_median_us\":{l:.3}"),
            )
        });
        if mech == Mechanism::Cpuset {
            // The outgoing spin runs on: no time is taken from it, only the writes count.
            println!(
                "  {scenario:<24} {:<8} (does not stop the outgoing spin) switcher {spent:6.2} us",
                mech.name()
            );
            json.push(format!(
                "\"{scenario}/cpuset\":{{\"switcher_us\":{spent:.3}}}"
            ));
            return;
        }
        println!(
            "  {scenario:<24} {:<8} min {lo:8.2} us, median {med:8.2} us; switcher {spent:6.2} us{lost_shown}",
            mech.name()
        );
        json.push(format!(
            "\"{scenario}/{}\":{{\"min_us\":{lo:.3},\"median_us\":{med:.3},\"switcher_us\":{spent:.3}{lost_json}}}",
            mech.name()
        ));
    };
    for &mech in &available {
        if mech != Mechanism::Cpuset {
            row("same", 1, mech, false);
        }
    }
    for &mech in &available {
        if mech != Mechanism::None {
            row("alternate stop first", 2, mech, false);
        }
    }
    for &mech in &available {
        if matches!(mech, Mechanism::V1 | Mechanism::V2) {
            row("alternate resume first", 2, mech, true);
        }
    }
    json
}
