//! Partitions scheduled as servers, simulated as M2-Xen's platform schedules VMs
//! (Li et al., RTAS 2018, Sec. II-B): the partitions that share a pool of CPUs form one
//! domain in which their VCPUs, deferrable servers of the interface's budget and period
//! (Xen RTDS), are scheduled by global EDF; inside each VCPU the partition's own
//! scheduler picks the task. A partition of N CPUs has N VCPUs; its tasks are bound to
//! them by worst-fit decreasing utilization, its mode agent to the first.

use crate::spec::*;
use bulkhead_model::{Partition, Scheduler};

/// The pools built so far: each CPU list and its domain.
#[derive(Default)]
pub(crate) struct Pools {
    domains: Vec<(Vec<u32>, usize)>,
}

impl Pools {
    /// The domain of the pool `cpus`, created on first use.
    fn domain(&mut self, spec: &mut Spec, cpus: Vec<u32>) -> usize {
        if let Some(&(_, d)) = self.domains.iter().find(|(c, _)| *c == cpus) {
            return d;
        }
        let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
        spec.domains.push(Domain {
            name: format!("pool {}", list.join(",")).into(),
            cpus: cpus.clone(),
            policy: Policy::Edf,
        });
        self.domains.push((cpus, spec.domains.len() - 1));
        spec.domains.len() - 1
    }

    /// Adds the VCPUs of `p` (budget and period per CPU) to the pool of `cpus`; returns
    /// the server of each of its tasks, in task order.
    pub(crate) fn add(
        &mut self,
        spec: &mut Spec,
        p: &Partition,
        cpus: Vec<u32>,
        (budget, period): (Nanos, Nanos),
    ) -> Vec<usize> {
        let n = cpus.len().max(1);
        let domain = self.domain(spec, cpus);
        let inner = match p.scheduler {
            Scheduler::FixedPriority => Policy::FixedPriority,
            Scheduler::Edf => Policy::Edf,
        };
        let first = spec.servers.len();
        for _ in 0..n {
            spec.servers.push(Server {
                domain,
                kind: ServerKind::Deferrable,
                budget: budget.clamp(1, period),
                period,
                priority: 1,
            });
        }
        spec.inner.resize(spec.servers.len(), None);
        spec.inner[first..].fill(Some(inner));
        place(p, n).into_iter().map(|v| first + v).collect()
    }
}

/// The VCPU of each task of `p`: the mode agent on the first, the others by
/// decreasing utilization, each on the least loaded VCPU (ties: the lower index).
fn place(p: &Partition, n: usize) -> Vec<usize> {
    let mut load = vec![0f64; n];
    let mut vcpu = vec![0; p.tasks.len()];
    let mut order: Vec<usize> = (0..p.tasks.len()).collect();
    order.sort_by(|&a, &b| {
        let agent = |i: usize| p.tasks[i].service == Some(bulkhead_model::Service::ModeAgent);
        agent(b)
            .cmp(&agent(a))
            .then(
                p.tasks[b]
                    .utilization()
                    .total_cmp(&p.tasks[a].utilization()),
            )
            .then(a.cmp(&b))
    });
    for i in order {
        let least = (0..n)
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        vcpu[i] = least;
        load[least] += p.tasks[i].utilization();
    }
    vcpu
}
