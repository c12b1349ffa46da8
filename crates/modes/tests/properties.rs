//! Properties of every planned switch between two modes that each fit: whatever the
//! policy and the order of the acknowledgements, no pool is ever loaded above its
//! capacity, no partition ever demands more than its interface, and each partition
//! follows the order of M2-Xen IV-B, Step 3.

use bulkhead_model::{CpuSet, SwitchPolicy, Task};
use bulkhead_modes::*;
use proptest::prelude::*;

const PERIOD: u64 = 10_000_000;

/// A task of period 1 ms whose demand is exactly `ppm` (its budget in ns).
fn task(k: usize, ppm: u64) -> Task {
    Task::periodic(format!("t{k}"), ppm.max(1), 1_000_000)
}

/// Per member of a mode: (share of its pool in 1..=100, demand as percent of its
/// interface, number of tasks).
type Draw = (u64, u64, usize);

fn build(
    pools: &[(u32, u64, u64)],
    members: &[(Option<usize>, u32)],
    modes: &[Vec<Draw>],
) -> Table {
    let pools: Vec<Pool> = pools
        .iter()
        .enumerate()
        .map(|(i, &(cpus, cap, reserve))| Pool {
            cpus: CpuSet::from_cpus(i as u32 * 8..i as u32 * 8 + cpus).unwrap(),
            capacity: cpus as u64 * cap,
            reserve,
        })
        .collect();
    let members: Vec<Member> = members
        .iter()
        .enumerate()
        .map(|(k, &(pool, cpus))| Member {
            name: format!("p{k}"),
            pool: pool.map(|p| p % pools.len()),
            cpus: pool.map_or(cpus, |p| pools[p % pools.len()].cpus.len() as u32),
        })
        .collect();
    let modes = modes
        .iter()
        .enumerate()
        .map(|(m, draws)| TableMode {
            name: format!("m{m}"),
            locals: local_modes(&pools, &members, draws),
        })
        .collect();
    Table {
        pools,
        members,
        modes,
    }
}

/// Interfaces that divide each pool's free capacity by the shares drawn, and task sets
/// that fill the drawn part of each interface.
fn local_modes(pools: &[Pool], members: &[Member], draws: &[Draw]) -> Vec<Local> {
    let share_sum = |pool: usize| -> u64 {
        (0..members.len())
            .filter(|&k| members[k].pool == Some(pool))
            .map(|k| draws[k].0)
            .sum()
    };
    members
        .iter()
        .zip(draws)
        .map(|(member, &(share, fill, count))| {
            let (interface, room) = match member.pool {
                Some(p) => {
                    let free = pools[p].capacity - pools[p].reserve;
                    let bw = free * share / share_sum(p).max(1);
                    let budget = (bw as u128 * PERIOD as u128
                        / (member.cpus as u128 * CPU_PPM as u128))
                        as u64;
                    let budget = budget.min(PERIOD);
                    let i = Interface {
                        budget,
                        period: PERIOD,
                    };
                    (Some(i), bandwidth(budget, PERIOD, member.cpus))
                }
                None => (None, member.cpus as u64 * CPU_PPM),
            };
            let total = room * fill / 100;
            let each = total / count as u64;
            let tasks = (0..count)
                .filter(|_| each > 0)
                .map(|k| task(k, each))
                .collect();
            Local { interface, tasks }
        })
        .collect()
}

fn table() -> impl Strategy<Value = Table> {
    let pools = proptest::collection::vec((1u32..4, 500_000u64..=CPU_PPM, 0u64..50_000), 1..3);
    let members = proptest::collection::vec((proptest::option::of(0usize..3), 1u32..3), 1..8);
    (pools, members, 2usize..4).prop_flat_map(|(pools, members, n)| {
        let draw = (1u64..=100, 0u64..=100, 1usize..4);
        let mode = proptest::collection::vec(draw, members.len());
        let modes = proptest::collection::vec(mode, n);
        (Just(pools), Just(members), modes).prop_map(|(p, m, modes)| build(&p, &m, &modes))
    })
}

const POLICIES: [SwitchPolicy; 4] = [
    SwitchPolicy::Sequential,
    SwitchPolicy::Batch,
    SwitchPolicy::Greedy,
    SwitchPolicy::Boost,
];

/// Checks the order of one partition's steps and the shape of the policy.
fn check_order(table: &Table, from: usize, to: usize, policy: SwitchPolicy, steps: &[Step]) {
    assert_eq!(steps.last(), Some(&Step::Done));
    assert_eq!(steps.iter().filter(|s| **s == Step::Done).count(), 1);
    let mut outstanding = 0usize;
    let changes = table.changes(from, to);
    let growers_started = steps.iter().position(|s| match s {
        Step::Interface { member, .. } | Step::Request { member, .. } => {
            changes.iter().any(|c| c.member == *member && c.grows())
        }
        _ => false,
    });
    for s in steps {
        match s {
            Step::Request { boost, .. } => {
                assert_eq!(*boost, policy == SwitchPolicy::Boost);
                outstanding += 1;
            }
            Step::Ack { .. } => outstanding -= 1,
            _ => {}
        }
        if matches!(policy, SwitchPolicy::Sequential | SwitchPolicy::Boost) {
            assert!(outstanding <= 1, "one partition at a time");
        }
    }
    for c in &changes {
        let at = |f: &dyn Fn(&Step) -> bool| steps.iter().position(f);
        let request = at(&|s| matches!(s, Step::Request { member, .. } if *member == c.member));
        let ack = at(&|s| matches!(s, Step::Ack { member, .. } if *member == c.member));
        let interface = at(&|s| matches!(s, Step::Interface { member, .. } if *member == c.member));
        assert_eq!(request.is_some(), c.tasks_change());
        assert_eq!(ack.is_some(), c.tasks_change());
        assert!(request <= ack);
        let has_interface = c.interface_changes() && table.members[c.member].pool.is_some();
        assert_eq!(interface.is_some(), has_interface);
        if let (Some(i), Some(r), Some(a)) = (interface, request, ack) {
            if c.grows() {
                assert!(i < r, "grow the interface before the tasks");
            } else {
                assert!(a < i, "shrink the interface after the tasks");
            }
        }
        if policy == SwitchPolicy::Batch && !c.grows() {
            if let (Some(a), Some(g)) = (ack, growers_started) {
                assert!(a < g, "the increases wait for every decrease");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn no_switch_overloads_a_pool_or_a_partition(table in table(), seed in any::<u64>()) {
        for (from, a) in table.modes.iter().enumerate() {
            for (p, pool) in table.pools.iter().enumerate() {
                prop_assert!(table.loads(from)[p] <= pool.capacity, "mode {} fits", a.name);
            }
            for to in 0..table.modes.len() {
                for policy in POLICIES {
                    for order in [AckOrder::Fifo, AckOrder::Lifo, AckOrder::Seeded(seed)] {
                        let replay = dry_run(&table, from, to, policy, order)
                            .map_err(|s| TestCaseError::fail(format!("{policy:?} {from}->{to}: {:?}", s.error)))?;
                        let peaks = verify(&table, from, to, &replay.steps)
                            .map_err(|v| TestCaseError::fail(format!("{policy:?} {from}->{to} {order:?}: {v:?}")))?;
                        for (p, pool) in table.pools.iter().enumerate() {
                            // Decreases first: only Greedy may go above both modes' loads.
                            let bound = table.loads(from)[p].max(table.loads(to)[p]);
                            if policy != SwitchPolicy::Greedy {
                                prop_assert!(peaks.pools[p] <= bound, "never above both modes");
                            }
                            prop_assert!(peaks.pools[p] <= pool.capacity);
                        }
                        check_order(&table, from, to, policy, &replay.steps);
                    }
                }
            }
        }
    }
}
