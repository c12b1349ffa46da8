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
    #: The CPU frequency (kHz) its budget was measured at, or None.
    wcet_khz: Optional[int] = None
    #: Share of its budget (parts per million) that does not scale with frequency.
    memory_bound_ppm: int = 0


@dataclass(frozen=True)
class Process:
    """A process of a windowed (or free-running best-effort) partition."""

    cmd: str
    budget_ns: int
    jitter_ns: int
    init: bool
    #: The CPU frequency (kHz) its budget was measured at, or None.
    frequency_khz: Optional[int] = None
    #: Whether its exit ends the run with a failure.
    required: bool = False
    #: When and how often it is restarted, or None (never).
    restart: Optional["Restart"] = None


@dataclass(frozen=True)
class Restart:
    """When a best-effort process is restarted (systemd's ``Restart=``)."""

    #: ``"on-failure"`` or ``"always"``.
    when: str
    delay_ns: int
    burst: int
    interval_ns: int


@dataclass(frozen=True)
class Sandbox:
    """The confinement of a partition's processes (docs/security.md); each holds unless
    the description sets it to false."""

    clean_env: bool
    no_new_privs: bool
    no_capabilities: bool
    seccomp: bool
    private_tmp: bool
    pid_namespace: bool
    private_users: bool
    protect_system: bool
    protect_kernel: bool
    protect_cgroups: bool
    hide_runtime_dir: bool
    private_ipc: bool
    remove_ipc: bool


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
    #: Whether the partition shares its uid with another one on purpose.
    shared_user: bool = False
    #: Whether it is given the supervisor's read-only status (``BULKHEAD_STATUS``).
    monitor: bool = False
    sandbox: Optional[Sandbox] = None


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
class Stage:
    """A stage of a pipeline (docs/pipes.md)."""

    name: str
    partition: str
    cmd: str
    wcet_ns: int
    #: ``"can:BUS"`` or ``"partition/task/endpoint"``, or None.
    input: Optional[str]
    output: Optional[str]
    #: Solved or given values, None until solved.
    period_ns: Optional[int]
    budget_ns: Optional[int]
    priority: Optional[int]


@dataclass(frozen=True)
class Pipeline:
    name: str
    #: The Boomerang expression as written.
    spec: str
    #: ``"fifo"`` (``*``) or ``"latest"`` (four-slot).
    buffering: str
    throughput_per_s: Optional[int]
    loss_ppm: Optional[int]
    delay_ns: Optional[int]
    stages: Tuple[Stage, ...]
    #: (from stage, to stage) names.
    edges: Tuple[Tuple[str, str], ...]


@dataclass(frozen=True)
class Trigger:
    """A condition on a decoded CAN signal (``suspend_when``, ``resume_when``)."""

    bus: str
    signal: str
    #: ``"below"`` or ``"above"``.
    compare: str
    threshold: float
    hold_ns: int


@dataclass(frozen=True)
class StopStart:
    """The ``stop_start:`` section (docs/stop-start.md)."""

    #: Partitions in suspend order (resume is the reverse).
    order: Tuple[str, ...]
    ack_deadline_ns: int
    #: ``"drop"``.
    stale: str
    suspend_to_ram: bool
    suspend_when: Optional[Trigger]
    resume_when: Optional[Trigger]


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
    pipelines: Tuple[Pipeline, ...] = ()
    stop_start: Optional[StopStart] = None
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


def _process(d: Dict[str, Any]) -> Process:
    restart = d["restart"]
    return Process(**{**d, "restart": Restart(**restart) if restart else None})


def _partition(d: Dict[str, Any]) -> Partition:
    iface = d["interface"]
    return Partition(**{
        **d,
        "tasks": _tuple(Task, d["tasks"]),
        "processes": tuple(_process(q) for q in d["processes"]),
        "interface": Interface(**iface) if iface else None,
        "sandbox": Sandbox(**d["sandbox"]),
    })


def _pipeline(d: Dict[str, Any]) -> Pipeline:
    return Pipeline(**{
        **d,
        "stages": _tuple(Stage, d["stages"]),
        "edges": tuple((a, b) for a, b in d["edges"]),
    })


def _stop_start(d: Optional[Dict[str, Any]]) -> Optional[StopStart]:
    if d is None:
        return None
    trigger = lambda t: Trigger(**t) if t else None  # noqa: E731
    return StopStart(**{
        **d,
        "order": tuple(d["order"]),
        "suspend_when": trigger(d["suspend_when"]),
        "resume_when": trigger(d["resume_when"]),
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
        pipelines=tuple(_pipeline(p) for p in d["pipelines"]),
        stop_start=_stop_start(d["stop_start"]),
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
