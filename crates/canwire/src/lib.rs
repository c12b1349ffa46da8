//! What the supervisor (`bulkhead-runtime`) and the CAN gateway (`bulkhead-can`,
//! `bulkhead can gateway`) agree on, without the rest of the CAN crate (DBC, SocketCAN,
//! candump logs): the gateway's command line ([`GatewayArgs`]: the supervisor writes it
//! with [`GatewayArgs::to_argv`], the gateway parses it with clap under the `clap`
//! feature), the layout of a gateway channel message ([`WIRE_SIZE`], [`join`],
//! [`split`]), CAN identifiers ([`CanId`], [`parse_ids`]) and the variable naming a
//! client partition's channels ([`env_var`]). DriveOS section 6.4.1 (Programs 3-5).

mod args;
mod id;
mod trigger;
mod wire;

pub use args::{parse_allow, parse_bus_spec, parse_link, GatewayArgs, Role};
pub use id::{parse_ids, CanId, MAX_EXTENDED_ID, MAX_STANDARD_ID};
pub use trigger::{parse_trigger, Trigger};
pub use wire::{join, split, FRAME_SIZE, WIRE_SIZE};

/// Prefix of a bus spec that names a SocketCAN interface.
pub const SOCKETCAN_PREFIX: &str = "socketcan:";

/// Whether `name` is a valid virtual bus name: 1 to 64 characters of A-Z a-z 0-9 _ . -
pub fn is_bus_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// The environment variable through which `bulkhead run` gives the processes of a
/// partition connected to bus `bus` their two channels: `BULKHEAD_CAN_<BUS>`, where
/// `<BUS>` is the bus name uppercased with every character other than A-Z and 0-9
/// replaced by `_` (bus `can0` -> `BULKHEAD_CAN_CAN0`, `body-1` -> `BULKHEAD_CAN_BODY_1`).
/// Its value is `<gateway-to-partition channel>,<partition-to-gateway channel>`
/// (`bulkhead-chan` fifos of [`WIRE_SIZE`]-byte messages).
pub fn env_var(bus: &str) -> String {
    bulkhead_chan::env_name("BULKHEAD_CAN_", bus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_names_and_variables() {
        assert!(is_bus_name("body-1.a_b"));
        assert!(!is_bus_name(""));
        assert!(!is_bus_name("a b"));
        assert!(!is_bus_name(&"x".repeat(65)));
        assert_eq!(env_var("body-1"), "BULKHEAD_CAN_BODY_1");
    }
}
