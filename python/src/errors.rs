//! Raising the exceptions of the pure-Python module `bulkhead.errors`, so that each
//! class is defined once, with its docstring and attributes, in Python.

use pyo3::call::PyCallArgs;
use pyo3::prelude::*;

/// An instance of `bulkhead.errors.<class>(*args)` as a `PyErr`.
pub fn raise<'py>(py: Python<'py>, class: &str, args: impl PyCallArgs<'py>) -> PyErr {
    let made = py
        .import("bulkhead.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1(args));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

/// The exception for a channel error: its class, and the errno the C API reports.
pub fn chan(py: Python<'_>, e: impl Into<bulkhead_chan::Error>) -> PyErr {
    use bulkhead_chan::{Error as E, OpenError as O, RecvError as R, SendError as S};
    let e = e.into();
    let class = match &e {
        E::Open(O::BadHeader(_)) => "NotAChannelError",
        E::Open(O::Closed) | E::Send(S::Closed) | E::Recv(R::Closed) => "ChannelClosedError",
        E::Send(S::Timeout) | E::Recv(R::Timeout) => "ChannelTimeoutError",
        E::Send(S::PeerDied(_)) | E::Recv(R::PeerDied(_)) => "PeerDiedError",
        E::Open(O::Busy(_)) => "ChannelBusyError",
        E::Open(O::NotFound(_)) => "ChannelNotFoundError",
        E::Open(O::Corrupt(_)) | E::Send(S::Corrupt(_)) | E::Recv(R::Corrupt(_)) => {
            "ChannelCorruptError"
        }
        _ => "ChannelError",
    };
    raise(py, class, (e.to_string(), -e.errno()))
}

/// The exception for an rt-task library error.
pub fn task(py: Python<'_>, e: bulkhead_task::Error) -> PyErr {
    use bulkhead_task::Error as E;
    match e {
        E::Chan(c) => chan(py, c),
        E::NotAttached(_) => raise(py, "NotAttachedError", (e.to_string(),)),
        E::Stopped => raise(py, "TaskStopped", (e.to_string(),)),
        _ => raise(py, "TaskError", (e.to_string(),)),
    }
}

/// The exception for a window-scheduler client error.
pub fn client(py: Python<'_>, e: bulkhead_client::Error) -> PyErr {
    use bulkhead_client::Error as E;
    match e {
        E::NotScheduled => raise(py, "NotAttachedError", (e.to_string(),)),
        E::Refused(errno) => raise(py, "RequestRefusedError", (e.to_string(), errno)),
        _ => raise(py, "ClientError", (e.to_string(),)),
    }
}
