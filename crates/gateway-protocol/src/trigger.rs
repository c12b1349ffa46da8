//! A stop-start trigger on a decoded CAN signal, as the gateway's command line carries
//! it: `SIGNAL<VALUE@HOLD_NS` or `SIGNAL>VALUE@HOLD_NS` (strictly below or above the
//! physical value, held without a break for HOLD_NS; 0: one frame is enough).

/// A condition the gateway reader watches (`--suspend-when`, `--resume-when`).
#[derive(Debug, Clone)]
pub struct Trigger {
    /// The signal's name in the bus's DBC.
    pub signal: String,
    /// `true`: above the threshold; `false`: below.
    pub above: bool,
    /// A finite physical value, in the DBC's unit.
    pub threshold: f64,
    /// How long the condition must hold, ns.
    pub hold_ns: u64,
}

impl PartialEq for Trigger {
    fn eq(&self, o: &Trigger) -> bool {
        (&self.signal, self.above, self.hold_ns) == (&o.signal, o.above, o.hold_ns)
            && self.threshold.to_bits() == o.threshold.to_bits()
    }
}

/// Thresholds are finite (checked when parsed), so equality is an equivalence.
impl Eq for Trigger {}

impl Trigger {
    /// Whether `value` meets the condition (not counting the hold).
    pub fn met(&self, value: f64) -> bool {
        if self.above {
            value > self.threshold
        } else {
            value < self.threshold
        }
    }

    /// The command-line form, which [`parse_trigger`] reads back.
    pub fn spec(&self) -> String {
        let op = if self.above { '>' } else { '<' };
        format!("{}{op}{}@{}", self.signal, self.threshold, self.hold_ns)
    }
}

/// A trigger text that is not `SIGNAL<VALUE@HOLD_NS` or `SIGNAL>VALUE@HOLD_NS`: the text
/// and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}`: {why}; want SIGNAL<VALUE@HOLD_NS or SIGNAL>VALUE@HOLD_NS")]
pub struct TriggerError {
    pub text: String,
    pub why: &'static str,
}

/// Parses `SIGNAL<VALUE@HOLD_NS` or `SIGNAL>VALUE@HOLD_NS` (`@HOLD_NS` may be left out:
/// 0).
pub fn parse_trigger(text: &str) -> Result<Trigger, TriggerError> {
    let bad = |why| TriggerError {
        text: text.into(),
        why,
    };
    let at = text.find(['<', '>']).ok_or_else(|| bad("no < or >"))?;
    let (signal, rest) = (&text[..at], &text[at + 1..]);
    if signal.is_empty() {
        return Err(bad("no signal"));
    }
    let (value, hold) = rest.split_once('@').unwrap_or((rest, "0"));
    let threshold: f64 = value
        .parse()
        .map_err(|_| bad("the value is not a number"))?;
    if !threshold.is_finite() {
        return Err(bad("the value is not finite"));
    }
    let hold_ns = hold
        .parse()
        .map_err(|_| bad("HOLD_NS is not a whole number of ns"))?;
    Ok(Trigger {
        signal: signal.to_string(),
        above: text.as_bytes()[at] == b'>',
        threshold,
        hold_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers_read_back_and_bad_ones_are_refused() {
        let t = parse_trigger("SPEED<0.5@3000000000").unwrap();
        assert!(!t.above && t.threshold == 0.5 && t.hold_ns == 3_000_000_000);
        assert_eq!(parse_trigger(&t.spec()).unwrap(), t);
        let g = parse_trigger("GAS_PEDAL>0").unwrap();
        assert!(g.above && g.hold_ns == 0 && g.met(0.1) && !g.met(0.0));
        assert!(t.met(0.4) && !t.met(0.5));
        for bad in [
            "SPEED",
            "<1",
            "SPEED<x",
            "SPEED<inf",
            "SPEED<1@-3",
            "SPEED>1@2s",
        ] {
            let e = parse_trigger(bad).unwrap_err();
            assert_eq!(e.text, bad);
            assert!(e.to_string().contains("want SIGNAL<VALUE"), "{bad}");
        }
        assert_eq!(
            parse_trigger("SPEED<inf").unwrap_err().why,
            "the value is not finite"
        );
    }
}
