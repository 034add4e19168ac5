"""Finding dynamic tables: a DT is an Iceberg table whose properties say so."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from dyntables.catalog.definition import DynamicTableDef
from dyntables.catalog.iceberg import IcebergTable, load_table
from dyntables.catalog.trash import SYSTEM_NAMESPACE, Trash
from dyntables.errors import NotADynamicTableError, TableNotFoundError
from dyntables.refresh.history import History
from dyntables.sql.tokens import TableName

if TYPE_CHECKING:
    from dyntables.refresh.planner import Planner
    from dyntables.refresh.runner import Refresher


class Registry:
    def __init__(self, spark: Any, catalog: str, qualify: Callable[[TableName], TableName]) -> None:
        self.spark = spark
        self.catalog = catalog
        self.qualify = qualify
        self.trash = Trash(spark, catalog)
        warehouse = spark.conf.get(f"spark.sql.catalog.{catalog}.warehouse", "") or ""
        # where leases and other small coordination files live (None: in-process only)
        self.system_root: str | None = (
            warehouse.rstrip("/") + f"/{SYSTEM_NAMESPACE}" if warehouse else None
        )
        self.history = History(spark, catalog, self.system_root)
        self._planner: Planner | None = None
        self._refresher: Refresher | None = None

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
        namespaces = [namespace] if namespace else self._namespaces()
        for ns in namespaces:
            if ns == SYSTEM_NAMESPACE:
                continue
            rows = self.spark.sql(f"SHOW TABLES IN `{self.catalog}`.`{ns}`").collect()
            for row in rows:
                if getattr(row, "isTemporary", False):
                    continue
                dt = self.find(TableName((self.catalog, ns, row.tableName)))
                if dt is not None:
                    yield dt

    def _namespaces(self) -> list[str]:
        rows = self.spark.sql(f"SHOW NAMESPACES IN `{self.catalog}`").collect()
        return [r[0] for r in rows]
