//! `bulkhead-app send-frame`: frames into a gateway channel (the attacker of the
//! vehicle's test).

use super::{sender, R};
use bulkhead_can::frame::{CanId, Frame};
use bulkhead_can::gateway;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The gateway channel
    #[arg(long, value_name = "CHANNEL")]
    to: String,
    /// The frames, in candump syntax (ids above 7FF are 29-bit)
    #[arg(value_name = "ID#DATA", value_parser = parse_frame)]
    frames: Vec<Frame>,
}

/// Writes frames (candump syntax, `343#00FF`) into a gateway channel the process
/// holds, as a partition's program sends CAN frames; the gateway's allowlist decides.
pub fn run(args: &Args) -> R<()> {
    let chan = &args.to;
    let mut tx = sender(chan)?;
    for frame in &args.frames {
        let msg = gateway::encode(0, 0, frame).expect("classic frame");
        tx.write_timeout(&msg, Duration::from_secs(1))
            .map_err(|e| format!("{chan}: {e}"))?;
    }
    Ok(())
}

/// `ID#HEXDATA` (ids above 0x7FF are 29-bit).
fn parse_frame(text: &str) -> R<Frame> {
    let bad = |what: &str| format!("{text}: {what} (want ID#HEXDATA, e.g. 343#00FF)");
    let (id, data) = text.split_once('#').ok_or_else(|| bad("no #"))?;
    let id = u32::from_str_radix(id, 16).map_err(|_| bad("bad id"))?;
    let id = match id <= 0x7FF {
        true => CanId::standard(id),
        false => CanId::extended(id),
    }
    .ok_or_else(|| bad("id out of range"))?;
    if data.len() % 2 != 0 || !data.is_ascii() {
        return Err(bad("bad data"));
    }
    let bytes = (0..data.len() / 2)
        .map(|k| u8::from_str_radix(&data[2 * k..2 * k + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| bad("bad data"))?;
    Frame::new(id, &bytes).map_err(|e| bad(&e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::car::ACC_CONTROL;

    #[test]
    fn frames_parse_in_candump_syntax() {
        let f = parse_frame("343#FF38").unwrap();
        assert_eq!((f.id(), f.data()), (ACC_CONTROL, &[0xFF, 0x38][..]));
        assert!(parse_frame("1ABCDEF0#").unwrap().id().is_extended());
        for bad in ["343", "xyz#00", "343#0", "343#GG", "343#001122334455667788"] {
            assert!(parse_frame(bad).is_err(), "{bad}");
        }
    }
}
