"""bulkhead for Python: channels, rt tasks, window-scheduled clients, system
descriptions, schedulability analysis and simulation.

* :mod:`bulkhead.chan`: shared-memory channels (``Channel.open(name).reader()``);
* :mod:`bulkhead.task`: rt tasks (``for act in task.periods(): ...``);
* :mod:`bulkhead.client`: window-scheduled processes (``completed()``);
* :mod:`bulkhead.model`: ``load(path)`` -> a typed :class:`~bulkhead.model.System`;
* :func:`analyze` and :func:`sim`: ``bulkhead analyze`` and ``bulkhead sim`` as functions;
* :mod:`bulkhead.errors`: every exception raised.

See docs/python.md.
"""

from . import chan, client, errors, model, task
from .analysis import Analysis, Statistics, analyze, sim
from .chan import Channel
from .errors import BulkheadError, ModelError
from .model import load

__all__ = [
    "Analysis", "BulkheadError", "Channel", "ModelError", "Statistics", "analyze", "chan",
    "client", "errors", "load", "model", "sim", "task",
]
