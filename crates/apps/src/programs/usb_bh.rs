//! `bulkhead-app usb-bh`, rt task A: the USB host controller's bottom half.

use super::{names, periodic, receiver, say, sender, R};
use crate::chanbus::UsbBh;
use bulkhead_can::vbus::{Attaching, Node};

#[derive(clap::Args)]
pub struct Args {
    /// The virtual bus
    #[arg(long, value_name = "BUS", default_value = "car")]
    pub(super) bus: String,
}

/// A: attaches to the virtual bus (the plant serves it) and moves frames between it and
/// `usb_rx` / `usb_tx`. A bus that goes away is attached again when it is back. No job
/// waits on the bus: attaching is begun at one job and finished at a later one, and a
/// frame the bus does not take waits for the next job ([`UsbBh`]).
pub fn run(args: &Args) -> R<()> {
    let bus = &args.bus;
    let (mut rx, mut tx) = (sender("usb_rx")?, receiver("usb_tx")?);
    let mut link = Link::Detached;
    let (mut usb, mut detached) = (UsbBh::default(), 0u64);
    let counters = names(&["rx", "rx_dropped", "tx", "tx_full", "detached"]);
    let result = periodic(&counters, |_, v| {
        link = std::mem::replace(&mut link, Link::Detached).advance(bus);
        if let Link::Attached(node) = &mut link {
            if let Err(e) = usb.step(node, &mut rx, &mut tx, 64) {
                // The wire is gone (the plant stopped): attach again once it is back.
                say(format!(
                    "usb-bh: bus {bus}: {e}; attaching again when it is back"
                ));
                link = Link::Detached;
                detached += 1;
            }
        }
        let n = usb.counts;
        v.copy_from_slice(&[n.rx, n.rx_dropped, n.tx, n.tx_full, detached]);
        Ok(())
    });
    let n = usb.counts;
    say(format!(
        "usb-bh: stopped: rx={} rx_dropped={} tx={} tx_full={} detached={detached}",
        n.rx, n.rx_dropped, n.tx, n.tx_full
    ));
    result
}

/// Where `usb-bh` stands with the bus.
enum Link {
    Detached,
    Attaching(Attaching),
    Attached(Node),
}

impl Link {
    /// One step towards being attached, none of which waits: begin, or finish once the
    /// bus acknowledged (its transmit queue then holds a few frames, as a controller's
    /// mailboxes do; the rest wait in `usb_tx`). A failed step starts again at the next job.
    fn advance(self, bus: &str) -> Link {
        match self {
            Link::Detached => Node::begin_attach(bus).map_or(Link::Detached, Link::Attaching),
            Link::Attaching(mut a) => match a.try_finish() {
                Ok(Some(node)) if node.hold_few_frames().is_ok() => Link::Attached(node),
                Ok(None) => Link::Attaching(a),
                _ => Link::Detached,
            },
            attached => attached,
        }
    }
}
