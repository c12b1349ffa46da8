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


def request_mode(name: str) -> None:
    """Asks the supervisor to switch the system to mode ``name`` (docs/modes.md,
    "Requests from inside"), on this process's own channel; returns once the mode
    manager took the request. Raises RequestRefusedError (``errno`` 1, EPERM) when the
    description's ``modes.requesters`` does not allow this partition that mode, and
    ClientError where no supervisor reads requests."""
    _native.request_mode(name)


def request_suspend() -> None:
    """Asks the supervisor to suspend the system (stop-start), as :func:`request_mode`
    does a mode (allowed by ``suspend: true`` in the partition's requester entry)."""
    _native.request_suspend()
