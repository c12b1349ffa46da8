//! `bulkhead-app mhydra-tx`, rt task H: the CAN gateway's writer.

use super::{periodic, receiver, report, sender, R};
use crate::chanbus::ChanBus;
use bulkhead_can::frame::CanId;
use bulkhead_can::gateway::{BusWriter, Limit, Role, WriterLink};
use bulkhead_can::service::parse_ids;
use bulkhead_task::clock::now_ns;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    /// A channel to usb_tx and the ids it may send, hex or decimal (repeated: each)
    #[arg(
        long,
        value_name = "CHANNEL=IDS",
        value_parser = allowlist,
        default_values = ["ivi_can_tx=", "adas_can_tx=0x343", "adas_raw_tx=0x2E4"],
    )]
    from: Vec<(String, HashSet<CanId>)>,
}

/// `CHANNEL=ID,ID,...`: a channel and its allowlist (none, or no `=`: it sends nothing).
fn allowlist(text: &str) -> R<(String, HashSet<CanId>)> {
    let (chan, ids) = text.split_once('=').unwrap_or((text, ""));
    Ok((chan.to_string(), parse_ids(ids)?.into_iter().collect()))
}

/// H: the gateway's writer: each `--from CHANNEL=IDS` (allowlist, hex or decimal) to
/// `usb_tx`, each channel at the gateway's default limit for its ids ([`Limit::of_ids`]).
pub fn run(args: Args) -> R<()> {
    let mut links = Vec::new();
    for (chan, allow) in args.from {
        links.push(WriterLink {
            from_partition: receiver(&chan)?,
            partition: chan,
            limit: Limit::of_ids(&allow, |_| None),
            allow,
        });
    }
    let dropped = Arc::new(AtomicU64::new(0));
    let bus = ChanBus {
        rx: None,
        tx: Some(sender("usb_tx")?),
        dropped: dropped.clone(),
    };
    let (mut writer, counters) =
        BusWriter::new("car", Box::new(bus), links).map_err(|e| e.to_string())?;
    let mut named: Vec<String> = counters
        .named(Role::Writer)
        .into_iter()
        .map(|c| c.0)
        .collect();
    named.push("usb_tx_dropped".into());
    let result = periodic(&named, |_, v| {
        writer.step(64, now_ns()).map_err(|e| e.to_string())?;
        let mut k = 0;
        counters.for_each_value(Role::Writer, |x| {
            v[k] = x;
            k += 1;
        });
        v[k] = dropped.load(Relaxed);
        Ok(())
    });
    report("mhydra-tx", &counters.named(Role::Writer));
    result
}
