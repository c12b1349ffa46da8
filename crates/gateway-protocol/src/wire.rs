//! A gateway channel message: the reception timestamp (u64 ns, little-endian), a
//! per-bus sequence number (u64, little-endian; gaps reveal drops) and the Linux
//! `struct can_frame` ([`FRAME_SIZE`] bytes; `bulkhead-can` reads and writes it). The
//! timestamp and sequence number of partition-to-gateway messages are ignored.

/// Bytes of the Linux `struct can_frame` (`linux/can.h`).
pub const FRAME_SIZE: usize = 16;

/// Bytes of one gateway channel message.
pub const WIRE_SIZE: usize = 16 + FRAME_SIZE;

/// The message carrying `frame` (a `struct can_frame`) received at `t_ns` as number `seq`.
pub fn join(t_ns: u64, seq: u64, frame: &[u8; FRAME_SIZE]) -> [u8; WIRE_SIZE] {
    let mut msg = [0u8; WIRE_SIZE];
    msg[..8].copy_from_slice(&t_ns.to_le_bytes());
    msg[8..16].copy_from_slice(&seq.to_le_bytes());
    msg[16..].copy_from_slice(frame);
    msg
}

/// The timestamp, sequence number and `struct can_frame` bytes of a message.
pub fn split(msg: &[u8; WIRE_SIZE]) -> (u64, u64, [u8; FRAME_SIZE]) {
    let word = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&msg[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let mut frame = [0u8; FRAME_SIZE];
    frame.copy_from_slice(&msg[16..]);
    (word(0), word(8), frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_time_then_sequence_then_frame() {
        let frame = [7u8; FRAME_SIZE];
        let msg = join(0x0102, 3, &frame);
        assert_eq!(&msg[..3], &[2, 1, 0]);
        assert_eq!(msg[8], 3);
        assert_eq!(split(&msg), (0x0102, 3, frame));
    }
}
