//! The far end of bulkhead-chan's cross-process tests, and a manual demo.
//!
//! `bulkhead-chan-peer ROLE COUNT [SPIN]` with a Unix socket on fd 3 over
//! which the channel(s) arrive by SCM_RIGHTS. Messages are 32 bytes:
//! `[n, !n, 7n, n ^ 0x5555]` as little-endian u64s. Roles:
//!
//! * `fifo-recv`: read COUNT messages, check order and content, no loss;
//! * `fifo-send`: write COUNT messages;
//! * `latest-recv`: read until message COUNT-1 is seen, checking that no
//!   message is torn and freshness never goes backwards;
//! * `echo`: take two channels (in, out) and echo COUNT messages back,
//!   sleeping on the futex when SPIN is 0;
//! * `create-named`: create named channel `stale-COUNT`, attach, and exit
//!   without cleaning up (a crashed creator; no socket needed).
//!
//! With `PEER_CHANNEL=NAME` in its environment, `fifo-recv` and `fifo-send` take the
//! description's channel NAME from `bulkhead run` ([`Channel::open_env`]) instead.
//!
//! Prints one summary line and exits 0, or prints the failure and exits 1.

#[cfg(not(loom))]
fn main() -> std::process::ExitCode {
    peer::main()
}

/// Under `--cfg loom` only the algorithms are built, not the shared-memory API.
#[cfg(loom)]
fn main() {
    eprintln!("bulkhead-chan-peer is not built with --cfg loom");
}

#[cfg(not(loom))]
mod peer {
    use bulkhead_chan::{Channel, Error};
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::process::ExitCode;
    use std::time::Duration;

    const TIMEOUT: Duration = Duration::from_secs(30);

    fn message(n: u64) -> [u8; 32] {
        let mut m = [0u8; 32];
        for (i, w) in [n, !n, n.wrapping_mul(7), n ^ 0x5555].iter().enumerate() {
            m[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        m
    }

    fn number(m: &[u8; 32]) -> Result<u64, String> {
        let n = u64::from_le_bytes(m[..8].try_into().expect("8 bytes"));
        if *m != message(n) {
            return Err(format!("torn or corrupt message {m:?}"));
        }
        Ok(n)
    }

    fn socket() -> OwnedFd {
        // SAFETY: the parent test dup2'ed a Unix socket onto fd 3 for us; we own it.
        unsafe { OwnedFd::from_raw_fd(3) }
    }

    /// The channel given by `bulkhead run` (`PEER_CHANNEL`), else the one on fd 3.
    fn channel() -> Result<Channel, String> {
        match std::env::var("PEER_CHANNEL") {
            Ok(name) => Channel::open_env(&name),
            Err(_) => Channel::receive_from(socket()),
        }
        .map_err(|e| e.to_string())
    }

    fn fifo_recv(count: u64) -> Result<String, String> {
        let chan = channel()?;
        let mut rx = chan.receiver().map_err(|e| e.to_string())?;
        let mut m = [0u8; 32];
        for want in 0..count {
            rx.read_timeout(&mut m, TIMEOUT)
                .map_err(|e| format!("read {want}: {e}"))?;
            let got = number(&m)?;
            if got != want {
                return Err(format!("expected message {want}, got {got}"));
            }
        }
        match rx.read_timeout(&mut m, TIMEOUT) {
            Err(Error::Closed) => Ok(format!("received {count} in order; sleeps {}", rx.sleeps())),
            other => Err(format!("after the last message: {other:?}, want Closed")),
        }
    }

    fn fifo_send(count: u64) -> Result<String, String> {
        let chan = channel()?;
        let mut tx = chan.sender().map_err(|e| e.to_string())?;
        for n in 0..count {
            tx.write_timeout(&message(n), TIMEOUT)
                .map_err(|e| format!("write {n}: {e}"))?;
        }
        Ok(format!("sent {count}; sleeps {}", tx.sleeps()))
    }

    fn latest_recv(count: u64) -> Result<String, String> {
        let chan = Channel::receive_from(socket()).map_err(|e| e.to_string())?;
        let mut rx = chan.receiver().map_err(|e| e.to_string())?;
        let (mut last, mut reads, mut distinct) = (0u64, 0u64, 0u64);
        let mut m = [0u8; 32];
        let start = std::time::Instant::now();
        while last + 1 < count {
            if start.elapsed() > TIMEOUT {
                return Err(format!("timed out at message {last}"));
            }
            match rx.try_read(&mut m) {
                Err(Error::Empty) => continue,
                r => r.map_err(|e| e.to_string())?,
            }
            let n = number(&m)?;
            if n < last {
                return Err(format!("freshness went back from {last} to {n}"));
            }
            distinct += u64::from(n > last || reads == 0);
            (last, reads) = (n, reads + 1);
        }
        Ok(format!(
            "latest reached {last} in {reads} reads, {distinct} distinct"
        ))
    }

    fn echo(count: u64, spin: u32) -> Result<String, String> {
        let sock = socket();
        let input = Channel::receive_from(&sock).map_err(|e| e.to_string())?;
        let output = Channel::receive_from(&sock).map_err(|e| e.to_string())?;
        let (mut rx, mut tx) = (
            input.receiver().map_err(|e| e.to_string())?,
            output.sender().map_err(|e| e.to_string())?,
        );
        rx.set_spin(spin);
        tx.set_spin(spin);
        let mut m = [0u8; 32];
        for n in 0..count {
            rx.read_timeout(&mut m, TIMEOUT)
                .map_err(|e| format!("echo read {n}: {e}"))?;
            tx.write_timeout(&m, TIMEOUT)
                .map_err(|e| format!("echo write {n}: {e}"))?;
        }
        Ok(format!(
            "echoed {count}; sleeps {}",
            rx.sleeps() + tx.sleeps()
        ))
    }

    /// Creates named fifo channel `stale-COUNT`, attaches a sender and exits
    /// without destroying it, as a crashed creator would.
    fn create_named(id: u64) -> Result<String, String> {
        let spec = bulkhead_chan::Spec::fifo(&format!("stale-{id}"), 32, 4);
        let chan = Channel::create_named(&spec).map_err(|e| e.to_string())?;
        let tx = chan.sender().map_err(|e| e.to_string())?;
        std::mem::forget(tx);
        Ok(format!("created stale-{id}"))
    }

    pub fn main() -> ExitCode {
        let args: Vec<String> = std::env::args().collect();
        let usage = "usage: bulkhead-chan-peer fifo-recv|fifo-send|latest-recv|echo|create-named COUNT [SPIN] (socket on fd 3)";
        let count = args.get(2).and_then(|c| c.parse::<u64>().ok());
        let spin = args.get(3).map_or(Some(0), |s| s.parse::<u32>().ok());
        let (Some(role), Some(count), Some(spin)) = (args.get(1), count, spin) else {
            eprintln!("{usage}");
            return ExitCode::from(2);
        };
        let r = match role.as_str() {
            "fifo-recv" => fifo_recv(count),
            "fifo-send" => fifo_send(count),
            "latest-recv" => latest_recv(count),
            "echo" => echo(count, spin),
            "create-named" => create_named(count),
            _ => {
                eprintln!("{usage}");
                return ExitCode::from(2);
            }
        };
        match r {
            Ok(line) => {
                println!("{line}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bulkhead-chan-peer {role}: {e}");
                ExitCode::FAILURE
            }
        }
    }
}
