//! Multi-mode systems (M2-Xen, Li et al., "Multi-Mode Virtualization for Soft Real-Time
//! Systems", RTAS 2018, Sec. III-V).
//!
//! *Per mode*: the system as it runs in that mode ([`System::in_mode`]: each partition's
//! task set with its mode agent as a task, as M2-Xen III models the DMM) is analysed
//! like any system, each partition scheduled as a server on its interface, and the
//! interfaces of each pool of shared CPUs, with the boost reserve, must fit its capacity.
//!
//! *Per switch*: the mode manager's own state machine ([`bulkhead_modes::Switch`]) is
//! run dry under the switch's policy, and [`bulkhead_modes::verify`] checks after every
//! step that no pool exceeds its capacity (host overload) and no partition demands more
//! than its interface; at the one instant where a partition runs one task set on the
//! other mode's interface (a growing interface before its agent switches, a shrinking
//! one after), the task set must be schedulable on that interface. A switch that cannot
//! be made safe is refused, naming the step and the partition.

use crate::report::{cpu_names, Options, Report};
pub use crate::report::{
    LocalReport, ModeReport, ModesReport, PoolReport, Refusal, StepReport, TransitionReport,
};
pub use crate::reservation::CPU;
use crate::servers::{resolve, ServerSet};
use bulkhead_model::units::format_duration as fmt;
use bulkhead_model::{Cpus, PartitionKind, SwitchPolicy, System};
use bulkhead_modes::{
    bandwidth, demand, dry_run, verify, AckOrder, Interface, Local, Member, Pool, Ppm, Step,
    SwitchError, Table, TableMode, Violation,
};

/// The global mode table of `system` with every interface resolved, as the mode
/// manager of `sim` and `run` uses it. A budget no value makes schedulable is taken as
/// the whole period (the mode is then reported not schedulable).
pub fn mode_table(system: &System, options: &Options) -> Table {
    let modes = system.modes.as_ref().expect("a system with modes");
    let boost = modes
        .allowed()
        .iter()
        .any(|(_, _, p)| *p == SwitchPolicy::Boost);
    let agent = bandwidth(modes.agent.budget, modes.agent.period, 1);
    let mut table = Table::default();
    for p in system
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Rt)
    {
        let cpus = pool_cpus(system, p);
        let n = cpus.as_ref().map_or(1, |c| c.len() as u32);
        let pool = cpus.map(|cpus| {
            let index = match table.pools.iter().position(|x| x.cpus == cpus) {
                Some(i) => i,
                None => {
                    table.pools.push(Pool {
                        capacity: n as Ppm * options.kernel().cap_ppm(),
                        cpus,
                        reserve: 0,
                    });
                    table.pools.len() - 1
                }
            };
            if boost && modes.is_modal(&p.name) {
                table.pools[index].reserve += agent;
            }
            index
        });
        let cpus = cpu_names(system, p).len() as u32;
        table.members.push(Member {
            name: p.name.clone(),
            pool,
            cpus,
        });
    }
    for m in &modes.table {
        let view = system.in_mode(&m.name).expect("a mode of the table");
        let locals = view
            .partitions
            .iter()
            .filter(|p| p.kind == PartitionKind::Rt)
            .zip(&table.members)
            .map(|(p, member)| Local {
                interface: member.pool.map(|_| {
                    let r = resolve(p, member.cpus as usize);
                    Interface {
                        budget: r.budget.unwrap_or(r.period),
                        period: r.period,
                    }
                }),
                tasks: p.tasks.clone(),
            })
            .collect();
        table.modes.push(TableMode {
            name: m.name.clone(),
            locals,
        });
    }
    table
}

/// The CPUs of a partition scheduled as a server (its pool); `None` for one that owns
/// its CPUs.
fn pool_cpus(system: &System, p: &bulkhead_model::Partition) -> Option<bulkhead_model::CpuSet> {
    p.interface?;
    match &p.cpus {
        Some(Cpus::Set(set)) => Some(set.clone()),
        _ => system.cpus.clone(),
    }
}

/// The analysis of a system with modes: the initial mode as the main report, and
/// every mode and allowed switch in [`Report::modes`]. `analyze_mode` analyses the
/// system as it runs in one mode, a system without modes (`crate::system`'s analysis,
/// which calls this one for a system with modes).
pub fn analyze(
    system: &System,
    options: &Options,
    analyze_mode: &dyn Fn(&System) -> Report,
) -> Report {
    let modes = system.modes.as_ref().expect("a system with modes");
    let table = mode_table(system, options);
    let mode_reports: Vec<ModeReport> = (0..table.modes.len())
        .map(|m| mode_report(system, &table, m, analyze_mode))
        .collect();
    let transitions: Vec<TransitionReport> = modes
        .allowed()
        .into_iter()
        .map(|(from, to, policy)| transition(system, &table, &mode_reports, (&from, &to), policy))
        .collect();
    let initial = table.mode(&modes.initial).expect("initial mode");
    let mut report = mode_reports[initial].report.clone();
    report.schedulable =
        mode_reports.iter().all(|m| m.schedulable) && transitions.iter().all(|t| t.safe);
    report.modes = Some(ModesReport {
        initial: modes.initial.clone(),
        agent_budget_ns: modes.agent.budget,
        agent_period_ns: modes.agent.period,
        boost_reserved: table.pools.iter().any(|p| p.reserve > 0),
        pools: table
            .pools
            .iter()
            .map(|p| PoolReport {
                cpus: p.cpus.to_string(),
                capacity_ppm: p.capacity,
                reserve_ppm: p.reserve,
            })
            .collect(),
        modes: mode_reports,
        transitions,
    });
    report
}

fn mode_report(
    system: &System,
    table: &Table,
    m: usize,
    analyze_mode: &dyn Fn(&System) -> Report,
) -> ModeReport {
    let name = &table.modes[m].name;
    let view = system.in_mode(name).expect("a mode of the table");
    let report = analyze_mode(&view);
    let loads = table.loads(m);
    let overloaded = table
        .pools
        .iter()
        .zip(&loads)
        .find(|(p, &load)| load > p.capacity);
    let binding = match (overloaded, report.schedulable) {
        (Some((p, load)), _) => format!(
            "the interfaces on CPUs {} with the boost reserve of {} take {} of its capacity {}",
            p.cpus,
            cpus_text(p.reserve),
            cpus_text(*load),
            cpus_text(p.capacity)
        ),
        (None, false) => first_failure(&report),
        (None, true) => "every partition fits its interface and every pool its CPUs".into(),
    };
    let rt = view
        .partitions
        .iter()
        .filter(|p| p.kind == PartitionKind::Rt);
    let partitions = rt
        .zip(&table.modes[m].locals)
        .enumerate()
        .map(|(k, (p, local))| {
            let resolved = local
                .interface
                .map(|_| resolve(p, table.members[k].cpus as usize));
            let derived = resolved.map_or(Vec::new(), |r| {
                [("period", r.derived_period), ("budget", r.derived_budget)]
                    .into_iter()
                    .filter_map(|(what, d)| d.then_some(what))
                    .collect()
            });
            LocalReport {
                partition: p.name.clone(),
                tasks: p.tasks.iter().map(|t| t.name.clone()).collect(),
                demand_ppm: demand(&local.tasks),
                budget_ns: local.interface.map(|i| i.budget),
                period_ns: local.interface.map(|i| i.period),
                bandwidth_ppm: table.interface_bw(k, local),
                derived,
            }
        })
        .collect();
    ModeReport {
        name: name.clone(),
        schedulable: report.schedulable && overloaded.is_none(),
        partitions,
        loads_ppm: loads,
        binding,
        report,
    }
}

fn first_failure(report: &Report) -> String {
    let partition = report.partitions.iter().find(|p| !p.schedulable);
    let cpu = report.cpus.iter().find(|c| !c.schedulable);
    match (partition, cpu) {
        (Some(p), _) => format!("partition `{}`: {}", p.name, p.binding),
        (None, Some(c)) => format!("CPU {}: {}", c.cpu, c.binding),
        (None, None) => "a verdict fails".into(),
    }
}

fn transition(
    system: &System,
    table: &Table,
    modes: &[ModeReport],
    (from, to): (&str, &str),
    policy: SwitchPolicy,
) -> TransitionReport {
    let (a, b) = (
        table.mode(from).expect("mode"),
        table.mode(to).expect("mode"),
    );
    let mut report = TransitionReport {
        from: from.to_string(),
        to: to.to_string(),
        policy: policy.name(),
        safe: false,
        steps: Vec::new(),
        peak_ppm: table.loads(a),
        refusal: None,
    };
    if let Some(bad) = [a, b].into_iter().find(|&m| !modes[m].schedulable) {
        report.refusal = Some(Refusal {
            step: 0,
            partition: None,
            message: format!("mode `{}` is not schedulable", table.modes[bad].name),
        });
        return report;
    }
    let run = dry_run(table, a, b, policy, AckOrder::Fifo);
    let steps = match &run {
        Ok(replay) => replay.steps.clone(),
        Err(stopped) => stopped.steps.clone(),
    };
    report.steps = steps.iter().map(|s| step_report(table, s)).collect();
    report.refusal = match run {
        Err(stopped) => Some(overload(table, &stopped.error, stopped.steps.len())),
        Ok(_) => check_steps(system, table, (a, b), policy, &steps, &mut report.peak_ppm),
    };
    report.safe = report.refusal.is_none();
    report
}

/// The independent checks of a completed dry run, in every order of acknowledgement
/// the policy can see (its own for the one-at-a-time policies).
fn check_steps(
    system: &System,
    table: &Table,
    (a, b): (usize, usize),
    policy: SwitchPolicy,
    steps: &[Step],
    peaks: &mut Vec<Ppm>,
) -> Option<Refusal> {
    match verify(table, a, b, steps) {
        Ok(p) => *peaks = p.pools,
        Err(v) => return Some(violation(table, &v)),
    }
    if matches!(policy, SwitchPolicy::Batch | SwitchPolicy::Greedy) {
        for order in [AckOrder::Lifo, AckOrder::Seeded(1), AckOrder::Seeded(2)] {
            let other = match dry_run(table, a, b, policy, order) {
                Ok(r) => r.steps,
                Err(s) => return Some(overload(table, &s.error, s.steps.len())),
            };
            match verify(table, a, b, &other) {
                Ok(p) => {
                    for (peak, q) in peaks.iter_mut().zip(p.pools) {
                        *peak = (*peak).max(q);
                    }
                }
                Err(v) => return Some(violation(table, &v)),
            }
        }
    }
    partition_overload(system, table, (a, b), steps)
}

/// M2-Xen IV-B, Step 3 leaves one instant per partition where a task set runs on the
/// other mode's interface: a growing partition's old tasks on its new interface (from
/// its interface step to its acknowledgement), a shrinking one's new tasks on its old
/// interface (from its acknowledgement to its interface step). Each must be
/// schedulable there (the bandwidth check of [`verify`] is necessary, this is exact).
fn partition_overload(
    system: &System,
    table: &Table,
    (a, b): (usize, usize),
    steps: &[Step],
) -> Option<Refusal> {
    let views = [
        system.in_mode(&table.modes[a].name)?,
        system.in_mode(&table.modes[b].name)?,
    ];
    let rt = |v: usize, k: usize| {
        views[v]
            .partitions
            .iter()
            .filter(|p| p.kind == PartitionKind::Rt)
            .nth(k)
            .expect("member")
    };
    for change in table.changes(a, b) {
        let k = change.member;
        let (Some(old), Some(new)) = (change.old.interface, change.new.interface) else {
            continue;
        };
        if !change.tasks_change() || old == new {
            continue;
        }
        let (tasks_of, on, when) = if change.grows() {
            (0, new, "interface_change")
        } else {
            (1, old, "agent_ack")
        };
        let set = ServerSet::of(rt(tasks_of, k), table.members[k].cpus as usize);
        let verdict = set.test(on.period, on.budget);
        if verdict.schedulable {
            continue;
        }
        let step = steps
            .iter()
            .position(|s| match s {
                Step::Interface { member, .. } => *member == k && when == "interface_change",
                Step::Ack { member, .. } => *member == k && when == "agent_ack",
                _ => false,
            })
            .unwrap_or(0);
        let which = if change.grows() { "old" } else { "new" };
        let name = &table.members[k].name;
        return Some(Refusal {
            step,
            partition: Some(name.clone()),
            message: format!(
                "at step {step} ({when} of `{name}`) its {which} task set runs on the interface {} every {} and is not schedulable there: {}",
                fmt(on.budget),
                fmt(on.period),
                verdict.binding
            ),
        });
    }
    None
}

fn overload(table: &Table, error: &SwitchError, step: usize) -> Refusal {
    match error {
        SwitchError::Overload {
            member,
            pool,
            load,
            capacity,
        } => {
            let name = &table.members[*member].name;
            Refusal {
                step,
                partition: Some(name.clone()),
                message: format!(
                    "at step {step} (interface_change of `{name}`) its growth would load CPUs {} with {}, above their capacity {}",
                    table.pools[*pool].cpus,
                    cpus_text(*load),
                    cpus_text(*capacity)
                ),
            }
        }
        SwitchError::UnexpectedAck { member } => Refusal {
            step,
            partition: Some(table.members[*member].name.clone()),
            message: error.to_string(),
        },
    }
}

fn violation(table: &Table, v: &Violation) -> Refusal {
    let (step, member, message) = match *v {
        Violation::Host {
            step,
            member,
            pool,
            load,
            capacity,
        } => (
            step,
            member,
            format!(
                "CPUs {} would carry {}, above their capacity {}",
                table.pools[pool].cpus,
                cpus_text(load),
                cpus_text(capacity)
            ),
        ),
        Violation::Partition {
            step,
            member,
            demand,
            interface,
        } => (
            step,
            member,
            format!(
                "its tasks would demand {} of an interface of {}",
                cpus_text(demand),
                cpus_text(interface)
            ),
        ),
    };
    let name = &table.members[member].name;
    Refusal {
        step,
        partition: Some(name.clone()),
        message: format!("at step {step} (`{name}`): {message}"),
    }
}

fn step_report(table: &Table, step: &Step) -> StepReport {
    let name = |k: usize| Some(table.members[k].name.clone());
    match *step {
        Step::Interface { member, load, .. } => StepReport {
            event: "interface_change",
            partition: name(member),
            boost: false,
            load_ppm: Some(load),
        },
        Step::Request { member, boost } => StepReport {
            event: "agent_request",
            partition: name(member),
            boost,
            load_ppm: None,
        },
        Step::Ack { member, .. } => StepReport {
            event: "agent_ack",
            partition: name(member),
            boost: false,
            load_ppm: None,
        },
        Step::Done => StepReport {
            event: "mode_done",
            partition: None,
            boost: false,
            load_ppm: None,
        },
    }
}

/// A bandwidth in CPUs, e.g. `1.250 CPUs`.
pub fn cpus_text(ppm: Ppm) -> String {
    format!("{:.3} CPUs", ppm as f64 / CPU as f64)
}

/// The text `bulkhead analyze` prints about modes.
pub fn render_text(m: &ModesReport) -> String {
    let mut out = format!(
        "\nmodes: initial `{}`, mode agent {} every {}{}\n",
        m.initial,
        fmt(m.agent_budget_ns),
        fmt(m.agent_period_ns),
        if m.boost_reserved {
            ", boost reserve held"
        } else {
            ""
        }
    );
    for p in &m.pools {
        out += &format!(
            "  pool CPUs {}: capacity {}, boost reserve {}\n",
            p.cpus,
            cpus_text(p.capacity_ppm),
            cpus_text(p.reserve_ppm)
        );
    }
    for mode in &m.modes {
        let loads: Vec<String> = mode.loads_ppm.iter().map(|&l| cpus_text(l)).collect();
        let verdict = if mode.schedulable { "ok" } else { "FAILS" };
        out += &format!("  mode {}: {verdict}: {}", mode.name, mode.binding);
        if !loads.is_empty() {
            out += &format!(" (pool loads {})", loads.join(", "));
        }
        out += "\n";
        for l in &mode.partitions {
            out += &format!("    {}: tasks {}", l.partition, l.tasks.join(", "));
            out += &format!(" demand {}", cpus_text(l.demand_ppm));
            if let (Some(b), Some(p), Some(bw)) = (l.budget_ns, l.period_ns, l.bandwidth_ppm) {
                out += &format!(
                    ", interface {} every {} = {}",
                    fmt(b),
                    fmt(p),
                    cpus_text(bw)
                );
                if !l.derived.is_empty() {
                    out += &format!(" ({} derived)", l.derived.join(" and "));
                }
            }
            out += "\n";
        }
    }
    for t in &m.transitions {
        out += &format!("  switch {} -> {} ({}): ", t.from, t.to, t.policy);
        match &t.refusal {
            Some(r) => out += &format!("REFUSED: {}\n", r.message),
            None => {
                let peaks: Vec<String> = t.peak_ppm.iter().map(|&p| cpus_text(p)).collect();
                out += &format!("safe, {} steps", t.steps.len());
                if !peaks.is_empty() {
                    out += &format!(", pool peaks {}", peaks.join(", "));
                }
                out += "\n";
            }
        }
        if !t.steps.is_empty() {
            let steps: Vec<String> = t.steps.iter().map(step_text).collect();
            out += &format!("    {}\n", steps.join(", "));
        }
    }
    out
}

fn step_text(s: &StepReport) -> String {
    let who = s.partition.as_deref().unwrap_or("");
    match s.event {
        "interface_change" => format!(
            "{who} interface (pool {})",
            s.load_ppm.map_or(String::new(), cpus_text)
        ),
        "agent_request" if s.boost => format!("{who} request (boost)"),
        "agent_request" => format!("{who} request"),
        "agent_ack" => format!("{who} ack"),
        _ => "done".to_string(),
    }
}
