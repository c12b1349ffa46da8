//! Channels: created in a memfd (sealed, passable by `SCM_RIGHTS`) or as a named
//! `/dev/shm/bulkhead-chan-<name>` object ([`crate::named`]), connected, handed over.
//!
//! A *split* channel ([`Channel::create_split`]) keeps the reader's control words in
//! a second memfd of one page, the reader region, so that a supervisor can hand each
//! end only what it needs ([`Channel::handover`]): the writer the message file
//! read-write and the reader region read-only, the reader the message file read-only
//! and its own region read-write. Both files are sealed against resizing and are
//! mode 0444, so a process without `CAP_DAC_OVERRIDE` cannot reopen them for writing
//! through `/proc/self/fd`. Each end also has a lock file of its own for its liveness
//! lock ([`crate::alive`]): the end gets it read-only, the peer with no access.

use crate::alive::Lock;
use crate::ctrl::Side;
use crate::endpoint::{Receiver, Sender};
use crate::error::{OpenError, Result};
use crate::fdpass::{recv_fd, send_fd};
use crate::layout::{check_name, Kind, Layout, Meta, Overflow};
use crate::map::{page_size, read_header, write_header, Map};
use crate::named::{is_stale, shm_path, PREFIX};
use bulkhead_os::proc::start_time;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, SealFlags};
use rustix::mm::ProtFlags;
use std::sync::atomic::Ordering;

/// What to create: the arguments of shmcomm's `open_send`/`open_receive`
/// with `SHMCOMM_CREATE_CH` (DriveOS section 5.1.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub name: String,
    pub kind: Kind,
    pub msg_size: u32,
    pub depth: u32,
    /// What a write to the full fifo does (always [`Overflow::Block`] for latest).
    pub overflow: Overflow,
}

impl Spec {
    /// A lossless ring of `depth` messages of `msg_size` bytes, whose writer waits
    /// while it is full.
    pub fn fifo(name: &str, msg_size: u32, depth: u32) -> Spec {
        Spec {
            name: name.into(),
            kind: Kind::Fifo,
            msg_size,
            depth,
            overflow: Overflow::Block,
        }
    }
    /// A four-slot register of one `msg_size`-byte message.
    pub fn latest(name: &str, msg_size: u32) -> Spec {
        Spec {
            name: name.into(),
            kind: Kind::Latest,
            msg_size,
            depth: 1,
            overflow: Overflow::Block,
        }
    }
    /// This fifo with another overflow rule.
    pub fn with_overflow(self, overflow: Overflow) -> Spec {
        Spec { overflow, ..self }
    }
}

/// The counters of one end of a channel ([`Channel::counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndCounters {
    /// Messages written (writer) or read (reader).
    pub count: u64,
    /// Writes refused or dropped on a full fifo (writer); messages of a latest channel
    /// overwritten, or of a `drop_oldest` fifo dropped, before the reader saw them
    /// (reader).
    pub lost: u64,
    /// The attached process, 0 when none is.
    pub pid: u32,
    /// The end was closed (its process detached or ended).
    pub closed: bool,
}

/// Both ends' counters of a channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub writer: EndCounters,
    pub reader: EndCounters,
}

/// A channel object: an open file holding the header, both sides' control
/// words and the message area. Cheap to hold; map it with
/// [`Channel::sender`] or [`Channel::receiver`].
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
    /// The reader region of a split channel (its reader's control words at offset 0).
    region: Option<OwnedFd>,
    /// The writer's and the reader's lock files of a split channel ([`crate::alive`]);
    /// without them the ends lock their bytes of the message file.
    locks: Option<[OwnedFd; 2]>,
    /// The creator's descriptors of the lock files with no access (open mode 3), to
    /// hand to the peers ([`Channel::handover`]).
    test_only: Option<[OwnedFd; 2]>,
    meta: Meta,
    layout: Layout,
    named: bool,
}

impl AsFd for Channel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl From<Channel> for OwnedFd {
    /// The channel's file descriptor, e.g. to hand to a child process.
    fn from(c: Channel) -> OwnedFd {
        c.fd
    }
}

/// `<prefix><NAME>`: `name` uppercased, every character other than A-Z and 0-9
/// replaced by `_` (an environment variable name for any channel or bus name).
pub fn env_name(prefix: &str, name: &str) -> String {
    let upper = name.chars().map(|c| match c.is_ascii_alphanumeric() {
        true => c.to_ascii_uppercase(),
        false => '_',
    });
    std::iter::once(prefix.to_string())
        .chain(upper.map(String::from))
        .collect()
}

/// The variable through which `bulkhead run` gives a partition's processes the name of
/// the description's channel `channel`: `BULKHEAD_CHAN_<CHANNEL>` (see [`env_name`]).
pub fn env_var(channel: &str) -> String {
    env_name("BULKHEAD_CHAN_", channel)
}

impl Channel {
    /// Creates an anonymous channel in a memfd sealed against resizing, ready
    /// to be granted to other processes with [`Channel::send_over`].
    pub fn create(spec: &Spec) -> Result<Channel, OpenError> {
        check_name(&spec.name)?;
        let flags = rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING;
        let fd = rustix::fs::memfd_create(format!("{PREFIX}{}", spec.name), flags)
            .map_err(|e| OpenError::io("memfd_create", e))?;
        Channel::init(fd, spec, true)
    }

    /// Creates a named channel `/dev/shm/bulkhead-chan-<name>` (shmcomm's
    /// `SHMCOMM_CREATE_CH` with a key). A stale object of that name (creator
    /// and endpoints dead) is replaced; a live one gives [`OpenError::Exists`].
    pub fn create_named(spec: &Spec) -> Result<Channel, OpenError> {
        check_name(&spec.name)?;
        let path = shm_path(&spec.name);
        let flags =
            rustix::shm::OFlags::CREATE | rustix::shm::OFlags::EXCL | rustix::shm::OFlags::RDWR;
        let mode = Mode::RUSR | Mode::WUSR;
        let fd = match rustix::shm::open(path.as_str(), flags, mode) {
            Err(rustix::io::Errno::EXIST) if is_stale(&spec.name) => {
                let _ = rustix::shm::unlink(path.as_str());
                rustix::shm::open(path.as_str(), flags, mode)
            }
            r => r,
        };
        let fd = match fd {
            Ok(fd) => fd,
            Err(rustix::io::Errno::EXIST) => return Err(OpenError::Exists(spec.name.clone())),
            Err(e) => return Err(OpenError::io("shm_open", e)),
        };
        Channel::init(fd, spec, false).inspect_err(|_| {
            let _ = rustix::shm::unlink(path.as_str());
        })
    }

    fn init(fd: OwnedFd, spec: &Spec, memfd: bool) -> Result<Channel, OpenError> {
        let layout = Layout::compute(spec.kind, spec.msg_size, spec.depth, page_size())?;
        rustix::fs::ftruncate(&fd, layout.total_len)
            .map_err(|e| OpenError::io("ftruncate channel", e))?;
        if memfd {
            let seals = SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL;
            rustix::fs::fcntl_add_seals(&fd, seals).map_err(|e| OpenError::io("seal memfd", e))?;
        }
        let pid = rustix::process::getpid().as_raw_nonzero().get() as u32;
        let meta = Meta {
            name: spec.name.clone(),
            kind: spec.kind,
            msg_size: spec.msg_size,
            depth: spec.depth,
            overflow: match spec.kind {
                Kind::Fifo => spec.overflow,
                Kind::Latest => Overflow::Block,
            },
            creator_pid: pid,
            creator_start: start_time(pid).unwrap_or(0),
        };
        write_header(fd.as_fd(), &meta, &layout)?;
        Ok(Channel {
            fd,
            region: None,
            locks: None,
            test_only: None,
            meta,
            layout,
            named: !memfd,
        })
    }

    /// Connects to an existing named channel (shmcomm's `SHMCOMM_CONNECT_CH`):
    /// kind, sizes and depth come from its header, which is validated.
    pub fn open_named(name: &str) -> Result<Channel, OpenError> {
        check_name(name)?;
        let fd = match rustix::shm::open(
            shm_path(name).as_str(),
            rustix::shm::OFlags::RDWR,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Err(OpenError::NotFound(name.into())),
            Err(e) => return Err(OpenError::io("shm_open", e)),
        };
        Channel::open(fd, false, true)
    }

    /// Connects to the description's channel `channel` in a process started by
    /// `bulkhead run`, which hands it over in the variable [`env_var`]`(channel)`
    /// (see [`Channel::open_handed`]).
    pub fn open_env(channel: &str) -> Result<Channel, OpenError> {
        let var = env_var(channel);
        match std::env::var(&var) {
            Ok(value) => Channel::open_handed(&value),
            Err(_) => Err(OpenError::NotFound(format!(
                "{channel} ({var} is not set: not started by bulkhead run?)"
            ))),
        }
    }

    /// Takes a channel granted as a file descriptor (e.g. received by
    /// `SCM_RIGHTS`). The file must be a memfd sealed against shrinking, so
    /// that no peer can make a mapped page vanish; its header is validated.
    pub fn from_fd(fd: OwnedFd) -> Result<Channel, OpenError> {
        Channel::open(fd, true, false)
    }

    /// Takes a split channel handed over as its message file and reader region (see
    /// [`Channel::handover`]). Both must be memfds sealed against shrinking; the
    /// header is validated. Which end this process may take follows from the access
    /// modes of the descriptors.
    pub fn from_fds(data: OwnedFd, region: OwnedFd) -> Result<Channel, OpenError> {
        require_sealed(region.as_fd())?;
        let st = rustix::fs::fstat(&region).map_err(|e| OpenError::io("fstat reader region", e))?;
        if (st.st_size as u64) < page_size() {
            return Err(OpenError::BadHeader(format!(
                "reader region is {} bytes, shorter than a page",
                st.st_size
            )));
        }
        let mut chan = Channel::open(data, true, false)?;
        chan.region = Some(region);
        Ok(chan)
    }

    /// Takes a split channel handed over by [`Channel::handover`], lock files included.
    pub fn from_handover(h: Handover) -> Result<Channel, OpenError> {
        let mut chan = Channel::from_fds(h.data, h.region)?;
        chan.locks = Some([h.writer_lock, h.reader_lock]);
        Ok(chan)
    }

    /// Connects to a channel handed to this process: `value` is what the supervisor
    /// told it (an environment variable or an argument), either
    /// `fd:<data>:<region>:<writer lock>:<reader lock>` (the descriptors of a split
    /// channel, inherited; see [`Handover::value`]) or the name of a named channel.
    /// Inherited descriptors are duplicated, not taken, so the same value may be
    /// opened again.
    pub fn open_handed(value: &str) -> Result<Channel, OpenError> {
        let Some(fds) = value.strip_prefix("fd:") else {
            return Channel::open_named(value);
        };
        let bad = || {
            OpenError::Invalid(format!(
                "handed channel {value:?}: want fd:<data>:<region>:<writer lock>:<reader lock>"
            ))
        };
        let fds: Vec<i32> = fds
            .split(':')
            .map(|n| n.parse().map_err(|_| bad()))
            .collect::<Result<_, OpenError>>()?;
        let [data, region, writer_lock, reader_lock] = fds[..] else {
            return Err(bad());
        };
        Channel::from_handover(Handover {
            data: inherited(data)?,
            region: inherited(region)?,
            writer_lock: inherited(writer_lock)?,
            reader_lock: inherited(reader_lock)?,
        })
    }

    fn open(fd: OwnedFd, require_seal: bool, named: bool) -> Result<Channel, OpenError> {
        if require_seal {
            require_sealed(fd.as_fd())?;
        }
        let st = rustix::fs::fstat(&fd).map_err(|e| OpenError::io("fstat channel", e))?;
        let (meta, layout) = read_header(fd.as_fd(), st.st_size as u64)?;
        Ok(Channel {
            fd,
            region: None,
            locks: None,
            test_only: None,
            meta,
            layout,
            named,
        })
    }

    /// Name, kind, message size, depth and creator.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Maps the channel as its (single) writer. Of a split channel the reader
    /// region is mapped read-only; a message file held read-only is an error.
    pub fn sender(&self) -> Result<Sender, OpenError> {
        let map = Map::new(
            self.fd.as_fd(),
            self.layout.total_len,
            ProtFlags::READ | ProtFlags::WRITE,
        )
        .map_err(|e| self.read_only_end(e, "write"))?;
        let l = &self.layout;
        map.read_only(0, l.page)?;
        map.read_only(l.reader_off, l.page)?;
        let region = self.map_region(ProtFlags::READ)?;
        Sender::new(map, region, self.locks(), self.meta.clone(), *l)
    }

    /// Maps the channel as its (single) reader: everything but the reader's
    /// own control words is read-only, the message area included. Of a split
    /// channel the message file is mapped read-only as a whole and the control
    /// words are in the reader region.
    pub fn receiver(&self) -> Result<Receiver, OpenError> {
        let l = &self.layout;
        if self.region.is_some() {
            let map = Map::new(self.fd.as_fd(), l.total_len, ProtFlags::READ)?;
            let region = self
                .map_region(ProtFlags::READ | ProtFlags::WRITE)
                .map_err(|e| self.read_only_end(e, "read"))?;
            return Receiver::new(map, region, self.locks(), self.meta.clone(), *l);
        }
        let map = Map::new(
            self.fd.as_fd(),
            l.total_len,
            ProtFlags::READ | ProtFlags::WRITE,
        )?;
        map.read_only(0, l.reader_off)?;
        map.read_only(l.data_off, l.total_len - l.data_off)?;
        Receiver::new(map, None, self.locks(), self.meta.clone(), *l)
    }

    /// The writer's and the reader's lock: byte 0 of their lock files, or their bytes
    /// of the message file ([`crate::alive`]).
    fn locks(&self) -> [Lock<'_>; 2] {
        match &self.locks {
            Some([w, r]) => [w, r].map(|f| Lock {
                file: f.as_fd(),
                byte: 0,
            }),
            None => [self.layout.writer_off, self.layout.reader_off].map(|byte| Lock {
                file: self.fd.as_fd(),
                byte,
            }),
        }
    }

    /// What each end has counted and whether it is attached, read from the control
    /// words (mapped read-only for the call). The ends write their own counters: a
    /// hostile end can only misreport itself.
    pub fn counters(&self) -> Result<Counters, OpenError> {
        let l = &self.layout;
        let map = Map::new(self.fd.as_fd(), l.total_len, ProtFlags::READ)?;
        let region = self.map_region(ProtFlags::READ)?;
        let reader = region
            .as_ref()
            .map_or(map.side(l.reader_off), |r| r.side(0));
        // SAFETY: both pointers point into mappings that live until the end of this
        // function; the words are atomics, safe to read while the ends write them.
        let (w, r) = unsafe { (&*map.side(l.writer_off), &*reader) };
        let end = |side: &Side| EndCounters {
            count: side.count.load(Ordering::Relaxed),
            lost: side.lost.load(Ordering::Relaxed),
            pid: side.owner.load(Ordering::Acquire),
            closed: side.seq.load(Ordering::Acquire) & crate::ctrl::CLOSED != 0,
        };
        Ok(Counters {
            writer: end(w),
            reader: end(r),
        })
    }

    fn map_region(&self, prot: ProtFlags) -> Result<Option<Map>, OpenError> {
        self.region
            .as_ref()
            .map(|r| Map::new(r.as_fd(), page_size(), prot))
            .transpose()
    }

    /// A mapping refused for lack of write access: this process holds the other end.
    fn read_only_end(&self, e: OpenError, end: &str) -> OpenError {
        match e {
            OpenError::Io { source, .. } if source.raw_os_error() == Some(13) => {
                OpenError::Invalid(format!(
                    "channel {:?} was handed to this process without the right to {end} it",
                    self.meta.name
                ))
            }
            e => e,
        }
    }

    /// Creates a split channel: the message file and the reader region, each a
    /// memfd sealed against shrinking, growing and further seals, mode 0444, and a
    /// lock file per end, mode 0400 (see [`Channel::own_end`]). Hand its ends to
    /// other processes with [`Channel::handover`]; this process may also use both
    /// ends itself.
    pub fn create_split(spec: &Spec) -> Result<Channel, OpenError> {
        let mut chan = Channel::create(spec)?;
        let flags = rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING;
        let region = rustix::fs::memfd_create(format!("{PREFIX}{}-reader", spec.name), flags)
            .map_err(|e| OpenError::io("memfd_create", e))?;
        rustix::fs::ftruncate(&region, page_size())
            .map_err(|e| OpenError::io("ftruncate reader region", e))?;
        let seals = SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL;
        rustix::fs::fcntl_add_seals(&region, seals).map_err(|e| OpenError::io("seal memfd", e))?;
        for fd in [&chan.fd, &region] {
            let read_only = Mode::RUSR | Mode::RGRP | Mode::ROTH;
            rustix::fs::fchmod(fd, read_only).map_err(|e| OpenError::io("fchmod channel", e))?;
        }
        chan.region = Some(region);
        let lock_file = |end: &str| -> Result<(OwnedFd, OwnedFd), OpenError> {
            let fd = rustix::fs::memfd_create(format!("{PREFIX}{}-{end}-lock", spec.name), flags)
                .map_err(|e| OpenError::io("memfd_create", e))?;
            // Opened with no access while the mode still allows it (open mode 3 needs
            // read and write permission, which 0400 denies all but root).
            let test_only = reopen_test_only(&fd)?;
            rustix::fs::fchmod(&fd, Mode::RUSR)
                .map_err(|e| OpenError::io("fchmod lock file", e))?;
            Ok((fd, test_only))
        };
        let (writer, writer_test) = lock_file("writer")?;
        let (reader, reader_test) = lock_file("reader")?;
        chan.locks = Some([writer, reader]);
        chan.test_only = Some([writer_test, reader_test]);
        Ok(chan)
    }

    /// Gives the lock file(s) of `end` of a split channel to the user `uid`:`gid`,
    /// under which the processes handed that end run. Then, without
    /// `CAP_DAC_OVERRIDE`, only that user can reopen it to take the end's lock, so a
    /// peer running as another user can neither fake the end's liveness nor keep it
    /// from attaching (see [`crate::alive`]). A no-op for a channel that is not split.
    pub fn own_end(&self, end: End, uid: u32, gid: u32) -> Result<(), OpenError> {
        let Some([writer, reader]) = &self.locks else {
            return Ok(());
        };
        let files = match end {
            End::Writer => vec![writer],
            End::Reader => vec![reader],
            End::Both => vec![writer, reader],
        };
        let (uid, gid) = (
            rustix::fs::Uid::from_raw(uid),
            rustix::fs::Gid::from_raw(gid),
        );
        for f in files {
            rustix::fs::fchown(f, Some(uid), Some(gid))
                .map_err(|e| OpenError::io("fchown lock file", e))?;
        }
        Ok(())
    }

    /// The descriptors to hand to a process that is `end` of this split channel,
    /// with least rights, each close-on-exec and numbered 10 or above (clear
    /// close-on-exec in the child; tell it the numbers with [`Handover::value`]). The
    /// writer gets the message file read-write and the region read-only, the reader
    /// the message file read-only (reopened through `/proc/self/fd`, so its mapping
    /// can never be made writable) and the region read-write. Each gets its own lock
    /// file read-only and its peer's with no access (open mode 3: the lock can be
    /// tested, not taken). Only the creator of a split channel can hand it over.
    pub fn handover(&self, end: End) -> Result<Handover, OpenError> {
        let (Some(region), Some([writer, reader]), Some([writer_test, reader_test])) =
            (&self.region, &self.locks, &self.test_only)
        else {
            return Err(OpenError::Invalid(format!(
                "channel {:?} is not split: only a channel made by create_split is handed over",
                self.meta.name
            )));
        };
        let (data_rw, region_rw) = match end {
            End::Writer => (true, false),
            End::Reader => (false, true),
            End::Both => (true, true),
        };
        let lock = |file: &OwnedFd, test_only: &OwnedFd, mine: bool| match mine {
            true => grant(file, false),
            false => rustix::io::fcntl_dupfd_cloexec(test_only, HANDOVER_MIN_FD)
                .map_err(|e| OpenError::io("dup lock file", e)),
        };
        Ok(Handover {
            data: grant(&self.fd, data_rw)?,
            region: grant(region, region_rw)?,
            writer_lock: lock(writer, writer_test, data_rw)?,
            reader_lock: lock(reader, reader_test, region_rw)?,
        })
    }

    /// Grants the channel to the process at the other end of a Unix socket
    /// (`SCM_RIGHTS`); it takes it with [`Channel::receive_from`].
    pub fn send_over(&self, socket: impl AsFd) -> Result<(), OpenError> {
        send_fd(socket.as_fd(), self.fd.as_fd())
    }

    /// Receives a channel granted with [`Channel::send_over`] and validates it.
    pub fn receive_from(socket: impl AsFd) -> Result<Channel, OpenError> {
        Channel::from_fd(recv_fd(socket.as_fd())?)
    }

    /// Destroys the channel (shmcomm's `destroy`): a named channel's object is
    /// unlinked; the memory is freed once every endpoint has unmapped it.
    pub fn destroy(self) -> Result<(), OpenError> {
        if self.named {
            rustix::shm::unlink(shm_path(&self.meta.name).as_str())
                .map_err(|e| OpenError::io("shm_unlink", e))?;
        }
        Ok(())
    }
}

/// Which end(s) of a split channel a process gets ([`Channel::handover`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Writer,
    Reader,
    /// A process that both writes and reads the channel.
    Both,
}

/// What a process that is one end of a split channel is handed ([`Channel::handover`]).
#[derive(Debug)]
pub struct Handover {
    /// The message file (read-write for the writer, read-only for the reader).
    pub data: OwnedFd,
    /// The reader region (read-write for the reader, read-only for the writer).
    pub region: OwnedFd,
    /// The writer's lock file (read-only for the writer, no access for the reader).
    pub writer_lock: OwnedFd,
    /// The reader's lock file (read-only for the reader, no access for the writer).
    pub reader_lock: OwnedFd,
}

impl Handover {
    /// The value that tells a process its handed-over channel:
    /// `fd:<data>:<region>:<writer lock>:<reader lock>` (read by
    /// [`Channel::open_handed`]).
    pub fn value(&self) -> String {
        use rustix::fd::AsRawFd;
        let fds = [
            &self.data,
            &self.region,
            &self.writer_lock,
            &self.reader_lock,
        ];
        let numbers: Vec<String> = fds.iter().map(|f| f.as_raw_fd().to_string()).collect();
        format!("fd:{}", numbers.join(":"))
    }

    /// The descriptors, in the order of [`Handover::value`].
    pub fn into_fds(self) -> [OwnedFd; 4] {
        [self.data, self.region, self.writer_lock, self.reader_lock]
    }
}

/// Lowest descriptor number [`Channel::handover`] returns (above the standard and
/// the DEmOS descriptors of a child).
const HANDOVER_MIN_FD: i32 = 10;

/// `fd` duplicated (`writable`) or reopened read-only, close-on-exec, at 10 or above.
fn grant(fd: &OwnedFd, writable: bool) -> Result<OwnedFd, OpenError> {
    use rustix::fd::AsRawFd;
    let reopened;
    let src = match writable {
        true => fd,
        false => {
            let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC;
            reopened = rustix::fs::open(path.as_str(), flags, Mode::empty())
                .map_err(|e| OpenError::io("reopen channel read-only", e))?;
            &reopened
        }
    };
    rustix::io::fcntl_dupfd_cloexec(src, HANDOVER_MIN_FD)
        .map_err(|e| OpenError::io("dup channel", e))
}

/// `fd` reopened with neither read nor write access (open mode 3, which needs both
/// permissions to open), close-on-exec: its record locks can be tested
/// (`F_OFD_GETLK`), not taken (`EBADF`).
fn reopen_test_only(fd: &OwnedFd) -> Result<OwnedFd, OpenError> {
    use rustix::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let flags = rustix::fs::OFlags::RDWR | rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC;
    rustix::fs::open(path.as_str(), flags, Mode::empty())
        .map_err(|e| OpenError::io("reopen lock file without access", e))
}

/// A duplicate of descriptor `raw`, inherited from the supervisor.
fn inherited(raw: i32) -> Result<OwnedFd, OpenError> {
    let missing = || OpenError::NotFound(format!("inherited descriptor {raw} (not open)"));
    if raw < 0 {
        return Err(missing());
    }
    // SAFETY: borrowed only to duplicate it, never closed here; a number that is not
    // an open descriptor makes fcntl fail with EBADF.
    let fd = unsafe { BorrowedFd::borrow_raw(raw) };
    rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(|e| match e {
        rustix::io::Errno::BADF => missing(),
        e => OpenError::io("dup handed channel", e),
    })
}

fn require_sealed(fd: BorrowedFd<'_>) -> Result<(), OpenError> {
    let seals = rustix::fs::fcntl_get_seals(fd).map_err(|e| OpenError::io("get seals", e))?;
    if !seals.contains(SealFlags::SHRINK) {
        return Err(OpenError::BadHeader(
            "channel fd is not sealed against shrinking".into(),
        ));
    }
    Ok(())
}
