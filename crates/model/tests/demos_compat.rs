//! Every DEmOS configuration form (DEmOS thesis, Appendix 2; DEmOS `config.cpp`)
//! loads into the same model as its canonical form; what DEmOS wrongly accepts is
//! rejected with a positioned message.

use bulkhead_model::{load_str, CpuSet, Cpus, Diagnostic, System};

const MS: u64 = 1_000_000;

fn load(src: &str) -> System {
    match load_str(src, "t.yaml") {
        Ok(l) => l.system,
        Err(e) => panic!("rejected: {e}"),
    }
}

fn fails(src: &str) -> Diagnostic {
    load_str(src, "t.yaml").expect_err("accepted an invalid description")
}

#[test]
fn thesis_canonical_example_loads() {
    let s = load(
        "set_cwd: yes\npartitions:\n  - name: SC1\n    processes:\n      - cmd: ./safety_critical_application\n        budget: 300\n        init: yes\n  - name: BE1\n    processes:\n      - cmd: ./best_effort_application1\n        budget: 200\n  - name: BE2\n    processes:\n      - cmd: ./best_effort_application2\n        budget: 200\n      - cmd: ./best_effort_application3\n        budget: 200\nwindows:\n  - length: 500\n    slices:\n      - cpu: 1\n        sc_partition: SC1\n        be_partition: BE1\n      - cpu: 2,5-7\n        be_partition: BE2\n",
    );
    assert!(s.set_cwd);
    assert_eq!(s.partitions.len(), 3);
    assert_eq!(s.partitions[0].processes[0].budget, 300 * MS);
    assert!(s.partitions[0].processes[0].init);
    assert_eq!(s.windows[0].length, 500 * MS);
    assert_eq!(
        s.windows[0].slices[1].cpus,
        Cpus::Set(CpuSet::parse("2,5-7").unwrap())
    );
    assert_eq!(s.windows[0].slices[1].be_partition.as_deref(), Some("BE2"));
}

#[test]
fn window_level_slice_equals_one_slice_on_all_cpus() {
    let simplified = load("{partitions: [{name: SC, processes: [{cmd: echo, budget: 100}]}], windows: [{length: 500, sc_partition: SC}]}");
    let canonical = load("partitions:\n  - name: SC\n    processes: [{cmd: echo, budget: 100}]\nwindows:\n  - length: 500\n    slices: [{cpu: all, sc_partition: SC}]\n");
    assert_eq!(simplified, canonical);
}

#[test]
fn window_level_cpu_is_kept() {
    let s = load("windows: [{length: 10, cpu: 1, be_processes: [a]}]");
    assert_eq!(
        s.windows[0].slices[0].cpus,
        Cpus::Set(CpuSet::parse("1").unwrap())
    );
}

#[test]
fn inline_partition_as_list_is_anonymous() {
    let simplified = load("windows: [ {length: 500, sc_partition: [{cmd: proc1, budget: 500}] } ]");
    let canonical = load("partitions:\n  - name: anonymous_0\n    processes: [{cmd: proc1, budget: 500}]\nwindows:\n  - length: 500\n    slices: [{cpu: all, sc_partition: anonymous_0}]\n");
    assert_eq!(simplified, canonical);
}

#[test]
fn inline_partition_as_single_process_map() {
    let s = load("windows: [{length: 100, sc_partition: {cmd: proc1}}, {length: 100, be_partition: {name: B, cmd: proc2, budget: 7}}]");
    assert_eq!(s.partitions[0].name, "anonymous_0");
    assert_eq!(
        s.partitions[0].processes[0].budget,
        60 * MS,
        "SC default budget is 0.6 * length"
    );
    assert_eq!(s.partitions[1].name, "B");
    assert_eq!(s.partitions[1].processes[0].budget, 7 * MS);
}

#[test]
fn default_budgets_split_the_window() {
    let s = load("windows: [{length: 500, sc_processes: [proc1, proc2], be_processes: [{cmd: a}, b, c, {cmd: d, budget: 1}]}]");
    let sc = &s.partitions[0];
    assert_eq!(
        sc.processes.iter().map(|p| p.budget).collect::<Vec<_>>(),
        [150 * MS, 150 * MS]
    );
    let be = &s.partitions[1];
    assert_eq!(
        be.processes.iter().map(|p| p.budget).collect::<Vec<_>>(),
        [125 * MS, 125 * MS, 125 * MS, MS]
    );
    assert_eq!(
        s.windows[0].slices[0].sc_partition.as_deref(),
        Some("anonymous_0")
    );
    assert_eq!(
        s.windows[0].slices[0].be_partition.as_deref(),
        Some("anonymous_1")
    );
}

#[test]
fn default_budgets_are_exact_in_nanoseconds() {
    // DEmOS truncates 0.6 * 1 ms / 1 to 0 ms and then rejects it; bulkhead gives 600 us.
    let s =
        load("windows: [{length: 1, sc_processes: [p]}, {length: 10, sc_processes: [a, b, c]}]");
    assert_eq!(s.partitions[0].processes[0].budget, 600_000);
    assert_eq!(s.partitions[1].processes[0].budget, 2_000_000);
}

#[test]
fn anonymous_names_count_across_the_whole_file() {
    let s = load("partitions: [[{cmd: x, budget: 1}]]\nwindows: [{length: 5, sc_processes: [a]}, {length: 5, slices: [{cpu: 0, sc_processes: [b]}, {cpu: 1, be_partition: [c]}]}]");
    let names: Vec<_> = s.partitions.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["anonymous_0", "anonymous_1", "anonymous_2", "anonymous_3"]
    );
}

#[test]
fn idle_window_has_no_slices() {
    let s = load("windows: [{length: 10}, {length: 5, sc_processes: [a]}]");
    assert!(s.windows[0].slices.is_empty());
    assert_eq!(s.major_frame(), 15 * MS);
}

#[test]
fn set_cwd_and_demos_cpu() {
    let s = load("set_cwd: no\ndemos_cpu: 0\nwindows: [{length: 5, sc_processes: [a]}]");
    assert!(!s.set_cwd);
    assert_eq!(s.supervisor_cpus, Some(CpuSet::parse("0").unwrap()));
    assert!(
        load("windows: [{length: 5, sc_processes: [a]}]").set_cwd,
        "set_cwd defaults to true"
    );
}

#[test]
fn demos_cpu_all_pins_nothing() {
    let s = load("demos_cpu: all\nwindows: [{length: 5, sc_processes: [a]}]");
    assert_eq!(s.supervisor_cpus, None);
}

#[test]
fn a_scalar_of_another_type_is_a_command() {
    // DEmOS reads every scalar where a process is expected as its command.
    let s = load("windows: [{length: 100, sc_partition: [ true ]}, {length: 5, sc_processes: 42}]");
    assert_eq!(s.partitions[0].processes[0].cmd, "true");
    assert_eq!(s.partitions[1].processes[0].cmd, "42");
}

#[test]
fn jitter_may_reach_twice_the_budget() {
    let s = load("windows: [{length: 50, sc_processes: [{cmd: a, budget: 10, jitter: 20}]}]");
    assert_eq!(s.partitions[0].processes[0].jitter, 20 * MS);
    let e = fails("windows: [{length: 50, sc_processes: [{cmd: a, budget: 10, jitter: 21}]}]");
    assert_eq!(e.path, "windows[0].sc_processes[0].jitter");
}

#[test]
fn sc_budgets_beyond_the_window_warn_but_load() {
    let loaded = load_str(
        "windows: [{length: 10, sc_processes: [{cmd: a, budget: 8}, {cmd: b, budget: 8}]}]",
        "t.yaml",
    )
    .unwrap();
    assert_eq!(loaded.warnings.len(), 1);
    assert!(
        loaded.warnings[0].message.contains("cannot all complete"),
        "{}",
        loaded.warnings[0]
    );
    assert_eq!(loaded.warnings[0].path, "windows[0]");
}

#[test]
fn rejects_duplicate_partition_names() {
    let e = fails("partitions:\n  - {name: A, processes: [{cmd: a, budget: 1}]}\n  - {name: A, processes: [{cmd: b, budget: 1}]}\n");
    assert_eq!((e.line, e.column, e.path.as_str()), (3, 5, "partitions[1]"));
    assert!(e.message.contains("duplicate partition name `A`"), "{e}");
}

#[test]
fn rejects_a_partition_in_two_slices_of_one_window() {
    let e = fails("partitions: [{name: A, processes: [{cmd: a, budget: 1}]}]\nwindows: [{length: 5, slices: [{cpu: 0, sc_partition: A}, {cpu: 1, be_partition: A}]}]");
    assert_eq!(e.path, "windows[0].slices[1]");
    assert!(e.message.contains("appears twice"), "{e}");
}

#[test]
fn rejects_non_positive_window_lengths() {
    assert_eq!(
        fails("windows: [{length: 0, sc_processes: [a]}]").message,
        "must be a positive duration"
    );
    assert!(fails("windows: [{length: -5, sc_processes: [a]}]")
        .message
        .contains("negative"));
}

#[test]
fn rejects_an_empty_windows_list() {
    assert_eq!(fails("windows: []").path, "windows");
}

#[test]
fn rejects_empty_commands() {
    assert_eq!(
        fails("windows: [{length: 5, sc_processes: ['']}]").path,
        "windows[0].sc_processes[0].cmd"
    );
    assert_eq!(
        fails("windows: [{length: 5, sc_processes: [{cmd: '  '}]}]").path,
        "windows[0].sc_processes[0].cmd"
    );
}

#[test]
fn rejects_non_lists_where_lists_are_required() {
    assert_eq!(
        fails("partitions: {name: A}").message,
        "expected a list, found a mapping"
    );
    // Processes are the exception: one process alone is a list of one (DEmOS's
    // normalize_processes), see one_process_may_be_given_without_a_list.
    assert_eq!(
        fails("partitions: [{name: A, processes: [[a]]}]").path,
        "partitions[0].processes[0]"
    );
    assert_eq!(fails("windows: {length: 5}").path, "windows");
    assert_eq!(
        fails("windows: [{length: 5, slices: {cpu: 0}}]").path,
        "windows[0].slices"
    );
}

/// DEmOS `test_config/per_process_power_policy2.yaml` and `per_slice_power_policy.yaml`:
/// `frequency` in MHz on processes and slices (DEmOS `config.cpp`, `1000 * 1000 * f` Hz).
#[test]
fn frequency_keys_of_processes_and_slices_in_khz() {
    let s = load("partitions:\n  - name: SC1\n    processes:\n      - cmd: echo proc0\n        budget: 500\n        frequency: 1200\n  - name: BE\n    processes:\n      - {cmd: echo proc1, budget: 1000, frequency: 345.6}\n      - {cmd: echo proc2, budget: 1000}\nwindows:\n  - length: 1500\n    slices:\n      - {cpu: 0, sc_partition: SC1, frequency: 1200}\n      - {cpu: 4, be_partition: BE, frequency: 600}\n  - length: 1500\n    slices:\n      - {cpu: 0, frequency: 896}\n");
    let khz = |p: usize, q: usize| s.partitions[p].processes[q].frequency_khz;
    assert_eq!(
        (khz(0, 0), khz(1, 0), khz(1, 1)),
        (Some(1_200_000), Some(345_600), None)
    );
    let slices: Vec<_> = s
        .windows
        .iter()
        .flat_map(|w| &w.slices)
        .map(|s| s.frequency_khz)
        .collect();
    assert_eq!(slices, [Some(1_200_000), Some(600_000), Some(896_000)]);
    let canonical = bulkhead_model::to_canonical_yaml(&s);
    assert!(canonical.contains("frequency: 345.6"), "{canonical}");
    assert_eq!(load(&canonical), s);
}

#[test]
fn bad_frequencies_are_rejected_with_their_key() {
    for bad in ["0", "-600", ".nan", "x"] {
        let e = fails(&format!(
            "windows: [{{length: 50, slices: [{{cpu: 0, frequency: {bad}, sc_processes: [{{cmd: a, budget: 10}}]}}]}}]"
        ));
        assert!(e.to_string().contains("frequency"), "{bad}: {e}");
    }
    let e =
        fails("windows: [{length: 50, sc_processes: [{cmd: a, budget: 10, frequency: 0.0001}]}]");
    assert!(
        e.to_string()
            .contains("windows[0].sc_processes[0].frequency"),
        "{e}"
    );
}

/// DEmOS's `normalize_processes` takes a list, or one process alone (a command or a
/// mapping), wherever processes are given: partitions, windows and slices.
#[test]
fn one_process_may_be_given_without_a_list() {
    let single = load(
        "partitions:\n  - {name: p, processes: ./e}\nwindows:\n  - length: 10\n    sc_processes: {cmd: ./a, budget: 5}\n    be_processes: ./b\n  - length: 10\n    slices: [{cpu: 0, sc_processes: ./d, be_processes: ./c}]\n",
    );
    let listed = load(
        "partitions:\n  - {name: p, processes: [./e]}\nwindows:\n  - length: 10\n    sc_processes: [{cmd: ./a, budget: 5}]\n    be_processes: [./b]\n  - length: 10\n    slices: [{cpu: 0, sc_processes: [./d], be_processes: [./c]}]\n",
    );
    assert_eq!(single, listed);
    assert_eq!(single.partitions[0].processes[0].cmd, "./e");
}

#[test]
fn sets_key_tells_a_key_written_from_a_default() {
    assert!(bulkhead_model::sets_key("set_cwd: yes", "set_cwd"));
    assert!(bulkhead_model::sets_key("{set_cwd: false}", "set_cwd"));
    assert!(!bulkhead_model::sets_key("{}", "set_cwd"));
    assert!(!bulkhead_model::sets_key("[set_cwd]", "set_cwd"));
    assert!(!bulkhead_model::sets_key("{a: {set_cwd: 1}}", "set_cwd"));
}
