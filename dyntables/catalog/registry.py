"""Finding dynamic tables: a DT is an Iceberg table whose properties say so."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dyntables.catalog.definition import ACTIVE, SUSPENDED, DynamicTableDef
from dyntables.catalog.iceberg import IcebergTable, load_table
from dyntables.catalog.trash import SYSTEM_NAMESPACE, Trash
from dyntables.errors import NotADynamicTableError, TableNotFoundError
from dyntables.refresh.history import HISTORY_TABLE, History
from dyntables.sql.tokens import TableName, back_quoted, namespace_shown

if TYPE_CHECKING:
    from dyntables.refresh.planner import Planner
    from dyntables.refresh.runner import Refresher


class Registry:
    def __init__(self, spark: Any, catalog: str, qualify: Callable[[TableName], TableName]) -> None:
        self.spark = spark
        self.catalog = catalog
        self.qualify = qualify
        self.trash = Trash(spark, catalog)
        # where leases and the history journal live, shared by every process that
        # refreshes this catalog's tables (None: in-process only)
        self.system_root: str | None = choose_system_root(
            spark.conf.get(SYSTEM_ROOT_SETTING, "") or None,
            spark.conf.get(f"spark.sql.catalog.{catalog}.warehouse", "") or None,
            lambda: self._history_folder(),
        )
        self.history = History(spark, catalog, self.system_root)
        self._planner: Planner | None = None
        self._refresher: Refresher | None = None

    def _history_folder(self) -> str | None:
        """The folder of the system namespace's history table, which the catalog placed
        on the storage every process shares."""
        history = History(self.spark, self.catalog)
        history.ensure()
        table = load_table(self.spark, TableName((self.catalog, SYSTEM_NAMESPACE, HISTORY_TABLE)))
        return table.location.rstrip("/").rsplit("/", 1)[0] if table is not None else None

    @property
    def planner(self) -> Planner:
        if self._planner is None:
            from dyntables.refresh.planner import Planner

            self._planner = Planner(self)
        return self._planner

    @property
    def refresher(self) -> Refresher:
        if self._refresher is None:
            from dyntables.refresh.runner import Refresher

            self._refresher = Refresher(self)
        return self._refresher

    def load(self, name: TableName) -> tuple[IcebergTable | None, DynamicTableDef | None]:
        qualified = self.qualify(name)
        table = load_table(self.spark, qualified)
        if table is None:
            return None, None
        return table, DynamicTableDef.from_properties(qualified, table.properties())

    def suspend(self, name: TableName, reason: str) -> bool:
        """Set SUSPENDED + reason the way ALTER DYNAMIC TABLE ... SUSPEND does; False if
        the table is gone or no longer ACTIVE (a user got there first)."""
        table, current = self.load(name)
        if table is None or current is None or current.state != ACTIVE:
            return False
        suspended = current.with_options(state=SUSPENDED, suspended_reason=reason)

        def still_active(props: Mapping[str, str], _current: int | None) -> None:
            now = DynamicTableDef.from_properties(current.name, props)
            if now is None or now.dt_id != current.dt_id or now.state != ACTIVE:
                raise _NotSuspended

        try:
            # the state alone: the whole definition put back a query replaced meanwhile
            table.set_properties(suspended.properties_changed(current), check=still_active)
        except _NotSuspended:
            return False
        return True

    def find(self, name: TableName) -> DynamicTableDef | None:
        return self.load(name)[1]

    def get(self, name: TableName) -> DynamicTableDef:
        table, dt = self.load(name)
        if table is None:
            raise TableNotFoundError(
                f"dynamic table {self.qualify(name)} not found; list them with SHOW DYNAMIC TABLES"
            )
        if dt is None:
            raise NotADynamicTableError(
                f"{self.qualify(name)} is a regular table, not a dynamic table; use the plain table statements"
            )
        return dt

    def all(self, namespace: str | None = None) -> Iterator[DynamicTableDef]:
        """Every DT in the catalog (or one namespace): metadata reads only, no Spark job."""
        namespaces = [namespace] if namespace else self.namespaces()
        for ns in namespaces:
            if ns == SYSTEM_NAMESPACE:
                continue
            rows = self.spark.sql(f"SHOW TABLES IN {TableName((self.catalog, ns)).sql()}").collect()
            for row in rows:
                if getattr(row, "isTemporary", False):
                    continue
                dt = self.find(TableName((self.catalog, ns, row.tableName)))
                if dt is not None:
                    yield dt

    def namespaces(self) -> list[str]:
        """The catalog's namespaces, by name (SHOW NAMESPACES back-quotes ``my-ns``)."""
        rows = self.spark.sql(f"SHOW NAMESPACES IN {back_quoted(self.catalog)}").collect()
        return [namespace_shown(r[0]) for r in rows]


class _NotSuspended(Exception):
    """The table a suspension was for is gone, or no longer ACTIVE."""


# the Spark setting naming a folder all processes share for leases and the history
# journal, where the catalog's warehouse is no path (REST's warehouse is a name) or unset
SYSTEM_ROOT_SETTING = "spark.dyntables.system-root"


def choose_system_root(
    explicit: str | None, warehouse: str | None, history_folder: Callable[[], str | None]
) -> str | None:
    """The shared folder for leases and the history journal: the one the user set; else
    the catalog's warehouse when it is a path (a URI or absolute); else the folder the
    catalog gave the history table (REST, Glue, Hive without a warehouse). Without one,
    two processes could refresh one table at once."""
    if explicit:
        return explicit.rstrip("/")
    if warehouse and (
        "://" in warehouse or warehouse.startswith("/") or warehouse.startswith("file:")
    ):
        return warehouse.rstrip("/") + f"/{SYSTEM_NAMESPACE}"
    try:
        return history_folder()
    except Exception:  # no folder to be had: leases in this process only
        return None
