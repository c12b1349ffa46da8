//! The programs of the DriveOS vehicle (`examples/driveos.yaml`), one binary
//! `bulkhead-app` with a subcommand per program (DriveOS sections 6 and 7, Tables 2
//! and 3), and the libraries they share: the longitudinal controller
//! ([`longcontrol`]), the command protocol of its channels ([`service`], [`wire`]),
//! the vehicle's longitudinal dynamics ([`plant`]) and the cruise scenario
//! ([`scenario`]). See docs/vehicle.md.

pub mod car;
pub mod chanbus;
pub mod dashboard;
pub mod delay;
pub mod longcontrol;
pub mod plant;
pub mod programs;
pub mod scenario;
pub mod service;
pub mod wire;
