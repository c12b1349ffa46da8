//! The health monitor as one pure state machine: evidence in (a deadline miss, an
//! overrun, an exit, a heartbeat, the passing of time), decisions out (which action to
//! take, for what cause). No clock and no system calls: the caller passes the time
//! (CLOCK_MONOTONIC ns in `run`, simulated time in `sim`) and carries out the actions.
//!
//! The rules are ARINC 653's health monitor (an error detected, the declared recovery
//! action taken) with AUTOSAR PHM's supervisions: deadline supervision as `misses`
//! misses within `within`, alive supervision as a watchdog of `timeout`, and recovery
//! escalation as `then:` (docs/health.md).

use super::{Action, Escalation, Health, Member, Supervised};
use crate::units::Nanos;
use std::collections::VecDeque;

/// What the supervisor saw of a supervised task or process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// A job missed its deadline.
    Miss,
    /// A job ran past its budget.
    Overrun,
    /// The task or process exited (its status is the caller's to report).
    Exit,
    /// A heartbeat (`bulkhead_heartbeat()`, or a task's completed job); also a
    /// (re)start, which starts the watchdog afresh.
    Heartbeat,
}

/// Why a supervision fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// `on_miss`: this many misses within its window.
    Misses(u32),
    Overrun,
    Exit,
    /// `watchdog`: no heartbeat for its timeout.
    Silence,
}

impl Cause {
    /// The cause as the `health_action` event names it.
    pub fn name(self) -> &'static str {
        match self {
            Cause::Misses(_) => "miss",
            Cause::Overrun => "overrun",
            Cause::Exit => "exit",
            Cause::Silence => "silence",
        }
    }
}

/// An action to take now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Index of the supervised member in the monitor (as [`Monitor::find`] gives it).
    pub member: usize,
    pub cause: Cause,
    pub action: Action,
    /// When the evidence that fired it was seen.
    pub evidence_ns: Nanos,
}

/// Where an escalation stands: the step in force and how often it was taken.
#[derive(Debug, Clone, Default)]
struct Ladder {
    step: usize,
    taken: u32,
    /// Firings so far, on every step.
    fired: u64,
}

impl Ladder {
    /// The action of the next firing: the next step once the current one was taken
    /// as often as the next step's `after` says.
    fn climb(&mut self, e: &Escalation) -> Action {
        if let Some(next) = e.steps.get(self.step + 1) {
            if self.taken >= next.after {
                self.step += 1;
                self.taken = 0;
            }
        }
        self.taken += 1;
        self.fired += 1;
        e.steps[self.step].action.clone()
    }

    /// The action the next firing takes (without climbing).
    fn next(&self, e: &Escalation) -> Action {
        self.clone().climb(e)
    }
}

/// Where one supervision of a member stands, as `ctl status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisionState {
    /// The index of the member in the monitor.
    pub member: usize,
    /// `on_miss`, `on_overrun`, `on_exit` or `watchdog`.
    pub supervision: &'static str,
    /// How often it fired.
    pub fired: u64,
    /// The action its next firing takes (the escalation's step in force).
    pub next_action: Action,
    /// `on_miss`: the misses within its window now.
    pub misses: Option<u32>,
    /// `watchdog`: the time since the last heartbeat (or start, or firing).
    pub silent_ns: Option<Nanos>,
}

struct Entry {
    partition: String,
    member: Member,
    health: Health,
    /// Times of the misses still within `on_miss.within`.
    misses: VecDeque<Nanos>,
    last_beat: Nanos,
    /// Per supervision: on_miss, on_overrun, on_exit, watchdog.
    ladders: [Ladder; 4],
}

/// The supervisions' keys in the order of [`Entry::ladders`].
const LADDERS: [&str; 4] = ["on_miss", "on_overrun", "on_exit", "watchdog"];

/// The monitor of every supervised task and process of a system.
pub struct Monitor {
    entries: Vec<Entry>,
}

impl Monitor {
    /// A monitor of `supervised` whose watchdogs start at `now`.
    pub fn new(supervised: &[Supervised], now: Nanos) -> Monitor {
        let entries = supervised.iter().map(|s| Entry {
            partition: s.partition.clone(),
            member: s.member.clone(),
            health: s.health.clone(),
            misses: VecDeque::new(),
            last_beat: now,
            ladders: Default::default(),
        });
        Monitor {
            entries: entries.collect(),
        }
    }

    /// The index of `member` of `partition`, if it is supervised.
    pub fn find(&self, partition: &str, member: &Member) -> Option<usize> {
        let same = |e: &Entry| e.partition == partition && &e.member == member;
        self.entries.iter().position(same)
    }

    /// The partition and member of index `i`.
    pub fn member(&self, i: usize) -> (&str, &Member) {
        (&self.entries[i].partition, &self.entries[i].member)
    }

    /// Whether member `i` has a supervision that `evidence` feeds.
    pub fn watches(&self, i: usize, evidence: Evidence) -> bool {
        let h = &self.entries[i].health;
        match evidence {
            Evidence::Miss => h.on_miss.is_some(),
            Evidence::Overrun => h.on_overrun.is_some(),
            Evidence::Exit => h.on_exit.is_some(),
            Evidence::Heartbeat => h.watchdog.is_some(),
        }
    }

    /// Feeds `evidence` about member `i` seen at `now`; the decision when a
    /// supervision fires. Misses older than `within` before `now` are forgotten; the
    /// misses that fired are cleared (the next firing needs `misses` new ones).
    pub fn observe(&mut self, i: usize, evidence: Evidence, now: Nanos) -> Option<Decision> {
        let e = &mut self.entries[i];
        let (cause, ladder, escalation) = match evidence {
            Evidence::Heartbeat => {
                e.last_beat = now;
                return None;
            }
            Evidence::Miss => {
                let m = e.health.on_miss.as_ref()?;
                e.misses.push_back(now);
                while e.misses.front().is_some_and(|&t| now - t >= m.within) {
                    e.misses.pop_front();
                }
                if (e.misses.len() as u64) < m.misses as u64 {
                    return None;
                }
                e.misses.clear();
                (Cause::Misses(m.misses), 0, &m.escalation)
            }
            Evidence::Overrun => (Cause::Overrun, 1, e.health.on_overrun.as_ref()?),
            Evidence::Exit => (Cause::Exit, 2, e.health.on_exit.as_ref()?),
        };
        let action = e.ladders[ladder].climb(escalation);
        Some(Decision {
            member: i,
            cause,
            action,
            evidence_ns: now,
        })
    }

    /// The watchdogs that expired by `now`: each fires once per `timeout` of silence
    /// (its silence is counted again from the firing).
    pub fn tick(&mut self, now: Nanos) -> Vec<Decision> {
        let mut out = Vec::new();
        for (i, e) in self.entries.iter_mut().enumerate() {
            let Some(w) = &e.health.watchdog else {
                continue;
            };
            let expiry = e.last_beat.saturating_add(w.timeout);
            if now >= expiry {
                e.last_beat = now;
                out.push(Decision {
                    member: i,
                    cause: Cause::Silence,
                    action: e.ladders[3].climb(&w.escalation),
                    evidence_ns: expiry,
                });
            }
        }
        out
    }

    /// Every supervision of every member at `now`, members in order, each member's in
    /// the order on_miss, on_overrun, on_exit, watchdog.
    pub fn states(&self, now: Nanos) -> Vec<SupervisionState> {
        let mut out = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            let h = &e.health;
            let within = h.on_miss.as_ref().map(|m| m.within);
            let fresh = e
                .misses
                .iter()
                .filter(|&&t| within.is_some_and(|w| now.saturating_sub(t) < w));
            let misses = fresh.count() as u32;
            for (key, escalation) in h.escalations() {
                let k = LADDERS
                    .iter()
                    .position(|&l| l == key)
                    .expect("a supervision key");
                out.push(SupervisionState {
                    member: i,
                    supervision: key,
                    fired: e.ladders[k].fired,
                    next_action: e.ladders[k].next(escalation),
                    misses: (key == "on_miss").then_some(misses),
                    silent_ns: (key == "watchdog").then(|| now.saturating_sub(e.last_beat)),
                });
            }
        }
        out
    }

    /// The earliest time a watchdog expires, if any member has one.
    pub fn next_expiry(&self) -> Option<Nanos> {
        let each = self.entries.iter().filter_map(|e| {
            let w = e.health.watchdog.as_ref()?;
            Some(e.last_beat.saturating_add(w.timeout))
        });
        each.min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{MissSupervision, Step, Watchdog};

    const MS: Nanos = 1_000_000;

    fn steps(list: &[(u32, Action)]) -> Escalation {
        let steps = list.iter().map(|(after, action)| Step {
            after: *after,
            action: action.clone(),
        });
        Escalation {
            steps: steps.collect(),
        }
    }

    fn monitor(health: Health) -> Monitor {
        let s = Supervised {
            partition: "p".into(),
            member: Member::Task("t".into()),
            health,
        };
        Monitor::new(&[s], 0)
    }

    fn actions(d: Vec<Option<Decision>>) -> Vec<Option<Action>> {
        d.into_iter().map(|d| d.map(|d| d.action)).collect()
    }

    #[test]
    fn k_misses_within_the_window_fire_and_older_ones_are_forgotten() {
        let mut m = monitor(Health {
            on_miss: Some(MissSupervision {
                misses: 3,
                within: 100 * MS,
                escalation: steps(&[(0, Action::Mode("safe".into()))]),
            }),
            ..Health::default()
        });
        // Two misses, then a third 100 ms after the first: the first has left the window.
        let got: Vec<_> = [0, 50, 100, 120]
            .iter()
            .map(|&t| m.observe(0, Evidence::Miss, t * MS))
            .collect();
        let fired = got[3].clone().expect("50, 100, 120 are within 100 ms");
        assert_eq!(fired.cause, Cause::Misses(3));
        assert_eq!(fired.evidence_ns, 120 * MS);
        assert_eq!(actions(got[..3].to_vec()), vec![None, None, None]);
        // The misses that fired are cleared: two more do not fire again.
        assert_eq!(m.observe(0, Evidence::Miss, 121 * MS), None);
        assert_eq!(m.observe(0, Evidence::Miss, 122 * MS), None);
        assert!(m.observe(0, Evidence::Miss, 123 * MS).is_some());
    }

    #[test]
    fn an_escalation_takes_each_step_as_often_as_the_next_step_says() {
        let mut m = monitor(Health {
            on_exit: Some(steps(&[
                (0, Action::Restart),
                (2, Action::Log),
                (1, Action::Stop),
            ])),
            ..Health::default()
        });
        let got: Vec<_> = (0..5).map(|t| m.observe(0, Evidence::Exit, t)).collect();
        let want = [
            Action::Restart,
            Action::Restart,
            Action::Log,
            Action::Stop,
            Action::Stop,
        ];
        assert_eq!(actions(got), want.map(Some).to_vec());
    }

    #[test]
    fn a_watchdog_fires_after_its_timeout_of_silence_and_a_heartbeat_resets_it() {
        let mut m = monitor(Health {
            watchdog: Some(Watchdog {
                timeout: 100 * MS,
                escalation: steps(&[(0, Action::Restart), (1, Action::Stop)]),
            }),
            ..Health::default()
        });
        assert_eq!(m.next_expiry(), Some(100 * MS));
        assert!(m.tick(99 * MS).is_empty());
        assert_eq!(m.observe(0, Evidence::Heartbeat, 90 * MS), None);
        assert!(
            m.tick(189 * MS).is_empty(),
            "the heartbeat at 90 ms moved it"
        );
        let fired = m.tick(195 * MS);
        assert_eq!(fired.len(), 1);
        assert_eq!(
            (fired[0].cause, fired[0].evidence_ns, &fired[0].action),
            (Cause::Silence, 190 * MS, &Action::Restart)
        );
        // Still silent: it fires again one timeout later, escalated.
        assert!(m.tick(294 * MS).is_empty());
        assert_eq!(m.tick(295 * MS)[0].action, Action::Stop);
    }

    #[test]
    fn states_show_firings_the_next_action_the_misses_in_the_window_and_the_silence() {
        let mut m = monitor(Health {
            on_miss: Some(MissSupervision {
                misses: 2,
                within: 100 * MS,
                escalation: steps(&[(0, Action::Log), (1, Action::Stop)]),
            }),
            watchdog: Some(Watchdog {
                timeout: 1000 * MS,
                escalation: steps(&[(0, Action::Restart)]),
            }),
            ..Health::default()
        });
        let state = |m: &Monitor, now| {
            m.states(now)
                .into_iter()
                .map(|s| (s.supervision, s.fired, s.next_action, s.misses, s.silent_ns))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            state(&m, 0),
            vec![
                ("on_miss", 0, Action::Log, Some(0), None),
                ("watchdog", 0, Action::Restart, None, Some(0)),
            ]
        );
        m.observe(0, Evidence::Miss, 10 * MS);
        m.observe(0, Evidence::Miss, 20 * MS);
        m.observe(0, Evidence::Miss, 30 * MS);
        // One firing (log); the next takes the stop; one miss is in the window at 50 ms
        // and none at 200 ms.
        assert_eq!(
            state(&m, 50 * MS)[0],
            ("on_miss", 1, Action::Stop, Some(1), None)
        );
        assert_eq!(state(&m, 200 * MS)[0].3, Some(0));
        assert_eq!(state(&m, 200 * MS)[1].4, Some(200 * MS));
    }

    #[test]
    fn evidence_without_its_supervision_decides_nothing() {
        let mut m = monitor(Health::default());
        assert!(!m.watches(0, Evidence::Miss));
        assert_eq!(m.observe(0, Evidence::Miss, 0), None);
        assert_eq!(m.observe(0, Evidence::Overrun, 0), None);
        assert_eq!(m.observe(0, Evidence::Exit, 0), None);
        assert!(m.tick(u64::MAX).is_empty());
        assert_eq!(m.next_expiry(), None);
        assert_eq!(m.find("p", &Member::Task("t".into())), Some(0));
        assert_eq!(m.find("p", &Member::Task("u".into())), None);
    }
}
