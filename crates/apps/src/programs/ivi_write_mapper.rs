//! `bulkhead-app ivi-write-mapper`, rt task D.

use super::{names, periodic, receiver, sender, R};
use crate::wire::{Hvac, HVAC_COMMAND_ID, SIZE};
use bulkhead_can::frame::{CanId, Frame};
use bulkhead_can::gateway;

#[derive(clap::Args)]
pub struct Args {
    /// The channel of the commands
    #[arg(long, value_name = "CHANNEL", default_value = "hvac_control")]
    from: String,
    /// The gateway channel of the frames
    #[arg(long, value_name = "CHANNEL", default_value = "ivi_can_tx")]
    to: String,
}

/// D: the IVI's HVAC commands (channel 2, [`Hvac`]) as HVAC command frames (0x3E0)
/// to the gateway, whose allowlist decides what reaches the bus. A command out of
/// range (or not an HVAC command) is refused and counted; `last_sent` and
/// `last_refused` are the seqs of the newest of each, for the IVI to show.
pub fn run(args: &Args) -> R<()> {
    let mut rx = receiver(&args.from)?;
    let mut tx = sender(&args.to)?;
    let id = CanId::standard(HVAC_COMMAND_ID).expect("11 bits");
    let mut n = [0u64; 5];
    let mut buf = [0u8; SIZE];
    periodic(
        &names(&[
            "forwarded",
            "dropped",
            "refused",
            "last_sent",
            "last_refused",
        ]),
        |_, v| {
            for _ in 0..16 {
                if rx.try_read(&mut buf).is_err() {
                    break;
                }
                let seq = u64::from(u32::from_le_bytes(buf[4..8].try_into().expect("4")));
                let Ok(h) = Hvac::decode(&buf) else {
                    n[2] += 1;
                    n[4] = seq;
                    continue;
                };
                let frame = Frame::new(id, &h.frame_data()).expect("3 bytes");
                let msg = gateway::encode(0, 0, &frame).expect("classic frame");
                match tx.try_write(&msg) {
                    Ok(()) => (n[0], n[3]) = (n[0] + 1, seq),
                    Err(_) => n[1] += 1,
                }
            }
            v.copy_from_slice(&n);
            Ok(())
        },
    )
}
