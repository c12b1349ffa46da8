//! `bulkhead_os::launch` in a process forked (without exec) after its first launch: the
//! fork has the memory of the spawner thread's queue but not the thread, and must start
//! a spawner of its own instead of waiting forever for the one it does not have. Alone
//! in its test binary, so that no other test thread holds a lock across the fork.

use bulkhead_os::launch::{spawn, Confine, Env, Fds, Join, Launch, Program};
use bulkhead_os::proc;
use std::path::Path;
use std::time::{Duration, Instant};

/// Launches `/bin/true` and returns its exit status.
fn run_true() -> std::io::Result<i32> {
    let argv = ["/bin/true".to_string()];
    let program = Program::new(Path::new("/bin/true"), &argv, None)?;
    let env = Env::new([]);
    let child = spawn(Launch {
        program: &program,
        env: &env,
        join: Join::Stay,
        sched: None,
        confine: Confine::default(),
        fds: Fds::default(),
        wait_exec: true,
    })?;
    proc::wait(child.pid)
}

#[test]
fn a_forked_process_launches_through_a_spawner_of_its_own() {
    assert_eq!(run_true().unwrap(), 0, "the spawner is started here");
    // SAFETY: fork in a process whose only other threads are the spawner (blocked on its
    // queue, holding no lock) and the test harness's main thread (waiting for this one);
    // the child only launches and calls _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = match run_true() {
            Ok(0) => 0,
            _ => 1,
        };
        // SAFETY: ends the forked child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = proc::try_wait(pid).unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            // Kills and reaps the hung child.
            let _ = proc::kill(pid, proc::SIGKILL);
            let _ = proc::wait(pid);
            panic!("the forked process hung in its launch");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status:#x}"
    );
}
