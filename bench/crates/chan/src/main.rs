//! Benchmark of bulkhead channels between two processes pinned to CPU 0 and
//! CPU 1, 32-byte payload: round trip (median, p99) and one-way throughput
//! of bulkhead fifo (busy-poll and blocking), bulkhead latest, a bare SPSC
//! ring (the physical limit), a raw futex ping-pong, iceoryx2 and a Unix
//! socket. Prints a table, the channel targets against what was measured,
//! and one JSON object as its last line. Each figure is the median of 3 runs,
//! interleaved (every transport once, then again). `--quick`: 20x fewer round
//! trips and 10x fewer one-way messages, one run each (seconds instead of minutes).
//!
//! The parent runs each measurement against a child (this same executable,
//! `child TRANSPORT PHASE COUNT TAG`) that receives its shared-memory fds
//! over a Unix socket on fd 3.

use bulkhead_chan::{Channel, End, Handover, Receiver, RecvError, SendError, Sender, Spec};
use iceoryx2::prelude::*;
use rustix::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::time::Instant;

type Msg = [u8; 32];
const WARMUP: u64 = 20_000;

/// How much each measurement takes: round trips of the fast (busy-polling) and the
/// sleeping transports, one-way messages of a throughput run, and runs of each.
struct Sizes {
    samples: u64,
    slow_samples: u64,
    tput_msgs: u64,
    runs: usize,
}

/// The full benchmark (minutes on two CPUs).
const FULL: Sizes = Sizes {
    samples: 200_000,
    slow_samples: 50_000,
    tput_msgs: 5_000_000,
    runs: 3,
};

/// `--quick` (`bench/run channels --quick`): a smoke test of seconds whose figures
/// mean little.
const QUICK: Sizes = Sizes {
    samples: 10_000,
    slow_samples: 2_000,
    tput_msgs: 500_000,
    runs: 1,
};
const DEPTH: u32 = 256;

fn msg(n: u64) -> Msg {
    let mut m = [0u8; 32];
    m[..8].copy_from_slice(&n.to_le_bytes());
    m[8..16].copy_from_slice(&(!n).to_le_bytes());
    m
}

fn seq(m: &Msg) -> u64 {
    u64::from_le_bytes(m[..8].try_into().expect("8 bytes"))
}

fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        eprintln!("warning: cannot pin to CPU {cpu}: {e}");
    }
}

/// One end of a two-way (ping/pong) or one-way transport.
trait Link {
    fn send(&mut self, m: &Msg);
    fn recv(&mut self, m: &mut Msg);
}

// ---------- bulkhead fifo / latest ----------

struct Fifo {
    tx: Option<Sender>,
    rx: Option<Receiver>,
    busy: bool,
}

impl Link for Fifo {
    fn send(&mut self, m: &Msg) {
        let tx = self.tx.as_mut().expect("sender");
        if self.busy {
            while let Err(SendError::Full) = tx.try_write(m) {
                std::hint::spin_loop();
            }
        } else {
            tx.write(m).expect("fifo write");
        }
    }
    fn recv(&mut self, m: &mut Msg) {
        let rx = self.rx.as_mut().expect("receiver");
        if self.busy {
            loop {
                match rx.try_read(m) {
                    Err(RecvError::Empty) => std::hint::spin_loop(),
                    r => return r.expect("fifo read"),
                }
            }
        } else {
            rx.read(m).expect("fifo read");
        }
    }
}

struct Latest {
    tx: Option<Sender>,
    rx: Option<Receiver>,
    seen: u32,
}

impl Link for Latest {
    fn send(&mut self, m: &Msg) {
        self.tx
            .as_mut()
            .expect("sender")
            .write(m)
            .expect("latest write");
    }
    fn recv(&mut self, m: &mut Msg) {
        let rx = self.rx.as_mut().expect("receiver");
        while rx.published() == self.seen {
            std::hint::spin_loop();
        }
        self.seen = rx.published();
        rx.read(m).expect("latest read");
    }
}

// ---------- shared memory for the bare ring and the futex ----------

/// A shared anonymous memfd mapping (both processes map the same fd).
struct Shm {
    ptr: *mut u8,
    len: usize,
}

impl Shm {
    fn create(len: usize) -> (Shm, OwnedFd) {
        let fd = rustix::fs::memfd_create("bulkhead-bench-chan", rustix::fs::MemfdFlags::CLOEXEC)
            .expect("memfd");
        rustix::fs::ftruncate(&fd, len as u64).expect("ftruncate");
        (Shm::map(&fd, len), fd)
    }
    fn map(fd: &OwnedFd, len: usize) -> Shm {
        use rustix::mm::{MapFlags, ProtFlags};
        // SAFETY: fresh shared mapping of a file of at least len bytes.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )
        }
        .expect("mmap");
        Shm {
            ptr: ptr.cast(),
            len,
        }
    }
    fn at<T>(&self, off: usize) -> &T {
        assert!(off + size_of::<T>() <= self.len && off % align_of::<T>() == 0);
        // SAFETY: in bounds, aligned; only atomics and byte arrays are used.
        unsafe { &*(self.ptr.add(off) as *const T) }
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}

/// The physical limit: a bare SPSC ring (head, tail on their own cache
/// lines, no validation, no sleeping). Two rings: ping at 0, pong at RING.
const RING: usize = 64 * 1024;
const SLOTS_OFF: usize = 256;

struct Bare {
    shm: Shm,
    tx_off: usize,
    rx_off: usize,
    head: u64,
    tail: u64,
}

impl Bare {
    fn new(shm: Shm, parent: bool) -> Bare {
        let (tx_off, rx_off) = if parent { (0, RING) } else { (RING, 0) };
        Bare {
            shm,
            tx_off,
            rx_off,
            head: 0,
            tail: 0,
        }
    }
    fn slot(&self, ring: usize, i: u64) -> *mut u8 {
        let off = ring + SLOTS_OFF + (i % DEPTH as u64) as usize * 32;
        assert!(off + 32 <= self.shm.len);
        // SAFETY: in bounds by the assert.
        unsafe { self.shm.ptr.add(off) }
    }
}

impl Link for Bare {
    fn send(&mut self, m: &Msg) {
        let tail: &AtomicU64 = self.shm.at(self.tx_off + 128);
        while self.head - tail.load(Acquire) == DEPTH as u64 {
            std::hint::spin_loop();
        }
        // SAFETY: the slot is free (head - tail < depth) and in bounds.
        unsafe { copy_in(m, self.slot(self.tx_off, self.head)) };
        self.head += 1;
        self.shm
            .at::<AtomicU64>(self.tx_off)
            .store(self.head, Release);
    }
    fn recv(&mut self, m: &mut Msg) {
        let head: &AtomicU64 = self.shm.at(self.rx_off);
        while head.load(Acquire) == self.tail {
            std::hint::spin_loop();
        }
        // SAFETY: the slot is filled (head > tail) and in bounds.
        unsafe {
            std::ptr::copy_nonoverlapping(self.slot(self.rx_off, self.tail), m.as_mut_ptr(), 32)
        };
        self.tail += 1;
        self.shm
            .at::<AtomicU64>(self.rx_off + 128)
            .store(self.tail, Release);
    }
}

/// Copies `m` into a slot the way a fifo `Sender` does: by 8-byte words, so that a
/// message the caller stored by 8-byte words is forwarded from the store buffer to
/// each load. A 16-byte load over two 8-byte stores (what `copy_nonoverlapping` of
/// 32 bytes compiles to) cannot be forwarded and waits until those stores, and every
/// older one, have left the store buffer: the ring would pay a stall the fifo does not.
///
/// # Safety
/// `dst` must be valid for 32 bytes of writes.
unsafe fn copy_in(m: &Msg, dst: *mut u8) {
    for (i, word) in m.chunks_exact(8).enumerate() {
        let mut word = u64::from_ne_bytes(word.try_into().expect("8 bytes"));
        // SAFETY: an empty asm block that only "changes" a register: it keeps the
        // compiler from merging the 8-byte loads into wider ones, and does nothing.
        unsafe { std::arch::asm!("/* {0} */", inout(reg) word, options(pure, nomem, nostack)) };
        // SAFETY: word `i` of `dst`'s 32 bytes (precondition).
        unsafe { std::ptr::write_unaligned(dst.cast::<u64>().add(i), word) };
    }
}

/// Raw futex ping-pong: each side publishes a sequence word (and a 32-byte
/// payload next to it), wakes the other, and sleeps on the other's word.
struct Futex {
    shm: Shm,
    mine: usize,
    theirs: usize,
    seen: u32,
}

impl Link for Futex {
    fn send(&mut self, m: &Msg) {
        // SAFETY: payload area at +64 of our half, in bounds.
        unsafe { std::ptr::copy_nonoverlapping(m.as_ptr(), self.shm.ptr.add(self.mine + 64), 32) };
        let word: &AtomicU32 = self.shm.at(self.mine);
        word.fetch_add(1, Release);
        rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), 1)
            .expect("futex wake");
    }
    fn recv(&mut self, m: &mut Msg) {
        let word: &AtomicU32 = self.shm.at(self.theirs);
        while word.load(Acquire) == self.seen {
            let _ = rustix::thread::futex::wait(
                word,
                rustix::thread::futex::Flags::empty(),
                self.seen,
                None,
            );
        }
        self.seen = word.load(Acquire);
        // SAFETY: payload area of the other half, in bounds.
        unsafe {
            std::ptr::copy_nonoverlapping(self.shm.ptr.add(self.theirs + 64), m.as_mut_ptr(), 32)
        };
    }
}

// ---------- iceoryx2 and the Unix socket ----------

/// The iceoryx2 files of one invocation of this benchmark (the parent's pid `owner`,
/// which begins every tag): a root directory and a file prefix of their own, so that
/// [`IceFiles::remove`] removes exactly them, never another iceoryx2 user's files nor
/// those of another invocation running at the same time.
struct IceFiles {
    root: String,
    prefix: String,
}

impl IceFiles {
    fn of(owner: &str) -> IceFiles {
        IceFiles {
            root: format!("/tmp/bulkhead-bench-iceoryx2-{owner}/"),
            prefix: format!("bulkhead_bench_iox2_{owner}_"),
        }
    }

    /// The files of the invocation whose run `tag` is (`PID-TRANSPORT-...`).
    fn of_tag(tag: &str) -> IceFiles {
        IceFiles::of(tag.split('-').next().unwrap_or(tag))
    }

    fn config(&self) -> Config {
        let mut config = Config::default();
        config.global.prefix = FileName::new(self.prefix.as_bytes()).expect("prefix");
        config
            .global
            .set_root_path(&Path::new(self.root.as_bytes()).expect("root"));
        config
    }

    /// Removes what iceoryx2 keeps after its last node is gone (its global
    /// management segment `/dev/shm/PREFIX..._node.0_9_3.global_mgmt` and its
    /// directories), and what a failed run left of its services.
    fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.root);
        for entry in std::fs::read_dir("/dev/shm")
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(&self.prefix)
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// Removes this invocation's iceoryx2 files when dropped: at the end of `main`, and
/// while a failed measurement (a panic) unwinds through it.
struct IceCleanup(IceFiles);

impl Drop for IceCleanup {
    fn drop(&mut self) {
        self.0.remove();
    }
}

/// Fields drop in order: the ports before the node that owns their resources.
struct Ice {
    publisher: Option<iceoryx2::port::publisher::Publisher<ipc::Service, Msg, ()>>,
    subscriber: Option<iceoryx2::port::subscriber::Subscriber<ipc::Service, Msg, ()>>,
    _node: Node<ipc::Service>,
}

impl Ice {
    fn new(tag: &str, out: Option<&str>, inp: Option<&str>) -> Ice {
        let node = NodeBuilder::new()
            .config(&IceFiles::of_tag(tag).config())
            .create::<ipc::Service>()
            .expect("iceoryx2 node");
        let service = |dir: &str| {
            let name = format!("bulkhead/bench/{tag}/{dir}");
            node.service_builder(&name.as_str().try_into().expect("service name"))
                .publish_subscribe::<Msg>()
                .enable_safe_overflow(false)
                .subscriber_max_buffer_size(DEPTH as usize)
                .history_size(0)
                .open_or_create()
                .expect("iceoryx2 service")
        };
        let publisher = out.map(|d| {
            service(d)
                .publisher_builder()
                .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
                .create()
                .expect("publisher")
        });
        let subscriber = inp.map(|d| {
            service(d)
                .subscriber_builder()
                .create()
                .expect("subscriber")
        });
        Ice {
            publisher,
            subscriber,
            _node: node,
        }
    }
}

impl Link for Ice {
    fn send(&mut self, m: &Msg) {
        let sample = self
            .publisher
            .as_ref()
            .expect("publisher")
            .loan_uninit()
            .expect("loan");
        sample.write_payload(*m).send().expect("send");
    }
    fn recv(&mut self, m: &mut Msg) {
        let sub = self.subscriber.as_ref().expect("subscriber");
        loop {
            if let Some(s) = sub.receive().expect("receive") {
                *m = *s;
                return;
            }
            std::hint::spin_loop();
        }
    }
}

struct Sock(UnixStream);

impl Link for Sock {
    fn send(&mut self, m: &Msg) {
        self.0.write_all(m).expect("socket write");
    }
    fn recv(&mut self, m: &mut Msg) {
        self.0.read_exact(m).expect("socket read");
    }
}

// ---------- the measurements ----------

fn round_trips(link: &mut impl Link, samples: u64) -> Vec<u64> {
    let mut rtt = Vec::with_capacity(samples as usize);
    let mut back = [0u8; 32];
    for i in 0..WARMUP + samples {
        let m = msg(i);
        let t = Instant::now();
        link.send(&m);
        link.recv(&mut back);
        let dt = t.elapsed().as_nanos() as u64;
        assert_eq!(back, m, "echo returned a different message");
        if i >= WARMUP {
            rtt.push(dt);
        }
    }
    rtt.sort_unstable();
    rtt
}

fn echo(link: &mut impl Link, n: u64) {
    let mut m = [0u8; 32];
    for _ in 0..n {
        link.recv(&mut m);
        link.send(&m);
    }
}

fn sink(link: &mut impl Link, n: u64) {
    let mut m = [0u8; 32];
    for i in 0..n {
        link.recv(&mut m);
        assert_eq!(seq(&m), i, "lost or reordered message");
    }
}

fn source(link: &mut impl Link, n: u64) {
    for i in 0..n {
        link.send(&msg(i));
    }
}

struct Peer {
    child: Child,
    ctl: UnixStream,
}

impl Peer {
    fn spawn(transport: &str, phase: &str, n: u64, tag: &str) -> Peer {
        let (ctl, theirs) = UnixStream::pair().expect("socketpair");
        let raw = theirs.as_raw_fd();
        let mut cmd = Command::new(std::env::current_exe().expect("own path"));
        cmd.args(["child", transport, phase, &n.to_string(), tag]);
        // SAFETY: dup2 is async-signal-safe; it puts the socket on fd 3.
        unsafe {
            cmd.pre_exec(move || {
                let mut three = OwnedFd::from_raw_fd(3);
                let r = rustix::io::dup2(rustix::fd::BorrowedFd::borrow_raw(raw), &mut three);
                std::mem::forget(three);
                r.map_err(std::io::Error::from)
            });
        }
        let child = cmd.spawn().expect("spawn child");
        Peer { child, ctl }
    }
    fn give(&self, fd: impl AsFd) {
        bulkhead_chan::send_fd(self.ctl.as_fd(), fd.as_fd()).expect("send fd");
    }
    /// Waits for the child's one-byte "done" and its exit.
    fn done(mut self) {
        let mut b = [0u8; 1];
        self.ctl.read_exact(&mut b).expect("child done");
        assert!(self.child.wait().expect("wait").success(), "child failed");
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

/// Two fifo (or latest) channels ping/pong, granted to the child.
fn chan_pair(peer: &Peer, latest: bool, tag: &str) -> (Sender, Receiver) {
    let spec = |d: &str| {
        let name = format!("bench-{tag}-{d}");
        if latest {
            Spec::latest(&name, 32)
        } else {
            Spec::fifo(&name, 32, DEPTH)
        }
    };
    // Split channels, as `bulkhead run` makes them: the child gets the reader's end
    // of ping (message file read-only) and the writer's end of pong.
    let (ping, pong) = (
        Channel::create_split(&spec("ping")).expect("chan"),
        Channel::create_split(&spec("pong")).expect("chan"),
    );
    for (chan, end) in [(&ping, End::Reader), (&pong, End::Writer)] {
        for fd in chan.handover(end).expect("handover").into_fds() {
            peer.give(&fd);
        }
    }
    (
        ping.sender().expect("sender"),
        pong.receiver().expect("receiver"),
    )
}

fn link_for(
    transport: &str,
    peer: &Peer,
    tag: &str,
    one_way: bool,
) -> Box<dyn FnMut(u64, bool) -> Vec<u64>> {
    macro_rules! run {
        ($link:expr) => {{
            let mut link = $link;
            Box::new(move |n, rtt| {
                if rtt {
                    round_trips(&mut link, n)
                } else {
                    source(&mut link, n);
                    Vec::new()
                }
            })
        }};
    }
    match transport {
        "fifo" | "fifo-blocking" => {
            let (mut tx, mut rx) = chan_pair(peer, false, tag);
            tx.set_spin(0);
            rx.set_spin(0);
            run!(Fifo {
                tx: Some(tx),
                rx: (!one_way).then_some(rx),
                busy: transport == "fifo"
            })
        }
        "latest" => {
            let (tx, rx) = chan_pair(peer, true, tag);
            run!(Latest {
                tx: Some(tx),
                rx: Some(rx),
                seen: 0
            })
        }
        "bare" => {
            let (shm, fd) = Shm::create(2 * RING);
            peer.give(&fd);
            run!(Bare::new(shm, true))
        }
        "futex" => {
            let (shm, fd) = Shm::create(4096);
            peer.give(&fd);
            run!(Futex {
                shm,
                mine: 0,
                theirs: 2048,
                seen: 0
            })
        }
        "iceoryx2" => run!(Ice::new(tag, Some("ping"), (!one_way).then_some("pong"))),
        "unix" => {
            let (a, b) = UnixStream::pair().expect("socketpair");
            peer.give(&b);
            run!(Sock(a))
        }
        _ => unreachable!("unknown transport {transport}"),
    }
}

fn child_link(
    transport: &str,
    ctl: &OwnedFd,
    tag: &str,
    one_way: bool,
) -> Box<dyn FnMut(u64, bool)> {
    macro_rules! run {
        ($link:expr) => {{
            let mut link = $link;
            Box::new(move |n, rtt| {
                if rtt {
                    echo(&mut link, n)
                } else {
                    sink(&mut link, n)
                }
            })
        }};
    }
    let fd = || bulkhead_chan::recv_fd(ctl.as_fd()).expect("receive fd");
    match transport {
        "fifo" | "fifo-blocking" | "latest" => {
            let handed = || Handover {
                data: fd(),
                region: fd(),
                writer_lock: fd(),
                reader_lock: fd(),
            };
            let ping = Channel::from_handover(handed()).expect("ping");
            let pong = Channel::from_handover(handed()).expect("pong");
            let (mut rx, mut tx) = (ping.receiver().expect("rx"), pong.sender().expect("tx"));
            rx.set_spin(0);
            tx.set_spin(0);
            if transport == "latest" {
                run!(Latest {
                    tx: Some(tx),
                    rx: Some(rx),
                    seen: 0
                })
            } else {
                run!(Fifo {
                    tx: (!one_way).then_some(tx),
                    rx: Some(rx),
                    busy: transport == "fifo"
                })
            }
        }
        "bare" => run!(Bare::new(Shm::map(&fd(), 2 * RING), false)),
        "futex" => run!(Futex {
            shm: Shm::map(&fd(), 4096),
            mine: 2048,
            theirs: 0,
            seen: 0
        }),
        "iceoryx2" => run!(Ice::new(tag, (!one_way).then_some("pong"), Some("ping"))),
        "unix" => run!(Sock(UnixStream::from(fd()))),
        _ => unreachable!("unknown transport {transport}"),
    }
}

fn child(args: &[String]) {
    set_log_level(LogLevel::Error);
    pin(1);
    let (transport, phase, n, tag) = (
        &args[0],
        &args[1],
        args[2].parse::<u64>().expect("count"),
        &args[3],
    );
    // SAFETY: the parent put our control socket on fd 3.
    let ctl = unsafe { OwnedFd::from_raw_fd(3) };
    let mut run = child_link(transport, &ctl, tag, phase == "tput");
    let mut ctl = UnixStream::from(ctl);
    ctl.write_all(b"r").expect("ready");
    run(n, phase == "rtt");
    ctl.write_all(b"d").expect("done");
}

/// What one transport measured in each run: (rtt median, rtt p99) and one-way msg/s.
#[derive(Default)]
struct Runs {
    rtt: Vec<(u64, u64)>,
    tput: Vec<f64>,
}

impl Runs {
    /// Median over the runs of the rtt medians and of the rtt p99s.
    fn rtt(&self) -> (u64, u64) {
        (
            median(self.rtt.iter().map(|r| r.0).collect()),
            median(self.rtt.iter().map(|r| r.1).collect()),
        )
    }
    /// Median over the runs of the throughput, if it was measured.
    fn tput(&self) -> Option<f64> {
        (!self.tput.is_empty()).then(|| {
            let mut t = self.tput.clone();
            t.sort_unstable_by(f64::total_cmp);
            t[t.len() / 2]
        })
    }
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Measures every transport `sizes.runs` times, one round over all of them after the
/// other (interleaved), so that a burst of other load on the machine disturbs one run
/// of several transports rather than every run of one; the median of the runs stands
/// for the transport.
fn measure_all(transports: &[(&str, &str, u64)], sizes: &Sizes) -> Vec<Runs> {
    let mut runs: Vec<Runs> = transports.iter().map(|_| Runs::default()).collect();
    for run in 0..sizes.runs {
        for ((key, _, samples), r) in transports.iter().zip(&mut runs) {
            r.rtt.push(measure_rtt(key, *samples, run));
            if ["fifo", "bare", "iceoryx2"].contains(key) {
                r.tput.push(measure_tput(key, sizes.tput_msgs, run));
            }
        }
    }
    runs
}

/// Run `run`'s round trips; each run has a tag (and iceoryx2 services) of its own.
fn measure_rtt(transport: &str, samples: u64, run: usize) -> (u64, u64) {
    let tag = format!("{}-{transport}-rtt{run}", std::process::id());
    let peer = Peer::spawn(transport, "rtt", WARMUP + samples, &tag);
    let mut run = link_for(transport, &peer, &tag, false);
    let mut ready = [0u8; 1];
    (&peer.ctl).read_exact(&mut ready).expect("child ready");
    let rtt = run(samples, true);
    peer.done();
    (rtt[rtt.len() / 2], rtt[rtt.len() * 99 / 100])
}

/// One-way throughput of run `run` in messages per second (until the child has them
/// all).
fn measure_tput(transport: &str, msgs: u64, run: usize) -> f64 {
    let tag = format!("{}-{transport}-tput{run}", std::process::id());
    let peer = Peer::spawn(transport, "tput", msgs, &tag);
    let mut run = link_for(transport, &peer, &tag, true);
    let mut ready = [0u8; 1];
    (&peer.ctl).read_exact(&mut ready).expect("child ready");
    let t = Instant::now();
    run(msgs, false);
    peer.done();
    msgs as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("child") {
        return child(&args[1..]);
    }
    let quick = args.iter().any(|a| a == "--quick");
    args.retain(|a| a != "--quick");
    let sizes = if quick { &QUICK } else { &FULL };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("warning: {cpus} CPU available; the two processes share it");
    }
    set_log_level(LogLevel::Error);
    pin(0);
    let load_start = loadavg();
    let all = [
        ("fifo", "bulkhead fifo (busy-poll)", sizes.samples),
        (
            "fifo-blocking",
            "bulkhead fifo (blocking)",
            sizes.slow_samples,
        ),
        ("latest", "bulkhead latest", sizes.samples),
        ("bare", "bare SPSC ring", sizes.samples),
        ("futex", "raw futex ping-pong", sizes.slow_samples),
        ("iceoryx2", "iceoryx2 0.9 pub/sub", sizes.samples),
        ("unix", "Unix socket", sizes.slow_samples),
    ];
    // Optional arguments select transports (for investigation); the JSON
    // line then lacks the others' keys and the targets are skipped.
    let only: Vec<&str> = args.iter().map(String::as_str).collect();
    let transports: Vec<_> = all
        .into_iter()
        .filter(|t| only.is_empty() || only.contains(&t.0))
        .collect();
    println!(
        "two processes pinned to CPU 0 and 1, 32-byte messages, {} round trips (fast) / {} \
         (sleeping), {} one-way; median of {} interleaved runs each{}",
        sizes.samples,
        sizes.slow_samples,
        sizes.tput_msgs,
        sizes.runs,
        if quick { " (--quick)" } else { "" }
    );
    let runs = {
        let _ice = IceCleanup(IceFiles::of(&std::process::id().to_string()));
        measure_all(&transports, sizes)
    };
    println!(
        "{:<28} {:>12} {:>12} {:>16}",
        "transport", "rtt median", "rtt p99", "one-way msg/s"
    );
    let mut json = Vec::new();
    let mut med = HashMap::new();
    for ((key, label, _), r) in transports.iter().zip(&runs) {
        let ((m, p), tput) = (r.rtt(), r.tput());
        let t = tput.map_or("-".to_string(), |t| format!("{:.2} M", t / 1e6));
        println!("{label:<28} {m:>9} ns {p:>9} ns {t:>16}");
        let k = key.replace('-', "_").replace("bare", "bare_ring");
        json.push(format!("\"{k}_rtt_median_ns\":{m}"));
        json.push(format!("\"{k}_rtt_p99_ns\":{p}"));
        if let Some(t) = tput {
            json.push(format!("\"{k}_throughput_msgs_per_s\":{t:.0}"));
            med.insert(format!("{key}-tput"), t as u64);
        }
        med.insert(key.to_string(), m);
    }
    if !only.is_empty() {
        return;
    }
    check_targets(&med, &mut json);
    json.push(format!("\"loadavg_1m_start\":{load_start}"));
    json.push(format!("\"loadavg_1m_end\":{}", loadavg()));
    println!("{{{}}}", json.join(","));
}

/// The machine's load average over the last minute (`/proc/loadavg`), as JSON (`null`
/// if unreadable): the other work that ran beside the measurement.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "null".into())
}

/// Prints each target against the medians `med` (rtt in ns, `KEY-tput` in msg/s) and
/// adds its value and verdict to `json`.
fn check_targets(med: &HashMap<String, u64>, json: &mut Vec<String>) {
    let r = |a: &str, b: &str| med[a] as f64 / med[b] as f64;
    let checks = [
        (
            "fifo_vs_bare_ring",
            r("fifo", "bare"),
            1.1,
            "fifo rtt <= 1.1 x bare ring",
        ),
        (
            "fifo_throughput_vs_bare_ring",
            r("fifo-tput", "bare-tput"),
            -0.9,
            "fifo msg/s >= 0.9 x bare ring",
        ),
        (
            "fifo_vs_iceoryx2",
            r("fifo", "iceoryx2"),
            0.5,
            "fifo rtt <= 0.5 x iceoryx2",
        ),
        (
            "latest_rtt_us",
            med["latest"] as f64 / 1000.0,
            1.3,
            "latest rtt <= 1.3 us",
        ),
        (
            "fifo_blocking_vs_futex",
            r("fifo-blocking", "futex"),
            1.2,
            "fifo blocking rtt <= 1.2 x raw futex",
        ),
        (
            "fifo_throughput_mmsgs",
            med["fifo-tput"] as f64 / 1e6,
            -10.0,
            "fifo >= 10 M msg/s",
        ),
    ];
    println!("targets:");
    for (key, value, limit, text) in checks {
        let met = if limit < 0.0 {
            value >= -limit
        } else {
            value <= limit
        };
        println!(
            "  {text:<40} measured {value:>7.3}  {}",
            if met { "met" } else { "NOT met" }
        );
        json.push(format!("\"{key}\":{value:.3}"));
        json.push(format!("\"{key}_met\":{met}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shm_has(prefix: &str) -> bool {
        std::fs::read_dir("/dev/shm")
            .expect("/dev/shm")
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(prefix))
    }

    #[test]
    fn a_failed_run_leaves_no_iceoryx2_file_and_removes_no_other() {
        set_log_level(LogLevel::Error);
        let owner = format!("test{}", std::process::id());
        let files = IceFiles::of(&owner);
        // Another invocation's file: its prefix extends this one's owner.
        let other = format!("/dev/shm/bulkhead_bench_iox2_{owner}0_keep");
        std::fs::write(&other, b"").expect("other file");
        let failed = std::panic::catch_unwind(|| {
            let _ice = IceCleanup(IceFiles::of(&owner));
            let node = NodeBuilder::new()
                .config(&IceFiles::of_tag(&format!("{owner}-iceoryx2-tput0")).config())
                .create::<ipc::Service>()
                .expect("node");
            drop(node);
            assert!(
                shm_has(&files.prefix),
                "iceoryx2 keeps its global management segment"
            );
            panic!("a measurement failed");
        });
        assert!(failed.is_err());
        let left = (
            shm_has(&files.prefix),
            std::path::Path::new(&files.root).exists(),
        );
        let kept = std::path::Path::new(&other).exists();
        let _ = std::fs::remove_file(&other);
        assert_eq!(left, (false, false), "this invocation's files are gone");
        assert!(kept, "another invocation's file is kept");
    }
}
