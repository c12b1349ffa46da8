//! A DBC's messages and signals as [`crate::dbc`] loads them: their layout, when each
//! signal is present, and how a signal's bits are read and written. Both the decoder
//! ([`crate::dbc`]) and the overlap check (`dbc_overlap`) work on these.

use crate::frame::CanId;

/// How a signal's bits are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Unsigned,
    Signed,
    Float32,
    Float64,
}

/// When a signal is present in a frame.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Presence {
    Always,
    /// When signal `switch` (index in the message) is present and its raw value is in
    /// one of the inclusive ranges.
    When {
        switch: usize,
        ranges: Vec<(u64, u64)>,
    },
}

/// One signal of a message.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalDef {
    pub name: String,
    pub start_bit: u32,
    pub size: u32,
    pub little_endian: bool,
    pub encoding: Encoding,
    pub factor: f64,
    pub offset: f64,
    pub unit: String,
    pub(crate) presence: Presence,
}

impl SignalDef {
    /// The raw bits of this signal (not sign-extended), or None if they lie beyond `data`.
    pub fn raw_bits(&self, data: &[u8]) -> Option<u64> {
        let bit = |pos: u32| -> Option<u64> {
            let byte = data.get((pos / 8) as usize)?;
            Some(u64::from((byte >> (pos % 8)) & 1))
        };
        let mut value = 0u64;
        if self.little_endian {
            for i in 0..self.size {
                value |= bit(self.start_bit + i)? << i;
            }
        } else {
            let mut pos = self.start_bit;
            for _ in 0..self.size {
                value = (value << 1) | bit(pos)?;
                pos = if pos % 8 == 0 { pos + 15 } else { pos - 1 };
            }
        }
        Some(value)
    }

    /// Writes the low `size` bits of `raw` into `data` where [`SignalDef::raw_bits`]
    /// reads them; None if they lie beyond `data`.
    pub fn set_raw_bits(&self, data: &mut [u8], raw: u64) -> Option<()> {
        let mut put = |pos: u32, bit: u64| -> Option<()> {
            let byte = data.get_mut((pos / 8) as usize)?;
            let mask = 1u8 << (pos % 8);
            *byte = if bit & 1 == 1 {
                *byte | mask
            } else {
                *byte & !mask
            };
            Some(())
        };
        if self.little_endian {
            for i in 0..self.size {
                put(self.start_bit + i, raw >> i)?;
            }
        } else {
            let mut pos = self.start_bit;
            for i in (0..self.size).rev() {
                put(pos, raw >> i)?;
                pos = if pos % 8 == 0 { pos + 15 } else { pos - 1 };
            }
        }
        Some(())
    }

    /// The raw bits for physical value `value`: `(value - offset) / factor`, rounded
    /// to the nearest integer for integer signals; None if that does not fit.
    pub fn raw_for(&self, value: f64) -> Option<u64> {
        let scaled = (value - self.offset) / self.factor;
        if !scaled.is_finite() {
            return None;
        }
        let mask = if self.size == 64 {
            u64::MAX
        } else {
            (1u64 << self.size) - 1
        };
        match self.encoding {
            Encoding::Unsigned => {
                let r = scaled.round();
                (r >= 0.0 && r <= mask as f64).then_some(r as u64)
            }
            Encoding::Signed => {
                let r = scaled.round();
                let half = (1u64 << (self.size - 1)) as f64;
                (r >= -half && r < half).then_some((r as i64 as u64) & mask)
            }
            Encoding::Float32 => Some(u64::from((scaled as f32).to_bits())),
            Encoding::Float64 => Some(scaled.to_bits()),
        }
    }

    /// The physical value: the raw value (sign-extended or IEEE 754 per
    /// [`Encoding`]) times factor plus offset.
    pub fn physical(&self, raw: u64) -> f64 {
        let value = match self.encoding {
            Encoding::Unsigned => raw as f64,
            Encoding::Signed => {
                let shift = 64 - self.size;
                (((raw << shift) as i64) >> shift) as f64
            }
            Encoding::Float32 => f64::from(f32::from_bits(raw as u32)),
            Encoding::Float64 => f64::from_bits(raw),
        };
        value * self.factor + self.offset
    }
}

/// One message of a DBC.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageDef {
    pub id: CanId,
    pub name: String,
    /// Payload length the DBC declares.
    pub size: usize,
    pub signals: Vec<SignalDef>,
    /// How often the message is sent, in ms: its `GenMsgCycleTime` attribute (`BA_`), or
    /// the attribute's default (`BA_DEF_DEF_`); `None` when neither is a positive number
    /// (the message is not sent periodically, or the DBC does not say).
    pub cycle_ms: Option<f64>,
}
