//! Mode switches of a real `bulkhead run` (docs/modes.md): `bulkhead ctl mode` switches
//! the running system, the kernel holds the new reservations (`chrt -p`), the tasks of
//! the mode left are stopped and those of the new one run, the logged bandwidth never
//! exceeds a pool's capacity nor a partition's demand its interface, bad requests get
//! errors while the system keeps running, and `sim` takes the same steps in the same
//! order as `run`.

mod common;
use bulkhead_os::sched::affinity;
use common::{ctl, ctl_ok, exclusive_cpus_lock, text, wait_for, Running, Scratch};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

fn status(socket: &Path) -> Value {
    let out = ctl_ok(socket, &["status", "--json"]);
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["status"].clone()
}

fn task<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tasks"].as_array().unwrap())
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no task {name} in {status}"))
}

/// The state letter of /proc/PID/stat (`T`: stopped).
fn state(pid: u64) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.chars().next().unwrap()
}

/// Whether `pid` is parked within a second: frozen in its agent's park cgroup (`D`, its
/// v1 `freezer.state` `FROZEN`: a park that caught it asleep between jobs leaves it so
/// until its start) or stopped (`T`: one that caught it running stopped it by SIGSTOP;
/// docs/modes.md, A park that keeps the task frozen).
fn parked_soon(pid: u64) -> bool {
    within_a_second(|| state(pid) == 'T' || frozen(pid))
}

/// Whether `pid` is under SCHED_OTHER within a second: its agent gives a parked task's
/// reservation back once the switch is over, after its reply (docs/modes.md,
/// *Reservations given back after the switch*).
fn left_deadline_soon(pid: u32) -> bool {
    within_a_second(|| common::chrt(pid).contains("SCHED_OTHER"))
}

/// Whether `holds` is true within a second (looked at every millisecond, and once more
/// at the end).
fn within_a_second(holds: impl Fn() -> bool) -> bool {
    let end = std::time::Instant::now() + Duration::from_secs(1);
    while !holds() && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    holds()
}

/// Whether `pid` is frozen (`D`) in a park cgroup of the v1 freezer that reads `FROZEN`.
fn frozen(pid: u64) -> bool {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let Some(path) = cgroups
        .lines()
        .find_map(|l| l.split_once(":freezer:").map(|(_, p)| p.to_string()))
    else {
        return false;
    };
    let file = format!("/sys/fs/cgroup/freezer{path}/freezer.state");
    let frozen = std::fs::read_to_string(file).is_ok_and(|s| s.trim() == "FROZEN");
    path.contains("-park-") && frozen && state(pid) == 'D'
}

fn switch(socket: &Path, mode: &str) -> Value {
    let out = ctl_ok(socket, &["mode", mode, "--json"]);
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["mode"].clone()
}

/// `bulkhead run FILE --control SOCKET` for `timeout`, its stderr piped, once its socket
/// is there.
fn started(file: &Path, timeout: &str, socket: &Path) -> Running {
    let run = Running(Some(
        common::run_with_control(file, timeout, socket)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    wait_for(socket);
    run
}

/// [`description`]'s system run for 3 s in scratch directory `name`, once its control
/// socket is there: the directory (which must outlive the run), the socket, the run and
/// the supervisor's pid.
fn started_for_3s(name: &str) -> (Scratch, PathBuf, Running, u32) {
    let dir = Scratch::new(name);
    let file = description(&dir);
    let socket = dir.file("car.sock");
    let run = started(&file, "3s", &socket);
    let pid = run.0.as_ref().unwrap().id();
    (dir, socket, run, pid)
}

/// Sends raw request lines on one connection and returns `n` reply lines.
fn raw(path: &Path, bytes: &[u8], n: usize) -> Vec<String> {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    let mut r = BufReader::new(s);
    (0..n)
        .map(|_| {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            line
        })
        .collect()
}

/// (event, partition) of the switch steps in a schedule log, per switch.
fn log_steps(log: &str) -> Vec<Vec<(String, String)>> {
    let mut switches: Vec<Vec<(String, String)>> = Vec::new();
    for line in log.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        let event = e["event"].as_str().unwrap();
        let partition = e["partition"].as_str().unwrap_or("").to_string();
        match event {
            "mode_request" => switches.push(Vec::new()),
            "interface_change" | "agent_request" | "agent_ack" | "mode_done" => switches
                .last_mut()
                .expect("a step after a request")
                .push((event.to_string(), partition)),
            _ => {}
        }
    }
    switches
}

fn description(dir: &Scratch) -> std::path::PathBuf {
    let p = common::bin("bulkhead-periodic");
    let file = dir.file("car.yaml");
    let task = |name: &str, budget: &str| {
        format!(
            "      - {{name: {name}, cmd: {} --exec-us 40, budget: {budget}, period: 2ms}}\n",
            p.display()
        )
    };
    let partition = |name: &str, tasks: &str| {
        format!("  - name: {name}\n    kind: rt\n    cpus: 1\n    scheduler: edf\n    interface: {{period: 1ms}}\n    tasks:\n{tasks}")
    };
    let text = format!(
        "system: {{cpus: 0-1}}\npartitions:\n{}{}modes:\n  initial: one\n  agent: {{budget: 100us, period: 300ms}}\n  table:\n    - name: one\n      partitions:\n        a: {{tasks: [x]}}\n        b: {{tasks: [z]}}\n    - name: two\n      partitions:\n        a: {{tasks: [x, y]}}\n        b: {{tasks: [{{name: z, budget: 200us}}]}}\n  transitions:\n    - {{from: one, to: two, policy: sequential}}\n    - {{from: two, to: one, policy: boost}}\n",
        partition("a", &(task("x", "100us") + &task("y", "100us"))),
        partition("b", &task("z", "100us")),
    );
    std::fs::write(&file, text).unwrap();
    file
}

/// Mode one of the running system's `socket`: y is parked (stopped, no reservation),
/// x and z run under theirs; the pids of y and z.
fn parked_in_mode_one(socket: &Path) -> (u64, u64) {
    std::thread::sleep(Duration::from_millis(200));
    let s = status(socket);
    assert_eq!(s["mode"], "one", "{s}");
    assert_eq!(s["partitions"][0]["interface"]["budget_ns"], 100_000, "{s}");
    let y = task(&s, "y")["pid"].as_u64().unwrap();
    let z = task(&s, "z")["pid"].as_u64().unwrap();
    assert_eq!(state(y), 'T');
    assert!(common::chrt(y as u32).contains("SCHED_OTHER"));
    assert_eq!(task(&s, "y")["jobs"], 0, "{s}");
    assert!(common::chrt(z as u32).contains("100000/2000000/2000000"));
    // y's program was let run up to its start gate once (the switch that starts it does
    // not wait for it to load): it attached and declared that it acknowledges modes at
    // once (bulkhead-periodic does), which its agent counts as its acknowledgement.
    let end = std::time::Instant::now() + Duration::from_secs(5);
    let mut s = s;
    while task(&s, "y")["counters"][bulkhead_task::ACK_AT_ONCE] != 1 {
        assert!(std::time::Instant::now() < end, "{s}");
        std::thread::sleep(Duration::from_millis(50));
        s = status(socket);
    }
    assert_eq!(state(y), 'T');
    assert_eq!(task(&s, "y")["jobs"], 0, "{s}");
    (y, z)
}

/// Refused switches: the system keeps running and stays in mode two.
fn refuses_bad_switches(socket: &Path) {
    let again = ctl(socket, &["mode", "one"]);
    assert_eq!(
        again.status.code(),
        Some(1),
        "{}{}",
        text(&again.stdout),
        text(&again.stderr)
    );
    assert!(
        text(&again.stderr).contains("refused"),
        "{}",
        text(&again.stderr)
    );
    let moon = ctl(socket, &["mode", "moon"]);
    assert!(
        text(&moon.stderr).contains("unknown_mode"),
        "{}",
        text(&moon.stderr)
    );
    let same = ctl(socket, &["mode", "two"]);
    assert!(
        text(&same.stderr).contains("not_allowed"),
        "{}",
        text(&same.stderr)
    );
    let bad = raw(socket, b"{\"request\":\"mode\",\"name\":7}\n", 1);
    assert!(bad[0].contains("malformed"), "{bad:?}");
    std::thread::sleep(Duration::from_millis(350));
}

#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn ctl_mode_switches_a_running_system_as_sim_does() {
    common::built("bulkhead-periodic");
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("modes");
    let file = description(&dir);
    let socket = dir.file("car.sock");
    let log = dir.file("log.jsonl");
    let mut run = Running(Some(
        common::run_with_control(&file, "6s", &socket)
            .arg("--schedule-log")
            .arg(&log)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    wait_for(&socket);

    let (y, z) = parked_in_mode_one(&socket);

    // Switch to two (sequential), with a second request on the same connection while
    // it runs (its agents are threads of normal priority, which the supervisor's event
    // loop waits for): y runs, z has its new reservation, the interfaces grew.
    let replies = raw(
        &socket,
        b"{\"id\":1,\"request\":\"mode\",\"name\":\"two\"}\n{\"id\":2,\"request\":\"mode\",\"name\":\"one\"}\n",
        2,
    );
    assert!(
        replies[0].contains("\"id\":2") && replies[0].contains("busy"),
        "{replies:?}"
    );
    let reply: Value = serde_json::from_str(&replies[1]).unwrap();
    assert_eq!(
        (&reply["id"], &reply["ok"]),
        (&1.into(), &true.into()),
        "{reply}"
    );
    let m = &reply["mode"];
    assert_eq!(
        (&m["from"], &m["to"], &m["policy"]),
        (&"one".into(), &"two".into(), &"sequential".into()),
        "{m}"
    );
    assert_eq!(
        m["steps"].as_array().unwrap().last().unwrap()["event"],
        "mode_done"
    );
    assert_ne!(state(y), 'T');
    assert!(common::chrt(y as u32).contains("SCHED_DEADLINE"));
    assert!(
        common::chrt(z as u32).contains("200000/2000000/2000000"),
        "{}",
        common::chrt(z as u32)
    );
    std::thread::sleep(Duration::from_millis(150));
    let s = status(&socket);
    assert_eq!(s["mode"], "two");
    assert_eq!(s["partitions"][0]["interface"]["budget_ns"], 200_000, "{s}");
    assert!(task(&s, "y")["jobs"].as_u64().unwrap() > 10, "{s}");

    refuses_bad_switches(&socket);

    // Back to one (boost).
    assert_eq!(switch(&socket, "one")["policy"], "boost");
    assert!(parked_soon(y));
    assert!(left_deadline_soon(y as u32));
    assert!(common::chrt(z as u32).contains("100000/2000000/2000000"));
    let s = status(&socket);
    assert_eq!(s["mode"], "one");
    assert_eq!(s["state"], "running");

    run.ended();

    // The log: every step within capacity and every partition within its interface.
    let log = std::fs::read_to_string(&log).unwrap();
    let mut seen = 0;
    for line in log.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        if let (Some(load), Some(cap)) = (e["load_ppm"].as_u64(), e["capacity_ppm"].as_u64()) {
            assert!(load <= cap, "{line}");
            seen += 1;
        }
        if e["event"] == "agent_ack" {
            assert!(
                e["demand_ppm"].as_u64() <= e["interface_ppm"].as_u64(),
                "{line}"
            );
        }
    }
    assert!(seen >= 6, "{log}");
    let run_steps = log_steps(&log);
    assert_eq!(run_steps.len(), 2, "{log}");

    // sim: the same switches, the same steps in the same order.
    let sim_log = dir.file("sim.jsonl");
    let sim = common::bulkhead()
        .args(["sim", file.to_str().unwrap(), "--for", "1s"])
        .args(["--mode-switch", "200ms:two", "--mode-switch", "600ms:one"])
        .arg("--schedule-log")
        .arg(&sim_log)
        .output()
        .unwrap();
    assert_eq!(sim.status.code(), Some(0), "{}", text(&sim.stderr));
    let sim_steps = log_steps(&std::fs::read_to_string(&sim_log).unwrap());
    assert_eq!(sim_steps, run_steps);
}

/// `examples/modes.yaml` runs as written (its programs found in bulkhead's directory,
/// with no PATH of the test's) and switches
/// through its four transitions, one per policy; the kernel holds each mode's
/// reservations and the logged bandwidth never exceeds the pool or an interface.
#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn the_example_runs_and_switches_through_every_policy() {
    common::built("bulkhead-periodic");
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("modes-example");
    let socket = dir.file("car.sock");
    let log = dir.file("log.jsonl");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/modes.yaml");
    let mut run = Running(Some(
        common::bulkhead()
            .arg("run")
            .arg(&example)
            .args(["--timeout", "4s", "--control"])
            .arg(&socket)
            .arg("--schedule-log")
            .arg(&log)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    wait_for(&socket);
    std::thread::sleep(Duration::from_millis(200));
    let s = status(&socket);
    assert_eq!(s["mode"], "parking", "{s}");
    let cruise = task(&s, "cruise")["pid"].as_u64().unwrap();
    let acc = task(&s, "acc")["pid"].as_u64().unwrap();
    let map = task(&s, "map")["pid"].as_u64().unwrap() as u32;
    assert_eq!(state(cruise), 'T');
    for (to, policy) in [
        ("urban", "batch"),
        ("highway", "greedy"),
        ("urban", "boost"),
        ("parking", "sequential"),
    ] {
        let m = switch(&socket, to);
        assert_eq!(
            (&m["to"], &m["policy"]),
            (&to.into(), &policy.into()),
            "{m}"
        );
        if to == "highway" {
            // acc runs with its highway budget, cruise joined.
            assert!(common::chrt(acc as u32).contains("2000000/10000000/10000000"));
            assert!(common::chrt(cruise as u32).contains("SCHED_DEADLINE"));
        }
        if to == "urban" && policy == "batch" {
            // map runs with urban's budget and period.
            let chrt = common::chrt(map);
            assert!(chrt.contains("3000000/200000000/200000000"), "{chrt}");
        }
        std::thread::sleep(Duration::from_millis(120));
    }
    assert_eq!(status(&socket)["mode"], "parking");
    assert!(parked_soon(cruise));
    assert!(left_deadline_soon(acc as u32));
    assert!(common::chrt(map).contains("5000000/100000000/100000000"));

    run.ended();
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(log_steps(&log).len(), 4, "{log}");
    for line in log.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        if let (Some(load), Some(cap)) = (e["load_ppm"].as_u64(), e["capacity_ppm"].as_u64()) {
            assert!(load <= cap, "{line}");
        }
        // A partition that owns its CPU (chassis) has no interface.
        if let (Some(demand), Some(interface)) =
            (e["demand_ppm"].as_u64(), e["interface_ppm"].as_u64())
        {
            assert!(demand <= interface, "{line}");
        }
    }
}

/// A job of the schedule log: (release, relative deadline), ns.
type Job = (u64, u64);

/// One rt partition `a` on CPU 1 with one task `x` (200 us every 2 ms), in mode `fast`
/// as described and in mode `slow` with `slow` (e.g. `budget: 300us`) changed.
fn one_task_two_modes(dir: &Scratch, slow: &str) -> std::path::PathBuf {
    let file = dir.file("car.yaml");
    std::fs::write(
        &file,
        format!(
            "system: {{cpus: 0-1}}\npartitions:\n  - name: a\n    kind: rt\n    cpus: 1\n    scheduler: edf\n    tasks:\n      - {{name: x, cmd: {} --exec-us 40, budget: 200us, period: 2ms}}\nmodes:\n  initial: fast\n  agent: {{budget: 100us, period: 100ms}}\n  table:\n    - name: fast\n      partitions:\n        a: {{tasks: [x]}}\n    - name: slow\n      partitions:\n        a: {{tasks: [{{name: x, {slow}}}]}}\n",
            common::bin("bulkhead-periodic").display()
        ),
    )
    .unwrap();
    file
}

/// x's jobs in the schedule `log` of a run that switched from fast to slow and back, as
/// (release, relative deadline) in release order: those of fast, of slow, of fast again.
fn jobs_per_mode(log: &str) -> (Vec<Job>, Vec<Job>, Vec<Job>) {
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let requests: Vec<u64> = events
        .iter()
        .filter(|e| e["event"] == "mode_request")
        .map(|e| e["t_ns"].as_u64().unwrap())
        .collect();
    assert_eq!(requests.len(), 2, "{log}");
    // (release, relative deadline) of x's jobs, in release order.
    let mut releases: Vec<(u64, u64)> = events
        .iter()
        .filter(|e| e["event"] == "job_release" && e["task"] == "x")
        .map(|e| {
            let t = e["t_ns"].as_u64().unwrap();
            (t, e["deadline_ns"].as_u64().unwrap() - t)
        })
        .collect();
    releases.sort();
    releases.dedup();
    let phase = |from: u64, to: u64| -> Vec<Job> {
        releases
            .iter()
            .copied()
            .filter(|&(t, _)| t > from && t < to)
            .collect()
    };
    // A switch takes effect when its agent has published the new times, at the old
    // grid's next release: jobs released after the request may still be old ones.
    let split = |jobs: Vec<Job>, old: u64| -> (Vec<Job>, Vec<Job>) {
        let k = jobs
            .iter()
            .position(|&(_, d)| d != old)
            .unwrap_or(jobs.len());
        (jobs[..k].to_vec(), jobs[k..].to_vec())
    };
    let (mut fast, (tail, mut slow)) = (
        phase(0, requests[0]),
        split(phase(requests[0], requests[1]), 2_000_000),
    );
    fast.extend(tail);
    let (tail, back) = split(phase(requests[1], u64::MAX), 4_000_000);
    slow.extend(tail);
    (fast, slow, back)
}

/// A mode may give a task another period (and deadline): its program's releases move to
/// the new period from the old grid's first release after the switch on (none sooner,
/// none twice), the kernel holds the new reservation (`chrt -p`), and the supervisor
/// judges its jobs against the new deadline; switching back restores both.
#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn a_mode_that_changes_a_tasks_period_moves_its_releases_and_its_reservation() {
    common::built("bulkhead-periodic");
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("modes-period");
    let file = one_task_two_modes(&dir, "period: 5ms, deadline: 4ms");
    let socket = dir.file("car.sock");
    let log = dir.file("log.jsonl");
    let mut run = Running(Some(
        common::run_with_control(&file, "2s", &socket)
            .arg("--schedule-log")
            .arg(&log)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    wait_for(&socket);
    // Release 0 comes 200 ms after the last attach (docs/rt.md): 500 ms more of mode
    // `fast` before the switch.
    std::thread::sleep(Duration::from_millis(700));
    let x = task(&status(&socket), "x")["pid"].as_u64().unwrap() as u32;
    assert!(
        common::chrt(x).contains("200000/2000000/2000000"),
        "{}",
        common::chrt(x)
    );
    assert_eq!(switch(&socket, "slow")["to"], "slow");
    assert!(
        common::chrt(x).contains("200000/4000000/5000000"),
        "{}",
        common::chrt(x)
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(switch(&socket, "fast")["to"], "fast");
    assert!(
        common::chrt(x).contains("200000/2000000/2000000"),
        "{}",
        common::chrt(x)
    );
    run.ended();

    let log = std::fs::read_to_string(&log).unwrap();
    let (fast, slow, back) = jobs_per_mode(&log);
    assert!(
        fast.len() > 50 && slow.len() > 50 && back.len() > 50,
        "{fast:?}\n{slow:?}\n{back:?}"
    );
    // Every 2 ms (or whole multiples, for releases a VM stall made it skip), judged
    // against 2 ms.
    let steps = |jobs: &[Job], period: u64, deadline: u64| {
        for w in jobs.windows(2) {
            let gap = w[1].0 - w[0].0;
            assert!(gap >= period && gap % period == 0, "gap {gap} in {jobs:?}");
        }
        assert!(jobs.iter().all(|&(_, d)| d == deadline), "{jobs:?}");
    };
    steps(&fast, 2_000_000, 2_000_000);
    // The first slow release is on the 2 ms grid (the old grid's next release), then
    // every 5 ms against a 4 ms deadline.
    let first = slow[0].0 - fast.last().unwrap().0;
    assert_eq!(
        first % 2_000_000,
        0,
        "first slow release off the old grid: {slow:?}"
    );
    steps(&slow, 5_000_000, 4_000_000);
    let first = back[0].0 - slow.last().unwrap().0;
    assert_eq!(
        first % 5_000_000,
        0,
        "first fast release off the slow grid: {back:?}"
    );
    steps(&back, 2_000_000, 2_000_000);
}

/// Tasks that take turns with 60 % of CPU 1 each: the kernel's root domain of the CPU
/// holds 95 % (minus its fair server's 5 %), so it admits each joining task only once
/// the one that left gave its bandwidth back. The agent gives a parked task's back after
/// the switch, unless a start is refused (EBUSY): then at once, and the start is asked
/// again (docs/modes.md, *Reservations given back after the switch*). A task parked while
/// asleep between its jobs (as bulkhead-periodic with 40 us of work in 1 ms most of the
/// time) used to keep it counted for good (docs/modes.md, Boost and the kernel's
/// bandwidth): a start was refused, named in the warnings, and the task stayed
/// SCHED_OTHER.
#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn a_task_that_leaves_gives_its_bandwidth_back_to_the_kernel() {
    common::built("bulkhead-periodic");
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("modes-bandwidth");
    let file = dir.file("car.yaml");
    let line = |name: &str| {
        format!(
            "      - {{name: {name}, cmd: {} --exec-us 40, budget: 600us, period: 1ms}}\n",
            common::bin("bulkhead-periodic").display()
        )
    };
    std::fs::write(
        &file,
        format!(
            "system: {{cpus: 0-1}}\npartitions:\n  - name: a\n    kind: rt\n    cpus: 1\n    scheduler: edf\n    tasks:\n{}{}modes:\n  initial: x\n  agent: {{budget: 100us, period: 50ms}}\n  table:\n    - name: x\n      partitions:\n        a: {{tasks: [x]}}\n    - name: y\n      partitions:\n        a: {{tasks: [y]}}\n",
            line("x"),
            line("y")
        ),
    )
    .unwrap();
    let socket = dir.file("car.sock");
    let mut run = started(&file, "4s", &socket);
    std::thread::sleep(Duration::from_millis(500));
    let s = status(&socket);
    let pid = |name: &str| task(&s, name)["pid"].as_u64().unwrap() as u32;
    let (x, y) = (pid("x"), pid("y"));
    for (mode, joins, leaves) in [("y", y, x), ("x", x, y), ("y", y, x), ("x", x, y)] {
        assert_eq!(switch(&socket, mode)["to"], mode);
        let held = common::chrt(joins);
        assert!(
            held.contains("600000/1000000/1000000"),
            "mode {mode}: {held}"
        );
        assert!(left_deadline_soon(leaves), "mode {mode}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stderr = run.ended();
    assert!(!stderr.contains("resource busy"), "{stderr}");
}

/// The ids of process `pid`'s threads whose name starts with `prefix`.
fn threads_named(pid: u32, prefix: &str) -> Vec<u32> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let tids = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok());
    let comm = |tid: u32| std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"));
    tids.filter(|&tid| comm(tid).is_ok_and(|c| c.starts_with(prefix)))
        .collect()
}

/// The mode agents run on the CPU no rt task uses (CPU 0; the partition's is CPU 1), and
/// the supervisor's own thread, which takes their acknowledgements, may use every CPU
/// again once a switch is over (it is kept on the agents' CPU only during a switch):
/// docs/modes.md, An agent on its tasks' CPU.
#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn the_mode_agents_run_off_the_pools_cpus() {
    common::built("bulkhead-periodic");
    let _lock = exclusive_cpus_lock();
    let (_dir, socket, mut run, pid) = started_for_3s("modes-agent-cpus");
    status(&socket);
    let agents = threads_named(pid, "mode-agent-");
    assert_eq!(agents.len(), 2, "one agent per modal partition");
    let allowed = |tid: u32| affinity(tid as i32).unwrap();
    let before = allowed(pid);
    for mode in ["two", "one"] {
        // The agent period (300 ms) must pass between two switches.
        std::thread::sleep(Duration::from_millis(350));
        assert_eq!(switch(&socket, mode)["to"], mode);
        for &tid in &agents {
            assert_eq!(
                allowed(tid),
                [0],
                "agent thread {tid} after the switch to {mode}"
            );
        }
        assert_eq!(
            allowed(pid),
            before,
            "the supervisor after the switch to {mode}"
        );
    }
    run.ended();
}

/// Thread `tid` of process `pid`: how many times it gave up the CPU to wait.
fn waits(pid: u32, tid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("voluntary_ctxt_switches:"));
    line.unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

/// Under Boost the manager carries out a partition's local switch itself when nothing
/// in it waits (its programs acknowledge at once, its park finds the task asleep, the
/// kernel admits its reservations): the agent thread does not run, and the manager's
/// own priority is back once the switch is over (docs/modes.md, The agent's step in the
/// manager). Under Sequential the agent thread does it. Partition b only changes z's
/// reservation (no park, so nothing is left to give back after the switch).
#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn a_boost_switch_is_carried_out_by_the_manager_when_nothing_in_it_waits() {
    common::built("bulkhead-periodic");
    let _lock = exclusive_cpus_lock();
    let (_dir, socket, mut run, pid) = started_for_3s("modes-in-place");
    let z = task(&status(&socket), "z")["pid"].as_u64().unwrap() as u32;
    let b = threads_named(pid, "mode-agent-b")[0];
    let supervisor = common::chrt(pid);
    for (mode, policy, budget) in [("two", "sequential", "200000"), ("one", "boost", "100000")] {
        // The agent period (300 ms) must pass between two switches, and agent b its
        // last wait (it blocks for its next request after its acknowledgement).
        std::thread::sleep(Duration::from_millis(350));
        let before = waits(pid, b);
        assert_eq!(switch(&socket, mode)["policy"], policy);
        assert!(
            common::chrt(z).contains(budget),
            "z in {mode}: {}",
            common::chrt(z)
        );
        let ran = waits(pid, b) - before;
        match policy {
            "sequential" => assert!(ran > 0, "agent b did not run the {policy} switch"),
            _ => assert_eq!(ran, 0, "agent b ran the {policy} switch {ran} times"),
        }
        assert_eq!(common::chrt(pid), supervisor, "the supervisor after {mode}");
    }
    run.ended();
}

/// A mode switch and a stop-start never overlap: `ctl mode` while the system is
/// suspended is refused with the reason and changes nothing (the task keeps its
/// reservation, the mode stays); after the resume the same switch goes through.
#[test]
#[ignore = "needs root: SCHED_DEADLINE and cpusets"]
fn a_mode_switch_is_refused_while_the_system_is_suspended() {
    common::built("bulkhead-periodic");
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("modes-suspended");
    let file = one_task_two_modes(&dir, "budget: 300us");
    let socket = dir.file("car.sock");
    // Ended by `_run`'s drop: the timeout only has to outlast the checks on a loaded
    // machine (a 5 s one ended first once, under a load average of 600).
    let _run = started(&file, "60s", &socket);
    std::thread::sleep(Duration::from_millis(300));
    let x = task(&status(&socket), "x")["pid"].as_u64().unwrap() as u32;
    ctl_ok(&socket, &["suspend"]);
    let refused = ctl(&socket, &["mode", "slow"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr)
            .contains("the system is suspended: a mode switch needs it running (resume it first)"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(status(&socket)["mode"], "fast");
    assert!(
        common::chrt(x).contains("200000/2000000/2000000"),
        "{}",
        common::chrt(x)
    );
    ctl_ok(&socket, &["resume"]);
    assert_eq!(switch(&socket, "slow")["to"], "slow");
    assert!(
        common::chrt(x).contains("300000/2000000/2000000"),
        "{}",
        common::chrt(x)
    );
}
