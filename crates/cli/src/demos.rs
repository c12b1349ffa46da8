//! `demos-sched` (`bulkhead demos-sched ARGS`, which the `demos-sched` program runs):
//! DEmOS's command line over the code of `bulkhead run` and `bulkhead check`, so that
//! DEmOS users switch by changing the binary (docs/demos.md). DEmOS's options keep
//! their meaning, its exit codes (0 when the run ended or for `-h`, `-V`, `-d`; 1 for
//! anything else, a usage error included) and its log lines ([`crate::demos_log`]).
//! The configuration is loaded by the model and checked with DEmOS's own rules
//! ([`crate::demos_config`]); the schedule is run by `bulkhead_runtime::run`, with
//! DEmOS's jitter draws (`DEMOS_RAND_SEED`).

use crate::demos_config::{Config, Failure, Source};
use crate::demos_log::{Log, ScheduleLog};
use crate::out::{out, outln};
use bulkhead_model::{PartitionKind, System};
use clap::{CommandFactory, Parser};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// DEmOS's options (its `getopt` string `c:C:p:g:m:M:t:sdhV`).
#[derive(Parser, Debug)]
#[command(
    name = "demos-sched",
    override_usage = "demos-sched <OPTIONS>",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    help_template = "{usage-heading} {usage}\n\n{all-args}{after-help}",
    after_help = ENVIRONMENT
)]
pub struct Args {
    /// Path to the configuration file (processes start in its directory unless it sets
    /// `set_cwd: false`; a FIFO needs `set_cwd: false`)
    #[arg(short = 'c', value_name = "CONFIG_FILE", allow_hyphen_values = true)]
    config_file: Option<PathBuf>,
    /// Inline configuration in YAML (processes start in the current directory)
    #[arg(short = 'C', value_name = "CONFIG", allow_hyphen_values = true)]
    config: Option<String>,
    /// Power policy, NAME[:ARG1[,ARG2...]]: none, high, low, minbe, per_process,
    /// per_slice, fixed:I,I, alternating:I,J,I,J (imx8_* names too; docs/power.md)
    #[arg(short = 'p', value_name = "POWER_POLICY", allow_hyphen_values = true)]
    power_policy: Option<String>,
    /// Name of this instance (DEmOS's root cgroups): the run's name and its control
    /// socket /run/bulkhead/NAME.sock; must be unique among running instances
    #[arg(short = 'g', value_name = "CGROUP_NAME", default_value = "demos")]
    cgroup_name: String,
    /// Print WINDOW_MESSAGE on stdout at the start of each window
    #[arg(short = 'm', value_name = "WINDOW_MESSAGE", allow_hyphen_values = true)]
    window_message: Option<String>,
    /// Print MF_MESSAGE on stdout at the start of each major frame
    #[arg(short = 'M', value_name = "MF_MESSAGE", allow_hyphen_values = true)]
    frame_message: Option<String>,
    /// Stop the schedule and every process after TIMEOUT_MS milliseconds
    #[arg(short = 't', value_name = "TIMEOUT_MS", value_parser = timeout_ms, allow_hyphen_values = true)]
    timeout: Option<Duration>,
    /// DEmOS re-runs itself under systemd-run for the unified cgroup hierarchy; here a
    /// check that the cgroups bulkhead needs are usable (an error says why not)
    #[arg(short = 's')]
    systemd_run: bool,
    /// Print the normalized configuration (DEmOS's canonical form) and exit
    #[arg(short = 'd')]
    dump: bool,
    /// Print the version and exit
    #[arg(short = 'V')]
    version: bool,
    /// Print this message and exit
    #[arg(short = 'h')]
    help: bool,
}

const ENVIRONMENT: &str = "Environment:
  SPDLOG_LEVEL=<level>    log level (trace, debug, info, warning, error, critical, off;
                          or main=<level> among other loggers' entries); default info
  DEMOS_PLAIN_LOG         log lines without the time
  DEMOS_SCHEDULE_LOG=FILE write one line per grant to FILE: `    10: cpus=0 cmd='dummy' budget=5`
  DEMOS_RAND_SEED=N       seed of the budget jitter, drawn as DEmOS draws it (default: random)
See docs/demos.md for what differs from DEmOS and what bulkhead adds.";

/// `-t`: a whole number of milliseconds, 0 included.
fn timeout_ms(text: &str) -> Result<Duration, String> {
    text.trim()
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| format!("`{text}` is not a whole number of milliseconds"))
}

/// Runs `demos-sched` with `argv` (its arguments, without the program name).
pub fn main(argv: Vec<OsString>) -> ExitCode {
    let args =
        match Args::try_parse_from(std::iter::once(OsString::from("demos-sched")).chain(argv)) {
            Ok(args) => args,
            Err(e) => {
                let _ = e.print();
                return ExitCode::from(1);
            }
        };
    if args.help {
        out!("{}", Args::command().render_help());
        return ExitCode::SUCCESS;
    }
    if args.version {
        let version = env!("CARGO_PKG_VERSION");
        // DEmOS's debug builds say `debug`: they alone write DEMOS_SCHEDULE_LOG.
        outln!("demos-sched version bulkhead {version} (debug: DEMOS_SCHEDULE_LOG is supported)");
        return ExitCode::SUCCESS;
    }
    let log = Log::from_env();
    let source = match (&args.config_file, &args.config) {
        (Some(file), _) => Source::File(file),
        (None, Some(text)) => Source::Inline(text),
        (None, None) => {
            out!("{}", Args::command().render_help());
            return ExitCode::from(1);
        }
    };
    let done = crate::demos_config::load(source).and_then(|config| match args.dump {
        true => dump(&config.system),
        false => run(&args, config, &log),
    });
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            log.error(format!("Exception: {}", failure.message));
            if let Some(detail) = failure.detail {
                log.info(detail);
            }
            ExitCode::from(1)
        }
    }
}

/// `-d`: the normalized configuration in DEmOS's form.
fn dump(system: &System) -> Result<(), Failure> {
    let text = bulkhead_model::to_demos_yaml(system).map_err(|e| Failure::plain(e.to_string()))?;
    outln!("{text}");
    Ok(())
}

/// Runs the schedule until every process exited, `-t` or SIGINT/SIGTERM.
fn run(args: &Args, config: Config, log: &Log) -> Result<(), Failure> {
    let mut system = config.system;
    if system.partitions.is_empty() || system.windows.is_empty() {
        return Err(Failure::plain("Need at least one partition in one window"));
    }
    let power = args
        .power_policy
        .as_deref()
        .map(bulkhead_power::Policy::parse)
        .transpose()
        .map_err(Failure::plain)?;
    if args.systemd_run {
        bulkhead_runtime::Hierarchy::detect().map_err(|e| {
            Failure::plain(format!(
                "-s: bulkhead does not re-run itself under systemd-run, and the cgroups it needs are not usable: {e}"
            ))
        })?;
    }
    log.info(format!(
        "Parsed {} and {}",
        plural(system.partitions.len(), "partition"),
        plural(system.windows.len(), "window")
    ));
    drop_unscheduled(&mut system, log);
    let file = config.file.clone().unwrap_or_else(|| PathBuf::from("-"));
    let workdir = crate::common::workdir(&system, &file);
    let system = runnable(system, (&config.src, &config.name), &file, &workdir)?;
    let schedule_log = std::env::var_os("DEMOS_SCHEDULE_LOG")
        .map(|path| ScheduleLog::create(Path::new(&path)))
        .transpose()
        .map_err(Failure::plain)?;
    if args.timeout == Some(Duration::ZERO) {
        log.info("Zero timeout set, stopping immediately");
        return Ok(());
    }
    let options = bulkhead_runtime::RunOptions {
        seed: seed()?,
        jitter: bulkhead_windows::Jitter::Demos,
        timeout: args.timeout,
        window_message: args.window_message.clone(),
        frame_message: args.frame_message.clone(),
        schedule_log: schedule_log.as_ref().map(ScheduleLog::run_path),
        workdir,
        handle_signals: true,
        realtime_priority: Some(crate::run::REALTIME_PRIORITY),
        power: power.map(|policy| bulkhead_runtime::PowerOptions {
            policy,
            cpufreq_root: "/sys".into(),
        }),
        control: Some(bulkhead_control::default_path(Path::new(&format!(
            "{}.demos",
            args.cgroup_name
        )))),
        name: args.cgroup_name.clone(),
        // DEmOS's programs write to its terminal as they are (its tests read them so).
        raw_output: true,
        ..Default::default()
    };
    log.info("Starting scheduler");
    let outcome = {
        // Dropped after the run's own teardown: the janitor then has nothing to clean.
        let _janitor = crate::janitor::Janitor::start();
        bulkhead_runtime::run(&system, &options).map_err(|e| Failure::plain(e.to_string()))?
    };
    report(&outcome, log);
    schedule_log
        .map_or(Ok(()), ScheduleLog::finish)
        .map_err(Failure::plain)
}

/// `system` as `run` executes it: pipelines wired, each bus's DBC absolute, and every
/// program found (the first that is not is an error at its position in `source`, the
/// configuration's text and name).
fn runnable(
    system: System,
    source: (&str, &str),
    file: &Path,
    workdir: &Path,
) -> Result<System, Failure> {
    let mut system = match system.pipelines.is_empty() {
        true => system,
        false => {
            let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("bulkhead"));
            crate::run_pipes::runnable(&system, (file, source.0), &exe, workdir)
                .map_err(Failure::plain)?
                .0
        }
    };
    let positioned = |path: &str, why: String| {
        Failure::plain(bulkhead_model::diagnostic_at(source.0, source.1, path, why).to_string())
    };
    if let Some((path, why)) = crate::run::not_run_yet(&system) {
        return Err(positioned(&path, why));
    }
    let host = bulkhead_plan::Host::current(workdir);
    bulkhead_plan::Programs::resolve(&system, &host)
        .map_err(|e| positioned(&e.key_path, e.source.to_string()))?;
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && file != Path::new("-"));
    crate::run::absolute_dbcs(&mut system, dir.unwrap_or(Path::new(".")));
    Ok(system)
}

/// DEmOS starts the processes of a partition no window names and keeps them frozen:
/// in a DEmOS configuration (what DEmOS's form can say) such a partition is not
/// started at all. (With bulkhead's keys, a best-effort partition outside the windows
/// runs on its own CPUs, as under `bulkhead run`.)
fn drop_unscheduled(system: &mut System, log: &Log) {
    if bulkhead_model::to_demos_yaml(system).is_err() {
        return;
    }
    let named: std::collections::HashSet<String> = system
        .windows
        .iter()
        .flat_map(|w| &w.slices)
        .flat_map(|s| s.sc_partition.iter().chain(&s.be_partition))
        .cloned()
        .collect();
    system.partitions.retain(|p| {
        let keep = p.kind != PartitionKind::Be || named.contains(&p.name);
        if !keep {
            log.info(format!(
                "Partition '{}' is in no window: its processes are not started",
                p.name
            ));
        }
        keep
    });
}

/// The jitter seed: `DEMOS_RAND_SEED` read as C++'s `std::stoi` reads it (leading
/// blanks, a sign, digits; the rest ignored), else a random one (DEmOS's
/// `std::random_device`).
fn seed() -> Result<u64, Failure> {
    match std::env::var_os("DEMOS_RAND_SEED") {
        Some(text) => parse_seed(&text.to_string_lossy()),
        None => Ok(u64::from(random_u32())),
    }
}

/// `DEMOS_RAND_SEED`'s text as [`seed`] reads it.
fn parse_seed(text: &str) -> Result<u64, Failure> {
    let trimmed = text.trim_start();
    let digits_end = trimmed
        .char_indices()
        .skip(usize::from(trimmed.starts_with(['+', '-'])))
        .find(|(_, c)| !c.is_ascii_digit())
        .map_or(trimmed.len(), |(i, _)| i);
    let seed: i32 = trimmed[..digits_end]
        .parse()
        .map_err(|_| Failure::plain(format!("DEMOS_RAND_SEED `{text}` is not an int")))?;
    // std::mt19937 keeps the low 32 bits of the int it is seeded with.
    Ok(u64::from(seed as u32))
}

/// 32 random bits from the kernel.
fn random_u32() -> u32 {
    let mut bytes = [0u8; 4];
    // SAFETY: getrandom writes at most 4 bytes into the buffer it is given; on a short or
    // failed read the buffer keeps zeros, a valid (if poor) seed.
    unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    u32::from_ne_bytes(bytes)
}

/// How the run ended, as DEmOS's log says it; what bulkhead noticed as warnings (a
/// process's early end does not fail a DEmOS run).
fn report(outcome: &bulkhead_runtime::Outcome, log: &Log) {
    for w in outcome.warnings.iter().chain(&outcome.errors) {
        log.warn(w);
    }
    for t in outcome.rt_tasks.iter().filter(|t| t.ended_early.is_some()) {
        log.warn(format!(
            "task `{}` of `{}` ended before the stop",
            t.task, t.partition
        ));
    }
    log.info(match outcome.reason {
        bulkhead_windows::StopReason::AllExited => "All processes exited, stopping scheduler",
        bulkhead_windows::StopReason::Timeout => "Timed out, stopping all processes",
        bulkhead_windows::StopReason::Requested => {
            "Received stop signal (SIGTERM or SIGINT), stopping all processes"
        }
    });
}

/// `3 partitions`, `1 window`.
fn plural(count: usize, noun: &str) -> String {
    format!("{count} {noun}{}", if count == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(argv: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("demos-sched").chain(argv.iter().copied()))
    }

    #[test]
    fn getopt_forms_parse_as_demos_reads_them() {
        let a = parse(&["-t20", "-dC", "-d", "-m", "-x-", "-g", "g1", "-p", "minbe"]).unwrap();
        assert_eq!(a.timeout, Some(Duration::from_millis(20)));
        assert!(a.dump);
        assert_eq!(
            a.config.as_deref(),
            Some("-d"),
            "-C takes the next word, a dash or not"
        );
        assert_eq!(a.window_message.as_deref(), Some("-x-"));
        assert_eq!(
            (a.cgroup_name.as_str(), a.power_policy.as_deref()),
            ("g1", Some("minbe"))
        );
        // The last of a repeated option counts, as with getopt.
        assert_eq!(
            parse(&["-C", "a", "-C", "b"]).unwrap().config.as_deref(),
            Some("b")
        );
        assert_eq!(parse(&[]).unwrap().cgroup_name, "demos");
    }

    #[test]
    fn the_seed_is_read_as_stoi_reads_it() {
        assert_eq!(parse_seed("2").unwrap(), 2);
        assert_eq!(parse_seed("  +7xyz").unwrap(), 7);
        assert_eq!(parse_seed("-1").unwrap(), u64::from(u32::MAX));
        for bad in ["", "x", "-", "99999999999"] {
            assert!(parse_seed(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_options_are_errors() {
        for argv in [
            &["-x"][..],
            &["-t", "soon"],
            &["-t", "-5"],
            &["-C"],
            &["stray"],
        ] {
            assert!(parse(argv).is_err(), "{argv:?} accepted");
        }
    }

    #[test]
    fn help_starts_with_demos_usage_line() {
        let help = Args::command().render_help().to_string();
        assert!(help.starts_with("Usage: demos-sched <OPTIONS>\n"), "{help}");
        for flag in [
            "-c <CONFIG_FILE>",
            "-C <CONFIG>",
            "-t <TIMEOUT_MS>",
            "DEMOS_SCHEDULE_LOG",
        ] {
            assert!(help.contains(flag), "{flag} missing from:\n{help}");
        }
    }
}
