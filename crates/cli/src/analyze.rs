//! `bulkhead analyze`: prove what can be proved about a system description.

use crate::common::load_system;
use crate::fail::{fail, INVALID};
use crate::out::{out, outln};
use bulkhead_analysis::shared::FairServer;
use bulkhead_analysis::system::{analyze_system_with, Options};
use bulkhead_analysis::text::render_text;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 when every task, partition, CPU and window is schedulable; \
1 when a verdict fails or the description is invalid; 2 on a usage error. The verdicts with \
the platform's stall (`platform:`) are reported beside them and do not change the status.\n\
See docs/analysis.md for the tests behind each verdict and docs/platform.md for the stall."
)]
pub struct Args {
    /// System description (YAML; native or DEmOS configuration)
    file: PathBuf,
    /// Print one JSON document (`tasks`, `partitions`, `cpus`, `windows`, `warnings`, and
    /// `with_platform`: the verdicts with the description's platform stall) instead of text
    #[arg(long)]
    json: bool,
    /// SCHED_DEADLINE bandwidth cap per CPU in percent (the kernel's sched_rt_runtime_us/sched_rt_period_us);
    /// the rest of each second is RT throttling of SCHED_FIFO tasks on CPUs shared with be partitions
    #[arg(long, value_name = "PERCENT", default_value_t = 95, value_parser = clap::value_parser!(u64).range(1..=100))]
    deadline_cap: u64,
    /// Find per CPU cluster of the power section the lowest static frequency at which
    /// every verdict passes, and the energy per hyperperiod saved (docs/power.md)
    #[arg(long)]
    min_energy: bool,
}

pub fn run(args: Args) -> ExitCode {
    let loaded = match load_system(&args.file) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let options = Options {
        deadline_cap: (args.deadline_cap * 10_000, 1_000_000),
        fair_server: FairServer::read(bulkhead_os::bandwidth::fair_servers(std::path::Path::new(
            bulkhead_os::bandwidth::FAIR_SERVER_DIR,
        ))),
        ..Options::default()
    };
    let system = match crate::common::solved_system(&loaded.system, &args.file) {
        Ok(system) => system,
        Err(code) => return code,
    };
    let report = analyze_system_with(&system, &options);
    let stalls = bulkhead_analysis::platform::stall_verdicts(&system, &options);
    let energy = match args.min_energy {
        true => match bulkhead_analysis::energy::min_energy(&system, &options) {
            Ok(found) => Some(found),
            Err(e) => {
                return fail(format!("{}: {e}", args.file.display()));
            }
        },
        false => None,
    };
    if args.json {
        let mut json: serde_json::Value =
            serde_json::from_str(&report.to_json()).expect("the report is JSON");
        if let Some(found) = &energy {
            json["min_energy"] = serde_json::to_value(found).expect("serializes");
        }
        if let Some(v) = &stalls {
            json["with_platform"] = serde_json::to_value(v).expect("serializes");
        }
        outln!(
            "{}",
            serde_json::to_string_pretty(&json).expect("serializes")
        );
    } else {
        out!("{}", render_text(&report, &args.file.display().to_string()));
        if let Some(v) = &stalls {
            out!("{}", bulkhead_analysis::platform::render_stall_text(v));
        }
        if let Some(found) = &energy {
            out!("{}", min_energy_text(found));
        }
    }
    let all_found = energy
        .as_ref()
        .is_none_or(|f| f.clusters.iter().all(|c| c.frequency_hz.is_some()));
    if report.schedulable && all_found {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(INVALID)
    }
}

fn min_energy_text(found: &bulkhead_analysis::energy::MinEnergy) -> String {
    let mut text = String::from("lowest static frequencies:\n");
    for c in &found.clusters {
        let mhz = |hz: u64| hz as f64 / 1e6;
        text += &match c.frequency_hz {
            Some(hz) => format!(
                "  {} (CPUs {}): {} MHz of {} MHz\n",
                c.cluster,
                c.cpus,
                mhz(hz),
                mhz(c.max_frequency_hz)
            ),
            None => format!(
                "  {} (CPUs {}): none passes, not even {} MHz\n",
                c.cluster,
                c.cpus,
                mhz(c.max_frequency_hz)
            ),
        };
    }
    text + &format!(
        "energy per hyperperiod ({} ns): {:.6} J, {:.6} J at the top frequencies, {:.6} J saved\n",
        found.hyperperiod_ns, found.joules, found.joules_at_max, found.saved_joules
    )
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

    /// Runs `analyze` on `yaml` written to a temporary file; returns the exit code's Debug form.
    fn exit_of(yaml: &str, name: &str, extra: &[&str]) -> String {
        let path = std::env::temp_dir().join(format!(
            "bulkhead-analyze-{}-{name}.yaml",
            std::process::id()
        ));
        std::fs::write(&path, yaml).unwrap();
        let mut argv = vec!["analyze", path.to_str().unwrap()];
        argv.extend_from_slice(extra);
        let code = run(Cli::parse_from(argv).args);
        std::fs::remove_file(&path).unwrap();
        format!("{code:?}")
    }

    const OK: &str = "partitions:\n  - {name: p, kind: rt, cpus: 0, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}\n";
    const MISS: &str = "partitions:\n  - {name: p, kind: rt, cpus: 0, tasks: [{name: t, cmd: x, budget: 11ms, period: 10ms}]}\n";
    const EDF_96: &str = "partitions:\n  - {name: p, kind: rt, cpus: 0, scheduler: edf, tasks: [{name: t, cmd: x, budget: 96ms, period: 100ms}]}\n";

    #[test]
    fn exit_codes_follow_the_verdict() {
        let ok = format!("{:?}", ExitCode::SUCCESS);
        let fail = format!("{:?}", ExitCode::from(1));
        assert_eq!(exit_of(OK, "ok", &[]), ok);
        assert_eq!(exit_of(MISS, "miss", &["--json"]), fail);
        assert_eq!(exit_of(EDF_96, "edf", &[]), fail);
        assert_eq!(exit_of(EDF_96, "edf-cap", &["--deadline-cap", "100"]), ok);
        assert_eq!(exit_of("partitions: 3\n", "invalid", &[]), fail);
    }
}
