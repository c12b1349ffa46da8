//! CAN frames: classic CAN with 11- or 29-bit identifiers and 0..8 data bytes, with
//! room for CAN FD (up to 64 bytes), and the Linux SocketCAN `struct can_frame`
//! byte layout (`linux/can.h`).

pub use bulkhead_gateway_protocol::{CanId, MAX_EXTENDED_ID, MAX_STANDARD_ID};
use std::fmt::{self, Write as _};

/// Data bytes in a classic CAN frame, at most.
pub const CLASSIC_MAX_LEN: usize = 8;
/// Data bytes in a CAN FD frame, at most.
pub const FD_MAX_LEN: usize = 64;

/// `CAN_EFF_FLAG` of `linux/can.h`: the identifier is 29 bits.
pub const CAN_EFF_FLAG: u32 = 0x8000_0000;
/// `CAN_RTR_FLAG`: remote transmission request.
pub const CAN_RTR_FLAG: u32 = 0x4000_0000;
/// `CAN_ERR_FLAG`: error frame (not carried by this crate).
pub const CAN_ERR_FLAG: u32 = 0x2000_0000;

/// Classic CAN or CAN FD (with its bit-rate-switch flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Classic,
    Fd { brs: bool },
}

/// Why a frame cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// More data bytes than the frame kind allows, or an FD length that is not a
    /// valid DLC length (0..8, 12, 16, 20, 24, 32, 48, 64).
    BadLength { len: usize, kind: Kind },
    /// A remote frame of CAN FD (FD has no remote frames).
    FdRemote,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadLength {
                len,
                kind: Kind::Classic,
            } => {
                write!(f, "{len} data bytes: a classic CAN frame holds 0..8")
            }
            FrameError::BadLength { len, .. } => write!(
                f,
                "{len} data bytes: a CAN FD frame holds 0..8, 12, 16, 20, 24, 32, 48 or 64"
            ),
            FrameError::FdRemote => write!(f, "CAN FD has no remote frames"),
        }
    }
}

impl std::error::Error for FrameError {}

/// One CAN frame. Data beyond `len` is always zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Frame {
    id: CanId,
    kind: Kind,
    remote: bool,
    len: u8,
    data: [u8; FD_MAX_LEN],
}

fn fd_len_ok(len: usize) -> bool {
    matches!(len, 0..=8 | 12 | 16 | 20 | 24 | 32 | 48 | 64)
}

impl Frame {
    /// A classic data frame with 0..8 bytes.
    pub fn new(id: CanId, data: &[u8]) -> Result<Frame, FrameError> {
        Frame::build(id, Kind::Classic, false, data)
    }

    /// A classic remote frame requesting `len` (0..8) bytes.
    pub fn remote(id: CanId, len: u8) -> Result<Frame, FrameError> {
        if usize::from(len) > CLASSIC_MAX_LEN {
            return Err(FrameError::BadLength {
                len: len.into(),
                kind: Kind::Classic,
            });
        }
        let mut frame = Frame::build(id, Kind::Classic, true, &[])?;
        frame.len = len;
        Ok(frame)
    }

    /// A CAN FD data frame.
    pub fn fd(id: CanId, brs: bool, data: &[u8]) -> Result<Frame, FrameError> {
        Frame::build(id, Kind::Fd { brs }, false, data)
    }

    fn build(id: CanId, kind: Kind, remote: bool, data: &[u8]) -> Result<Frame, FrameError> {
        let ok = match kind {
            Kind::Classic => data.len() <= CLASSIC_MAX_LEN,
            Kind::Fd { .. } => fd_len_ok(data.len()),
        };
        if !ok {
            return Err(FrameError::BadLength {
                len: data.len(),
                kind,
            });
        }
        if remote && kind != Kind::Classic {
            return Err(FrameError::FdRemote);
        }
        let mut bytes = [0; FD_MAX_LEN];
        bytes[..data.len()].copy_from_slice(data);
        Ok(Frame {
            id,
            kind,
            remote,
            len: data.len() as u8,
            data: bytes,
        })
    }

    pub fn id(&self) -> CanId {
        self.id
    }
    pub fn kind(&self) -> Kind {
        self.kind
    }
    pub fn is_remote(&self) -> bool {
        self.remote
    }
    /// Number of data bytes (for a remote frame: the requested length).
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The data bytes (empty for a remote frame).
    pub fn data(&self) -> &[u8] {
        if self.remote {
            &[]
        } else {
            &self.data[..self.len()]
        }
    }

    /// The SocketCAN `can_id` word: identifier plus EFF/RTR flags.
    pub fn can_id_word(&self) -> u32 {
        let mut word = self.id.raw();
        if self.id.is_extended() {
            word |= CAN_EFF_FLAG;
        }
        if self.remote {
            word |= CAN_RTR_FLAG;
        }
        word
    }

    /// The frame as a Linux `struct can_frame` (16 bytes, native byte order for
    /// `can_id`): `can_id` u32, `len` u8, `__pad`, `__res0`, `len8_dlc`, `data[8]`.
    /// Only for classic frames.
    pub fn to_can_frame_bytes(&self) -> Result<[u8; CAN_FRAME_SIZE], FrameError> {
        if self.kind != Kind::Classic {
            return Err(FrameError::BadLength {
                len: self.len(),
                kind: Kind::Classic,
            });
        }
        let mut out = [0u8; CAN_FRAME_SIZE];
        out[0..4].copy_from_slice(&self.can_id_word().to_ne_bytes());
        out[4] = self.len;
        out[8..16].copy_from_slice(&self.data[..8]);
        Ok(out)
    }

    /// Parses a Linux `struct can_frame` (see [`Frame::to_can_frame_bytes`]).
    /// Error frames and lengths above 8 are rejected.
    pub fn from_can_frame_bytes(raw: &[u8; CAN_FRAME_SIZE]) -> Result<Frame, RawFrameError> {
        let word = u32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]]);
        if word & CAN_ERR_FLAG != 0 {
            return Err(RawFrameError::ErrorFrame);
        }
        let id = id_from_word(word)?;
        let len = raw[4];
        if usize::from(len) > CLASSIC_MAX_LEN {
            return Err(RawFrameError::Frame(FrameError::BadLength {
                len: len.into(),
                kind: Kind::Classic,
            }));
        }
        if word & CAN_RTR_FLAG != 0 {
            return Frame::remote(id, len).map_err(RawFrameError::Frame);
        }
        Frame::new(id, &raw[8..8 + usize::from(len)]).map_err(RawFrameError::Frame)
    }
}

/// `sizeof(struct can_frame)` on Linux.
pub const CAN_FRAME_SIZE: usize = bulkhead_gateway_protocol::FRAME_SIZE;

/// Why raw SocketCAN bytes are not a frame of this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawFrameError {
    ErrorFrame,
    /// A standard id above 0x7FF.
    BadId(u32),
    Frame(FrameError),
}

impl fmt::Display for RawFrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawFrameError::ErrorFrame => write!(f, "an error frame"),
            RawFrameError::BadId(id) => write!(f, "standard id {id:#x} exceeds 11 bits"),
            RawFrameError::Frame(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RawFrameError {}

/// The identifier of a SocketCAN `can_id` word.
pub fn id_from_word(word: u32) -> Result<CanId, RawFrameError> {
    if word & CAN_EFF_FLAG != 0 {
        Ok(CanId::Extended(word & MAX_EXTENDED_ID))
    } else {
        let id = word & MAX_EXTENDED_ID;
        CanId::standard(id).ok_or(RawFrameError::BadId(id))
    }
}

/// `ID#DATA` (or `ID#R`, `ID##<flags>DATA`) of one frame.
pub fn format_frame(frame: &Frame) -> String {
    let mut out = frame.id().to_string();
    match frame.kind() {
        Kind::Classic if frame.is_remote() => {
            out.push_str("#R");
            if !frame.is_empty() {
                let _ = write!(out, "{}", frame.len());
            }
        }
        Kind::Classic => out.push('#'),
        Kind::Fd { brs } => {
            let _ = write!(out, "##{}", u8::from(brs));
        }
    }
    for byte in frame.data() {
        let _ = write!(out, "{byte:02X}");
    }
    out
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Frame({})", format_frame(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_range_checked() {
        assert_eq!(CanId::standard(0x7FF), Some(CanId::Standard(0x7FF)));
        assert_eq!(CanId::standard(0x800), None);
        assert_eq!(
            CanId::extended(0x1FFF_FFFF),
            Some(CanId::Extended(0x1FFF_FFFF))
        );
        assert_eq!(CanId::extended(0x2000_0000), None);
    }

    #[test]
    fn classic_frames_hold_at_most_8_bytes() {
        let id = CanId::Standard(1);
        assert!(Frame::new(id, &[0; 8]).is_ok());
        assert!(matches!(
            Frame::new(id, &[0; 9]),
            Err(FrameError::BadLength { len: 9, .. })
        ));
        assert!(Frame::fd(id, true, &[0; 64]).is_ok());
        assert!(Frame::fd(id, false, &[0; 13]).is_err());
    }

    #[test]
    fn can_frame_layout_matches_linux() {
        assert_eq!(CAN_FRAME_SIZE, std::mem::size_of::<libc::can_frame>());
        let frame = Frame::new(CanId::Extended(0x1234_5678), &[1, 2, 3]).unwrap();
        let bytes = frame.to_can_frame_bytes().unwrap();
        // SAFETY: can_frame is plain old data of exactly CAN_FRAME_SIZE bytes (asserted
        // above), so any 16 bytes are a valid value; read_unaligned needs no alignment.
        let raw: libc::can_frame = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
        assert_eq!(raw.can_id, 0x1234_5678 | CAN_EFF_FLAG);
        assert_eq!(raw.can_dlc, 3);
        assert_eq!(&raw.data[..3], &[1, 2, 3]);
        assert_eq!(Frame::from_can_frame_bytes(&bytes), Ok(frame));
    }

    #[test]
    fn remote_and_error_words() {
        let frame = Frame::remote(CanId::Standard(0x123), 2).unwrap();
        let bytes = frame.to_can_frame_bytes().unwrap();
        assert_eq!(frame.can_id_word(), 0x123 | CAN_RTR_FLAG);
        assert_eq!(Frame::from_can_frame_bytes(&bytes), Ok(frame));
        let mut err = bytes;
        err[0..4].copy_from_slice(&CAN_ERR_FLAG.to_ne_bytes());
        assert_eq!(
            Frame::from_can_frame_bytes(&err),
            Err(RawFrameError::ErrorFrame)
        );
        let mut bad = [0u8; 16];
        bad[0..4].copy_from_slice(&0x800u32.to_ne_bytes());
        assert_eq!(
            Frame::from_can_frame_bytes(&bad),
            Err(RawFrameError::BadId(0x800))
        );
    }
}
