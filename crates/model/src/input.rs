//! Reading an input file whole, bounded: only regular files (a FIFO, a device or a
//! directory is refused before it is read, so nothing blocks or reads forever), and at
//! most a given number of bytes. Shared by everything that reads a file whole
//! (descriptions, DBC files).

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The default limit on a file read whole: 16 MiB, far above any real description or DBC.
pub const DEFAULT_MAX_INPUT_SIZE: u64 = 16 << 20;

/// Why a file could not be read.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// The path names something other than a regular file (`what` says what).
    NotRegular(&'static str),
    /// The input holds more than `limit` bytes.
    TooLarge {
        limit: u64,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "cannot read: {e}"),
            ReadError::NotRegular(what) => write!(f, "cannot read: {what}, not a regular file"),
            ReadError::TooLarge { limit } => {
                write!(f, "larger than the input size limit of {limit} bytes")
            }
        }
    }
}

impl std::error::Error for ReadError {}

/// What a file type is called in messages.
fn kind_name(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// Reads the regular file at `path` whole; more than `limit` bytes is an error.
/// The type is checked before opening (opening a FIFO would block) and again on the
/// open file.
pub fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let check = |m: std::fs::Metadata| {
        if m.is_file() {
            Ok(())
        } else {
            Err(ReadError::NotRegular(kind_name(m.file_type())))
        }
    };
    check(std::fs::metadata(path).map_err(ReadError::Io)?)?;
    let file = File::open(path).map_err(ReadError::Io)?;
    check(file.metadata().map_err(ReadError::Io)?)?;
    read_limited(file, limit)
}

/// Reads `input` to its end; more than `limit` bytes is an error (at most `limit + 1`
/// bytes are read, so an endless input ends quickly).
pub fn read_limited(input: impl Read, limit: u64) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    input
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_directories_are_refused_before_reading() {
        for (path, what) in [("/dev/zero", "character device"), ("/", "directory")] {
            let e = read_file(Path::new(path), 10).unwrap_err();
            assert!(e.to_string().contains(what), "{path}: {e}");
        }
    }

    #[test]
    fn an_endless_input_stops_at_the_limit() {
        let e = read_limited(io::repeat(b'a'), 1000).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { limit: 1000 }), "{e}");
        assert_eq!(read_limited(&b"abc"[..], 3).unwrap(), b"abc");
    }
}
