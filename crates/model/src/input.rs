//! Reading an input file, bounded: a regular file (a FIFO only where the caller
//! accepts one; a device, socket or directory is refused before it is read, so nothing
//! reads forever), and at most a given number of bytes. Shared by everything that reads
//! a file whole (descriptions, DBC files, report's logs and traces) or streams one
//! (candump logs): the one place file types are checked.

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

impl From<ReadError> for io::Error {
    /// The I/O error itself, or an `InvalidInput` error that displays as the
    /// [`ReadError`]: for readers that return `io::Result`.
    fn from(e: ReadError) -> io::Error {
        match e {
            ReadError::Io(e) => e,
            e => io::Error::new(io::ErrorKind::InvalidInput, e),
        }
    }
}

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

/// Whether a FIFO is read like a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fifo {
    /// Refused: the input is read twice, or a FIFO there is a mistake (a log, a DBC).
    Refuse,
    /// Read, up to the limit: a description may come from a FIFO, as DEmOS reads its
    /// configuration from one and as `<(generate)` hands it over. Opening it waits for
    /// its writer, as every reader of a FIFO does.
    Accept,
}

/// Opens the file at `path` for reading if it is a regular file (or a FIFO, with
/// [`Fifo::Accept`]). The type is checked before opening (opening a FIFO blocks, a
/// device may never end) and again on the open file (the path may have changed).
pub fn open(path: &Path, fifo: Fifo) -> Result<File, ReadError> {
    let check = |m: std::fs::Metadata| {
        let t = m.file_type();
        if t.is_file() || (fifo == Fifo::Accept && is_fifo(t)) {
            Ok(())
        } else {
            Err(ReadError::NotRegular(kind_name(t)))
        }
    };
    check(std::fs::metadata(path).map_err(ReadError::Io)?)?;
    let file = File::open(path).map_err(ReadError::Io)?;
    check(file.metadata().map_err(ReadError::Io)?)?;
    Ok(file)
}

fn is_fifo(t: std::fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    t.is_fifo()
}

/// Reads the file at `path` ([`open`]) whole; more than `limit` bytes is an error.
pub fn read_file(path: &Path, limit: u64, fifo: Fifo) -> Result<Vec<u8>, ReadError> {
    read_limited(open(path, fifo)?, limit)
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
            for fifo in [Fifo::Refuse, Fifo::Accept] {
                let e = read_file(Path::new(path), 10, fifo).unwrap_err();
                assert!(e.to_string().contains(what), "{path}: {e}");
            }
        }
    }

    #[test]
    fn a_fifo_is_read_where_accepted_and_refused_elsewhere_without_blocking() {
        let dir = std::env::temp_dir().join(format!("bulkhead-input-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let e = read_file(&fifo, 10, Fifo::Refuse).unwrap_err();
        assert!(e.to_string().contains("a FIFO, not a regular file"), "{e}");
        for (text, limit, read) in [("abc", 10, Ok(3)), ("0123456789abc", 10, Err(()))] {
            let path = fifo.clone();
            let writer = std::thread::spawn(move || std::fs::write(path, text));
            let got = read_file(&fifo, limit, Fifo::Accept);
            let _ = writer.join();
            assert_eq!(got.map(|b| b.len()).map_err(drop), read, "{text}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_endless_input_stops_at_the_limit() {
        let e = read_limited(io::repeat(b'a'), 1000).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { limit: 1000 }), "{e}");
        assert_eq!(read_limited(&b"abc"[..], 3).unwrap(), b"abc");
    }
}
