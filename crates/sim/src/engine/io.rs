//! What a job reads and writes: messages taken at its first start, forwarded at its
//! completion (Boomerang III-B, III-E), and a writer waiting for room in a full fifo
//! (`overflow: block`, Boomerang III-B's `RT_FIFO`: "the sender must block when the
//! buffer is full").
//!
//! A message read from a fifo is forwarded on its own, one message per message taken,
//! as `bulkhead stage` does under `run`; the messages read from `latest` channels are
//! merged into one (the newest origin per source). A pipeline stage takes at most its m
//! messages per job over all of its fifo inputs, in turns; a task reading declared
//! channels takes its `reads:` of each (one by default).

use super::Sim;
use crate::channels::{Origin, Write};
use bulkhead_model::{ChannelKind, Nanos};
use bulkhead_trace::EventKind;
use std::collections::VecDeque;
use std::rc::Rc;

/// A job whose work is done, waiting for room to write the rest of its messages.
pub(crate) struct Blocked {
    /// The CPU it completed its work on.
    cpu: u32,
    /// Messages not yet written to every output, oldest first.
    rest: VecDeque<Rc<[Origin]>>,
    /// The output (index into the task's outputs) the first of `rest` goes to next.
    output: usize,
}

impl Sim<'_> {
    pub(super) fn read_inputs(&mut self, task: usize, t: Nanos) {
        self.tasks[task].inputs.clear();
        self.tasks[task].fifo_inputs.clear();
        let spec = self.task_spec(task);
        let mut pipeline = Vec::new();
        for &c in &spec.inputs {
            let ch = &self.spec.channels[c];
            match (ch.kind, ch.pipeline) {
                (ChannelKind::Fifo, true) => pipeline.push(c),
                (ChannelKind::Fifo, false) => {
                    for _ in 0..ch.per_read.max(1) {
                        if !self.take(task, c, t) {
                            break;
                        }
                    }
                }
                (ChannelKind::Latest, _) => {
                    self.take(task, c, t);
                }
            }
        }
        // A stage's m over its fifo inputs together, one from each in turn.
        let m = pipeline
            .iter()
            .map(|&c| self.spec.channels[c].per_read)
            .max()
            .unwrap_or(1)
            .max(1);
        let mut taken = 0;
        while taken < m {
            let before = taken;
            for &c in &pipeline {
                if taken < m && self.take(task, c, t) {
                    taken += 1;
                }
            }
            if taken == before {
                break;
            }
        }
    }

    /// `task` reads one message of channel `c`; false when there is none. Room made in
    /// a fifo lets a writer waiting on it go on.
    fn take(&mut self, task: usize, c: usize, t: Nanos) -> bool {
        let Some(message) = self.channels.read(c, task as u32) else {
            return false;
        };
        if self.tracing {
            let spec = &self.spec.tasks[task];
            let kind = EventKind::ChannelRead {
                cpu: self.task_cpu(task),
                channel: self.channels.name(c).clone(),
                partition: spec.partition.clone(),
                task: spec.name.clone(),
                msg: message.id,
            };
            self.emit(t, kind);
        }
        match self.spec.channels[c].kind {
            ChannelKind::Fifo => self.tasks[task].fifo_inputs.push(message.origins),
            ChannelKind::Latest => merge_origins(&mut self.tasks[task].inputs, &message.origins),
        }
        if self.spec.channels[c].kind == ChannelKind::Fifo {
            self.unblock_writers(c, t);
        }
        true
    }

    /// The messages the head job of `task` writes to each output: a source's one
    /// sample, else each fifo message it read and one merging the latest ones.
    pub(super) fn outgoing(&self, task: usize) -> Vec<Rc<[Origin]>> {
        if self.sources[task] {
            let job = &self.tasks[task].jobs[0];
            return vec![Rc::new([Origin {
                source: task as u32,
                seq: job.index,
                t: job.release,
            }])];
        }
        let state = &self.tasks[task];
        let mut out = state.fifo_inputs.clone();
        if !state.inputs.is_empty() {
            out.push(state.inputs.as_slice().into());
        }
        out
    }

    /// Whether writing `count` messages to every output of `task` would find a fifo
    /// with `overflow: block` full.
    pub(super) fn would_block(&self, task: usize, count: usize) -> bool {
        let outputs = &self.spec.tasks[task].outputs;
        count > 0
            && outputs
                .iter()
                .any(|&c| self.channels.room(c) < count as u64)
    }

    /// The head job of `task` waits at `t` for room: what fits is written now, the rest
    /// when its consumers read ([`Self::unblock_writers`]).
    pub(super) fn block_writer(
        &mut self,
        task: usize,
        cpu: u32,
        messages: Vec<Rc<[Origin]>>,
        t: Nanos,
    ) {
        self.tasks[task].blocked = Some(Blocked {
            cpu,
            rest: messages.into(),
            output: 0,
        });
        self.blocked_writers += 1;
        self.write_blocked(task, t);
    }

    /// Writers waiting on fifo `c` go on now that it has room; each whose messages are
    /// all written completes its job at `t`.
    fn unblock_writers(&mut self, c: usize, t: Nanos) {
        if self.blocked_writers == 0 {
            return;
        }
        for task in 0..self.tasks.len() {
            let waits =
                self.tasks[task].blocked.is_some() && self.spec.tasks[task].outputs.contains(&c);
            if waits {
                self.write_blocked(task, t);
            }
        }
    }

    /// Writes what fits of the blocked job's messages; completes it when all are out.
    fn write_blocked(&mut self, task: usize, t: Nanos) {
        let outputs = self.spec.tasks[task].outputs.clone();
        let Some(mut b) = self.tasks[task].blocked.take() else {
            return;
        };
        while let Some(message) = b.rest.front().cloned() {
            while b.output < outputs.len() {
                let c = outputs[b.output];
                if self.channels.room(c) == 0 {
                    self.tasks[task].blocked = Some(b);
                    return;
                }
                self.write_one(task, c, b.cpu, message.clone(), t);
                b.output += 1;
            }
            b.rest.pop_front();
            b.output = 0;
        }
        self.blocked_writers -= 1;
        if self.sources[task] {
            self.channels.produced(task as u32);
        }
        let domain = self.spec.servers[self.spec.tasks[task].server].domain;
        self.touch(domain, t);
        self.finish_job(task, b.cpu, t, Vec::new());
    }

    /// A pipeline's sink reports each message it finished: its source job and its
    /// end-to-end delay (`message` events, as the task library's message ring gives a run).
    fn emit_messages(&mut self, task: usize, delivered: &[(Origin, Nanos)], t: Nanos) {
        let spec = &self.spec.tasks[task];
        let pipeline = spec.inputs.iter().any(|&c| self.spec.channels[c].pipeline);
        if !self.tracing || !pipeline {
            return;
        }
        let (partition, name) = (spec.partition.clone(), spec.name.clone());
        for (origin, delay) in delivered {
            let kind = EventKind::Message {
                partition: partition.clone(),
                task: name.clone(),
                // As a run's: the source in the top 16 bits (here its task index),
                // its job below, so ids of different sources never collide.
                id: (u64::from(origin.source) << 48) | (origin.seq & ((1 << 48) - 1)),
                e2e_ns: *delay,
            };
            self.emit(t, kind);
        }
    }

    /// A completed job's outputs: a sink delivers what it read; any other task writes
    /// `messages` (none left when it waited for room and wrote them already).
    pub(super) fn write_outputs(
        &mut self,
        task: usize,
        cpu: u32,
        t: Nanos,
        messages: Vec<Rc<[Origin]>>,
    ) {
        let spec = self.task_spec(task);
        if spec.outputs.is_empty() {
            let mut origins: Vec<Origin> = Vec::new();
            for m in &self.tasks[task].fifo_inputs {
                origins.extend(m.iter());
            }
            origins.extend(self.tasks[task].inputs.iter());
            let delivered = self.channels.deliver(task as u32, &origins, t);
            self.emit_messages(task, &delivered, t);
            return;
        }
        if self.sources[task] && !messages.is_empty() {
            self.channels.produced(task as u32);
        }
        for message in messages {
            for &c in &spec.outputs {
                self.write_one(task, c, cpu, message.clone(), t);
            }
        }
    }

    /// Writes one message to channel `c` (with room, or a rule other than `block`).
    fn write_one(&mut self, task: usize, c: usize, cpu: u32, origins: Rc<[Origin]>, t: Nanos) {
        let written = self.channels.write(c, origins);
        if !self.tracing {
            return;
        }
        let spec = self.task_spec(task);
        let channel = self.channels.name(c).clone();
        let (id, lost) = match written {
            Write::Stored(id) => (id, None),
            Write::Rejected(id) => (id, Some(id)),
            Write::Overwrote(id, old) => (id, Some(old)),
            Write::Full => unreachable!("a write to a full blocking fifo waits"),
        };
        let kind = EventKind::ChannelWrite {
            cpu,
            channel: channel.clone(),
            partition: spec.partition.clone(),
            task: spec.name.clone(),
            msg: id,
        };
        self.emit(t, kind);
        if let Some(msg) = lost {
            self.emit(t, EventKind::ChannelLoss { channel, msg });
        }
    }

    /// Whether `task` has a job that may run: queued and not waiting for room.
    pub(super) fn runnable(&self, task: u32) -> bool {
        let state = &self.tasks[task as usize];
        !state.jobs.is_empty() && state.blocked.is_none()
    }
}

/// Adds `more` to `origins`, keeping the newest origin per source.
fn merge_origins(origins: &mut Vec<Origin>, more: &[Origin]) {
    for o in more {
        match origins.iter_mut().find(|x| x.source == o.source) {
            Some(x) if x.seq < o.seq => *x = *o,
            Some(_) => {}
            None => origins.push(*o),
        }
    }
}
