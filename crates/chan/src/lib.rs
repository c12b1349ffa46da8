//! bulkhead-chan: shared-memory channels between processes, without a supervisor.
//!
//! This is DriveOS's `shmcomm` (section 5, Fig. 4 and Programs 1-2) on Linux:
//! a channel is a memfd (or a named `/dev/shm` object) holding a header, each
//! side's control words on its own page, and a fixed-size message area. Two
//! kinds, as in DriveOS section 5.1.4 and Boomerang sections II-B/III-B:
//!
//! * [`Kind::Fifo`]: lossless single-producer single-consumer ring
//!   (shmcomm's synchronous channel, Boomerang's `RT_FIFO`); writes block
//!   while full, reads while empty: a short spin, then a futex sleep with no
//!   lost wake-up ([`fifo`]).
//! * [`Kind::Latest`]: Simpson's four-slot mechanism (Simpson 1990;
//!   shmcomm's asynchronous channel, Boomerang's `RT_ASYNC`): wait-free on
//!   both sides; the reader gets the most recent complete message ([`fourslot`]).
//!
//! Each side writes only its own control words; the reader maps the message
//! area read-only. Everything read from the peer is bounds-checked: a peer that
//! corrupts the shared memory can only make the other side's calls fail
//! ([`SendError::Corrupt`], [`RecvError::Corrupt`], [`OpenError::BadHeader`]),
//! and every blocking call has a timeout variant. A channel passed as a file
//! descriptor must be a memfd sealed against shrinking, so no peer can make
//! mapped pages vanish.
//!
//! Between processes that do not trust each other, use a split channel
//! ([`Channel::create_split`], [`Channel::handover`], [`Channel::open_handed`]):
//! the reader's control words live in a region of their own and the reader gets
//! the message file read-only (DriveOS section 5 and Boomerang II-B: the
//! channel is mapped read-only into the reader), so it can lose its own
//! messages but never damage the writer.
//!
//! ```no_run
//! use bulkhead_chan::{Channel, Spec};
//! // DriveOS Program 1/2: struct packet {int X; int Y}, channel 101, ring length 10.
//! let chan = Channel::create_named(&Spec::fifo("101", 8, 10))?;
//! let mut tx = chan.sender()?;
//! let mut rx = Channel::open_named("101")?.receiver()?;
//! tx.write(&[10, 0, 0, 0, 20, 0, 0, 0])?;
//! let mut p_rec = [0u8; 8];
//! rx.read(&mut p_rec)?;
//! chan.destroy()?;
//! # Ok::<(), bulkhead_chan::Error>(())
//! ```
//!
//! The C API is in `include/bulkhead/chan.h` (static and shared library).

#[cfg(not(loom))]
mod alive;
pub mod ctrl;
mod error;
pub mod fifo;
pub mod fourslot;
pub mod sync;

#[cfg(not(loom))]
pub mod capi;
#[cfg(not(loom))]
mod endpoint;
#[cfg(not(loom))]
mod fdpass;
#[cfg(not(loom))]
pub mod layout;
#[cfg(not(loom))]
mod map;
#[cfg(not(loom))]
mod named;
#[cfg(not(loom))]
mod shm;

#[cfg(not(loom))]
pub use endpoint::{Receiver, Sender};
pub use error::{Error, OpenError, RecvError, Result, SendError};
#[cfg(not(loom))]
pub use fdpass::{recv_fd, send_fd};
#[cfg(not(loom))]
pub use layout::{Kind, Meta, Overflow};
#[cfg(not(loom))]
pub use named::{cleanup_stale, named_exists, PREFIX};
#[cfg(not(loom))]
pub use shm::{env_name, env_var, Channel, Counters, End, EndCounters, Handover, Spec};
