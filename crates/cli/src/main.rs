//! `bulkhead`: the one command-line tool.
//!
//! Exit codes: 0 ok, 1 invalid input (or a failed verdict), 2 usage error.
//! Each subcommand lives in its own module exposing `Args` (clap) and
//! `run(args) -> ExitCode`.

#![deny(clippy::print_stdout)]

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod analyze;
mod can;
mod can_utils;
mod check;
mod common;
mod ctl;
mod demos;
mod demos_config;
mod demos_log;
mod fail;
mod janitor;
mod out;
mod probe;
mod report;
mod run;
mod run_pipes;
mod sim;
mod solve;
mod stage;
// subcommand modules: one `mod` line each, in alphabetical order

#[derive(Parser)]
#[command(
    name = "bulkhead",
    version,
    about = "Mixed-criticality vehicle management runtime for Linux"
)]
struct Cli {
    /// Largest input read (description, DBC file, report's log or trace, standard
    /// input), e.g. 64MiB [default: 16MiB; for report's log or trace 1GiB]
    #[arg(long, global = true, value_name = "SIZE",
          value_parser = bulkhead_model::units::parse_size)]
    max_input_size: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Schedulability analysis: WCRT, slack and the binding constraint per task, partition and CPU
    Analyze(analyze::Args),
    /// CAN: bus (virtual, socketcand), replay, dump, send, gen, decode, gateway, map
    Can(can::Args),
    /// Validate a system description and print a summary (or its canonical form)
    Check(check::Args),
    /// Talk to a running system: status, mode switches, suspend and resume
    Ctl(ctl::Args),
    /// Waits for a run's supervisor to end and removes what it left if it was killed
    #[command(hide = true)]
    Janitor(janitor::Args),
    /// Measure the platform's floor: per CPU timer wake-up latencies and stalls, as cyclictest (docs/platform.md)
    Probe(probe::Args),
    /// One self-contained HTML page (or JSON) of a run's or a sim's schedule log or trace: Gantt chart, response times, latencies, throughput
    Report(report::Args),
    /// Run a system for real: rt partitions on reserved CPUs, be partitions and window schedules as cgroups (DEmOS semantics)
    Run(run::Args),
    /// Execute a system description in deterministic simulated time (schedule log, trace, statistics)
    Sim(sim::Args),
    /// Solve pipelines: stage periods, budgets and buffer depths from their end-to-end QoS, with delay bounds
    Solve(solve::Args),
    /// A pipeline stage as `run` starts it (docs/pipes.md)
    #[command(hide = true)]
    Stage(stage::Args),
    // subcommands: one variant each, in alphabetical order
}

fn main() -> ExitCode {
    // `demos-sched` (src/bin/demos-sched.rs) runs `bulkhead demos-sched ARGS`: DEmOS's
    // command line, with its own parser (docs/demos.md).
    let mut argv = std::env::args_os().skip(1);
    if argv.next().is_some_and(|a| a == "demos-sched") {
        return demos::main(argv.collect());
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(fail::USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if let Some(limit) = cli.max_input_size {
        common::set_max_input_size(limit);
    }
    match cli.command {
        Command::Analyze(args) => analyze::run(args),
        Command::Can(args) => can::run(args),
        Command::Check(args) => check::run(args),
        Command::Ctl(args) => ctl::run(args),
        Command::Janitor(args) => janitor::run(args),
        Command::Probe(args) => probe::run(args),
        Command::Report(args) => report::run(args),
        Command::Run(args) => run::run(args),
        Command::Sim(args) => sim::run(args),
        Command::Solve(args) => solve::run(args),
        Command::Stage(args) => stage::run(args),
        // dispatch: one arm each, in alphabetical order
    }
}
