//! The servers' budget rules (see [`crate::ServerKind`] for the papers): activation,
//! idling, exhaustion, replenishment, eligibility and dispatch keys.

use super::{Ev, Sim};
use crate::spec::*;

impl Sim<'_> {
    /// Server `s` with the budget and period a mode switch gave it, if any.
    pub(super) fn server_params(&self, s: usize) -> Server {
        let mut server = self.spec.servers[s];
        if let Some((budget, period)) = self.servers[s].params {
            server.budget = budget;
            server.period = period;
        }
        server
    }

    /// The server got work while it had none.
    pub(super) fn activate(&mut self, s: usize, t: Nanos) {
        let spec = self.server_params(s);
        let server = &mut self.servers[s];
        match spec.kind {
            ServerKind::Unlimited | ServerKind::Deferrable => {}
            ServerKind::Sporadic => {
                if server.budget > 0 && server.active_since.is_none() {
                    server.active_since = Some(t);
                }
            }
            ServerKind::Cbs => {
                // CBS arrival rule: keep (q, d) unless q > (d - t) * Q / T (Abeni & Buttazzo, Sec. 4).
                if !server.throttled {
                    let lhs = server.budget as u128 * spec.period as u128;
                    let rhs = server.deadline.saturating_sub(t) as u128 * spec.budget as u128;
                    if server.deadline <= t || lhs >= rhs {
                        server.deadline = t.saturating_add(spec.period);
                        server.budget = spec.budget;
                    }
                }
            }
            ServerKind::Io => {
                if t >= server.eligible_at {
                    server.active_since = Some(t);
                }
            }
        }
    }

    /// The server has no work left.
    pub(super) fn idle(&mut self, s: usize, t: Nanos) {
        match self.spec.servers[s].kind {
            ServerKind::Sporadic => self.post_used(s),
            ServerKind::Io => self.post_io(s, t),
            _ => {}
        }
    }

    /// The server ran out of budget with work pending.
    pub(super) fn exhausted(&mut self, s: usize, t: Nanos) {
        let spec = self.server_params(s);
        match spec.kind {
            ServerKind::Unlimited => {}
            ServerKind::Sporadic => self.post_used(s),
            ServerKind::Deferrable => {
                let next = self.servers[s].period_end;
                self.wake(s, next);
            }
            ServerKind::Cbs => {
                self.servers[s].throttled = true;
                let at = self.servers[s].deadline;
                self.wake(s, at.max(t));
            }
            ServerKind::Io => self.post_io(s, t),
        }
    }

    /// Sporadic server: the budget consumed since the server became active (ready with
    /// budget) returns one period after that activation, as in JuMP2start's Fig. 5
    /// (Quest VCPUs) and POSIX SCHED_SPORADIC; at once if that time has passed.
    pub(super) fn post_used(&mut self, s: usize) {
        let period = self.server_params(s).period;
        let server = &mut self.servers[s];
        if let (Some(since), true) = (server.active_since, server.used > 0) {
            let at = since.saturating_add(period);
            let pos = server.repl.partition_point(|&(_, time)| time <= at);
            server.repl.insert(pos, (server.used, at));
            if pos == 0 {
                self.wake(s, at);
            }
        }
        let server = &mut self.servers[s];
        server.used = 0;
        server.active_since = None;
    }

    /// I/O server: a single replenishment of the full budget at `a + used * T / C`.
    pub(super) fn post_io(&mut self, s: usize, t: Nanos) {
        let spec = self.server_params(s);
        let server = &mut self.servers[s];
        let since = server.active_since.unwrap_or(t);
        let delay =
            (server.used as u128 * spec.period as u128).div_ceil(spec.budget as u128) as Nanos;
        server.eligible_at = since.saturating_add(delay);
        server.budget = spec.budget;
        server.used = 0;
        server.active_since = None;
        let at = server.eligible_at;
        self.wake(s, at);
    }

    /// Schedules the next replenishment event of server `s` at `at`, or now if that
    /// time has passed (a server kept from running for more than a period).
    pub(super) fn wake(&mut self, s: usize, at: Nanos) {
        let server = &mut self.servers[s];
        server.gen += 1;
        self.heap
            .push(at.max(self.now), Ev::Replenish(s as u32), server.gen);
    }

    /// A replenishment time of server `s` has come.
    pub(super) fn replenish(&mut self, s: usize, t: Nanos) {
        let spec = self.server_params(s);
        match spec.kind {
            ServerKind::Sporadic => {
                let server = &mut self.servers[s];
                let mut added = 0;
                while let Some(&(amount, _)) = server.repl.front().filter(|&&(_, at)| at <= t) {
                    server.repl.pop_front();
                    added += amount;
                }
                if added > 0 && server.pending > 0 {
                    // Budget arriving during an active period closes it and opens a new
                    // one, so replenishments never merge into more than was consumed
                    // (budget amplification, Stanovich et al., RTAS 2010).
                    if server.active_since.is_some() {
                        self.post_used(s);
                    }
                    self.servers[s].active_since = Some(t);
                }
                let server = &mut self.servers[s];
                server.budget = (server.budget + added).min(spec.budget);
                if let Some(&(_, at)) = server.repl.front() {
                    self.wake(s, at);
                }
            }
            ServerKind::Cbs => {
                let server = &mut self.servers[s];
                if server.throttled && t >= server.deadline {
                    // Linux replenish_dl_entity: one period on; a server lagging
                    // behind the clock gets a fresh deadline from now instead.
                    server.throttled = false;
                    server.budget = spec.budget;
                    server.deadline = server.deadline.saturating_add(spec.period);
                    if server.deadline <= t {
                        server.deadline = t.saturating_add(spec.period);
                    }
                }
            }
            ServerKind::Io => {
                let server = &mut self.servers[s];
                if server.pending > 0 && t >= server.eligible_at {
                    server.active_since = Some(t);
                }
            }
            ServerKind::Deferrable | ServerKind::Unlimited => {}
        }
        self.trace_budget(s, t);
    }

    /// Deferrable server: the budget is full again at each period boundary.
    pub(super) fn refresh(&mut self, s: usize, t: Nanos) {
        let spec = self.server_params(s);
        let server = &mut self.servers[s];
        if spec.kind == ServerKind::Deferrable && t >= server.period_end {
            let periods = (t - server.period_end) / spec.period + 1;
            server.period_end = server
                .period_end
                .saturating_add(periods.saturating_mul(spec.period));
            server.budget = spec.budget;
        }
    }

    pub(super) fn eligible(&mut self, s: usize, t: Nanos) -> bool {
        self.refresh(s, t);
        let server = &self.servers[s];
        server.pending > 0
            && server.tasks.iter().any(|&k| self.runnable(k))
            && (server.boost.is_some()
                || (server.budget > 0 && !server.throttled && t >= server.eligible_at))
    }

    /// The task of server `s` whose job runs next: the highest-priority one with work
    /// (under EDF, the earliest job deadline).
    pub(super) fn current_task(&self, s: usize) -> u32 {
        let server = &self.servers[s];
        if server.tasks.len() == 1 {
            return server.tasks[0];
        }
        if let Some(agent) = server.boost {
            if self.runnable(agent) {
                return agent;
            }
        }
        let with_work = server.tasks.iter().copied().filter(|&t| self.runnable(t));
        let domain = self.spec.domains[self.spec.servers[s].domain].policy;
        let policy = self.spec.inner.get(s).copied().flatten().unwrap_or(domain);
        match policy {
            Policy::FixedPriority => {
                with_work.min_by_key(|&t| self.spec.tasks[t as usize].priority)
            }
            Policy::Edf => with_work.min_by_key(|&t| self.tasks[t as usize].jobs[0].deadline),
        }
        .expect("an eligible server has a task with work")
    }

    /// Dispatch order: lower first.
    pub(super) fn key(&self, s: usize) -> (Nanos, u32) {
        if self.servers[s].boost.is_some() {
            return (0, s as u32);
        }
        let spec = &self.spec.servers[s];
        match self.spec.domains[spec.domain].policy {
            Policy::FixedPriority => (spec.priority as Nanos, s as u32),
            Policy::Edf => {
                let server = &self.servers[s];
                let deadline = match spec.kind {
                    ServerKind::Cbs => server.deadline,
                    ServerKind::Deferrable => server.period_end,
                    _ => self.tasks[self.current_task(s) as usize].jobs[0].deadline,
                };
                (deadline, s as u32)
            }
        }
    }
}
