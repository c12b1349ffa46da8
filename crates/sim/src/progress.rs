//! Running a simulation with a progress bar on stderr (feature `progress`): shown
//! only when stderr is a terminal and the run takes long enough to need one.

use crate::engine::Sim;
use crate::report::Report;
use crate::spec::Nanos;
use bulkhead_trace::Sink;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Runs `sim` to its end `until`; after half a second on a terminal, a bar shows
/// the simulated time reached.
pub fn run_with_progress(mut sim: Sim<'_>, until: Nanos, sink: &mut dyn Sink) -> Report {
    let step = (until / 200).max(1);
    let started = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    while !sim.finished() {
        let limit = sim.now().saturating_add(step);
        sim.run_until(limit, sink);
        if bar.is_none()
            && started.elapsed() > Duration::from_millis(500)
            && std::io::stderr().is_terminal()
        {
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
