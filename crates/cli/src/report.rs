//! `bulkhead report`: a self-contained HTML page (or JSON) of the figures of a run's or
//! a sim's schedule log or trace.

mod model;
mod read;

use crate::common::{load_system, solved_system, Input};
use crate::fail::fail;
use crate::out::{out, outln};
use model::{Builder, Figures, Gantt, Source};
use read::Format;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(
    after_help = "Reads what `bulkhead run` or `bulkhead sim` wrote with --schedule-log or --trace \
(the format is recognized). Exit status: 0 when the report is written; 1 when the input is empty, \
truncated, of another bulkhead version, larger than --max-input-size (default 1GiB), not a regular \
file (a FIFO, a device, a directory: give `-` to read standard input) or not readable, or an output \
cannot be written; 2 on a usage error.\nSee docs/report.md for what each figure shows."
)]
pub struct Args {
    /// A schedule log (JSON lines) or a Chrome/Perfetto trace written by bulkhead (a
    /// regular file of at most --max-input-size, default 1GiB); `-` reads standard input
    input: PathBuf,
    /// Where to write the report [default: report.html, or standard output for json]
    #[arg(short, long, value_name = "PATH")]
    output: Option<PathBuf>,
    /// html: one self-contained page (works offline); json: the same figures for scripts
    #[arg(long, value_enum, default_value = "html")]
    format: OutputFormat,
    /// The system description, to draw each task's analytic WCRT (as `bulkhead analyze`)
    #[arg(long, value_name = "FILE")]
    system: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OutputFormat {
    Html,
    Json,
}

/// The page; `/*DATA*/` is replaced by the figures and the chart data.
const PAGE: &str = include_str!("report/page.html");

pub fn run(args: Args) -> ExitCode {
    let (mut figures, gantt) = match read_input(&args.input) {
        Ok(read) => read,
        Err(e) => return fail(e),
    };
    match &args.system {
        Some(path) => {
            if let Err(code) = add_analysis(&mut figures, path) {
                return code;
            }
        }
        None => figures
            .notes
            .push("no analytic WCRT: give the system description with --system FILE".into()),
    }
    if figures.channels.is_empty() {
        figures.notes.push(
            "no channel latencies: the input has no channel reads (sim --trace has them)".into(),
        );
    }
    let text = match args.format {
        OutputFormat::Json => serde_json::to_string_pretty(&figures).expect("serializes") + "\n",
        OutputFormat::Html => page(&figures, &gantt),
    };
    let output = match (&args.output, args.format) {
        (Some(path), _) => Some(path.clone()),
        (None, OutputFormat::Html) => Some(PathBuf::from("report.html")),
        (None, OutputFormat::Json) => None,
    };
    match output {
        Some(path) => match std::fs::write(&path, text) {
            Ok(()) => {
                if args.format == OutputFormat::Html {
                    outln!("report: {}", path.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(format!("--output {}: {e}", path.display())),
        },
        None => {
            out!("{text}");
            ExitCode::SUCCESS
        }
    }
}

/// Reads (a regular file, or `-` for standard input, at most `--max-input-size`) and
/// recognizes `path`; errors are `FILE:LINE:COLUMN: message`.
fn read_input(path: &Path) -> Result<(Figures, Gantt), String> {
    let file = crate::common::name(path);
    let bytes = crate::common::read_input(path, Input::Log)?;
    let format = read::detect(&bytes).map_err(|e| format!("{file}:{e}"))?;
    let mut builder = Builder::default();
    match format {
        Format::ScheduleLog => read::schedule_log(&bytes, &mut builder),
        Format::Perfetto => read::perfetto(&bytes, &mut builder),
    }
    .map_err(|e| format!("{file}:{e}"))?;
    let source = Source {
        file,
        format: format.name(),
        bulkhead: bulkhead_trace::perfetto::VERSION,
    };
    Ok(builder.finish(source))
}

/// Adds the analytic WCRT of every task of the system description at `path`.
fn add_analysis(figures: &mut Figures, path: &Path) -> Result<(), ExitCode> {
    let loaded = load_system(path)?;
    let system = solved_system(&loaded.system, path)?;
    let report = bulkhead_analysis::system::analyze_system(&system);
    for task in &mut figures.tasks {
        let verdict = report
            .tasks
            .iter()
            .find(|v| v.partition == task.partition && v.name == task.name);
        if let Some(v) = verdict {
            task.set_wcrt(v.wcrt_ns, v.schedulable);
        }
    }
    add_pipeline_bounds(figures, &loaded.system);
    Ok(())
}

/// Names each sink's pipeline and draws in its analysed delay bounds (as `bulkhead
/// solve` computes them).
fn add_pipeline_bounds(figures: &mut Figures, system: &bulkhead_model::System) {
    let options = bulkhead_analysis::system::Options::default();
    let solutions = bulkhead_analysis::pipes::solve(system, &options);
    for (p, s) in system.pipelines.iter().zip(&solutions) {
        let sinks = (0..p.stages.len()).filter(|&i| p.edges.iter().all(|&(from, _)| from != i));
        for i in sinks {
            let stage = &p.stages[i];
            let figure = figures
                .pipelines
                .iter_mut()
                .find(|f| f.partition == stage.partition && f.sink == stage.name);
            if let Some(f) = figure {
                f.set_bounds(&p.name, s.e2e_delay_bound_ns, s.exact_delay_bound_ns);
            }
        }
    }
}

/// The page with the data embedded (`</` escaped so that it cannot end the script).
fn page(figures: &Figures, gantt: &Gantt) -> String {
    let data = serde_json::json!({"figures": figures, "gantt": gantt});
    let json = serde_json::to_string(&data)
        .expect("serializes")
        .replace("</", "<\\/");
    PAGE.replacen("/*DATA*/", &json, 1)
}
