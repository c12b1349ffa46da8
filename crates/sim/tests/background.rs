//! Best-effort partitions in the background of a non-exclusive rt partition's tasks
//! (bulkhead_sim::background): Boomerang IV-A's Core 1, ProcData (tau4: 0.2 ms every
//! 2 ms, Table I) beside the load (a CPU burner, and a logger given 20% of the CPU as
//! the paper's periodic 20% task).

use bulkhead_sim::*;

const MS: u64 = 1_000_000;

fn core1(logger: bool) -> bulkhead_model::System {
    let mut yaml = "partitions:
  - name: linux-rt
    kind: rt
    cpus: 1
    exclusive: false
    scheduler: edf
    tasks: [{name: procdata, cmd: p, budget: 200us, period: 2ms}]
  - {name: load, kind: be, cpus: 1, processes: [wget]}
"
    .to_string();
    if logger {
        yaml += "  - {name: logger, kind: be, cpus: 1, cpu: 20%, processes: [log]}\n";
    }
    bulkhead_model::load_str(&yaml, "core1.yaml")
        .unwrap()
        .system
}

fn run(system: &bulkhead_model::System) -> Report {
    let spec = from_system(system, &BuildOptions::default()).unwrap();
    simulate(
        &spec,
        Options::until(1000 * MS),
        &mut bulkhead_trace::Discard,
    )
    .unwrap()
}

fn cpu_ns(report: &Report, partition: &str) -> u64 {
    let b = report.background.iter().find(|b| b.partition == partition);
    b.expect("a background partition").cpu_ns
}

/// ProcData takes 100 ms of CPU 1's second; the load gets the other 900 ms.
#[test]
fn the_rt_jobs_time_is_taken_from_the_background() {
    let report = run(&core1(false));
    assert_eq!((report.tasks[0].jobs, report.tasks[0].misses), (500, 0));
    assert_eq!(cpu_ns(&report, "load"), 900 * MS);
}

/// The logger is held to its 20%; the load takes what it leaves.
#[test]
fn a_partition_with_a_cpu_bandwidth_gets_at_most_its_share() {
    let report = run(&core1(true));
    assert_eq!((report.tasks[0].jobs, report.tasks[0].misses), (500, 0));
    assert_eq!(cpu_ns(&report, "logger"), 200 * MS);
    assert_eq!(cpu_ns(&report, "load"), 700 * MS);
    let logger = report
        .background
        .iter()
        .find(|b| b.partition == "logger")
        .unwrap();
    assert!((logger.share_of_one_cpu - 0.2).abs() < 1e-9);
}

#[test]
fn be_partitions_beside_an_exclusive_rt_partition_are_no_background() {
    let yaml = "partitions:\n  - {name: r, kind: rt, cpus: 1, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}\n  - {name: b, kind: be, cpus: 0, processes: [y]}\n";
    let system = bulkhead_model::load_str(yaml, "t.yaml").unwrap().system;
    assert!(run(&system).background.is_empty());
}
