"""Refreshing dynamic tables on their intervals, in dependency order.

- :mod:`~dyntables.scheduler.graph` and :mod:`~dyntables.scheduler.plan`: pure
  decisions (what is due, cycles, skips, backoff, suspension), tested with a fake clock;
- :mod:`~dyntables.scheduler.loop`: the loop that executes them on a thread pool;
- :mod:`~dyntables.scheduler.service`: ``dyntables scheduler``, the foreground service.
"""

from dyntables.scheduler.events import SchedulerEvent, format_event
from dyntables.scheduler.graph import Graph
from dyntables.scheduler.loop import Scheduler, SchedulerConfig, SchedulerStats
from dyntables.scheduler.plan import Cycle, Planner, Policy, TableView

__all__ = [
    "Cycle",
    "Graph",
    "Planner",
    "Policy",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerEvent",
    "SchedulerStats",
    "TableView",
    "format_event",
]
