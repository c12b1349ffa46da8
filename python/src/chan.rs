//! Channels: the `Channel`, `Sender` and `Receiver` classes over `bulkhead_chan`'s public
//! API (standalone creation, the channel handed to this process, a channel given as a
//! descriptor).
//!
//! Every call first tries without waiting while holding the GIL (a message or a free slot
//! is the common case of a busy reader or writer). Only then does it block, with the GIL
//! released, in slices of [`SLICE`] between which Python signal handlers run, so Ctrl-C
//! interrupts a blocked read. An endpoint is used by one thread at a time: a second thread
//! gets `ChannelBusyError` instead of waiting for the GIL-less first one (which would
//! deadlock on the GIL when the first returns).
//!
//! Buffers other than `bytes` are exported through the buffer protocol ([`Exported`])
//! for the duration of the call, so they can neither move nor be freed meanwhile.

use crate::buffer::Exported;
use crate::errors::{chan as chan_err, raise};
use bulkhead_chan::{Channel, Error, Kind, Receiver, RecvError, SendError, Sender, Spec};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// The longest a blocked call stays away from Python (signal handlers, Ctrl-C). Longer
/// than the channel's own liveness slice (100 ms), so that a call blocked in it still
/// notices a peer that died (`PeerDiedError`).
const SLICE: Duration = Duration::from_millis(250);
/// How often a read of a `latest` channel that was never written looks again.
const LATEST_POLL: Duration = Duration::from_micros(50);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyChannel>()?;
    m.add_class::<PySender>()?;
    m.add_class::<PyReceiver>()?;
    Ok(())
}

/// A channel object (not yet mapped): create, open, or take one by descriptor.
#[pyclass(module = "bulkhead._native", name = "Channel", frozen)]
pub struct PyChannel {
    inner: Channel,
}

#[pymethods]
impl PyChannel {
    /// A new anonymous channel (a sealed memfd) of `kind` "fifo" or "latest".
    #[staticmethod]
    fn create(
        py: Python<'_>,
        name: &str,
        kind: &str,
        message_size: u32,
        depth: u32,
    ) -> PyResult<Self> {
        let spec = match kind {
            "fifo" => Spec::fifo(name, message_size, depth),
            "latest" => Spec::latest(name, message_size),
            _ => {
                let msg = format!("kind {kind:?}: expected \"fifo\" or \"latest\"");
                return Err(raise(py, "ChannelError", (msg, libc::EINVAL)));
            }
        };
        let inner = Channel::create(&spec).map_err(|e| chan_err(py, e))?;
        Ok(PyChannel { inner })
    }

    /// The description's channel `name`, as `bulkhead run` hands it to this process.
    #[staticmethod]
    fn open(py: Python<'_>, name: &str) -> PyResult<Self> {
        let inner = Channel::open_env(name).map_err(|e| chan_err(py, e))?;
        Ok(PyChannel { inner })
    }

    /// The channel behind descriptor `fd`, which stays the caller's (it is duplicated).
    #[staticmethod]
    fn from_fd(py: Python<'_>, fd: i32) -> PyResult<Self> {
        let not_a_channel = |why: String| {
            let msg = format!("descriptor {fd} is not a bulkhead channel: {why}");
            raise(py, "NotAChannelError", (msg, libc::EBADF))
        };
        // SAFETY: F_DUPFD_CLOEXEC only reads the descriptor table; an fd that is not
        // open fails with EBADF.
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        if dup < 0 {
            return Err(not_a_channel(std::io::Error::last_os_error().to_string()));
        }
        // SAFETY: `dup` is a descriptor this call just created and nothing else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(dup) };
        let inner = Channel::from_fd(owned).map_err(|e| not_a_channel(e.to_string()))?;
        Ok(PyChannel { inner })
    }

    /// The channel's descriptor (to hand to a child process, e.g. `pass_fds`).
    fn fileno(&self) -> i32 {
        self.inner.as_fd().as_raw_fd()
    }

    #[getter]
    fn name(&self) -> String {
        self.inner.meta().name.clone()
    }

    #[getter]
    fn kind(&self) -> &'static str {
        kind_name(self.inner.meta().kind)
    }

    #[getter]
    fn message_size(&self) -> u32 {
        self.inner.meta().msg_size
    }

    #[getter]
    fn depth(&self) -> u32 {
        self.inner.meta().depth
    }

    /// Maps the channel as its writer.
    fn sender(&self, py: Python<'_>) -> PyResult<PySender> {
        let tx = self.inner.sender().map_err(|e| chan_err(py, e))?;
        Ok(PySender::new(tx))
    }

    /// Maps the channel as its reader.
    fn receiver(&self, py: Python<'_>) -> PyResult<PyReceiver> {
        let rx = self.inner.receiver().map_err(|e| chan_err(py, e))?;
        Ok(PyReceiver::new(rx))
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Fifo => "fifo",
        Kind::Latest => "latest",
    }
}

/// Locks an endpoint for one call; another thread inside a call gets `ChannelBusyError`,
/// a closed endpoint `ChannelClosedError`.
fn lock<'a, T>(py: Python<'_>, m: &'a Mutex<Option<T>>) -> PyResult<MutexGuard<'a, Option<T>>> {
    let guard = match m.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => {
            let msg = "the endpoint is in use by another thread".to_string();
            return Err(raise(py, "ChannelBusyError", (msg, libc::EBUSY)));
        }
    };
    if guard.is_none() {
        let msg = "the endpoint is closed".to_string();
        return Err(raise(py, "ChannelClosedError", (msg, libc::EPIPE)));
    }
    Ok(guard)
}

/// Drops the endpoint; `ChannelBusyError` while another thread is inside a call on it.
fn close<T>(py: Python<'_>, m: &Mutex<Option<T>>) -> PyResult<()> {
    match m.try_lock() {
        Ok(mut g) => drop(g.take()),
        Err(TryLockError::Poisoned(p)) => drop(p.into_inner().take()),
        Err(TryLockError::WouldBlock) => {
            let msg = "cannot close: the endpoint is in use by another thread".to_string();
            return Err(raise(py, "ChannelBusyError", (msg, libc::EBUSY)));
        }
    }
    Ok(())
}

fn check_size(py: Python<'_>, got: usize, want: usize) -> PyResult<()> {
    if got == want {
        return Ok(());
    }
    let msg = format!("buffer of {got} bytes, the channel's messages are {want} bytes");
    Err(raise(py, "BufferSizeError", (msg, want, got)))
}

/// The deadline of a timeout in seconds (`None`: wait for ever).
fn deadline(timeout: Option<f64>) -> PyResult<Option<Instant>> {
    let Some(t) = timeout else { return Ok(None) };
    match Duration::try_from_secs_f64(t) {
        Ok(d) => Ok(Instant::now().checked_add(d)),
        Err(_) => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "timeout {t}: expected a finite number of seconds >= 0 or None"
        ))),
    }
}

/// Runs `op` (a blocking channel call given its longest wait) with the GIL released, in
/// slices, until it succeeds, fails otherwise, the deadline passes or a signal handler
/// raises.
fn block<E: Into<Error>>(
    py: Python<'_>,
    timeout: Option<f64>,
    mut op: impl FnMut(Duration) -> Result<(), E> + Send,
) -> PyResult<()> {
    let until = deadline(timeout)?;
    loop {
        let now = Instant::now();
        let slice = until.map_or(SLICE, |d| d.saturating_duration_since(now).min(SLICE));
        match py.detach(|| op(slice).map_err(Into::into)) {
            Err(Error::Send(SendError::Timeout) | Error::Recv(RecvError::Timeout)) => {}
            r => return r.map_err(|e| chan_err(py, e)),
        }
        if until.is_some_and(|d| Instant::now() >= d) {
            let msg = format!("timed out after {} s", timeout.unwrap_or_default());
            return Err(raise(py, "ChannelTimeoutError", (msg, libc::ETIMEDOUT)));
        }
        py.check_signals()?;
    }
}

/// A read of a `latest` channel that waits (polling) for its first message.
fn read_latest_waiting(
    rx: &mut Receiver,
    buf: &mut [u8],
    slice: Duration,
) -> Result<(), RecvError> {
    let until = Instant::now() + slice;
    loop {
        match rx.try_read(buf) {
            Err(RecvError::Empty) if Instant::now() < until => std::thread::sleep(LATEST_POLL),
            Err(RecvError::Empty) => return Err(RecvError::Timeout),
            r => return r,
        }
    }
}

/// The reading end, with a scratch buffer for reads that return `bytes`.
struct Rx {
    rx: Receiver,
    scratch: Vec<u8>,
    latest: bool,
}

impl Rx {
    /// One message into `buf`: at once if there is one, else blocking (see [`block`]).
    fn read(&mut self, py: Python<'_>, buf: &mut [u8], timeout: Option<f64>) -> PyResult<()> {
        match self.rx.try_read(buf) {
            Err(RecvError::Empty) => {}
            r => return r.map_err(|e| chan_err(py, e)),
        }
        let (rx, latest) = (&mut self.rx, self.latest);
        block(py, timeout, |slice| match latest {
            true => read_latest_waiting(rx, buf, slice),
            false => rx.read_timeout(buf, slice),
        })
    }

    /// The newest message into `buf` without waiting; false when there is none. A fifo is
    /// drained: every message but the newest is dropped.
    fn read_latest(&mut self, py: Python<'_>, buf: &mut [u8]) -> PyResult<bool> {
        let mut got = false;
        loop {
            match self.rx.try_read(buf) {
                Ok(()) if !self.latest => got = true,
                Ok(()) => return Ok(true),
                Err(RecvError::Empty) => return Ok(got),
                Err(RecvError::Closed) if got => return Ok(true),
                Err(e) => return Err(chan_err(py, e)),
            }
        }
    }
}

/// The reading end of a channel.
#[pyclass(module = "bulkhead._native", name = "Receiver", frozen)]
pub struct PyReceiver {
    inner: Mutex<Option<Rx>>,
    size: usize,
}

impl PyReceiver {
    fn new(rx: Receiver) -> PyReceiver {
        let size = rx.meta().msg_size as usize;
        let latest = rx.meta().kind == Kind::Latest;
        PyReceiver {
            inner: Mutex::new(Some(Rx {
                rx,
                scratch: vec![0; size],
                latest,
            })),
            size,
        }
    }
}

#[pymethods]
impl PyReceiver {
    #[getter]
    fn message_size(&self) -> usize {
        self.size
    }

    /// The next message as bytes, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn read<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyBytes>> {
        let mut guard = lock(py, &self.inner)?;
        let rx = guard.as_mut().expect("lock checks");
        let mut scratch = std::mem::take(&mut rx.scratch);
        let r = rx.read(py, &mut scratch, timeout);
        let bytes = r.map(|()| PyBytes::new(py, &scratch));
        rx.scratch = scratch;
        bytes
    }

    /// The next message as bytes if there is one now, else None.
    fn try_read<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let mut guard = lock(py, &self.inner)?;
        let rx = guard.as_mut().expect("lock checks");
        match rx.rx.try_read(&mut rx.scratch) {
            Ok(()) => Ok(Some(PyBytes::new(py, &rx.scratch))),
            Err(RecvError::Empty) => Ok(None),
            Err(e) => Err(chan_err(py, e)),
        }
    }

    /// The newest message as bytes without waiting, or None.
    fn read_latest<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let mut guard = lock(py, &self.inner)?;
        let rx = guard.as_mut().expect("lock checks");
        let mut scratch = std::mem::take(&mut rx.scratch);
        let r = rx.read_latest(py, &mut scratch);
        let bytes = r.map(|got| got.then(|| PyBytes::new(py, &scratch)));
        rx.scratch = scratch;
        bytes
    }

    /// `read` into `buffer` (writable, C-contiguous, of the message size) in place.
    #[pyo3(signature = (buffer, timeout=None))]
    fn read_into(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let mut exported = Exported::new(buffer, true, "read_into")?;
        check_size(py, exported.len(), self.size)?;
        let mut guard = lock(py, &self.inner)?;
        let rx = guard.as_mut().expect("lock checks");
        rx.read(py, exported.bytes_mut(), timeout)
    }

    /// `read_latest` into `buffer`; False when there was no message.
    fn read_latest_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<bool> {
        let mut exported = Exported::new(buffer, true, "read_latest_into")?;
        check_size(py, exported.len(), self.size)?;
        let mut guard = lock(py, &self.inner)?;
        let rx = guard.as_mut().expect("lock checks");
        rx.read_latest(py, exported.bytes_mut())
    }

    /// Spin iterations before a blocking fifo read sleeps on the futex.
    fn set_spin(&self, py: Python<'_>, spins: u32) -> PyResult<()> {
        let mut guard = lock(py, &self.inner)?;
        guard.as_mut().expect("lock checks").rx.set_spin(spins);
        Ok(())
    }

    /// Messages published so far on a latest channel (wrapping at 2**31); 0 for a fifo.
    fn published(&self, py: Python<'_>) -> PyResult<u32> {
        Ok(lock(py, &self.inner)?
            .as_ref()
            .expect("lock checks")
            .rx
            .published())
    }

    /// How many times a blocking read slept on the futex.
    fn sleeps(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(lock(py, &self.inner)?
            .as_ref()
            .expect("lock checks")
            .rx
            .sleeps())
    }

    /// Unmaps the endpoint (a fifo's writer then sees the channel closed); closing a
    /// closed endpoint does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        close(py, &self.inner)
    }

    #[getter]
    fn closed(&self) -> bool {
        matches!(self.inner.try_lock().as_deref(), Ok(None))
    }
}

/// Writes `msg` at once if there is room, else blocking (see [`block`]).
fn write(py: Python<'_>, tx: &mut Sender, msg: &[u8], timeout: Option<f64>) -> PyResult<()> {
    match tx.try_write(msg) {
        Err(SendError::Full) => {}
        r => return r.map_err(|e| chan_err(py, e)),
    }
    block(py, timeout, |slice| tx.write_timeout(msg, slice))
}

/// Writes `msg` if there is room now; false when a fifo is full.
fn try_write(py: Python<'_>, tx: &mut Sender, msg: &[u8]) -> PyResult<bool> {
    match tx.try_write(msg) {
        Ok(()) => Ok(true),
        Err(SendError::Full) => Ok(false),
        Err(e) => Err(chan_err(py, e)),
    }
}

/// The writing end of a channel.
#[pyclass(module = "bulkhead._native", name = "Sender", frozen)]
pub struct PySender {
    inner: Mutex<Option<Sender>>,
    size: usize,
}

impl PySender {
    fn new(tx: Sender) -> PySender {
        let size = tx.meta().msg_size as usize;
        PySender {
            inner: Mutex::new(Some(tx)),
            size,
        }
    }

    fn write_bytes(&self, py: Python<'_>, msg: &[u8], timeout: Option<f64>) -> PyResult<()> {
        check_size(py, msg.len(), self.size)?;
        let mut guard = lock(py, &self.inner)?;
        write(py, guard.as_mut().expect("lock checks"), msg, timeout)
    }
}

#[pymethods]
impl PySender {
    #[getter]
    fn message_size(&self) -> usize {
        self.size
    }

    /// Writes `data` (`bytes` or any C-contiguous buffer of exactly one message),
    /// waiting up to `timeout` seconds while a fifo is full.
    #[pyo3(signature = (data, timeout=None))]
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        if let Ok(bytes) = data.cast::<PyBytes>() {
            return self.write_bytes(py, bytes.as_bytes(), timeout);
        }
        let exported = Exported::new(data, false, "write")?;
        self.write_bytes(py, exported.bytes(), timeout)
    }

    /// Writes `data` if there is room now; False when a fifo is full.
    fn try_write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<bool> {
        let exported;
        let msg = match data.cast::<PyBytes>() {
            Ok(bytes) => bytes.as_bytes(),
            Err(_) => {
                exported = Exported::new(data, false, "try_write")?;
                exported.bytes()
            }
        };
        check_size(py, msg.len(), self.size)?;
        let mut guard = lock(py, &self.inner)?;
        try_write(py, guard.as_mut().expect("lock checks"), msg)
    }

    /// Spin iterations before a blocking fifo write sleeps on the futex.
    fn set_spin(&self, py: Python<'_>, spins: u32) -> PyResult<()> {
        lock(py, &self.inner)?
            .as_mut()
            .expect("lock checks")
            .set_spin(spins);
        Ok(())
    }

    /// How many times a blocking write slept on the futex.
    fn sleeps(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(lock(py, &self.inner)?
            .as_ref()
            .expect("lock checks")
            .sleeps())
    }

    /// Unmaps the endpoint (the reader of a fifo then drains it and sees it closed);
    /// closing a closed endpoint does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        close(py, &self.inner)
    }

    #[getter]
    fn closed(&self) -> bool {
        matches!(self.inner.try_lock().as_deref(), Ok(None))
    }
}
