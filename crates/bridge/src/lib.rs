//! The Zenoh bridge of a bulkhead channel (issue 40; docs/zenoh.md).
//!
//! A bridge is an rt task of its own partition, started by `bulkhead run` as
//! `bulkhead-bridge publish|subscribe --channel NAME --key KEY ...` ([`Args`]):
//!
//! * `publish`: the bridge is the channel's reader. Each job takes every message waiting
//!   in the channel and puts its bytes, unchanged, on the key (reliable, blocking
//!   congestion control: a slow network holds the channel back instead of losing
//!   messages). It reads only while a subscriber on the key is matched, so a message
//!   written before any subscriber exists waits in the channel instead of being lost.
//! * `subscribe`: the bridge is the channel's writer. Each job writes every sample
//!   received on the key into the channel for its local readers (by the channel's overflow
//!   rule); a sample whose size is not the channel's message size is refused. Zenoh
//!   queues the samples between jobs in the subscriber's queue ([`subscriber_queue`]);
//!   a full queue holds Zenoh's receiving thread back (and so the sender: no loss).
//!
//! A peer's loss is reported, not waited on: the publisher when the key's last subscriber
//! goes, the subscriber when the last publishing bridge's liveliness token goes (each
//! publishing bridge declares one, [`publisher_token`]). Each loss prints
//! `bulkhead-bridge: KEY: peer lost` on stderr and counts in the task's counter
//! `bridge.lost`; `bridge.peers` is 1 while a peer is present, `bridge.messages` counts the
//! messages bridged and `bridge.refused` the samples refused.
//!
//! Every bridge answers queries on its echo ([`echo_key`]) on Zenoh's own threads, so
//! that `bulkhead-bridge probe` ([`ProbeArgs`], run by `bulkhead probe --zenoh PEER`) can
//! time the round trip to the bridges at a peer: what a bridge's hop `latency:` declares.

use std::fmt;
use zenoh::Wait;

/// The direction of a bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Channel to key.
    Publish,
    /// Key to channel.
    Subscribe,
}

/// A bridge's command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    pub direction: Direction,
    /// The description's channel (`BULKHEAD_CHAN_<NAME>` names its handed end).
    pub channel: String,
    /// The Zenoh key expression.
    pub key: String,
    /// `peer` or `client`.
    pub mode: String,
    /// Zenoh endpoints to listen on (`tcp/ADDR:PORT`).
    pub listen: Vec<String>,
    /// Zenoh endpoints to connect to.
    pub connect: Vec<String>,
}

/// A command line [`Args::parse`] refuses; the text says which flag and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The usage line of `bulkhead-bridge`.
pub const USAGE: &str = "usage: bulkhead-bridge publish|subscribe --channel NAME --key KEY \
[--mode peer|client] [--listen ENDPOINT]... [--connect ENDPOINT]...";

impl Args {
    /// Parses `publish|subscribe` and the flags (without the program name).
    pub fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, UsageError> {
        let usage = |m: String| UsageError(m);
        let direction = match args.next().as_deref() {
            Some("publish") => Direction::Publish,
            Some("subscribe") => Direction::Subscribe,
            Some(other) => return Err(usage(format!("unknown direction `{other}`"))),
            None => return Err(usage("missing direction (publish or subscribe)".into())),
        };
        let (mut channel, mut key, mut mode) = (None, None, "peer".to_string());
        let (mut listen, mut connect) = (Vec::new(), Vec::new());
        while let Some(flag) = args.next() {
            let value = args
                .next()
                .ok_or_else(|| usage(format!("{flag} needs a value")))?;
            match flag.as_str() {
                "--channel" => channel = Some(value),
                "--key" => key = Some(value),
                "--mode" if value == "peer" || value == "client" => mode = value,
                "--mode" => return Err(usage(format!("--mode: `{value}`: want peer or client"))),
                "--listen" => listen.push(value),
                "--connect" => connect.push(value),
                other => return Err(usage(format!("unknown argument `{other}`"))),
            }
        }
        Ok(Args {
            direction,
            channel: channel.ok_or_else(|| usage("missing --channel".into()))?,
            key: key.ok_or_else(|| usage("missing --key".into()))?,
            mode,
            listen,
            connect,
        })
    }

    /// The Zenoh configuration: the mode, the endpoints, and no multicast scouting (a
    /// bridge meets exactly the peers its description names).
    pub fn zenoh_config(&self) -> zenoh::Result<zenoh::Config> {
        let json = |v: serde_json::Value| v.to_string();
        let mut config = zenoh::Config::default();
        config.insert_json5("mode", &json(self.mode.clone().into()))?;
        config.insert_json5("scouting/multicast/enabled", "false")?;
        if !self.listen.is_empty() {
            config.insert_json5("listen/endpoints", &json(self.listen.clone().into()))?;
        }
        if !self.connect.is_empty() {
            config.insert_json5("connect/endpoints", &json(self.connect.clone().into()))?;
        }
        Ok(config)
    }
}

/// The liveliness token a publishing bridge of `key` declares, by which subscribing
/// bridges see it come and go.
pub fn publisher_token(key: &str) -> String {
    format!("bulkhead/bridge/publisher/{key}")
}

/// The key of the echo every bridge of `key` answers (`bulkhead-bridge probe` times the
/// round trip of a query to it; [`ECHOES`] matches them all).
pub fn echo_key(key: &str) -> String {
    format!("bulkhead/bridge/echo/{key}")
}

/// Answers the probes' queries on the echo of `key` ([`echo_key`]), on Zenoh's threads.
pub fn declare_echo(
    session: &zenoh::Session,
    key: &str,
) -> zenoh::Result<zenoh::query::Queryable<()>> {
    let echo = echo_key(key);
    let reply_key = echo.clone();
    session
        .declare_queryable(echo)
        .callback(move |query| {
            // A probe gone before the reply is nothing to report.
            let _ = query.reply(reply_key.clone(), Vec::<u8>::new()).wait();
        })
        .wait()
}

/// The key expression of every bridge's echo.
pub const ECHOES: &str = "bulkhead/bridge/echo/**";

/// `bulkhead-bridge probe --connect ENDPOINT [--count N]`: the round trip to the bridges
/// at a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeArgs {
    pub connect: String,
    /// Round trips to time.
    pub count: u32,
}

/// The usage line of `bulkhead-bridge probe`.
pub const PROBE_USAGE: &str = "usage: bulkhead-bridge probe --connect ENDPOINT [--count N]";

impl ProbeArgs {
    /// Parses the flags after `probe`.
    pub fn parse(mut args: impl Iterator<Item = String>) -> Result<ProbeArgs, UsageError> {
        let (mut connect, mut count) = (None, 20);
        while let Some(flag) = args.next() {
            let Some(value) = args.next() else {
                return Err(UsageError(format!("{flag} needs a value")));
            };
            match flag.as_str() {
                "--connect" => connect = Some(value),
                "--count" => match value.parse::<u32>() {
                    Ok(n) if n > 0 => count = n,
                    _ => {
                        return Err(UsageError(format!(
                            "--count: `{value}`: want a positive number"
                        )))
                    }
                },
                other => return Err(UsageError(format!("unknown argument `{other}`"))),
            }
        }
        let connect = connect.ok_or_else(|| UsageError("missing --connect".into()))?;
        Ok(ProbeArgs { connect, count })
    }

    /// A peer that connects to the endpoint only (no listening, no scouting).
    pub fn zenoh_config(&self) -> zenoh::Result<zenoh::Config> {
        let mut config = zenoh::Config::default();
        config.insert_json5("mode", r#""peer""#)?;
        config.insert_json5("scouting/multicast/enabled", "false")?;
        config.insert_json5("listen/endpoints", "[]")?;
        let connect = serde_json::Value::from(vec![self.connect.clone()]).to_string();
        config.insert_json5("connect/endpoints", &connect)?;
        Ok(config)
    }
}

/// Zenoh's default subscriber queue: the samples its `FifoChannel` holds.
pub const ZENOH_QUEUE: usize = 256;

/// The samples a subscribing bridge's queue holds between two jobs: as many as its
/// channel of `depth` messages (what one job can write there without waiting for the
/// readers), at least Zenoh's default [`ZENOH_QUEUE`]. With the default alone a bridge
/// moved at most 256 samples per period (128,000 per second at 2 ms, docs/zenoh.md).
pub fn subscriber_queue(depth: u32) -> usize {
    (depth as usize).max(ZENOH_QUEUE)
}

/// Round trips in nanoseconds, summarized: (min, median, max).
pub fn summary(mut rtts: Vec<u64>) -> Option<(u64, u64, u64)> {
    rtts.sort_unstable();
    Some((*rtts.first()?, rtts[rtts.len() / 2], *rtts.last()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subscriber_queue_holds_a_channel_full_and_never_less_than_zenohs() {
        assert_eq!(subscriber_queue(4096), 4096);
        assert_eq!(subscriber_queue(257), 257);
        assert_eq!(subscriber_queue(16), ZENOH_QUEUE);
    }

    fn words(s: &str) -> impl Iterator<Item = String> + '_ {
        s.split_whitespace().map(String::from)
    }

    #[test]
    fn the_command_line_is_read() {
        let args = Args::parse(words(
            "subscribe --channel speed --key vehicle/speed --mode client --connect tcp/10.0.0.1:7447 --listen tcp/0.0.0.0:7447",
        ))
        .unwrap();
        assert_eq!(args.direction, Direction::Subscribe);
        assert_eq!(args.channel, "speed");
        assert_eq!(args.key, "vehicle/speed");
        assert_eq!(args.mode, "client");
        assert_eq!(args.listen, ["tcp/0.0.0.0:7447"]);
        assert_eq!(args.connect, ["tcp/10.0.0.1:7447"]);
    }

    #[test]
    fn bad_command_lines_name_the_flag() {
        let err = |s: &str| Args::parse(words(s)).unwrap_err().0;
        assert_eq!(err("send --key k"), "unknown direction `send`");
        assert_eq!(err("publish --key k"), "missing --channel");
        assert_eq!(
            err("publish --channel c --key k --mode router"),
            "--mode: `router`: want peer or client"
        );
        assert_eq!(err("publish --channel"), "--channel needs a value");
    }

    #[test]
    fn the_probe_command_line_is_read() {
        let args = ProbeArgs::parse(words("--connect tcp/10.0.0.1:7447 --count 5")).unwrap();
        assert_eq!(
            (args.connect.as_str(), args.count),
            ("tcp/10.0.0.1:7447", 5)
        );
        let err = |s: &str| ProbeArgs::parse(words(s)).unwrap_err().0;
        assert_eq!(err("--count 5"), "missing --connect");
        assert_eq!(
            err("--connect e --count 0"),
            "--count: `0`: want a positive number"
        );
        assert_eq!(err("--connect"), "--connect needs a value");
        let config = args.zenoh_config().unwrap();
        let get = |k: &str| config.get_json(k).unwrap().replace(' ', "");
        assert_eq!(get("connect/endpoints"), r#"["tcp/10.0.0.1:7447"]"#);
        assert_eq!(get("listen/endpoints"), "[]");
    }

    #[test]
    fn a_summary_is_min_median_max() {
        assert_eq!(summary(vec![30, 10, 20]), Some((10, 20, 30)));
        assert_eq!(summary(Vec::new()), None);
    }

    #[test]
    fn the_zenoh_configuration_holds_the_endpoints() {
        let args = Args::parse(words(
            "publish --channel c --key k --listen tcp/127.0.0.1:7447 --connect tcp/127.0.0.1:7448",
        ))
        .unwrap();
        let config = args.zenoh_config().unwrap();
        let get = |k: &str| config.get_json(k).unwrap().replace(' ', "");
        assert_eq!(get("mode"), r#""peer""#);
        assert_eq!(get("listen/endpoints"), r#"["tcp/127.0.0.1:7447"]"#);
        assert_eq!(get("connect/endpoints"), r#"["tcp/127.0.0.1:7448"]"#);
        assert_eq!(get("scouting/multicast/enabled"), "false");
    }
}
