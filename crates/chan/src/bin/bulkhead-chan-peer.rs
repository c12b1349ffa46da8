//! The far end of bulkhead-chan's cross-process tests, and a manual demo.
//!
//! `bulkhead-chan-peer ROLE COUNT [SPIN]` with a Unix socket on fd 3 over
//! which the channel(s) arrive by SCM_RIGHTS. Messages are 32 bytes:
//! `[n, !n, 7n, n ^ 0x5555]` as little-endian u64s. Roles:
//!
//! * `fifo-recv`: read COUNT messages, check order and content, no loss;
//! * `fifo-send`: write COUNT messages;
//! * `fifo-drain`: read until the writer has closed, checking content and order, and
//!   print how many came and their first and last numbers (COUNT is ignored);
//! * `latest-recv`: read until message COUNT-1 is seen, checking that no
//!   message is torn and freshness never goes backwards;
//! * `echo`: take two channels (in, out) and echo COUNT messages back,
//!   sleeping on the futex when SPIN is 0;
//! * `create-named`: create named channel `stale-COUNT`, attach, and exit
//!   without cleaning up (a crashed creator; no socket needed).
//!
//! With `PEER_CHANNEL=NAME` in its environment, `fifo-recv`, `fifo-send` and
//! `latest-recv` take the description's channel NAME from `bulkhead run`
//! ([`Channel::open_env`]) instead. Roles only for `bulkhead run` (security tests):
//!
//! * `latest-send`: write COUNT messages to each latest channel of `PEER_CHANNEL`
//!   (comma-separated), failing on the first error;
//! * `attack-reader`: as a reader, try to open the message file read-write, pwrite
//!   it, mprotect a read-only mapping to writable and truncate it (each printed as
//!   refused or SUCCEEDED), then `fifo-recv` COUNT; fails if an attack succeeded;
//! * `scribble`: write garbage over its own control words for COUNT ms;
//! * `attack-can`: a CAN client (bus `PEER_BUS`) tries to truncate its gateway
//!   channels, then writes garbage over all it can write for COUNT ms.
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
    use bulkhead_chan::{Channel, RecvError};
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::process::ExitCode;
    use std::time::Duration;

    const TIMEOUT: Duration = Duration::from_secs(30);

    /// Why a role failed; printed once, by [`main`].
    #[derive(Debug)]
    enum Failure {
        /// A call failed: what the role was doing (empty: the error says it), and why.
        Call {
            doing: String,
            source: Box<dyn std::error::Error>,
        },
        /// An environment variable the role reads is not set.
        Unset(String),
        /// What the role checks does not hold (order, content, an attack's refusal).
        Check(String),
    }

    impl Failure {
        fn call(doing: impl Into<String>, source: impl std::error::Error + 'static) -> Failure {
            let (doing, source) = (doing.into(), Box::new(source));
            Failure::Call { doing, source }
        }
    }

    /// `?` on any error: a failed call that says what it was.
    impl<E: std::error::Error + 'static> From<E> for Failure {
        fn from(source: E) -> Failure {
            Failure::call("", source)
        }
    }

    impl std::fmt::Display for Failure {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match self {
                Failure::Call { doing, source } if doing.is_empty() => write!(f, "{source}"),
                Failure::Call { doing, source } => write!(f, "{doing}: {source}"),
                Failure::Unset(var) => write!(f, "{var} is not set"),
                Failure::Check(what) => f.write_str(what),
            }
        }
    }

    /// The value of environment variable `var`.
    fn env(var: &str) -> Result<String, Failure> {
        std::env::var(var).map_err(|_| Failure::Unset(var.to_string()))
    }

    fn message(n: u64) -> [u8; 32] {
        let mut m = [0u8; 32];
        for (i, w) in [n, !n, n.wrapping_mul(7), n ^ 0x5555].iter().enumerate() {
            m[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        m
    }

    fn number(m: &[u8; 32]) -> Result<u64, Failure> {
        let n = u64::from_le_bytes(m[..8].try_into().expect("8 bytes"));
        if *m != message(n) {
            return Err(Failure::Check(format!("torn or corrupt message {m:?}")));
        }
        Ok(n)
    }

    fn socket() -> OwnedFd {
        // SAFETY: the parent test dup2'ed a Unix socket onto fd 3 for us; we own it.
        unsafe { OwnedFd::from_raw_fd(3) }
    }

    /// The channel given by `bulkhead run` (`PEER_CHANNEL`), else the one on fd 3.
    fn channel() -> Result<Channel, Failure> {
        match std::env::var("PEER_CHANNEL") {
            Ok(name) => Channel::open_env(&name),
            Err(_) => Channel::receive_from(socket()),
        }
        .map_err(Failure::from)
    }

    fn fifo_recv(count: u64) -> Result<String, Failure> {
        let chan = channel()?;
        let mut rx = chan.receiver()?;
        let mut m = [0u8; 32];
        for want in 0..count {
            rx.read_timeout(&mut m, TIMEOUT)
                .map_err(|e| Failure::call(format!("read {want}"), e))?;
            let got = number(&m)?;
            if got != want {
                return Err(Failure::Check(format!(
                    "expected message {want}, got {got}"
                )));
            }
        }
        match rx.read_timeout(&mut m, TIMEOUT) {
            Err(RecvError::Closed) => {
                Ok(format!("received {count} in order; sleeps {}", rx.sleeps()))
            }
            other => Err(Failure::Check(format!(
                "after the last message: {other:?}, want Closed"
            ))),
        }
    }

    fn fifo_drain() -> Result<String, Failure> {
        let chan = channel()?;
        let mut rx = chan.receiver()?;
        let mut m = [0u8; 32];
        let mut got: Vec<u64> = Vec::new();
        loop {
            match rx.read_timeout(&mut m, TIMEOUT) {
                Err(RecvError::Closed) => break,
                r => r.map_err(|e| Failure::call(format!("read after {}", got.len()), e))?,
            }
            let n = number(&m)?;
            if got.last().is_some_and(|&last| n <= last) {
                return Err(Failure::Check(format!("message {n} after {got:?}")));
            }
            got.push(n);
        }
        let (first, last) = (got.first().copied(), got.last().copied());
        Ok(format!(
            "drained {} in order, first {first:?}, last {last:?}",
            got.len()
        ))
    }

    fn fifo_send(count: u64) -> Result<String, Failure> {
        let chan = channel()?;
        let mut tx = chan.sender()?;
        for n in 0..count {
            tx.write_timeout(&message(n), TIMEOUT)
                .map_err(|e| Failure::call(format!("write {n}"), e))?;
        }
        Ok(format!("sent {count}; sleeps {}", tx.sleeps()))
    }

    fn latest_recv(count: u64) -> Result<String, Failure> {
        let chan = channel()?;
        let mut rx = chan.receiver()?;
        let (mut last, mut reads, mut distinct) = (0u64, 0u64, 0u64);
        let mut m = [0u8; 32];
        let start = std::time::Instant::now();
        while last + 1 < count {
            if start.elapsed() > TIMEOUT {
                return Err(Failure::Check(format!("timed out at message {last}")));
            }
            match rx.try_read(&mut m) {
                Err(RecvError::Empty) => continue,
                r => r?,
            }
            let n = number(&m)?;
            if n < last {
                return Err(Failure::Check(format!(
                    "freshness went back from {last} to {n}"
                )));
            }
            distinct += u64::from(n > last || reads == 0);
            (last, reads) = (n, reads + 1);
        }
        Ok(format!(
            "latest reached {last} in {reads} reads, {distinct} distinct"
        ))
    }

    /// Writes COUNT messages to each latest channel of `PEER_CHANNEL` (a
    /// comma-separated list), about one per 20 µs; fails on the first error.
    fn latest_send(count: u64) -> Result<String, Failure> {
        let names = env("PEER_CHANNEL")?;
        let mut txs = Vec::new();
        for name in names.split(',') {
            let chan = Channel::open_env(name)?;
            txs.push(chan.sender().map_err(|e| Failure::call(name, e))?);
        }
        for n in 0..count {
            for tx in &mut txs {
                tx.write(&message(n))
                    .map_err(|e| Failure::call(format!("write {n}"), e))?;
            }
            std::thread::sleep(Duration::from_micros(20));
        }
        Ok(format!("latest sent {count} to {} channels", txs.len()))
    }

    /// The message file and (split channels) reader region this process was handed
    /// for `PEER_CHANNEL` (`fd:<data>:<region>:...`): `/proc/self/fd/<data>` and the
    /// region's fd, or the
    /// `/dev/shm` path of a named channel and no region.
    fn handed_paths() -> Result<(String, Option<i32>), Failure> {
        let name = env("PEER_CHANNEL")?;
        let value = env(&bulkhead_chan::env_var(&name))?;
        let fds: Option<Vec<&str>> = value.strip_prefix("fd:").map(|v| v.split(':').collect());
        match fds.as_deref() {
            Some([data, region, ..]) => Ok((format!("/proc/self/fd/{data}"), region.parse().ok())),
            _ => Ok((format!("/dev/shm/{}{value}", bulkhead_chan::PREFIX), None)),
        }
    }

    /// One attack: prints whether the kernel refused it.
    fn attack(what: &str, r: std::io::Result<()>) -> bool {
        match &r {
            Ok(()) => println!("attack {what}: SUCCEEDED"),
            Err(e) => println!("attack {what}: refused ({e})"),
        }
        r.is_err()
    }

    /// A reader's attacks on the message file of its channel (open it read-write,
    /// pwrite it, mprotect a read-only mapping to writable, truncate it), then the
    /// COUNT messages of the fifo, in order. Fails if any attack succeeded.
    fn attack_reader(count: u64) -> Result<String, Failure> {
        use std::os::fd::AsFd;
        use std::os::unix::fs::FileExt;
        let (path, _) = handed_paths()?;
        let mut refused = 0;
        let rw = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path);
        refused += attack(
            "open read-write",
            rw.as_ref().map(|_| ()).map_err(clone_err),
        ) as u32;
        let file = match rw {
            Ok(f) => f,
            Err(_) => inherited_or_open(&path)?,
        };
        let mut page = [0u8; 64];
        file.read_at(&mut page, 4096)?;
        // Writing the bytes just read proves the right without changing them.
        refused += attack("pwrite", file.write_at(&page, 4096).map(|_| ())) as u32;
        refused += attack("mprotect to write", remap_writable(file.as_fd())) as u32;
        let cut = rustix::fs::ftruncate(&file, 1).map_err(std::io::Error::from);
        refused += attack("ftruncate", cut) as u32;
        let cut = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(1));
        refused += attack("truncate by path", cut) as u32;
        let got = fifo_recv(count)?;
        if refused < 5 {
            return Err(Failure::Check(format!(
                "{} of 5 attacks succeeded; {got}",
                5 - refused
            )));
        }
        Ok(format!("all 5 attacks refused; {got}"))
    }

    /// The inherited descriptor behind `/proc/self/fd/N` (duplicated), else `path` opened.
    fn inherited_or_open(path: &str) -> Result<std::fs::File, Failure> {
        use std::os::fd::BorrowedFd;
        if let Some(n) = path
            .strip_prefix("/proc/self/fd/")
            .and_then(|n| n.parse().ok())
        {
            // SAFETY: the supervisor handed us this descriptor; only borrowed to dup it.
            let fd = unsafe { BorrowedFd::borrow_raw(n) };
            let fd = rustix::io::fcntl_dupfd_cloexec(fd, 0)?;
            return Ok(fd.into());
        }
        std::fs::File::open(path).map_err(|e| Failure::call(path, e))
    }

    fn clone_err(e: &std::io::Error) -> std::io::Error {
        std::io::Error::new(e.kind(), e.to_string())
    }

    /// Maps a page of `fd` read-only, then asks for write access.
    fn remap_writable(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
        use rustix::mm::{MapFlags, MprotectFlags, ProtFlags};
        // SAFETY: a fresh shared mapping chosen by the kernel; unmapped below.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                4096,
                ProtFlags::READ,
                MapFlags::SHARED,
                fd,
                0,
            )
        }?;
        // SAFETY: our own mapping of 4096 bytes; only its protection changes.
        let r =
            unsafe { rustix::mm::mprotect(ptr, 4096, MprotectFlags::READ | MprotectFlags::WRITE) };
        // SAFETY: our own mapping, no longer used.
        unsafe { rustix::mm::munmap(ptr, 4096) }?;
        r.map_err(std::io::Error::from)
    }

    /// A reader writes garbage over its own control words for COUNT milliseconds:
    /// the reader region of a split channel, or the reader page of a named one.
    fn scribble(count: u64) -> Result<String, Failure> {
        use rustix::mm::{MapFlags, ProtFlags};
        use std::os::fd::{BorrowedFd, OwnedFd};
        let (path, region) = handed_paths()?;
        let (fd, offset): (OwnedFd, u64) = match region {
            Some(r) => {
                // SAFETY: the supervisor handed us this descriptor; only borrowed to dup it.
                let r = unsafe { BorrowedFd::borrow_raw(r) };
                let fd = rustix::io::fcntl_dupfd_cloexec(r, 0)?;
                (fd, 0)
            }
            None => {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path);
                (f.map_err(|e| Failure::call(&path, e))?.into(), 2 * 4096)
            }
        };
        // SAFETY: a fresh shared mapping of one page of the file.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                4096,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                offset,
            )
        }
        .map_err(|e| Failure::call("map the control words", e))?;
        let start = std::time::Instant::now();
        let mut writes = 0u64;
        while start.elapsed() < Duration::from_millis(count) {
            let byte = (writes % 251) as u8 | 0x5a;
            // SAFETY: inside our own one-page mapping (never unmapped: the process ends).
            unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), byte, 4096) };
            writes += 1;
            std::thread::sleep(Duration::from_micros(50));
        }
        Ok(format!("scribbled {writes} times over its control words"))
    }

    /// A CAN client's attacks on its gateway channels (`BULKHEAD_CAN_<PEER_BUS>`):
    /// truncate every handed file, then write garbage over everything it can write
    /// (its reader region, the message file it writes) for COUNT ms. Fails if a
    /// truncation succeeded.
    fn attack_can(count: u64) -> Result<String, Failure> {
        use std::os::fd::{BorrowedFd, OwnedFd};
        use std::os::unix::fs::FileExt;
        let bus = env("PEER_BUS")?;
        let var = bulkhead_chan::env_name("BULKHEAD_CAN_", &bus);
        let value = env(&var)?;
        let mut files = Vec::new();
        for part in value.split(',') {
            let Some(fds) = part.strip_prefix("fd:") else {
                // A named channel (older bulkhead): its /dev/shm object.
                let path = format!("/dev/shm/{}{part}", bulkhead_chan::PREFIX);
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path);
                files.push(f.map_err(|e| Failure::call(&path, e))?);
                continue;
            };
            for n in fds.split(':') {
                let n: i32 = n
                    .parse()
                    .map_err(|e| Failure::call(format!("{var}={value}"), e))?;
                // SAFETY: the supervisor handed us this descriptor; only borrowed to dup it.
                let fd = unsafe { BorrowedFd::borrow_raw(n) };
                let fd: OwnedFd = rustix::io::fcntl_dupfd_cloexec(fd, 0)?;
                files.push(std::fs::File::from(fd));
            }
        }
        let mut refused = 0;
        for f in &files {
            refused += attack("ftruncate", f.set_len(1)) as usize;
        }
        let garbage = [0xa5u8; 4096];
        let start = std::time::Instant::now();
        let mut writes = 0u64;
        while start.elapsed() < Duration::from_millis(count) {
            for f in &files {
                for page in 0..4 {
                    writes += u64::from(f.write_at(&garbage, page * 4096).is_ok());
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if refused < files.len() {
            return Err(Failure::Check(format!(
                "{} truncations succeeded",
                files.len() - refused
            )));
        }
        Ok(format!(
            "all {refused} truncations refused; {writes} garbage pages written"
        ))
    }

    fn echo(count: u64, spin: u32) -> Result<String, Failure> {
        let sock = socket();
        let input = Channel::receive_from(&sock)?;
        let output = Channel::receive_from(&sock)?;
        let (mut rx, mut tx) = (input.receiver()?, output.sender()?);
        rx.set_spin(spin);
        tx.set_spin(spin);
        let mut m = [0u8; 32];
        for n in 0..count {
            rx.read_timeout(&mut m, TIMEOUT)
                .map_err(|e| Failure::call(format!("echo read {n}"), e))?;
            tx.write_timeout(&m, TIMEOUT)
                .map_err(|e| Failure::call(format!("echo write {n}"), e))?;
        }
        Ok(format!(
            "echoed {count}; sleeps {}",
            rx.sleeps() + tx.sleeps()
        ))
    }

    /// Creates named fifo channel `stale-COUNT`, attaches a sender and exits
    /// without destroying it, as a crashed creator would.
    fn create_named(id: u64) -> Result<String, Failure> {
        let spec = bulkhead_chan::Spec::fifo(&format!("stale-{id}"), 32, 4);
        let chan = Channel::create_named(&spec)?;
        let tx = chan.sender()?;
        std::mem::forget(tx);
        Ok(format!("created stale-{id}"))
    }

    pub fn main() -> ExitCode {
        let args: Vec<String> = std::env::args().collect();
        let usage = "usage: bulkhead-chan-peer fifo-recv|fifo-send|fifo-drain|latest-recv|latest-send|attack-reader|scribble|attack-can|echo|create-named COUNT [SPIN] (socket on fd 3)";
        let count = args.get(2).and_then(|c| c.parse::<u64>().ok());
        let spin = args.get(3).map_or(Some(0), |s| s.parse::<u32>().ok());
        let (Some(role), Some(count), Some(spin)) = (args.get(1), count, spin) else {
            eprintln!("{usage}");
            return ExitCode::from(2);
        };
        let r = match role.as_str() {
            "fifo-recv" => fifo_recv(count),
            "fifo-send" => fifo_send(count),
            "fifo-drain" => fifo_drain(),
            "latest-recv" => latest_recv(count),
            "latest-send" => latest_send(count),
            "attack-reader" => attack_reader(count),
            "scribble" => scribble(count),
            "attack-can" => attack_can(count),
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
