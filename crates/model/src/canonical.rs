//! The canonical form of a description: native syntax, every default spelled out,
//! DEmOS shorthands expanded, durations in exact units. Loading it gives back an
//! identical [`System`].

use crate::types::*;
use crate::units::format_duration as dur;
use crate::yaml::quote;
use std::fmt::Write;

/// Prints `system` as canonical YAML.
pub fn to_canonical_yaml(system: &System) -> String {
    let mut out = String::new();
    let mut keys = Vec::new();
    if let Some(cpus) = &system.cpus {
        keys.push(format!("cpus: {}", quote(&cpus.to_string())));
    }
    if let Some((first, last)) = system.user_range {
        keys.push(format!("user_range: {}", quote(&format!("{first}-{last}"))));
    }
    if let Some(path) = &system.path {
        keys.push(format!("path: {}", quote(path)));
    }
    writeln!(out, "system: {{{}}}", keys.join(", ")).unwrap();
    writeln!(out, "set_cwd: {}", system.set_cwd).unwrap();
    if let Some(cpus) = &system.supervisor_cpus {
        writeln!(out, "demos_cpu: {}", quote(&cpus.to_string())).unwrap();
    }
    section(&mut out, "partitions", &system.partitions, |p| {
        partition(p, &system.health)
    });
    section(&mut out, "windows", &system.windows, window);
    section(&mut out, "channels", &system.channels, |c| vec![channel(c)]);
    section(&mut out, "buses", &system.buses, bus);
    if let Some(modes) = &system.modes {
        writeln!(out, "modes:").unwrap();
        for line in crate::modes::canonical_lines(modes, quote) {
            writeln!(out, "  {line}").unwrap();
        }
    }
    if let Some(power) = &system.power {
        writeln!(out, "power:").unwrap();
        for line in crate::power::canonical_lines(power, quote) {
            writeln!(out, "  {line}").unwrap();
        }
    }
    if let Some(platform) = &system.platform {
        writeln!(out, "platform:").unwrap();
        for line in crate::platform::canonical_lines(platform) {
            writeln!(out, "  {line}").unwrap();
        }
    }
    if let Some(s) = &system.stop_start {
        writeln!(out, "stop_start:").unwrap();
        for line in crate::stop_start::canonical_lines(s, quote) {
            writeln!(out, "  {line}").unwrap();
        }
    }
    if !system.pipelines.is_empty() {
        writeln!(out, "pipelines:").unwrap();
        for line in crate::pipes::canonical_lines(&system.pipelines, quote) {
            writeln!(out, "  {line}").unwrap();
        }
    }
    out
}

/// Writes `key:` and one list item per element; each item is a list of lines.
fn section<T>(out: &mut String, key: &str, items: &[T], lines: impl Fn(&T) -> Vec<String>) {
    if items.is_empty() {
        return;
    }
    for line in block_list(key, items, lines) {
        writeln!(out, "{line}").unwrap();
    }
}

/// `key:` and one block-sequence item per element under it, two spaces in: each item's
/// lines (from `lines`) as `- first` and `  rest`.
pub(crate) fn block_list<T>(
    key: &str,
    items: &[T],
    lines: impl Fn(&T) -> Vec<String>,
) -> Vec<String> {
    let mut out = vec![format!("{key}:")];
    for item in items {
        for (i, line) in lines(item).iter().enumerate() {
            let bullet = if i == 0 { "- " } else { "  " };
            out.push(format!("  {bullet}{line}"));
        }
    }
    out
}

/// The `sandbox:` line of a partition: the parts it relaxes; `None` when it relaxes none.
fn sandbox_line(sandbox: &Sandbox) -> Option<String> {
    let relaxed: Vec<&str> = [
        (!sandbox.clean_env).then_some("clean_env: false"),
        (!sandbox.no_new_privs).then_some("no_new_privs: false"),
        (!sandbox.no_capabilities).then_some("no_capabilities: false"),
        (!sandbox.seccomp).then_some("seccomp: false"),
        (!sandbox.private_tmp).then_some("private_tmp: false"),
        (!sandbox.pid_namespace).then_some("pid_namespace: false"),
        (!sandbox.private_users).then_some("private_users: false"),
        (!sandbox.protect_system).then_some("protect_system: false"),
        (!sandbox.protect_kernel).then_some("protect_kernel: false"),
        (!sandbox.protect_cgroups).then_some("protect_cgroups: false"),
        (!sandbox.hide_runtime_dir).then_some("hide_runtime_dir: false"),
        (!sandbox.private_ipc).then_some("private_ipc: false"),
        (!sandbox.remove_ipc).then_some("remove_ipc: false"),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!relaxed.is_empty()).then(|| format!("sandbox: {{{}}}", relaxed.join(", ")))
}

fn partition(p: &Partition, health: &[crate::health::Supervised]) -> Vec<String> {
    use crate::health::Member;
    let of = |m: Member| {
        let s = health
            .iter()
            .find(|s| s.partition == p.name && s.member == m);
        s.map(|s| &s.health)
    };
    let kind = match p.kind {
        PartitionKind::Rt => "rt",
        PartitionKind::Be => "be",
    };
    let mut lines = vec![format!("name: {}", quote(&p.name)), format!("kind: {kind}")];
    if let Some(cpus) = &p.cpus {
        lines.push(format!("cpus: {}", cpus_text(cpus)));
    }
    if p.kind == PartitionKind::Rt {
        let sched = match p.scheduler {
            Scheduler::FixedPriority => "fixed-priority",
            Scheduler::Edf => "edf",
        };
        lines.push(format!("scheduler: {sched}"));
        if p.reclaim {
            lines.push("reclaim: true".into());
        }
        if !p.exclusive {
            lines.push("exclusive: false".into());
        }
        if let Some(i) = &p.interface {
            lines.push(format!("interface: {}", crate::modes::interface_text(i)));
        }
    }
    if let Some(percent) = p.cpu {
        lines.push(format!("cpu: {percent}%"));
    }
    if let Some(ns) = p.nonpreemptible {
        lines.push(format!("nonpreemptible: {}", dur(ns)));
    }
    if let Some(bytes) = p.memory {
        lines.push(format!("memory: {}", crate::units::format_size(bytes)));
    }
    if let Some(n) = p.pids {
        lines.push(format!("pids: {n}"));
    }
    if p.shared_user {
        lines.push("shared_user: true".into());
    }
    if p.monitor {
        lines.push("monitor: true".into());
    }
    if let Some(user) = &p.user {
        lines.push(format!("user: {}", quote(user)));
    }
    if let Some(addr) = p.listen {
        lines.push(format!("listen: {}", quote(&addr.to_string())));
    }
    match p.network {
        Some(Network::Host) => lines.push("network: host".into()),
        Some(Network::Private) => lines.push("network: private".into()),
        None => {}
    }
    lines.extend(sandbox_line(&p.sandbox));
    if let Some(path) = &p.path {
        lines.push(format!("path: {}", quote(path)));
    }
    // Service tasks come back from the section that generates them (e.g. `buses`).
    let tasks: Vec<String> = p
        .tasks
        .iter()
        .filter(|t| t.service.is_none())
        .map(|t| {
            format!(
                "  - {}",
                with_health(task(t), of(Member::Task(t.name.clone())))
            )
        })
        .collect();
    if !tasks.is_empty() {
        lines.push("tasks:".into());
        lines.extend(tasks);
    }
    if !p.processes.is_empty() {
        lines.push("processes:".into());
        let processes = p.processes.iter().enumerate();
        lines.extend(
            processes
                .map(|(i, q)| format!("  - {}", with_health(process(q), of(Member::Process(i))))),
        );
    }
    lines
}

/// A task's or process's flow mapping with its `health:` key added.
fn with_health(mapping: String, health: Option<&crate::health::Health>) -> String {
    match health {
        Some(h) => format!(
            "{}, health: {}}}",
            mapping.strip_suffix('}').unwrap_or(&mapping),
            crate::health::canonical(h)
        ),
        None => mapping,
    }
}

fn task(t: &Task) -> String {
    let priority = t
        .priority
        .map(|p| format!(", priority: {p}"))
        .unwrap_or_default();
    let resume = match t.resume {
        Resume::Continuable => "continuable",
        Resume::Restartable => "restartable",
    };
    let cmd = match t.cmd.as_str() {
        "" => String::new(),
        cmd => format!(", cmd: {}", quote(cmd)),
    };
    let wcet_frequency = t
        .wcet_khz
        .map(|k| format!(", wcet_frequency: {}", crate::power::mhz(k)))
        .unwrap_or_default();
    let memory_bound = match t.memory_bound_ppm {
        0 => String::new(),
        ppm => format!(
            ", memory_bound: {}",
            crate::power::decimal(ppm.into(), 1_000_000)
        ),
    };
    let server = t
        .server
        .map(|s| format!(", server: {}", quote(&s.text())))
        .unwrap_or_default();
    let offset = match t.offset {
        0 => String::new(),
        o => format!(", offset: {}", dur(o)),
    };
    format!(
        "{{name: {}{cmd}, budget: {}, period: {}, deadline: {}{priority}, release_jitter: {}{offset}, blocking: {}, resume: {resume}{wcet_frequency}{memory_bound}{server}}}",
        quote(&t.name),
        dur(t.budget),
        dur(t.period),
        dur(t.deadline),
        dur(t.release_jitter),
        dur(t.blocking),
    )
}

fn process(q: &Process) -> String {
    let budget = match q.budget {
        0 => String::new(),
        b => format!(", budget: {}, jitter: {}", dur(b), dur(q.jitter)),
    };
    let frequency = q
        .frequency_khz
        .map(|f| format!(", frequency: {}", mhz(f)))
        .unwrap_or_default();
    let required = if q.required { ", required: true" } else { "" };
    format!(
        "{{cmd: {}{budget}, init: {}{frequency}{}{required}}}",
        quote(&q.cmd),
        q.init,
        restart(q.restart)
    )
}

fn restart(r: Option<Restart>) -> String {
    let Some(r) = r else { return String::new() };
    let when = match r.when {
        RestartWhen::OnFailure => "on-failure",
        RestartWhen::Always => "always",
    };
    format!(
        ", restart: {when}, restart_delay: {}, start_limit_burst: {}, start_limit_interval: {}",
        dur(r.delay),
        r.burst,
        dur(r.interval)
    )
}

use crate::power::mhz;

fn window(w: &Window) -> Vec<String> {
    let mut lines = vec![format!("length: {}", dur(w.length))];
    if !w.slices.is_empty() {
        lines.push("slices:".into());
    }
    for s in &w.slices {
        let mut fields = vec![format!("cpu: {}", cpus_text(&s.cpus))];
        fields.extend(
            s.sc_partition
                .as_ref()
                .map(|p| format!("sc_partition: {}", quote(p))),
        );
        fields.extend(
            s.be_partition
                .as_ref()
                .map(|p| format!("be_partition: {}", quote(p))),
        );
        fields.extend(s.frequency_khz.map(|f| format!("frequency: {}", mhz(f))));
        lines.push(format!("  - {{{}}}", fields.join(", ")));
    }
    lines
}

fn channel(c: &Channel) -> String {
    let kind = match c.kind {
        ChannelKind::Fifo => "fifo",
        ChannelKind::Latest => "latest",
    };
    let depth = if c.kind == ChannelKind::Fifo {
        let reads = match c.reads {
            Reads::Count(1) => String::new(),
            Reads::Count(n) => format!(", reads: {n}"),
            Reads::All => ", reads: all".to_string(),
        };
        format!(
            ", depth: {}, overflow: {}{reads}",
            c.depth,
            c.overflow.name()
        )
    } else {
        String::new()
    };
    let end = |p: &str, t: &Option<String>| match t {
        Some(t) => quote(&format!("{p}/{t}")),
        None => quote(p),
    };
    let readers: Vec<String> = c
        .readers
        .iter()
        .zip(&c.reader_tasks)
        .map(|(r, t)| end(r, t))
        .collect();
    // A bridge's end is written as the description wrote it: `writer: zenoh`, no readers.
    let (writer, readers) = match c.bridge.as_ref().map(|b| b.direction) {
        None => (
            end(&c.writer, &c.writer_task),
            format!(", readers: [{}]", readers.join(", ")),
        ),
        Some(BridgeDirection::Publish) => (end(&c.writer, &c.writer_task), String::new()),
        Some(BridgeDirection::Subscribe) => (
            crate::bridge::ZENOH_WRITER.to_string(),
            format!(", readers: [{}]", readers.join(", ")),
        ),
    };
    let bridge = c.bridge.as_ref().map(bridge).unwrap_or_default();
    format!(
        "{{name: {}, kind: {kind}, message_size: {}{depth}, writer: {writer}{readers}{bridge}}}",
        quote(&c.name),
        c.message_size,
    )
}

fn bridge(b: &Bridge) -> String {
    let list = |l: &[String]| l.iter().map(|e| quote(e)).collect::<Vec<_>>().join(", ");
    let z = &b.zenoh;
    format!(
        ", bridge: {{partition: {}, period: {}, budget: {}, latency: {}, loss: {}%, zenoh: {{key: {}, listen: [{}], connect: [{}], mode: {}}}}}",
        quote(&b.partition),
        dur(b.period),
        dur(b.budget),
        dur(b.latency),
        crate::power::decimal(b.loss_ppm.into(), 10_000),
        quote(&z.key),
        list(&z.listen),
        list(&z.connect),
        z.mode.name()
    )
}

fn bus(b: &Bus) -> Vec<String> {
    let mut lines = vec![format!("name: {}", quote(&b.name))];
    if let Some(interface) = &b.interface {
        lines.push(format!("interface: {}", quote(interface)));
    }
    if b.allow_non_can {
        lines.push("allow_non_can: true".into());
    }
    if let Some(dbc) = &b.dbc {
        lines.push(format!("dbc: {}", quote(dbc)));
    }
    lines.push(format!("gateway: {}", quote(&b.gateway)));
    lines.push(format!("period: {}", dur(b.period)));
    lines.push(format!("reader_budget: {}", dur(b.reader_budget)));
    lines.push(format!("writer_budget: {}", dur(b.writer_budget)));
    lines.push(format!("depth: {}", b.depth));
    if !b.clients.is_empty() {
        lines.push("clients:".into());
    }
    for c in &b.clients {
        let ids: Vec<String> = c.allow.iter().map(|id| format!("{id:#x}")).collect();
        let limits: String = [("rate", c.rate), ("queue", c.queue)]
            .iter()
            .filter_map(|(key, n)| n.map(|n| format!(", {key}: {n}")))
            .collect();
        lines.push(format!(
            "  - {{partition: {}, allow: [{}]{limits}}}",
            quote(&c.partition),
            ids.join(", ")
        ));
    }
    lines
}

fn cpus_text(cpus: &Cpus) -> String {
    match cpus {
        Cpus::All => "all".into(),
        Cpus::Set(set) => quote(&set.to_string()),
    }
}
