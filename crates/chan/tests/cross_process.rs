//! Channels between two real processes: the child is `bulkhead-chan-peer`,
//! which receives the channel over a Unix socket (SCM_RIGHTS) like a
//! partition granted a channel by the supervisor.

use bulkhead_chan::{Channel, OpenError, RecvError, Spec};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WATCHDOG: Duration = Duration::from_secs(120);

/// One two-process test at a time: on a 2-CPU machine, parallel tests would
/// put four busy processes on two CPUs and mostly measure the scheduler.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A peer process, killed on drop if still running (no leak when a test fails).
struct Peer {
    child: Child,
    sock: UnixStream,
}

impl Peer {
    fn spawn(args: &[&str]) -> Peer {
        let (mine, theirs) = UnixStream::pair().unwrap();
        let raw = theirs.as_raw_fd();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bulkhead-chan-peer"));
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        // SAFETY: dup2 is async-signal-safe; it puts the socket on fd 3 with
        // close-on-exec cleared.
        unsafe {
            cmd.pre_exec(move || match libc_dup2(raw, 3) {
                3 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
        let child = cmd.spawn().unwrap();
        drop(theirs);
        Peer { child, sock: mine }
    }

    /// Waits for the peer under the watchdog; returns (success, stdout, stderr).
    fn finish(mut self) -> (bool, String, String) {
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(
                start.elapsed() < WATCHDOG,
                "watchdog: peer still running after {WATCHDOG:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        let (mut out, mut err) = (String::new(), String::new());
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (status.success(), out, err)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn libc_dup2(from: i32, to: i32) -> i32 {
    extern "C" {
        fn dup2(oldfd: i32, newfd: i32) -> i32;
    }
    // SAFETY: plain syscall wrapper on descriptor numbers.
    unsafe { dup2(from, to) }
}

fn message(n: u64) -> [u8; 32] {
    let mut m = [0u8; 32];
    for (i, w) in [n, !n, n.wrapping_mul(7), n ^ 0x5555].iter().enumerate() {
        m[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    m
}

#[test]
fn fifo_millions_in_order_to_another_process() {
    let _serial = serial();
    const N: u64 = 1_000_000;
    let chan = Channel::create(&Spec::fifo("xp-fifo", 32, 256)).unwrap();
    let peer = Peer::spawn(&["fifo-recv", &N.to_string()]);
    chan.send_over(&peer.sock).unwrap();
    let mut tx = chan.sender().unwrap();
    for n in 0..N {
        tx.write_timeout(&message(n), Duration::from_secs(60))
            .unwrap();
    }
    drop(tx);
    let (ok, out, err) = peer.finish();
    assert!(ok, "peer failed: {err}");
    assert!(out.starts_with(&format!("received {N} in order")), "{out}");
}

#[test]
fn fifo_millions_in_order_from_another_process() {
    let _serial = serial();
    const N: u64 = 1_000_000;
    let chan = Channel::create(&Spec::fifo("xp-fifo-back", 32, 16)).unwrap();
    let peer = Peer::spawn(&["fifo-send", &N.to_string()]);
    chan.send_over(&peer.sock).unwrap();
    let mut rx = chan.receiver().unwrap();
    let mut m = [0u8; 32];
    for n in 0..N {
        rx.read_timeout(&mut m, Duration::from_secs(60)).unwrap();
        assert_eq!(m, message(n), "message {n}");
    }
    let (ok, out, err) = peer.finish();
    assert!(ok, "peer failed: {err}");
    assert!(out.starts_with(&format!("sent {N}")), "{out}");
    assert!(
        matches!(rx.try_read(&mut m), Err(RecvError::Closed)),
        "writer exited: channel closed"
    );
}

#[test]
fn latest_never_torn_and_monotonic_across_processes() {
    let _serial = serial();
    const N: u64 = 1_000_000;
    let chan = Channel::create(&Spec::latest("xp-latest", 32)).unwrap();
    let peer = Peer::spawn(&["latest-recv", &N.to_string()]);
    chan.send_over(&peer.sock).unwrap();
    let mut tx = chan.sender().unwrap();
    for n in 0..N {
        tx.write(&message(n)).unwrap();
    }
    let (ok, out, err) = peer.finish();
    assert!(ok, "peer failed: {err}");
    assert!(
        out.starts_with(&format!("latest reached {}", N - 1)),
        "{out}"
    );
}

#[test]
fn both_sides_sleeping_ping_pong_under_watchdog() {
    let _serial = serial();
    // Depth 1 and no spinning: every read waits for the other process, so
    // both sides go to sleep on the futex over and over. A lost wake-up
    // would hang until the 30 s timeouts (or the watchdog) fail the test.
    const N: u64 = 20_000;
    let ping = Channel::create(&Spec::fifo("xp-ping", 32, 1)).unwrap();
    let pong = Channel::create(&Spec::fifo("xp-pong", 32, 1)).unwrap();
    let peer = Peer::spawn(&["echo", &N.to_string(), "0"]);
    ping.send_over(&peer.sock).unwrap();
    pong.send_over(&peer.sock).unwrap();
    let (mut tx, mut rx) = (ping.sender().unwrap(), pong.receiver().unwrap());
    tx.set_spin(0);
    rx.set_spin(0);
    let mut m = [0u8; 32];
    for n in 0..N {
        tx.write_timeout(&message(n), Duration::from_secs(30))
            .unwrap();
        rx.read_timeout(&mut m, Duration::from_secs(30)).unwrap();
        assert_eq!(m, message(n));
    }
    let (ok, out, err) = peer.finish();
    assert!(ok, "peer failed: {err}");
    let peer_sleeps: u64 = out.trim().rsplit(' ').next().unwrap().parse().unwrap();
    // Each side sleeps on most round trips; require a wide-margin tenth.
    assert!(
        rx.sleeps() > N / 10,
        "parent slept only {} times",
        rx.sleeps()
    );
    assert!(
        peer_sleeps > N / 10,
        "peer slept only {peer_sleeps} times: {out}"
    );
}

#[test]
fn a_dead_writer_is_replaced_and_a_live_one_is_busy() {
    let _serial = serial();
    let chan = Channel::create(&Spec::fifo("xp-takeover", 32, 2)).unwrap();
    let peer = Peer::spawn(&["fifo-send", "1000000"]);
    chan.send_over(&peer.sock).unwrap();
    let mut rx = chan.receiver().unwrap();
    let mut m = [0u8; 32];
    rx.read_timeout(&mut m, Duration::from_secs(30)).unwrap();
    let pid = peer.child.id();
    assert!(matches!(chan.sender(), Err(OpenError::Busy(p)) if p == pid));
    drop(peer); // SIGKILL: the writer dies without closing
    let mut tx = chan.sender().expect("dead writer replaced");
    // What the dead writer left is still there, in order; then the new one's.
    let mut next = 1;
    while rx.try_read(&mut m).is_ok() {
        assert_eq!(m, message(next));
        next += 1;
    }
    tx.write_timeout(&message(7), Duration::from_secs(10))
        .unwrap();
    rx.read_timeout(&mut m, Duration::from_secs(10)).unwrap();
    assert_eq!(m, message(7));
}

#[test]
fn stale_named_channel_of_a_dead_creator_is_cleaned() {
    let _serial = serial();
    let id = std::process::id();
    let name = format!("stale-{id}");
    let out = Command::new(env!("CARGO_BIN_EXE_bulkhead-chan-peer"))
        .args(["create-named", &id.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(bulkhead_chan::named_exists(&name));
    let live = Channel::create_named(&Spec::fifo(&format!("live-{id}"), 8, 2)).unwrap();
    let removed = bulkhead_chan::cleanup_stale().unwrap();
    assert!(removed.contains(&name), "{removed:?}");
    assert!(
        !removed.contains(&format!("live-{id}")),
        "live channel removed: {removed:?}"
    );
    assert!(!bulkhead_chan::named_exists(&name));
    assert!(bulkhead_chan::named_exists(&format!("live-{id}")));
    live.destroy().unwrap();
}

#[test]
fn create_named_replaces_a_stale_channel() {
    let _serial = serial();
    let id = std::process::id() + 1_000_000;
    let name = format!("stale-{id}");
    let out = Command::new(env!("CARGO_BIN_EXE_bulkhead-chan-peer"))
        .args(["create-named", &id.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let chan = Channel::create_named(&Spec::latest(&name, 16)).expect("stale channel replaced");
    assert_eq!(chan.meta().kind, bulkhead_chan::Kind::Latest);
    assert!(matches!(
        Channel::create_named(&Spec::latest(&name, 16)),
        Err(OpenError::Exists(_))
    ));
    chan.destroy().unwrap();
    assert!(!bulkhead_chan::named_exists(&name));
}

#[test]
fn a_blocking_read_without_timeout_returns_when_the_writer_dies() {
    let _serial = serial();
    let ping = Channel::create(&Spec::fifo("xp-died-ping", 32, 1)).unwrap();
    let pong = Channel::create(&Spec::fifo("xp-died-pong", 32, 1)).unwrap();
    let peer = Peer::spawn(&["echo", "1000", "0"]);
    ping.send_over(&peer.sock).unwrap();
    pong.send_over(&peer.sock).unwrap();
    let (mut tx, mut rx) = (ping.sender().unwrap(), pong.receiver().unwrap());
    let mut m = [0u8; 32];
    tx.write_timeout(&message(1), Duration::from_secs(30))
        .unwrap();
    rx.read_timeout(&mut m, Duration::from_secs(30)).unwrap(); // the peer is attached
    let pid = peer.child.id();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        assert!(Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap()
            .success());
    });
    // The read has no timeout: only noticing the peer's death can end it. It
    // runs on its own thread so that a hang fails the test instead.
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(rx.read(&mut m));
    });
    let r = result
        .recv_timeout(Duration::from_secs(20))
        .expect("read still blocked 20 s after the peer died");
    killer.join().unwrap();
    assert!(
        matches!(r, Err(RecvError::PeerDied(p)) if p == pid),
        "{r:?}"
    );
    drop(peer);
}
