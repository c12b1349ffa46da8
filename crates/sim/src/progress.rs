//! Running a simulation with a progress bar on stderr (feature `progress`): shown
//! only when stderr is a terminal and the run takes long enough to need one; when
//! stderr is not a terminal, a long run prints a progress line now and then instead.

use crate::engine::Sim;
use crate::report::Report;
use bulkhead_model::Nanos;
use bulkhead_trace::Sink;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Simulated time run between two looks at the clock, at most.
const MAX_STEP: Nanos = 1_000_000_000;
/// Wall time before the first progress line (stderr not a terminal), and between two.
const FIRST_LINE: Duration = Duration::from_secs(2);
const LINE_EVERY: Duration = Duration::from_secs(10);

/// Runs `sim` to its end `until`; after half a second on a terminal, a bar shows
/// the simulated time reached; elsewhere a line `bulkhead sim: progress ...` after 2 s
/// and then every 10 s.
pub fn run_with_progress(mut sim: Sim<'_>, until: Nanos, sink: &mut dyn Sink) -> Report {
    let step = (until / 200).clamp(1, MAX_STEP);
    let started = Instant::now();
    let terminal = std::io::stderr().is_terminal();
    let mut next_line = started + FIRST_LINE;
    let mut bar: Option<ProgressBar> = None;
    while !sim.finished() {
        let limit = sim.now().saturating_add(step);
        sim.run_until(limit, sink);
        if !terminal && Instant::now() >= next_line {
            next_line += LINE_EVERY;
            let (now, end) = (sim.now().min(until) as f64 / 1e9, until as f64 / 1e9);
            eprintln!(
                "bulkhead sim: progress: {now:.3} s of {end:.3} s simulated ({:.1}%) after {} s",
                100.0 * now / end.max(1e-9),
                started.elapsed().as_secs()
            );
        }
        if bar.is_none() && terminal && started.elapsed() > Duration::from_millis(500) {
            let b = ProgressBar::new(until.max(1) / 1_000_000);
            let style = ProgressStyle::with_template(
                "{bar:40} {pos}/{len} ms simulated, {elapsed} ({eta} left)",
            )
            .expect("a valid template");
            b.set_style(style);
            bar = Some(b);
        }
        if let Some(b) = &bar {
            b.set_position(sim.now().min(until) / 1_000_000);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    sim.report()
}
