//! Transmission time of a classic CAN frame and the arbitration order.

use crate::frame::{CanId, Frame};

/// Worst-case length in bits of a classic CAN data frame with `data_len` bytes,
/// including worst-case bit stuffing and the 3-bit inter-frame space.
///
/// R. I. Davis, A. Burns, R. J. Bril, J. J. Lukkien, "Controller Area Network (CAN)
/// schedulability analysis: Refuted, revisited and revised", Real-Time Systems 35(3),
/// 2007, Section 3, Eq. (1): `C_m = (g + 8 s_m + 13 + floor((g + 8 s_m - 1) / 4)) τ_bit`,
/// where `g` is 34 for 11-bit identifiers and 54 for 29-bit identifiers, and `s_m`
/// is the number of data bytes. Of the `g + 8 s_m + 13` bits, `g + 8 s_m` are
/// exposed to stuffing (at most one stuff bit per 4 bits after the first).
pub fn frame_bits(extended: bool, data_len: usize) -> u64 {
    let g: u64 = if extended { 54 } else { 34 };
    let payload = 8 * data_len.min(crate::frame::CLASSIC_MAX_LEN) as u64;
    g + payload + 13 + (g + payload - 1) / 4
}

/// Worst-case bits on the wire of `frame` (remote frames carry no data field).
pub fn bits_of(frame: &Frame) -> u64 {
    let len = if frame.is_remote() { 0 } else { frame.len() };
    frame_bits(frame.id().is_extended(), len)
}

/// Transmission time in nanoseconds of `bits` bits at `bitrate` bits/s (rounded up).
pub fn bits_to_ns(bits: u64, bitrate: u64) -> u64 {
    (bits * 1_000_000_000).div_ceil(bitrate)
}

/// The arbitration key of a frame: the lower key wins the bus.
///
/// Bitwise arbitration compares, MSB first, the 11 base id bits, then for a
/// standard frame RTR and IDE (dominant 0), for an extended frame SRR and IDE
/// (both recessive 1), then the 18 extension bits and RTR. So a standard frame
/// beats an extended frame with the same base id, and a data frame beats a remote
/// frame with the same id.
pub fn arbitration_key(frame: &Frame) -> u32 {
    let rtr = u32::from(frame.is_remote());
    match frame.id() {
        CanId::Standard(id) => (u32::from(id) << 21) | (rtr << 20),
        CanId::Extended(id) => {
            let base = id >> 18;
            let ext = id & 0x3_FFFF;
            (base << 21) | (1 << 20) | (1 << 19) | (ext << 1) | rtr
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Davis et al. 2007: the worked example's messages (Section 3.3, Table 1) have
    /// 7 data bytes, 125 bits, i.e. 1 ms at 125 kbit/s; 8-byte frames are 135 bits
    /// (11-bit ids) and 160 bits (29-bit ids).
    #[test]
    fn davis_2007_frame_lengths() {
        assert_eq!(frame_bits(false, 7), 125);
        assert_eq!(bits_to_ns(frame_bits(false, 7), 125_000), 1_000_000);
        assert_eq!(frame_bits(false, 8), 135);
        assert_eq!(frame_bits(true, 8), 160);
        assert_eq!(frame_bits(false, 0), 55);
        // 500 kbit/s: an 8-byte standard frame takes 270 µs.
        assert_eq!(bits_to_ns(135, 500_000), 270_000);
    }

    #[test]
    fn arbitration_order() {
        let f = |id, data: &[u8]| Frame::new(id, data).unwrap();
        let std_low = f(CanId::Standard(0x100), &[]);
        let std_high = f(CanId::Standard(0x101), &[]);
        let ext_same_base = f(CanId::Extended(0x100 << 18), &[]);
        let ext_lower_base = f(CanId::Extended(0xFF << 18 | 0x3_FFFF), &[]);
        let remote = Frame::remote(CanId::Standard(0x100), 0).unwrap();
        let k = arbitration_key;
        assert!(k(&std_low) < k(&std_high));
        assert!(k(&std_low) < k(&ext_same_base));
        assert!(k(&remote) < k(&ext_same_base));
        assert!(k(&std_low) < k(&remote));
        assert!(k(&ext_lower_base) < k(&std_low));
    }
}
