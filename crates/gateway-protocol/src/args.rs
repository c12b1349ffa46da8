//! The command line of a gateway job, `bulkhead can gateway --role ... --bus ...`: the
//! supervisor writes it ([`GatewayArgs::to_argv`]) and the gateway parses it (clap,
//! under the `clap` feature), so the two cannot drift apart.

use crate::id::{parse_ids, CanId, IdError};
#[cfg(feature = "clap")]
use crate::trigger::parse_trigger;
use crate::trigger::Trigger;
use crate::{is_bus_name, SOCKETCAN_PREFIX};

/// The two jobs of a gateway (DriveOS 6.4.1, Programs 4 and 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Role {
    /// CAN to partitions.
    Reader,
    /// Partitions to CAN.
    Writer,
}

impl Role {
    /// The role as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Writer => "writer",
        }
    }

    /// The per-partition counters of the role, in publication order.
    pub fn counter_names(self) -> &'static [&'static str] {
        match self {
            Role::Reader => &["rx_forwarded", "rx_dropped"],
            Role::Writer => &["tx_sent", "tx_denied", "tx_malformed", "tx_dropped"],
        }
    }
}

/// What the supervisor tells one gateway job: its role, its bus and its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct GatewayArgs {
    /// reader: bus to --to channels; writer: --from channels to bus (allowlisted)
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub role: Role,
    /// The bus: a virtual bus name, or socketcan:IFACE
    #[cfg_attr(feature = "clap", arg(long, value_parser = parse_bus_spec))]
    pub bus: String,
    /// Reader: a partition and the named channel the gateway writes its frames to
    #[cfg_attr(
        feature = "clap",
        arg(long = "to", value_name = "PARTITION=CHAN", value_parser = parse_link)
    )]
    pub to: Vec<(String, String)>,
    /// Writer: a partition and the named channel it writes frames to send to
    #[cfg_attr(
        feature = "clap",
        arg(long = "from", value_name = "PARTITION=CHAN", value_parser = parse_link)
    )]
    pub from: Vec<(String, String)>,
    /// Writer: ids the partition may send, hex (0x1A0) or decimal; above 0x7FF = 29-bit.
    /// A partition without --allow sends nothing
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "PARTITION=ID,ID,...", value_parser = parse_allow)
    )]
    pub allow: Vec<(String, Vec<CanId>)>,
    /// Writer: frames per second the partition may send (a token bucket of --queue frames);
    /// without it, its allowed ids' rates: each one's cycle time in --dbc, else 1000/s
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "PARTITION=N", value_parser = parse_count)
    )]
    pub rate: Vec<(String, u32)>,
    /// Writer: the partition's frames that may wait in the gateway for the bus, and its
    /// largest burst; without it, 4 per allowed id
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "PARTITION=N", value_parser = parse_count)
    )]
    pub queue: Vec<(String, u32)>,
    /// Reader: the only ids forwarded to the partition, hex (0x1A0) or decimal; a
    /// partition without --only gets every frame (a pipeline stage declares its ids)
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "PARTITION=ID,ID,...", value_parser = parse_allow)
    )]
    pub only: Vec<(String, Vec<CanId>)>,
    /// The bus's DBC: the reader decodes the signals of --suspend-when and --resume-when
    /// with it; the writer takes its messages' cycle times (GenMsgCycleTime) as the default
    /// rates
    #[cfg_attr(feature = "clap", arg(long, value_name = "PATH"))]
    pub dbc: Option<String>,
    /// Reader: count `ss.suspend_when` up each time this signal condition is met (stop-start)
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "SIGNAL<VALUE@HOLD_NS", value_parser = parse_trigger, allow_hyphen_values = true)
    )]
    pub suspend_when: Option<Trigger>,
    /// Reader: count `ss.resume_when` up each time this signal condition is met (stop-start)
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "SIGNAL>VALUE@HOLD_NS", value_parser = parse_trigger, allow_hyphen_values = true)
    )]
    pub resume_when: Option<Trigger>,
    /// Reader: count `mode.switch_when.K` up each time the K-th (from 0) of these signal
    /// conditions is met (`modes.switch_when`)
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "SIGNAL>VALUE@HOLD_NS", value_parser = parse_trigger, allow_hyphen_values = true)
    )]
    pub switch_when: Vec<Trigger>,
}

/// The reader's counter of its `k`-th `--switch-when` condition.
pub fn switch_when_counter(k: usize) -> String {
    format!("mode.switch_when.{k}")
}

impl GatewayArgs {
    /// A job of `role` on `bus` with no partitions yet.
    pub fn new(role: Role, bus: &str) -> GatewayArgs {
        GatewayArgs {
            role,
            bus: bus.to_string(),
            to: Vec::new(),
            from: Vec::new(),
            allow: Vec::new(),
            rate: Vec::new(),
            queue: Vec::new(),
            only: Vec::new(),
            dbc: None,
            suspend_when: None,
            resume_when: None,
            switch_when: Vec::new(),
        }
    }

    /// The arguments as `--flag=value` words, which the gateway's parser reads back
    /// to `self`.
    pub fn to_argv(&self) -> Vec<String> {
        let mut argv = vec![
            format!("--role={}", self.role.name()),
            format!("--bus={}", self.bus),
        ];
        argv.extend(self.to.iter().map(|(p, c)| format!("--to={p}={c}")));
        argv.extend(self.from.iter().map(|(p, c)| format!("--from={p}={c}")));
        for (flag, lists) in [("allow", &self.allow), ("only", &self.only)] {
            for (p, ids) in lists {
                let ids: Vec<String> = ids.iter().map(|id| format!("{:#x}", id.raw())).collect();
                argv.push(format!("--{flag}={p}={}", ids.join(",")));
            }
        }
        for (flag, counts) in [("rate", &self.rate), ("queue", &self.queue)] {
            argv.extend(counts.iter().map(|(p, n)| format!("--{flag}={p}={n}")));
        }
        argv.extend(self.dbc.iter().map(|d| format!("--dbc={d}")));
        for (flag, t) in [
            ("suspend-when", &self.suspend_when),
            ("resume-when", &self.resume_when),
        ] {
            argv.extend(t.iter().map(|t| format!("--{flag}={}", t.spec())));
        }
        argv.extend(
            self.switch_when
                .iter()
                .map(|t| format!("--switch-when={}", t.spec())),
        );
        argv
    }
}

/// A gateway flag's value that does not have the flag's form (the value quoted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error("socketcan: needs an interface name, e.g. socketcan:can0")]
    NoInterface,
    #[error("bad bus name {0:?}: use 1 to 64 characters of A-Z a-z 0-9 _ . -")]
    BusName(String),
    #[error("`{0}`: want PARTITION=CHANNEL")]
    Link(String),
    #[error("`{0}`: want PARTITION=N")]
    Count(String),
    #[error("`{0}`: want a positive integer")]
    NotPositive(String),
    #[error("`{0}`: want PARTITION=ID,ID,...")]
    Allow(String),
    #[error(transparent)]
    Id(#[from] IdError),
}

/// The message, for the commands that report in text (`bulkhead can`'s `BUS:IFACE`).
impl From<ArgError> for String {
    fn from(e: ArgError) -> String {
        e.to_string()
    }
}

/// A bus spec: a virtual bus name or `socketcan:IFACE`.
pub fn parse_bus_spec(text: &str) -> Result<String, ArgError> {
    match text.strip_prefix(SOCKETCAN_PREFIX) {
        Some("") => Err(ArgError::NoInterface),
        Some(_) => Ok(text.to_string()),
        None if is_bus_name(text) => Ok(text.to_string()),
        None => Err(ArgError::BusName(text.into())),
    }
}

/// `PARTITION=CHANNEL`.
pub fn parse_link(text: &str) -> Result<(String, String), ArgError> {
    match text.split_once('=') {
        Some((p, c)) if !p.is_empty() && !c.is_empty() => Ok((p.to_string(), c.to_string())),
        _ => Err(ArgError::Link(text.into())),
    }
}

/// `PARTITION=N`, N a positive integer.
pub fn parse_count(text: &str) -> Result<(String, u32), ArgError> {
    match text.rsplit_once('=') {
        Some((p, n)) if !p.is_empty() => match n.parse::<u32>() {
            Ok(n) if n > 0 => Ok((p.to_string(), n)),
            _ => Err(ArgError::NotPositive(n.into())),
        },
        _ => Err(ArgError::Count(text.into())),
    }
}

/// `PARTITION=ID,ID,...` (no ids: the partition sends nothing).
pub fn parse_allow(text: &str) -> Result<(String, Vec<CanId>), ArgError> {
    match text.split_once('=') {
        Some((p, ids)) if !p.is_empty() => Ok((p.to_string(), parse_ids(ids)?)),
        _ => Err(ArgError::Allow(text.into())),
    }
}

#[cfg(all(test, feature = "clap"))]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: GatewayArgs,
    }

    fn parse(argv: &[String]) -> Result<GatewayArgs, clap::Error> {
        let words = std::iter::once("gateway".to_string()).chain(argv.iter().cloned());
        Cli::try_parse_from(words).map(|c| c.args)
    }

    #[test]
    fn the_command_line_reads_back_to_the_same_arguments() {
        let mut args = GatewayArgs::new(Role::Writer, "socketcan:vcan0");
        args.from = vec![("body".into(), "fd:3:4".into()), ("a b".into(), "x".into())];
        args.rate = vec![("body".into(), 500)];
        args.queue = vec![("a b".into(), 3), ("body".into(), 8)];
        args.dbc = Some("/d/toyota.dbc".into());
        args.allow = vec![
            (
                "body".into(),
                vec![CanId::Standard(0x1A0), CanId::Extended(0x800)],
            ),
            ("a b".into(), vec![]),
        ];
        assert_eq!(parse(&args.to_argv()).unwrap(), args);
        let mut reader = GatewayArgs::new(Role::Reader, "body-1");
        reader.to = vec![("p".into(), "fd:5:6".into())];
        reader.only = vec![("p".into(), vec![CanId::Standard(0x101)])];
        assert_eq!(
            reader.to_argv(),
            [
                "--role=reader",
                "--bus=body-1",
                "--to=p=fd:5:6",
                "--only=p=0x101"
            ]
        );
        assert_eq!(parse(&reader.to_argv()).unwrap(), reader);
        reader.dbc = Some("/d/toyota.dbc".into());
        reader.suspend_when = Some(parse_trigger("SPEED<0.5@3000000000").unwrap());
        reader.resume_when = Some(parse_trigger("GAS_PEDAL>-1").unwrap());
        reader.switch_when = vec![
            parse_trigger("SPEED>80@2000000000").unwrap(),
            parse_trigger("SPEED<60").unwrap(),
        ];
        assert_eq!(parse(&reader.to_argv()).unwrap(), reader);
    }

    #[test]
    fn bad_words_are_refused_naming_the_flag() {
        let bad = |argv: &[&str]| {
            let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            parse(&argv).unwrap_err().to_string()
        };
        assert!(bad(&["--role=reader", "--bus=a b"]).contains("--bus"));
        assert!(bad(&["--role=reader", "--bus=socketcan:"]).contains("interface name"));
        assert!(bad(&["--role=writer", "--bus=b", "--allow=p=speed"]).contains("`speed`"));
        assert!(bad(&["--role=writer", "--bus=b", "--from=p"]).contains("PARTITION=CHANNEL"));
        assert!(bad(&["--role=writer", "--bus=b", "--rate=p=0"]).contains("positive integer"));
        assert!(bad(&["--role=writer", "--bus=b", "--queue=p"]).contains("PARTITION=N"));
        assert!(
            bad(&["--role=reader", "--bus=b", "--suspend-when=SPEED"]).contains("--suspend-when")
        );
    }

    /// Each value parser says which form it wanted, keeping an id's parse error.
    #[test]
    fn values_are_refused_with_their_form() {
        assert_eq!(parse_bus_spec("socketcan:"), Err(ArgError::NoInterface));
        assert_eq!(parse_bus_spec("a b"), Err(ArgError::BusName("a b".into())));
        assert_eq!(parse_link("p"), Err(ArgError::Link("p".into())));
        assert_eq!(parse_count("p=0"), Err(ArgError::NotPositive("0".into())));
        assert_eq!(parse_count("=3"), Err(ArgError::Count("=3".into())));
        assert_eq!(parse_allow("p"), Err(ArgError::Allow("p".into())));
        let e = parse_allow("p=speed").unwrap_err();
        assert!(matches!(e, ArgError::Id(IdError::NotAnId { .. })), "{e:?}");
        assert_eq!(
            e.to_string(),
            "`speed` is not a CAN id (hex 0x1A0 or decimal)"
        );
    }
}
