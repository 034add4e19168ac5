"""DROP DYNAMIC TABLE keeps the table (data, definition, snapshots) aside for its
retention period, so UNDROP TABLE can put it back exactly as it was.

On a Hadoop catalog (the embedded default) a table *is* its folder, so the folder is
moved aside and back; on catalogs that can rename (REST, Hive, JDBC, ...) the table is
renamed into the system namespace. History rows are never deleted by DROP, so an
undropped table has its history too.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from dyntables.catalog.definition import RefreshState
from dyntables.catalog.filesystem import FileSystem
from dyntables.catalog.iceberg import drop_state_tables, load_table
from dyntables.errors import TableExistsError, UndropError
from dyntables.sql.tokens import TableName

SYSTEM_NAMESPACE = "dyntables_sys"
DAY_MS = 86_400_000


@dataclass(frozen=True)
class Dropped:
    name: str
    dt_id: str
    dropped_ms: int
    retention_days: int
    location: str  # where the table lived (Hadoop) or its name in the trash (rename)
    trash: str
    # its aggregate state tables, kept for UNDROP and dropped with it when purged (empty:
    # dropped before they were recorded)
    state_tables: tuple[str, ...] = ()

    @staticmethod
    def from_json(text: str) -> Dropped:
        record = json.loads(text)
        record["state_tables"] = tuple(record.get("state_tables", ()))
        return Dropped(**record)

    def to_json(self) -> str:
        return json.dumps({**self.__dict__, "state_tables": list(self.state_tables)})

    def expired(self, now_ms: int) -> bool:
        return now_ms > self.dropped_ms + self.retention_days * DAY_MS


class Trash:
    def __init__(self, spark: Any, catalog: str) -> None:
        self.spark = spark
        self.catalog = catalog
        self._system = TableName((catalog, SYSTEM_NAMESPACE)).sql()  # where trash tables go
        self.fs = FileSystem(spark)
        conf = spark.conf
        self.hadoop = (
            conf.get(f"spark.sql.catalog.{catalog}.type", "") or ""
        ).lower() == "hadoop" or (
            conf.get(f"spark.sql.catalog.{catalog}.catalog-impl", "") or ""
        ).endswith("HadoopCatalog")
        warehouse = conf.get(f"spark.sql.catalog.{catalog}.warehouse", "") or ""
        self.root = warehouse.rstrip("/") + f"/{SYSTEM_NAMESPACE}/_trash" if warehouse else ""

    def drop(self, name: TableName, dt_id: str, retention_days: int) -> None:
        table = load_table(self.spark, name)
        if table is None:
            return
        now = int(time.time() * 1000)
        entry_id = f"{name.parts[1]}.{name.parts[2]}.{now}"
        state = RefreshState.from_properties(table.properties())
        states = tuple(str(v["table"]) for v in state.state_tables.values()) if state else ()
        if self.hadoop:
            trash = f"{self.root}/{entry_id}"
            record = Dropped(str(name), dt_id, now, retention_days, table.location, trash, states)
            # the record first: a process dying after the move left the table in a folder
            # no entry named (UNDROP could not find it, purge never removed it; helper-32).
            # An entry counts only once its table is in it (entries())
            self.fs.write_text(f"{trash}/dropped.json", record.to_json())
            self.fs.move(table.location, f"{trash}/table")
        else:
            trash_name = TableName(
                (self.catalog, SYSTEM_NAMESPACE, f"trash__{entry_id.replace('.', '__')}")
            )
            record = Dropped(
                str(name), dt_id, now, retention_days, trash_name.sql(), trash_name.sql(), states
            )
            self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self._system}")
            # the record first: a crash before the rename leaves the table where it was
            # (a later DROP writes its own), one after it a trash table UNDROP can find
            self.spark.sql(
                f"ALTER TABLE {name.sql()} SET TBLPROPERTIES ('dyntables.dropped'='{record.to_json()}')"
            )
            try:
                self.spark.sql(f"ALTER TABLE {name.sql()} RENAME TO {_within_catalog(trash_name)}")
            except Exception:  # the table stays as it was, record and all
                self.spark.sql(
                    f"ALTER TABLE {name.sql()} UNSET TBLPROPERTIES IF EXISTS ('dyntables.dropped')"
                )
                raise
        self.purge_expired()

    def undrop(self, name: TableName) -> Dropped:
        if load_table(self.spark, name) is not None:
            raise TableExistsError(
                f"cannot UNDROP {name}: a table with that name exists; drop or rename it first"
            )
        now = int(time.time() * 1000)
        candidates = [d for d in self.entries() if d.name == str(name)]
        live = [d for d in candidates if not d.expired(now)]
        if not live:
            raise UndropError(
                f"cannot UNDROP {name}: no dropped table by that name is within its retention period "
                "(data_retention_days, set with ALTER TABLE ... SET PROPERTIES)"
            )
        entry = max(live, key=lambda d: d.dropped_ms)
        if self.hadoop:
            if self.fs.exists(entry.location):
                # moved there, the table would sit inside that folder, not at its name
                # (the UNDROP said OK and the table was gone, helper-26)
                raise UndropError(
                    f"cannot UNDROP {name}: its folder {entry.location} holds files that are "
                    "not a table (written there after the DROP); move or delete that folder, "
                    "then UNDROP again"
                )
            self.fs.move(f"{entry.trash}/table", entry.location)
            self.fs.delete(entry.trash)
        else:
            self.spark.sql(f"ALTER TABLE {entry.trash} RENAME TO {_within_catalog(name)}")
            self.spark.sql(
                f"ALTER TABLE {name.sql()} UNSET TBLPROPERTIES IF EXISTS ('dyntables.dropped')"
            )
        return entry

    def entries(self) -> list[Dropped]:
        found: list[Dropped] = []
        if self.hadoop:
            for folder in self.fs.list_dirs(self.root):
                if not self.fs.exists(f"{folder}/table"):
                    # a DROP that died before its move (the table is still where it was)
                    # or an UNDROP that died after its own: not a dropped table, and its
                    # state tables, listed in the record, are the live table's
                    continue
                try:
                    found.append(Dropped.from_json(self.fs.read_text(f"{folder}/dropped.json")))
                except Exception:  # an unreadable record is skipped
                    continue
            return found
        if not self.spark.catalog.databaseExists(self._system):
            return found  # nothing was ever dropped (or refreshed) in this catalog
        rows = self.spark.sql(f"SHOW TABLES IN {self._system}").collect()
        for row in rows:
            if row.tableName.startswith("trash__"):
                table = load_table(
                    self.spark, TableName((self.catalog, SYSTEM_NAMESPACE, row.tableName))
                )
                if table is not None and "dyntables.dropped" in table.properties():
                    found.append(Dropped.from_json(table.properties()["dyntables.dropped"]))
        return found

    def purge_expired(self) -> None:
        now = int(time.time() * 1000)
        for entry in self.entries():
            if entry.expired(now):
                if self.hadoop:
                    self.fs.delete(entry.trash)
                else:
                    self.spark.sql(f"DROP TABLE IF EXISTS {entry.trash} PURGE")
                drop_state_tables(self.spark, list(entry.state_tables))


def _within_catalog(name: TableName) -> str:
    """``name`` as RENAME TO takes it: within the table's own catalog. A catalog-qualified
    target is read as a namespace of that name (``cat.dyntables_sys``), which does not
    exist: DROP and UNDROP failed on every catalog that renames."""
    return TableName(name.parts[1:]).sql()
