//! The `power:` section: clusters with operating points, checked with positions; the
//! DEmOS `frequency` keys must be operating points of their clusters.

use bulkhead_model::power::OperatingPoint;
use bulkhead_model::{load_str, to_canonical_yaml, Diagnostic, System};

const POWER: &str = "power:
  clusters:
    - name: a53
      cpus: 0
      idle_power: 0.05
      operating_points:
        - {frequency: 600, power: 0.2}
        - {frequency: 1200, power: 0.6}
    - cpus: 1
      operating_points:
        - {frequency: 600, power: 0.5}
        - {frequency: 1296, power: 1.25}
";

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
fn clusters_load_and_write_back() {
    let s = load(&format!(
        "{POWER}windows: [{{length: 10, slices: [{{cpu: 0, frequency: 1200, sc_processes: [{{cmd: a, budget: 4, frequency: 1296}}]}}]}}]\n"
    ));
    let power = s.power.as_ref().unwrap();
    assert_eq!(power.clusters[0].name, "a53");
    assert_eq!(power.clusters[1].name, "cluster1");
    assert_eq!(power.clusters[0].idle_microwatts, 50_000);
    assert_eq!(
        power.clusters[1].points[1],
        OperatingPoint {
            khz: 1_296_000,
            microwatts: 1_250_000
        }
    );
    assert_eq!(load(&to_canonical_yaml(&s)), s);
}

#[test]
fn unsorted_frequencies_are_rejected_with_their_position() {
    let e = fails("power:\n  clusters:\n    - cpus: 0\n      operating_points:\n        - {frequency: 1200, power: 0.6}\n        - {frequency: 600, power: 0.2}\n");
    assert_eq!(e.path, "power.clusters[0].operating_points[1].frequency");
    assert!(e.to_string().starts_with("t.yaml:6:"), "{e}");
    assert!(e.to_string().contains("600 MHz follows 1200 MHz"), "{e}");
}

#[test]
fn non_positive_power_is_rejected() {
    for bad in ["0", "-1", "0.0000001"] {
        let e = fails(&format!(
            "power:\n  clusters:\n    - cpus: 0\n      operating_points: [{{frequency: 600, power: {bad}}}]\n"
        ));
        assert_eq!(
            e.path, "power.clusters[0].operating_points[0].power",
            "{bad}"
        );
        assert!(e.to_string().contains("positive power"), "{e}");
    }
    let e = fails("power:\n  clusters:\n    - {cpus: 0, idle_power: -0.1, operating_points: [{frequency: 600, power: 1}]}\n");
    assert_eq!(e.path, "power.clusters[0].idle_power");
    let e = fails("power:\n  clusters:\n    - {cpus: 0-1, operating_points: [{frequency: 600, power: 1}]}\n    - {cpus: 1, operating_points: [{frequency: 600, power: 1}]}\n");
    assert!(
        e.to_string()
            .contains("overlaps the CPUs of cluster `cluster0`"),
        "{e}"
    );
}

#[test]
fn frequencies_not_in_the_list_are_rejected_at_their_key() {
    let e = fails(&format!(
        "{POWER}windows: [{{length: 10, slices: [{{cpu: 1, frequency: 1200, sc_processes: [{{cmd: a, budget: 4}}]}}]}}]\n"
    ));
    assert_eq!(e.path, "windows[0].slices[0].frequency");
    assert!(
        e.to_string()
            .contains("1200 MHz is not an operating point of cluster `cluster1` (600, 1296 MHz)"),
        "{e}"
    );
    let e = fails(&format!(
        "{POWER}windows: [{{length: 10, sc_processes: [{{cmd: a, budget: 4, frequency: 896}}]}}]\n"
    ));
    assert_eq!(e.path, "windows[0].sc_processes[0].frequency");
    // `cpu: all` meets both clusters: 1200 is not one of cluster1's.
    let e = fails(&format!(
        "{POWER}windows: [{{length: 10, slices: [{{cpu: all, frequency: 1200}}]}}]\n"
    ));
    assert!(e.to_string().contains("cluster `cluster1`"), "{e}");
}
