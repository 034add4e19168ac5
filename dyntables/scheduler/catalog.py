"""The scheduler's reads and writes of the catalog: metadata only, never a Spark job
(except the history append for a skipped refresh, which the history table needs).

Definitions are re-read at every planning pass, so ``ALTER DYNAMIC TABLE ... SUSPEND``,
``RESUME``, new intervals and dropped tables take effect within one cycle, from any
process, without telling the scheduler anything; new tables are found within
``discover_every`` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from dyntables.catalog.definition import ACTIVE, DynamicTableDef, RefreshState
from dyntables.catalog.iceberg import load_table
from dyntables.catalog.trash import SYSTEM_NAMESPACE
from dyntables.errors import ConfigError
from dyntables.refresh.history import (
    NO_DATA,
    QUEUED,
    SYSTEM_SCHEDULED,
    HistoryRecord,
    source_tables_json,
    stats_json,
)
from dyntables.refresh.ids import new_job_id
from dyntables.scheduler.plan import TableView
from dyntables.sql.tokens import TableName, namespace_shown

if TYPE_CHECKING:
    from dyntables.catalog.registry import Registry


@dataclass(frozen=True)
class Snapshot:
    """One planning pass's view of the catalog."""

    views: list[TableView]
    defs: dict[str, DynamicTableDef]


class CatalogAccess:
    """Reads the dynamic tables in scope; writes suspensions and skip records.

    Scope: ``tables`` (qualified names) if given, else every table of ``namespaces``
    (default: all namespaces of the catalog but the system one).

    Cost: each pass reloads the metadata of the dynamic tables it knows (one Iceberg
    metadata read each); listing the namespaces and checking every table for new
    dynamic tables happens every ``discover_every`` seconds only, since a listing plus
    a load of each base table costs several times more than the pass itself.
    """

    def __init__(
        self,
        registry: Registry,
        namespaces: Iterable[str] | None = None,
        tables: Iterable[str] | None = None,
        discover_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.namespaces = _known(registry, namespaces) if namespaces is not None else None
        self.tables = tuple(tables) if tables is not None else None
        self.discover_every = discover_every
        self.clock = clock
        self._known: list[TableName] = []
        self._discovered_at: float | None = None

    # -- reading ------------------------------------------------------------------------
    def read(self) -> Snapshot:
        now = self.clock()
        discover = self._discovered_at is None or now - self._discovered_at >= self.discover_every
        names = self._candidates() if discover else list(self._known)
        views: list[TableView] = []
        defs: dict[str, DynamicTableDef] = {}
        known: list[TableName] = []
        for name in names:
            table = load_table(self.registry.spark, name)
            if table is None:
                continue
            props = table.properties()  # once: each property is a round trip to the JVM
            dt = DynamicTableDef.from_properties(name, props)
            if dt is None:
                continue
            state = RefreshState.from_properties(props)
            key = str(dt.name)
            known.append(dt.name)
            defs[key] = dt
            views.append(
                TableView(
                    name=key,
                    sources=tuple(str(s) for s in dt.sources),
                    interval_s=float(dt.interval_seconds) if dt.interval_seconds else None,
                    active=dt.state == ACTIVE,
                    last_refresh=state.time_ms / 1000 if state is not None else None,
                    vcluster=dt.vcluster,
                )
            )
        self._known = known
        if discover:
            self._discovered_at = now
        return Snapshot(views, defs)

    def _candidates(self) -> list[TableName]:
        catalog = self.registry.catalog
        if self.tables is not None:
            return [self.registry.qualify(TableName(tuple(t.split(".")))) for t in self.tables]
        spark = self.registry.spark
        if self.namespaces is not None:
            namespaces = list(self.namespaces)
        else:
            namespaces = self.registry.namespaces()
        names: list[TableName] = []
        for ns in namespaces:
            if ns == SYSTEM_NAMESPACE:
                continue
            try:
                rows = spark.sql(f"SHOW TABLES IN {TableName((catalog, ns)).sql()}").collect()
            except Exception:  # a namespace dropped between the two reads
                continue
            names.extend(
                TableName((catalog, ns, r.tableName))
                for r in rows
                if not getattr(r, "isTemporary", False)
            )
        return names

    def load(self, dt: DynamicTableDef) -> DynamicTableDef | None:
        """The definition as committed right now (None: dropped)."""
        return self.registry.load(dt.name)[1]

    # -- writing ------------------------------------------------------------------------
    def suspend(self, dt: DynamicTableDef, reason: str) -> bool:
        """Set SUSPENDED + reason the way ALTER DYNAMIC TABLE ... SUSPEND does; False if
        the table is gone or no longer ACTIVE (a user got there first)."""
        return self.registry.suspend(dt.name, reason)

    def record_skip(self, dt: DynamicTableDef, message: str, when: float) -> None:
        """A history row for a refresh the scheduler did not run this cycle.

        state QUEUED: the refresh is still owed and runs in a later cycle (the seeds'
        state for a waiting refresh); refresh_mode NO_DATA: nothing was read or written;
        error_message says why ("skipped: upstream X failed").
        """
        at = datetime.fromtimestamp(when, UTC)
        self.registry.history.append(
            [
                HistoryRecord(
                    workspace_name=dt.catalog,
                    schema_name=dt.schema,
                    name=dt.table,
                    virtual_cluster=dt.vcluster,
                    start_time=at,
                    end_time=at,
                    duration_ms=0,
                    state=QUEUED,
                    refresh_trigger=SYSTEM_SCHEDULED,
                    suspended_reason=None,
                    refresh_mode=NO_DATA,
                    error_message=message,
                    source_tables=source_tables_json(dt.sources),
                    stats=stats_json({"rows_inserted": 0, "rows_deleted": 0}),
                    completion_target=None,
                    job_id=new_job_id(),
                )
            ]
        )


def _known(registry: Registry, namespaces: Iterable[str]) -> tuple[str, ...]:
    """The namespaces of the scope by name (```my-ns``` as written in SQL reads
    ``my-ns``); one the catalog does not have is named: a scheduler scoped to a typo
    refreshed nothing and said nothing."""
    names = tuple(namespace_shown(n) for n in namespaces)
    catalog = registry.catalog
    for name in names:
        if not registry.spark.catalog.databaseExists(TableName((catalog, name)).sql()):
            raise ConfigError(
                f"namespace {catalog}.{name} not found; the scheduler refreshes dynamic "
                f"tables of catalog {catalog} (check the names with SHOW NAMESPACES IN {catalog})"
            )
    return names
