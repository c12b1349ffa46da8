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

/// Core 1 with the load declaring its longest non-preemptible section: `section`.
fn core1_with_section(section: &str) -> bulkhead_model::System {
    let yaml = format!(
        "partitions:
  - name: linux-rt
    kind: rt
    cpus: 1
    exclusive: false
    scheduler: edf
    tasks: [{{name: procdata, cmd: p, budget: 200us, period: 2ms}}]
  - {{name: load, kind: be, cpus: 1, nonpreemptible: {section}, processes: [wget]}}
"
    );
    bulkhead_model::load_str(&yaml, "core1.yaml")
        .unwrap()
        .system
}

/// Every ProcData job is released onto a CPU where only the load ran, so each waits
/// for the load's 500 µs section before its 200 µs: 700 µs, where it took 200 µs alone
/// (the test above). The section stays the load's time.
#[test]
fn a_job_released_onto_the_be_work_waits_for_its_nonpreemptible_section() {
    let report = run(&core1_with_section("500us"));
    let procdata = &report.tasks[0];
    assert_eq!((procdata.jobs, procdata.misses), (500, 0));
    assert_eq!(procdata.max_response_ns, 700_000);
    assert_eq!(run(&core1(false)).tasks[0].max_response_ns, 200_000);
    assert_eq!(cpu_ns(&report, "load"), 900 * MS);
}

/// `analyze` (EDF: QPA with the section as a job of length B, George, Rivierre & Spuri)
/// and `sim` agree on the section: 1 ms leaves ProcData on time, with a response within
/// the bound; 1.9 ms, with the 200 µs job, exceeds the 2 ms deadline in both.
#[test]
fn the_simulated_section_agrees_with_the_analysis() {
    for (section, late) in [("1ms", false), ("1900us", true)] {
        let system = core1_with_section(section);
        let report = run(&system);
        let misses = report.tasks[0].misses;
        assert_eq!(misses > 0, late, "section {section}: {misses} misses");
        let wcrt = bulkhead_analysis::analyze_system(&system).tasks[0].wcrt_ns;
        match wcrt {
            Some(w) => assert!(
                !late && report.tasks[0].max_response_ns <= w,
                "{section}: {w}"
            ),
            None => assert!(late, "{section}: analyze refuses what sim meets"),
        }
    }
}
