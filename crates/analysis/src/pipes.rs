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
//! Rate matching (III-E, FIFO condition 3: buffers "sized to ensure no additional
//! blocking delays", which holds only when "the arrival and departure rates of messages
//! passed through shared FIFO buffers" match) is kept at every step: a stage forwards
//! every message it takes, a source takes one per period, so the messages per period of
//! every consumer whose budget the description leaves open are derived from the rate of
//! its fifo inputs, `m_c ≥ T_c Σ m_p / T_p` (`Solver::match_rates`). A consumer the
//! description fixes below that rate makes a `*` pipeline infeasible (`rate-matching`),
//! naming the loss it implies under the pipeline's `overflow:` rule.
//!
//! With a `platform:` section ([`crate::platform`], docs/platform.md) every pipeline is
//! sized for a stall of each CPU of up to `D` (`Solver::size_for_stalls`): a four-slot
//! edge that cannot tolerate it becomes a FIFO, each FIFO holds the stall's backlog
//! `⌈D Σ m_p / T_p⌉` besides the paper's depth, each consumer takes enough messages per
//! period to drain that backlog within `max(D, T_c)` after the stall, and the solution
//! carries a delay bound with one stall (`stall_delay_bound_ns`).
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
//!   Table V's 4, 2 and 4 messages where the formula alone gives 3, 2 and 3;
//! * the paper's Table V holds because its inputs arrive at λ = 100 and 125 messages a
//!   second (Table VII), below the sources' periods; here a source takes one message
//!   per period, so Table V's ProcData (one message every 4 ms) cannot keep up with
//!   CanRead (one every 2 ms) and the solver says so, or, with ProcData's budget left
//!   open, gives it two messages per period.

use crate::platform::{partition_stall, stall_busy_period};
use crate::system::{analyze_system_with, Options, Report};
use crate::task::{Task as PlainTask, Time};
use bulkhead_model::{
    Bridge, Channel, ChannelKind, EdgeBuffer, Endpoint, Overflow, Pipeline, Resume, System, Task,
};
use serde::Serialize;

/// α of III-E: the factor solved periods grow by while the system is not schedulable.
const ALPHA: (Time, Time) = (5, 4);
/// Rounds of α scaling before a pipeline is declared infeasible.
const MAX_SCALINGS: usize = 64;
const NS_PER_S: f64 = 1e9;

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
    /// What a write to the full fifo does (`block`, `drop_newest`, `drop_oldest`);
    /// absent for `latest`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overflow: Option<&'static str>,
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
    /// The longest stall of a CPU of the pipeline's stages the solution is sized for
    /// (`platform:`); 0 without one.
    pub stall_ns: Time,
    /// The exact bound with one stall of up to `stall_ns` while a message is in
    /// flight (`Solver::stall_bound`); `None` without a stall or when not established.
    pub stall_delay_bound_ns: Option<Time>,
    /// min m_i / T_i over the stages, messages per second.
    pub throughput_per_s: f64,
    /// The largest of: four-slot `max(1 - T_p/T_c)`, and what a fifo whose consumer
    /// cannot keep up loses (`1 - m_c/T_c / Σ m_p/T_p`, 0 when rates match).
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
    /// The description fixes the period: the solver keeps it.
    fixed_period: bool,
    /// The description fixes the budget (so the messages per period).
    fixed_messages: bool,
    wcet: Time,
}

impl Var {
    fn budget(&self) -> Time {
        self.messages * self.wcet
    }

    /// Messages it can take per second.
    fn capacity(&self) -> f64 {
        self.messages as f64 * NS_PER_S / self.period.max(1) as f64
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

/// `system` with the solved stages as tasks of their partitions, each stage's period
/// and budget set to the solved ones and each edge's buffer lowered
/// ([`Pipeline::buffers`]): what `check`, `analyze`, `sim` and `run` work on (the
/// analysis sees the tasks; `sim` and `run` build the edges' channels from the buffers).
pub fn apply(system: &System, solutions: &[Solution]) -> System {
    let mut out = system.clone();
    for (p, s) in out.pipelines.iter_mut().zip(solutions) {
        for (stage, solved) in p.stages.iter_mut().zip(&s.stages) {
            stage.period = Some(solved.period_ns);
            stage.budget = Some(solved.budget_ns);
        }
        p.buffers = s.buffers.iter().map(|b| lowered(b, p.overflow)).collect();
    }
    for (p, s) in system.pipelines.iter().zip(solutions) {
        add_stages(&mut out, p, s);
    }
    out
}

fn lowered(b: &Buffer, overflow: Overflow) -> EdgeBuffer {
    EdgeBuffer {
        kind: match b.kind {
            "fifo" => ChannelKind::Fifo,
            _ => ChannelKind::Latest,
        },
        depth: u32::try_from(b.depth.max(1)).unwrap_or(u32::MAX),
        overflow,
    }
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
        cmd: stage.cmd.clone(),
        priority: stage.priority,
        offset: solved.offset_ns,
        resume: Resume::Continuable,
        ..Task::periodic(stage.name.clone(), solved.budget_ns, solved.period_ns)
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

/// Why the messages per period of a consumer cannot be what its inputs need.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shortfall {
    /// The description fixes the consumer's budget below its fifo inputs' rate
    /// (condition 3 fails): `(consumer, needed messages per period)`.
    Rate(usize, u64),
    /// The rates match, but the fixed budget cannot drain a stall's backlog.
    Stall(usize, u64),
}

struct Solver<'a> {
    system: &'a System,
    pipeline: &'a Pipeline,
    options: &'a Options,
    vars: Vec<Var>,
    /// The buffering of each edge (in `pipeline.edges` order): the spec's, until a
    /// four-slot edge that cannot tolerate the platform's stall becomes a fifo.
    kinds: Vec<ChannelKind>,
    /// The platform's stall on each stage's CPUs.
    stalls: Vec<Time>,
    /// Whether the buffers and consumers are sized for the stalls yet.
    for_stalls: bool,
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
                fixed_period: s.period.is_some(),
                fixed_messages: s.budget.is_some(),
                wcet: s.wcet,
            })
            .collect();
        let stalls = pipeline
            .stages
            .iter()
            .map(|s| partition_stall(system, &s.partition))
            .collect();
        Solver {
            system,
            pipeline,
            options,
            vars,
            kinds: vec![pipeline.buffering; pipeline.edges.len()],
            stalls,
            for_stalls: false,
            paths: paths(pipeline),
            order: pipeline.topological_order(),
        }
    }

    fn edge_is_fifo(&self, e: usize) -> bool {
        self.kinds[e] == ChannelKind::Fifo
    }

    /// The gateway task behind a `can:BUS` endpoint (its reader for an input, its
    /// writer for an output), or the bridge task behind a `zenoh:CHANNEL` one: its
    /// partition, name and period.
    fn gateway_task(&self, e: &Option<Endpoint>, input: bool) -> Option<(&str, String, Time)> {
        if let Some(Endpoint::Zenoh { channel }) = e {
            let b = self.bridge(channel)?;
            return Some((
                b.partition.as_str(),
                Channel::bridge_task(channel),
                b.period,
            ));
        }
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

    /// The bridge of channel `channel`.
    fn bridge(&self, channel: &str) -> Option<&Bridge> {
        let c = self.system.channels.iter().find(|c| c.name == channel)?;
        c.bridge.as_ref()
    }

    /// The bridges `path` crosses: its first stage's input and its last's output when
    /// they are `zenoh:CHANNEL`.
    fn path_hops(&self, path: &[usize]) -> Vec<&Bridge> {
        let (Some(&first), Some(&last)) = (path.first(), path.last()) else {
            return Vec::new();
        };
        let stages = &self.pipeline.stages;
        [&stages[first].input, &stages[last].output]
            .into_iter()
            .filter_map(|e| match e {
                Some(Endpoint::Zenoh { channel }) => self.bridge(channel),
                _ => None,
            })
            .collect()
    }

    /// The declared one-way latency of the hops `path` crosses (docs/zenoh.md).
    fn hop_latency(&self, path: &[usize]) -> Time {
        self.path_hops(path).iter().map(|b| b.latency).sum()
    }

    /// The fraction of messages the hops of `path` may lose, independently:
    /// `1 - Π (1 - loss_h)`.
    fn hop_loss(&self, path: &[usize]) -> f64 {
        let kept: f64 = self
            .path_hops(path)
            .iter()
            .map(|b| 1.0 - b.loss_ppm as f64 / 1e6)
            .product();
        1.0 - kept
    }

    /// The largest [`Self::hop_loss`] over the paths.
    fn hops_loss(&self) -> f64 {
        self.paths
            .iter()
            .map(|p| self.hop_loss(p))
            .fold(0.0, f64::max)
    }

    /// The gateway and bridge tasks at the ends of `path`.
    fn path_gateways(&self, path: &[usize]) -> Vec<(&str, String, Time)> {
        let (Some(&first), Some(&last)) = (path.first(), path.last()) else {
            return Vec::new();
        };
        let stages = &self.pipeline.stages;
        [
            self.gateway_task(&stages[first].input, true),
            self.gateway_task(&stages[last].output, false),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// The periods of the gateway and bridge tasks at the ends of `path` (a bus or
    /// bridge period each) and the declared latency of the hops it crosses.
    fn device_time(&self, path: &[usize]) -> Time {
        self.path_gateways(path).iter().map(|g| g.2).sum::<Time>() + self.hop_latency(path)
    }

    /// The paper's bound: max over paths of Σ T_i plus the gateway tasks' periods.
    fn paper_bound(&self) -> Time {
        let sum = |p: &Vec<usize>| {
            p.iter().map(|&i| self.vars[i].period).sum::<Time>() + self.device_time(p)
        };
        self.paths.iter().map(sum).max().unwrap_or(0)
    }

    /// The edges into stage `c`, as indices into `pipeline.edges`.
    fn inputs(&self, c: usize) -> impl Iterator<Item = usize> + '_ {
        let edges = self.pipeline.edges.iter().enumerate();
        edges.filter(move |(_, &(_, to))| to == c).map(|(e, _)| e)
    }

    /// Messages per second each stage forwards: a source takes in one message per
    /// period (it samples its input, III-E: "one message transfer every corresponding
    /// period"); any other stage forwards what it takes, all of its fifo inputs up to
    /// `m` per period and the newest message of each four-slot input once per period.
    fn flows(&self) -> Vec<f64> {
        let mut flow = vec![0.0; self.vars.len()];
        for &i in &self.order {
            flow[i] = self.flow_of(i, &flow);
        }
        flow
    }

    fn flow_of(&self, i: usize, flow: &[f64]) -> f64 {
        let v = self.vars[i];
        let per_job = NS_PER_S / v.period.max(1) as f64;
        let mut inputs = self.inputs(i).peekable();
        if inputs.peek().is_none() {
            return per_job;
        }
        let (mut fifo, mut latest) = (0.0, 0.0);
        for e in inputs {
            let p = self.pipeline.edges[e].0;
            match self.edge_is_fifo(e) {
                true => fifo += flow[p],
                false => latest += flow[p].min(per_job),
            }
        }
        fifo.min(v.capacity()) + latest
    }

    /// The rate of the fifo inputs of stage `i`, messages per second.
    fn fifo_inflow(&self, i: usize, flow: &[f64]) -> f64 {
        let fifo = self.inputs(i).filter(|&e| self.edge_is_fifo(e));
        fifo.map(|e| flow[self.pipeline.edges[e].0]).sum()
    }

    /// The stall a fifo into `c` must absorb: the longest of its own CPUs' and its fifo
    /// producers' (a stall of either leaves a backlog); 0 before sizing for stalls.
    fn edge_stall(&self, p: usize, c: usize) -> Time {
        match self.for_stalls {
            true => self.stalls[p].max(self.stalls[c]),
            false => 0,
        }
    }

    fn consumer_stall(&self, c: usize) -> Time {
        let producers = self.inputs(c).filter(|&e| self.edge_is_fifo(e));
        let stall = producers.map(|e| self.edge_stall(self.pipeline.edges[e].0, c));
        stall.max().unwrap_or(0)
    }

    /// Whether source `i` takes its input from a CAN bus through a fifo link (frames
    /// queue there while it is held, so it catches up like a fifo consumer).
    fn takes_frames(&self, i: usize) -> bool {
        let stage = &self.pipeline.stages[i];
        let bus_fed = matches!(&stage.input, Some(Endpoint::Can { ids, .. }) if !ids.is_empty());
        let mut outputs = self.pipeline.edges.iter().enumerate();
        bus_fed && outputs.any(|(e, &(p, _))| p == i && self.edge_is_fifo(e))
    }

    /// The messages per period stage `i` needs: its fifo inputs' rate over a period
    /// (condition 3), and, sized for a stall `D`, as much again over `min(D, T)` so that
    /// the backlog of a stall drains within `max(D, T)` after it. Returns (for the rate
    /// alone, with the stall's catch-up).
    fn needed(&self, i: usize, flow: &[f64]) -> (u64, u64) {
        let v = self.vars[i];
        let period = v.period.max(1) as f64;
        let (rate, stall) = match self.inputs(i).next() {
            None if self.takes_frames(i) => (NS_PER_S / period, self.edge_stall(i, i)),
            None => return (1, 1),
            Some(_) => (self.fifo_inflow(i, flow), self.consumer_stall(i)),
        };
        let catch_up = stall.min(v.period) as f64;
        let messages = |span: f64| ((rate * span / NS_PER_S) - 1e-9).ceil().max(1.0) as u64;
        (messages(period), messages(period + catch_up))
    }

    /// Rate matching (III-E condition 3), in topological order: every consumer whose
    /// budget is open takes the messages per period its inputs need ([`Self::needed`]);
    /// the first fixed one that cannot is returned.
    fn match_rates(&mut self) -> Option<Shortfall> {
        let mut flow = vec![0.0; self.vars.len()];
        let mut shortfall = None;
        for i in self.order.clone() {
            let (rate, with_stall) = self.needed(i, &flow);
            let v = &mut self.vars[i];
            if !v.fixed_messages {
                v.messages = with_stall;
            } else if v.messages < rate {
                shortfall = shortfall.or(Some(Shortfall::Rate(i, rate)));
            } else if v.messages < with_stall {
                shortfall = shortfall.or(Some(Shortfall::Stall(i, with_stall)));
            }
            flow[i] = self.flow_of(i, &flow);
        }
        shortfall
    }

    /// Step 1 (rate matching): Δ = min over paths of (delay - fixed part) / n.
    fn rate_matching(&mut self) -> Result<(), Failure> {
        let delta = match self.pipeline.qos.delay {
            Some(delay) => self.delta(delay)?,
            // Best effort (III-D: no QoS): each stage at 10% of a CPU, then scaled by α.
            None => 10 * self.vars.iter().map(|v| v.wcet).max().unwrap_or(1),
        };
        let tput = self.pipeline.qos.throughput_per_s;
        for v in self.vars.iter_mut().filter(|v| !v.fixed_period) {
            v.period = delta.max(v.budget() + 1);
            if let Some(t) = tput {
                // Condition 2 (FIFO): m / T >= e2e_tput.
                v.period = v
                    .period
                    .min(v.messages * 1_000_000_000 / t)
                    .max(v.budget() + 1);
            }
        }
        self.match_rates();
        Ok(())
    }

    fn delta(&self, delay: Time) -> Result<Time, Failure> {
        let mut delta = Time::MAX;
        for path in &self.paths {
            let fixed: Time = path
                .iter()
                .filter(|&&i| self.vars[i].fixed_period)
                .map(|&i| self.vars[i].period)
                .sum::<Time>()
                + self.device_time(path);
            let free = path.iter().filter(|&&i| !self.vars[i].fixed_period).count() as Time;
            if fixed >= delay && free > 0 || fixed > delay {
                let first = &self.pipeline.stages[path[0]].name;
                return Err(Failure {
                    stage: first.clone(),
                    test: "e2e-delay".into(),
                    message: format!(
                        "the fixed stages, the gateway and bridge tasks and the hops' latency alone take {} ns of the {delay} ns delay on the path from `{first}`",
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
            if self.vars.iter().all(|v| v.fixed_period) {
                break;
            }
            for v in self.vars.iter_mut().filter(|v| !v.fixed_period) {
                v.period = v.period * ALPHA.0 / ALPHA.1;
            }
            self.match_rates();
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

    /// Step 3: from the inputs on, halve T_p per pair (rate matching then doubles the
    /// consumer's messages per period, III-E's "C_c is similarly doubled").
    fn tighten_pairs(&mut self) {
        let mut edges = self.pipeline.edges.clone();
        let rank = |i: usize| self.order.iter().position(|&o| o == i);
        edges.sort_by_key(|&(p, c)| (rank(p), rank(c)));
        for (p, _) in edges {
            while !self.delay_met() && self.try_step(|vars| halve_producer(vars, p)) {}
            if self.delay_met() {
                return;
            }
        }
    }

    /// Step 4: revisit consumers with several messages per budget: halve C_c and T_c.
    fn revisit_consumers(&mut self) {
        for i in self.order.clone() {
            while !self.delay_met() && self.try_step(|vars| halve_consumer(vars, i)) {}
        }
    }

    /// Applies `step` if it is possible, keeps the rates matched (or no worse than the
    /// description makes them), the loss within its bound and every partition
    /// schedulable; otherwise undoes it.
    fn try_step(&mut self, step: impl Fn(&mut [Var]) -> bool) -> bool {
        let saved = self.vars.clone();
        let before = self.rate_shortfall();
        if !step(&mut self.vars) {
            return false;
        }
        let after = self.match_rates();
        let ok = self.vars.iter().all(|v| v.period > v.budget())
            && (after.is_none() || before.is_some())
            && self.loss_ok()
            && self.admit().is_ok();
        if !ok {
            self.vars = saved;
        }
        ok
    }

    /// The first consumer that cannot keep up, on the current values.
    fn rate_shortfall(&self) -> Option<Shortfall> {
        let flow = self.flows();
        self.order.iter().find_map(|&i| {
            let v = self.vars[i];
            let (rate, with_stall) = self.needed(i, &flow);
            match v.messages {
                m if m < rate => Some(Shortfall::Rate(i, rate)),
                m if m < with_stall => Some(Shortfall::Stall(i, with_stall)),
                _ => None,
            }
        })
    }

    /// The loss of each edge: four-slot `1 - T_p/T_c`; a fifo's share of its
    /// consumer's inputs beyond what the consumer takes.
    fn edge_losses(&self) -> Vec<f64> {
        let flow = self.flows();
        let edges = self.pipeline.edges.iter().enumerate();
        edges
            .map(|(e, &(p, c))| {
                let (vp, vc) = (self.vars[p], self.vars[c]);
                match self.edge_is_fifo(e) {
                    false => crate::pipeline::four_slot_loss(vp.period.max(1), vc.period.max(1)),
                    true => {
                        let inflow = self.fifo_inflow(c, &flow);
                        (1.0 - vc.capacity() / inflow.max(f64::MIN_POSITIVE)).max(0.0)
                    }
                }
            })
            .collect()
    }

    /// The edges' largest loss, and what the hops lose of the messages it leaves.
    fn loss_bound(&self) -> f64 {
        let edges = self.edge_losses().into_iter().fold(0.0, f64::max);
        1.0 - (1.0 - edges) * (1.0 - self.hops_loss())
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
            stall_ns: self.stalls.iter().copied().max().unwrap_or(0),
            stall_delay_bound_ns: None,
            throughput_per_s: self.throughput(),
            loss_bound: self.loss_bound(),
            stages,
            buffers: self.buffers(),
            failure: None,
        }
    }

    fn throughput(&self) -> f64 {
        self.vars
            .iter()
            .map(Var::capacity)
            .fold(f64::INFINITY, f64::min)
    }

    /// Step 5: the buffer of each edge.
    fn buffers(&self) -> Vec<Buffer> {
        let name = |i: usize| self.pipeline.stages[i].name.clone();
        let flow = self.flows();
        let edges = self.pipeline.edges.iter().enumerate();
        edges
            .map(|(e, &(p, c))| {
                let (kind, depth, overflow) = match self.edge_is_fifo(e) {
                    true => {
                        let depth = self.depth(p, c, &flow, self.for_stalls);
                        (
                            "fifo",
                            depth.next_power_of_two(),
                            Some(self.pipeline.overflow.name()),
                        )
                    }
                    false => ("latest", 1, None),
                };
                Buffer {
                    from: name(p),
                    to: name(c),
                    kind,
                    depth,
                    overflow,
                }
            })
            .collect()
    }

    /// The depth of the fifo from `p` into `c`: the backlog `c` may have queued over all
    /// of its fifo inputs ([`Self::single_depth`] summed over them). With one input it
    /// is the paper's depth; a consumer with several (a MIMO join, Boomerang III-E,
    /// Figure 6) takes its m messages per job from whichever inputs hold some, so one
    /// input's burst (a slow producer writing its m at once) delays the others and
    /// their messages queue behind it: their sum bounds the queue of each.
    fn depth(&self, p: usize, c: usize, flow: &[f64], stalled: bool) -> u64 {
        let fifo = self.inputs(c).filter(|&e| self.edge_is_fifo(e));
        let producers: Vec<usize> = fifo.map(|e| self.pipeline.edges[e].0).collect();
        match producers.len() {
            0 | 1 => self.single_depth(p, c, flow, stalled),
            _ => producers
                .iter()
                .map(|&q| self.single_depth(q, c, flow, stalled))
                .sum(),
        }
    }

    /// `m_p (⌈T_c / T_p⌉ + 1)` (III-E), plus, for a stall of `D`, the backlog it leaves:
    /// `⌈D · m_p / T_p⌉` (the producer's rate while the consumer is held, or what a
    /// held producer writes at once after it).
    fn single_depth(&self, p: usize, c: usize, flow: &[f64], stalled: bool) -> u64 {
        let (vp, vc) = (self.vars[p], self.vars[c]);
        // Periods are 0 only before rate matching (an infeasible pipeline's report).
        let base = crate::pipeline::fifo_depth(vp.messages, vp.period.max(1), vc.period.max(1));
        let stall = match stalled {
            true => self.stalls[p].max(self.stalls[c]),
            false => 0,
        };
        base + ((stall as f64 * flow[p] / NS_PER_S) - 1e-9).ceil().max(0.0) as u64
    }

    /// The exact bound: max over paths of Σ (k_i T_i + R_i), the gateway's reader and
    /// writer included with their own period and WCRT; `stalled`: with the depths
    /// sized for a stall (the queue a message may find after one).
    fn exact_bound(&self, report: &Report, stalled: bool) -> Option<Time> {
        let flow = self.flows();
        let mut worst = 0;
        for path in &self.paths {
            let mut sum = 0;
            for (k, &i) in path.iter().enumerate() {
                let s = &self.pipeline.stages[i];
                let v = self.vars[i];
                let edge = (k > 0).then(|| self.edge_index(path[k - 1], i));
                let periods = match edge {
                    Some(e) if self.edge_is_fifo(e) => self
                        .depth(path[k - 1], i, &flow, stalled)
                        .div_ceil(v.messages),
                    _ => 1,
                };
                sum += periods * v.period + wcrt(report, &s.partition, &s.name)?;
            }
            for (gateway, task, period) in self.path_gateways(path) {
                sum += period + wcrt(report, gateway, &task)?;
            }
            worst = worst.max(sum + self.hop_latency(path));
        }
        Some(worst)
    }

    fn edge_index(&self, p: usize, c: usize) -> usize {
        let edges = &self.pipeline.edges;
        edges
            .iter()
            .position(|&e| e == (p, c))
            .expect("an edge of the path")
    }

    /// The delay bound with one stall of up to `D` while a message is in flight
    /// (Boomerang III-E's exact bound plus the stall): the stall holds the message at
    /// one stage `i` (or gateway task) at a time, whose job then completes within the
    /// busy period of its CPU with the stall, `L_i^D` ([`stall_busy_period`]) instead of
    /// `R_i`; the backlog it leaves at every later stage is at most the stall-sized
    /// depth, which the `k_i = ⌈depth_i / m_i⌉` periods of [`Self::exact_bound`] drain.
    /// So the bound is the exact bound with the stall-sized depths plus
    /// `max_i (L_i^D - R_i)` over the path. It assumes one stall per message's passage
    /// (stalls further apart than the bound and the drain time `max(D, T)`).
    fn stall_bound(&self, report: &Report) -> Option<Time> {
        let base = self.exact_bound(report, true)?;
        let mut extra = 0;
        for path in &self.paths {
            let stages = path.iter().map(|&i| {
                let s = &self.pipeline.stages[i];
                (s.partition.as_str(), s.name.clone(), self.stalls[i])
            });
            let gateways = self
                .path_gateways(path)
                .into_iter()
                .map(|(g, task, _)| (g, task, partition_stall(self.system, g)));
            for (partition, task, stall) in stages.chain(gateways) {
                let r = wcrt(report, partition, &task)?;
                let busy = cpu_busy_period(report, partition, &task, stall)?;
                extra = extra.max(busy.saturating_sub(r));
            }
        }
        Some(base + extra)
    }

    /// Makes every four-slot edge that cannot tolerate the platform's stall a fifo
    /// ([`Self::tolerates`]), then sizes the consumers for it ([`Self::match_rates`]
    /// with the catch-up) and admits the result. Without a stall: nothing to do.
    fn size_for_stalls(&mut self, report: Report) -> Result<Report, Failure> {
        if self.stalls.iter().all(|&d| d == 0) {
            return Ok(report);
        }
        let offsets = phase_offsets(self.pipeline, &self.current().stages);
        for e in 0..self.kinds.len() {
            if !self.edge_is_fifo(e) && !self.tolerates(e, &report, &offsets) {
                self.kinds[e] = ChannelKind::Fifo;
            }
        }
        self.for_stalls = true;
        self.match_rates();
        let stall = self.stalls.iter().copied().max().unwrap_or(0);
        if let Some(i) =
            (0..self.vars.len()).find(|&i| self.vars[i].period <= self.vars[i].budget())
        {
            let v = self.vars[i];
            return Err(Failure {
                stage: self.pipeline.stages[i].name.clone(),
                test: "stall".into(),
                message: format!(
                    "catching up after a stall of {} ns takes {} messages per period, {} ns of budget, not less than its period {} ns",
                    stall,
                    v.messages,
                    v.budget(),
                    v.period
                ),
            });
        }
        self.admit().map_err(|f| Failure {
            message: format!(
                "sized for the platform's stall of {stall} ns (docs/platform.md): {}",
                f.message
            ),
            ..f
        })
    }

    /// Whether the four-slot edge `e` loses nothing when a stall of `D` delays either
    /// end: the consumer must read each message after the producer wrote it and before
    /// it writes the next. With equal periods `T`, the producer's write within `R_p`
    /// of its release and the consumer's read within `R_c` of its own, `δ` after it
    /// (the release offsets): `R_p + D ≤ δ` and `δ + R_c + D ≤ T`.
    fn tolerates(&self, e: usize, report: &Report, offsets: &[Time]) -> bool {
        let (p, c) = self.pipeline.edges[e];
        let (sp, sc) = (&self.pipeline.stages[p], &self.pipeline.stages[c]);
        let (Some(rp), Some(rc)) = (
            wcrt(report, &sp.partition, &sp.name),
            wcrt(report, &sc.partition, &sc.name),
        ) else {
            return false;
        };
        let (t, d) = (self.vars[c].period, self.stalls[p].max(self.stalls[c]));
        let delta = offsets[c].wrapping_sub(offsets[p]);
        self.vars[p].period == t
            && offsets[c] >= offsets[p]
            && rp + d <= delta
            && delta + rc + d <= t
    }

    /// Runs the steps; the solution names the stage and test of a failure.
    fn run(mut self) -> Solution {
        let result = self.steps();
        let mut s = self.current();
        match result {
            Ok(report) => {
                s.feasible = true;
                s.exact_delay_bound_ns = self.exact_bound(&report, false);
                if self.for_stalls {
                    s.stall_delay_bound_ns = self.stall_bound(&report);
                }
                for st in &mut s.stages {
                    st.wcrt_ns = wcrt(&report, &st.partition, &st.name);
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
        let report = self.admit()?;
        self.final_checks()?;
        let report = self.size_for_stalls(report)?;
        self.stall_checks()?;
        Ok(report)
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
        if let Some(Shortfall::Rate(c, needed)) = self.rate_shortfall() {
            return Err(self.rate_failure(c, needed));
        }
        if let Some(t) = self.pipeline.qos.throughput_per_s {
            let rate = |i: usize| self.vars[i].capacity();
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
        if let Some(f) = self.hop_loss_failure() {
            return Err(f);
        }
        if !self.loss_ok() {
            let losses = self.edge_losses();
            let worst = (0..losses.len()).max_by(|&a, &b| losses[a].total_cmp(&losses[b]));
            let (p, c) = self.pipeline.edges[worst.expect("a loss needs an edge")];
            return Err(Failure {
                stage: stage_name(c),
                test: "loss".into(),
                message: format!(
                    "1 - T_p/T_c = {:.4} from `{}`, with the hops' loss {:.4}, exceeds the loss rate",
                    crate::pipeline::four_slot_loss(self.vars[p].period, self.vars[c].period),
                    stage_name(p),
                    self.hops_loss()
                ),
            });
        }
        Ok(())
    }

    /// A hop that alone loses more than the pipeline may: any loss in a `*` pipeline
    /// (lossless), more than its loss rate in a four-slot one.
    fn hop_loss_failure(&self) -> Option<Failure> {
        let limit = match self.pipeline.buffering {
            ChannelKind::Fifo => 0.0,
            _ => self.pipeline.qos.loss_ppm? as f64 / 1e6,
        };
        let stages = self.pipeline.stages.iter();
        let ends = stages.flat_map(|s| [(s, &s.input), (s, &s.output)]);
        let lossy = ends.filter_map(|(s, e)| match e {
            Some(Endpoint::Zenoh { channel }) => Some((s, channel, self.bridge(channel)?.loss_ppm)),
            _ => None,
        });
        let (stage, channel, ppm) = lossy.max_by_key(|h| h.2)?;
        let what = match self.pipeline.buffering {
            ChannelKind::Fifo => "a `*` pipeline is lossless".to_string(),
            _ => format!("more than the loss rate {:.4}", limit),
        };
        (ppm as f64 / 1e6 > limit + 1e-12).then(|| Failure {
            stage: stage.name.clone(),
            test: "loss".into(),
            message: format!(
                "the hop of `zenoh:{channel}` may lose {:.4} of the messages (its bridge's `loss:`): {what}",
                ppm as f64 / 1e6
            ),
        })
    }

    /// A consumer the description fixes below its inputs' rate cannot stay within the
    /// sized buffers once sized for the stall.
    fn stall_checks(&self) -> Result<(), Failure> {
        match self.rate_shortfall() {
            Some(Shortfall::Stall(c, needed)) => Err(Failure {
                stage: self.pipeline.stages[c].name.clone(),
                test: "stall".into(),
                message: format!(
                    "its budget fixes {} messages per period; draining the backlog of a stall of {} ns takes {needed}",
                    self.vars[c].messages,
                    self.consumer_stall(c)
                ),
            }),
            Some(Shortfall::Rate(c, needed)) => Err(self.rate_failure(c, needed)),
            None => Ok(()),
        }
    }

    /// Condition 3 fails at fifo consumer `c`: what the description implies under the
    /// pipeline's overflow rule.
    fn rate_failure(&self, c: usize, needed: u64) -> Failure {
        let flow = self.flows();
        let inflow = self.fifo_inflow(c, &flow);
        let v = self.vars[c];
        let loss = 100.0 * (1.0 - v.capacity() / inflow).max(0.0);
        let producers: Vec<String> = self
            .inputs(c)
            .filter(|&e| self.edge_is_fifo(e))
            .map(|e| format!("`{}`", self.pipeline.stages[self.pipeline.edges[e].0].name))
            .collect();
        let implied = match self.pipeline.overflow {
            Overflow::Block => format!(
                "with overflow block its full fifo holds {} to {:.1}/s and the rest of their input, {loss:.1}%, is never taken in",
                producers.join(" and "),
                v.capacity()
            ),
            rule => format!(
                "with overflow {} its full fifo loses {loss:.1}% of the messages, each waiting {} periods",
                rule.name(),
                self.inputs(c)
                    .filter(|&e| self.edge_is_fifo(e))
                    .map(|e| self.depth(self.pipeline.edges[e].0, c, &flow, false))
                    .max()
                    .unwrap_or(1)
                    .div_ceil(v.messages)
            ),
        };
        Failure {
            stage: self.pipeline.stages[c].name.clone(),
            test: "rate-matching".into(),
            message: format!(
                "it takes {} messages per period of {} ns, {:.1}/s, of the {inflow:.1}/s {} send (Boomerang III-E, condition 3: needs {needed} per period); {implied}",
                v.messages,
                v.period,
                v.capacity(),
                producers.join(" and ")
            ),
        }
    }
}

/// The WCRT of task `name` of `partition` in `report`.
fn wcrt(report: &Report, partition: &str, name: &str) -> Option<Time> {
    let mut tasks = report.tasks.iter();
    tasks
        .find(|t| t.partition == partition && t.name == name)
        .and_then(|t| t.wcrt_ns)
}

/// The busy period with a stall of `stall` of the CPU task `name` of `partition` runs
/// on, over every task the report places there.
fn cpu_busy_period(report: &Report, partition: &str, name: &str, stall: Time) -> Option<Time> {
    let me = report
        .tasks
        .iter()
        .find(|t| t.partition == partition && t.name == name)?;
    let tasks: Vec<PlainTask> = report
        .tasks
        .iter()
        .filter(|t| t.cpu == me.cpu)
        .map(|t| PlainTask::new(t.wcet_ns, t.period_ns, t.deadline_ns))
        .collect();
    stall_busy_period(&tasks, stall)
}

/// Step 3 for one producer: T_p / 2. False when it may not change.
fn halve_producer(vars: &mut [Var], p: usize) -> bool {
    if vars[p].fixed_period || vars[p].period / 2 <= vars[p].budget() {
        return false;
    }
    vars[p].period /= 2;
    true
}

/// Step 4 for one consumer: C_c / 2 and T_c / 2 while C_c holds a message (rate
/// matching gives it its messages per period again).
fn halve_consumer(vars: &mut [Var], i: usize) -> bool {
    let v = vars[i];
    if v.fixed_period || v.fixed_messages || v.messages < 2 {
        return false;
    }
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

/// The solutions as text: per pipeline its stages, buffers and the bounds.
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
            let overflow = b
                .overflow
                .map_or(String::new(), |o| format!(", overflow {o}"));
            out += &format!(
                "  buffer {} -> {}: {} depth {}{overflow}\n",
                b.from, b.to, b.kind, b.depth
            );
        }
        let exact = s.exact_delay_bound_ns.map_or("-".into(), d);
        out += &format!(
            "  delay bound: {} (paper: Σ T + blocking), {exact} (exact: Σ (k T + R))\n",
            d(s.e2e_delay_bound_ns)
        );
        if s.stall_ns > 0 {
            let with = s.stall_delay_bound_ns.map_or("-".into(), d);
            out += &format!(
                "  with one stall of up to {}: delay bound {with}\n",
                d(s.stall_ns)
            );
        }
        out += &format!(
            "  throughput >= {:.1}/s, loss <= {:.1}%\n",
            s.throughput_per_s,
            s.loss_bound * 100.0
        );
    }
    out
}
