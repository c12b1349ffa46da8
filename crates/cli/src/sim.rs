//! `bulkhead sim`: execute a system description in deterministic simulated time.

use crate::common::load_system;
use crate::fail::fail;
use crate::out::out;
use bulkhead_model::units::{format_duration, parse_duration};
use bulkhead_model::CpuSet;
use bulkhead_sim::trace::{perfetto, Event, ScheduleLogWriter, Sink};
use bulkhead_sim::{
    Arrivals, Behaviour, BuildOptions, ExecModel, Fault, Link, ModeSwitch, Options, Report,
    ServerChoice, ServerKind, Sim, Stall, Suspension,
};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 after a complete simulation; 1 when the description is invalid \
or an output cannot be written; 2 on a usage error.\nSee docs/sim.md for the semantics and docs/trace.md for the outputs."
)]
pub struct Args {
    /// System description (YAML; native or DEmOS configuration)
    file: PathBuf,
    /// Simulated time to cover, e.g. 100ms or 10s [default: one hyperperiod of the tasks and the major frame]
    #[arg(allow_hyphen_values = true, long = "for", value_name = "DURATION", value_parser = duration)]
    duration: Option<u64>,
    /// Seed of every random draw (execution times, sporadic gaps, release and budget jitter)
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Suspend the whole system at system time AT for DURATION of wall-clock time (repeatable)
    #[arg(long, value_name = "AT:DURATION", value_parser = suspension)]
    suspend: Vec<Suspension>,
    /// Take CPU CPU away (nothing runs on it) at system time AT for DURATION, as a
    /// platform stall (repeatable; see docs/platform.md)
    #[arg(long, value_name = "CPU:AT:DURATION", value_parser = stall)]
    inject_stall: Vec<Stall>,
    /// Random stalls of every CPU: RATE a second per CPU, each up to MAX, drawn from
    /// SEED (see docs/platform.md)
    #[arg(long, value_name = "SEED:RATE:MAX", value_parser = random_stalls)]
    stalls: Option<RandomStalls>,
    /// The COUNT jobs of rt task TASK (NAME or PARTITION/NAME) released from system
    /// time AT on overrun past their deadlines, as its `health:` sees misses
    /// (repeatable; see docs/health.md)
    #[arg(long, value_name = "TASK:AT:COUNT", value_parser = Fault::parse_miss)]
    inject_miss: Vec<Fault>,
    /// rt task TASK (NAME or PARTITION/NAME) exits at system time AT: it releases no
    /// more jobs until its `health:` restarts it (repeatable; see docs/health.md)
    #[arg(long, value_name = "TASK:AT", value_parser = Fault::parse_exit)]
    inject_exit: Vec<Fault>,
    /// Request a switch to mode MODE at system time AT (repeatable; see docs/modes.md)
    #[arg(long, value_name = "AT:MODE", value_parser = ModeSwitch::parse)]
    mode_switch: Vec<ModeSwitch>,
    /// Write the schedule log (JSON lines: run grants and job events) to PATH
    #[arg(long, value_name = "PATH")]
    schedule_log: Option<PathBuf>,
    /// Write a Chrome/Perfetto trace-event JSON file to PATH
    #[arg(long, value_name = "PATH")]
    trace: Option<PathBuf>,
    /// Write per-task, per-chain and per-channel statistics as JSON to PATH
    #[arg(long, value_name = "PATH")]
    stats_json: Option<PathBuf>,
    /// Reservation every rt task runs under (budget and period of the task), overriding the description's `server:` [default: each task's `server:`, else none]
    #[arg(long, value_enum)]
    server: Option<ServerArg>,
    /// Server of one task, overriding --server and `server:`: TASK=none|sporadic|deferrable|cbs|io:PERMILLE (repeatable; TASK or PARTITION/TASK)
    #[arg(long, value_name = "TASK=KIND", value_parser = task_server)]
    task_server: Vec<(String, ServerChoice)>,
    /// Execution time of each job: `wcet` (the budget) or `uniform:MIN-MAX` in percent of the budget
    #[arg(long, value_name = "MODEL", default_value = "wcet", value_parser = exec_model)]
    exec: ExecModel,
    /// Releases: `periodic` or `sporadic:PCT` (gaps of the period plus up to PCT percent of it)
    #[arg(long, value_name = "PATTERN", default_value = "periodic", value_parser = arrivals)]
    arrivals: Arrivals,
    /// Bind a channel to tasks: CHANNEL=WRITER>READER[,READER...] (repeatable) [default: the first task of each partition]
    #[arg(long, value_name = "BINDING", value_parser = Link::parse)]
    link: Vec<Link>,
    /// What a windowed process does: CMD=busy|yield:DURATION|exit:DURATION|init:DURATION (repeatable) [default: busy]
    #[arg(long, value_name = "CMD=BEHAVIOUR", value_parser = behaviour)]
    process: Vec<(String, Behaviour)>,
    /// CPUs that `cpu: all` means when the description has no system.cpus
    #[arg(long, value_name = "CPULIST", default_value = "0-1", value_parser = CpuSet::parse)]
    all_cpus: CpuSet,
    /// Power policy of the window schedule (as `run --power-policy`); energy needs the
    /// description's power section (see docs/power.md)
    #[arg(long, short = 'p', value_name = "NAME", value_parser = bulkhead_power::Policy::parse)]
    power_policy: Option<bulkhead_power::Policy>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ServerArg {
    /// No reservation: jobs run to completion
    None,
    /// Sporadic server with replenishment lists (Quest main VCPU)
    Sporadic,
    /// Deferrable server (Xen RTDS)
    Deferrable,
    /// Constant bandwidth server (SCHED_DEADLINE)
    Cbs,
}

fn duration(text: &str) -> Result<u64, String> {
    Ok(parse_duration(text, None)?)
}

fn suspension(text: &str) -> Result<Suspension, String> {
    let (at, duration) = text
        .split_once(':')
        .ok_or("expected AT:DURATION, e.g. 5ms:7ms")?;
    Ok(Suspension {
        at: parse_duration(at, None)?,
        duration: parse_duration(duration, None)?,
    })
}

/// `CPU:AT:DURATION`.
fn stall(text: &str) -> Result<Stall, String> {
    let usage = || format!("`{text}`: expected CPU:AT:DURATION, e.g. 0:1s:5ms");
    let mut parts = text.splitn(3, ':');
    let (Some(cpu), Some(at), Some(duration)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(usage());
    };
    Ok(Stall {
        cpu: cpu.parse().map_err(|_| usage())?,
        at: parse_duration(at, None)?,
        duration: parse_duration(duration, None)?,
    })
}

/// `--stalls SEED:RATE:MAX`.
#[derive(Clone, Copy)]
struct RandomStalls {
    seed: u64,
    per_s: f64,
    max: u64,
}

fn random_stalls(text: &str) -> Result<RandomStalls, String> {
    let usage = || {
        format!("`{text}`: expected SEED:RATE:MAX, e.g. 1:2:5ms (2 stalls a second per CPU, each up to 5 ms)")
    };
    let mut parts = text.splitn(3, ':');
    let (Some(seed), Some(rate), Some(max)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(usage());
    };
    let per_s: f64 = rate.parse().map_err(|_| usage())?;
    if !per_s.is_finite() || per_s < 0.0 {
        return Err(format!(
            "`{text}`: RATE must be a non-negative number of stalls a second"
        ));
    }
    Ok(RandomStalls {
        seed: seed.parse().map_err(|_| usage())?,
        per_s,
        max: parse_duration(max, None)?,
    })
}

/// The stalls to inject: `--inject-stall` and `--stalls` over the CPUs of `spec`; a
/// stall of a CPU the simulation does not use is an error naming the flag.
fn stalls_of(args: &Args, spec: &bulkhead_sim::Spec, until: u64) -> Result<Vec<Stall>, ExitCode> {
    let mut cpus: Vec<u32> = spec
        .domains
        .iter()
        .flat_map(|d| d.cpus.iter().copied())
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    if let Some(s) = args.inject_stall.iter().find(|s| !cpus.contains(&s.cpu)) {
        return Err(fail(format!(
            "--inject-stall {}:{}:{}: CPU {} runs nothing in this simulation (its CPUs: {:?})",
            s.cpu,
            format_duration(s.at),
            format_duration(s.duration),
            s.cpu,
            cpus
        )));
    }
    let mut out = args.inject_stall.clone();
    if let Some(r) = args.stalls {
        out.extend(bulkhead_sim::random_stalls(
            &cpus, r.seed, r.per_s, r.max, until,
        ));
    }
    Ok(out)
}

fn exec_model(text: &str) -> Result<ExecModel, String> {
    let usage = || {
        format!("`{text}`: expected wcet or uniform:MIN-MAX (percent of the budget, e.g. uniform:50-100)")
    };
    if text == "wcet" {
        return Ok(ExecModel::Wcet);
    }
    let range = text.strip_prefix("uniform:").ok_or_else(usage)?;
    let (min, max) = range.split_once('-').ok_or_else(usage)?;
    let (min_pct, max_pct): (u32, u32) = (
        min.parse().map_err(|_| usage())?,
        max.parse().map_err(|_| usage())?,
    );
    if min_pct == 0 || min_pct > max_pct || max_pct > 1000 {
        return Err(format!("`{text}`: need 0 < MIN <= MAX <= 1000"));
    }
    Ok(ExecModel::Uniform { min_pct, max_pct })
}

fn arrivals(text: &str) -> Result<Arrivals, String> {
    match text.strip_prefix("sporadic:") {
        _ if text == "periodic" => Ok(Arrivals::Periodic),
        Some(pct) => {
            let max_extra_pct = pct
                .parse()
                .map_err(|_| format!("`{pct}` is not a percentage"))?;
            Ok(Arrivals::Sporadic { max_extra_pct })
        }
        None => Err(format!("`{text}`: expected periodic or sporadic:PCT")),
    }
}

fn task_server(text: &str) -> Result<(String, ServerChoice), String> {
    let (task, kind) = text
        .rsplit_once('=')
        .ok_or("expected TASK=KIND, e.g. quest/usb_bh=io:100")?;
    Ok((
        task.to_string(),
        ServerChoice::parse(kind).map_err(|e| e.to_string())?,
    ))
}

fn behaviour(text: &str) -> Result<(String, Behaviour), String> {
    let (cmd, behaviour) = text
        .rsplit_once('=')
        .ok_or("expected CMD=BEHAVIOUR, e.g. './ctl=yield:2ms'")?;
    Ok((
        cmd.to_string(),
        Behaviour::parse(behaviour).map_err(|e| e.to_string())?,
    ))
}

/// Writes schedule-log lines and the trace as events arrive.
struct Outputs {
    log: Option<ScheduleLogWriter<BufWriter<File>>>,
    trace: Option<perfetto::Writer<BufWriter<File>>>,
    error: Option<std::io::Error>,
}

impl Sink for Outputs {
    fn enabled(&self) -> bool {
        self.log.is_some() || self.trace.is_some()
    }

    fn emit(&mut self, event: Event) {
        if let Some(log) = &mut self.log {
            if bulkhead_sim::in_schedule_log(&event.kind) && self.error.is_none() {
                self.error = log.write(&event).err();
            }
        }
        if let Some(trace) = &mut self.trace {
            trace.add(&event);
        }
    }
}

pub fn run(args: Args) -> ExitCode {
    match simulate(&args) {
        Ok(report) => {
            out!("{}", summary(&report));
            if let Some(why) = &report.health_ended {
                return fail(format!("{}: {why}", args.file.display()));
            }
            match report.energy.as_ref().and_then(|e| e.policy_error.as_ref()) {
                Some(e) => fail(format!("{}: power policy: {e}", args.file.display())),
                None => ExitCode::SUCCESS,
            }
        }
        Err(code) => code,
    }
}

fn simulate(args: &Args) -> Result<Report, ExitCode> {
    let loaded = load_system(&args.file)?;
    let system = crate::common::solved_system(&loaded.system, &args.file)?;
    let file = args.file.display();
    let options = BuildOptions {
        server: args.server.map(|server| match server {
            ServerArg::None => ServerKind::Unlimited,
            ServerArg::Sporadic => ServerKind::Sporadic,
            ServerArg::Deferrable => ServerKind::Deferrable,
            ServerArg::Cbs => ServerKind::Cbs,
        }),
        exec: args.exec,
        arrivals: args.arrivals,
        links: args.link.clone(),
        behaviours: args.process.clone(),
        all_cpus: args.all_cpus.clone(),
        task_servers: args.task_server.clone(),
        power_policy: args.power_policy.clone(),
    };
    for warning in bulkhead_sim::link_warnings(&system, &options) {
        crate::fail::warning_line(warning);
    }
    let spec =
        bulkhead_sim::from_system(&system, &options).map_err(|e| fail(format!("{file}: {e}")))?;
    if spec.tasks.is_empty() && spec.windows.is_none() {
        return Err(fail(format!(
            "{file}: nothing to simulate: no rt tasks and no window schedule"
        )));
    }
    let until = match args.duration.or_else(|| bulkhead_sim::hyperperiod(&spec)) {
        Some(until) => until,
        None => {
            return Err(fail(format!(
                "{file}: the hyperperiod overflows or is undefined; give --for DURATION"
            )))
        }
    };
    let log = match &args.schedule_log {
        Some(path) => Some(ScheduleLogWriter::new(BufWriter::new(create(
            "--schedule-log",
            path,
        )?))),
        None => None,
    };
    let trace = match &args.trace {
        Some(path) => Some(
            perfetto::Writer::new(BufWriter::new(create("--trace", path)?))
                .map_err(|e| fail(format!("{}: {e}", path.display())))?,
        ),
        None => None,
    };
    let mut outputs = Outputs {
        log,
        trace,
        error: None,
    };
    let sim_options = Options {
        until,
        drain: false,
        seed: args.seed,
        suspensions: args.suspend.clone(),
        mode_switches: args.mode_switch.clone(),
        stop: bulkhead_sim::stop::StopSpec::of(&system),
        stalls: stalls_of(args, &spec, until)?,
        health: system.health.clone(),
        faults: [args.inject_miss.clone(), args.inject_exit.clone()].concat(),
    };
    let sim = Sim::new(&spec, sim_options, outputs.enabled())
        .map_err(|e| fail(format!("{file}: {e}")))?;
    let mut report = bulkhead_sim::progress::run_with_progress(sim, until, &mut outputs);
    report.pipelines = bulkhead_sim::pipes::pipeline_stats(&system, &report.chains);
    finish_outputs(outputs, args.trace.as_deref(), args.schedule_log.as_deref())?;
    if let Some(path) = &args.stats_json {
        std::fs::write(path, report.to_json() + "\n")
            .map_err(|e| fail(format!("--stats-json {}: {e}", path.display())))?;
    }
    Ok(report)
}

/// Creates the output file `path` given to `flag`; an error names the flag.
fn create(flag: &str, path: &Path) -> Result<File, ExitCode> {
    File::create(path).map_err(|e| fail(format!("{flag} {}: {e}", path.display())))
}

fn finish_outputs(
    outputs: Outputs,
    trace_path: Option<&Path>,
    log_path: Option<&Path>,
) -> Result<(), ExitCode> {
    let log_error = match (outputs.error, outputs.log) {
        (Some(e), _) => Some(e),
        (None, Some(log)) => log.into_inner().flush().err(),
        (None, None) => None,
    };
    if let (Some(e), Some(path)) = (log_error, log_path) {
        return Err(fail(format!("{}: {e}", path.display())));
    }
    if let (Some(trace), Some(path)) = (outputs.trace, trace_path) {
        trace
            .finish()
            .map_err(|e| fail(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// The text printed after a simulation.
fn summary(report: &Report) -> String {
    let mut text = format!(
        "simulated {} (seed {}): {} jobs completed\n",
        format_duration(report.duration_ns),
        report.seed,
        report.jobs
    );
    if !report.tasks.is_empty() {
        text += &format!(
            "{:<32} {:>8} {:>14} {:>7}\n",
            "task", "jobs", "max response", "misses"
        );
        for t in &report.tasks {
            let name = format!("{}/{}", t.partition, t.name);
            text += &format!(
                "{name:<32} {:>8} {:>14} {:>7}\n",
                t.jobs,
                format_duration(t.max_response_ns),
                t.misses
            );
        }
    }
    for c in &report.chains {
        let max = c.max_delay_ns.map_or("-".to_string(), format_duration);
        text += &format!(
            "chain {}: {} of {} delivered, {} lost, max delay {max}\n",
            c.name, c.delivered, c.produced, c.lost
        );
    }
    for b in &report.background {
        text += &format!(
            "best-effort {} in the background on CPU {}: {} of CPU time ({:.1}% of one CPU)\n",
            b.partition,
            b.cpus
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            format_duration(b.cpu_ns),
            b.share_of_one_cpu * 100.0
        );
    }
    if let Some(w) = &report.windows {
        text += &format!(
            "windows: {} major frames, {} run grants\n",
            w.frames, w.grants
        );
    }
    if let Some(e) = &report.energy {
        text += &format!("energy: {:.6} J\n", e.total_joules);
    }
    for s in &report.switches {
        let at = format_duration(s.requested_ns);
        text += &match (&s.refused, s.latency_ns) {
            (Some(why), _) => format!(
                "mode switch {} -> {} at {at}: refused: {why}\n",
                s.from, s.to
            ),
            (None, Some(l)) => format!(
                "mode switch {} -> {} at {at} ({}): done in {}\n",
                s.from,
                s.to,
                s.policy.as_deref().unwrap_or(""),
                format_duration(l)
            ),
            (None, None) => format!("mode switch {} -> {} at {at}: not finished\n", s.from, s.to),
        };
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let dir =
                std::env::temp_dir().join(format!("bulkhead-sim-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
        fn file(&self, name: &str, content: &str) -> String {
            let path = self.0.join(name);
            std::fs::write(&path, content).unwrap();
            path.display().to_string()
        }
        fn path(&self, name: &str) -> String {
            self.0.join(name).display().to_string()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn code(argv: &[&str]) -> String {
        let mut full = vec!["sim"];
        full.extend_from_slice(argv);
        format!("{:?}", run(Cli::parse_from(full).args))
    }

    const RM: &str = "partitions:\n  - name: p\n    kind: rt\n    cpus: 0\n    tasks:\n      \
        - {name: t1, cmd: a, budget: 1ms, period: 4ms}\n      \
        - {name: t2, cmd: b, budget: 2ms, period: 6ms}\n      \
        - {name: t3, cmd: c, budget: 3ms, period: 12ms}\n";

    #[test]
    fn writes_stats_schedule_log_and_trace() {
        let dir = TempDir::new("outputs");
        let file = dir.file("rm.yaml", RM);
        let (stats, log, trace) = (
            dir.path("stats.json"),
            dir.path("log.jsonl"),
            dir.path("trace.json"),
        );
        let ok = format!("{:?}", ExitCode::SUCCESS);
        assert_eq!(
            code(&[
                &file,
                "--stats-json",
                &stats,
                "--schedule-log",
                &log,
                "--trace",
                &trace
            ]),
            ok
        );
        let stats = std::fs::read_to_string(&stats).unwrap();
        assert!(
            stats.contains("\"duration_ns\": 12000000,"),
            "one hyperperiod by default: {stats}"
        );
        let t3 = &stats[stats.find("\"name\": \"t3\"").unwrap()..];
        let t3 = &t3[..t3.find('}').unwrap()];
        for field in [
            "\"jobs\": 1,",
            "\"max_response_ns\": 10000000,",
            "\"misses\": 0,",
        ] {
            assert!(t3.contains(field), "{field} in {t3}");
        }
        let log = std::fs::read_to_string(&log).unwrap();
        assert!(log.starts_with("{\"t_ns\":0,\"event\":\"job_release\",\"cpu\":0,\"partition\":\"p\",\"task\":\"t1\""), "{log}");
        assert_eq!(
            log.lines()
                .filter(|l| l.contains("\"event\":\"job_complete\""))
                .count(),
            6
        );
        let trace = std::fs::read_to_string(&trace).unwrap();
        assert!(trace.contains("\"traceEvents\":["), "{trace}");
        assert_eq!(
            trace.matches("\"ph\":\"X\"").count(),
            8,
            "eight execution segments in [0, 12ms)"
        );
    }

    #[test]
    fn a_channel_without_a_simulated_reader_loses_nothing_whatever_its_kind() {
        let dir = TempDir::new("unread");
        let stats = dir.path("stats.json");
        let lost = |kind: &str| {
            let depth = if kind == "fifo" { ", depth: 4" } else { "" };
            let yaml = format!(
                "partitions:\n  - {{name: p, kind: rt, cpus: 0, tasks: [{{name: t, cmd: a, budget: 1ms, period: 1ms}}]}}\n  - {{name: ivi, cpus: 1, processes: [b]}}\nchannels:\n  - {{name: c, kind: {kind}, message_size: 8{depth}, writer: p, readers: [ivi]}}\n"
            );
            let file = dir.file(&format!("{kind}.yaml"), &yaml);
            let args = [file.as_str(), "--for", "1s", "--stats-json", &stats];
            assert_eq!(code(&args), format!("{:?}", ExitCode::SUCCESS));
            let json: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
            let c = &json["channels"][0];
            assert_eq!(c["readers"], 0, "{c}");
            assert!(c["written"].as_u64().unwrap() >= 999, "{c}");
            c["lost"].as_u64().unwrap()
        };
        assert_eq!((lost("fifo"), lost("latest")), (0, 0));
    }

    #[test]
    fn task_endpoints_in_the_description_reproduce_a_link_flag() {
        let dir = TempDir::new("endpoints");
        let stats = dir.path("stats.json");
        let system = |writer: &str, reader: &str| {
            format!(
                "partitions:\n  - {{name: p, kind: rt, cpus: 0, tasks: [{{name: t1, budget: 1ms, period: 4ms}}, {{name: t2, budget: 1ms, period: 8ms}}]}}\n  - {{name: q, kind: rt, cpus: 1, tasks: [{{name: r1, budget: 1ms, period: 4ms}}, {{name: r2, budget: 2ms, period: 16ms}}]}}\nchannels:\n  - {{name: c, kind: fifo, message_size: 8, depth: 4, writer: {writer}, readers: [{reader}]}}\n"
            )
        };
        let run = |file: &str, extra: &[&str]| {
            let mut args = vec![file, "--for", "64ms", "--stats-json", &stats];
            args.extend_from_slice(extra);
            assert_eq!(code(&args), format!("{:?}", ExitCode::SUCCESS));
            std::fs::read_to_string(&stats).unwrap()
        };
        let flagged = dir.file("flag.yaml", &system("p", "q"));
        let by_flag = run(&flagged, &["--link", "c=t2>r2"]);
        let described = dir.file("described.yaml", &system("p/t2", "q/r2"));
        let by_description = run(&described, &[]);
        assert!(by_flag.contains("\"name\": \"p/t2 -> q/r2\""), "{by_flag}");
        assert_eq!(by_description, by_flag);
    }

    #[test]
    fn for_seed_and_suspend_are_honoured() {
        let dir = TempDir::new("flags");
        let file = dir.file("rm.yaml", RM);
        let stats = dir.path("stats.json");
        let args = [
            file.as_str(),
            "--for",
            "24ms",
            "--suspend",
            "5ms:7ms",
            "--exec",
            "uniform:50-100",
            "--seed",
            "3",
            "--stats-json",
            &stats,
        ];
        assert_eq!(code(&args), format!("{:?}", ExitCode::SUCCESS));
        let first = std::fs::read_to_string(&stats).unwrap();
        assert!(
            first.contains("\"duration_ns\": 24000000,") && first.contains("\"seed\": 3,"),
            "{first}"
        );
        assert!(
            first.contains("\"windows\": null"),
            "the documented key, null without windows: {first}"
        );
        code(&args);
        assert_eq!(
            std::fs::read_to_string(&stats).unwrap(),
            first,
            "same seed, same statistics"
        );
    }

    #[test]
    fn a_suspension_runs_the_stop_protocol_in_the_described_order() {
        let dir = TempDir::new("stop");
        let yaml = "partitions:\n\
                    - {name: a, kind: rt, cpus: 0, tasks: [{name: t, cmd: t, budget: 1ms, period: 4ms}]}\n\
                    - {name: b, kind: rt, cpus: 1, tasks: [{name: u, cmd: u, budget: 1ms, period: 4ms, resume: restartable}]}\n\
                    stop_start: {order: [b, a], ack_deadline: 1ms}\n";
        let file = dir.file("stop.yaml", yaml);
        let stats = dir.path("stats.json");
        let args = [
            &file,
            "--for",
            "12ms",
            "--suspend",
            "6ms:2ms",
            "--stats-json",
            &stats,
        ];
        assert_eq!(code(&args), format!("{:?}", ExitCode::SUCCESS));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        let events: Vec<String> = report["stops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let who = e.get("task").or(e.get("partition"));
                let who = who.and_then(|w| w.as_str()).unwrap_or("");
                format!("{} {who} {}", e["event"].as_str().unwrap(), e["wall_ns"])
            })
            .collect();
        // Both tasks wait for their release at 8 at the request: acknowledged at once.
        assert_eq!(
            events,
            [
                "suspend_request  6000000",
                "partition_suspended b 6000000",
                "partition_suspended a 6000000",
                "system_suspended  6000000",
                "resume_request  8000000",
                "partition_resumed a 8000000",
                "partition_resumed b 8000000",
                "system_resumed  8000000",
                "first_fresh_frame u 9000000",
            ]
        );
    }

    #[test]
    fn window_schedules_log_run_grants_with_process_behaviour() {
        let dir = TempDir::new("windows");
        let yaml = "windows: [{cpu: 0, length: 10, sc_partition: [{cmd: ./a, budget: 4}, {cmd: ./b, budget: 3}]}]\n";
        let file = dir.file("demos.yaml", yaml);
        let log = dir.path("log.jsonl");
        let args = [
            file.as_str(),
            "--for",
            "20ms",
            "--process",
            "./a=yield:1ms",
            "--schedule-log",
            &log,
        ];
        assert_eq!(code(&args), format!("{:?}", ExitCode::SUCCESS));
        let times: Vec<(String, String)> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| {
                assert!(l.contains("\"event\":\"run\""), "{l}");
                let t = l[l.find("\"t_ns\":").unwrap() + 7..]
                    .split(',')
                    .next()
                    .unwrap()
                    .to_string();
                let cmd = l[l.find("\"cmd\":").unwrap() + 6..]
                    .split(',')
                    .next()
                    .unwrap()
                    .to_string();
                (t, cmd)
            })
            .collect();
        let expected = [
            ("0", "./a"),
            ("1000000", "./b"),
            ("10000000", "./a"),
            ("11000000", "./b"),
            ("20000000", "./a"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(t, c)| (t.to_string(), format!("\"{c}\"")))
            .collect();
        assert_eq!(times, expected);
        let fail = format!("{:?}", ExitCode::from(1));
        assert_eq!(
            code(&[&file, "--process", "./nothing=busy"]),
            fail,
            "a behaviour for no process"
        );
    }

    /// A test program of bulkhead-runtime (`bulkhead-spin`, `bulkhead-probe`), built by
    /// `cargo build --release` or `cargo test`.
    fn runtime_program(name: &str) -> String {
        let exe = std::env::current_exe().unwrap();
        let target = exe.ancestors().nth(3).unwrap().to_path_buf();
        ["release", "debug"]
            .iter()
            .map(|p| target.join(p).join(name))
            .find(|p| p.exists())
            .unwrap_or_else(|| {
                panic!(
                    "no bulkhead-probe in {}: cargo build --release",
                    target.display()
                )
            })
            .display()
            .to_string()
    }

    /// On every scenario of the DEmOS scenario corpus not timed by its processes,
    /// `bulkhead run` (real cgroups, real processes burning their budgets) and
    /// `bulkhead sim` write byte-identical schedule logs, with the corpus's grants.
    #[test]
    #[ignore = "needs root: cgroups"]
    fn run_and_sim_write_the_same_schedule_log() {
        #[derive(Parser)]
        struct RunCli {
            #[command(flatten)]
            args: crate::run::Args,
        }
        let dir = TempDir::new("conformance");
        let (spin, probe) = (
            runtime_program("bulkhead-spin"),
            runtime_program("bulkhead-probe"),
        );
        // Not the scenarios with an init phase either: `run --timeout` counts from the
        // start, and a real init phase lasts as long as its sandboxed processes take to
        // start, not the corpus's `init:DUR`, so a loaded machine can use up the timeout.
        let scenarios: Vec<_> = bulkhead_windows::corpus::all()
            .into_iter()
            .filter(|s| !s.header.is_timed_by_processes() && !s.header.has_init_phase())
            .collect();
        assert!(scenarios.len() >= 14, "{} scenarios", scenarios.len());
        for s in &scenarios {
            let (system, _) = s.real_system(&spin, &probe);
            let yaml = bulkhead_model::to_canonical_yaml(&system);
            let file = dir.file(&format!("{}.yaml", s.name), &yaml);
            let (run_log, sim_log) = (
                dir.path(&format!("{}-run.jsonl", s.name)),
                dir.path(&format!("{}-sim.jsonl", s.name)),
            );
            let (until, seed) = (
                format!("{}us", s.header.until / 1000),
                s.header.seed.to_string(),
            );
            let run_args = RunCli::parse_from([
                "run",
                &file,
                "--timeout",
                &until,
                "--seed",
                &seed,
                "--schedule-log",
                &run_log,
            ])
            .args;
            assert_eq!(
                format!("{:?}", crate::run::run(run_args)),
                format!("{:?}", ExitCode::SUCCESS),
                "bulkhead run {}",
                s.name
            );
            let sim_args = [
                &file,
                "--for",
                &until,
                "--seed",
                &seed,
                "--schedule-log",
                &sim_log,
            ];
            assert_eq!(code(&sim_args), format!("{:?}", ExitCode::SUCCESS));
            let (run_log, sim_log) = (
                std::fs::read_to_string(&run_log).unwrap(),
                std::fs::read_to_string(&sim_log).unwrap(),
            );
            assert_eq!(
                sim_log.lines().count(),
                s.expected.len(),
                "{}: {sim_log}",
                s.name
            );
            assert_eq!(run_log, sim_log, "scenario {}", s.name);
        }
    }

    #[test]
    fn a_task_can_run_under_an_io_server() {
        let dir = TempDir::new("io");
        let yaml = "partitions: [{name: q, kind: rt, cpus: 0, tasks: [{name: bh, cmd: x, budget: 300us, period: 1ms}]}]\n";
        let file = dir.file("io.yaml", yaml);
        let stats = dir.path("stats.json");
        let jobs = |extra: &[&str]| {
            let mut args = vec![file.as_str(), "--for", "10ms", "--stats-json", &stats];
            args.extend_from_slice(extra);
            assert_eq!(code(&args), format!("{:?}", ExitCode::SUCCESS));
            let text = std::fs::read_to_string(&stats).unwrap();
            let field = |name: &str| {
                let at = text.find(&format!("\"{name}\": ")).unwrap() + name.len() + 4;
                text[at..].split(',').next().unwrap().to_string()
            };
            (field("jobs"), field("misses"))
        };
        assert_eq!(jobs(&[]), ("10".to_string(), "0".to_string()));
        // DriveOS 4.1: an I/O server of 10 % of the task's 1 ms period gives it 1 ms of
        // CPU in 10 ms: three 300 us jobs complete, the rest miss.
        let (done, misses) = jobs(&["--task-server", "q/bh=io:100"]);
        assert_eq!(done, "3");
        assert_ne!(misses, "0");
        let fail = format!("{:?}", ExitCode::from(1));
        assert_eq!(code(&[&file, "--task-server", "nobody=cbs"]), fail);
        assert!(Cli::try_parse_from(["sim", "x.yaml", "--task-server", "bh=io:0"]).is_err());
    }

    #[test]
    fn a_server_declaration_gives_the_stats_of_the_flag_and_the_flags_win() {
        let dir = TempDir::new("declared");
        let task = "{name: bh, budget: 300us, period: 1ms";
        let plain = format!("partitions: [{{name: q, kind: rt, cpus: 0, tasks: [{task}}}]}}]\n");
        let plain = dir.file("plain.yaml", &plain);
        let on_task = format!(
            "partitions: [{{name: q, kind: rt, cpus: 0, tasks: [{task}, server: 'io:100'}}]}}]\n"
        );
        let on_task = dir.file("task.yaml", &on_task);
        let on_partition = format!(
            "partitions: [{{name: q, kind: rt, cpus: 0, server: 'io:100', tasks: [{task}}}]}}]\n"
        );
        let on_partition = dir.file("partition.yaml", &on_partition);
        let stats_path = dir.path("stats.json");
        let stats = |args: &[&str]| {
            let mut argv = vec!["--for", "10ms", "--stats-json", &stats_path];
            argv.extend_from_slice(args);
            assert_eq!(code(&argv), format!("{:?}", ExitCode::SUCCESS), "{argv:?}");
            std::fs::read_to_string(&stats_path).unwrap()
        };
        let io = stats(&[&plain, "--task-server", "q/bh=io:100"]);
        assert_ne!(io, stats(&[&plain]), "the I/O server changes the stats");
        assert_eq!(stats(&[&on_task]), io);
        assert_eq!(
            stats(&[&on_task, "--task-server", "bh=none"]),
            stats(&[&plain])
        );
        assert_eq!(stats(&[&on_task, "--server", "none"]), stats(&[&plain]));
        assert_eq!(stats(&[&on_partition]), io);
        assert_eq!(
            stats(&[&on_partition, "--task-server", "q/bh=none"]),
            stats(&[&plain])
        );
    }

    #[test]
    fn invalid_inputs_exit_1_with_a_message() {
        let dir = TempDir::new("invalid");
        let fail = format!("{:?}", ExitCode::from(1));
        let bad = dir.file("bad.yaml", "partitions: [{name: p, kind: rt, cpus: 0, tasks: [{name: t, cmd: x, budget: 0ms, period: 1ms}]}]\n");
        assert_eq!(code(&[&bad]), fail);
        let be_only = dir.file(
            "be.yaml",
            "partitions: [{name: p, kind: be, cpus: 0, processes: [{cmd: x}]}]\n",
        );
        assert_eq!(code(&[&be_only]), fail, "nothing to simulate");
        let rm = dir.file("rm.yaml", RM);
        assert_eq!(code(&[&rm, "--link", "nochannel=t1>t2"]), fail);
        let unwritable = dir.path("missing-dir/log.jsonl");
        assert_eq!(code(&[&rm, "--schedule-log", &unwritable]), fail);
    }

    #[test]
    fn bad_flag_values_are_usage_errors() {
        for argv in [
            vec!["sim", "x.yaml", "--for", "ten"],
            vec!["sim", "x.yaml", "--suspend", "5ms"],
            vec!["sim", "x.yaml", "--exec", "uniform:90-10"],
            vec!["sim", "x.yaml", "--arrivals", "bursty"],
            vec!["sim", "x.yaml", "--server", "magic"],
            vec!["sim", "x.yaml", "--process", "cmd=dance"],
            vec!["sim", "x.yaml", "--all-cpus", "3-1"],
            vec!["sim", "x.yaml", "--mode-switch", "5ms"],
            vec!["sim", "x.yaml", "--mode-switch", "soon:highway"],
        ] {
            let err = Cli::try_parse_from(&argv)
                .err()
                .unwrap_or_else(|| panic!("{argv:?} accepted"));
            assert_eq!(err.exit_code(), 2, "{argv:?}");
        }
    }
}
