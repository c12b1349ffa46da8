//! The adapter from a system description to verdicts, observed through the report.

use bulkhead_analysis::system::{analyze_system, Report};
use bulkhead_analysis::text::render_text;
use serde_json::Value;

fn analyze(yaml: &str) -> Report {
    let loaded = bulkhead_model::load_str(yaml, "test.yaml").expect("valid description");
    analyze_system(&loaded.system)
}

fn example(name: &str) -> Report {
    let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    let loaded = bulkhead_model::load_file(std::path::Path::new(&path)).expect("example loads");
    analyze_system(&loaded.system)
}

fn wcrt(report: &Report, name: &str) -> Option<u64> {
    report
        .tasks
        .iter()
        .find(|t| t.name == name)
        .expect("task")
        .wcrt_ns
}

/// DriveOS (ACM TECS 2023) Table 3 on one CPU, rate monotonic: the 1 ms services
/// (with the Linux side's ADAS mapper threads K and L, which the example reserves in
/// `quest` too) run first, then the 2 ms mappers; the 1 ms tasks take 750 us of every
/// ms, so the last two 2 ms mappers are preempted by a second round of them.
#[test]
fn driveos_table3_response_times() {
    let r = example("driveos.yaml");
    assert!(r.schedulable);
    let us = 1_000;
    let expect = [
        ("usb_bh", 100),
        ("mhydra_rx", 300),
        ("long_controller", 350),
        ("aml_read", 450),
        ("aml_write", 550),
        ("mhydra_tx", 750),
        ("ivi_read_mapper", 850),
        ("ivi_write_mapper", 950),
        ("adas_read_mapper", 1800),
        ("adas_write_mapper", 1900),
    ];
    for (name, w) in expect {
        assert_eq!(wcrt(&r, name), Some(w * us), "{name}");
    }
    let q = &r.partitions[0];
    assert!(q.binding.contains("adas_write_mapper"), "{}", q.binding);
    // Sensitivity: the USB bottom half may grow to 150 us; at 151 us the 1 ms tasks take
    // 801 us of every ms and the last 2 ms mapper finishes at 400 + 2·801 = 2002 us > 2 ms.
    let usb = r.tasks.iter().find(|t| t.name == "usb_bh").unwrap();
    assert_eq!(usb.wcet_limit_ns, Some(150 * us));
    assert_eq!(r.cpus.len(), 1);
}

const MIXED: &str = r#"
system: {cpus: 0-3}
partitions:
  - name: ctrl
    kind: rt
    cpus: 0
    tasks:
      - {name: fast, cmd: x, budget: 26ms, period: 70ms}
      - {name: slow, cmd: x, budget: 62ms, period: 100ms, deadline: 200ms}
  - name: dl
    kind: rt
    cpus: 1
    scheduler: edf
    tasks:
      - {name: a, cmd: x, budget: 5ms, period: 10ms}
      - {name: b, cmd: x, budget: 4600us, period: 10ms}
  - name: multi
    kind: rt
    cpus: 2-3
    tasks:
      - {name: m1, cmd: x, budget: 6ms, period: 10ms}
      - {name: m2, cmd: x, budget: 6ms, period: 10ms}
      - {name: m3, cmd: x, budget: 6ms, period: 10ms}
"#;

#[test]
fn verdicts_name_the_binding_constraint() {
    let r = analyze(MIXED);
    assert!(!r.schedulable);
    // Lehoczky's arbitrary-deadline example in milliseconds: R = 118 ms, job q = 4.
    assert_eq!(wcrt(&r, "slow"), Some(118_000_000));
    let slow = r.tasks.iter().find(|t| t.name == "slow").unwrap();
    assert!(
        slow.schedulable && slow.binding.contains("job q=4 of 7"),
        "{}",
        slow.binding
    );
    // 96% of SCHED_DEADLINE bandwidth on CPU 1: the kernel's 95% cap refuses it.
    let cpu1 = r.cpus.iter().find(|c| c.cpu == "1").unwrap();
    assert!(
        !cpu1.schedulable && cpu1.binding.contains("cap"),
        "{}",
        cpu1.binding
    );
    assert!(r
        .tasks
        .iter()
        .filter(|t| t.partition == "dl")
        .all(|t| !t.schedulable && t.wcrt_ns.is_none()));
    // Three 60% tasks on two CPUs: one fits nowhere.
    let multi: Vec<_> = r.tasks.iter().filter(|t| t.partition == "multi").collect();
    assert_eq!(multi.iter().filter(|t| t.schedulable).count(), 2);
    let m3 = multi.iter().find(|t| !t.schedulable).unwrap();
    assert_eq!(m3.cpu, "2,3");
    assert!(m3.binding.contains("fits on none"));
    let p = r.partitions.iter().find(|p| p.name == "multi").unwrap();
    assert!(!p.schedulable && p.binding.contains("m3"));
}

#[test]
fn json_has_the_tasks_array_of_the_issue() {
    let r = analyze(MIXED);
    let doc: Value = serde_json::from_str(&r.to_json()).unwrap();
    let tasks = doc["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 7);
    for t in tasks {
        assert!(t["partition"].is_string() && t["name"].is_string() && t["cpu"].is_string());
        assert!(t["wcrt_ns"].is_u64() || t["wcrt_ns"].is_null());
        assert!(t["deadline_ns"].is_u64() && t["schedulable"].is_boolean());
    }
    let a = tasks.iter().find(|t| t["name"] == "a").unwrap();
    assert!(a["wcrt_ns"].is_null());
    assert_eq!(doc["schedulable"], Value::Bool(false));
}

#[test]
fn overload_leaves_higher_levels_bounded() {
    let r = analyze(
        r#"
partitions:
  - name: p
    kind: rt
    cpus: 0
    tasks:
      - {name: hi, cmd: x, budget: 3ms, period: 4ms}
      - {name: lo, cmd: x, budget: 2ms, period: 6ms}
"#,
    );
    assert_eq!(wcrt(&r, "hi"), Some(3_000_000));
    assert_eq!(wcrt(&r, "lo"), None);
    let text = render_text(&r, "p.yaml");
    assert!(
        text.contains("NOT SCHEDULABLE") && text.contains("unbounded"),
        "{text}"
    );
}

#[test]
fn windows_overrun_and_starvation() {
    let r = analyze(
        r#"
windows:
  - length: 100
    slices:
      - {cpu: 0, sc_partition: SC, be_partition: BE}
partitions:
  - name: SC
    processes:
      - {budget: 80, cmd: a}
      - {budget: 30, cmd: b}
  - name: BE
    processes:
      - {budget: 10, cmd: c}
"#,
    );
    assert!(!r.schedulable);
    let w = r.windows.as_ref().unwrap();
    assert_eq!(w.slices[0].demand_ns, 110_000_000);
    assert_eq!(
        w.slices[0].verdict,
        bulkhead_analysis::windows::Fit::Overruns
    );
    assert!(
        r.warnings.iter().any(|m| m.contains("`BE` is starved")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn demos_example_fits_and_gives_be_its_share() {
    let r = example("demos-window-schedule.yaml");
    assert!(r.schedulable, "{}", render_text(&r, "demos"));
    let w = r.windows.as_ref().unwrap();
    let be = w.supply.iter().find(|s| s.partition == "BE1").unwrap();
    // BE1 starts once every SC partition of the window is done: SC2 holds CPU 1 for
    // 175 ms, so BE1 gets the last 25 ms of CPU 0, exactly its budget.
    assert_eq!(be.per_frame_ns, 25_000_000);
    assert_eq!(be.max_blackout_ns, 175_000_000);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

/// SCHED_DEADLINE on two CPUs of one partition is global EDF: 130% passes the MPR demand
/// test on two CPUs; Dhall's set (two light tasks, one with C close to T) fails and the
/// binding names the heavy task.
#[test]
fn global_edf_on_a_two_cpu_partition() {
    let part = |tasks: &str| {
        format!(
            "partitions:\n  - {{name: g, kind: rt, cpus: 0-1, scheduler: edf, tasks: [{tasks}]}}\n"
        )
    };
    let ok = analyze(&part(
        "{name: a, cmd: x, budget: 6ms, period: 10ms}, {name: b, cmd: x, budget: 6ms, period: 10ms}, {name: c, cmd: x, budget: 1ms, period: 10ms}",
    ));
    assert!(ok.schedulable);
    assert!(ok
        .tasks
        .iter()
        .all(|t| t.cpu == "0,1" && t.test == "gedf-mpr" && t.wcrt_ns == Some(10_000_000)));
    assert_eq!(ok.partitions[0].interfaces[0].concurrency, 2);
    let dhall = analyze(&part(
        "{name: l1, cmd: x, budget: 2ms, period: 20ms}, {name: l2, cmd: x, budget: 2ms, period: 20ms}, {name: heavy, cmd: x, budget: 20ms, period: 21ms}",
    ));
    assert!(!dhall.schedulable);
    assert!(
        dhall.partitions[0].binding.contains("`heavy`"),
        "{}",
        dhall.partitions[0].binding
    );
}

/// Equal deadlines: the shorter period gets the higher priority (the order the runtime
/// gives SCHED_FIFO levels), whatever the declaration order.
#[test]
fn equal_deadlines_break_ties_by_period() {
    let r = analyze(
        r#"
partitions:
  - name: p
    kind: rt
    cpus: 0
    tasks:
      - {name: long, cmd: x, budget: 2ms, period: 20ms, deadline: 5ms}
      - {name: short, cmd: x, budget: 2ms, period: 10ms, deadline: 5ms}
"#,
    );
    let prio = |n: &str| r.tasks.iter().find(|t| t.name == n).unwrap().priority;
    assert_eq!((prio("short"), prio("long")), (Some(1), Some(2)));
    assert_eq!(wcrt(&r, "long"), Some(4_000_000));
}

/// A window slice on `cpu: all` with no `system.cpus` is not a CPU named "all".
#[test]
fn a_slice_on_all_cpus_is_not_printed_as_a_cpu_named_all() {
    let r = analyze(
        "windows:\n  - {length: 20ms, slices: [{cpu: all, sc_partition: ivi}]}\npartitions:\n  - name: ivi\n    processes: [{cmd: x, budget: 5ms}]\n",
    );
    let text = render_text(&r, "w.yaml");
    assert!(!text.contains("CPU all"), "{text}");
    assert!(
        text.contains("  all CPUs (as one: system.cpus not set): SC windows 25.0%: ok"),
        "{text}"
    );
}

/// One rt partition on CPU 0 of `n` tasks of 10 µs every 10 ms (U = n / 1000) under
/// `scheduler`.
fn many(scheduler: &str, n: usize) -> String {
    let tasks: String = (0..n)
        .map(|i| format!("      - {{name: t{i}, budget: 10us, period: 10ms}}\n"))
        .collect();
    format!("partitions:\n  - name: p\n    kind: rt\n    cpus: 0\n    scheduler: {scheduler}\n    tasks:\n{tasks}")
}

/// C max is searched for on at most SENSITIVITY_MAX_TASKS tasks per CPU: below, every
/// fixed-priority task has one; above, none has (the search would grow as n³) and a
/// warning says so, while the WCRTs are still all there. EDF tasks above the limit still
/// get theirs when one demand test at the admission cap settles it (here: 90% of 10 ms,
/// the kernel's 95% less its fair server's 5%, less the others' share), without a warning. `sensitivity: false` (what `run` asks
/// for) computes none.
#[test]
fn c_max_is_searched_for_on_at_most_a_hundred_tasks_per_cpu() {
    use bulkhead_analysis::system::{analyze_system_with, Options, SENSITIVITY_MAX_TASKS};
    let k = SENSITIVITY_MAX_TASKS;
    assert_eq!(k, 100);
    let limits = |r: &Report| r.tasks.iter().filter(|t| t.wcet_limit_ns.is_some()).count();
    let fp_at = analyze(&many("fixed-priority", k));
    assert_eq!(limits(&fp_at), k);
    assert!(fp_at.warnings.is_empty(), "{:?}", fp_at.warnings);
    let fp_above = analyze(&many("fixed-priority", k + 1));
    assert_eq!(limits(&fp_above), 0);
    assert!(fp_above.tasks.iter().all(|t| t.wcrt_ns.is_some()));
    assert_eq!(
        fp_above.warnings,
        [format!(
            "C max (sensitivity) is not computed for {0} of the {0} tasks of partition `p` on CPU 0: \
             its exact search is run on at most {k} tasks per CPU",
            k + 1
        )]
    );
    let edf_above = analyze(&many("edf", k + 1));
    assert!(edf_above.warnings.is_empty(), "{:?}", edf_above.warnings);
    // Room under the cap in the kernel's fixed point (1 << 20 = one CPU): the cap is
    // 996147 less the fair server's 52428 (5%), 943719; each other task takes
    // 10us/10ms·2^20 rounded down = 1048, so 838919 are left, which is a runtime of
    // (838919 + 1)·10 ms / 2^20, 8.000564 ms.
    assert_eq!(edf_above.tasks[0].wcet_limit_ns, Some(8_000_564));
    let loaded = bulkhead_model::load_str(&many("fixed-priority", 3), "t.yaml").unwrap();
    let options = Options {
        sensitivity: false,
        ..Options::default()
    };
    let quick = analyze_system_with(&loaded.system, &options);
    assert_eq!(limits(&quick), 0);
    assert!(quick.warnings.is_empty(), "{:?}", quick.warnings);
}
