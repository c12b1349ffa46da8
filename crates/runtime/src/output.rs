//! The output of be processes, labelled: each line a be process writes to its standard
//! output or error reaches the supervisor's, prefixed with `<partition>[<k>]: ` (its
//! partition and its index there), so that nothing a partition prints can pass for the
//! supervisor's own lines (its warnings, the summary of the rt tasks). A partition once
//! printed a fake `task ... 0 misses` summary into the run's standard error.
//!
//! Each be process gets two pipes ([`Output::pipes`]) as its standard output and error;
//! one thread of the run ([`Relay`]) reads every pipe and writes whole lines. A line
//! longer than [`MAX_LINE`] is cut into several, each labelled. rt tasks are trusted and
//! write to the supervisor's streams directly: a pipe whose reader is late would make
//! them wait.
//!
//! Postcondition of dropping the [`Relay`]: every line written by a process whose pipes
//! were closed (it ended) within [`DRAIN`] of the drop has been passed on.

use bulkhead_os::fd::pipe;
use std::collections::HashMap;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest line passed on whole; a longer one is cut.
pub const MAX_LINE: usize = 4096;

/// How long a stopping relay waits for pipes still open (a process not yet reaped).
const DRAIN: Duration = Duration::from_millis(500);

/// Which of the supervisor's streams a pipe feeds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stream {
    Out,
    Err,
}

/// A pipe's reading end and what it has read of an unfinished line.
struct Source {
    fd: OwnedFd,
    stream: Stream,
    label: String,
    partial: Vec<u8>,
}

/// Hands new pipes to a [`Relay`]; cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Output {
    sources: mpsc::Sender<Source>,
}

impl Output {
    /// The writing ends of a new pair of pipes for a process labelled `label`:
    /// (standard output, standard error), to hand to the process and then close.
    pub fn pipes(&self, label: &str) -> io::Result<(OwnedFd, OwnedFd)> {
        let mut ends = Vec::new();
        for stream in [Stream::Out, Stream::Err] {
            let (read, write) = pipe()?;
            let source = Source {
                fd: read,
                stream,
                label: format!("{label}: "),
                partial: Vec::new(),
            };
            self.sources
                .send(source)
                .map_err(|_| io::Error::other("the output relay has stopped"))?;
            ends.push(write);
        }
        let err = ends.pop().expect("two ends");
        Ok((ends.pop().expect("two ends"), err))
    }
}

/// The thread that passes labelled lines on; stopped and joined on drop.
pub struct Relay {
    output: Output,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    pub fn start() -> io::Result<Relay> {
        let (sender, receiver) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bulkhead-output".into())
            .spawn(move || relay(receiver, &stopping))?;
        Ok(Relay {
            output: Output { sources: sender },
            stop,
            thread: Some(thread),
        })
    }

    /// A handle that gives new pipes to this relay.
    pub fn output(&self) -> Output {
        self.output.clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The relay's loop: polls the pipes it is given (every 50 ms for new ones), passes
/// their whole lines on, and ends once stopped and every pipe is closed (or [`DRAIN`]
/// after the stop).
fn relay(receiver: mpsc::Receiver<Source>, stop: &AtomicBool) {
    let mut sources: HashMap<RawFd, Source> = HashMap::new();
    let mut stopped_at: Option<Instant> = None;
    loop {
        while let Ok(source) = receiver.try_recv() {
            sources.insert(source.fd.as_raw_fd(), source);
        }
        if stop.load(Ordering::SeqCst) {
            let since = *stopped_at.get_or_insert_with(Instant::now);
            if sources.is_empty() || since.elapsed() > DRAIN {
                break;
            }
        }
        let fds: Vec<i32> = sources.keys().copied().collect();
        for fd in bulkhead_os::fd::poll_readable(&fds, 50) {
            let Some(source) = sources.get_mut(&fd) else {
                continue;
            };
            if !pass_on(source) {
                finish(source);
                sources.remove(&fd);
            }
        }
    }
    for source in sources.values_mut() {
        finish(source);
    }
}

/// Reads what `source` has and writes its whole lines; false at its end.
fn pass_on(source: &mut Source) -> bool {
    let mut buf = [0u8; 16 * 1024];
    let n = match bulkhead_os::fd::read_raw(source.fd.as_raw_fd(), &mut buf) {
        Ok(0) => return false,
        Ok(n) => n,
        Err(e) => return e.kind() == io::ErrorKind::Interrupted,
    };
    let lines = whole_lines(&source.label, &mut source.partial, &buf[..n]);
    write(source.stream, &lines);
    true
}

/// The whole lines of `partial` followed by `data`, each labelled (a line of
/// [`MAX_LINE`] bytes without its end counts as whole); the rest stays in `partial`.
fn whole_lines(label_text: &str, partial: &mut Vec<u8>, data: &[u8]) -> Vec<u8> {
    partial.extend_from_slice(data);
    let mut lines = Vec::new();
    let mut taken = 0;
    loop {
        let rest = &partial[taken..];
        let cut = match rest.iter().position(|&b| b == b'\n') {
            Some(end) if end < MAX_LINE => end + 1,
            _ if rest.len() >= MAX_LINE => MAX_LINE,
            _ => break,
        };
        label(&mut lines, label_text, &rest[..cut]);
        taken += cut;
    }
    partial.drain(..taken);
    lines
}

/// Writes what is left of an unfinished line of `source`, with a newline.
fn finish(source: &mut Source) {
    if !source.partial.is_empty() {
        let mut line = Vec::new();
        label(
            &mut line,
            &source.label,
            &std::mem::take(&mut source.partial),
        );
        write(source.stream, &line);
    }
}

/// Appends `label`, `line` and a newline if `line` has none to `out`.
fn label(out: &mut Vec<u8>, label: &str, line: &[u8]) {
    out.extend_from_slice(label.as_bytes());
    out.extend_from_slice(line);
    if line.last() != Some(&b'\n') {
        out.push(b'\n');
    }
}

fn write(stream: Stream, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let _ = match stream {
        Stream::Out => io::stdout().lock().write_all(bytes),
        Stream::Err => io::stderr().lock().write_all(bytes),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines are labelled, a long one is cut, an unfinished one is kept for later.
    #[test]
    fn lines_are_labelled_and_cut() {
        let mut partial = Vec::new();
        let first = whole_lines("ivi[0]: ", &mut partial, b"a\nb\nunfinished");
        assert_eq!(first, b"ivi[0]: a\nivi[0]: b\n");
        assert_eq!(partial, b"unfinished");
        let long = "x".repeat(MAX_LINE + 1);
        let second = whole_lines("ivi[0]: ", &mut partial, format!(" {long}\n").as_bytes());
        let second = String::from_utf8(second).unwrap();
        let lines: Vec<&str> = second.lines().collect();
        let cut = MAX_LINE - "unfinished ".len();
        assert_eq!(lines[0], format!("ivi[0]: unfinished {}", &long[..cut]));
        assert_eq!(lines[1], format!("ivi[0]: {}", &long[cut..]));
        assert_eq!(lines.len(), 2);
        assert!(partial.is_empty());
    }
}
