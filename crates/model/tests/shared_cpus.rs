//! rt partitions with `exclusive: false` and best-effort partitions on their CPUs
//! (issue 39.4): DriveOS's Linux side runs its SCHED_DEADLINE tasks beside background
//! tasks on its core (DriveOS 7.1), Boomerang's ProcData beside the load of Core 1
//! (Boomerang IV-A).

use bulkhead_model::{load_str, to_canonical_yaml, PartitionKind};

fn error(src: &str) -> String {
    load_str(src, "t.yaml").expect_err("invalid").to_string()
}

const SHARED: &str = "partitions:
  - name: linux-rt
    kind: rt
    cpus: 1
    exclusive: false
    scheduler: edf
    tasks: [{name: mapper, cmd: m, budget: 1ms, period: 10ms}]
  - name: background
    kind: be
    cpus: 1
    cpu: 30%
    processes: [logger]
";

#[test]
fn a_be_partition_may_name_the_cpus_of_a_non_exclusive_rt_partition() {
    let s = load_str(SHARED, "t.yaml").expect("valid").system;
    let rt = &s.partitions[0];
    let be = &s.partitions[1];
    assert_eq!((rt.kind, rt.exclusive), (PartitionKind::Rt, false));
    assert_eq!(
        (be.kind, be.exclusive, be.cpu),
        (PartitionKind::Be, true, Some(30))
    );
    // The canonical form keeps both keys, and reads back to the same system.
    let text = to_canonical_yaml(&s);
    assert!(text.contains("exclusive: false"), "{text}");
    assert!(text.contains("cpu: 30%"), "{text}");
    assert_eq!(load_str(&text, "c.yaml").expect("canonical").system, s);
}

#[test]
fn the_be_partition_may_come_first() {
    let src = "partitions:
  - {name: background, kind: be, cpus: 1, processes: [logger]}
  - {name: r, kind: rt, cpus: 0-1, exclusive: false, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}
";
    load_str(src, "t.yaml").expect("valid");
}

#[test]
fn an_exclusive_rt_partition_still_owns_its_cpus() {
    let e = error(&SHARED.replace("    exclusive: false\n", ""));
    assert!(e.contains("t.yaml:9:"), "{e}");
    assert!(
        e.contains("partitions[1].cpus: overlaps the CPUs of partition `linux-rt`"),
        "{e}"
    );
    assert!(e.contains("declare `exclusive: false`"), "{e}");
}

/// Two rt partitions do not share a CPU through `exclusive: false`: each is admitted
/// on CPUs of its own; rt partitions share only as servers of one pool (`interface`),
/// which the analysis admits together.
#[test]
fn two_rt_partitions_still_cannot_share_a_cpu() {
    let src = "partitions:
  - {name: a, kind: rt, cpus: 1, exclusive: false, tasks: [{name: t, cmd: x, budget: 1ms, period: 10ms}]}
  - {name: b, kind: rt, cpus: 1, exclusive: false, tasks: [{name: u, cmd: x, budget: 1ms, period: 10ms}]}
";
    let e = error(src);
    assert!(
        e.contains("partitions[1].cpus: overlaps the CPUs of partition `a`"),
        "{e}"
    );
    assert!(e.contains("not rt ones"), "{e}");
}

#[test]
fn a_be_partition_must_stay_within_the_shared_cpus() {
    let e = error(&SHARED.replace(
        "    kind: be\n    cpus: 1\n",
        "    kind: be\n    cpus: 0-1\n",
    ));
    assert!(
        e.contains("partitions[1].cpus: overlaps the CPUs of partition `linux-rt`"),
        "{e}"
    );
    assert!(e.contains("must name only CPUs of it"), "{e}");
}

#[test]
fn exclusive_and_cpu_name_their_key_when_misplaced() {
    let e = error(&SHARED.replace("    cpu: 30%\n", "    cpu: 30%\n    exclusive: false\n"));
    assert!(
        e.contains("partitions[1].exclusive: applies to rt partitions only"),
        "{e}"
    );
    let e = error(&SHARED.replace(
        "    exclusive: false\n",
        "    exclusive: false\n    cpu: 10%\n",
    ));
    assert!(
        e.contains("partitions[0].cpu: applies to best-effort partitions only"),
        "{e}"
    );
    for (bad, why) in [
        ("0%", "between 1%"),
        ("30", "is not a percentage"),
        ("x%", "is not a percentage"),
    ] {
        let e = error(&SHARED.replace("cpu: 30%", &format!("cpu: \"{bad}\"")));
        assert!(
            e.contains("partitions[1].cpu:") && e.contains(why),
            "{bad}: {e}"
        );
    }
}

/// `nonpreemptible:` bounds the kernel sections a be partition's processes enter: a
/// duration on be partitions, kept by the canonical form, refused on rt partitions and
/// when it is no duration, with its key path.
#[test]
fn nonpreemptible_is_a_duration_of_be_partitions() {
    let src = SHARED.replace(
        "    cpu: 30%\n",
        "    cpu: 30%\n    nonpreemptible: 250us\n",
    );
    let s = load_str(&src, "t.yaml").expect("valid").system;
    assert_eq!(s.partitions[1].nonpreemptible, Some(250_000));
    assert_eq!(s.partitions[0].nonpreemptible, None);
    let text = to_canonical_yaml(&s);
    assert!(text.contains("nonpreemptible: 250us"), "{text}");
    assert_eq!(load_str(&text, "c.yaml").expect("canonical").system, s);
    let e = error(&SHARED.replace(
        "    exclusive: false\n",
        "    exclusive: false\n    nonpreemptible: 1ms\n",
    ));
    assert!(e.contains("t.yaml:6:"), "{e}");
    assert!(
        e.contains("partitions[0].nonpreemptible: applies to best-effort partitions only"),
        "{e}"
    );
    let e = error(&src.replace("250us", "soon"));
    assert!(e.contains("t.yaml:12:"), "{e}");
    assert!(e.contains("partitions[1].nonpreemptible:"), "{e}");
}
