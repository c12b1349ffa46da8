"""The exceptions of the bulkhead package.

Every failure of a native call arrives as one of these classes, with a message that says
what went wrong and, where it applies, attributes to act on (the position of a model
error, the sizes of a wrong buffer, the errno the C API would return).
"""

from typing import Optional


class BulkheadError(Exception):
    """Base class of every bulkhead exception."""


class ModelError(BulkheadError, ValueError):
    """A system description that does not load: unreadable, not YAML, or invalid.

    ``str(e)`` is ``file:line:col: key.path: message``, as ``bulkhead check`` prints it.
    """

    def __init__(self, text: str, file: str, line: int, column: int, key_path: str,
                 reason: str) -> None:
        super().__init__(text)
        #: The file (as given to :func:`bulkhead.model.load`, or the name of a string).
        self.file = file
        #: 1-based line and column; 0 when the file itself is the problem (unreadable).
        self.line = line
        self.column = column
        #: Key path such as ``partitions[1].tasks[0].budget``; empty for the document.
        self.key_path = key_path
        #: The message without its position.
        self.reason = reason


class SimulationError(BulkheadError):
    """A loaded description that cannot be simulated (nothing to run, no hyperperiod)."""


class PipelineError(BulkheadError):
    """A pipeline the solver cannot make feasible; the message names the stage and the
    test that fails, as ``bulkhead solve`` prints it."""


class ChannelError(BulkheadError):
    """A channel operation failed. ``errno`` is the (positive) errno the C API reports."""

    def __init__(self, message: str, errno: Optional[int] = None) -> None:
        super().__init__(message)
        self.errno = errno


class BufferSizeError(ChannelError, ValueError):
    """A buffer or message whose size is not the channel's message size."""

    def __init__(self, message: str, expected: int, got: int) -> None:
        super().__init__(message, 22)
        #: The channel's message size in bytes.
        self.expected = expected
        #: The size given.
        self.got = got


class ChannelClosedError(ChannelError):
    """The peer closed the channel (a fifo is drained), or this endpoint was closed."""


class NotAChannelError(ChannelError):
    """A descriptor that is not a bulkhead channel (not open, not a sealed memfd, or a
    header that does not validate)."""


class ChannelTimeoutError(ChannelError):
    """A blocking call reached its timeout."""


class PeerDiedError(ChannelError):
    """The peer process died without closing its endpoint while this side waited."""


class ChannelBusyError(ChannelError):
    """This end of the channel is held by another live process, or the endpoint is in
    use by another thread of this process."""


class ChannelNotFoundError(ChannelError):
    """No such channel (for :meth:`bulkhead.chan.Channel.open`: this process was not
    started by ``bulkhead run`` with that channel)."""


class ChannelCorruptError(ChannelError):
    """The peer wrote impossible values into the channel's control words."""


class NotAttachedError(BulkheadError):
    """The process was not started by ``bulkhead run`` as what the call needs (an rt
    task for :mod:`bulkhead.task`, a window-scheduled process for :mod:`bulkhead.client`),
    or what the supervisor passed is malformed."""


class TaskError(BulkheadError):
    """The rt task library failed (control block, trace ring, system call)."""


class TaskStopped(TaskError):
    """The supervisor asked the task to stop: clean up and return."""


class ClientError(BulkheadError):
    """Talking to the window scheduler failed."""


class RequestRefusedError(ClientError):
    """The supervisor refused a request from inside (:func:`bulkhead.client.request_mode`,
    :func:`bulkhead.client.request_suspend`). ``errno`` is what the C API reports:
    EPERM (1) when the description's ``modes.requesters`` does not allow it, EBUSY or
    EINVAL when the manager did not take it."""

    def __init__(self, message: str, errno: int) -> None:
        super().__init__(message)
        self.errno = errno
