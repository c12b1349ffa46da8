//! The C API (`include/bulkhead/chan.h`): libshmcomm's operations (DriveOS
//! section 5, Fig. 4) over [`Channel`], [`Sender`] and [`Receiver`].
//!
//! Functions returning `int` give a non-negative value on success and
//! `-errno` on failure; functions returning a handle give NULL and set
//! `errno`. No function panics across the boundary: every pointer is checked.

use crate::{Channel, Kind, OpenError, Receiver, Sender, Spec};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// Create a new channel.
pub const BULKHEAD_CHAN_CREATE: c_uint = 0x1;
/// Connect to an existing channel.
pub const BULKHEAD_CHAN_CONNECT: c_uint = 0x2;
/// fifo channel (shmcomm `SHMCOMM_SYNC_CH`).
pub const BULKHEAD_CHAN_SYNC: c_uint = 0x4;
/// latest (four-slot) channel (shmcomm `SHMCOMM_ASYNC_CH`).
pub const BULKHEAD_CHAN_ASYNC: c_uint = 0x8;

/// Converts a user value into a message (`dst_len` = message size). Returns 0 or a negative error.
pub type MarshalFn =
    Option<unsafe extern "C" fn(*const c_void, usize, *mut c_void, usize) -> c_int>;

enum End {
    Tx(Sender),
    Rx(Receiver),
}

/// An open channel endpoint (opaque in C).
pub struct BulkheadChan {
    chan: Channel,
    end: End,
    name: CString,
    convert: MarshalFn,
    scratch: Vec<u8>,
}

fn set_errno(e: c_int) {
    bulkhead_os::errno::set(e);
}

fn fail<T>(e: &OpenError) -> *mut T {
    set_errno(-e.errno());
    std::ptr::null_mut()
}

fn kind_of(flags: c_uint) -> Result<Option<Kind>, OpenError> {
    match flags & (BULKHEAD_CHAN_SYNC | BULKHEAD_CHAN_ASYNC) {
        0 => Ok(None),
        BULKHEAD_CHAN_SYNC => Ok(Some(Kind::Fifo)),
        BULKHEAD_CHAN_ASYNC => Ok(Some(Kind::Latest)),
        _ => Err(OpenError::Invalid(
            "flags: SYNC and ASYNC are exclusive".into(),
        )),
    }
}

fn spec(name: &str, flags: c_uint, msg_size: usize, depth: c_uint) -> Result<Spec, OpenError> {
    let msg = u32::try_from(msg_size)
        .map_err(|_| OpenError::Invalid(format!("message size {msg_size}")))?;
    match kind_of(flags)? {
        Some(Kind::Fifo) => Ok(Spec::fifo(name, msg, depth)),
        Some(Kind::Latest) => Ok(Spec::latest(name, msg)),
        None => Err(OpenError::Invalid(
            "flags: CREATE needs SYNC or ASYNC".into(),
        )),
    }
}

/// # Safety
/// `name` must be NULL or a NUL-terminated string.
unsafe fn str_arg<'a>(name: *const c_char) -> Result<&'a str, OpenError> {
    if name.is_null() {
        return Err(OpenError::Invalid("name is NULL".into()));
    }
    // SAFETY: caller contract.
    unsafe { CStr::from_ptr(name) }
        .to_str()
        .map_err(|_| OpenError::Invalid("name is not UTF-8".into()))
}

fn open_named(
    name: &str,
    flags: c_uint,
    msg_size: usize,
    depth: c_uint,
) -> Result<Channel, OpenError> {
    let chan = match flags & (BULKHEAD_CHAN_CREATE | BULKHEAD_CHAN_CONNECT) {
        BULKHEAD_CHAN_CREATE => Channel::create_named(&spec(name, flags, msg_size, depth)?)?,
        BULKHEAD_CHAN_CONNECT => Channel::open_handed(name)?,
        _ => {
            return Err(OpenError::Invalid(
                "flags: want exactly one of CREATE and CONNECT".into(),
            ))
        }
    };
    match kind_of(flags)? {
        Some(k) if k != chan.meta().kind => Err(OpenError::Invalid(format!(
            "channel {name} is {}",
            chan.meta().kind
        ))),
        _ => Ok(chan),
    }
}

fn wrap(chan: Channel, send: bool, convert: MarshalFn) -> Result<*mut BulkheadChan, OpenError> {
    let end = if send {
        End::Tx(chan.sender()?)
    } else {
        End::Rx(chan.receiver()?)
    };
    let name =
        CString::new(chan.meta().name.clone()).map_err(|_| OpenError::Invalid("name".into()))?;
    let scratch = vec![0; chan.meta().msg_size as usize];
    Ok(Box::into_raw(Box::new(BulkheadChan {
        chan,
        end,
        name,
        convert,
        scratch,
    })))
}

/// # Safety
/// `name` must be NULL or a NUL-terminated string.
unsafe fn open(
    name: *const c_char,
    flags: c_uint,
    f: MarshalFn,
    size: usize,
    depth: c_uint,
    send: bool,
) -> *mut BulkheadChan {
    // SAFETY: forwarded caller contract.
    let r = unsafe { str_arg(name) }
        .and_then(|n| open_named(n, flags, size, depth))
        .and_then(|c| {
            let created = flags & BULKHEAD_CHAN_CREATE != 0;
            wrap(c, send, f).inspect_err(|_| {
                if created {
                    let _ = Channel::open_named(&name_lossy(name)).map(Channel::destroy);
                }
            })
        });
    r.unwrap_or_else(|e| fail(&e))
}

fn name_lossy(name: *const c_char) -> String {
    // SAFETY: only called after str_arg accepted this pointer.
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

/// Opens (creates or connects) named channel `name` for sending.
///
/// # Safety
/// `name` must be NULL or a NUL-terminated string; `marshal` NULL or a valid function.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_open_send(
    name: *const c_char,
    flags: c_uint,
    marshal: MarshalFn,
    msg_size: usize,
    depth: c_uint,
) -> *mut BulkheadChan {
    // SAFETY: forwarded caller contract.
    unsafe { open(name, flags, marshal, msg_size, depth, true) }
}

/// Opens (creates or connects) named channel `name` for receiving.
///
/// # Safety
/// As for [`bulkhead_chan_open_send`].
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_open_receive(
    name: *const c_char,
    flags: c_uint,
    unmarshal: MarshalFn,
    msg_size: usize,
    depth: c_uint,
) -> *mut BulkheadChan {
    // SAFETY: forwarded caller contract.
    unsafe { open(name, flags, unmarshal, msg_size, depth, false) }
}

/// Creates an anonymous (memfd) channel; returns its fd or -errno.
///
/// # Safety
/// `name` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_create_fd(
    name: *const c_char,
    flags: c_uint,
    msg_size: usize,
    depth: c_uint,
) -> c_int {
    // SAFETY: forwarded caller contract.
    let r =
        unsafe { str_arg(name) }.and_then(|n| Channel::create(&spec(n, flags, msg_size, depth)?));
    match r {
        // The fd now belongs to the caller.
        Ok(c) => rustix::fd::IntoRawFd::into_raw_fd(OwnedFd::from(c)),
        Err(e) => e.errno(),
    }
}

fn open_fd(fd: c_int, f: MarshalFn, send: bool) -> *mut BulkheadChan {
    if fd < 0 {
        return fail(&OpenError::Invalid(format!("fd {fd}")));
    }
    // SAFETY: fd >= 0 is the caller's open descriptor; it is only borrowed
    // for the duration of the duplication.
    let dup = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned();
    let r = dup
        .map_err(|e| OpenError::io("dup channel fd", e))
        .and_then(Channel::from_fd)
        .and_then(|c| wrap(c, send, f));
    r.unwrap_or_else(|e| fail(&e))
}

/// Opens the memfd channel `fd` for sending (the fd stays the caller's).
///
/// # Safety
/// `fd` must be an open descriptor or negative; `marshal` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_open_send_fd(
    fd: c_int,
    marshal: MarshalFn,
) -> *mut BulkheadChan {
    open_fd(fd, marshal, true)
}

/// Opens the memfd channel `fd` for receiving (the fd stays the caller's).
///
/// # Safety
/// `fd` must be an open descriptor or negative; `unmarshal` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_open_receive_fd(
    fd: c_int,
    unmarshal: MarshalFn,
) -> *mut BulkheadChan {
    open_fd(fd, unmarshal, false)
}

/// Sends fd over Unix socket `sock` (SCM_RIGHTS). Returns 0 or -errno.
///
/// # Safety
/// Both must be open descriptors.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_send_fd(sock: c_int, fd: c_int) -> c_int {
    if sock < 0 || fd < 0 {
        return -bulkhead_os::errno::EBADF;
    }
    // SAFETY: caller contract; borrowed for the call only.
    let r = unsafe { crate::send_fd(BorrowedFd::borrow_raw(sock), BorrowedFd::borrow_raw(fd)) };
    r.map_or_else(|e| e.errno(), |_| 0)
}

/// Receives an fd sent with `bulkhead_chan_send_fd`; returns it or -errno.
///
/// # Safety
/// `sock` must be an open descriptor.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_recv_fd(sock: c_int) -> c_int {
    if sock < 0 {
        return -bulkhead_os::errno::EBADF;
    }
    // SAFETY: caller contract.
    match crate::recv_fd(unsafe { BorrowedFd::borrow_raw(sock) }) {
        Ok(fd) => rustix::fd::IntoRawFd::into_raw_fd(fd),
        Err(e) => e.errno(),
    }
}

fn timeout_of(ms: c_int) -> Option<Option<Duration>> {
    match ms {
        0 => None,
        ms if ms < 0 => Some(None),
        ms => Some(Some(Duration::from_millis(ms as u64))),
    }
}

fn convert(f: MarshalFn, src: &[u8], dst: &mut [u8]) -> Result<(), c_int> {
    let Some(f) = f else { return Ok(()) };
    // SAFETY: the callback is the caller's valid function; both buffers are
    // valid for their lengths.
    let r = unsafe {
        f(
            src.as_ptr().cast(),
            src.len(),
            dst.as_mut_ptr().cast(),
            dst.len(),
        )
    };
    if r < 0 {
        Err(r)
    } else {
        Ok(())
    }
}

fn write_msg(tx: &mut Sender, msg: &[u8], timeout_ms: c_int) -> c_int {
    let r = match timeout_of(timeout_ms) {
        None => tx.try_write(msg),
        Some(None) => tx.write(msg),
        Some(Some(t)) => tx.write_timeout(msg, t),
    };
    r.map_or_else(|e| e.errno(), |_| 0)
}

fn read_msg(rx: &mut Receiver, buf: &mut [u8], timeout_ms: c_int) -> c_int {
    let r = match timeout_of(timeout_ms) {
        None => rx.try_read(buf),
        Some(None) => rx.read(buf),
        Some(Some(t)) => rx.read_timeout(buf, t),
    };
    r.map_or_else(|e| e.errno(), |_| 0)
}

/// Writes one message of `nbytes` (the message size, or any size the marshal
/// callback accepts). `timeout_ms`: -1 waits forever, 0 never waits.
/// Returns `nbytes` or -errno (-EAGAIN full, -ETIMEDOUT, -EPIPE reader closed).
///
/// # Safety
/// `ch` must be NULL or a live handle; `buf` valid for `nbytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_write(
    ch: *mut BulkheadChan,
    buf: *const c_void,
    nbytes: usize,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: caller contract.
    let Some(h) = (unsafe { ch.as_mut() }) else {
        return -bulkhead_os::errno::EINVAL;
    };
    if buf.is_null() || nbytes > c_int::MAX as usize {
        return -bulkhead_os::errno::EINVAL;
    }
    // SAFETY: caller contract.
    let src = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), nbytes) };
    let End::Tx(tx) = &mut h.end else {
        return -bulkhead_os::errno::EBADF;
    };
    let r = if h.convert.is_some() {
        if let Err(e) = convert(h.convert, src, &mut h.scratch) {
            return e;
        }
        write_msg(tx, &h.scratch, timeout_ms)
    } else {
        write_msg(tx, src, timeout_ms)
    };
    if r < 0 {
        r
    } else {
        nbytes as c_int
    }
}

/// Reads one message into `buf` (`nbytes` = the message size, or any size the
/// unmarshal callback fills). `timeout_ms` as for write. Returns `nbytes` or
/// -errno (-EAGAIN empty, -ETIMEDOUT, -EPIPE writer closed and drained).
///
/// # Safety
/// `ch` must be NULL or a live handle; `buf` valid for `nbytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_read(
    ch: *mut BulkheadChan,
    buf: *mut c_void,
    nbytes: usize,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: caller contract.
    let Some(h) = (unsafe { ch.as_mut() }) else {
        return -bulkhead_os::errno::EINVAL;
    };
    if buf.is_null() || nbytes > c_int::MAX as usize {
        return -bulkhead_os::errno::EINVAL;
    }
    // SAFETY: caller contract.
    let dst = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), nbytes) };
    let End::Rx(rx) = &mut h.end else {
        return -bulkhead_os::errno::EBADF;
    };
    let r = if h.convert.is_some() {
        let r = read_msg(rx, &mut h.scratch, timeout_ms);
        if r >= 0 {
            if let Err(e) = convert(h.convert, &h.scratch, dst) {
                return e;
            }
        }
        r
    } else {
        read_msg(rx, dst, timeout_ms)
    };
    if r < 0 {
        r
    } else {
        nbytes as c_int
    }
}

/// Closes the endpoint and frees the handle (shmcomm `close`). Returns 0.
///
/// # Safety
/// `ch` must be NULL or a live handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_close(ch: *mut BulkheadChan) -> c_int {
    if ch.is_null() {
        return -bulkhead_os::errno::EINVAL;
    }
    // SAFETY: caller contract: a handle from Box::into_raw, closed once.
    drop(unsafe { Box::from_raw(ch) });
    0
}

/// Closes the endpoint and destroys the channel (shmcomm `destroy`): a named
/// channel is unlinked. Returns 0 or -errno.
///
/// # Safety
/// As for [`bulkhead_chan_close`].
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_destroy(ch: *mut BulkheadChan) -> c_int {
    if ch.is_null() {
        return -bulkhead_os::errno::EINVAL;
    }
    // SAFETY: caller contract.
    let h = unsafe { Box::from_raw(ch) };
    let BulkheadChan { chan, end, .. } = *h;
    drop(end);
    chan.destroy().map_or_else(|e| e.errno(), |_| 0)
}

/// The channel's name (valid while the handle lives), or NULL.
///
/// # Safety
/// `ch` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_name(ch: *const BulkheadChan) -> *const c_char {
    // SAFETY: caller contract.
    unsafe { ch.as_ref() }.map_or(std::ptr::null(), |h| h.name.as_ptr())
}

/// `BULKHEAD_CHAN_SYNC` (fifo) or `BULKHEAD_CHAN_ASYNC` (latest), or -EINVAL.
///
/// # Safety
/// `ch` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_kind(ch: *const BulkheadChan) -> c_int {
    // SAFETY: caller contract.
    unsafe { ch.as_ref() }.map_or(-bulkhead_os::errno::EINVAL, |h| match h.chan.meta().kind {
        Kind::Fifo => BULKHEAD_CHAN_SYNC as c_int,
        Kind::Latest => BULKHEAD_CHAN_ASYNC as c_int,
    })
}

/// Message size in bytes, or 0 for NULL.
///
/// # Safety
/// `ch` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_msg_size(ch: *const BulkheadChan) -> usize {
    // SAFETY: caller contract.
    unsafe { ch.as_ref() }.map_or(0, |h| h.chan.meta().msg_size as usize)
}

/// Depth (messages a fifo holds; 1 for latest), or 0 for NULL.
///
/// # Safety
/// `ch` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_depth(ch: *const BulkheadChan) -> c_uint {
    // SAFETY: caller contract.
    unsafe { ch.as_ref() }.map_or(0, |h| h.chan.meta().depth)
}

/// The channel's file descriptor (still owned by the handle), or -EINVAL.
///
/// # Safety
/// `ch` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_chan_fd(ch: *const BulkheadChan) -> c_int {
    // SAFETY: caller contract.
    unsafe { ch.as_ref() }.map_or(-bulkhead_os::errno::EINVAL, |h| h.chan.as_fd().as_raw_fd())
}

/// Removes stale named channels; returns how many, or -errno.
#[no_mangle]
pub extern "C" fn bulkhead_chan_cleanup_stale() -> c_int {
    crate::cleanup_stale().map_or_else(|e| e.errno(), |v| v.len() as c_int)
}
