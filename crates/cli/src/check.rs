//! `bulkhead check`: validate a description, print a summary or its canonical form.

use crate::common::{load_system_on, this_machine};
use crate::out::{out, outln};
use bulkhead_model::units::format_duration;
use bulkhead_model::{PartitionKind, System};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// System description (YAML; native or DEmOS configuration); `-` reads standard input
    file: PathBuf,
    /// Print the normalized description as YAML (loads back to the same model)
    #[arg(long)]
    canonical: bool,
    /// Check only what holds on any machine: not this machine's CPUs and its kernel's
    /// SCHED_DEADLINE period bounds (for a description meant for another machine)
    #[arg(long)]
    any_machine: bool,
}

pub fn run(args: Args) -> ExitCode {
    let host = (!args.any_machine).then(this_machine);
    let (loaded, text) = match load_system_on(&args.file, host.as_ref()) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    if args.canonical {
        out!("{}", bulkhead_model::to_canonical_yaml(&loaded.system));
    } else {
        let system = match crate::common::solved_system(&loaded.system, &args.file) {
            Ok(system) => system,
            Err(code) => return code,
        };
        let workdir = crate::common::workdir(&loaded.system, &args.file);
        let described = (args.file.as_path(), text.as_str());
        if let Err(why) = crate::run_pipes::check_programs(&loaded.system, described, &workdir) {
            return crate::fail::fail(why);
        }
        if let Err(code) = crate::common::resolve_programs(&system, described) {
            return code;
        }
        if let Err(e) = bulkhead_plan::scope::check(&loaded.system) {
            return crate::common::refuse_at(described, &e.key_path, e.why);
        }
        if host.is_some() {
            if let Err(code) = crate::common::check_cgroups(&system, described) {
                return code;
            }
        }
        outln!("{}: ok", crate::common::name(&args.file));
        outln!("{}", summary(&system));
        if !loaded.system.pipelines.is_empty() {
            let n = loaded.system.pipelines.len();
            outln!("  pipelines:  {n} (solved; their stages are counted as tasks)");
        }
    }
    ExitCode::SUCCESS
}

/// One line per part of the system: partitions, tasks, processes, windows, channels.
fn summary(s: &System) -> String {
    let rt = s
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Rt)
        .count();
    let tasks: usize = s.partitions.iter().map(|p| p.tasks.len()).sum();
    let processes: usize = s.partitions.iter().map(|p| p.processes.len()).sum();
    // Starts from 0.0: an empty f64 sum is -0.0.
    let utilization = s
        .partitions
        .iter()
        .flat_map(|p| &p.tasks)
        .fold(0.0, |u, t| u + t.utilization());
    let mut lines = vec![
        format!(
            "  partitions: {} ({rt} rt, {} be)",
            s.partitions.len(),
            s.partitions.len() - rt
        ),
        format!("  tasks:      {tasks} (total utilization {utilization:.3})"),
        format!("  processes:  {processes}"),
    ];
    if !s.windows.is_empty() {
        let frame = format_duration(s.major_frame());
        lines.push(format!(
            "  windows:    {} (major frame {frame})",
            s.windows.len()
        ));
    }
    lines.push(format!("  channels:   {}", s.channels.len()));
    let servers = s
        .partitions
        .iter()
        .filter(|p| p.interface.is_some())
        .count();
    if servers > 0 {
        lines.push(format!(
            "  servers:    {servers} partitions with a resource interface"
        ));
    }
    if let Some(m) = &s.modes {
        lines.push(format!(
            "  modes:      {} (initial {}), {} switches allowed",
            m.table.len(),
            m.initial,
            m.allowed().len()
        ));
    }
    if !s.buses.is_empty() {
        let clients: usize = s.buses.iter().map(|b| b.clients.len()).sum();
        let plural = if clients == 1 { "" } else { "s" };
        lines.push(format!(
            "  buses:      {} ({clients} client partition{plural})",
            s.buses.len()
        ));
    }
    lines.join("\n")
}
