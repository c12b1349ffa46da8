//! The human-readable report of `bulkhead analyze`.

use crate::bounds::Quick;
use crate::system::{PartitionVerdict, Report};
use crate::task::Time;
use crate::windows::{Fit, WindowReport};
use bulkhead_model::units::format_duration;
use std::fmt::Write;

/// Renders `report` as the text an RT engineer reads: per CPU and partition, each task's
/// C, T, D, priority, WCRT, slack and verdict, then the binding constraints and warnings.
pub fn render_text(report: &Report, file: &str) -> String {
    let mut out = String::new();
    let verdict = if report.schedulable {
        "SCHEDULABLE"
    } else {
        "NOT SCHEDULABLE"
    };
    let _ = writeln!(out, "{file}: {verdict}");
    for p in &report.partitions {
        partition_text(&mut out, report, p);
    }
    if let Some(w) = &report.windows {
        windows_text(&mut out, w);
    }
    cpus_text(&mut out, report);
    if let Some(modes) = &report.modes {
        out += &crate::modes::render_text(modes);
    }
    for w in &report.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// Partition `p`'s lines: its verdict, its tasks' table, what binds, its interfaces.
fn partition_text(out: &mut String, report: &Report, p: &PartitionVerdict) {
    let _ = writeln!(
        out,
        "\npartition {} ({}, {}) on {}: U = {:.1}%{}  {}",
        p.name,
        p.kind,
        p.scheduler,
        on_cpus(&p.cpus),
        p.utilization * 100.0,
        quick_text(p.liu_layland, p.hyperbolic),
        if p.schedulable { "ok" } else { "FAILS" }
    );
    let _ = writeln!(
        out,
        "  {:<20} {:>4} {:>10} {:>10} {:>10} {:>4} {:>10} {:>10} {:>10}  verdict",
        "task", "cpu", "C", "T", "D", "prio", "WCRT", "slack", "C max"
    );
    for t in report.tasks.iter().filter(|t| t.partition == p.name) {
        let _ = writeln!(
            out,
            "  {:<20} {:>4} {:>10} {:>10} {:>10} {:>4} {:>10} {:>10} {:>10}  {}",
            t.name,
            t.cpu,
            fmt(t.wcet_ns),
            fmt(t.period_ns),
            fmt(t.deadline_ns),
            t.priority.map_or("-".to_string(), |p| p.to_string()),
            t.wcrt_ns.map_or(
                if t.test == "rta" { "unbounded" } else { "-" }.to_string(),
                fmt
            ),
            t.slack_ns.map_or("-".to_string(), signed),
            t.wcet_limit_ns.map_or("-".to_string(), fmt),
            if t.schedulable { "ok" } else { "MISS" }
        );
    }
    let _ = writeln!(out, "  binding: {}", p.binding);
    for t in report
        .tasks
        .iter()
        .filter(|t| t.partition == p.name && !t.schedulable)
    {
        let _ = writeln!(out, "  {}: {}", t.name, t.binding);
    }
    for i in &p.interfaces {
        let budget = i.budget_ns.map_or(
            "not established (no Θ up to full capacity passes)".to_string(),
            fmt,
        );
        let bw = i
            .bandwidth
            .map_or(String::new(), |b| format!(" (bandwidth {:.1}%)", b * 100.0));
        let model = if i.concurrency > 1 {
            format!("multiprocessor periodic resource (m = {})", i.concurrency)
        } else {
            "periodic resource".to_string()
        };
        let _ = writeln!(
            out,
            "  interface on CPU {}: {model} Π = {}, minimal Θ = {}{}",
            i.cpu,
            fmt(i.period_ns),
            budget,
            bw
        );
    }
}

/// The window schedule's lines: each SC slice's fit, each partition's supply.
fn windows_text(out: &mut String, w: &WindowReport) {
    let _ = writeln!(
        out,
        "\nwindow schedule: major frame {}",
        fmt(w.major_frame_ns)
    );
    for s in &w.slices {
        let _ = writeln!(
            out,
            "  window {} slice {} {}: SC `{}` needs up to {} of {}: {}",
            s.window,
            s.slice,
            on_cpus(&s.cpus),
            s.partition,
            fmt(s.demand_ns),
            fmt(s.window_ns),
            match s.verdict {
                Fit::Fits => "fits",
                Fit::Overruns => "OVERRUNS",
            }
        );
    }
    for s in &w.supply {
        let _ = writeln!(
            out,
            "  supply to `{}` on {}: {} per frame ({:.1}%), longest gap {}",
            s.partition,
            on_cpus(&s.cpu),
            fmt(s.per_frame_ns),
            s.share * 100.0,
            fmt(s.max_blackout_ns)
        );
    }
}

/// The CPUs' lines: per CPU its loads and verdict.
fn cpus_text(out: &mut String, report: &Report) {
    let _ = writeln!(out, "\nCPUs:");
    for c in &report.cpus {
        let mut parts = Vec::new();
        if c.rt_utilization > 0.0 || c.window_load.is_none() {
            parts.push(format!("rt U = {:.1}%", c.rt_utilization * 100.0));
        }
        if let Some(b) = c.deadline_bandwidth {
            let cap = c.deadline_cap * 100.0;
            parts.push(format!("SCHED_DEADLINE {:.1}% of cap {cap:.0}%", b * 100.0));
        }
        if let Some(l) = c.window_load {
            parts.push(format!("SC windows {:.1}%", l * 100.0));
        }
        if let Some(l) = c.server_load {
            parts.push(format!("server interfaces {:.1}%", l * 100.0));
        }
        let verdict = if c.schedulable { "ok" } else { "FAILS" };
        let _ = writeln!(
            out,
            "  {}: {}: {verdict} ({})",
            on_cpus(&c.cpu),
            parts.join(", "),
            c.binding
        );
        if let Some(note) = &c.best_effort {
            let _ = writeln!(out, "    {note}");
        }
    }
}

/// `CPU 0-1`; the name `all` (no `system.cpus` to resolve `cpus: all` against) reads
/// as what it is: every CPU, analysed as one.
fn on_cpus(cpus: &str) -> String {
    match cpus {
        "all" => "all CPUs (as one: system.cpus not set)".into(),
        cpus => format!("CPU {cpus}"),
    }
}

fn quick_text(ll: Quick, hb: Quick) -> String {
    let name = |q: Quick| match q {
        Quick::Passed => "passed",
        Quick::Inconclusive => "inconclusive",
        Quick::NotApplicable => "n/a",
    };
    if ll == Quick::NotApplicable && hb == Quick::NotApplicable {
        return String::new();
    }
    format!(", Liu & Layland {}, hyperbolic {}", name(ll), name(hb))
}

/// A duration in the model's notation, or with three decimals when it is not round.
fn fmt(ns: Time) -> String {
    let exact = format_duration(ns);
    if !exact.ends_with("ns") || ns < 1_000 {
        return exact;
    }
    let (unit, div) = match ns {
        n if n >= 1_000_000_000 => ("s", 1e9),
        n if n >= 1_000_000 => ("ms", 1e6),
        _ => ("us", 1e3),
    };
    format!("{:.3}{unit}", ns as f64 / div)
}

fn signed(ns: i64) -> String {
    if ns < 0 {
        format!("-{}", fmt(ns.unsigned_abs()))
    } else {
        fmt(ns as Time)
    }
}
