//! What a trace or schedule log says, gathered by [`Builder`], and the figures computed
//! from it: response times per task, latencies per channel, counter rates, and the
//! execution intervals of the Gantt chart.

use serde::Serialize;
use std::collections::HashMap;

/// Whether a row is an rt task (jobs) or a process of a windowed partition (grants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    Task,
    Process,
}

/// One task or process: what it executed and how its jobs fared.
struct Row {
    partition: String,
    name: String,
    kind: RowKind,
    /// Execution intervals (start, end).
    slices: Vec<(u64, u64)>,
    responses: Vec<u64>,
    misses: Vec<u64>,
    released: u64,
    /// The relative deadline, from the first release.
    deadline_ns: Option<u64>,
}

#[derive(Default)]
struct Channel {
    latencies: Vec<u64>,
    /// Reads whose write is not in the input.
    unmatched: u64,
    losses: u64,
}

/// Gathers what the readers find.
#[derive(Default)]
pub struct Builder {
    rows: Vec<Row>,
    index: HashMap<(String, String), usize>,
    releases: HashMap<(usize, u64), u64>,
    windows: Vec<(u64, u64, String)>,
    channels: Vec<(String, Channel)>,
    counters: Vec<(String, Vec<(u64, u64)>)>,
    /// Per sink task (partition, task): its messages' end-to-end delays.
    messages: Vec<((String, String), Vec<u64>)>,
    end: u64,
    events: u64,
}

impl Builder {
    /// Notes an event at `t` (the input's end is its latest time).
    pub fn saw(&mut self, t: u64) {
        self.end = self.end.max(t);
        self.events += 1;
    }

    pub fn end_ns(&self) -> u64 {
        self.end
    }

    /// The row of `partition`/`name`, made on first sight.
    pub fn row(&mut self, partition: &str, name: &str, kind: RowKind) -> usize {
        if let Some(&i) = self.index.get(&(partition.to_string(), name.to_string())) {
            return i;
        }
        self.rows.push(Row {
            partition: partition.into(),
            name: name.into(),
            kind,
            slices: Vec::new(),
            responses: Vec::new(),
            misses: Vec::new(),
            released: 0,
            deadline_ns: None,
        });
        let i = self.rows.len() - 1;
        self.index.insert((partition.into(), name.into()), i);
        i
    }

    /// Job `job` of `row` is released at `t` with absolute deadline `deadline`.
    pub fn release(&mut self, row: usize, job: u64, t: u64, deadline: u64) {
        let r = &mut self.rows[row];
        r.released += 1;
        r.deadline_ns.get_or_insert(deadline.saturating_sub(t));
        self.releases.insert((row, job), t);
    }

    pub fn slice(&mut self, row: usize, start: u64, end: u64) {
        self.rows[row].slices.push((start, end.max(start)));
    }

    /// A grant slice; the same grant on several CPUs counts once.
    pub fn grant_slice(&mut self, row: usize, start: u64, end: u64) {
        if self.rows[row].slices.last() != Some(&(start, end)) {
            self.slice(row, start, end);
        }
    }

    /// Job `job` of `row` completes with response time `response`.
    pub fn complete(&mut self, row: usize, job: u64, response: u64) {
        self.releases.remove(&(row, job));
        self.rows[row].responses.push(response);
    }

    /// Job `job` of `row` completes at `t` (counted only when its release is known).
    pub fn complete_at(&mut self, row: usize, job: u64, t: u64) {
        if let Some(release) = self.releases.remove(&(row, job)) {
            self.rows[row].responses.push(t.saturating_sub(release));
        }
    }

    pub fn miss(&mut self, row: usize, t: u64) {
        self.rows[row].misses.push(t);
    }

    pub fn window(&mut self, start: u64, end: u64, label: &str) {
        self.windows
            .push((start, end.max(start), label.to_string()));
    }

    fn channel(&mut self, name: &str) -> &mut Channel {
        let i = match self.channels.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                self.channels.push((name.to_string(), Channel::default()));
                self.channels.len() - 1
            }
        };
        &mut self.channels[i].1
    }

    /// A read of a channel message, `latency` after its write (`None`: write unknown).
    pub fn channel_read(&mut self, name: &str, latency: Option<u64>) {
        let channel = self.channel(name);
        match latency {
            Some(l) => channel.latencies.push(l),
            None => channel.unmatched += 1,
        }
    }

    pub fn channel_loss(&mut self, name: &str) {
        self.channel(name).losses += 1;
    }

    /// Named counter `series` has `value` at `t`.
    pub fn counter(&mut self, series: &str, t: u64, value: u64) {
        let i = match self.counters.iter().position(|(n, _)| n == series) {
            Some(i) => i,
            None => {
                self.counters.push((series.to_string(), Vec::new()));
                self.counters.len() - 1
            }
        };
        self.counters[i].1.push((t, value));
    }

    /// Sink task `partition`/`task` finished a message `e2e` after its origin.
    pub fn message(&mut self, partition: &str, task: &str, e2e: u64) {
        let key = (partition.to_string(), task.to_string());
        let i = match self.messages.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.messages.push((key, Vec::new()));
                self.messages.len() - 1
            }
        };
        self.messages[i].1.push(e2e);
    }

    /// The figures and the chart data; `source` names the input.
    pub fn finish(mut self, source: Source) -> (Figures, Gantt) {
        for row in &mut self.rows {
            row.slices.sort_unstable();
            row.misses.sort_unstable();
            row.responses.sort_unstable();
        }
        self.windows.sort_unstable();
        let tasks = self.rows.iter().map(task_figure).collect();
        let channels = self
            .channels
            .iter_mut()
            .map(|(name, c)| {
                c.latencies.sort_unstable();
                ChannelFigure {
                    name: name.clone(),
                    messages: c.latencies.len() as u64,
                    unmatched_reads: c.unmatched,
                    losses: c.losses,
                    latency: Summary::of(&c.latencies),
                    histogram: Histogram::of(&c.latencies, &[]),
                    cdf: cdf(&c.latencies),
                }
            })
            .collect();
        let throughput = self
            .counters
            .iter_mut()
            .map(|(name, samples)| {
                samples.sort_unstable();
                rates(name, samples, self.end)
            })
            .collect();
        let pipelines = self
            .messages
            .into_iter()
            .map(|((partition, task), mut delays)| {
                delays.sort_unstable();
                PipelineFigure::of(partition, task, delays)
            })
            .collect();
        let figures = Figures {
            source,
            events: self.events,
            duration_ns: self.end,
            windows: self.windows.len() as u64,
            tasks,
            channels,
            pipelines,
            throughput,
            notes: Vec::new(),
        };
        (figures, gantt(&self.rows, &self.windows, self.end))
    }
}

/// Which file the figures come from.
#[derive(Debug, Clone, Serialize)]
pub struct Source {
    pub file: String,
    /// `schedule-log` or `perfetto`.
    pub format: &'static str,
    /// The bulkhead version that read it.
    pub bulkhead: &'static str,
}

/// Everything `bulkhead report --format json` prints (the page shows the same).
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub source: Source,
    pub events: u64,
    /// The latest timestamp of the input.
    pub duration_ns: u64,
    /// Windows of the static schedule in the input.
    pub windows: u64,
    pub tasks: Vec<TaskFigure>,
    pub channels: Vec<ChannelFigure>,
    /// End-to-end delays of the messages each pipeline sink finished.
    pub pipelines: Vec<PipelineFigure>,
    /// Rates of the named counters (e.g. the CAN gateway's frames forwarded).
    pub throughput: Vec<Rates>,
    /// What the input lacks for some figure.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskFigure {
    pub partition: String,
    pub name: String,
    pub kind: RowKind,
    pub released: u64,
    /// Jobs with a response time (completed).
    pub jobs: u64,
    pub misses: u64,
    /// Times of the first [`MISS_TIMES`] misses.
    pub miss_times_ns: Vec<u64>,
    pub deadline_ns: Option<u64>,
    /// The analytic worst-case response time (`--system`).
    pub wcrt_ns: Option<u64>,
    /// Whether the analysis finds the task schedulable (`--system`).
    pub schedulable: Option<bool>,
    /// Execution intervals and the time they cover (processes: grants).
    pub slices: u64,
    pub executed_ns: u64,
    pub response: Option<Summary>,
    pub histogram: Option<Histogram>,
    /// Points (value, fraction of jobs with a response time <= value).
    pub cdf: Vec<(u64, f64)>,
}

/// Miss times listed per task (the count is complete).
pub const MISS_TIMES: usize = 1000;

#[derive(Debug, Clone, Serialize)]
pub struct ChannelFigure {
    pub name: String,
    /// Reads whose write is in the input: the latency samples.
    pub messages: u64,
    pub unmatched_reads: u64,
    pub losses: u64,
    pub latency: Option<Summary>,
    pub histogram: Option<Histogram>,
    pub cdf: Vec<(u64, f64)>,
}

/// The end-to-end delays of the messages one pipeline sink finished (its `message`
/// events: the sink's completion minus the message's origin stamp).
#[derive(Debug, Clone, Serialize)]
pub struct PipelineFigure {
    /// The pipeline (`--system`), else `null`.
    pub pipeline: Option<String>,
    /// The sink stage's task.
    pub partition: String,
    pub sink: String,
    pub messages: u64,
    pub e2e: Option<Summary>,
    pub histogram: Option<Histogram>,
    pub cdf: Vec<(u64, f64)>,
    /// The analysed bounds (`--system`): Boomerang's Σ T along the longest path, and
    /// the exact bound Σ (k T + R) of `bulkhead solve`.
    pub bound_ns: Option<u64>,
    pub exact_bound_ns: Option<u64>,
    /// Messages beyond the paper's bound and beyond the exact bound (`--system`).
    pub beyond_bound: Option<u64>,
    pub beyond_exact_bound: Option<u64>,
    #[serde(skip)]
    delays: Vec<u64>,
}

impl PipelineFigure {
    fn of(partition: String, sink: String, sorted: Vec<u64>) -> PipelineFigure {
        PipelineFigure {
            pipeline: None,
            partition,
            sink,
            messages: sorted.len() as u64,
            e2e: Summary::of(&sorted),
            histogram: Histogram::of(&sorted, &[]),
            cdf: cdf(&sorted),
            bound_ns: None,
            exact_bound_ns: None,
            beyond_bound: None,
            beyond_exact_bound: None,
            delays: sorted,
        }
    }

    /// Adds the pipeline's name and analysed bounds, counts the messages beyond them,
    /// and widens the histogram so that the bounds show.
    pub fn set_bounds(&mut self, pipeline: &str, bound_ns: u64, exact_bound_ns: Option<u64>) {
        let beyond =
            |b: u64| self.delays.len() as u64 - self.delays.partition_point(|&d| d <= b) as u64;
        self.pipeline = Some(pipeline.to_string());
        self.bound_ns = Some(bound_ns);
        self.exact_bound_ns = exact_bound_ns;
        self.beyond_bound = Some(beyond(bound_ns));
        self.beyond_exact_bound = exact_bound_ns.map(beyond);
        let marks: Vec<u64> = [Some(bound_ns), exact_bound_ns]
            .into_iter()
            .flatten()
            .collect();
        self.histogram = Histogram::of(&self.delays, &marks);
    }
}

/// Order statistics of a sample; percentiles by nearest rank.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Summary {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl Summary {
    /// The summary of `sorted` (ascending); `None` when empty.
    pub fn of(sorted: &[u64]) -> Option<Summary> {
        let n = sorted.len();
        let (&min_ns, &max_ns) = (sorted.first()?, sorted.last()?);
        let rank = |p: u64| sorted[((p as usize * n).div_ceil(100)).max(1) - 1];
        let sum: u128 = sorted.iter().map(|&v| v as u128).sum();
        Some(Summary {
            count: n as u64,
            min_ns,
            mean_ns: sum as f64 / n as f64,
            p50_ns: rank(50),
            p90_ns: rank(90),
            p99_ns: rank(99),
            max_ns,
        })
    }
}

/// Counts in bins `[i * bin_ns, (i + 1) * bin_ns)` from 0 up to the largest of the
/// sample and the marks (deadline, WCRT), so the marks fall inside the plot.
#[derive(Debug, Clone, Serialize)]
pub struct Histogram {
    pub bin_ns: u64,
    pub counts: Vec<u64>,
}

const BINS: u64 = 40;

impl Histogram {
    pub fn of(sorted: &[u64], marks: &[u64]) -> Option<Histogram> {
        let top = sorted.last()?.max(marks.iter().max().unwrap_or(&0));
        let bin_ns = top.div_ceil(BINS).max(1);
        let mut counts = vec![0; ((top / bin_ns) + 1) as usize];
        for &v in sorted {
            counts[(v / bin_ns) as usize] += 1;
        }
        Some(Histogram { bin_ns, counts })
    }
}

const CDF_POINTS: usize = 256;

/// The empirical CDF of `sorted`: every distinct value, or [`CDF_POINTS`] quantiles.
pub fn cdf(sorted: &[u64]) -> Vec<(u64, f64)> {
    let n = sorted.len();
    let mut points: Vec<(u64, f64)> = Vec::new();
    let mut push = |i: usize| {
        let point = (sorted[i], (i + 1) as f64 / n as f64);
        match points.last_mut() {
            Some(last) if last.0 == point.0 => *last = point,
            _ => points.push(point),
        }
    };
    if n <= CDF_POINTS {
        (0..n).for_each(&mut push);
    } else {
        (1..=CDF_POINTS).for_each(|k| push((k * n).div_ceil(CDF_POINTS) - 1));
    }
    points
}

fn task_figure(row: &Row) -> TaskFigure {
    let marks: Vec<u64> = row.deadline_ns.into_iter().collect();
    TaskFigure {
        partition: row.partition.clone(),
        name: row.name.clone(),
        kind: row.kind,
        released: row.released,
        jobs: row.responses.len() as u64,
        misses: row.misses.len() as u64,
        miss_times_ns: row.misses.iter().take(MISS_TIMES).copied().collect(),
        deadline_ns: row.deadline_ns,
        wcrt_ns: None,
        schedulable: None,
        slices: row.slices.len() as u64,
        executed_ns: row.slices.iter().map(|(s, e)| e - s).sum(),
        response: Summary::of(&row.responses),
        histogram: Histogram::of(&row.responses, &marks),
        cdf: cdf(&row.responses),
    }
}

impl TaskFigure {
    /// Adds the analytic WCRT (and widens the histogram so that it shows).
    pub fn set_wcrt(&mut self, wcrt_ns: Option<u64>, schedulable: bool) {
        self.wcrt_ns = wcrt_ns;
        self.schedulable = Some(schedulable);
        if let (Some(h), Some(w)) = (&mut self.histogram, wcrt_ns) {
            let bins = (w / h.bin_ns + 1) as usize;
            if bins > h.counts.len() {
                h.counts.resize(bins, 0);
            }
        }
    }
}

/// Per-second rates of a counter in [`RATE_BINS`] bins over the input; the counter
/// starts at 0 with the input.
#[derive(Debug, Clone, Serialize)]
pub struct Rates {
    pub name: String,
    pub bin_ns: u64,
    pub per_second: Vec<f64>,
    /// The last value.
    pub total: u64,
}

const RATE_BINS: u64 = 100;

fn rates(name: &str, samples: &[(u64, u64)], end: u64) -> Rates {
    let bin_ns = end.div_ceil(RATE_BINS).max(1);
    let bins = end.div_ceil(bin_ns).max(1) as usize;
    let mut at_end = vec![None; bins];
    for &(t, value) in samples {
        at_end[((t / bin_ns) as usize).min(bins - 1)] = Some(value);
    }
    let mut last = 0u64;
    let per_second = at_end
        .into_iter()
        .map(|value| {
            let value = value.unwrap_or(last);
            let rate = value.saturating_sub(last) as f64 * 1e9 / bin_ns as f64;
            last = value;
            rate
        })
        .collect();
    Rates {
        name: name.to_string(),
        bin_ns,
        per_second,
        total: samples.last().map_or(0, |s| s.1),
    }
}

/// The Gantt chart's data, compact: times in units of `unit_ns` (the largest that
/// divides them all), starts as differences from the previous start of the row.
#[derive(Debug, Clone, Serialize)]
pub struct Gantt {
    pub unit_ns: u64,
    pub end: u64,
    pub rows: Vec<GanttRow>,
    /// The window band: start deltas, durations, label indices, labels.
    pub band: Band,
}

#[derive(Debug, Clone, Serialize)]
pub struct GanttRow {
    pub name: String,
    pub kind: RowKind,
    pub s: Vec<u64>,
    pub d: Vec<u64>,
    /// Deadline misses (start deltas).
    pub m: Vec<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Band {
    pub s: Vec<u64>,
    pub d: Vec<u64>,
    pub l: Vec<u32>,
    pub labels: Vec<String>,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn gantt(rows: &[Row], windows: &[(u64, u64, String)], end: u64) -> Gantt {
    let mut unit = end;
    for row in rows {
        for &(s, e) in &row.slices {
            unit = gcd(gcd(unit, s), e);
        }
        unit = row.misses.iter().fold(unit, |u, &m| gcd(u, m));
    }
    unit = windows.iter().fold(unit, |u, w| gcd(gcd(u, w.0), w.1));
    let unit = unit.max(1);
    let deltas = |times: &mut dyn Iterator<Item = u64>| {
        let mut last = 0;
        times
            .map(|t| {
                let d = (t - last) / unit;
                last = t;
                d
            })
            .collect::<Vec<u64>>()
    };
    let gantt_rows = rows
        .iter()
        .map(|row| GanttRow {
            name: format!("{}/{}", row.partition, row.name),
            kind: row.kind,
            s: deltas(&mut row.slices.iter().map(|s| s.0)),
            d: row.slices.iter().map(|(s, e)| (e - s) / unit).collect(),
            m: deltas(&mut row.misses.iter().copied()),
        })
        .collect();
    let mut labels: Vec<String> = Vec::new();
    let l = windows
        .iter()
        .map(|w| match labels.iter().position(|x| *x == w.2) {
            Some(i) => i as u32,
            None => {
                labels.push(w.2.clone());
                labels.len() as u32 - 1
            }
        })
        .collect();
    Gantt {
        unit_ns: unit,
        end: end / unit,
        rows: gantt_rows,
        band: Band {
            s: deltas(&mut windows.iter().map(|w| w.0)),
            d: windows.iter().map(|w| (w.1 - w.0) / unit).collect(),
            l,
            labels,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<u64> = (1..=10).collect();
        let s = Summary::of(&v).unwrap();
        assert_eq!(
            (s.min_ns, s.p50_ns, s.p90_ns, s.p99_ns, s.max_ns),
            (1, 5, 9, 10, 10)
        );
        assert_eq!(s.mean_ns, 5.5);
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn histogram_reaches_the_marks() {
        let h = Histogram::of(&[1, 2, 3], &[80]).unwrap();
        assert_eq!(h.bin_ns, 2);
        assert_eq!(h.counts.len(), 41);
        assert_eq!(h.counts[..2], [1, 2]);
    }

    #[test]
    fn cdf_keeps_the_last_of_equal_values() {
        assert_eq!(cdf(&[1, 1, 2, 4]), vec![(1, 0.5), (2, 0.75), (4, 1.0)]);
    }

    #[test]
    fn rates_are_per_second() {
        let r = rates(
            "c",
            &[(0, 0), (500_000_000, 50), (999_999_999, 100)],
            999_999_999,
        );
        assert_eq!(r.bin_ns, 10_000_000);
        assert_eq!(r.per_second.iter().sum::<f64>() * 0.01, 100.0);
        assert_eq!(r.total, 100);
    }
}
