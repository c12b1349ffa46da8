//! Pipelines in `bulkhead run` (Boomerang II-B, III-B, III-E): the solved stages become
//! tasks of their partitions with the solved reservations, each edge a channel the
//! supervisor creates and hands over like a declared one (a sealed memfd, the writer's
//! end to the producer's partition, the reader's end read-only to the consumer's): a
//! `fifo` of the solved depth for `*` pipelines, a four-slot `latest` otherwise. A
//! stage without `cmd` runs `bulkhead stage` ([`crate::stage`]); one with a `cmd`
//! finds its channels in `BULKHEAD_CHAN_<PIPELINE>_<FROM>_<TO>`. After the run the
//! stages' counters add up to per-pipeline statistics under the names `sim` uses.

use bulkhead_analysis::pipes::Solution;
use bulkhead_model::{Channel, Endpoint, Pipeline, System};
use bulkhead_plan::programs::{plan_command, Host, Search};
use bulkhead_sim::pipes::PipelineStats;
use std::path::Path;

/// The system `run` executes: `system` with its pipelines solved and wired, stage
/// programs checked. `(file, text)` are the description's path and text, `exe` the
/// `bulkhead` binary (the default stage program), `workdir` the directory programs
/// start in. Errors name the file, position and key.
pub fn runnable(
    system: &System,
    (file, text): (&Path, &str),
    exe: &Path,
    workdir: &Path,
) -> Result<(System, Vec<Solution>), String> {
    let options = bulkhead_analysis::system::Options::default();
    let solutions = bulkhead_analysis::pipes::solve(system, &options);
    if let Some(why) = crate::common::infeasible(&solutions) {
        return Err(format!("{}: {why}", file.display()));
    }
    check_programs(system, (file, text), workdir)?;
    check_sources(system, (file, text))?;
    let mut out = bulkhead_analysis::pipes::apply(system, &solutions);
    for (p, s) in out.pipelines.clone().iter().zip(&solutions) {
        for (e, &(from, to)) in p.edges.iter().enumerate() {
            out.channels.push(edge_channel(p, e));
            out.channels.push(ready_channel(p, from, to));
        }
        for (i, stage) in p.stages.iter().enumerate() {
            if stage.cmd.is_empty() {
                let cmd = stage_command(exe, p, s, i);
                let task = out
                    .partitions
                    .iter_mut()
                    .filter(|q| q.name == stage.partition)
                    .flat_map(|q| q.tasks.iter_mut())
                    .find(|t| t.name == stage.name)
                    .expect("apply added the stage as a task");
                task.cmd = cmd;
            }
        }
    }
    Ok((out, solutions))
}

/// Every pipeline has at most [`crate::stage::MAX_ORIGINS`] sources: a `bulkhead stage`
/// merging four-slot inputs carries the newest sample of each source in one message;
/// else an error at the pipeline's `spec`.
fn check_sources(system: &System, (file, text): (&Path, &str)) -> Result<(), String> {
    let max = crate::stage::MAX_ORIGINS;
    for (k, p) in system.pipelines.iter().enumerate() {
        let n = p.sources().len();
        if n > max {
            let key = format!("pipelines[{k}].spec");
            let why = format!("{n} sources: a pipeline's messages carry at most {max}");
            let at = bulkhead_model::diagnostic_at(text, &file.display().to_string(), &key, why);
            return Err(at.to_string());
        }
    }
    Ok(())
}

/// The channel of edge `e`, `from -> to`, named `PIPELINE.FROM.TO`: the solved buffer
/// of the edge ([`Pipeline::buffers`], the lowering `sim` builds too).
fn edge_channel(p: &Pipeline, e: usize) -> Channel {
    let (from, to) = p.edges[e];
    let (a, b) = (&p.stages[from], &p.stages[to]);
    let buffer = p.buffers[e];
    Channel {
        name: channel_name(p, from, to),
        kind: buffer.kind,
        message_size: crate::stage::MESSAGE_SIZE as u32,
        depth: buffer.depth,
        overflow: buffer.overflow,
        reads: bulkhead_model::Reads::ONE,
        writer: a.partition.clone(),
        readers: vec![b.partition.clone()],
        writer_task: Some(a.name.clone()),
        reader_tasks: vec![Some(b.name.clone())],
        bridge: None,
    }
}

fn channel_name(p: &Pipeline, from: usize, to: usize) -> String {
    format!("{}.{}.{}", p.name, p.stages[from].name, p.stages[to].name)
}

/// The channel back along edge `from -> to`, `PIPELINE.FROM.TO.ready`, on which the
/// consumer tells the producer it is ready (Start-of-Task, [`crate::stage`]).
fn ready_channel(p: &Pipeline, from: usize, to: usize) -> Channel {
    let (a, b) = (&p.stages[from], &p.stages[to]);
    Channel {
        name: format!("{}.ready", channel_name(p, from, to)),
        kind: bulkhead_model::ChannelKind::Latest,
        message_size: crate::stage::READY_SIZE as u32,
        depth: 1,
        overflow: bulkhead_model::Overflow::Block,
        reads: bulkhead_model::Reads::ONE,
        writer: b.partition.clone(),
        readers: vec![a.partition.clone()],
        writer_task: Some(b.name.clone()),
        reader_tasks: vec![Some(a.name.clone())],
        bridge: None,
    }
}

/// `exe stage ...` for stage `i`: its per-message work (three quarters of its WCET,
/// counting waking and reading; the rest of the budget is left to writing and the task
/// library), messages
/// per activation, role and channels.
fn stage_command(exe: &Path, p: &Pipeline, s: &Solution, i: usize) -> String {
    let stage = &p.stages[i];
    let mut words = vec![
        exe.display().to_string(),
        "stage".into(),
        "--pipeline".into(),
        p.name.clone(),
        "--stage".into(),
        stage.name.clone(),
        "--work".into(),
        (stage.wcet * 3 / 4).to_string(),
        "--messages".into(),
        s.stages[i].messages_per_period.to_string(),
        "--budget".into(),
        s.stages[i].budget_ns.to_string(),
    ];
    if let Some(k) = p.sources().iter().position(|&j| j == i) {
        words.extend(["--source".into(), k.to_string()]);
    }
    if p.sinks().contains(&i) {
        words.push("--sink".into());
    }
    words.extend(can_words(p, i));
    for &(from, to) in &p.edges {
        let dir = match (from == i, to == i) {
            (true, _) => "--output",
            (_, true) => "--input",
            _ => continue,
        };
        words.extend([dir.into(), channel_name(p, from, to)]);
        let ready = match dir {
            "--output" => "--ready-from",
            _ => "--ready-to",
        };
        words.extend([ready.into(), format!("{}.ready", channel_name(p, from, to))]);
    }
    bulkhead_runtime::shell_words(&words)
}

/// The flags connecting stage `i` to the gateway of its `can:BUS:IDS` endpoints (the
/// supervisor hands it the channels, [`bulkhead_runtime::stage_var`]); none for an
/// endpoint without ids, which exchanges no frames.
fn can_words(p: &Pipeline, i: usize) -> Vec<String> {
    let stage = &p.stages[i];
    let mut words = Vec::new();
    let hex = |id: &u32| format!("{id:#x}");
    for (e, input) in [(&stage.input, true), (&stage.output, false)] {
        let Some(Endpoint::Can { bus, ids }) = e else {
            continue;
        };
        let Some(first) = ids.first() else {
            continue;
        };
        let var = bulkhead_runtime::stage_var(bus, &p.name, &stage.name);
        words.extend(match input {
            true => [
                "--can-input".into(),
                var,
                "--can-input-ids".into(),
                ids.iter().map(hex).collect::<Vec<_>>().join(","),
            ],
            false => [
                "--can-output".into(),
                var,
                "--can-output-id".into(),
                hex(first),
            ],
        });
        if input && only_latest_outputs(p, i) {
            words.push("--can-input-latest".into());
        }
    }
    words
}

/// Whether every edge out of stage `i` is four-slot: a source then passes on only the
/// newest of the frames waiting (RT_ASYNC's freshest value); with a fifo it takes them
/// oldest first.
fn only_latest_outputs(p: &Pipeline, i: usize) -> bool {
    let mut outputs = p.edges.iter().zip(&p.buffers);
    outputs.all(|(&(from, _), b)| from != i || b.kind == bulkhead_model::ChannelKind::Latest)
}

/// Every stage `cmd`'s program resolves as a task's does ([`bulkhead_plan::programs`],
/// from `workdir`, searched as its partition's); else an error at the `cmd`'s position
/// in the description `(file, text)`.
pub fn check_programs(
    system: &System,
    (file, text): (&Path, &str),
    workdir: &Path,
) -> Result<(), String> {
    let host = Host::current(workdir);
    for (k, p) in system.pipelines.iter().enumerate() {
        for stage in p.stages.iter().filter(|s| !s.cmd.is_empty()) {
            let partition = system.partition(&stage.partition);
            let (path, clean) = partition.map_or((system.path.as_deref(), true), |q| {
                (system.path_of(q), q.sandbox.clean_env)
            });
            let search = Search::new(&host, path, clean);
            let Err(e) = plan_command(&stage.cmd, workdir, &search) else {
                continue;
            };
            let key = format!("pipelines[{k}].stages.{}.cmd", stage.name);
            let why = format!("stage `{}`: {e}", stage.name);
            let at = bulkhead_model::diagnostic_at(text, &file.display().to_string(), &key, why);
            return Err(at.to_string());
        }
    }
    Ok(())
}

/// Per pipeline, the statistics of the run from the stages' counters: `messages_in`
/// from the sources, the rest from the sinks (as `sim --stats-json` names them).
/// `tasks`: per rt task its partition, name and counters at the stop.
pub fn stats(system: &System, tasks: &[TaskCounters]) -> Vec<PipelineStats> {
    system.pipelines.iter().map(|p| one(p, tasks)).collect()
}

/// An rt task's partition, name and named counters.
pub type TaskCounters<'a> = (&'a str, &'a str, &'a [(String, u64)]);

fn one(p: &Pipeline, tasks: &[TaskCounters]) -> PipelineStats {
    let counter = |i: usize, name: &str| {
        let s = &p.stages[i];
        tasks
            .iter()
            .find(|(partition, task, _)| *partition == s.partition && *task == s.name)
            .and_then(|(_, _, counters)| counters.iter().find(|(n, _)| n == name))
            .map_or(0, |(_, v)| *v)
    };
    let sum = |stages: &[usize], name: &str| stages.iter().map(|&i| counter(i, name)).sum();
    let (sources, sinks) = (p.sources(), p.sinks());
    let out: u64 = sum(&sinks, "out");
    let delivered: Vec<usize> = sinks
        .iter()
        .copied()
        .filter(|&i| counter(i, "out") > 0)
        .collect();
    let total: u64 = sum(&sinks, "sum_e2e_ns");
    PipelineStats {
        name: p.name.clone(),
        messages_in: sum(&sources, "in"),
        messages_out: out,
        lost: sum(&sinks, "lost"),
        min_e2e_ns: delivered.iter().map(|&i| counter(i, "min_e2e_ns")).min(),
        max_e2e_ns: delivered.iter().map(|&i| counter(i, "max_e2e_ns")).max(),
        mean_e2e_ns: (out > 0).then(|| total as f64 / out as f64),
    }
}

/// One line per pipeline with every stage's counters as JSON
/// (`pipeline-stages {"name","stages":[{"name", COUNTER: value, ...}]}`), so that a
/// pipeline's loss can be placed: a stage's `lost` counts what its inputs never gave
/// it, a source's `skipped` what it took in and did not pass on ([`crate::stage`]).
pub fn print_stages(system: &System, tasks: &[TaskCounters]) {
    for p in &system.pipelines {
        let stages: Vec<serde_json::Value> = p
            .stages
            .iter()
            .map(|s| {
                let mut entry = serde_json::Map::new();
                entry.insert("name".into(), s.name.clone().into());
                let counters = tasks
                    .iter()
                    .find(|(partition, task, _)| *partition == s.partition && *task == s.name)
                    .map_or(&[][..], |(_, _, counters)| counters);
                for (name, value) in counters {
                    entry.insert(name.clone(), (*value).into());
                }
                entry.into()
            })
            .collect();
        let line = serde_json::json!({"name": p.name, "stages": stages});
        // One write: the line is parsed (bench/pipes).
        let text = format!("  pipeline-stages {line}\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
    }
}

/// One line per pipeline: its statistics as JSON (sim's names) and its bounds.
pub fn print(stats: &[PipelineStats], solutions: &[Solution]) {
    for (st, s) in stats.iter().zip(solutions) {
        let json = serde_json::to_value(st).expect("plain data");
        eprintln!(
            "  pipeline `{}`: {} in, {} out, {} lost; e2e delay min {} max {} mean {} (bounds: {} paper, {} exact)",
            st.name,
            st.messages_in,
            st.messages_out,
            st.lost,
            ms(st.min_e2e_ns.map(|v| v as f64)),
            ms(st.max_e2e_ns.map(|v| v as f64)),
            ms(st.mean_e2e_ns),
            ms(Some(s.e2e_delay_bound_ns as f64)),
            ms(s.exact_delay_bound_ns.map(|v| v as f64)),
        );
        eprintln!("  pipeline-stats {json}");
    }
}

fn ms(ns: Option<f64>) -> String {
    ns.map_or("-".into(), |v| format!("{:.3} ms", v / 1e6))
}
