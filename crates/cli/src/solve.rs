//! `bulkhead solve`: derive each pipeline's periods, budgets and buffer depths from its
//! end-to-end QoS (Boomerang III-E; docs/pipes.md).

use crate::common::{infeasible, load_system, name};
use crate::fail::fail;
use crate::out::{out, outln};
use bulkhead_analysis::pipes::{render_text, solve, Solution};
use bulkhead_analysis::system::Options;
use bulkhead_model::System;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 when every pipeline is feasible; 1 when one is not (the \
message names the stage and the test) or the description is invalid; 2 on a usage error."
)]
pub struct Args {
    /// System description (YAML) with a `pipelines` section; `-` reads standard input
    file: PathBuf,
    /// Print one JSON document `{"pipelines": [...]}` instead of text
    #[arg(long, conflicts_with = "canonical")]
    json: bool,
    /// Print the description in canonical form with the solved periods and budgets filled in
    #[arg(long)]
    canonical: bool,
}

pub fn run(args: Args) -> ExitCode {
    let loaded = match load_system(&args.file) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let solutions = solve(&loaded.system, &Options::default());
    if let Some(why) = infeasible(&solutions) {
        if args.json {
            outln!("{}", json(&solutions));
        }
        return fail(format!("{}: {why}", name(&args.file)));
    }
    if args.json {
        outln!("{}", json(&solutions));
    } else if args.canonical {
        let filled = with_solved_values(&loaded.system, &solutions);
        out!("{}", bulkhead_model::to_canonical_yaml(&filled));
    } else {
        out!("{}", render_text(&solutions));
    }
    ExitCode::SUCCESS
}

fn json(solutions: &[Solution]) -> String {
    let doc = serde_json::json!({ "pipelines": solutions });
    serde_json::to_string_pretty(&doc).expect("serializes")
}

/// `system` with every stage's period and budget set to the solved ones.
fn with_solved_values(system: &System, solutions: &[Solution]) -> System {
    let mut out = system.clone();
    for (p, s) in out.pipelines.iter_mut().zip(solutions) {
        for (stage, solved) in p.stages.iter_mut().zip(&s.stages) {
            stage.period = Some(solved.period_ns);
            stage.budget = Some(solved.budget_ns);
        }
    }
    out
}
