//! Window-scheduled processes: `bulkhead_client`'s calls, blocking with the GIL released.

use crate::errors::client as client_err;
use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(initialization_completed, m)?)?;
    m.add_function(wrap_pyfunction!(completed, m)?)?;
    m.add_function(wrap_pyfunction!(initialization_pending, m)?)?;
    m.add_function(wrap_pyfunction!(heartbeat, m)?)?;
    m.add_function(wrap_pyfunction!(request_mode, m)?)?;
    m.add_function(wrap_pyfunction!(request_suspend, m)?)?;
    Ok(())
}

/// Ends the initialization phase and blocks until the schedule runs the process.
#[pyfunction]
fn initialization_completed(py: Python<'_>) -> PyResult<()> {
    py.detach(bulkhead_client::initialization_completed)
        .map_err(|e| client_err(py, e))
}

/// Yields the rest of the current window and blocks until the next one.
#[pyfunction]
fn completed(py: Python<'_>) -> PyResult<()> {
    py.detach(bulkhead_client::completed)
        .map_err(|e| client_err(py, e))
}

/// Whether the process has an initialization phase that has not ended yet.
#[pyfunction]
fn initialization_pending(py: Python<'_>) -> PyResult<bool> {
    bulkhead_client::initialization_pending().map_err(|e| client_err(py, e))
}

/// Feeds the process's watchdog (`health: {watchdog: ...}`); never blocks.
#[pyfunction]
fn heartbeat(py: Python<'_>) -> PyResult<()> {
    bulkhead_client::heartbeat().map_err(|e| client_err(py, e))
}

/// Asks the supervisor for a switch to mode `name` (docs/modes.md, "Requests from
/// inside"); blocks, with the GIL released, until the manager took it.
#[pyfunction]
fn request_mode(py: Python<'_>, name: &str) -> PyResult<()> {
    py.detach(|| bulkhead_client::request_mode(name))
        .map_err(|e| client_err(py, e))
}

/// Asks the supervisor for a suspend of the system, as `request_mode` a mode.
#[pyfunction]
fn request_suspend(py: Python<'_>) -> PyResult<()> {
    py.detach(bulkhead_client::request_suspend)
        .map_err(|e| client_err(py, e))
}
