"""Shared-memory channels between partitions (``bulkhead_chan``).

A process started by ``bulkhead run`` opens the description's channels by name::

    from bulkhead import chan
    rx = chan.Channel.open("can2ivi").reader()
    msg = rx.read(timeout=1.0)          # bytes of the channel's message size

Tests and tools create anonymous channels and hand them to a child process by
descriptor (``Channel.fileno()`` with ``subprocess``'s ``pass_fds``; the child calls
``Channel.from_fd``).

Reads and writes try at once while holding the GIL, then block with the GIL released
(Ctrl-C interrupts them within 0.25 s; a peer process that dies is noticed).
``read_into`` and ``write`` take any C-contiguous buffer (``bytearray``, ``memoryview``,
numpy arrays): the message is copied straight between the shared mapping and the
caller's memory, with no intermediate copy.
"""

from typing import Optional, Union

from . import _native

#: ``bytes`` or any object with the buffer protocol (``bytearray``, ``memoryview``, numpy
#: arrays, ``array.array``...), C-contiguous.
Buffer = Union[bytes, bytearray, memoryview, object]


class Writer:
    """The writing end of a channel (one writer per channel)."""

    def __init__(self, native: "_native.Sender") -> None:
        self._tx = native
        #: The message size in bytes: every write is exactly this long.
        self.message_size: int = native.message_size

    def write(self, data: Buffer, timeout: Optional[float] = None) -> None:
        """Writes one message (``bytes`` or any buffer of the message size). A fifo
        blocks while full, up to ``timeout`` seconds (None: for ever); a latest channel
        never blocks.

        Raises BufferSizeError, TypeError (not a buffer, or not C-contiguous),
        ChannelClosedError (the reader closed),
        ChannelTimeoutError, PeerDiedError."""
        self._tx.write(data, timeout)

    def try_write(self, data: Buffer) -> bool:
        """Writes one message if there is room now; False when a fifo is full."""
        return self._tx.try_write(data)

    def set_spin(self, spins: int) -> None:
        """Spin iterations before a blocking write sleeps on the futex (fifo)."""
        self._tx.set_spin(spins)

    def close(self) -> None:
        """Unmaps this end; the reader of a fifo drains it, then sees it closed."""
        self._tx.close()

    @property
    def closed(self) -> bool:
        return self._tx.closed

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Reader:
    """The reading end of a channel (one reader per channel)."""

    def __init__(self, native: "_native.Receiver") -> None:
        self._rx = native
        #: The message size in bytes.
        self.message_size: int = native.message_size

    def read(self, timeout: Optional[float] = None) -> bytes:
        """The next message. A fifo blocks while empty, up to ``timeout`` seconds (None:
        for ever); a latest channel returns its newest message, waiting only for the
        first one ever written.

        Raises ChannelClosedError once a fifo's writer closed and the ring is drained,
        ChannelTimeoutError, PeerDiedError."""
        return self._rx.read(timeout)

    def try_read(self) -> Optional[bytes]:
        """The next message if there is one now, else None (for busy polling)."""
        return self._rx.try_read()

    def read_latest(self) -> Optional[bytes]:
        """The newest message without waiting, or None when there is none. On a fifo
        every older queued message is dropped."""
        return self._rx.read_latest()

    def read_into(self, buffer: Buffer, timeout: Optional[float] = None) -> None:
        """Like :meth:`read`, into ``buffer`` (writable, C-contiguous, exactly the message
        size: a ``bytearray``, a numpy array...), with no intermediate copy.

        Raises BufferSizeError for a buffer of another size, TypeError for a read-only
        or non-contiguous one (or an object without the buffer protocol)."""
        self._rx.read_into(buffer, timeout)

    def read_latest_into(self, buffer: Buffer) -> bool:
        """Like :meth:`read_latest`, into ``buffer``; False when there was no message."""
        return self._rx.read_latest_into(buffer)

    def published(self) -> int:
        """Messages published so far on a latest channel (wrapping at 2**31); 0 for a
        fifo."""
        return self._rx.published()

    def set_spin(self, spins: int) -> None:
        """Spin iterations before a blocking read sleeps on the futex (fifo)."""
        self._rx.set_spin(spins)

    def close(self) -> None:
        """Unmaps this end; the writer of a fifo then sees it closed."""
        self._rx.close()

    @property
    def closed(self) -> bool:
        return self._rx.closed

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Channel:
    """A channel object; map it with :meth:`writer` or :meth:`reader`."""

    def __init__(self, native: "_native.Channel") -> None:
        self._native = native

    @classmethod
    def create(cls, name: str, message_size: int, depth: int = 1,
               kind: str = "fifo") -> "Channel":
        """A new anonymous channel (a sealed memfd) of ``kind`` ``"fifo"`` (a lossless
        ring of ``depth`` messages) or ``"latest"`` (Simpson's four-slot register)."""
        return cls(_native.Channel.create(name, kind, message_size, depth))

    @classmethod
    def open(cls, name: str) -> "Channel":
        """The description's channel ``name``, as ``bulkhead run`` hands it to this
        process. Raises ChannelNotFoundError outside ``bulkhead run`` or for a channel
        this partition is not given."""
        return cls(_native.Channel.open(name))

    @classmethod
    def from_fd(cls, fd: int) -> "Channel":
        """The channel behind descriptor ``fd`` (duplicated: ``fd`` stays the caller's).
        Raises NotAChannelError for anything but a bulkhead channel."""
        return cls(_native.Channel.from_fd(fd))

    def fileno(self) -> int:
        """The channel's descriptor, e.g. for ``subprocess.Popen(pass_fds=...)``."""
        return self._native.fileno()

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def kind(self) -> str:
        """``"fifo"`` or ``"latest"``."""
        return self._native.kind

    @property
    def message_size(self) -> int:
        return self._native.message_size

    @property
    def depth(self) -> int:
        return self._native.depth

    def writer(self) -> Writer:
        """Maps the channel as its writer. Raises ChannelBusyError if a live process
        already holds that end."""
        return Writer(self._native.sender())

    def reader(self) -> Reader:
        """Maps the channel as its reader (everything but its own control page
        read-only). Raises ChannelBusyError if a live process already holds that end."""
        return Reader(self._native.receiver())

    def __repr__(self) -> str:
        return (f"Channel(name={self.name!r}, kind={self.kind!r}, "
                f"message_size={self.message_size}, depth={self.depth})")
