"""Processes of window-scheduled partitions (``bulkhead_client``, DEmOS's protocol).

A process with ``init: true`` ends its initialization with
:func:`initialization_completed`; any process may give back the rest of its window with
:func:`completed`. Both block (GIL released) until the scheduler runs the process again,
and raise NotAttachedError outside ``bulkhead run``.
"""

from . import _native


def initialization_completed() -> None:
    """Ends the initialization phase; returns when the schedule runs the process."""
    _native.initialization_completed()


def completed() -> None:
    """Yields the rest of the current window; returns in the process's next window.
    During a pending initialization it does nothing (as in DEmOS)."""
    _native.completed()


def initialization_pending() -> bool:
    """Whether the process has an initialization phase that has not ended yet."""
    return _native.initialization_pending()


def heartbeat() -> None:
    """Feeds the process's watchdog (``health: {watchdog: ...}``, docs/health.md) without
    blocking; does nothing where bulkhead reads no heartbeats (a windowed process)."""
    _native.heartbeat()
