//! rt tasks: the `Task` class over `bulkhead_task::Task` (attach, `wait_next_period`
//! with the GIL released while asleep, completions, named counters).

use crate::errors::task as task_err;
use bulkhead_task::{flags, Counter, Task};
use pyo3::prelude::*;
use std::sync::Mutex;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTask>()?;
    m.add("FLAG_OVERRUN", flags::OVERRUN)?;
    m.add("FLAG_SKIPPED", flags::SKIPPED)?;
    m.add("FLAG_RESTARTED", flags::RESTARTED)?;
    Ok(())
}

/// This process's rt task, attached to the supervisor that started it.
#[pyclass(module = "bulkhead._native", name = "Task", frozen)]
pub struct PyTask {
    inner: Mutex<Task>,
}

impl PyTask {
    fn task(&self) -> std::sync::MutexGuard<'_, Task> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn counter_at(&self, slot: i32) -> PyResult<Counter> {
        self.task().counter_at(slot).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!("no counter in slot {slot}"))
        })
    }
}

#[pymethods]
impl PyTask {
    /// Attaches to what `bulkhead run` hands the task (`BULKHEAD_TASK`).
    #[staticmethod]
    fn attach(py: Python<'_>) -> PyResult<Self> {
        let task = Task::attach().map_err(|e| task_err(py, e))?;
        Ok(PyTask {
            inner: Mutex::new(task),
        })
    }

    /// (name, task index, budget ns, period ns, deadline ns).
    fn params(&self) -> (String, u32, u64, u64, u64) {
        let task = self.task();
        let p = task.params();
        (
            p.name.clone(),
            p.task_index,
            p.budget_ns,
            p.period_ns,
            p.deadline_ns,
        )
    }

    /// Completes the current activation, sleeps (GIL released) until the next release and
    /// returns it as (index, release ns, deadline ns, flags, skipped).
    fn wait_next_period(&self, py: Python<'_>) -> PyResult<(u64, u64, u64, u32, u32)> {
        let mut guard = self.task();
        let task: &mut Task = &mut guard;
        let act = py
            .detach(|| task.wait_next_period())
            .map_err(|e| task_err(py, e))?;
        Ok((
            act.index,
            act.release_ns,
            act.deadline_ns,
            act.flags,
            act.skipped,
        ))
    }

    /// Completes the current activation now (its record goes to the trace).
    fn complete(&self) {
        self.task().complete();
    }

    /// Whether the supervisor asked the task to stop.
    fn stop_requested(&self) -> bool {
        self.task().stop_requested()
    }

    /// The slot of the named counter `name` (created at 0 on first use).
    fn counter(&self, py: Python<'_>, name: &str) -> PyResult<usize> {
        let counter = self.task().counter(name).map_err(|e| task_err(py, e))?;
        Ok(counter.slot())
    }

    /// Sets the counter of `slot` (from `counter`).
    fn set_counter(&self, slot: i32, value: u64) -> PyResult<()> {
        let counter = self.counter_at(slot)?;
        self.task().set_counter(counter, value);
        Ok(())
    }

    /// Adds `delta` to the counter of `slot` (wrapping).
    fn add_counter(&self, slot: i32, delta: u64) -> PyResult<()> {
        let counter = self.counter_at(slot)?;
        self.task().add_counter(counter, delta);
        Ok(())
    }
}
