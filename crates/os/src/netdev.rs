//! A network interface (a SocketCAN bus) held in a network namespace of its own, so that
//! only the processes bulkhead puts in that namespace (the bus's CAN gateway tasks) can
//! reach it: DriveOS 3.3.2 and 6.4.1, the CAN gateway alone owns the bus. A process in any
//! other namespace, the machine's included, no longer sees the interface at all.
//!
//! [`IsolatedInterface::take`] moves the interface into a new namespace with rtnetlink
//! (`RTM_NEWLINK` with `IFLA_NET_NS_FD`, as `ip link set IFACE netns NS` does) and sets it
//! up there; dropping the value moves it back and restores its up/down state.
//!
//! After a SIGKILL the owner cannot move it back, and a namespace whose last process
//! exits destroys its virtual interfaces (`vcan`, `veth`). So the namespace is pinned by a
//! bind mount in [`NETNS_DIR`] (as `ip netns add` pins one in `/run/netns`), and a record
//! beside it (the owner line of [`crate::owner`], the interface, its former state) is
//! written before the move. [`IsolatedInterface::restore_stale`] moves the interfaces of
//! dead owners back into the caller's namespace and removes their pins.

use crate::error::{Error, Result};
use crate::owner;
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where the namespaces of isolated interfaces are pinned, with their records.
pub const NETNS_DIR: &str = "/run/bulkhead/netns";

/// An interface moved into a network namespace of its own. Invariant: while this value
/// lives, the interface is in `ns` (up), pinned at `pin`, with a record at `pin.record`.
#[derive(Debug)]
pub struct IsolatedInterface {
    iface: String,
    ns: OwnedFd,
    /// The namespace the interface came from (the caller's), to move it back into.
    home: OwnedFd,
    was_up: bool,
    pin: PathBuf,
}

impl IsolatedInterface {
    /// Moves `iface` out of the calling thread's network namespace into a new one and
    /// sets it up there. Errors name the interface; on error nothing is left changed.
    /// Needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root).
    pub fn take(iface: &str) -> Result<IsolatedInterface> {
        let fail = |what: &str, e: io::Error, hint: &str| {
            Error::os(format!("interface `{iface}`: {what}"), e, hint)
        };
        let home = fs::File::open("/proc/thread-self/ns/net")
            .map(OwnedFd::from)
            .map_err(|e| fail("opening this namespace", e, ""))?;
        let was_up = link_flags(iface)
            .map_err(|e| fail("reading its state", e, "is it listed by `ip link`?"))?
            .contains(LinkFlags::Up);
        let ns = private_netns().map_err(|e| fail("a network namespace", e, "run as root"))?;
        let pin = pin_namespace(iface, &ns, was_up).map_err(|e| {
            fail(
                &format!("pinning its namespace in {NETNS_DIR}"),
                e,
                "run as root",
            )
        })?;
        let taken = IsolatedInterface {
            iface: iface.to_string(),
            ns,
            home,
            was_up,
            pin,
        };
        // From here on, dropping `taken` undoes whatever was done.
        set_link(
            iface,
            Some(LinkAttribute::NetNsFd(taken.ns.as_raw_fd())),
            None,
        )
        .map_err(|e| {
            fail(
                "moving it into its namespace",
                e,
                "a physical or vcan interface can move; some cannot (`netns-local`)",
            )
        })?;
        in_netns(taken.ns.as_raw_fd(), || set_up(iface, true))
            .map_err(|e| fail("setting it up in its namespace", e, "a CAN interface needs its bit rate first: ip link set IFACE type can bitrate 500000"))?;
        Ok(taken)
    }

    /// The interface's name.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// The namespace holding the interface, for `setns` in a child
    /// ([`crate::confine::Confinement::netns`]); valid while this value lives.
    pub fn netns(&self) -> RawFd {
        self.ns.as_raw_fd()
    }

    /// Moves back the interfaces of owners that died without doing so (SIGKILL), into
    /// the calling thread's namespace, with their former up/down state, and removes their
    /// pins and records. Returns one line per interface. Call it at start-up.
    pub fn restore_stale() -> Vec<String> {
        let mut report = Vec::new();
        for entry in fs::read_dir(NETNS_DIR).into_iter().flatten().flatten() {
            let record = entry.path();
            if record.extension().is_none_or(|e| e != "record") {
                continue;
            }
            match owner::of_record(&record) {
                Some(o) if !owner::alive(o) => report.push(restore_record(&record)),
                _ => {}
            }
        }
        report
    }
}

impl Drop for IsolatedInterface {
    fn drop(&mut self) {
        let (ns, home) = (self.ns.as_raw_fd(), self.home.as_raw_fd());
        if let Err(e) = move_back(&self.iface, ns, home, self.was_up) {
            eprintln!("bulkhead: moving interface `{}` back: {e}", self.iface);
        }
        unpin(&self.pin);
    }
}

/// Writes the record, then bind-mounts `ns` at the pin beside it; returns the pin.
fn pin_namespace(iface: &str, ns: &OwnedFd, was_up: bool) -> io::Result<PathBuf> {
    fs::create_dir_all(NETNS_DIR)?;
    let pin = Path::new(NETNS_DIR).join(format!("{}-{iface}", std::process::id()));
    let state = if was_up { "up" } else { "down" };
    fs::write(
        pin.with_extension("record"),
        format!("{}{iface}\n{state}\n", owner::line()),
    )?;
    fs::write(&pin, "")?;
    let source = format!("/proc/self/fd/{}", ns.as_raw_fd());
    if let Err(e) = bind_mount(Path::new(&source), &pin) {
        unpin(&pin);
        return Err(e);
    }
    Ok(pin)
}

fn bind_mount(source: &Path, target: &Path) -> io::Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (s, t) = (c(source)?, c(target)?);
    // SAFETY: NUL-terminated paths; a bind mount reads no data argument.
    let r = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Unmounts and removes the pin and its record (whatever of them exists).
fn unpin(pin: &Path) {
    if let Ok(t) = CString::new(pin.as_os_str().as_bytes()) {
        // SAFETY: a NUL-terminated path; failing (not mounted) is harmless.
        unsafe { libc::umount2(t.as_ptr(), libc::MNT_DETACH) };
    }
    let _ = fs::remove_file(pin);
    let _ = fs::remove_file(pin.with_extension("record"));
}

/// Moves the interface of a dead owner's record back into this namespace.
fn restore_record(record: &Path) -> String {
    let text = fs::read_to_string(record).unwrap_or_default();
    let mut lines = text.lines().skip(1);
    let (iface, was_up) = (lines.next().unwrap_or(""), lines.next() == Some("up"));
    let pin = record.with_extension("");
    let moved = fs::File::open(&pin).and_then(|ns| {
        let home = fs::File::open("/proc/thread-self/ns/net")?;
        move_back(iface, ns.as_raw_fd(), home.as_raw_fd(), was_up)
    });
    unpin(&pin);
    match moved {
        Ok(()) => format!("moved interface `{iface}` back from a killed run's namespace"),
        Err(e) => format!(
            "could not move interface `{iface}` back from {}: {e}",
            pin.display()
        ),
    }
}

/// Moves `iface` from namespace `ns` into `home`, then sets it up or down (`was_up`) in the
/// calling thread's namespace, which must be `home`.
fn move_back(iface: &str, ns: RawFd, home: RawFd, was_up: bool) -> io::Result<()> {
    in_netns(ns, || {
        set_link(iface, Some(LinkAttribute::NetNsFd(home)), None)
    })?;
    set_up(iface, was_up)
}

/// Runs `f` on a thread of its own that has entered the network namespace `ns`
/// (`setns` changes the calling thread only; the thread ends with `f`).
fn in_netns<T: Send>(ns: RawFd, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: setns on a namespace fd the caller keeps open; only this thread moves.
            if unsafe { libc::setns(ns, libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            f()
        })
        .join()
        .map_err(|_| io::Error::other("namespace thread panicked"))?
    })
}

fn set_up(iface: &str, up: bool) -> io::Result<()> {
    set_link(iface, None, Some(up))
}

/// `RTM_NEWLINK` on the interface called `iface` in the calling thread's namespace:
/// `attr` added if given, the up flag set to `up` if given.
fn set_link(iface: &str, attr: Option<LinkAttribute>, up: Option<bool>) -> io::Result<()> {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::IfName(iface.into()));
    msg.attributes.extend(attr);
    if let Some(up) = up {
        msg.header.flags = if up {
            LinkFlags::Up
        } else {
            LinkFlags::empty()
        };
        msg.header.change_mask = LinkFlags::Up;
    }
    request(RouteNetlinkMessage::SetLink(msg)).map(|_| ())
}

/// The flags of interface `iface` in the calling thread's namespace (`RTM_GETLINK`).
fn link_flags(iface: &str) -> io::Result<LinkFlags> {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::IfName(iface.into()));
    match request(RouteNetlinkMessage::GetLink(msg))? {
        Some(RouteNetlinkMessage::NewLink(link)) => Ok(link.header.flags),
        _ => Err(io::Error::other("no link message in the kernel's answer")),
    }
}

/// Sends one request on a new rtnetlink socket and returns the kernel's answer: the
/// message it sent back, or `None` for a bare acknowledgement; a negative acknowledgement
/// is the error it carries.
fn request(payload: RouteNetlinkMessage) -> io::Result<Option<RouteNetlinkMessage>> {
    let socket = Socket::new(NETLINK_ROUTE)?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_ACK;
    let mut msg = NetlinkMessage::new(header, NetlinkPayload::from(payload));
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf);
    socket.send(&buf, 0)?;
    let mut answer = None;
    loop {
        let mut rx = Vec::with_capacity(16 * 1024);
        let n = socket.recv(&mut rx, 0)?;
        let mut offset = 0;
        while offset < n {
            // Fails on a length field below the 16-byte header, so `offset` always grows.
            let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[offset..n])
                .map_err(io::Error::other)?;
            offset += m.header.length as usize;
            match m.payload {
                NetlinkPayload::Error(e) if e.code.is_some() => return Err(e.to_io()),
                NetlinkPayload::Error(_) | NetlinkPayload::Done(_) => return Ok(answer),
                NetlinkPayload::InnerMessage(inner) => answer = Some(inner),
                _ => {}
            }
        }
    }
}
/// A new network namespace holding only a loopback interface (up). Made on a thread of
/// its own (`unshare(CLONE_NEWNET)` changes the calling thread only), which ends after
/// opening it: the returned fd keeps it alive. Needs CAP_SYS_ADMIN.
pub fn private_netns() -> io::Result<OwnedFd> {
    std::thread::spawn(|| {
        // SAFETY: unshare affects only this short-lived thread.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let ns = std::fs::File::open("/proc/thread-self/ns/net")?;
        loopback_up()?;
        Ok(OwnedFd::from(ns))
    })
    .join()
    .map_err(|_| io::Error::other("netns thread panicked"))?
}

/// Sets `lo` up in the calling thread's network namespace.
fn loopback_up() -> io::Result<()> {
    // SAFETY: a fresh datagram socket, owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write `req`, a valid ifreq naming `lo`.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) != 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
