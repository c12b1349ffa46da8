//! The buffer protocol (PEP 3118) under the stable ABI from CPython 3.9: `bytearray`,
//! `memoryview`, numpy arrays and any other exporter, read and written in place.
//!
//! `PyObject_GetBuffer`, `PyBuffer_Release` and `Py_buffer` joined the limited API only
//! in 3.11, so PyO3 offers them to abi3-py39 builds no more; but every CPython 3 exports
//! both functions and `Py_buffer`'s layout has not changed since 3.3, so they are
//! declared here as the CPython headers declare them.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi::{PyObject, Py_ssize_t};
use pyo3::prelude::*;
use std::ffi::{c_char, c_int, c_void};

/// `Py_buffer` (Include/pybuffer.h).
#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut PyObject,
    len: Py_ssize_t,
    itemsize: Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut Py_ssize_t,
    strides: *mut Py_ssize_t,
    suboffsets: *mut Py_ssize_t,
    internal: *mut c_void,
}

/// `PyBUF_SIMPLE`: contiguous bytes, no shape; `PyBUF_WRITABLE`: and writable.
const SIMPLE: c_int = 0;
const WRITABLE: c_int = 1;

extern "C" {
    fn PyObject_GetBuffer(obj: *mut PyObject, view: *mut RawBuffer, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

/// A buffer exported by a Python object: its memory stays where it is, and alive, until
/// this is dropped (which needs the GIL, hence the `Python` token).
pub struct Exported<'py> {
    view: RawBuffer,
    _gil: Python<'py>,
}

impl<'py> Exported<'py> {
    /// Exports `obj` as contiguous bytes (writable ones for `writable`); a TypeError
    /// naming `what` when it cannot.
    pub fn new(obj: &Bound<'py, PyAny>, writable: bool, what: &str) -> PyResult<Exported<'py>> {
        let mut view = RawBuffer {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        };
        let flags = if writable { WRITABLE } else { SIMPLE };
        // SAFETY: `obj` is a live object (the GIL is held: `obj` is bound to 'py) and
        // `view` a Py_buffer to fill; on failure nothing is exported and an error is set.
        if unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut view, flags) } != 0 {
            let cause = PyErr::fetch(obj.py());
            let kind = if writable { "a writable" } else { "a" };
            let err = PyTypeError::new_err(format!(
                "{what} needs {kind} C-contiguous buffer (bytes-like object): {cause}"
            ));
            err.set_cause(obj.py(), Some(cause));
            return Err(err);
        }
        Ok(Exported {
            view,
            _gil: obj.py(),
        })
    }

    /// The buffer's size in bytes.
    pub fn len(&self) -> usize {
        self.view.len as usize
    }

    /// The exported bytes, for writing (the exporter granted a writable buffer: `new`
    /// with `writable`).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        if self.len() == 0 {
            return &mut [];
        }
        // SAFETY: a successful export with PyBUF_SIMPLE is `len` contiguous bytes at
        // `buf`, valid until released in Drop; `&mut self` keeps this the only Rust
        // reference. Python code of other threads could touch the same memory meanwhile,
        // as with any buffer shared between threads: a data race on plain bytes that
        // cannot break memory safety of this crate.
        unsafe { std::slice::from_raw_parts_mut(self.view.buf.cast::<u8>(), self.len()) }
    }

    /// The exported bytes, for reading.
    pub fn bytes(&self) -> &[u8] {
        if self.len() == 0 {
            return &[];
        }
        // SAFETY: as in bytes_mut, read only.
        unsafe { std::slice::from_raw_parts(self.view.buf.cast::<u8>(), self.len()) }
    }
}

impl Drop for Exported<'_> {
    fn drop(&mut self) {
        // SAFETY: `view` was filled by a successful PyObject_GetBuffer and is released
        // once, with the GIL held (`_gil`).
        unsafe { PyBuffer_Release(&mut self.view) }
    }
}
