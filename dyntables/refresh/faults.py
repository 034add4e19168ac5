"""Named points inside a refresh where tests inject failures (crash-safety tests).

Production code calls ``faults.reach(point)``; tests install a hook that raises or
kills the process at a chosen point. With no hook it costs one attribute read.
"""

from __future__ import annotations

from collections.abc import Callable

from dyntables.errors import DynTablesError

POINTS = (
    "after_pin_sources",
    "after_read_changes",
    "after_compute",
    "after_write",
    "before_publish",
    "after_publish_state",
    "after_publish",
)

_hook: Callable[[str], None] | None = None


def install(hook: Callable[[str], None] | None) -> None:
    global _hook
    _hook = hook


def reach(point: str) -> None:
    if _hook is not None:
        _hook(point)


class InjectedFault(DynTablesError):
    """Raised by test hooks; never by production code."""

    code = "INJECTED_FAULT"
