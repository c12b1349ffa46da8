//! rt partitions that share their CPUs with best-effort partitions (`exclusive: false`):
//! Boomerang IV-A's ProcData (tau4: 0.2 ms every 2 ms, Table I) on Core 1 beside the
//! background load, as SCHED_DEADLINE and as SCHED_FIFO (crate::shared).

use bulkhead_analysis::shared::{FairServer, Sharing};
use bulkhead_analysis::system::{analyze_system, analyze_system_with, Options, Report};
use bulkhead_analysis::text::render_text;

fn analyze(yaml: &str) -> Report {
    let loaded = bulkhead_model::load_str(yaml, "test.yaml").expect("valid description");
    analyze_system(&loaded.system)
}

fn procdata(scheduler: &str, exclusive: bool, load: bool) -> String {
    let mut yaml = format!(
        "partitions:
  - name: linux-rt
    kind: rt
    cpus: 1
    exclusive: {exclusive}
    scheduler: {scheduler}
    tasks: [{{name: procdata, cmd: p, budget: 200us, period: 2ms}}]
"
    );
    if load {
        yaml += "  - {name: load, kind: be, cpus: 1, cpu: 47%, processes: [wget, cp]}\n";
    }
    yaml
}

const MS: u64 = 1_000_000;

#[test]
fn be_work_beside_sched_deadline_changes_no_verdict_and_is_reported() {
    let alone = analyze(&procdata("edf", true, false));
    let shared = analyze(&procdata("edf", false, true));
    assert!(alone.schedulable && shared.schedulable);
    assert_eq!(alone.tasks[0].wcrt_ns, shared.tasks[0].wcrt_ns);
    assert_eq!(alone.cpus[0].best_effort, None);
    let note = shared.cpus[0]
        .best_effort
        .as_deref()
        .expect("a note on CPU 1");
    assert!(note.contains("`load`"), "{note}");
    assert!(
        note.contains("deducted from the SCHED_DEADLINE admission"),
        "{note}"
    );
    assert!(note.contains("bulkhead probe"), "{note}");
    let text = render_text(&shared, "test.yaml");
    assert!(
        text.contains("shared with best-effort partition(s) `load`"),
        "{text}"
    );
}

/// Under SCHED_FIFO the fair server (50 ms every 1 s) runs the be work above the task,
/// and a non-preemptible section (the default 1 ms) blocks it once: ProcData's response
/// time grows by 51 ms and misses its 2 ms deadline.
#[test]
fn the_fair_server_interferes_with_sched_fifo_beside_be_work() {
    let alone = analyze(&procdata("fixed-priority", false, false));
    assert_eq!(alone.tasks[0].wcrt_ns, Some(MS / 5));
    assert!(alone.schedulable);
    let shared = analyze(&procdata("fixed-priority", false, true));
    assert_eq!(shared.tasks[0].wcrt_ns, Some(51 * MS + MS / 5));
    assert!(!shared.schedulable);
    let note = shared.cpus[0]
        .best_effort
        .as_deref()
        .expect("a note on CPU 1");
    assert!(
        note.contains("above SCHED_FIFO for 50 ms every 1000 ms (the kernel's default)"),
        "{note}"
    );
    assert!(
        note.contains("blocks each job once for up to 1 ms (the default"),
        "{note}"
    );
}

fn sharing(fifo: bool, cap: (u64, u64)) -> Sharing {
    Sharing {
        partitions: vec!["load".into()],
        fair_server: FairServer::default(),
        rt_throttle_ns: ((cap.1 - cap.0) * 1_000, cap.1 * 1_000),
        nonpreemptible_ns: MS,
        nonpreemptible_declared: false,
        fifo,
    }
}

/// SCHED_FIFO: one fair-server runtime per started second of deadline, or RT throttling's
/// if that is larger, plus the non-preemptible section; SCHED_DEADLINE: the section only.
#[test]
fn the_blocking_counts_one_server_period_per_second_of_deadline() {
    let fifo = sharing(true, (950_000, 1_000_000));
    assert_eq!(fifo.blocking(2 * MS), 51 * MS);
    assert_eq!(fifo.blocking(1000 * MS), 51 * MS);
    assert_eq!(fifo.blocking(1001 * MS), 101 * MS);
    // A cap of 90% holds FIFO tasks 100 ms a second: more than the fair server.
    assert_eq!(
        sharing(true, (900_000, 1_000_000)).blocking(2 * MS),
        101 * MS
    );
    // No throttling (sched_rt_runtime_us = -1): the fair server alone.
    assert_eq!(
        sharing(true, (1_000_000, 1_000_000)).blocking(2 * MS),
        51 * MS
    );
    assert_eq!(sharing(false, (900_000, 1_000_000)).blocking(2 * MS), MS);
}

/// The fair server read from the machine: the largest of the CPUs' servers, analysed
/// for every shared CPU; the defaults when none could be read.
#[test]
fn the_fair_server_read_from_the_machine_replaces_the_default() {
    assert_eq!(FairServer::read([]), FairServer::default());
    let read = FairServer::read([(50 * MS, 1000 * MS), (30 * MS, 100 * MS), (MS, 0)]);
    assert_eq!(
        (read.runtime_ns, read.period_ns, read.read),
        (30 * MS, 100 * MS, true)
    );
    let options = Options {
        fair_server: read,
        ..Options::default()
    };
    let loaded = bulkhead_model::load_str(
        &procdata("fixed-priority", false, true).replace("period: 2ms", "period: 500ms"),
        "t.yaml",
    )
    .expect("valid");
    let report = analyze_system_with(&loaded.system, &options);
    // ceil(500 ms / 100 ms) * 30 ms = 150 ms, above throttling's 50 ms, plus 1 ms.
    assert_eq!(report.tasks[0].wcrt_ns, Some(151 * MS + MS / 5));
    let note = report.cpus[0].best_effort.as_deref().unwrap();
    assert!(
        note.contains("for 30 ms every 100 ms (read from debugfs)"),
        "{note}"
    );
}

/// Boomerang IV-A's ProcData (0.2 ms every 2 ms) under SCHED_DEADLINE beside the load:
/// a declared section of 1.5 ms still fits (dbf(2 ms) + B = 1.7 ms <= 2 ms), one of
/// 1.9 ms does not (2.1 ms > 2 ms); the largest declaration of the sharers counts, and
/// a sharer that declares none counts with the default 1 ms.
#[test]
fn a_declared_nonpreemptible_section_is_one_more_demand_under_edf() {
    let with = |b: &str| {
        procdata("edf", false, true).replace(
            "processes: [wget, cp]}",
            &format!("nonpreemptible: {b}, processes: [wget, cp]}}\n  - {{name: log, kind: be, cpus: 1, nonpreemptible: 10us, processes: [l]}}"),
        )
    };
    let fits = analyze(&with("1500us"));
    assert!(fits.schedulable, "{:?}", fits.cpus);
    let s = fits.cpus[0].sharing.as_ref().expect("CPU 1 is shared");
    assert_eq!(
        (s.nonpreemptible_ns, s.nonpreemptible_declared),
        (1_500_000, true)
    );
    assert_eq!(s.partitions, ["load", "log"]);
    let note = fits.cpus[0].best_effort.as_deref().unwrap();
    assert!(
        note.contains("up to 1500 µs (declared by `nonpreemptible`"),
        "{note}"
    );
    let one_undeclared = analyze(&with("500us").replace(", nonpreemptible: 10us", ""));
    let s = one_undeclared.cpus[0].sharing.as_ref().unwrap();
    assert_eq!(
        (s.nonpreemptible_ns, s.nonpreemptible_declared),
        (MS, false)
    );
    let misses = analyze(&with("1900us"));
    assert!(!misses.schedulable);
    assert!(
        misses.cpus[0].binding.contains("EDF demand"),
        "{}",
        misses.cpus[0].binding
    );
    // The JSON report carries the numbers per CPU.
    let json: serde_json::Value = serde_json::from_str(&misses.to_json()).unwrap();
    let sharing = &json["cpus"][0]["sharing"];
    assert_eq!(sharing["nonpreemptible_ns"], 1_900_000);
    assert_eq!(sharing["fair_server"]["runtime_ns"], 50_000_000);
    assert_eq!(sharing["rt_throttle_ns"][0], 50_000_000);
}
