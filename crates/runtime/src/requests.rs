//! Requests from inside (docs/modes.md): a program of a best-effort partition in no
//! window asks for a mode switch or a suspend on its own DEmOS channel
//! (`bulkhead_client::request_mode`). The unwindowed keeper reads the channel; the
//! partition is the one the keeper spawned that channel's process in, never anything
//! the request says. A request `modes.requesters` does not allow is answered `EPERM`
//! there and then; an allowed one is queued for the supervisor's loop, which hands it
//! to the mode or stop-start manager (the path of `ctl mode` and `ctl suspend`) and
//! answers 0 or the manager's refusal. Each request is a `partition_request` event.
//!
//! Switches from a signal (`modes.switch_when`) come the same way: the stop-start worker,
//! which watches the gateway readers' trigger counters, queues the index of each that
//! fired ([`signal_fired`]); the loop hands the switch to the mode manager and logs a
//! `signal_switch` event.
//!
//! Concurrency: one [`SharedRequests`] mutex between the keeper and the loop; holders
//! never block inside it (replies are sent without blocking).

use crate::health::Managers;
use crate::modes::ModeEvents;
use crate::RunError;
use bulkhead_client::request::Want;
use bulkhead_control::{ErrorCode, Response};
use bulkhead_model::{Modes, SwitchWhen, System};
use bulkhead_os::clock::now_ns;
use bulkhead_os::errno;
use bulkhead_os::fd::send_nonblocking;
use bulkhead_trace::{Event, EventKind};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};

/// The requests of a run, shared by the keeper and the supervisor's loop.
pub type SharedRequests = Arc<Mutex<Requests>>;

pub struct Requests {
    /// The system's modes (their `requesters` allow requests); `None`: nothing is
    /// allowed.
    modes: Option<Modes>,
    /// Allowed requests for the loop, in order of arrival.
    queue: Vec<Pending>,
    /// The `modes.switch_when` entries (indices) that fired, in order.
    signals: Vec<usize>,
    /// Where the events go (the schedule log, through the rt drain), with times since
    /// `epoch_ns`; `None`: a run without a schedule log.
    events: Option<(ModeEvents, u64)>,
}

/// An allowed request waiting for its manager.
struct Pending {
    partition: String,
    process: usize,
    want: Want,
    /// A duplicate of the supervisor's end of the requester's channel, for the reply.
    reply: OwnedFd,
}

/// Who asks: process `process` of `partition`, whose channel is `channel`.
pub struct Asker<'a> {
    pub partition: &'a str,
    pub process: usize,
    pub channel: BorrowedFd<'a>,
}

/// The requests of `system`'s unwindowed best-effort processes (those allowed by its
/// `modes.requesters`, and the refusals of the others). `events`: the rt run's event
/// list and its epoch.
pub fn start(system: &System, events: Option<(ModeEvents, u64)>) -> SharedRequests {
    Arc::new(Mutex::new(Requests {
        modes: system.modes.clone(),
        queue: Vec::new(),
        signals: Vec::new(),
        events,
    }))
}

/// Refuses, before anything starts, `modes.switch_when` in a run without a control socket
/// (`control`; the command line always serves one), which has no stop-start worker to
/// watch the readers' counters (a system with windows is refused by
/// [`bulkhead_plan::scope`]).
pub fn check_switch_when(system: &System, control: bool) -> Result<(), RunError> {
    let switches = system.modes.iter().flat_map(|m| &m.switch_when);
    if control || switches.count() == 0 {
        return Ok(());
    }
    Err(RunError::invalid(
        "modes.switch_when: switches from a signal are not carried out in a run without a control socket: the stop-start worker watches the gateway readers' counters",
    ))
}

/// `modes.switch_when[index]`'s condition was met (the stop-start worker saw its counter
/// grow): queued for [`serve`].
pub fn signal_fired(requests: &SharedRequests, index: usize) {
    lock(requests).signals.push(index);
}

/// Locks `r`, whatever a panicking holder left (each update is a push or a take).
fn lock(r: &SharedRequests) -> std::sync::MutexGuard<'_, Requests> {
    r.lock().unwrap_or_else(|e| e.into_inner())
}

/// A request from `asker` (the keeper, as it reads the channel): refused with `EPERM`
/// at once unless the description allows it; else queued for [`serve`].
pub fn receive(requests: &SharedRequests, asker: &Asker<'_>, want: Want) {
    let mut r = lock(requests);
    let allowed = r.modes.as_ref().is_some_and(|m| match &want {
        Want::Mode(name) => m.may_request_mode(asker.partition, name),
        Want::Suspend => m.may_request_suspend(asker.partition),
    });
    if !allowed {
        reply(asker.channel, errno::EPERM);
        r.record(asker.partition, asker.process, &want, Err(Verdict::Refused));
        return;
    }
    match asker.channel.try_clone_to_owned() {
        Ok(fd) => r.queue.push(Pending {
            partition: asker.partition.to_string(),
            process: asker.process,
            want,
            reply: fd,
        }),
        Err(e) => {
            reply(asker.channel, errno::of(&e));
            let why = format!("no descriptor for the reply: {e}");
            r.record(
                asker.partition,
                asker.process,
                &want,
                Err(Verdict::Failed(why)),
            );
        }
    }
}

/// Hands the queued requests to `managers` (the supervisor's loop) and answers each.
pub fn serve(requests: &SharedRequests, managers: Managers<'_>) {
    let Managers {
        mut modes,
        mut stop_start,
    } = managers;
    let mut r = lock(requests);
    for index in std::mem::take(&mut r.signals) {
        let Some(s) = r
            .modes
            .as_ref()
            .and_then(|m| m.switch_when.get(index))
            .cloned()
        else {
            continue;
        };
        let refusal = match modes.as_deref_mut() {
            Some(m) => m.request(&s.to, None).and_then(refused),
            None => Some((errno::EINVAL, "the run has no mode manager".to_string())),
        };
        r.record_signal(index, &s, refusal.map(|(_, why)| why));
    }
    for p in std::mem::take(&mut r.queue) {
        let refusal = match &p.want {
            Want::Mode(name) => match modes.as_deref_mut() {
                Some(m) => m.request(name, None).and_then(refused),
                None => Some((errno::EINVAL, "the run has no mode manager".to_string())),
            },
            Want::Suspend => match stop_start.as_deref_mut() {
                Some(s) => s.request_by(true, None, "request").and_then(refused),
                None => Some((
                    errno::EINVAL,
                    "the run has no stop-start manager".to_string(),
                )),
            },
        };
        reply(p.reply.as_fd(), refusal.as_ref().map_or(0, |(e, _)| *e));
        let verdict = refusal.map_or(Ok(()), |(_, why)| Err(Verdict::Failed(why)));
        r.record(&p.partition, p.process, &p.want, verdict);
    }
}

/// The errno and reason of a manager's error reply (`None`: it took the request).
fn refused(r: Response) -> Option<(i32, String)> {
    let e = r.error?;
    let code = match e.code {
        ErrorCode::Busy | ErrorCode::Refused => errno::EBUSY,
        _ => errno::EINVAL,
    };
    Some((code, e.message))
}

/// Answers a request with `code` (0: taken) without blocking: a requester that does
/// not read its replies loses them, and holds up no one.
fn reply(channel: BorrowedFd<'_>, code: i32) {
    let _ = send_nonblocking(channel.as_raw_fd(), &(code as u64).to_ne_bytes());
}

/// Why a request was not granted.
enum Verdict {
    Refused,
    Failed(String),
}

impl Requests {
    /// A stderr line, and the `signal_switch` event of `modes.switch_when[index]`
    /// (`refusal`: why the mode manager did not take it).
    fn record_signal(&mut self, index: usize, s: &SwitchWhen, refusal: Option<String>) {
        let verdict = if refusal.is_some() {
            "failed"
        } else {
            "granted"
        };
        eprintln!(
            "bulkhead: modes.switch_when[{index}] ({} on bus `{}`): switch to mode `{}`: {verdict}{}",
            s.when.spec(),
            s.when.bus,
            s.to,
            refusal.as_ref().map(|r| format!(": {r}")).unwrap_or_default()
        );
        let Some((events, epoch_ns)) = &self.events else {
            return;
        };
        let kind = EventKind::SignalSwitch {
            index: index as u32,
            bus: s.when.bus.as_str().into(),
            signal: s.when.signal.as_str().into(),
            to: s.to.as_str().into(),
            verdict: verdict.into(),
            reason: refusal.as_deref().map(Into::into),
        };
        let event = Event::new(now_ns().saturating_sub(*epoch_ns), kind);
        events.lock().unwrap_or_else(|e| e.into_inner()).push(event);
    }

    /// A stderr line, and the `partition_request` event.
    fn record(&mut self, partition: &str, process: usize, want: &Want, v: Result<(), Verdict>) {
        let mode = match want {
            Want::Mode(name) => Some(name.as_str()),
            Want::Suspend => None,
        };
        let what = mode.map_or("a suspend".to_string(), |m| format!("mode `{m}`"));
        let (verdict, reason) = match v {
            Ok(()) => ("granted", None),
            Err(Verdict::Refused) => ("refused", None),
            Err(Verdict::Failed(why)) => ("failed", Some(why)),
        };
        eprintln!(
            "bulkhead: process {process} of partition `{partition}` requested {what}: {verdict}{}",
            reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
        let Some((events, epoch_ns)) = &self.events else {
            return;
        };
        let kind = EventKind::PartitionRequest {
            partition: partition.into(),
            process: process as u32,
            mode: mode.map(Into::into),
            verdict: verdict.into(),
            reason: reason.as_deref().map(Into::into),
        };
        let event = Event::new(now_ns().saturating_sub(*epoch_ns), kind);
        events.lock().unwrap_or_else(|e| e.into_inner()).push(event);
    }
}
