//! What an execution of a scenario showed, in one form for every executor: read from
//! the events both `sim` and `run` write (`bulkhead_trace::Event`, the schedule log),
//! plus what only a summary gives (pipeline totals, `sim`'s stop protocol, `run`'s
//! platform floor).

use bulkhead_model::Nanos;
use bulkhead_trace::{Event, EventKind};

/// One job of an rt task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub partition: String,
    pub task: String,
    /// The job's index (0 = the task's first release).
    pub index: u64,
    pub release: Nanos,
    pub deadline: Nanos,
    /// When it completed, if it did.
    pub completed: Option<Nanos>,
    /// It was discarded unfinished: its task left the mode, or restarted after a
    /// suspension (`job_abort`); no promise is made about it.
    pub aborted: bool,
    /// It passed its deadline unfinished (`deadline_miss`).
    pub missed: bool,
}

impl Job {
    /// `partition/task`.
    pub fn task_name(&self) -> String {
        format!("{}/{}", self.partition, self.task)
    }

    pub fn response(&self) -> Option<Nanos> {
        Some(self.completed?.saturating_sub(self.release))
    }
}

/// A message a pipeline's sink (or a channel's reader) finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `partition/task` of the sink.
    pub sink: String,
    pub at: Nanos,
    /// The index of its source stage (the top 16 bits of a `message` event's id).
    pub source: u64,
    /// The release of the source's job that took it in: what names a message in every
    /// execution (a run's sequence numbers start where its Start-of-Task handshake
    /// ends, the simulation's at the source's first job).
    pub origin: Nanos,
}

/// A pipeline's totals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineTotals {
    pub name: String,
    pub messages_in: u64,
    pub messages_out: u64,
    pub lost: u64,
    pub max_e2e_ns: Option<Nanos>,
}

/// Everything the checks compare.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observation {
    pub jobs: Vec<Job>,
    /// Window grants in DEmOS's notation, up to the scenario's `until`.
    pub grants: Vec<String>,
    pub messages: Vec<Message>,
    pub pipelines: Vec<PipelineTotals>,
    /// Per mode switch, its steps as `event partition` (`mode_request`'s policy first).
    pub switches: Vec<Vec<String>>,
    /// The stop protocol's events as `event [partition]`.
    pub stops: Vec<String>,
    /// Power policy: (time, CPU, kHz) of each frequency change.
    pub frequencies: Vec<(Nanos, u32, u64)>,
    /// `run`: per CPU, the longest wake-up latency a probe beside the tasks saw (the
    /// platform's floor in this run); empty for `sim`.
    pub floor: Vec<(u32, Nanos)>,
    /// When the execution received the scenario's stimuli: each mode switch request,
    /// and each stop's suspend and resume request (in the execution's own time).
    pub stimuli: Stimuli,
}

/// When an execution received the scenario's mode switches and stops, in schedule time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stimuli {
    pub mode_requests: Vec<Nanos>,
    /// Each stop: when it froze the system and for how long.
    pub suspends: Vec<(Nanos, Nanos)>,
}

/// The stops a real run logged, in its wall-clock time: when the system was frozen
/// (`system_suspended`) and how long until its resume (`system_resumed`'s
/// `suspended_ns`, by which the run shifts the times of its continuable tasks). The
/// simulation logs no such events: its time is stitched already.
fn stops(events: &[Event]) -> Vec<(Nanos, Nanos)> {
    let mut out = Vec::new();
    let mut frozen = None;
    for e in events {
        match &e.kind {
            EventKind::SystemSuspended { .. } => frozen = Some(e.t_ns),
            EventKind::SystemResumed { suspended_ns, .. } => {
                if let Some(at) = frozen.take() {
                    out.push((at, *suspended_ns));
                }
            }
            _ => {}
        }
    }
    out
}

/// Wall-clock time `t` as schedule time, in which a stop does not exist (JuMP2start
/// 2.2's time stitching, as `sim` keeps it): less every earlier stop; an instant inside
/// a stop (what a partition kept awake does meanwhile) is its start.
fn stitch(stops: &[(Nanos, Nanos)], t: Nanos) -> Nanos {
    let mut before = 0;
    for &(at, duration) in stops {
        if t <= at {
            break;
        }
        before += duration.min(t - at);
    }
    t - before
}

impl Observation {
    /// What `events` show; grants after `until` are left out. The times of a run that
    /// stopped are stitched first ([`stitch`]), as the simulation's are.
    pub fn from_events(events: &[Event], until: Nanos) -> Observation {
        let stops = stops(events);
        let mut out = Observation::default();
        for e in events {
            let mut e = e.clone();
            e.t_ns = stitch(&stops, e.t_ns);
            out.add(&e, until);
        }
        out.stimuli.suspends = stops
            .iter()
            .map(|&(at, d)| (stitch(&stops, at), d))
            .collect();
        out.messages
            .sort_by(|a, b| (&a.sink, a.at).cmp(&(&b.sink, b.at)));
        out
    }

    fn add(&mut self, e: &Event, until: Nanos) {
        let t = e.t_ns;
        match &e.kind {
            EventKind::JobRelease {
                partition,
                task,
                job,
                deadline_ns,
                ..
            } => self.jobs.push(Job {
                partition: partition.to_string(),
                task: task.to_string(),
                index: *job,
                release: t,
                deadline: *deadline_ns,
                completed: None,
                aborted: false,
                missed: false,
            }),
            EventKind::JobComplete {
                partition,
                task,
                job,
                ..
            } => {
                if let Some(j) = self.job(partition, task, *job) {
                    j.completed = Some(t);
                }
            }
            EventKind::JobAbort {
                partition,
                task,
                job,
                ..
            } => {
                if let Some(j) = self.job(partition, task, *job) {
                    j.aborted = true;
                }
            }
            EventKind::DeadlineMiss {
                partition,
                task,
                job,
                ..
            } => {
                if let Some(j) = self.job(partition, task, *job) {
                    j.missed = true;
                }
            }
            EventKind::Run { .. } if t <= until => {
                self.grants.extend(bulkhead_windows::drive::demos_line(e));
            }
            EventKind::Message {
                partition,
                task,
                id,
                e2e_ns,
            } => self.messages.push(Message {
                sink: format!("{partition}/{task}"),
                at: t,
                source: id >> 48,
                origin: t.saturating_sub(*e2e_ns),
            }),
            EventKind::ModeRequest { policy, .. } => {
                self.switches.push(vec![format!("mode_request {policy}")]);
                self.stimuli.mode_requests.push(t);
            }
            EventKind::InterfaceChange { partition, .. } => {
                self.step("interface_change", partition)
            }
            EventKind::AgentRequest { partition, .. } => self.step("agent_request", partition),
            EventKind::AgentAck { partition, .. } => self.step("agent_ack", partition),
            EventKind::ModeDone { mode, .. } => self.step("mode_done", mode),
            EventKind::CpuFrequency { cpu, khz } => self.frequencies.push((t, *cpu, *khz)),
            EventKind::SuspendRequest { .. } => self.stops.push("suspend_request".into()),
            EventKind::PartitionSuspended { partition, .. } => {
                self.stops.push(format!("partition_suspended {partition}"))
            }
            EventKind::SystemSuspended { .. } => self.stops.push("system_suspended".into()),
            EventKind::ResumeRequest { .. } => self.stops.push("resume_request".into()),
            EventKind::PartitionResumed { partition, .. } => {
                self.stops.push(format!("partition_resumed {partition}"))
            }
            EventKind::SystemResumed { .. } => self.stops.push("system_resumed".into()),
            _ => {}
        }
    }

    /// The latest job `index` of `partition/task`.
    fn job(&mut self, partition: &str, task: &str, index: u64) -> Option<&mut Job> {
        let mut latest = self.jobs.iter_mut().rev();
        latest.find(|j| j.index == index && j.task == task && j.partition == partition)
    }

    fn step(&mut self, event: &str, what: &str) {
        if let Some(switch) = self.switches.last_mut() {
            switch.push(format!("{event} {what}"));
        }
    }

    /// The jobs released before `horizon` and not aborted.
    pub fn jobs_before(&self, horizon: Nanos) -> impl Iterator<Item = &Job> {
        self.jobs
            .iter()
            .filter(move |j| j.release < horizon && !j.aborted)
    }

    /// The longest latency the probe saw on any of `cpus` (0 without a probe).
    pub fn floor_of(&self, cpus: &[u32]) -> Nanos {
        self.floor
            .iter()
            .filter(|(c, _)| cpus.contains(c))
            .map(|&(_, l)| l)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(t: Nanos, kind: EventKind) -> Event {
        Event::new(t, kind)
    }

    #[test]
    fn jobs_messages_and_steps_are_read_from_events() {
        let (p, a) = ("p".into(), "a".into());
        let events = [
            event(
                0,
                EventKind::JobRelease {
                    cpu: 0,
                    partition: p,
                    task: a,
                    job: 0,
                    deadline_ns: 10,
                },
            ),
            event(
                4,
                EventKind::JobComplete {
                    cpu: 0,
                    partition: "p".into(),
                    task: "a".into(),
                    job: 0,
                    response_ns: 4,
                },
            ),
            event(
                5,
                EventKind::Message {
                    partition: "p".into(),
                    task: "s".into(),
                    id: 3,
                    e2e_ns: 2,
                },
            ),
            event(
                6,
                EventKind::ModeRequest {
                    from: "one".into(),
                    to: "two".into(),
                    policy: "boost".into(),
                    load_ppm: 0,
                    capacity_ppm: 0,
                },
            ),
            event(
                7,
                EventKind::AgentAck {
                    partition: "q".into(),
                    demand_ppm: 0,
                    interface_ppm: None,
                },
            ),
        ];
        let o = Observation::from_events(&events, 100);
        assert_eq!(o.jobs[0].response(), Some(4));
        assert_eq!(o.jobs[0].task_name(), "p/a");
        let m = &o.messages[0];
        assert_eq!((m.sink.as_str(), m.source, m.origin), ("p/s", 0, 3));
        assert_eq!(o.switches, [["mode_request boost", "agent_ack q"]]);
    }

    /// A run frozen at 199 ms for 99.6 ms: a continuable task's job released at
    /// 299.6 ms (wall clock) is its job of 200 ms in schedule time, an event during the
    /// stop (a partition kept awake) is at the stop's start, and the stop is a stimulus
    /// at 199 ms for 99.6 ms.
    #[test]
    fn a_run_that_stopped_is_read_in_stitched_time() {
        let us = 1_000;
        let release = |t: Nanos, job: u64| {
            let (partition, task) = ("ctl".into(), "a".into());
            event(
                t,
                EventKind::JobRelease {
                    cpu: 1,
                    partition,
                    task,
                    job,
                    deadline_ns: t + 10_000 * us,
                },
            )
        };
        let events = [
            event(
                199_000 * us,
                EventKind::SystemSuspended {
                    seq: 1,
                    latency_ns: 0,
                },
            ),
            release(250_000 * us, 0),
            event(
                298_700 * us,
                EventKind::SystemResumed {
                    seq: 1,
                    latency_ns: 0,
                    suspended_ns: 99_600 * us,
                },
            ),
            release(299_600 * us, 20),
        ];
        let o = Observation::from_events(&events, 1_000_000 * us);
        let releases: Vec<Nanos> = o.jobs.iter().map(|j| j.release / us).collect();
        assert_eq!(releases, [199_000, 200_000]);
        assert_eq!(o.stimuli.suspends, [(199_000 * us, 99_600 * us)]);
    }
}
