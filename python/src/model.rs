//! Descriptions, analysis and simulation: `bulkhead_model` loads (errors keep file, line,
//! column and key path), `bulkhead_analysis` and `bulkhead_sim` run on the loaded system.
//! The model, the analysis report and the statistics cross to Python as JSON documents;
//! the pure-Python layer builds its typed objects from them.

use crate::errors::raise;
use bulkhead_model::{
    units::parse_duration, Bus, Channel, Cpus, Diagnostic, Loaded, Partition, Pipeline, Service,
    StopStart, System, Trigger, Window,
};
use pyo3::prelude::*;
use serde_json::{json, Value};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySystem>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(load_str, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(sim, m)?)?;
    m.add_function(wrap_pyfunction!(duration_ns, m)?)?;
    Ok(())
}

/// A loaded, valid system description (opaque; `model.System` wraps it).
#[pyclass(module = "bulkhead._native", name = "System", frozen)]
pub struct PySystem {
    system: System,
}

#[pymethods]
impl PySystem {
    /// The description as a JSON document (`model.System.from_dict` reads it).
    fn to_json(&self) -> String {
        system_json(&self.system).to_string()
    }
}

fn model_error(py: Python<'_>, d: Diagnostic) -> PyErr {
    let args = (d.to_string(), d.file, d.line, d.column, d.path, d.message);
    raise(py, "ModelError", args)
}

fn loaded(py: Python<'_>, r: Result<Loaded, Diagnostic>) -> PyResult<(PySystem, Vec<String>)> {
    let loaded = r.map_err(|d| model_error(py, d))?;
    let warnings = loaded.warnings.iter().map(|w| w.to_string()).collect();
    Ok((
        PySystem {
            system: loaded.system,
        },
        warnings,
    ))
}

/// Loads and validates the description at `path`: (system, warnings).
#[pyfunction]
fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<(PySystem, Vec<String>)> {
    loaded(py, bulkhead_model::load_file(&path))
}

/// Loads and validates a description from text; `file_name` appears in messages.
#[pyfunction]
fn load_str(py: Python<'_>, src: &str, file_name: &str) -> PyResult<(PySystem, Vec<String>)> {
    loaded(py, bulkhead_model::load_str(src, file_name))
}

/// The analysis report as JSON (what `bulkhead analyze --json` prints).
#[pyfunction]
fn analyze(py: Python<'_>, system: &PySystem, deadline_cap_percent: u64) -> PyResult<String> {
    let options = bulkhead_analysis::system::Options {
        deadline_cap: (deadline_cap_percent * 10_000, 1_000_000),
        ..Default::default()
    };
    let system = solved(py, &system.system)?;
    Ok(bulkhead_analysis::system::analyze_system_with(&system, &options).to_json())
}

/// `system` with its pipelines solved and their stages made tasks, as the command line's
/// `analyze` and `sim` see it; an infeasible pipeline raises `PipelineError`.
fn solved(py: Python<'_>, system: &bulkhead_model::System) -> PyResult<bulkhead_model::System> {
    if system.pipelines.is_empty() {
        return Ok(system.clone());
    }
    let options = bulkhead_analysis::system::Options::default();
    let solutions = bulkhead_analysis::pipes::solve(system, &options);
    if let Some(s) = solutions.iter().find(|s| !s.feasible) {
        let why = s.failure.as_ref().map_or(String::new(), |f| {
            format!(": stage `{}` fails {}: {}", f.stage, f.test, f.message)
        });
        let message = format!("pipeline `{}` is infeasible{why}", s.name);
        return Err(raise(py, "PipelineError", (message,)));
    }
    Ok(bulkhead_analysis::pipes::apply(system, &solutions))
}

/// Simulates `system` for `for_ns` (None: one hyperperiod) with `seed`, as `bulkhead sim`
/// does with its default options; the statistics as JSON (`--stats-json`).
#[pyfunction]
#[pyo3(signature = (system, for_ns, seed))]
fn sim(py: Python<'_>, system: &PySystem, for_ns: Option<u64>, seed: u64) -> PyResult<String> {
    let fail = |msg: String| raise(py, "SimulationError", (msg,));
    let options = bulkhead_sim::BuildOptions {
        server: None,
        exec: bulkhead_sim::ExecModel::Wcet,
        arrivals: bulkhead_sim::Arrivals::Periodic,
        links: Vec::new(),
        behaviours: Vec::new(),
        all_cpus: bulkhead_model::CpuSet::parse("0-1").map_err(|e| fail(e.into()))?,
        task_servers: Vec::new(),
        power_policy: None,
    };
    let system = solved(py, &system.system)?;
    let spec = bulkhead_sim::from_system(&system, &options).map_err(|e| fail(e.to_string()))?;
    if spec.tasks.is_empty() && spec.windows.is_none() {
        return Err(fail(
            "nothing to simulate: no rt tasks and no window schedule".into(),
        ));
    }
    let until = for_ns
        .or_else(|| bulkhead_sim::hyperperiod(&spec))
        .ok_or_else(|| fail("the hyperperiod overflows or is undefined; give for_".into()))?;
    let mut options = bulkhead_sim::Options::until(until);
    options.seed = seed;
    let mut report = py
        .detach(|| bulkhead_sim::simulate(&spec, options, &mut NoTrace))
        .map_err(|e| fail(e.to_string()))?;
    report.pipelines = bulkhead_sim::pipes::pipeline_stats(&system, &report.chains);
    Ok(report.to_json())
}

/// A sink that records nothing.
struct NoTrace;

impl bulkhead_sim::trace::Sink for NoTrace {
    fn enabled(&self) -> bool {
        false
    }

    fn emit(&mut self, _: bulkhead_sim::trace::Event) {}
}

/// Nanoseconds of a duration written as in descriptions (`1ms`, `250us`, `2.5s`).
#[pyfunction]
fn duration_ns(text: &str) -> PyResult<u64> {
    parse_duration(text, None).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

fn cpus(c: &Option<Cpus>) -> Value {
    match c {
        None => Value::Null,
        Some(Cpus::All) => json!("all"),
        Some(Cpus::Set(s)) => json!(s.to_string()),
    }
}

fn lower<T: std::fmt::Debug>(v: T) -> String {
    let text = format!("{v:?}");
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('-');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// `can-reader:BUS`, `can-writer:BUS`, `bridge:CHANNEL` or `mode-agent`.
fn service_name(s: &Service) -> String {
    match s {
        Service::CanReader { bus } => format!("can-reader:{bus}"),
        Service::CanWriter { bus } => format!("can-writer:{bus}"),
        Service::Bridge { channel } => format!("bridge:{channel}"),
        Service::ModeAgent => "mode-agent".into(),
    }
}

fn partition_json(p: &Partition) -> Value {
    let tasks: Vec<Value> = p
        .tasks
        .iter()
        .map(|t| {
            json!({
                "name": t.name, "cmd": t.cmd, "budget_ns": t.budget, "period_ns": t.period,
                "deadline_ns": t.deadline, "priority": t.priority,
                "release_jitter_ns": t.release_jitter, "blocking_ns": t.blocking,
                "resume": lower(t.resume), "service": t.service.as_ref().map(service_name),
                "wcet_khz": t.wcet_khz, "memory_bound_ppm": t.memory_bound_ppm,
            })
        })
        .collect();
    let processes: Vec<Value> = p
        .processes
        .iter()
        .map(|q| {
            json!({
                "cmd": q.cmd, "budget_ns": q.budget, "jitter_ns": q.jitter, "init": q.init,
                "frequency_khz": q.frequency_khz, "required": q.required,
                "restart": q.restart.as_ref().map(|r| json!({
                    "when": lower(r.when), "delay_ns": r.delay, "burst": r.burst,
                    "interval_ns": r.interval,
                })),
            })
        })
        .collect();
    json!({
        "name": p.name, "kind": lower(p.kind), "cpus": cpus(&p.cpus),
        "scheduler": lower(p.scheduler), "reclaim": p.reclaim, "memory": p.memory,
        "pids": p.pids, "tasks": tasks, "processes": processes, "user": p.user,
        "network": p.network.map(lower),
        "interface": p.interface.as_ref().map(|i| json!({
            "period_ns": i.period, "budget_ns": i.budget,
        })),
        "shared_user": p.shared_user, "monitor": p.monitor,
        "sandbox": json!({
            "clean_env": p.sandbox.clean_env, "no_new_privs": p.sandbox.no_new_privs,
            "no_capabilities": p.sandbox.no_capabilities, "seccomp": p.sandbox.seccomp,
            "private_tmp": p.sandbox.private_tmp, "pid_namespace": p.sandbox.pid_namespace,
            "private_users": p.sandbox.private_users,
            "protect_system": p.sandbox.protect_system,
            "protect_kernel": p.sandbox.protect_kernel,
            "protect_cgroups": p.sandbox.protect_cgroups,
            "hide_runtime_dir": p.sandbox.hide_runtime_dir,
            "private_ipc": p.sandbox.private_ipc, "remove_ipc": p.sandbox.remove_ipc,
        }),
    })
}

fn window_json(w: &Window) -> Value {
    let slices: Vec<Value> = w
        .slices
        .iter()
        .map(|s| {
            json!({
                "cpus": cpus(&Some(s.cpus.clone())), "sc_partition": s.sc_partition,
                "be_partition": s.be_partition,
            })
        })
        .collect();
    json!({"length_ns": w.length, "slices": slices})
}

fn channel_json(c: &Channel) -> Value {
    json!({
        "name": c.name, "kind": lower(c.kind), "message_size": c.message_size,
        "depth": c.depth, "writer": c.writer, "readers": c.readers,
    })
}

fn bus_json(b: &Bus) -> Value {
    let clients: Vec<Value> = b
        .clients
        .iter()
        .map(|c| {
            json!({
                "partition": c.partition, "allow": c.allow,
            })
        })
        .collect();
    json!({
        "name": b.name, "interface": b.interface, "gateway": b.gateway,
        "period_ns": b.period, "reader_budget_ns": b.reader_budget,
        "writer_budget_ns": b.writer_budget, "depth": b.depth, "clients": clients,
    })
}

fn pipeline_json(p: &Pipeline) -> Value {
    let stages: Vec<Value> = p
        .stages
        .iter()
        .map(|st| {
            json!({
                "name": st.name, "partition": st.partition, "cmd": st.cmd, "wcet_ns": st.wcet,
                "input": st.input.as_ref().map(|e| e.to_string()),
                "output": st.output.as_ref().map(|e| e.to_string()),
                "period_ns": st.period, "budget_ns": st.budget, "priority": st.priority,
            })
        })
        .collect();
    let edges: Vec<Value> = p
        .edges
        .iter()
        .map(|&(from, to)| json!([p.stages[from].name, p.stages[to].name]))
        .collect();
    json!({
        "name": p.name, "spec": p.spec, "buffering": lower(p.buffering),
        "throughput_per_s": p.qos.throughput_per_s, "loss_ppm": p.qos.loss_ppm,
        "delay_ns": p.qos.delay, "stages": stages, "edges": edges,
    })
}

fn trigger_json(t: &Trigger) -> Value {
    json!({
        "bus": t.bus, "signal": t.signal, "compare": lower(t.compare),
        "threshold": t.threshold, "hold_ns": t.hold,
    })
}

fn stop_start_json(s: &StopStart) -> Value {
    json!({
        "order": s.order, "ack_deadline_ns": s.ack_deadline, "stale": lower(s.stale),
        "suspend_to_ram": s.suspend_to_ram,
        "suspend_when": s.suspend_when.as_ref().map(trigger_json),
        "resume_when": s.resume_when.as_ref().map(trigger_json),
    })
}

fn system_json(s: &System) -> Value {
    json!({
        "cpus": s.cpus.as_ref().map(|c| c.to_string()),
        "set_cwd": s.set_cwd,
        "supervisor_cpus": s.supervisor_cpus.as_ref().map(|c| c.to_string()),
        "partitions": s.partitions.iter().map(partition_json).collect::<Vec<_>>(),
        "windows": s.windows.iter().map(window_json).collect::<Vec<_>>(),
        "channels": s.channels.iter().map(channel_json).collect::<Vec<_>>(),
        "buses": s.buses.iter().map(bus_json).collect::<Vec<_>>(),
        "modes": s.modes.as_ref().map(|m| json!({
            "initial": m.initial,
            "names": m.table.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
        })),
        "pipelines": s.pipelines.iter().map(pipeline_json).collect::<Vec<_>>(),
        "stop_start": s.stop_start.as_ref().map(stop_start_json),
    })
}
