//! One descriptor over a Unix socket (`SCM_RIGHTS`), how a memfd channel reaches a
//! process that did not create it.

use crate::error::{OpenError, Result};
use rustix::fd::{BorrowedFd, OwnedFd};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;

/// Sends one file descriptor over a Unix socket with `SCM_RIGHTS`.
pub fn send_fd(socket: BorrowedFd<'_>, fd: BorrowedFd<'_>) -> Result<(), OpenError> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let fds = [fd];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    control.push(SendAncillaryMessage::ScmRights(&fds));
    rustix::net::sendmsg(
        socket,
        &[IoSlice::new(b"C")],
        &mut control,
        SendFlags::empty(),
    )
    .map_err(|e| OpenError::io("sendmsg SCM_RIGHTS", e))?;
    Ok(())
}

/// Receives one file descriptor sent with [`send_fd`] (close-on-exec).
pub fn recv_fd(socket: BorrowedFd<'_>) -> Result<OwnedFd, OpenError> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let got = rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| OpenError::io("recvmsg SCM_RIGHTS", e))?;
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = msg {
            if let Some(fd) = fds.next() {
                return Ok(fd);
            }
        }
    }
    if got.bytes == 0 {
        return Err(OpenError::Closed);
    }
    Err(OpenError::Invalid(
        "message carried no file descriptor".into(),
    ))
}
