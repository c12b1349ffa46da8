//! Split channels: what each end is handed and what it can (not) do with it. The
//! attacks of a reader on the message file must fail with the kernel's error; a
//! reader that scribbles on its own region only loses its own messages.

use bulkhead_chan::{Channel, End, Error, Handover, OpenError, RecvError, SendError, Spec};
use rustix::fd::{AsRawFd, OwnedFd};
use rustix::io::Errno;
use rustix::mm::{MapFlags, MprotectFlags, ProtFlags};

fn mmap(fd: &OwnedFd, len: usize, prot: ProtFlags) -> Result<*mut u8, Errno> {
    // SAFETY: a fresh shared mapping chosen by the kernel, of a file at least `len` long.
    unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, fd, 0) }
        .map(|p| p.cast())
}

fn unmap(ptr: *mut u8, len: usize) {
    // SAFETY: our own mapping of `len` bytes.
    unsafe { rustix::mm::munmap(ptr.cast(), len).unwrap() };
}

#[test]
fn the_reader_cannot_write_resize_or_remap_the_message_file() {
    let chan = Channel::create_split(&Spec::fifo("split-a", 32, 8)).unwrap();
    let Handover { data, region, .. } = chan.handover(End::Reader).unwrap();
    assert!(data.as_raw_fd() >= 10 && region.as_raw_fd() >= 10);
    let len = rustix::fs::fstat(&data).unwrap().st_size as usize;
    assert_eq!(rustix::io::pwrite(&data, b"x", 0), Err(Errno::BADF));
    assert_eq!(rustix::io::pwrite(&data, b"x", 3 * 4096), Err(Errno::BADF));
    assert!(rustix::fs::ftruncate(&data, 1).is_err());
    assert_eq!(
        mmap(&data, len, ProtFlags::READ | ProtFlags::WRITE).err(),
        Some(Errno::ACCESS)
    );
    let ro = mmap(&data, len, ProtFlags::READ).unwrap();
    // SAFETY: changing the protection of our own mapping (and expecting a refusal).
    let up =
        unsafe { rustix::mm::mprotect(ro.cast(), len, MprotectFlags::READ | MprotectFlags::WRITE) };
    assert_eq!(up, Err(Errno::ACCESS), "mprotect to write must be refused");
    unmap(ro, len);
    // Its own region is writable but sealed: it cannot shrink or grow it.
    assert_eq!(rustix::fs::ftruncate(&region, 1), Err(Errno::PERM));
    assert_eq!(rustix::fs::ftruncate(&region, 1 << 20), Err(Errno::PERM));
    // A reader's channel has no writing end.
    let mine = Channel::from_fds(data, region).unwrap();
    let e = mine
        .sender()
        .err()
        .expect("a reader cannot write")
        .to_string();
    assert!(e.contains("without the right to write"), "{e}");
}

#[test]
fn handed_ends_carry_messages_and_scribbling_hurts_only_the_reader() {
    let chan = Channel::create_split(&Spec::fifo("split-b", 32, 4)).unwrap();
    let writer = chan.handover(End::Writer).unwrap();
    let read_end = chan.handover(End::Reader).unwrap();
    let value = read_end.value();
    let rr = &read_end.region;
    let fds = [
        &read_end.data,
        rr,
        &read_end.writer_lock,
        &read_end.reader_lock,
    ];
    let numbers: Vec<String> = fds.iter().map(|f| f.as_raw_fd().to_string()).collect();
    assert_eq!(value, format!("fd:{}", numbers.join(":")));
    let mut tx = Channel::from_handover(writer).unwrap().sender().unwrap();
    let reader = Channel::open_handed(&value).unwrap();
    let mut rx = reader.receiver().unwrap();
    let mut m = [0u8; 32];
    for i in 0..10u8 {
        tx.write(&[i; 32]).unwrap();
        rx.read(&mut m).unwrap();
        assert_eq!(m, [i; 32]);
    }
    // The reader writes garbage over its whole region.
    let region = mmap(rr, 4096, ProtFlags::READ | ProtFlags::WRITE).unwrap();
    // SAFETY: 4096 bytes of our own writable mapping.
    unsafe { std::ptr::write_bytes(region, 0xa5, 4096) };
    for _ in 0..100 {
        match tx.try_write(&[7; 32]) {
            Ok(()) | Err(SendError::Corrupt(_)) | Err(SendError::Full) => {}
            Err(e) => panic!("the writer failed: {e}"),
        }
    }
    // A writer attaching now is not refused either.
    drop(tx);
    let writer = chan.handover(End::Writer).unwrap();
    let mut tx = Channel::from_handover(writer).unwrap().sender().unwrap();
    // Once the reader repairs its words, the channel works again.
    // SAFETY: as above.
    unsafe { std::ptr::write_bytes(region, 0, 4096) };
    unmap(region, 4096);
    drop(rx);
    let mut rx = reader.receiver().unwrap();
    let _ = rx.try_read(&mut m);
    assert!(tx.try_write(&[9; 32]).is_ok() || rx.try_read(&mut m).is_ok());
}

#[test]
fn the_writer_gets_the_reader_region_read_only() {
    let chan = Channel::create_split(&Spec::latest("split-c", 16)).unwrap();
    let Handover { region, .. } = chan.handover(End::Writer).unwrap();
    assert_eq!(rustix::io::pwrite(&region, b"x", 0), Err(Errno::BADF));
    assert_eq!(
        mmap(&region, 4096, ProtFlags::READ | ProtFlags::WRITE).err(),
        Some(Errno::ACCESS)
    );
}

#[test]
fn bad_handover_values_are_clear_errors() {
    for v in ["fd:", "fd:1", "fd:x:2", "fd:3:-", "fd:3:4", "fd:3:4:5:6:7"] {
        let e = Channel::open_handed(v).err().unwrap().to_string();
        assert!(
            e.contains("fd:<data>:<region>:<writer lock>:<reader lock>"),
            "{v}: {e}"
        );
    }
    let e = Channel::open_handed("fd:900:901:902:903")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("inherited descriptor 900"), "{e}");
    let plain = Channel::create(&Spec::fifo("split-d", 8, 2)).unwrap();
    assert!(plain.handover(End::Reader).is_err());
}

/// The supervisor reads what each end counted from its own descriptors: messages
/// written and read, writes refused on a full fifo, latest messages the reader never
/// saw, and which process holds each end.
#[test]
fn the_creator_reads_both_ends_counters() {
    let me = std::process::id();
    let fifo = Channel::create_split(&Spec::fifo("split-count-f", 8, 2)).unwrap();
    assert_eq!(fifo.counters().unwrap(), Default::default());
    let mut tx = fifo.sender().unwrap();
    let mut rx = fifo.receiver().unwrap();
    tx.try_write(&[1; 8]).unwrap();
    tx.try_write(&[2; 8]).unwrap();
    assert!(matches!(tx.try_write(&[3; 8]), Err(SendError::Full)));
    let mut buf = [0; 8];
    rx.try_read(&mut buf).unwrap();
    let c = fifo.counters().unwrap();
    assert_eq!((c.writer.count, c.writer.lost, c.writer.pid), (2, 1, me));
    assert_eq!((c.reader.count, c.reader.lost, c.reader.pid), (1, 0, me));
    assert!(!c.writer.closed);
    drop(tx);
    let c = fifo.counters().unwrap();
    assert!(c.writer.closed && c.writer.pid == 0, "{c:?}");

    let latest = Channel::create_split(&Spec::latest("split-count-l", 8)).unwrap();
    let mut tx = latest.sender().unwrap();
    let mut rx = latest.receiver().unwrap();
    for i in 0..3 {
        tx.try_write(&[i; 8]).unwrap();
    }
    rx.try_read(&mut buf).unwrap();
    tx.try_write(&[9; 8]).unwrap();
    rx.try_read(&mut buf).unwrap();
    rx.try_read(&mut buf).unwrap();
    let c = latest.counters().unwrap();
    assert_eq!((c.writer.count, c.writer.lost), (4, 0));
    // Messages 1 and 2 were overwritten unseen; the last one was read twice.
    assert_eq!((c.reader.count, c.reader.lost), (3, 2));
}

/// The reader writes the pid of no process into its owner word while it stays
/// attached: its writer, blocked on a full ring, goes on waiting (the reader's lock
/// says it lives) instead of failing with `PeerDied`; a second reader is refused while
/// the first holds the end, whatever the word says, and attaches once it let go.
#[test]
fn a_reader_cannot_make_its_writer_believe_it_died() {
    let chan = Channel::create_split(&Spec::fifo("split-e", 32, 1)).unwrap();
    let writer = chan.handover(End::Writer).unwrap();
    let read_end = chan.handover(End::Reader).unwrap();
    let mut tx = Channel::from_handover(writer).unwrap().sender().unwrap();
    let reader = Channel::open_handed(&read_end.value()).unwrap();
    let rx = reader.receiver().unwrap();
    let region = mmap(&read_end.region, 4096, ProtFlags::READ | ProtFlags::WRITE).unwrap();
    let owner = std::mem::offset_of!(bulkhead_chan::ctrl::Side, owner);
    // SAFETY: an aligned u32 inside our own writable mapping (pid_max is at most 2^22).
    unsafe { region.add(owner).cast::<u32>().write_volatile(0x3fff_fff0) };
    tx.write(&[1; 32]).unwrap();
    let r = tx.write_timeout(&[2; 32], std::time::Duration::from_millis(400));
    assert!(matches!(r, Err(SendError::Timeout)), "{r:?}");
    assert!(matches!(reader.receiver(), Err(OpenError::Busy(_))));
    drop(rx);
    assert!(reader.receiver().is_ok());
    unmap(region, 4096);
}

/// F_OFD_SETLK of byte `byte` of `fd` (`kind`: F_RDLCK or F_WRLCK).
fn ofd_lock(fd: &OwnedFd, kind: libc::c_int, byte: usize) -> Result<(), std::io::Error> {
    // SAFETY: an all-zero flock is valid (l_pid must be 0 for the OFD commands).
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_start = byte as libc::off_t;
    l.l_len = 1;
    // SAFETY: a record-lock command with a pointer to a local flock.
    match unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_SETLK, &mut l) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Each end is handed its peer's lock file with no access: it can neither lock it (to
/// fake a dead peer's life or to keep a peer from attaching) nor read or write it. A
/// lock the reader takes on the writer's byte of the message file, which it can read,
/// does not keep the writer from attaching.
#[test]
fn an_end_can_neither_take_nor_block_its_peers_lock() {
    let chan = Channel::create_split(&Spec::fifo("split-lock", 32, 4)).unwrap();
    let writer = chan.handover(End::Writer).unwrap();
    let reader = chan.handover(End::Reader).unwrap();
    for peer in [&reader.writer_lock, &writer.reader_lock] {
        for kind in [libc::F_RDLCK, libc::F_WRLCK] {
            let e = ofd_lock(peer, kind, 0).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{e}");
        }
        assert_eq!(rustix::io::pread(peer, &mut [0; 1], 0), Err(Errno::BADF));
        assert_eq!(rustix::io::pwrite(peer, b"x", 0), Err(Errno::BADF));
    }
    // The writer's control page is page 1 of the message file.
    ofd_lock(&reader.data, libc::F_RDLCK, rustix::param::page_size()).unwrap();
    let mut rx = Channel::from_handover(reader).unwrap().receiver().unwrap();
    let mut tx = Channel::from_handover(writer).unwrap().sender().unwrap();
    tx.write(&[5; 32]).unwrap();
    drop(tx);
    let mut m = [0u8; 32];
    rx.read(&mut m).unwrap();
    assert_eq!(m, [5; 32]);
    assert!(matches!(rx.read(&mut m), Err(RecvError::Closed)));
}

/// A consumer learns whether its producer has started: `writer_attached` is false
/// until a writer attaches, true while it holds its end, false again once it let go.
#[test]
fn a_reader_sees_when_its_writer_attaches_and_lets_go() {
    let chan = Channel::create_split(&Spec::fifo("split-w", 32, 4)).unwrap();
    let read_end = chan.handover(End::Reader).unwrap();
    let rx = Channel::open_handed(&read_end.value())
        .unwrap()
        .receiver()
        .unwrap();
    assert!(!rx.writer_attached());
    let writer = chan.handover(End::Writer).unwrap();
    let tx = Channel::from_handover(writer).unwrap().sender().unwrap();
    assert!(rx.writer_attached());
    drop(tx);
    assert!(!rx.writer_attached());
}

/// A supervisor that is not root hands split channels over too: the peers' lock
/// descriptors with no access are opened while the lock files' mode still allows it.
/// Run as root, the test creates and hands the channel from a thread that gave up root
/// (raw `setresuid` changes the calling thread's credentials only).
#[test]
fn a_supervisor_without_root_hands_over_split_channels() {
    let attempt = || -> Result<(), Error> {
        let chan = Channel::create_split(&Spec::fifo("split-nonroot", 32, 4))?;
        let writer = chan.handover(End::Writer)?;
        let reader = chan.handover(End::Reader)?;
        let mut tx = Channel::from_handover(writer)?.sender()?;
        let mut rx = Channel::open_handed(&reader.value())?.receiver()?;
        tx.write(&[5; 32])?;
        let mut m = [0u8; 32];
        rx.read(&mut m)?;
        assert_eq!(m, [5; 32]);
        Ok(())
    };
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return attempt().unwrap();
    }
    std::thread::spawn(move || {
        let nobody = 65534;
        // SAFETY: raw setresgid/setresuid change this thread's credentials alone.
        unsafe {
            assert_eq!(
                libc::syscall(libc::SYS_setresgid, nobody, nobody, nobody),
                0
            );
            assert_eq!(
                libc::syscall(libc::SYS_setresuid, nobody, nobody, nobody),
                0
            );
        }
        attempt().unwrap();
    })
    .join()
    .unwrap();
}
