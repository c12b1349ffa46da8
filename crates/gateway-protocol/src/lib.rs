//! What the supervisor (`bulkhead-runtime`) and the CAN gateway (`bulkhead-can`,
//! `bulkhead can gateway`) agree on, without the rest of the CAN crate (DBC, SocketCAN,
//! candump logs): the gateway's command line ([`GatewayArgs`]: the supervisor writes it
//! with [`GatewayArgs::to_argv`], the gateway parses it with clap under the `clap`
//! feature), the layout of a gateway channel message ([`WIRE_SIZE`], [`join`],
//! [`split`]), CAN identifiers ([`CanId`], [`parse_ids`]) and the variable naming a
//! client partition's channels ([`env_var`], opened by [`client_channels`] and
//! [`client_receiver`]). DriveOS section 6.4.1 (Programs 3-5).

use bulkhead_chan::{Channel, Receiver};

mod args;
mod id;
mod trigger;
mod wire;

pub use args::{
    parse_allow, parse_bus_spec, parse_count, parse_link, switch_when_counter, ArgError,
    GatewayArgs, Role,
};
pub use id::{parse_ids, CanId, IdError, MAX_EXTENDED_ID, MAX_STANDARD_ID};
pub use trigger::{parse_trigger, Trigger, TriggerError};
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

/// Why a client partition's process cannot reach its bus's gateway; each names the
/// variable [`env_var`] it read.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "{var} is not set: this process is not in a partition connected to CAN bus \
         {bus:?} (bulkhead run sets it for the bus's client partitions)"
    )]
    Unset {
        var: String,
        bus: String,
        source: std::env::VarError,
    },
    #[error(
        "{var}={value:?}: want `<gateway-to-partition channel>,<partition-to-gateway channel>`"
    )]
    Value { var: String, value: String },
    /// A channel the variable names does not open.
    #[error("{var}: channel {channel:?}: {source}")]
    Open {
        var: String,
        channel: String,
        source: bulkhead_chan::OpenError,
    },
    /// The gateway-to-partition channel has no receiving end for this process.
    #[error("{var}: {source}")]
    Receiver {
        var: String,
        source: bulkhead_chan::OpenError,
    },
    #[error("{var}: not a CAN gateway channel")]
    NotGateway { var: String },
}

/// The message, for the programs that report in text (the workloads' `main`).
impl From<ClientError> for String {
    fn from(e: ClientError) -> String {
        e.to_string()
    }
}

/// This process's two channels of bus `bus`, from [`env_var`]: (gateway-to-partition,
/// partition-to-gateway), opened. The error names the variable, and the channel that
/// did not open.
pub fn client_channels(bus: &str) -> Result<(Channel, Channel), ClientError> {
    let (var, to_partition, to_gateway) = client_names(bus)?;
    let open = |name: &str| {
        Channel::open_handed(name).map_err(|source| ClientError::Open {
            var: var.clone(),
            channel: name.into(),
            source,
        })
    };
    Ok((open(&to_partition)?, open(&to_gateway)?))
}

/// This process's receiving end of the gateway-to-partition channel of bus `bus` (as
/// [`client_channels`]), checked to carry gateway messages of [`WIRE_SIZE`] bytes.
pub fn client_receiver(bus: &str) -> Result<Receiver, ClientError> {
    let (var, to_partition, _) = client_names(bus)?;
    let channel = Channel::open_handed(&to_partition).map_err(|source| ClientError::Open {
        var: var.clone(),
        channel: to_partition,
        source,
    })?;
    let rx = match channel.receiver() {
        Ok(rx) => rx,
        Err(source) => return Err(ClientError::Receiver { var, source }),
    };
    if rx.meta().msg_size as usize != WIRE_SIZE {
        return Err(ClientError::NotGateway { var });
    }
    Ok(rx)
}

/// The variable [`env_var`]`(bus)` and the two channel values it holds, trimmed.
fn client_names(bus: &str) -> Result<(String, String, String), ClientError> {
    let var = env_var(bus);
    let value = match std::env::var(&var) {
        Ok(value) => value,
        Err(source) => {
            let bus = bus.into();
            return Err(ClientError::Unset { var, bus, source });
        }
    };
    let Some((to_partition, to_gateway)) = value.split_once(',') else {
        return Err(ClientError::Value { var, value });
    };
    let (p, g) = (
        to_partition.trim().to_string(),
        to_gateway.trim().to_string(),
    );
    Ok((var, p, g))
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

    /// A process outside a client partition is told which variable it lacks.
    #[test]
    fn client_errors_name_the_variable() {
        let bus = format!("h-errors-{}", std::process::id());
        let e = client_channels(&bus).unwrap_err();
        assert!(matches!(e, ClientError::Unset { .. }), "{e:?}");
        assert!(std::error::Error::source(&e).is_some());
        let var = env_var(&bus);
        assert!(
            e.to_string().starts_with(&format!("{var} is not set: ")),
            "{e}"
        );
    }
}
