//! rt partitions that share their CPUs with best-effort partitions (`exclusive: false`):
//! Boomerang IV-A's ProcData (tau4: 0.2 ms every 2 ms, Table I) on Core 1 beside the
//! background load, as SCHED_DEADLINE and as SCHED_FIFO (crate::shared).

use bulkhead_analysis::system::{analyze_system, Report};
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

/// Under SCHED_FIFO the fair server (50 ms every 1 s) runs the be work above the task:
/// ProcData's response time grows by 50 ms and misses its 2 ms deadline.
#[test]
fn the_fair_server_interferes_with_sched_fifo_beside_be_work() {
    let alone = analyze(&procdata("fixed-priority", false, false));
    assert_eq!(alone.tasks[0].wcrt_ns, Some(MS / 5));
    assert!(alone.schedulable);
    let shared = analyze(&procdata("fixed-priority", false, true));
    assert_eq!(shared.tasks[0].wcrt_ns, Some(50 * MS + MS / 5));
    assert!(!shared.schedulable);
    let note = shared.cpus[0]
        .best_effort
        .as_deref()
        .expect("a note on CPU 1");
    assert!(
        note.contains("above SCHED_FIFO for 50 ms every 1000 ms"),
        "{note}"
    );
}

#[test]
fn the_interference_counts_one_server_period_per_second_of_deadline() {
    use bulkhead_analysis::shared::fair_server_interference;
    assert_eq!(fair_server_interference(2 * MS), 50 * MS);
    assert_eq!(fair_server_interference(1000 * MS), 50 * MS);
    assert_eq!(fair_server_interference(1001 * MS), 100 * MS);
}
