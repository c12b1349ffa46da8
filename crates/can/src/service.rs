//! The CAN gateway service: one program per gateway job, `bulkhead can gateway
//! --role reader|writer`, run by `bulkhead run` as an rt task of the gateway's
//! partition (its own SCHED_DEADLINE reservation and `bulkhead-task` link), or
//! standalone.
//!
//! DriveOS section 6.4.1 (Programs 3-5) runs, per bus channel, a reader task (CAN to
//! shmcomm channels) and a writer task (channels to CAN). Here:
//!
//! * the **reader** opens every partition's gateway-to-partition channel by name and
//!   runs [`BusReader::step`] once per job;
//! * the **writer** opens every partition-to-gateway channel by name and runs
//!   [`BusWriter::step`] once per job, sending only allowlisted ids, each partition
//!   within its [`Limit`] (`--rate`, `--queue`, else derived from its allowlist and
//!   the cycle times of `--dbc`), the frames of all in arbitration order, never waiting
//!   for the bus.
//!
//! Each job handles at most `max_frames` frames, and under a supervisor a writer's job
//! no more than its budget covers ([`frames_per_job`]), and never waits for the bus or a
//! partition. Under a supervisor (the [`bulkhead_task::ENV`] variable is set) a job is
//! one activation: the writer's is released periodically ([`Task::wait_next_period`]),
//! the reader's by the reception of a frame ([`Task::wait_arrival`]: between jobs it
//! blocks on the bus, so it forwards each frame as soon as it is received), and after
//! each job the service copies its counters into the task's
//! named counters (`<partition>.rx_forwarded`, `.rx_dropped`; `.tx_sent`,
//! `.tx_denied`, `.tx_malformed`, `.tx_dropped`), which the supervisor exports to the trace.
//! Standalone, jobs are released every `period` on an absolute CLOCK_MONOTONIC
//! grid. Either way the service ends after the job in progress on SIGINT, SIGTERM or
//! the supervisor's stop request.
//!
//! Both roles attach to the bus as separate nodes, so the reader also receives the
//! frames the writer sends, as a SocketCAN socket receives the frames other sockets of
//! its host send: every partition sees what any partition sent to the bus.

use crate::bus;
use crate::frame::CanId;
use crate::gateway::{
    frames_per_job, BusReader, BusWriter, Counters, Limit, LinkError, Role, WriterLink,
};
use crate::trigger::{Trigger, Triggers};
use bulkhead_chan::{Channel, OpenError};
pub use bulkhead_gateway_protocol::parse_ids;
use bulkhead_task::clock::{now_ns, realtime_to_monotonic, sleep_until};
use bulkhead_task::{Counter, Task};
use bulkhead_trace::Discard;
use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What one gateway job program does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub role: Role,
    /// A virtual bus name or `socketcan:IFACE`.
    pub bus: String,
    /// Reader: (partition, gateway-to-partition channel name).
    pub to: Vec<(String, String)>,
    /// Writer: (partition, partition-to-gateway channel name).
    pub from: Vec<(String, String)>,
    /// Writer: (partition, ids it may send); a partition without one sends nothing.
    pub allow: Vec<(String, Vec<CanId>)>,
    /// Writer: (partition, frames per second it may send); else [`Limit::of_ids`].
    pub rate: Vec<(String, u32)>,
    /// Writer: (partition, frames of it that may wait for the bus); else [`Limit::of_ids`].
    pub queue: Vec<(String, u32)>,
    /// Reader: (partition, the only ids forwarded to it); without one, every frame.
    pub only: Vec<(String, Vec<CanId>)>,
    /// Frames per job, at most.
    pub max_frames: usize,
    /// Standalone job period (ignored under a supervisor, which sets the period).
    pub period: Duration,
    /// The bus's DBC: the reader's triggers' signals, the writer's default rates.
    pub dbc: Option<std::path::PathBuf>,
    /// Reader: stop-start triggers, counted in `ss.suspend_when` and `ss.resume_when`.
    pub suspend_when: Option<Trigger>,
    pub resume_when: Option<Trigger>,
    /// Reader: `modes.switch_when` triggers, the K-th counted in `mode.switch_when.K`.
    pub switch_when: Vec<Trigger>,
}

/// Why the service did not run or stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceError {
    /// Flags that do not fit together (the CLI exits 2).
    Usage(String),
    /// A missing channel or bus, or a failure while running (the CLI exits 1).
    Failed(String),
    /// A channel that cannot connect its partition (the CLI exits 1).
    Link(LinkError),
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceError::Usage(m) | ServiceError::Failed(m) => f.write_str(m),
            ServiceError::Link(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ServiceError {}

/// Checks that the flags of `config` fit its role.
pub fn check(config: &Config) -> Result<(), ServiceError> {
    let usage = |m: String| Err(ServiceError::Usage(m));
    match config.role {
        Role::Reader
            if !config.from.is_empty()
                || !config.allow.is_empty()
                || !config.rate.is_empty()
                || !config.queue.is_empty() =>
        {
            return usage("--from, --allow, --rate and --queue are for --role writer".into())
        }
        Role::Reader if config.to.is_empty() => {
            return usage("--role reader needs at least one --to PARTITION=CHANNEL".into())
        }
        Role::Writer if !config.to.is_empty() || !config.only.is_empty() => {
            return usage("--to and --only are for --role reader".into())
        }
        Role::Writer if config.from.is_empty() => {
            return usage("--role writer needs at least one --from PARTITION=CHANNEL".into())
        }
        _ => {}
    }
    let mut seen = HashSet::new();
    for (partition, _) in config.to.iter().chain(&config.from) {
        if !seen.insert(partition) {
            return usage(format!("partition {partition} is given twice"));
        }
    }
    id_lists("allow", &config.allow, "from", &config.from)?;
    id_lists("rate", &config.rate, "from", &config.from)?;
    id_lists("queue", &config.queue, "from", &config.from)?;
    id_lists("only", &config.only, "to", &config.to)?;
    let triggers = has_triggers(config);
    if triggers && config.role != Role::Reader {
        return usage(
            "--suspend-when, --resume-when and --switch-when are for --role reader".into(),
        );
    }
    if triggers && config.dbc.is_none() {
        return usage(
            "--suspend-when, --resume-when and --switch-when need --dbc PATH to decode the signal"
                .into(),
        );
    }
    if config.max_frames == 0 || config.period.is_zero() {
        return usage("--max-frames and --period must be positive".into());
    }
    Ok(())
}

/// Each `--FLAG PARTITION=...` names a partition of a `--LINK PARTITION=CHANNEL`, once.
fn id_lists<T>(
    flag: &str,
    lists: &[(String, T)],
    link: &str,
    links: &[(String, String)],
) -> Result<(), ServiceError> {
    let mut seen = HashSet::new();
    for (partition, _) in lists {
        if !links.iter().any(|(p, _)| p == partition) {
            return Err(ServiceError::Usage(format!(
                "--{flag} {partition}=...: no --{link} {partition}=CHANNEL"
            )));
        }
        if !seen.insert(partition) {
            return Err(ServiceError::Usage(format!(
                "--{flag} {partition}=... is given twice"
            )));
        }
    }
    Ok(())
}

/// One gateway job: the reader's or the writer's step.
enum Job {
    /// Boxed: the reader holds a received frame, the writer little.
    Reader(Box<BusReader>),
    Writer(BusWriter),
}

impl Job {
    /// The trigger counters, `(name, times met)` (reader with triggers only).
    fn trigger_counts(&self) -> Vec<(String, u64)> {
        match self {
            Job::Reader(r) => r.triggers().map(Triggers::counts).unwrap_or_default(),
            Job::Writer(_) => Vec::new(),
        }
    }

    /// Waits for the job's next activation under a supervisor. The reader's jobs are
    /// sporadic: it blocks on the bus and is released by each frame's reception
    /// ([`Task::wait_arrival`]), so it forwards a frame as soon as it is received instead
    /// of at its next periodic release (up to a period later); its SCHED_DEADLINE
    /// reservation serves those wake-ups as a constant bandwidth server, never more than
    /// its budget per period. The writer's jobs are periodic ([`Task::wait_next_period`]):
    /// it has no descriptor to wait on (the partitions' channels are shared memory).
    fn wait(&mut self, task: &mut Task) -> bulkhead_task::Result<()> {
        match self {
            Job::Reader(r) => task
                .wait_arrival(|wake| Ok(r.wait(wake.slice)?.map(realtime_to_monotonic)))
                .map(drop),
            Job::Writer(_) => task.wait_next_period().map(drop),
        }
    }

    fn step(&mut self, max_frames: usize) -> Result<usize, ServiceError> {
        let result = match self {
            Job::Reader(r) => r.step(max_frames, &mut Discard),
            Job::Writer(w) => w.step(max_frames, now_ns()),
        };
        result.map_err(|e| ServiceError::Failed(format!("bus: {e}")))
    }
}

/// Opens the channels and the bus and builds the job with its counters.
fn open(config: &Config) -> Result<(Job, Counters), ServiceError> {
    let failed = ServiceError::Failed;
    let channel = |flag: &str, partition: &str, name: &str| {
        Channel::open_handed(name).map_err(|e| failed(format!("--{flag} {partition}={name}: {e}")))
    };
    let built = match config.role {
        Role::Reader => {
            let bus =
                bus::open(&config.bus).map_err(|e| failed(format!("--bus {}: {e}", config.bus)))?;
            let mut links = Vec::new();
            for (partition, name) in &config.to {
                let tx = channel("to", partition, name)?
                    .sender()
                    .map_err(|e| failed(format!("--to {partition}={name}: {e}")))?;
                links.push((partition.clone(), tx));
            }
            let (mut reader, counters) =
                BusReader::new(&config.bus, bus, links).map_err(ServiceError::Link)?;
            for (partition, ids) in &config.only {
                reader.forward_only(partition, ids.iter().copied().collect());
            }
            if let Some(triggers) = triggers(config)? {
                reader.set_triggers(triggers);
            }
            Ok((Job::Reader(Box::new(reader)), counters))
        }
        Role::Writer => {
            let bus = bus::open_sender(&config.bus)
                .map_err(|e| failed(format!("--bus {}: {e}", config.bus)))?;
            let cycles = match &config.dbc {
                Some(path) => Some(database(path)?),
                None => None,
            };
            let mut links = Vec::new();
            for (partition, name) in &config.from {
                // A channel that cannot be found or mapped is the caller's error. The
                // client writes this channel's file: one whose header or words it
                // spoiled before the gateway started costs that client its link, not
                // the bus.
                let opened = match Channel::open_handed(name) {
                    Err(e @ (OpenError::BadHeader(_) | OpenError::Corrupt(_))) => Err(e),
                    Err(e) => return Err(failed(format!("--from {partition}={name}: {e}"))),
                    Ok(c) => c.receiver(),
                };
                let rx = match opened {
                    Ok(rx) => rx,
                    Err(e) => {
                        eprintln!("bulkhead can gateway: warning: --from {partition}={name}: {e}; partition {partition} is not connected");
                        continue;
                    }
                };
                let allow: HashSet<CanId> = of(&config.allow, partition)
                    .flat_map(|ids| ids.iter().copied())
                    .collect();
                let cycle = |id| cycles.as_ref()?.message(id)?.cycle_ms;
                let derived = Limit::of_ids(&allow, cycle);
                let limit = Limit {
                    rate: of(&config.rate, partition)
                        .next()
                        .copied()
                        .unwrap_or(derived.rate),
                    queue: of(&config.queue, partition)
                        .next()
                        .copied()
                        .unwrap_or(derived.queue),
                };
                links.push(WriterLink {
                    partition: partition.clone(),
                    from_partition: rx,
                    allow,
                    limit,
                });
            }
            BusWriter::new(&config.bus, bus, links).map(|(w, c)| (Job::Writer(w), c))
        }
    };
    built.map_err(ServiceError::Link)
}

/// Whether the reader watches a signal condition.
fn has_triggers(config: &Config) -> bool {
    config.suspend_when.is_some() || config.resume_when.is_some() || !config.switch_when.is_empty()
}

/// The triggers of `config`, with the signals checked against its DBC.
fn triggers(config: &Config) -> Result<Option<Triggers>, ServiceError> {
    if !has_triggers(config) {
        return Ok(None);
    }
    let path = config
        .dbc
        .as_ref()
        .expect("checked: triggers come with --dbc");
    let db = database(path)?;
    let (suspend, resume) = (config.suspend_when.clone(), config.resume_when.clone());
    Triggers::new(db, suspend, resume, config.switch_when.clone())
        .map(Some)
        .map_err(|e| ServiceError::Failed(format!("--dbc {}: {e}", path.display())))
}

/// The DBC at `path`; the error names `--dbc`.
fn database(path: &std::path::Path) -> Result<crate::dbc::Database, ServiceError> {
    crate::dbc::Database::from_file(path)
        .map_err(|e| ServiceError::Failed(format!("--dbc {}: {e}", path.display())))
}

/// The values given for `partition` in `lists` (`--FLAG PARTITION=...`).
fn of<'a, T>(lists: &'a [(String, T)], partition: &'a str) -> impl Iterator<Item = &'a T> {
    lists
        .iter()
        .filter(move |(p, _)| p == partition)
        .map(|(_, v)| v)
}

/// Runs the service until `stop` is set, the supervisor asks it to stop, or the bus
/// fails. Returns the final counters, named as published.
pub fn run(config: &Config, stop: &AtomicBool) -> Result<Vec<(String, u64)>, ServiceError> {
    check(config)?;
    let (mut job, counters) = open(config)?;
    if std::env::var_os(bulkhead_task::ENV).is_some() {
        run_task(config, &mut job, &counters, stop)?;
    } else {
        run_standalone(config, &mut job, stop)?;
    }
    let mut named = counters.named(config.role);
    named.extend(job.trigger_counts());
    Ok(named)
}

/// One job per activation of the supervisor's task; counters published after each.
fn run_task(
    config: &Config,
    job: &mut Job,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<(), ServiceError> {
    let failed = |e: bulkhead_task::Error| ServiceError::Failed(e.to_string());
    let mut task = Task::attach().map_err(failed)?;
    // The gateway's tasks are restartable (JuMP2start Table 1: CAN-GW; the model makes
    // them so): the supervisor puts their first release after a resume at the resume
    // instant, so the library must plan them that way. A job keeps nothing from before a
    // stop but the bus connection; the frames it forwards carry their bus stamps, by
    // which the restartable clients drop the stale ones.
    task.set_resume(bulkhead_task::Resume::Restartable);
    let slots = counters
        .named(config.role)
        .iter()
        .map(|(name, _)| task.counter(name))
        .collect::<Result<Vec<Counter>, _>>()
        .map_err(failed)?;
    let trigger_slots = job
        .trigger_counts()
        .iter()
        .map(|(name, _)| task.counter(name))
        .collect::<Result<Vec<Counter>, _>>()
        .map_err(failed)?;
    while !stop.load(Ordering::Relaxed) {
        match job.wait(&mut task) {
            Ok(_) => {}
            Err(bulkhead_task::Error::Stopped) => break,
            Err(e) => return Err(failed(e)),
        }
        let result = job.step(job_frames(config, &task));
        let mut slot = slots.iter();
        counters.for_each_value(config.role, |value| {
            if let Some(&counter) = slot.next() {
                task.set_counter(counter, value);
            }
        });
        for (&counter, (_, value)) in trigger_slots.iter().zip(job.trigger_counts()) {
            task.set_counter(counter, value);
        }
        result?;
    }
    Ok(())
}

/// The frames of one job under a supervisor: `--max-frames`, and for the writer no more
/// than its budget covers ([`frames_per_job`] of the budget the supervisor set, read at
/// every job since a mode change may set another).
fn job_frames(config: &Config, task: &Task) -> usize {
    match config.role {
        Role::Reader => config.max_frames,
        Role::Writer => config
            .max_frames
            .min(frames_per_job(task.params().budget_ns)),
    }
}

/// One job every `config.period` on an absolute grid; releases that passed while a
/// job ran late are skipped, not run back to back.
fn run_standalone(config: &Config, job: &mut Job, stop: &AtomicBool) -> Result<(), ServiceError> {
    let period = config.period.as_nanos().min(u64::MAX as u128) as u64;
    let mut release = now_ns();
    while !stop.load(Ordering::Relaxed) {
        job.step(config.max_frames)?;
        release += period;
        let now = now_ns();
        if release < now {
            release += (now - release).div_ceil(period) * period;
        }
        sleep_until(release);
    }
    Ok(())
}

/// Installs SIGINT and SIGTERM handlers that set the returned flag (the service then
/// ends after its current job and its sleep).
pub fn stop_on_signals() -> std::io::Result<&'static AtomicBool> {
    bulkhead_os::signal::stop_flag()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(role: Role) -> Config {
        Config {
            role,
            bus: "b".into(),
            to: vec![],
            from: vec![],
            allow: vec![],
            rate: vec![],
            queue: vec![],
            only: vec![],
            max_frames: 8,
            period: Duration::from_millis(2),
            dbc: None,
            suspend_when: None,
            resume_when: None,
            switch_when: Vec::new(),
        }
    }

    #[test]
    fn flags_must_fit_the_role() {
        let mut c = config(Role::Reader);
        assert!(matches!(check(&c), Err(ServiceError::Usage(_))));
        c.to = vec![("a".into(), "ch".into())];
        assert_eq!(check(&c), Ok(()));
        c.allow = vec![("a".into(), vec![])];
        assert!(check(&c).unwrap_err().to_string().contains("--role writer"));
        c.allow.clear();
        c.queue = vec![("a".into(), 4)];
        assert!(check(&c).unwrap_err().to_string().contains("--role writer"));
        let mut c = config(Role::Writer);
        c.from = vec![("a".into(), "x".into()), ("b".into(), "y".into())];
        c.allow = vec![("c".into(), vec![])];
        assert!(check(&c).unwrap_err().to_string().contains("no --from c"));
        c.allow.clear();
        c.rate = vec![("b".into(), 10), ("b".into(), 20)];
        assert!(check(&c)
            .unwrap_err()
            .to_string()
            .contains("--rate b=... is given twice"));
        c.rate = vec![("c".into(), 10)];
        assert!(check(&c)
            .unwrap_err()
            .to_string()
            .contains("--rate c=...: no --from c"));
        c.rate.clear();
        c.from[1].0 = "a".into();
        assert!(check(&c).unwrap_err().to_string().contains("twice"));
        let speed = bulkhead_gateway_protocol::parse_trigger("SPEED<1").unwrap();
        c.from.pop();
        c.suspend_when = Some(speed.clone());
        assert!(check(&c)
            .unwrap_err()
            .to_string()
            .contains("for --role reader"));
        let mut c = config(Role::Reader);
        c.to = vec![("a".into(), "ch".into())];
        c.resume_when = Some(speed);
        assert!(check(&c).unwrap_err().to_string().contains("need --dbc"));
        c.resume_when = None;
        c.only = vec![("b".into(), vec![])];
        assert!(check(&c).unwrap_err().to_string().contains("no --to b"));
        c.only = vec![("a".into(), vec![]), ("a".into(), vec![])];
        assert!(check(&c).unwrap_err().to_string().contains("twice"));
    }
}
