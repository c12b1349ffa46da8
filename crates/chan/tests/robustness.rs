//! A peer that corrupts the shared memory can only cause errors on the other
//! side. The "hostile peer" here is a separate read-write mapping of the
//! channel file, exactly what a misbehaving process holding the fd can do.

use bulkhead_chan::ctrl::Side;
use bulkhead_chan::layout::VERSION;
use bulkhead_chan::{Channel, OpenError, RecvError, SendError, Spec};
use rustix::fd::AsFd;
use rustix::mm::{MapFlags, ProtFlags};
use std::time::{Duration, Instant};

const PAGE: usize = 4096;
const WRITER: usize = PAGE;
const READER: usize = 2 * PAGE;
// Offsets of the words inside a side's page.
const SEQ: usize = std::mem::offset_of!(Side, seq);
const PAIR: usize = std::mem::offset_of!(Side, pair);

/// A read-write mapping of the whole channel, unmapped on drop.
struct Hostile {
    ptr: *mut u8,
    len: usize,
}

impl Hostile {
    fn map(chan: &Channel) -> Hostile {
        let len = rustix::fs::fstat(chan).unwrap().st_size as usize;
        // SAFETY: fresh shared mapping of a file at least len bytes long.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                chan.as_fd(),
                0,
            )
        }
        .unwrap();
        Hostile {
            ptr: ptr.cast(),
            len,
        }
    }
    fn poke32(&self, off: usize, v: u32) {
        assert!(off + 4 <= self.len);
        // SAFETY: in bounds and 4-aligned; volatile because other mappings
        // of the page are concurrently used (that is the point).
        unsafe { (self.ptr.add(off) as *mut u32).write_volatile(v) }
    }
    fn peek32(&self, off: usize) -> u32 {
        // SAFETY: as in poke32.
        unsafe { (self.ptr.add(off) as *const u32).read_volatile() }
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { rustix::mm::munmap(self.ptr.cast(), self.len).unwrap() };
    }
}

fn dup(chan: &Channel) -> rustix::fd::OwnedFd {
    chan.as_fd().try_clone_to_owned().unwrap()
}

#[test]
fn paper_programs_1_and_2() {
    // DriveOS Programs 1-2: struct packet {int X; int Y}; channel 101 created
    // by the sender with ring length 10; the receiver connects; {10, 20} arrives.
    let name = format!("{}-101", std::process::id());
    let created = Channel::create_named(&Spec::fifo(&name, 8, 10)).unwrap();
    let mut tx = created.sender().unwrap();
    let connected = Channel::open_named(&name).unwrap();
    assert_eq!(connected.meta().kind, bulkhead_chan::Kind::Fifo);
    assert_eq!((connected.meta().msg_size, connected.meta().depth), (8, 10));
    assert_eq!(connected.meta().name, name);
    let mut rx = connected.receiver().unwrap();
    let p_snd: Vec<u8> = [10i32, 20].iter().flat_map(|v| v.to_ne_bytes()).collect();
    tx.write(&p_snd).unwrap();
    let mut p_rec = [0u8; 8];
    rx.read(&mut p_rec).unwrap();
    assert_eq!(i32::from_ne_bytes(p_rec[..4].try_into().unwrap()), 10);
    assert_eq!(i32::from_ne_bytes(p_rec[4..].try_into().unwrap()), 20);
    drop((tx, rx));
    created.destroy().unwrap();
    assert!(matches!(
        Channel::open_named(&name),
        Err(OpenError::NotFound(_))
    ));
}

#[test]
fn corrupt_writer_index_is_an_error_for_the_reader() {
    let chan = Channel::create(&Spec::fifo("rb-w", 32, 4)).unwrap();
    let (mut tx, mut rx) = (chan.sender().unwrap(), chan.receiver().unwrap());
    tx.write(&[1; 32]).unwrap();
    let h = Hostile::map(&chan);
    for bad in [8, 12345, 0x7fff_ffff] {
        h.poke32(WRITER + SEQ, bad);
        let mut m = [0u8; 32];
        assert!(
            matches!(rx.try_read(&mut m), Err(RecvError::Corrupt(_))),
            "head {bad}"
        );
        assert!(matches!(
            rx.read_timeout(&mut m, Duration::from_millis(10)),
            Err(RecvError::Corrupt(_))
        ));
    }
}

#[test]
fn corrupt_reader_index_is_an_error_for_the_writer() {
    let chan = Channel::create(&Spec::fifo("rb-r", 32, 4)).unwrap();
    let (mut tx, _rx) = (chan.sender().unwrap(), chan.receiver().unwrap());
    for _ in 0..4 {
        tx.write(&[2; 32]).unwrap();
    }
    let h = Hostile::map(&chan);
    h.poke32(READER + SEQ, 999);
    assert!(matches!(tx.try_write(&[3; 32]), Err(SendError::Corrupt(_))));
    assert!(matches!(
        tx.write_timeout(&[3; 32], Duration::from_millis(10)),
        Err(SendError::Corrupt(_))
    ));
}

#[test]
fn a_stuck_peer_cannot_hang_a_timed_call() {
    let chan = Channel::create(&Spec::fifo("rb-stuck", 32, 2)).unwrap();
    let (mut tx, mut rx) = (chan.sender().unwrap(), chan.receiver().unwrap());
    let mut m = [0u8; 32];
    let t = Instant::now();
    assert!(matches!(
        rx.read_timeout(&mut m, Duration::from_millis(50)),
        Err(RecvError::Timeout)
    ));
    assert!((Duration::from_millis(50)..Duration::from_secs(10)).contains(&t.elapsed()));
    tx.write(&m).unwrap();
    tx.write(&m).unwrap();
    let t = Instant::now();
    assert!(matches!(
        tx.write_timeout(&m, Duration::from_millis(50)),
        Err(SendError::Timeout)
    ));
    assert!((Duration::from_millis(50)..Duration::from_secs(10)).contains(&t.elapsed()));
}

#[test]
fn corrupt_four_slot_words_are_errors_for_the_reader_only() {
    let chan = Channel::create(&Spec::latest("rb-4", 16)).unwrap();
    let (mut tx, mut rx) = (chan.sender().unwrap(), chan.receiver().unwrap());
    let mut m = [0u8; 16];
    assert!(matches!(rx.try_read(&mut m), Err(RecvError::Empty)));
    tx.write(&[5; 16]).unwrap();
    rx.read(&mut m).unwrap();
    assert_eq!(m, [5; 16]);
    let h = Hostile::map(&chan);
    h.poke32(WRITER + PAIR, 7); // latest
    assert!(matches!(rx.read(&mut m), Err(RecvError::Corrupt(_))));
    h.poke32(READER + PAIR, 5); // reading: the writer uses its low bit only
    tx.write(&[6; 16]).unwrap();
    h.poke32(READER + PAIR, 0);
    rx.read(&mut m).unwrap();
    assert_eq!(m, [6; 16], "the writer kept publishing through the garbage");
}

#[test]
fn every_header_corruption_is_rejected_or_harmless() {
    let chan = Channel::create(&Spec::fifo("rb-hdr", 24, 8)).unwrap();
    let h = Hostile::map(&chan);
    for off in 0..144 {
        for bit in [0x01u32, 0x80, 0x8000_0000] {
            let word = off & !3;
            let old = h.peek32(word);
            h.poke32(word, old ^ bit.rotate_left(8 * (off as u32 % 4)));
            match Channel::from_fd(dup(&chan)) {
                Err(OpenError::BadHeader(_)) => {}
                Err(e) => panic!("offset {off}: unexpected {e}"),
                // Fields outside the layout (creator pid/start, name tail, padding).
                Ok(c) => {
                    let (mut tx, mut rx) = (c.sender().unwrap(), c.receiver().unwrap());
                    tx.write(&[off as u8; 24]).unwrap();
                    let mut m = [0u8; 24];
                    rx.read(&mut m).unwrap();
                    assert_eq!(m, [off as u8; 24]);
                }
            }
            h.poke32(word, old);
        }
    }
    let e = {
        h.poke32(8, VERSION + 1);
        Channel::from_fd(dup(&chan)).unwrap_err().to_string()
    };
    let want = format!("version {}, want {VERSION}", VERSION + 1);
    assert!(e.contains(&want), "{e}");
}

#[test]
fn memfd_is_sealed_and_unsealed_fds_are_refused() {
    let chan = Channel::create(&Spec::fifo("rb-seal", 8, 2)).unwrap();
    assert!(
        rustix::fs::ftruncate(&chan, 0).is_err(),
        "peer must not shrink a channel"
    );
    assert!(
        rustix::fs::ftruncate(&chan, 1 << 20).is_err(),
        "nor grow it"
    );
    let plain =
        rustix::fs::memfd_create("bulkhead-chan-test-plain", rustix::fs::MemfdFlags::CLOEXEC)
            .unwrap();
    rustix::fs::ftruncate(&plain, 1 << 16).unwrap();
    let e = Channel::from_fd(plain).unwrap_err().to_string();
    assert!(e.contains("not sealed"), "{e}");
    let sealed_empty = rustix::fs::memfd_create(
        "bulkhead-chan-test-empty",
        rustix::fs::MemfdFlags::ALLOW_SEALING,
    )
    .unwrap();
    rustix::fs::fcntl_add_seals(&sealed_empty, rustix::fs::SealFlags::SHRINK).unwrap();
    let e = Channel::from_fd(sealed_empty).unwrap_err().to_string();
    assert!(e.contains("shorter than a page"), "{e}");
}

/// Permissions of this process's mappings of the memfd named `name`, as
/// (offset in file, length, perms), from /proc/self/maps.
fn mappings_of(name: &str) -> Vec<(u64, u64, String)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mut v: Vec<(u64, u64, String)> = maps
        .lines()
        .filter(|l| {
            l.contains(&format!("memfd:bulkhead-chan-{name} "))
                || l.ends_with(&format!("memfd:bulkhead-chan-{name} (deleted)"))
        })
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (a, b) = f[0].split_once('-').unwrap();
            let len = u64::from_str_radix(b, 16).unwrap() - u64::from_str_radix(a, 16).unwrap();
            (
                u64::from_str_radix(f[2], 16).unwrap(),
                len,
                f[1].to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn each_side_can_write_only_its_own_pages() {
    let chan = Channel::create(&Spec::fifo("rb-prot-rx", 32, 300)).unwrap();
    let rx = chan.receiver().unwrap();
    let p = PAGE as u64;
    let data = 3 * p; // 300 * 32 bytes, rounded up to pages
    assert_eq!(
        mappings_of("rb-prot-rx"),
        vec![
            (0, 2 * p, "r--s".into()),
            (2 * p, p, "rw-s".into()),
            (3 * p, data, "r--s".into())
        ]
    );
    drop(rx);
    let chan = Channel::create(&Spec::latest("rb-prot-tx", 32)).unwrap();
    let _tx = chan.sender().unwrap();
    assert_eq!(
        mappings_of("rb-prot-tx"),
        vec![
            (0, p, "r--s".into()),
            (p, p, "rw-s".into()),
            (2 * p, p, "r--s".into()),
            (3 * p, p, "rw-s".into())
        ]
    );
}

#[test]
fn wrong_sizes_and_double_ends_are_refused() {
    let chan = Channel::create(&Spec::fifo("rb-args", 8, 2)).unwrap();
    let (mut tx, mut rx) = (chan.sender().unwrap(), chan.receiver().unwrap());
    assert!(matches!(
        tx.write(&[0; 9]),
        Err(SendError::Length {
            len: 9,
            msg_size: 8
        })
    ));
    assert!(matches!(
        rx.read(&mut [0; 7]),
        Err(RecvError::Length {
            len: 7,
            msg_size: 8
        })
    ));
    assert!(matches!(chan.sender(), Err(OpenError::Busy(_))));
    assert!(matches!(chan.receiver(), Err(OpenError::Busy(_))));
    assert!(matches!(
        Channel::create(&Spec::fifo("a/b", 8, 2)),
        Err(OpenError::Invalid(_))
    ));
    assert!(matches!(
        Channel::create(&Spec::fifo("ok", 0, 2)),
        Err(OpenError::Invalid(_))
    ));
    assert!(matches!(
        Channel::create(&Spec::fifo("ok", 8, 0)),
        Err(OpenError::Invalid(_))
    ));
    drop(tx);
    let mut tx = chan.sender().expect("a closed end can be reopened");
    tx.write(&[1; 8]).unwrap();
    let mut m = [0; 8];
    rx.read(&mut m).unwrap();
    assert_eq!(m, [1; 8]);
}

/// A `drop_oldest` fifo's positions (the writer's messages written and floor, the
/// reader's next message: words 24 and 32 of a side) scribbled with any value: every
/// slot is a position modulo the depth, so the other side never leaves the message
/// area, whatever it reads; it gets messages, none or errors, never a fault.
#[test]
fn scribbled_overwriting_positions_keep_each_side_inside_the_ring() {
    let spec =
        Spec::fifo("rob-overwrite", 32, 4).with_overflow(bulkhead_chan::Overflow::DropOldest);
    let chan = Channel::create(&spec).unwrap();
    let mut tx = chan.sender().unwrap();
    let mut rx = chan.receiver().unwrap();
    let hostile = Hostile::map(&chan);
    let poke64 = |off: usize, v: u64| {
        hostile.poke32(off, v as u32);
        hostile.poke32(off + 4, (v >> 32) as u32);
    };
    let mut buf = [0u8; 32];
    for v in [u64::MAX, 1 << 40, 3, 0, u64::MAX - 1] {
        poke64(WRITER + 24, v);
        poke64(WRITER + 32, v.rotate_left(7));
        let _ = rx.try_read(&mut buf);
        poke64(READER + 24, v.wrapping_mul(3));
        let _ = tx.try_write(&[7u8; 32]);
        let _ = rx.try_read(&mut buf);
    }
}
