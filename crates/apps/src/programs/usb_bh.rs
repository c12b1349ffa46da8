//! `bulkhead-app usb-bh`, rt task A: the USB host controller's bottom half.

use super::{names, periodic, receiver, say, sender, R};
use crate::chanbus::{usb_step, UsbCounts};
use bulkhead_can::vbus::Node;

#[derive(clap::Args)]
pub struct Args {
    /// The virtual bus
    #[arg(long, value_name = "BUS", default_value = "car")]
    pub(super) bus: String,
}

/// A: attaches to the virtual bus (waiting for it: the plant serves it) and moves
/// frames between it and `usb_rx` / `usb_tx`. A bus that goes away is attached again
/// when it is back.
pub fn run(args: &Args) -> R<()> {
    let bus = &args.bus;
    let (mut rx, mut tx) = (sender("usb_rx")?, receiver("usb_tx")?);
    let mut node: Option<Node> = None;
    let (mut seq, mut n, mut detached) = (0u64, UsbCounts::default(), 0u64);
    let result = periodic(&names(&["rx", "rx_dropped", "tx", "detached"]), |_, v| {
        if node.is_none() {
            node = Node::attach(bus).ok();
        }
        if let Some(attached) = node.as_mut() {
            if let Err(e) = usb_step(attached, &mut rx, &mut tx, 64, &mut seq, &mut n) {
                // The wire is gone (the plant stopped): attach again once it is back.
                say(format!(
                    "usb-bh: bus {bus}: {e}; attaching again when it is back"
                ));
                node = None;
                detached += 1;
            }
        }
        v.copy_from_slice(&[n.rx, n.rx_dropped, n.tx, detached]);
        Ok(())
    });
    say(format!(
        "usb-bh: stopped: rx={} rx_dropped={} tx={} detached={detached}",
        n.rx, n.rx_dropped, n.tx
    ));
    result
}
