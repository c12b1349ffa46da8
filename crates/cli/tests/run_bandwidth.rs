//! Admission of rt partitions uses the machine's real-time bandwidth cap
//! (`/proc/sys/kernel/sched_rt_runtime_us / sched_rt_period_us`), not a fixed 95%.
//! The tests change the cap for a moment (restored on drop) while holding the lock of
//! the suites that take CPUs exclusively.

mod common;
use common::{exclusive_cpus_lock, Scratch};
use std::process::Command;

const RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// The machine's cap set to `runtime` µs until dropped.
struct Cap(String);

impl Cap {
    fn set(runtime: &str) -> Option<Cap> {
        let old = std::fs::read_to_string(RUNTIME).ok()?.trim().to_string();
        match std::fs::write(RUNTIME, runtime) {
            Ok(()) => Some(Cap(old)),
            Err(e) => {
                eprintln!("skipping: cannot set {RUNTIME} to {runtime}: {e}");
                None
            }
        }
    }
}

impl Drop for Cap {
    fn drop(&mut self) {
        std::fs::write(RUNTIME, &self.0).expect("restore sched_rt_runtime_us");
    }
}

/// `bulkhead run` of one EDF partition on CPU 1 with one task of `budget` per 10 ms.
fn run(dir: &Scratch, budget: &str) -> (Option<i32>, String) {
    let desc = dir.file("system.yaml");
    std::fs::write(
        &desc,
        format!(
            "system: {{cpus: 0-1}}\npartitions:\n  - name: ctl\n    kind: rt\n    cpus: 1\n    scheduler: edf\n    tasks:\n      - {{name: t, cmd: sleep 5, budget: {budget}, period: 10ms}}\n"
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(["run", desc.to_str().unwrap(), "--timeout", "300ms"])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE and the sysctl"]
fn admission_follows_the_machine_s_rt_bandwidth() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("bandwidth");
    // -1: no limit. 97% of a CPU is admitted (a fixed 95% refused it).
    {
        let Some(_cap) = Cap::set("-1") else { return };
        let (code, stderr) = run(&dir, "9.7ms");
        assert!(!stderr.contains("admission refused"), "{stderr}");
        assert_eq!(code, Some(0), "{stderr}");
    }
    // 99%: 99.5% of a CPU is refused by bulkhead naming the machine's cap (this kernel
    // refuses to lower the cap below 95%, so the test raises it).
    let Some(_cap) = Cap::set("990000") else {
        return;
    };
    let (code, stderr) = run(&dir, "9.95ms");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("admission refused") && stderr.contains("cap 0.99"),
        "{stderr}"
    );
}
