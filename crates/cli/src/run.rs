//! `bulkhead run`: execute a system description's window schedule on real cgroups.

use crate::common::{load_system_on, positive_duration, this_machine};
use crate::fail::{error_line, fail, run_failed, INVALID};
use bulkhead_control::default_path;
use bulkhead_runtime::{RunOptions, StopReasonText};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Needs root or a delegated cgroup (see docs/runtime.md). Exit status: 0 when the run \
ended (all processes exited, --timeout, SIGINT/SIGTERM); 1 when the description is invalid or the \
schedule cannot run here or an output file (--schedule-log, --trace) cannot be written or an rt \
task, a process of an SC partition or a `required` process ended before the stop; 2 on a usage error."
)]
pub struct Args {
    /// System description (YAML; native or DEmOS configuration)
    file: PathBuf,
    /// Seed of the budget jitter
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop this long after the schedule starts, e.g. 500ms or 10s (also bounds the init phase)
    #[arg(allow_hyphen_values = true, long, value_name = "DURATION", value_parser = positive_duration)]
    timeout: Option<Duration>,
    /// Print MSG as a line on stdout at the start of each window
    #[arg(long, value_name = "MSG")]
    window_message: Option<String>,
    /// Print MSG as a line on stdout at the start of each major frame (before the window line)
    #[arg(long, value_name = "MSG")]
    frame_message: Option<String>,
    /// Write the schedule log (JSON lines, one `run` line per grant) to PATH
    #[arg(long, value_name = "PATH")]
    schedule_log: Option<PathBuf>,
    /// Write a Chrome/Perfetto trace-event JSON file to PATH
    #[arg(long, value_name = "PATH")]
    trace: Option<PathBuf>,
    /// While rt partitions run, move IRQs, unbound workqueues and unbound kernel threads
    /// off their CPUs, or with `=CPUS` off those rt CPUs only (restored at the end; see
    /// docs/rt.md)
    #[arg(long, value_name = "CPUS", num_args = 0..=1, require_equals = true, value_parser = cpu_list)]
    isolate_housekeeping: Option<Option<bulkhead_model::CpuSet>>,
    /// Power policy (DEmOS's -p names): none, high, low, minbe, per_process, per_slice,
    /// fixed:I,I,..., alternating:I,J,...; see docs/power.md
    #[arg(long, short = 'p', value_name = "NAME", value_parser = bulkhead_power::Policy::parse)]
    power_policy: Option<bulkhead_power::Policy>,
    /// The directory standing for /sys when the power policy controls CPUFreq
    /// (a tree imitating devices/system/cpu/cpufreq on machines without it)
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    cpufreq_root: PathBuf,
    /// Serve the control socket (`bulkhead ctl`, docs/control.md) at PATH
    /// [default: /run/bulkhead/NAME.sock, NAME = the description's file name without extension]
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// be processes write straight to this run's stdout and stderr, their lines not
    /// labelled with their partition: one descriptor per process instead of three, for
    /// many partitions under a descriptor limit that cannot be raised (a partition's
    /// line can then pass for the supervisor's; docs/security.md)
    #[arg(long)]
    raw_output: bool,
    /// Keep every CPU's wake-up latency at or under US microseconds while the run lasts
    /// (the kernel's PM QoS request, as cyclictest holds it: idle CPUs poll instead of
    /// sleeping), or `off` for no bound; needs root [default: 0; docs/runtime.md]
    #[arg(long, value_name = "US", value_parser = cpu_latency)]
    cpu_latency_us: Option<LatencyBound>,
}

/// SCHED_FIFO priority of the supervisor (below the kernel's threaded IRQs at 50).
pub(crate) const REALTIME_PRIORITY: i32 = 40;

/// `--cpu-latency-us`: a bound in microseconds, or none (`off`).
#[derive(Debug, Clone, Copy)]
struct LatencyBound(Option<u32>);

fn cpu_latency(text: &str) -> Result<LatencyBound, String> {
    match text {
        "off" => Ok(LatencyBound(None)),
        _ => text
            .parse()
            .map(|us| LatencyBound(Some(us)))
            .map_err(|_| format!("`{text}` is not a number of microseconds or `off`")),
    }
}

/// Requests the wake-up latency bound of `--cpu-latency-us` (0 when absent), held until
/// the result is dropped. A failure is reported when the bound was asked for, or when it
/// is not for lack of root (an unprivileged run of be partitions goes without).
fn hold_cpu_latency(asked: Option<LatencyBound>) -> Option<bulkhead_os::cpu_latency::CpuLatency> {
    let us = asked.map_or(Some(0), |b| b.0)?;
    match bulkhead_os::cpu_latency::request(us) {
        Ok(held) => Some(held),
        Err(e) if asked.is_none() && e.kind() == std::io::ErrorKind::PermissionDenied => None,
        Err(e) => {
            crate::fail::warning_line(format!(
                "--cpu-latency-us: no wake-up latency bound ({e}); idle CPUs may sleep"
            ));
            None
        }
    }
}

/// A CPU list (`0`, `0-2,5`).
fn cpu_list(text: &str) -> Result<bulkhead_model::CpuSet, String> {
    Ok(bulkhead_model::CpuSet::parse(text)?)
}

pub fn run(args: Args) -> ExitCode {
    let (loaded, text) = match load_system_on(&args.file, Some(&this_machine())) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let dir = args
        .file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    let workdir = crate::common::workdir(&loaded.system, &args.file);
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("bulkhead"));
    let (system, solutions) =
        match crate::run_pipes::runnable(&loaded.system, (&args.file, &text), &exe, &workdir) {
            Ok(done) => done,
            Err(why) => return fail(why),
        };
    if let Some((path, why)) = not_run_yet(&system) {
        let at = bulkhead_model::diagnostic_at(&text, &args.file.display().to_string(), &path, why);
        return fail(at);
    }
    if let Err(code) = crate::common::resolve_programs(&system, (&args.file, &text)) {
        return code;
    }
    if let Err(code) = crate::common::check_cgroups(&system, (&args.file, &text)) {
        return code;
    }
    if let Err(why) = create_outputs(&args) {
        return fail(why);
    }
    let name = args
        .file
        .file_stem()
        .map_or_else(|| "system".into(), |s| s.to_string_lossy().into_owned());
    let control = args.control.unwrap_or_else(|| default_path(&args.file));
    let options = RunOptions {
        seed: args.seed,
        jitter: Default::default(),
        timeout: args.timeout,
        window_message: args.window_message,
        frame_message: args.frame_message,
        schedule_log: args.schedule_log,
        trace: args.trace,
        workdir,
        hierarchy: None,
        handle_signals: true,
        realtime_priority: Some(REALTIME_PRIORITY),
        isolate_housekeeping: args.isolate_housekeeping.is_some(),
        housekeeping_cpus: args.isolate_housekeeping.flatten(),
        messages: None,
        power: args
            .power_policy
            .map(|policy| bulkhead_runtime::PowerOptions {
                policy,
                cpufreq_root: args.cpufreq_root,
            }),
        control: Some(control),
        name,
        raw_output: args.raw_output,
    };
    let mut system = system;
    absolute_dbcs(&mut system, &dir);
    // Dropped when this function returns, after the run's own teardown: it then tells
    // the janitor that there is nothing to clean (a SIGKILL tells it nothing).
    // Before the janitor starts, so that it inherits the supervisor's OOM protection
    // (as root; else nothing changes).
    let _ = bulkhead_os::oom::shield_supervisor();
    let _janitor = crate::janitor::Janitor::start();
    // Held until the run's own teardown is over; the kernel withdraws it at any exit.
    let _latency = hold_cpu_latency(args.cpu_latency_us);
    match bulkhead_runtime::run(&system, &options) {
        Ok(outcome) => report(&outcome, &system, &solutions),
        Err(e) => run_failed(&e, &args.file),
    }
}

/// Prints what `outcome` says (warnings, the stop, each rt task's figures, the
/// pipelines' statistics, errors); success unless a task ended early or an error came.
fn report(
    outcome: &bulkhead_runtime::Outcome,
    system: &bulkhead_model::System,
    solutions: &[bulkhead_analysis::pipes::Solution],
) -> ExitCode {
    for w in &outcome.warnings {
        crate::fail::warning_line(w);
    }
    match outcome.windows {
        0 => eprintln!("bulkhead run: {}", outcome.reason.text()),
        n => eprintln!(
            "bulkhead run: {} after {n} windows and {} grants",
            outcome.reason.text(),
            outcome.grants
        ),
    }
    for t in &outcome.rt_tasks {
        let ended = match &t.ended_early {
            Some(how) => format!("; ended on its own before the stop ({how})"),
            None => String::new(),
        };
        let throttled = match t.throttled {
            Some(n) => format!(", throttled in {n} periods"),
            None => String::new(),
        };
        eprintln!(
            "  task `{}` of `{}` ({}, pid {}): {} jobs, max response {:.3} ms, {} misses{throttled}{ended}",
            t.task,
            t.partition,
            t.policy,
            t.pid,
            t.jobs,
            t.max_response_ns as f64 / 1e6,
            t.misses
        );
    }
    let counters: Vec<_> = outcome
        .rt_tasks
        .iter()
        .map(|t| (t.partition.as_str(), t.task.as_str(), t.counters.as_slice()))
        .collect();
    let pipelines = crate::run_pipes::stats(system, &counters);
    crate::run_pipes::print(&pipelines, solutions);
    crate::run_pipes::print_stages(system, &counters);
    let early: Vec<_> = outcome
        .rt_tasks
        .iter()
        .filter(|t| t.ended_early.is_some())
        .collect();
    for t in &early {
        error_line(format!(
            "task `{}` of `{}` ended before the stop",
            t.task, t.partition
        ));
    }
    for e in &outcome.errors {
        error_line(e);
    }
    match early.is_empty() && outcome.errors.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(INVALID),
    }
}

/// Makes each bus's DBC, named relative to the description's directory `dir`, an
/// absolute path for the gateway.
pub(crate) fn absolute_dbcs(system: &mut bulkhead_model::System, dir: &std::path::Path) {
    for bus in &mut system.buses {
        if let Some(dbc) = &mut bus.dbc {
            let path = dir.join(&*dbc);
            *dbc = std::path::absolute(&path)
                .unwrap_or(path)
                .display()
                .to_string();
        }
    }
}

/// Creates the output files before anything starts, so that a path that cannot be
/// created is reported against its option (the run writes them again).
fn create_outputs(args: &Args) -> Result<(), String> {
    let outputs = [
        ("--schedule-log", &args.schedule_log),
        ("--trace", &args.trace),
    ];
    for (flag, path) in outputs {
        if let Some(path) = path {
            std::fs::File::create(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// What `run` does not execute, as (key path, why):
/// - a partition scheduled as a server or listed by `modes` without `scheduler: edf`:
///   `run` holds its bandwidth with one SCHED_DEADLINE reservation per task, which the
///   kernel schedules by EDF, so a fixed-priority analysis would not describe how it
///   runs;
/// - a modal partition that owns several CPUs: the analysis places its tasks on its CPUs
///   per mode (first-fit, docs/analysis.md) and may place a task on another CPU in
///   another mode, while a task keeps the CPU (and exclusive cpuset) it starts on.
pub(crate) fn not_run_yet(system: &bulkhead_model::System) -> Option<(String, String)> {
    if let Some(why) = task_without_program(system) {
        return Some(why);
    }
    let modes = system.modes.as_ref();
    for (i, p) in system.partitions.iter().enumerate() {
        let modal = modes.is_some_and(|m| m.is_modal(&p.name));
        let what = match (p.interface.is_some(), modal) {
            (true, _) => "is scheduled as a server (`interface`)",
            (false, true) => "is listed by `modes`",
            (false, false) => continue,
        };
        if p.scheduler != bulkhead_model::Scheduler::Edf {
            return Some((format!("partitions[{i}].scheduler"), format!("partition `{}` {what}: `run` holds its bandwidth with a SCHED_DEADLINE reservation per task, which the kernel schedules by EDF, so it needs `scheduler: edf` (a fixed-priority analysis would not describe how it runs; docs/modes.md)", p.name)));
        }
        let owned_cpus = match &p.cpus {
            Some(bulkhead_model::Cpus::Set(set)) => set.len(),
            _ => 0,
        };
        if modal && p.interface.is_none() && owned_cpus != 1 {
            let n = if owned_cpus == 0 {
                "all".to_string()
            } else {
                owned_cpus.to_string()
            };
            return Some((format!("partitions[{i}].cpus"), format!("partition `{}` {what} and owns {n} CPUs: the analysis places its tasks on its CPUs per mode and may move a task to another CPU in another mode, while `run` keeps each task on the CPU it starts on; give it one CPU or an `interface` (a server over its CPUs; docs/modes.md)", p.name)));
        }
    }
    None
}

/// A task of the description with no `cmd` (gateway tasks get theirs from `run`).
fn task_without_program(system: &bulkhead_model::System) -> Option<(String, String)> {
    system.partitions.iter().enumerate().find_map(|(i, p)| {
        let (j, t) = p
            .tasks
            .iter()
            .enumerate()
            .find(|(_, t)| t.service.is_none() && t.cmd.is_empty())?;
        Some((
            format!("partitions[{i}].tasks[{j}]"),
            format!(
                "partition `{}`, task `{}` has no `cmd`: `run` starts a program per task (`check`, `analyze` and `sim` need none)",
                p.name, t.name
            ),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("run").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn accepts_every_flag() {
        let a = parse(&[
            "f.yaml",
            "--seed",
            "7",
            "--timeout",
            "1500ms",
            "--window-message",
            "W",
            "--frame-message",
            "F",
        ])
        .unwrap();
        assert_eq!(a.seed, 7);
        assert_eq!(a.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(a.window_message.as_deref(), Some("W"));
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for argv in [
            &["f.yaml", "--timeout", "abc"][..],
            &["f.yaml", "--timeout", "-5ms"],
            &["f.yaml", "--timeout", "0s"],
            &["f.yaml", "--seed", "-1"],
            &["f.yaml", "--bogus"],
            &[],
        ] {
            let e = parse(argv).expect_err(&format!("{argv:?} accepted"));
            assert!(e.use_stderr(), "{argv:?}");
            assert_eq!(e.exit_code(), 2, "{argv:?}");
        }
    }
}
