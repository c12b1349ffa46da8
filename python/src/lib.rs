//! `bulkhead._native`: the thin native layer of the Python package `bulkhead`.
//!
//! Each submodule binds one library crate through its public API: [`chan`] (channels),
//! [`task`] (rt tasks), [`client`] (window-scheduled processes), [`model`] (descriptions,
//! analysis, simulation). Everything Python users see (classes with docstrings, the
//! exceptions, typed dataclasses) is in the pure-Python package; this module raises the
//! exceptions of `bulkhead.errors` by name ([`errors`]).

mod buffer;
mod chan;
mod client;
mod errors;
mod model;
mod task;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    chan::register(m)?;
    client::register(m)?;
    model::register(m)?;
    task::register(m)?;
    Ok(())
}
