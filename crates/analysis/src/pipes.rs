//! The tuned-pipe solver: periods, budgets and buffer depths of a pipeline's stages from
//! its end-to-end QoS, following Boomerang (Golchin, Sinha, West; RTAS 2020) Sec. III-E
//! step by step, with every stage admitted by the exact test of its partition.
//!
//! Steps ([`solve`]):
//! 1. rate matching: every stage not fixed by the description gets `T = Δ` with
//!    `Δ·n = e2e_delay` less what the fixed stages and the CAN gateway's reader and
//!    writer take, `n` the stages on the longest path (III-E, "Boomerang starts by
//!    setting T_p = T_c = Δ");
//! 2. while a partition is not schedulable, every solved period is scaled by α = 5/4;
//! 3. from the inputs on, for each producer/consumer pair, T_p is halved and (FIFO) C_c
//!    doubled (m_c messages per budget) while `T > C` and every partition stays
//!    schedulable, until the delay bound holds;
//! 4. each consumer with m_c > 1 is revisited: C_c and T_c are halved while C_c holds
//!    one message at least;
//! 5. FIFO depths `m_p(⌈T_c/T_p⌉ + 1)` (III-E), the four-slot loss bound
//!    `max(1 - T_p/T_c)` (III-E, condition 2 of the four-slot list).
//!
//! Where this improves on the paper:
//! * admission is the exact test of each stage's partition (RTA for fixed priority, QPA
//!   and SCHED_DEADLINE admission for EDF) with the partition's other tasks and the
//!   gateway's tasks it shares, where the paper applies the utilization bounds
//!   `n(2^{1/n} - 1)` and 1 (III-E, last paragraph);
//! * beside the paper's bound (the sum of the periods along the longest path plus
//!   blocking, zero with these buffers; III-E condition 1) the exact bound adds what the
//!   paper's leaves out: a stage reads its input when its job starts and forwards it when
//!   the job completes, so a message that just misses a job waits up to `T_i` for the
//!   next release and then up to the stage's WCRT `R_i` (from the analysis) for its
//!   completion: `Σ (k_i T_i + R_i)` with `k_i = 1` for four-slot buffers and, for FIFO
//!   buffers, `k_i = ⌈depth_i / m_i⌉` periods to drain what may be queued ahead (Davare
//!   et al., DAC 2007, for the sampling term). The paper's sum of periods holds only when
//!   each stage's data is ready at its consumer's next release (its Figure 7 schedule);
//! * the ring sizes are the formula's depth rounded up to a power of two, which gives
//!   Table V's 4, 2 and 4 messages where the formula alone gives 3, 2 and 3.

use crate::system::{analyze_system_with, Options, Report};
use crate::task::Time;
use bulkhead_model::{ChannelKind, Endpoint, Pipeline, Resume, System, Task};
use serde::Serialize;

/// α of III-E: the factor solved periods grow by while the system is not schedulable.
const ALPHA: (Time, Time) = (5, 4);
/// Rounds of α scaling before a pipeline is declared infeasible.
const MAX_SCALINGS: usize = 64;

/// A solved stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SolvedStage {
    pub name: String,
    pub partition: String,
    pub period_ns: Time,
    pub budget_ns: Time,
    pub messages_per_period: u64,
    /// Worst-case response time from the analysis (`None` when not established).
    #[serde(skip)]
    pub wcrt_ns: Option<Time>,
    /// Release offset O of the stage's task ([`phase_offsets`]); `run` releases it at
    /// `epoch + O + k T`.
    pub offset_ns: Time,
}

/// The buffer on one edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Buffer {
    pub from: String,
    pub to: String,
    /// `fifo` or `latest` (four-slot).
    pub kind: &'static str,
    /// Messages the ring holds (fifo); 1 for `latest`.
    pub depth: u64,
}

/// Why a pipeline is infeasible: the stage (or task) and the test that fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub stage: String,
    pub test: String,
    pub message: String,
}

/// The solution of one pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Solution {
    pub name: String,
    pub feasible: bool,
    /// The paper's bound: Σ T along the longest path (with the gateway's reader and
    /// writer), plus blocking (zero with buffers sized as here).
    pub e2e_delay_bound_ns: Time,
    /// Σ (k_i T_i + R_i) along the worst path; `None` when a WCRT is not established.
    pub exact_delay_bound_ns: Option<Time>,
    /// min m_i / T_i over the stages, messages per second.
    pub throughput_per_s: f64,
    /// Four-slot: max(1 - T_p/T_c); FIFO: 0.
    pub loss_bound: f64,
    pub stages: Vec<SolvedStage>,
    pub buffers: Vec<Buffer>,
    #[serde(skip)]
    pub failure: Option<Failure>,
}

/// The solver's state of one stage.
#[derive(Debug, Clone, Copy)]
struct Var {
    period: Time,
    messages: u64,
    /// Fixed by the description: the solver keeps period and messages.
    fixed: bool,
    wcet: Time,
}

impl Var {
    fn budget(&self) -> Time {
        self.messages * self.wcet
    }
}

/// Solves every pipeline of `system` in order, each with the stages of the ones before
/// it already placed in their partitions.
pub fn solve(system: &System, options: &Options) -> Vec<Solution> {
    let mut placed = without_pipelines(system);
    let mut out = Vec::new();
    for p in &system.pipelines {
        let solution = Solver::new(&placed, p, options).run();
        if solution.feasible {
            add_stages(&mut placed, p, &solution);
        }
        out.push(solution);
    }
    out
}

/// `system` with the solved stages as tasks of their partitions, and each stage's
/// period and budget set to the solved ones: what `check`, `analyze` and `sim` work on
/// (the analysis sees the tasks; the simulator also links the pipelines' edges).
pub fn apply(system: &System, solutions: &[Solution]) -> System {
    let mut out = system.clone();
    for (p, s) in out.pipelines.iter_mut().zip(solutions) {
        for (stage, solved) in p.stages.iter_mut().zip(&s.stages) {
            stage.period = Some(solved.period_ns);
            stage.budget = Some(solved.budget_ns);
        }
    }
    for (p, s) in system.pipelines.iter().zip(solutions) {
        add_stages(&mut out, p, s);
    }
    out
}

fn without_pipelines(system: &System) -> System {
    System {
        pipelines: Vec::new(),
        ..system.clone()
    }
}

/// Adds the stages of `p` with the reservations of `s` to their partitions.
fn add_stages(system: &mut System, p: &Pipeline, s: &Solution) {
    for (stage, solved) in p.stages.iter().zip(&s.stages) {
        let partition = system
            .partitions
            .iter_mut()
            .find(|q| q.name == stage.partition)
            .expect("the model checked the partition");
        partition.tasks.push(stage_task(stage, solved));
    }
}

fn stage_task(stage: &bulkhead_model::Stage, solved: &SolvedStage) -> Task {
    Task {
        name: stage.name.clone(),
        cmd: stage.cmd.clone(),
        budget: solved.budget_ns,
        period: solved.period_ns,
        deadline: solved.period_ns,
        priority: stage.priority,
        release_jitter: 0,
        offset: solved.offset_ns,
        blocking: 0,
        resume: Resume::Continuable,
        wcet_khz: None,
        memory_bound_ppm: 0,
        service: None,
        server: None,
    }
}

/// Phased releases (Boomerang III-E, Figure 7): the release offset of each stage,
/// `O_i = d_i T_i / n`, where `d_i` counts the edges of the longest path from a source
/// to stage `i` and `n` the stages of the pipeline's longest path. The offset moves the
/// stage's whole grid, its deadlines too (`run` releases it at `epoch + O_i + k T_i`),
/// so it needs no room for the job within the period: `O_i < T_i` always.
///
/// The paper's delay bound, Σ T along the path (III-E condition 1), and its loss rate,
/// `1 - T_p/T_c`, assume what Figure 7 shows: a consumer reads after its producer has
/// written in the same period. With every release on one grid the two race, and when
/// their order flips from one period to the next a four-slot buffer loses a message
/// even at equal periods. Spread over the period, each stage is released `T/n` after
/// its producer: after the producer has run when its response time is at most `T/n`
/// and the two have equal periods (not guaranteed otherwise: the offsets are a
/// heuristic). The analysis keeps the releases synchronous, the worst case of any
/// offsets, so the bounds hold either way.
pub fn phase_offsets(p: &Pipeline, stages: &[SolvedStage]) -> Vec<Time> {
    let mut depth = vec![0u64; p.stages.len()];
    // The edges of a DAG relaxed once per stage give every longest distance.
    for _ in 0..p.stages.len() {
        for &(from, to) in &p.edges {
            depth[to] = depth[to].max(depth[from] + 1);
        }
    }
    let n = depth.iter().max().map_or(1, |d| d + 1);
    let offset = |(st, &d): (&SolvedStage, &u64)| {
        (u128::from(d) * u128::from(st.period_ns) / u128::from(n)) as Time
    };
    stages.iter().zip(&depth).map(offset).collect()
}

struct Solver<'a> {
    system: &'a System,
    pipeline: &'a Pipeline,
    options: &'a Options,
    vars: Vec<Var>,
    /// Every path from a source to a sink, as stage indices.
    paths: Vec<Vec<usize>>,
    order: Vec<usize>,
}

impl<'a> Solver<'a> {
    fn new(system: &'a System, pipeline: &'a Pipeline, options: &'a Options) -> Self {
        let vars = pipeline
            .stages
            .iter()
            .map(|s| Var {
                period: s.period.unwrap_or(0),
                messages: s.budget.map_or(1, |b| (b / s.wcet).max(1)),
                fixed: s.period.is_some(),
                wcet: s.wcet,
            })
            .collect();
        Solver {
            system,
            pipeline,
            options,
            vars,
            paths: paths(pipeline),
            order: pipeline.topological_order(),
        }
    }

    fn fifo(&self) -> bool {
        self.pipeline.buffering == ChannelKind::Fifo
    }

    /// The gateway task behind a `can:BUS` endpoint (its reader for an input, its
    /// writer for an output): its partition, name and period.
    fn gateway_task(&self, e: &Option<Endpoint>, input: bool) -> Option<(&str, String, Time)> {
        let Some(Endpoint::Can { bus, .. }) = e else {
            return None;
        };
        let b = self.system.buses.iter().find(|b| &b.name == bus)?;
        let task = if input {
            b.reader_task()
        } else {
            b.writer_task()
        };
        Some((b.gateway.as_str(), task, b.period))
    }

    /// The periods of the gateway tasks at the ends of `path` (a bus period each).
    fn device_time(&self, path: &[usize]) -> Time {
        let (Some(&first), Some(&last)) = (path.first(), path.last()) else {
            return 0;
        };
        let stages = &self.pipeline.stages;
        let ends = [
            self.gateway_task(&stages[first].input, true),
            self.gateway_task(&stages[last].output, false),
        ];
        ends.into_iter()
            .flatten()
            .map(|(_, _, period)| period)
            .sum()
    }

    /// The paper's bound: max over paths of Σ T_i plus the gateway tasks' periods.
    fn paper_bound(&self) -> Time {
        let sum = |p: &Vec<usize>| {
            p.iter().map(|&i| self.vars[i].period).sum::<Time>() + self.device_time(p)
        };
        self.paths.iter().map(sum).max().unwrap_or(0)
    }

    /// Step 1 (rate matching): Δ = min over paths of (delay - fixed part) / n.
    fn rate_matching(&mut self) -> Result<(), Failure> {
        let delta = match self.pipeline.qos.delay {
            Some(delay) => self.delta(delay)?,
            // Best effort (III-D: no QoS): each stage at 10% of a CPU, then scaled by α.
            None => 10 * self.vars.iter().map(|v| v.wcet).max().unwrap_or(1),
        };
        let tput = self.pipeline.qos.throughput_per_s;
        for v in self.vars.iter_mut().filter(|v| !v.fixed) {
            v.period = delta.max(v.budget() + 1);
            if let Some(t) = tput {
                // Condition 2 (FIFO): m / T >= e2e_tput.
                v.period = v
                    .period
                    .min(v.messages * 1_000_000_000 / t)
                    .max(v.budget() + 1);
            }
        }
        Ok(())
    }

    fn delta(&self, delay: Time) -> Result<Time, Failure> {
        let mut delta = Time::MAX;
        for path in &self.paths {
            let fixed: Time = path
                .iter()
                .filter(|&&i| self.vars[i].fixed)
                .map(|&i| self.vars[i].period)
                .sum::<Time>()
                + self.device_time(path);
            let free = path.iter().filter(|&&i| !self.vars[i].fixed).count() as Time;
            if fixed >= delay && free > 0 || fixed > delay {
                let first = &self.pipeline.stages[path[0]].name;
                return Err(Failure {
                    stage: first.clone(),
                    test: "e2e-delay".into(),
                    message: format!(
                        "the fixed stages and the gateway alone take {} ns of the {delay} ns delay on the path from `{first}`",
                        fixed
                    ),
                });
            }
            if let Some(share) = (delay - fixed).checked_div(free) {
                delta = delta.min(share);
            }
        }
        Ok(if delta == Time::MAX { 0 } else { delta })
    }

    /// The analysis of the system with the stages at their current values; the first
    /// unschedulable task of a partition holding a stage fails.
    fn admit(&self) -> Result<Report, Failure> {
        let mut system = self.system.clone();
        add_stages(&mut system, self.pipeline, &self.current());
        let report = analyze_system_with(&system, self.options);
        let partitions: Vec<&str> = self
            .pipeline
            .stages
            .iter()
            .map(|s| s.partition.as_str())
            .collect();
        let failing = report
            .tasks
            .iter()
            .find(|t| !t.schedulable && partitions.contains(&t.partition.as_str()));
        match failing {
            Some(t) => {
                let is_stage = self.pipeline.stage_index(&t.name).is_some();
                let stage = match is_stage {
                    true => t.name.clone(),
                    false => format!("{}/{}", t.partition, t.name),
                };
                Err(Failure {
                    stage,
                    test: t.test.to_string(),
                    message: format!(
                        "task `{}` of partition `{}` fails {} on CPU {}: {}",
                        t.name, t.partition, t.test, t.cpu, t.binding
                    ),
                })
            }
            None => Ok(report),
        }
    }

    /// Step 2: scale the solved periods by α until every partition is schedulable.
    fn scale_until_schedulable(&mut self) -> Result<Report, Failure> {
        let mut last = None;
        for _ in 0..MAX_SCALINGS {
            match self.admit() {
                Ok(report) => return Ok(report),
                Err(f) => last = Some(f),
            }
            if self.vars.iter().all(|v| v.fixed) {
                break;
            }
            for v in self.vars.iter_mut().filter(|v| !v.fixed) {
                v.period = v.period * ALPHA.0 / ALPHA.1;
            }
        }
        Err(last.expect("at least one round"))
    }

    fn delay_met(&self) -> bool {
        self.pipeline
            .qos
            .delay
            .is_none_or(|d| self.paper_bound() <= d)
    }

    fn loss_ok(&self) -> bool {
        let limit = self.pipeline.qos.loss_ppm.map(|l| l as f64 / 1e6);
        limit.is_none_or(|l| self.loss_bound() <= l + 1e-12)
    }

    /// Step 3: from the inputs on, halve T_p and (FIFO) double C_c per pair.
    fn tighten_pairs(&mut self) {
        let mut edges = self.pipeline.edges.clone();
        let rank = |i: usize| self.order.iter().position(|&o| o == i);
        edges.sort_by_key(|&(p, c)| (rank(p), rank(c)));
        for (p, c) in edges {
            while !self.delay_met() && self.try_step(|vars, fifo| halve_producer(vars, p, c, fifo))
            {
            }
            if self.delay_met() {
                return;
            }
        }
    }

    /// Step 4: revisit consumers with several messages per budget: halve C_c and T_c.
    fn revisit_consumers(&mut self) {
        for i in self.order.clone() {
            while !self.delay_met() && self.try_step(|vars, _| halve_consumer(vars, i)) {}
        }
    }

    /// Applies `step` if it is possible, keeps the loss within its bound and leaves
    /// every partition schedulable; otherwise undoes it.
    fn try_step(&mut self, step: impl Fn(&mut [Var], bool) -> bool) -> bool {
        let saved = self.vars.clone();
        let fifo = self.fifo();
        if !step(&mut self.vars, fifo) {
            return false;
        }
        let ok = self.vars.iter().all(|v| v.period > v.budget())
            && self.loss_ok()
            && self.admit().is_ok();
        if !ok {
            self.vars = saved;
        }
        ok
    }

    fn loss_bound(&self) -> f64 {
        if self.fifo() {
            return 0.0;
        }
        let loss = |&(p, c): &(usize, usize)| {
            let (tp, tc) = (self.vars[p].period.max(1), self.vars[c].period.max(1));
            crate::pipeline::four_slot_loss(tp, tc)
        };
        self.pipeline.edges.iter().map(loss).fold(0.0, f64::max)
    }

    fn current(&self) -> Solution {
        let stages = self
            .pipeline
            .stages
            .iter()
            .zip(&self.vars)
            .map(|(s, v)| SolvedStage {
                name: s.name.clone(),
                partition: s.partition.clone(),
                period_ns: v.period,
                budget_ns: v.budget(),
                messages_per_period: v.messages,
                wcrt_ns: None,
                offset_ns: 0,
            })
            .collect();
        Solution {
            name: self.pipeline.name.clone(),
            feasible: false,
            e2e_delay_bound_ns: self.paper_bound(),
            exact_delay_bound_ns: None,
            throughput_per_s: self.throughput(),
            loss_bound: self.loss_bound(),
            stages,
            buffers: self.buffers(),
            failure: None,
        }
    }

    fn throughput(&self) -> f64 {
        let rate = |v: &Var| v.messages as f64 * 1e9 / v.period.max(1) as f64;
        self.vars.iter().map(rate).fold(f64::INFINITY, f64::min)
    }

    /// Step 5: the buffer of each edge.
    fn buffers(&self) -> Vec<Buffer> {
        let name = |i: usize| self.pipeline.stages[i].name.clone();
        let buffer = |&(p, c): &(usize, usize)| {
            let (kind, depth) = match self.fifo() {
                true => ("fifo", self.formula_depth(p, c).next_power_of_two()),
                false => ("latest", 1),
            };
            Buffer {
                from: name(p),
                to: name(c),
                kind,
                depth,
            }
        };
        self.pipeline.edges.iter().map(buffer).collect()
    }

    /// `m_p (⌈T_c / T_p⌉ + 1)` (III-E).
    fn formula_depth(&self, p: usize, c: usize) -> u64 {
        let (vp, vc) = (self.vars[p], self.vars[c]);
        // Periods are 0 only before rate matching (an infeasible pipeline's report).
        crate::pipeline::fifo_depth(vp.messages, vp.period.max(1), vc.period.max(1))
    }

    /// The exact bound: max over paths of Σ (k_i T_i + R_i), the gateway's reader and
    /// writer included with their own period and WCRT.
    fn exact_bound(&self, report: &Report) -> Option<Time> {
        let wcrt = |partition: &str, task: &str| {
            let t = report.tasks.iter();
            t.clone()
                .find(|t| t.partition == partition && t.name == task)
                .and_then(|t| t.wcrt_ns)
        };
        let mut worst = 0;
        for path in &self.paths {
            let mut sum = 0;
            for (k, &i) in path.iter().enumerate() {
                let s = &self.pipeline.stages[i];
                let v = self.vars[i];
                let periods = match (self.fifo(), k) {
                    (true, k) if k > 0 => self.formula_depth(path[k - 1], i).div_ceil(v.messages),
                    _ => 1,
                };
                sum += periods * v.period + wcrt(&s.partition, &s.name)?;
            }
            let (first, last) = (path[0], *path.last().expect("paths are not empty"));
            let ends = [
                self.gateway_task(&self.pipeline.stages[first].input, true),
                self.gateway_task(&self.pipeline.stages[last].output, false),
            ];
            for (gateway, task, period) in ends.into_iter().flatten() {
                sum += period + wcrt(gateway, &task)?;
            }
            worst = worst.max(sum);
        }
        Some(worst)
    }

    /// Runs the steps; the solution names the stage and test of a failure.
    fn run(mut self) -> Solution {
        let result = self.steps();
        let mut s = self.current();
        match result {
            Ok(report) => {
                s.feasible = true;
                s.exact_delay_bound_ns = self.exact_bound(&report);
                for st in &mut s.stages {
                    let t = report.tasks.iter();
                    st.wcrt_ns = t
                        .clone()
                        .find(|t| t.partition == st.partition && t.name == st.name)
                        .and_then(|t| t.wcrt_ns);
                }
                let offsets = phase_offsets(self.pipeline, &s.stages);
                for (st, offset) in s.stages.iter_mut().zip(offsets) {
                    st.offset_ns = offset;
                }
            }
            Err(f) => s.failure = Some(f),
        }
        s
    }

    fn steps(&mut self) -> Result<Report, Failure> {
        self.rate_matching()?;
        self.scale_until_schedulable()?;
        self.tighten_pairs();
        self.revisit_consumers();
        self.final_checks()?;
        self.admit()
    }

    /// The QoS conditions of III-E on the final values.
    fn final_checks(&self) -> Result<(), Failure> {
        let stage_name = |i: usize| self.pipeline.stages[i].name.clone();
        if let Some(d) = self.pipeline.qos.delay {
            let bound = self.paper_bound();
            if bound > d {
                let slowest = (0..self.vars.len())
                    .max_by_key(|&i| self.vars[i].period)
                    .expect("a pipeline has stages");
                return Err(Failure {
                    stage: stage_name(slowest),
                    test: "e2e-delay".into(),
                    message: format!(
                        "Σ T along the longest path is {bound} ns > {d} ns even at the shortest schedulable periods (the longest period is `{}`'s)",
                        stage_name(slowest)
                    ),
                });
            }
        }
        if let Some(t) = self.pipeline.qos.throughput_per_s {
            let rate = |i: usize| self.vars[i].messages as f64 * 1e9 / self.vars[i].period as f64;
            let worst = (0..self.vars.len())
                .min_by(|&a, &b| rate(a).total_cmp(&rate(b)))
                .expect("a pipeline has stages");
            if rate(worst) + 1e-9 < t as f64 {
                return Err(Failure {
                    stage: stage_name(worst),
                    test: "throughput".into(),
                    message: format!("m/T = {:.3}/s < {t}/s", rate(worst)),
                });
            }
        }
        if !self.loss_ok() {
            let loss = |&(p, c): &(usize, usize)| {
                crate::pipeline::four_slot_loss(self.vars[p].period, self.vars[c].period)
            };
            let worst = self
                .pipeline
                .edges
                .iter()
                .max_by(|a, b| loss(a).total_cmp(&loss(b)));
            let &(p, c) = worst.expect("a loss needs an edge");
            return Err(Failure {
                stage: stage_name(c),
                test: "loss".into(),
                message: format!(
                    "1 - T_p/T_c = {:.4} from `{}` exceeds the loss rate",
                    loss(&(p, c)),
                    stage_name(p)
                ),
            });
        }
        Ok(())
    }
}

/// Step 3 for one pair: T_p / 2 and, FIFO, m_c x 2. False when neither may change.
fn halve_producer(vars: &mut [Var], p: usize, c: usize, fifo: bool) -> bool {
    if vars[p].fixed || vars[p].period / 2 <= vars[p].budget() {
        return false;
    }
    vars[p].period /= 2;
    if fifo && !vars[c].fixed {
        vars[c].messages *= 2;
    }
    true
}

/// Step 4 for one consumer: C_c / 2 and T_c / 2 while C_c holds a message.
fn halve_consumer(vars: &mut [Var], i: usize) -> bool {
    if vars[i].fixed || vars[i].messages < 2 {
        return false;
    }
    vars[i].messages /= 2;
    vars[i].period /= 2;
    true
}

/// Every path from a source to a sink (pipelines are small DAGs).
fn paths(p: &Pipeline) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut stack: Vec<Vec<usize>> = p.sources().into_iter().map(|s| vec![s]).collect();
    while let Some(path) = stack.pop() {
        let last = *path.last().expect("not empty");
        let next: Vec<usize> = p
            .edges
            .iter()
            .filter(|&&(a, _)| a == last)
            .map(|&(_, c)| c)
            .collect();
        if next.is_empty() {
            out.push(path);
            continue;
        }
        for c in next {
            let mut longer = path.clone();
            longer.push(c);
            stack.push(longer);
        }
    }
    out.reverse();
    out
}

/// The solutions as text: per pipeline its stages, buffers and both bounds.
pub fn render_text(solutions: &[Solution]) -> String {
    use bulkhead_model::units::format_duration as d;
    let mut out = String::new();
    for s in solutions {
        let verdict = match &s.failure {
            None => "feasible".to_string(),
            Some(f) => format!(
                "INFEASIBLE: stage `{}` fails {}: {}",
                f.stage, f.test, f.message
            ),
        };
        out += &format!("pipeline {}: {verdict}\n", s.name);
        for st in &s.stages {
            out += &format!(
                "  stage {:<16} {:<12} period {:>8}  budget {:>8}  {} msg/period  offset {}\n",
                st.name,
                st.partition,
                d(st.period_ns),
                d(st.budget_ns),
                st.messages_per_period,
                d(st.offset_ns)
            );
        }
        for b in &s.buffers {
            out += &format!(
                "  buffer {} -> {}: {} depth {}\n",
                b.from, b.to, b.kind, b.depth
            );
        }
        let exact = s.exact_delay_bound_ns.map_or("-".into(), d);
        out += &format!(
            "  delay bound: {} (paper: Σ T + blocking), {exact} (exact: Σ (k T + R))\n",
            d(s.e2e_delay_bound_ns)
        );
        out += &format!(
            "  throughput >= {:.1}/s, loss <= {:.1}%\n",
            s.throughput_per_s,
            s.loss_bound * 100.0
        );
    }
    out
}
