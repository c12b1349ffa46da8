//! `bulkhead-app long-controller`, rt task G.

use super::{names, periodic, receiver, say, sender, R};
use crate::service::Controller;
use crate::wire::{Msg, SIZE};
use bulkhead_chan::Receiver;

/// G: the longitudinal controller service (see [`crate::service`]).
pub fn run() -> R<()> {
    let mut cmd = receiver("long_control_command")?;
    let mut data = receiver("long_control_data")?;
    let mut input = receiver("long_update_input")?;
    let mut output = sender("long_update_output")?;
    let mut c = Controller::new();
    let mut lost = 0u64;
    let mut buf = [0u8; SIZE];
    let result = periodic(
        &names(&["inits", "resets", "updates", "rejected", "lost"]),
        |_, v| {
            for _ in 0..10 {
                if cmd.try_read(&mut buf).is_err() {
                    break;
                }
                let mut next_data = || read(&mut data);
                let mut next_input = || read(&mut input);
                if let Some(out) = c.handle(&buf, &mut next_data, &mut next_input) {
                    if output.try_write(&out.encode()).is_err() {
                        lost += 1;
                    }
                }
            }
            let n = c.counts;
            v.copy_from_slice(&[n.inits, n.resets, n.updates, n.rejected, lost]);
            Ok(())
        },
    );
    let n = c.counts;
    say(format!(
        "long-controller: stopped: inits={} resets={} updates={} rejected={}{}",
        n.inits,
        n.resets,
        n.updates,
        n.rejected,
        c.last_reject
            .map(|r| format!(" (last: {r})"))
            .unwrap_or_default()
    ));
    result
}

fn read(rx: &mut Receiver) -> Option<Msg> {
    let mut m = [0u8; SIZE];
    rx.try_read(&mut m).ok().map(|_| m)
}
