//! CAN I/O for bulkhead: frames in the SocketCAN layout, candump logs, DBC
//! decoding, a SocketCAN backend, a virtual timed bus, the CAN gateway core, the
//! gateway service (its reader and writer as rt tasks) and the CAN mapper for
//! best-effort partitions. See `docs/can.md`.
//!
//! ```
//! use bulkhead_can::{candump, Database};
//! let db = Database::parse(r#"
//! BO_ 180 SPEED: 8 XXX
//!  SG_ SPEED : 47|16@0+ (0.01,0) [0|250] "kph" XXX
//! "#).unwrap();
//! let record = candump::parse_line("(1.5) can0 0B4#000000001D0B7A5E", 1).unwrap();
//! let decoded = db.decode(&record.frame).unwrap();
//! assert_eq!(decoded.message, "SPEED");
//! assert!((decoded.signals[0].1 - 29.38).abs() < 1e-9); // km/h
//! ```

pub mod bus;
pub mod candump;
pub mod dbc;
pub mod dbc_check;
mod dbc_def;
mod dbc_overlap;
pub mod decode;
pub mod dump;
pub mod frame;
pub mod gateway;
pub mod generate;
pub mod mapper;
pub mod replay;
pub mod service;
pub mod socketcan_bus;
pub mod socketcand;
pub mod timing;
pub mod trigger;
pub mod vbus;

pub use bus::{CanBus, Received};
pub use dbc::Database;
pub use frame::{CanId, Frame};
