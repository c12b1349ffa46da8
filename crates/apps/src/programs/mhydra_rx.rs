//! `bulkhead-app mhydra-rx`, rt task B: the CAN gateway's reader.

use super::{periodic, receiver, report, sender, R};
use crate::chanbus::ChanBus;
use bulkhead_can::gateway::{BusReader, Role};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    /// A channel the frames of usb_rx go to (repeated: to each)
    #[arg(long, value_name = "CHANNEL", default_values = ["ivi_can_rx", "adas_can_rx"])]
    pub(super) to: Vec<String>,
}

/// B: the gateway's reader over `usb_rx`, to every `--to` channel.
pub fn run(args: &Args) -> R<()> {
    let links = args
        .to
        .iter()
        .map(|c| Ok((c.clone(), sender(c)?)))
        .collect::<R<Vec<_>>>()?;
    let bus = ChanBus {
        rx: Some(receiver("usb_rx")?),
        tx: None,
        dropped: Arc::default(),
    };
    let (mut reader, counters) =
        BusReader::new("car", Box::new(bus), links).map_err(|e| e.to_string())?;
    let named: Vec<String> = counters
        .named(Role::Reader)
        .into_iter()
        .map(|c| c.0)
        .collect();
    let result = periodic(&named, |_, v| {
        reader
            .step(64, &mut bulkhead_trace::Discard)
            .map_err(|e| e.to_string())?;
        let mut k = 0;
        counters.for_each_value(Role::Reader, |x| {
            v[k] = x;
            k += 1;
        });
        Ok(())
    });
    report("mhydra-rx", &counters.named(Role::Reader));
    result
}
