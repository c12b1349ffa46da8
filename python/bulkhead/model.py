"""System descriptions as typed, immutable objects (``bulkhead_model``).

    system = bulkhead.model.load("examples/vms.yaml")
    for p in system.partitions:
        print(p.name, p.kind, [t.name for t in p.tasks])

Durations are integer nanoseconds (fields ending in ``_ns``). A description that does not
load raises :class:`bulkhead.errors.ModelError` with ``file``, ``line``, ``column`` and
``key_path``, the position ``bulkhead check`` prints.
"""

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _native


@dataclass(frozen=True)
class Task:
    """A periodic (or sporadic) real-time task of an rt partition."""

    name: str
    cmd: str
    budget_ns: int
    period_ns: int
    deadline_ns: int
    #: Explicit priority, 1 = highest; None = deadline monotonic.
    priority: Optional[int]
    release_jitter_ns: int
    blocking_ns: int
    #: ``"continuable"`` or ``"restartable"``.
    resume: str
    #: A service bulkhead provides itself, else None: ``"can-reader:BUS"``,
    #: ``"can-writer:BUS"`` (the CAN gateway of bus BUS) or ``"mode-agent"``.
    service: Optional[str]


@dataclass(frozen=True)
class Process:
    """A process of a windowed (or free-running best-effort) partition."""

    cmd: str
    budget_ns: int
    jitter_ns: int
    init: bool


@dataclass(frozen=True)
class Interface:
    """The resource interface of a partition scheduled as a server."""

    period_ns: Optional[int]
    budget_ns: Optional[int]


@dataclass(frozen=True)
class Partition:
    name: str
    #: ``"rt"`` or ``"be"``.
    kind: str
    #: A CPU list such as ``"0-1"``, ``"all"``, or None (from the window slices).
    cpus: Optional[str]
    #: ``"fixed-priority"`` or ``"edf"``.
    scheduler: str
    reclaim: bool
    memory: Optional[int]
    pids: Optional[int]
    tasks: Tuple[Task, ...]
    processes: Tuple[Process, ...]
    user: Optional[str]
    #: ``"host"``, ``"private"`` or None (the default for the system).
    network: Optional[str]
    interface: Optional[Interface]


@dataclass(frozen=True)
class Slice:
    cpus: str
    sc_partition: Optional[str]
    be_partition: Optional[str]


@dataclass(frozen=True)
class Window:
    length_ns: int
    slices: Tuple[Slice, ...]


@dataclass(frozen=True)
class Channel:
    name: str
    #: ``"fifo"`` or ``"latest"``.
    kind: str
    message_size: int
    depth: int
    writer: str
    readers: Tuple[str, ...]


@dataclass(frozen=True)
class BusClient:
    partition: str
    allow: Tuple[int, ...]


@dataclass(frozen=True)
class Bus:
    name: str
    #: SocketCAN interface, or None for the virtual bus called ``name``.
    interface: Optional[str]
    gateway: str
    period_ns: int
    reader_budget_ns: int
    writer_budget_ns: int
    depth: int
    clients: Tuple[BusClient, ...]


@dataclass(frozen=True)
class Modes:
    initial: str
    names: Tuple[str, ...]


@dataclass(frozen=True)
class System:
    """A loaded, valid description. Pass it to :func:`bulkhead.analyze` and
    :func:`bulkhead.sim`, which work on the description as loaded."""

    cpus: Optional[str]
    set_cwd: bool
    supervisor_cpus: Optional[str]
    partitions: Tuple[Partition, ...]
    windows: Tuple[Window, ...]
    channels: Tuple[Channel, ...]
    buses: Tuple[Bus, ...]
    modes: Optional[Modes]
    #: Warnings of the validation, each ``file:line:col: key.path: message``.
    warnings: Tuple[str, ...] = ()
    _native: Any = field(default=None, repr=False, compare=False)

    def partition(self, name: str) -> Optional[Partition]:
        """The partition called ``name``, if any."""
        return next((p for p in self.partitions if p.name == name), None)

    @property
    def tasks(self) -> List[Tuple[str, Task]]:
        """Every rt task as ``(partition name, task)``."""
        return [(p.name, t) for p in self.partitions for t in p.tasks]


def _tuple(cls: type, items: List[Dict[str, Any]]) -> tuple:
    return tuple(cls(**item) for item in items)


def _partition(d: Dict[str, Any]) -> Partition:
    iface = d["interface"]
    return Partition(**{
        **d,
        "tasks": _tuple(Task, d["tasks"]),
        "processes": _tuple(Process, d["processes"]),
        "interface": Interface(**iface) if iface else None,
    })


def _window(d: Dict[str, Any]) -> Window:
    return Window(length_ns=d["length_ns"], slices=_tuple(Slice, d["slices"]))


def _bus(d: Dict[str, Any]) -> Bus:
    clients = tuple(BusClient(c["partition"], tuple(c["allow"])) for c in d["clients"])
    return Bus(**{**d, "clients": clients})


def _system(native: "_native.System", warnings: List[str]) -> System:
    d = json.loads(native.to_json())
    modes = d["modes"]
    return System(
        cpus=d["cpus"],
        set_cwd=d["set_cwd"],
        supervisor_cpus=d["supervisor_cpus"],
        partitions=tuple(_partition(p) for p in d["partitions"]),
        windows=tuple(_window(w) for w in d["windows"]),
        channels=tuple(Channel(**{**c, "readers": tuple(c["readers"])})
                       for c in d["channels"]),
        buses=tuple(_bus(b) for b in d["buses"]),
        modes=Modes(modes["initial"], tuple(modes["names"])) if modes else None,
        warnings=tuple(warnings),
        _native=native,
    )


def load(path: Union[str, "os.PathLike[str]"]) -> System:
    """Loads and validates the description at ``path`` (native or DEmOS). Raises
    ModelError naming file, line, column and key path."""
    return _system(*_native.load(os.fspath(path)))


def loads(text: str, file_name: str = "<string>") -> System:
    """Like :func:`load`, from text; ``file_name`` appears in error messages."""
    return _system(*_native.load_str(text, file_name))
