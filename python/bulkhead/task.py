"""rt tasks written in Python (``bulkhead_task``).

A program named as a task of an ``rt`` partition runs once per period::

    from bulkhead import task
    for activation in task.periods():     # ends when the supervisor stops the task
        work(activation.index)

Its budget must cover the Python interpreter's work too: see docs/python.md.
"""

from dataclasses import dataclass
from typing import Iterator, Optional

from . import _native
from .errors import TaskStopped

#: The release came after the previous activation's end had passed it.
OVERRUN: int = _native.FLAG_OVERRUN
#: Whole periods passed; their releases were skipped (``Activation.skipped``).
SKIPPED: int = _native.FLAG_SKIPPED
#: The first activation of a restarted process.
RESTARTED: int = _native.FLAG_RESTARTED


@dataclass(frozen=True)
class Activation:
    """One activation (job): the release is ``epoch + index * period``."""

    index: int
    #: Planned release, CLOCK_MONOTONIC nanoseconds (``time.monotonic_ns()``).
    release_ns: int
    #: Absolute deadline: release + relative deadline.
    deadline_ns: int
    #: OVERRUN, SKIPPED, RESTARTED bits.
    flags: int
    #: Releases skipped before this one.
    skipped: int

    @property
    def overrun(self) -> bool:
        return bool(self.flags & OVERRUN)

    @property
    def restarted(self) -> bool:
        return bool(self.flags & RESTARTED)


@dataclass(frozen=True)
class Params:
    """The task's parameters as the supervisor configured them (nanoseconds)."""

    name: str
    task_index: int
    budget_ns: int
    period_ns: int
    deadline_ns: int


class Counter:
    """A named counter the supervisor reads by name and exports to the trace."""

    def __init__(self, task: "_native.Task", slot: int, name: str) -> None:
        self._task, self.slot, self.name = task, slot, name

    def set(self, value: int) -> None:
        self._task.set_counter(self.slot, value)

    def add(self, delta: int = 1) -> None:
        self._task.add_counter(self.slot, delta)


class Task:
    """This process's rt task, attached to the supervisor that started it."""

    def __init__(self) -> None:
        """Attaches (``BULKHEAD_TASK``). Raises NotAttachedError outside ``bulkhead
        run``."""
        self._native = _native.Task.attach()
        self.params = Params(*self._native.params())

    def wait_next_period(self) -> Activation:
        """Completes the current activation, sleeps until the next release (GIL
        released) and returns it. Raises TaskStopped once the supervisor asks the task
        to stop."""
        return Activation(*self._native.wait_next_period())

    def complete(self) -> None:
        """Completes the current activation now (its record goes to the trace)."""
        self._native.complete()

    def stop_requested(self) -> bool:
        return self._native.stop_requested()

    def counter(self, name: str) -> Counter:
        """The named counter ``name`` (1 to 47 bytes), created at 0 on first use."""
        return Counter(self._native, self._native.counter(name), name)

    def periods(self) -> Iterator[Activation]:
        """Every activation until the supervisor asks the task to stop."""
        while True:
            try:
                yield self.wait_next_period()
            except TaskStopped:
                return


_task: Optional[Task] = None


def current() -> Task:
    """The process's task, attached on first use."""
    global _task
    if _task is None:
        _task = Task()
    return _task


def wait_next_period() -> Activation:
    """:meth:`Task.wait_next_period` of :func:`current`."""
    return current().wait_next_period()


def complete() -> None:
    """:meth:`Task.complete` of :func:`current`."""
    current().complete()


def periods() -> Iterator[Activation]:
    """:meth:`Task.periods` of :func:`current`."""
    return current().periods()
