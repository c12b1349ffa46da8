//! The control interface of a running bulkhead system: a Unix socket speaking one JSON
//! object per line (`docs/control.md`), used by `bulkhead ctl` to read the system's
//! state and to request mode switches, suspension and resumption.
//!
//! - [`protocol`]: the requests ([`Request`]) and replies ([`Response`]).
//! - [`Server`]: the supervisor's end. One pollable descriptor for its event loop; it
//!   never blocks; only root and the supervisor's own user may connect (mode 0600 and
//!   `SO_PEERCRED`); malformed, unknown and over-long requests get an error reply.
//! - [`Client`]: `bulkhead ctl`'s end, with errors that say when no system is running.
//!
//! ```no_run
//! use bulkhead_control::{Client, Request};
//! use std::time::Duration;
//! let mut client = Client::connect("/run/bulkhead/vehicle.sock".as_ref())?;
//! let reply = client.request(Request::Status, Duration::from_secs(2))?;
//! println!("mode: {:?}", reply.status.and_then(|s| s.mode));
//! # Ok::<(), bulkhead_control::ClientError>(())
//! ```

mod client;
pub mod lines;
pub mod protocol;
mod server;

pub use client::{
    default_path, discover, remove_stale, Client, ClientError, DiscoverError, MAX_REPLY, SOCKET_DIR,
};
pub use protocol::*;
pub use server::{
    BindError, Handled, Handler, Limits, Peer, Server, Ticket, IDLE_TIMEOUT, MAX_CONNECTIONS,
    MAX_PER_USER, MAX_REQUEST, READ_ONLY, STOPPED,
};
