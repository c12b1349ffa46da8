//! SIGINT and SIGTERM as readable events (in `bulkhead-os`).

pub use bulkhead_os::signal::StopSignals;
