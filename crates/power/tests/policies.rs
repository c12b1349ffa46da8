//! Each DEmOS power policy driven by the window machine: which frequency each cluster
//! gets at which window and slice boundary. The descriptions are DEmOS's own
//! `test_config/*_power_policy*.yaml`; the clusters imitate the i.MX8 of the thesis
//! (section 5.4, and DEmOS `power_manager.hpp`): four A53 CPUs at 0.6, 0.896, 1.104 and
//! 1.2 GHz, two A72 CPUs from 0.6 up to 1.5 GHz.

use bulkhead_model::CpuSet;
use bulkhead_power::{Change, Cluster, Governor, Policy, PowerError};
use bulkhead_windows::{Config, Event, Machine, Schedule};

const MS: u64 = 1_000_000;

fn imx8() -> Vec<Cluster> {
    let cluster = |name: &str, cpus: &str, list: Vec<u64>| Cluster {
        name: name.into(),
        cpus: CpuSet::parse(cpus).unwrap(),
        min_khz: list[0],
        max_khz: *list.last().unwrap(),
        available_khz: Some(list),
    };
    vec![
        cluster(
            "policy0",
            "0-3",
            vec![600_000, 896_000, 1_104_000, 1_200_000],
        ),
        cluster(
            "policy4",
            "4-5",
            vec![600_000, 1_056_000, 1_296_000, 1_500_000],
        ),
    ]
}

fn schedule(yaml: &str) -> Schedule {
    let system = bulkhead_model::load_str(yaml, "t.yaml").unwrap().system;
    Schedule::from_system(&system, &CpuSet::parse("0-5").unwrap()).unwrap()
}

/// Runs the schedule (every process busy) until `until_ms` and returns the changes as
/// `(ms, cluster, MHz)`.
fn run(policy: &str, yaml: &str, until_ms: u64) -> Result<Vec<(u64, usize, u64)>, String> {
    let schedule = schedule(yaml);
    let mut governor = Governor::new(
        Policy::parse(policy).map_err(|e| e.to_string())?,
        imx8(),
        &schedule,
    )
    .map_err(|e| e.to_string())?;
    let mut changes: Vec<Change> = Vec::new();
    governor.start(&mut changes).map_err(|e| e.to_string())?;
    let mut machine = Machine::new(
        schedule.clone(),
        Config {
            seed: 0,
            stop_at: Some(until_ms * MS),
            ..Config::default()
        },
    );
    let mut actions = Vec::new();
    machine.start(&mut actions);
    loop {
        for action in actions.drain(..) {
            governor
                .on_action(&schedule, &action, &mut changes)
                .map_err(|e| e.to_string())?;
        }
        let Some(t) = machine.next_timer() else { break };
        machine.handle(Event::Timer { t }, &mut actions);
    }
    Ok(changes
        .iter()
        .map(|c| (c.t / MS, c.cluster, c.khz / 1000))
        .collect())
}

const PER_PROCESS2: &str = "
partitions:
  - name: SC1
    processes:
      - cmd: echo proc0; sleep 3600
        budget: 500
        frequency: 1200
  - name: BE
    processes:
      - cmd: echo proc1; sleep 3600
        budget: 1000
        frequency: 600
      - cmd: echo proc2; sleep 3600
        budget: 1000
        frequency: 1296
windows:
  - length: 1500
    slices:
      - cpu: 0
        sc_partition: SC1
      - cpu: 4
        be_partition: BE
  - length: 1500
    slices:
      - cpu: 4
        be_partition: BE
";

const PER_SLICE: &str = "
partitions:
  - name: SC1
    processes:
      - cmd: echo proc0; sleep 3600
        budget: 500
  - name: BE
    processes:
      - cmd: echo proc1; sleep 3600
        budget: 1000
      - cmd: echo proc2; sleep 3600
        budget: 1000
windows:
  - length: 1500
    slices:
      - cpu: 0
        sc_partition: SC1
        frequency: 1200
      - cpu: 4
        be_partition: BE
        frequency: 600
  - length: 1500
    slices:
      - cpu: 0
        frequency: 896
      - cpu: 4
        be_partition: BE
        frequency: 1296
";

const SC_BE: &str = "windows: [{length: 10, cpu: 0, sc_processes: [{cmd: sc, budget: 4}], be_processes: [{cmd: be, budget: 10}]}]";

#[test]
fn minbe_runs_sc_at_the_top_and_be_at_the_bottom() {
    // Thesis 4.8, Fig. 7: max at the start and at each SC start, min at each BE start.
    let changes = run("minbe", SC_BE, 20).unwrap();
    assert_eq!(
        changes,
        [
            (0, 0, 1200),
            (0, 1, 1500),
            (4, 0, 600),
            (4, 1, 600),
            (10, 0, 1200),
            (10, 1, 1500),
            (14, 0, 600),
            (14, 1, 600),
            (20, 0, 1200),
            (20, 1, 1500),
        ]
    );
}

#[test]
fn high_and_low_set_once() {
    assert_eq!(
        run("high", SC_BE, 30).unwrap(),
        [(0, 0, 1200), (0, 1, 1500)]
    );
    assert_eq!(run("low", SC_BE, 30).unwrap(), [(0, 0, 600), (0, 1, 600)]);
    assert_eq!(run("none", PER_SLICE, 30).unwrap(), []);
}

#[test]
fn per_process_uses_the_frequencies_of_a_demos_config() {
    // Window 0: proc0 (1200 MHz) on CPU 0 from 0; proc1 (600 MHz) on CPU 4 once SC1 is
    // done at 500 ms. Window 1 (1500 ms): proc2 (1296 MHz) on CPU 4 for its 1000 ms, then
    // proc1 (round robin) at 2500 ms until the window ends with 500 ms of its budget
    // left. Window 0 again at 3000 ms: CPU 0's cluster is still at 1200; proc1 finishes
    // its leftover from 3500 ms (still 600: no write), proc2 follows at 4000 ms.
    let changes = run("per_process", PER_PROCESS2, 4000).unwrap();
    assert_eq!(
        changes,
        [
            (0, 0, 1200),
            (500, 1, 600),
            (1500, 1, 1296),
            (2500, 1, 600),
            (4000, 1, 1296)
        ]
    );
    assert_eq!(
        run("imx8_per_process", PER_PROCESS2, 4000).unwrap(),
        changes
    );
}

#[test]
fn per_slice_sets_each_window_s_slice_frequencies() {
    let changes = run("imx8_per_slice", PER_SLICE, 3000).unwrap();
    assert_eq!(
        changes,
        [
            (0, 0, 1200),
            (0, 1, 600),
            (1500, 0, 896),
            (1500, 1, 1296),
            (3000, 0, 1200),
            (3000, 1, 600),
        ]
    );
}

#[test]
fn fixed_and_alternating_index_each_cluster_s_frequencies() {
    assert_eq!(
        run("imx8_fixed:1,2", SC_BE, 30).unwrap(),
        [(0, 0, 896), (0, 1, 1296)]
    );
    // Cluster 1's pair is equal: fixed from the start; cluster 0 alternates per window.
    assert_eq!(
        run("imx8_alternating:0,3,1,1", SC_BE, 20).unwrap(),
        [(0, 1, 1056), (0, 0, 600), (10, 0, 1200), (20, 0, 600)]
    );
    let e = run("fixed:1", SC_BE, 10).unwrap_err();
    assert!(
        e.contains("frequencies for 1 clusters, this machine has 2"),
        "{e}"
    );
    let e = run("fixed:1,4", SC_BE, 10).unwrap_err();
    assert!(
        e.contains("policy4 has 4 frequencies") && e.contains("index 4"),
        "{e}"
    );
}

#[test]
fn frequencies_a_cluster_does_not_offer_are_refused_before_the_start() {
    let yaml = "windows: [{length: 10, slices: [{cpu: 1, frequency: 700, sc_processes: [{cmd: a, budget: 4, frequency: 650}]}]}]";
    let e = run("per_process", yaml, 10).unwrap_err();
    assert!(
        e.contains("process `a`") && e.contains("650000 kHz") && e.contains("policy0"),
        "{e}"
    );
    let e = run("per_slice", yaml, 10).unwrap_err();
    assert!(e.contains("slice 0 of window 0 asks for 700000 kHz"), "{e}");
    // Other policies ignore the keys (and say so).
    let schedule = schedule(yaml);
    let g = Governor::new(Policy::High, imx8(), &schedule).unwrap();
    assert!(g
        .unused_frequencies(&schedule)
        .unwrap()
        .contains("per_process"));
}

#[test]
fn processes_asking_for_different_frequencies_on_one_cluster_stop_the_run() {
    let yaml = "windows: [{length: 10, slices: [{cpu: 0, sc_processes: [{cmd: a, budget: 4, frequency: 600}]}, {cpu: 1, sc_processes: [{cmd: b, budget: 4, frequency: 1200}]}]}]";
    let e = run("per_process", yaml, 10).unwrap_err();
    assert!(
        e.contains("different frequencies on the CPUs 0-3 of cluster policy0")
            && e.contains("`a`")
            && e.contains("`b`"),
        "{e}"
    );
}

#[test]
fn intel_pstate_clusters_take_any_frequency_in_range() {
    let cluster = Cluster {
        name: "policy0".into(),
        cpus: CpuSet::parse("0-5").unwrap(),
        min_khz: 400_000,
        max_khz: 3_000_000,
        available_khz: None,
    };
    assert!(cluster.offers(1_234_000) && !cluster.offers(3_100_000));
    let e = cluster.frequency_at(0).unwrap_err();
    assert!(matches!(e, PowerError::NoFrequencyList { .. }), "{e}");
    assert!(e.to_string().contains("intel_pstate"), "{e}");
}
