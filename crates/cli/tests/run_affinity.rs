//! `demos_cpu`: the supervisor pins itself there once its processes exist (as DEmOS
//! does), the processes keep their own CPUs, and CPUs the machine does not offer are
//! refused before anything starts.

mod common;
use common::{bulkhead, Scratch};
use std::process::{Child, Stdio};
use std::time::Duration;

/// Kills and reaps the run if the test fails halfway.
struct Running(Option<Child>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn online() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    bulkhead_model::CpuSet::parse(text.trim())
        .unwrap()
        .iter()
        .collect()
}

/// `Cpus_allowed_list` of every thread of `pid`.
fn thread_cpus(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("status")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .collect()
}

#[test]
#[ignore = "needs root: cgroups"]
fn the_supervisor_runs_on_demos_cpu_and_its_processes_on_their_slices() {
    if online().len() < 2 {
        eprintln!("skipping: needs two CPUs");
        return;
    }
    let dir = Scratch::new("affinity-pin");
    let desc = dir.file("system.yaml");
    std::fs::write(
        &desc,
        "demos_cpu: 1\nwindows: [{length: 10, cpu: 0, sc_processes: [{cmd: \"grep Cpus_allowed_list /proc/self/status; sleep 5\", budget: 10}]}]\n",
    )
    .unwrap();
    let child = bulkhead()
        .args(["run", desc.to_str().unwrap(), "--timeout", "1500ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut run = Running(Some(child));
    std::thread::sleep(Duration::from_millis(700));
    let threads = thread_cpus(run.0.as_ref().unwrap().id());
    assert!(
        !threads.is_empty() && threads.iter().all(|c| c == "1"),
        "supervisor threads' CPUs: {threads:?}"
    );
    let out = run.0.take().unwrap().wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("Cpus_allowed_list:\t0"),
        "the process runs on its slice's CPU, not demos_cpu: {stdout}"
    );
}

#[test]
#[ignore = "needs root: cgroups"]
fn demos_cpu_outside_the_machine_is_refused_before_anything_starts() {
    let dir = Scratch::new("affinity-bad");
    let marker = dir.file("started");
    let desc = dir.file("system.yaml");
    let beyond = online().last().unwrap() + 1;
    std::fs::write(
        &desc,
        format!(
            "demos_cpu: {beyond}\nwindows: [{{length: 10, cpu: 0, sc_processes: [{{cmd: touch {}, budget: 10}}]}}]\n",
            marker.display()
        ),
    )
    .unwrap();
    let out = bulkhead()
        .args(["run", desc.to_str().unwrap(), "--timeout", "300ms"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // Absent, or present and offline.
    let lacks = [
        format!("this machine has no CPU {beyond}"),
        format!("CPU {beyond} of this machine is offline"),
    ];
    assert!(
        stderr.contains("system.yaml:1:12: demos_cpu: ")
            && lacks.iter().any(|l| stderr.contains(l)),
        "{stderr}"
    );
    assert!(!marker.exists(), "a process started");
}
