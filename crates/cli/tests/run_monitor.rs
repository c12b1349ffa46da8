//! A partition with `monitor: true` gets a read-only status connection to its
//! supervisor (`BULKHEAD_STATUS=fd:N`): from inside the partition, `status` is
//! answered and a mode switch or a suspension is refused as "read-only connection"
//! (and logged); a partition without the key gets no such descriptor.

mod common;
use common::{is_root, Running, Scratch};
use std::process::Stdio;

/// Writes three requests on the inherited status descriptor and prints each reply.
const PROBE: &str = r#"n=${BULKHEAD_STATUS#fd:}; printf '%s\n' '{"id":1,"request":"status"}' '{"id":2,"request":"mode","name":"highway"}' '{"id":3,"request":"suspend"}' >&$n; for i in 1 2 3; do IFS= read -r -t 5 line <&$n; echo "reply: $line"; done"#;

#[test]
fn a_monitor_partition_may_read_the_status_and_nothing_else() {
    if !is_root() {
        eprintln!("skipping: needs root for cgroups and namespaces");
        return;
    }
    let dir = Scratch::new("monitor");
    let file = dir.file("watch.yaml");
    let socket = dir.file("watch.sock");
    let probe = dir.file("probe.sh");
    std::fs::write(&probe, PROBE).unwrap();
    let yaml = format!(
        "system: {{cpus: 0-1}}\npartitions:\n  - name: watch\n    kind: be\n    monitor: true\n    processes:\n      - {{cmd: /bin/bash {}}}\n  - name: other\n    kind: be\n    processes:\n      - {{cmd: \"/bin/sh -c 'echo other: status=${{BULKHEAD_STATUS:-none}}'\"}}\n",
        probe.display()
    );
    std::fs::write(&file, yaml).unwrap();
    let mut run = Running(Some(
        common::run_with_control(&file, "3s", &socket)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let out = run.0.take().unwrap().wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let all = format!("{stdout}\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{all}");
    let replies: Vec<&str> = all.lines().filter(|l| l.contains("reply: ")).collect();
    assert_eq!(replies.len(), 3, "{all}");
    assert!(
        replies[0].contains(r#""id":1,"ok":true,"status""#) && replies[0].contains("watch"),
        "{all}"
    );
    for (reply, id) in replies[1..].iter().zip([2, 3]) {
        assert!(
            reply.contains(&format!(r#""id":{id},"ok":false"#))
                && reply.contains("permission_denied")
                && reply.contains("read-only connection"),
            "{all}"
        );
    }
    assert!(stderr.contains("refused Mode"), "{stderr}");
    assert!(stderr.contains("refused Suspend"), "{stderr}");
    assert!(all.contains("other: status=none"), "{all}");
}
