"""Schedulability analysis and simulation of a loaded description.

    system = bulkhead.model.load("examples/vms.yaml")
    result = bulkhead.analyze(system)        # a list of per-task dicts
    result.schedulable, result[0]["wcrt_ns"]
    result.to_dataframe()                    # with pandas installed
    stats = bulkhead.sim(system, for_="1s")  # per-task statistics
"""

import datetime
import json
import os
from typing import Any, Dict, List, Optional, Union

from . import _native, model

SystemLike = Union[model.System, str, "os.PathLike[str]"]
Duration = Union[str, int, datetime.timedelta]


def _native_system(system: SystemLike) -> "_native.System":
    if not isinstance(system, model.System):
        system = model.load(system)
    return system._native


def _dataframe(rows: List[Dict[str, Any]]) -> Any:
    try:
        import pandas
    except ImportError as e:
        raise ImportError("to_dataframe needs pandas (pip install pandas)") from e
    return pandas.DataFrame(rows)


class Analysis(List[Dict[str, Any]]):
    """The verdict on each task, as ``bulkhead analyze --json`` reports it: one dict per
    task with ``partition``, ``name``, ``cpu``, ``wcrt_ns``, ``deadline_ns``,
    ``schedulable``, ``slack_ns``, ``wcet_ns``, ``period_ns``, ``priority``, ``test``,
    ``binding``, ``wcet_limit_ns``. The rest of the report is in attributes."""

    def __init__(self, report: Dict[str, Any]) -> None:
        super().__init__(report["tasks"])
        #: The whole report (``tasks``, ``partitions``, ``cpus``, ``windows``, ...).
        self.report = report
        #: Whether every task, partition, CPU and window is schedulable.
        self.schedulable: bool = report["schedulable"]
        self.partitions: List[Dict[str, Any]] = report["partitions"]
        self.cpus: List[Dict[str, Any]] = report["cpus"]
        self.windows: Optional[Dict[str, Any]] = report["windows"]
        self.warnings: List[str] = report["warnings"]

    def to_dataframe(self) -> Any:
        """The per-task results as a pandas DataFrame (one row per task)."""
        return _dataframe(list(self))


class Statistics(Dict[str, Any]):
    """What a simulation measured, as ``bulkhead sim --stats-json`` writes it:
    ``duration_ns``, ``seed``, ``jobs``, ``tasks`` (per task: ``jobs``, ``released``,
    ``max_response_ns``, ``mean_response_ns``, ``misses``, ...), ``chains``,
    ``channels``, ``windows``."""

    @property
    def tasks(self) -> List[Dict[str, Any]]:
        return self["tasks"]

    def to_dataframe(self) -> Any:
        """The per-task statistics as a pandas DataFrame."""
        return _dataframe(self.tasks)


def analyze(system: SystemLike, deadline_cap: int = 95) -> Analysis:
    """Analyzes ``system`` (a :class:`bulkhead.model.System` or a path) as ``bulkhead
    analyze`` does; ``deadline_cap`` is the SCHED_DEADLINE bandwidth cap per CPU in
    percent."""
    if not 1 <= deadline_cap <= 100:
        raise ValueError(f"deadline_cap {deadline_cap}: expected a percentage in 1..=100")
    return Analysis(json.loads(_native.analyze(_native_system(system), deadline_cap)))


def _duration_ns(d: Optional[Duration]) -> Optional[int]:
    if d is None:
        return None
    if isinstance(d, datetime.timedelta):
        return (d.days * 86_400 + d.seconds) * 10**9 + d.microseconds * 1000
    if isinstance(d, int) and not isinstance(d, bool):
        if d <= 0:
            raise ValueError(f"for_={d}: expected a positive number of nanoseconds")
        return d
    if isinstance(d, str):
        return _native.duration_ns(d)
    raise TypeError(f"for_={d!r}: expected a duration such as '100ms', nanoseconds or a "
                    "timedelta")


def sim(system: SystemLike, for_: Optional[Duration] = None, seed: int = 0) -> Statistics:
    """Simulates ``system`` for ``for_`` (``"100ms"``, integer nanoseconds or a
    ``timedelta``; None: one hyperperiod) with the default options of ``bulkhead sim``.
    Raises SimulationError when there is nothing to simulate."""
    native = _native_system(system)
    return Statistics(json.loads(_native.sim(native, _duration_ns(for_), seed)))
