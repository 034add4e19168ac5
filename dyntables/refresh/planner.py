"""Choosing how to refresh: NO_DATA is decided by the runner; here FULL or INCREMENTAL.

Every FULL carries a stable reason code the user sees in history and EXPLAIN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dyntables.catalog.definition import DynamicTableDef, RefreshState, SourceVersion
from dyntables.refresh.full import full_refresh
from dyntables.refresh.history import FULL

if TYPE_CHECKING:
    from dyntables.catalog.registry import Registry
    from dyntables.refresh.runner import Executor

INITIAL = "INITIAL_BUILD"
REQUESTED_FULL = "REFRESH_MODE_FULL"
FORCED_FULL = "FORCED_FULL"
NOT_INCREMENTAL = "INCREMENTAL_NOT_AVAILABLE"


class Planner:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def choose(
        self,
        dt: DynamicTableDef,
        previous: RefreshState | None,
        pinned: dict[str, SourceVersion],
        force_full: bool,
    ) -> tuple[str, str | None, Executor]:
        if force_full:
            return FULL, FORCED_FULL, full_refresh
        if previous is None:
            return FULL, INITIAL, full_refresh
        if dt.refresh_mode == "FULL":
            return FULL, REQUESTED_FULL, full_refresh
        return FULL, NOT_INCREMENTAL, full_refresh

    # -- what the user sees before a refresh (EXPLAIN / DESCRIBE / CREATE checks) ----------
    def describe(self, dt: DynamicTableDef) -> tuple[str, str]:
        if dt.refresh_mode == "FULL":
            return FULL, REQUESTED_FULL
        return FULL, NOT_INCREMENTAL

    def explain_lines(self, dt: DynamicTableDef) -> list[tuple[str, str]]:
        mode, reason = self.describe(dt)
        return [("decision", mode), ("reason", reason)]

    def check_create(self, dt: DynamicTableDef, query: object) -> None:
        if dt.refresh_mode == "INCREMENTAL":
            from dyntables.errors import IncrementalNotSupportedError

            raise IncrementalNotSupportedError(
                f"dynamic table {dt.name} cannot be refreshed incrementally ({NOT_INCREMENTAL}); "
                "use REFRESH_MODE = AUTO or FULL"
            )
