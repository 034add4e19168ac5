"""The refresh history: a durable Iceberg table with the seeds' columns.

Stored with ``duration_ms`` (Iceberg has no interval type); ``SHOW DYNAMIC TABLE REFRESH
HISTORY`` presents it exactly as the seeds print it (``0 00:00:00.327000000``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, fields
from datetime import datetime
from typing import Any

from dyntables.engine.frames import values_sql

SYSTEM_NAMESPACE = "dyntables_sys"
HISTORY_TABLE = "refresh_history"

SUCCEED = "SUCCEED"
FAILED = "FAILED"
QUEUED = "QUEUED"
MANUAL = "MANUAL"
SYSTEM_SCHEDULED = "SYSTEM_SCHEDULED"
NO_DATA = "NO_DATA"
FULL = "FULL"
INCREMENTAL = "INCREMENTAL"

_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
  workspace_name STRING, schema_name STRING, name STRING, virtual_cluster STRING,
  start_time TIMESTAMP, end_time TIMESTAMP, duration_ms BIGINT, state STRING,
  refresh_trigger STRING, suspended_reason STRING, refresh_mode STRING, error_message STRING,
  source_tables STRING, stats STRING, completion_target STRING, job_id STRING
) USING iceberg TBLPROPERTIES ('write.parquet.compression-codec'='zstd')
"""

# The seeds' column order; duration is an interval rendered like Singdata prints it.
_PRESENTED = """
SELECT workspace_name, schema_name, name, virtual_cluster,
  start_time, end_time,
  format_string('%d %02d:%02d:%02d.%09d',
    CAST(duration_ms DIV 86400000 AS INT), CAST(duration_ms DIV 3600000 % 24 AS INT),
    CAST(duration_ms DIV 60000 % 60 AS INT), CAST(duration_ms DIV 1000 % 60 AS INT),
    CAST(duration_ms % 1000 * 1000000 AS INT)) AS duration,
  state, refresh_trigger, suspended_reason, refresh_mode, error_message,
  source_tables, stats, completion_target, job_id
FROM {table}
"""


@dataclass(frozen=True)
class HistoryRecord:
    workspace_name: str
    schema_name: str
    name: str
    virtual_cluster: str
    start_time: datetime
    end_time: datetime
    duration_ms: int
    state: str
    refresh_trigger: str
    suspended_reason: str | None
    refresh_mode: str
    error_message: str | None
    source_tables: str
    stats: str
    completion_target: str | None
    job_id: str


def source_tables_json(sources: Sequence[Any]) -> str:
    """[{"schema": ..., "table_name": ..., "workspace": ...}] as in the seeds."""
    return json.dumps(
        [{"schema": s.parts[1], "table_name": s.parts[2], "workspace": s.parts[0]} for s in sources],
        separators=(",", ":"),
    )


def stats_json(stats: Mapping[str, object]) -> str:
    """Stats values are strings, as in the seeds."""
    return json.dumps({k: str(v) for k, v in sorted(stats.items())}, separators=(",", ":"))


class History:
    def __init__(self, spark: Any, catalog: str) -> None:
        self.spark = spark
        self.table = f"`{catalog}`.`{SYSTEM_NAMESPACE}`.`{HISTORY_TABLE}`"
        self._catalog = catalog
        self._ready = False
        self._lock = threading.Lock()

    def ensure(self) -> None:
        if self._ready:
            return
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{self._catalog}`.`{SYSTEM_NAMESPACE}`")
        self.spark.sql(_DDL.format(table=self.table))
        self._ready = True

    def append(self, records: Sequence[HistoryRecord]) -> None:
        if not records:
            return
        types = {"start_time": "timestamp", "end_time": "timestamp", "duration_ms": "bigint"}
        columns = [(f.name, types.get(f.name, "string")) for f in fields(HistoryRecord)]
        with self._lock:
            self.ensure()
            self.spark.sql(f"INSERT INTO {self.table} {values_sql(columns, [astuple(r) for r in records])}")

    def presented(self):  # -> DataFrame
        self.ensure()
        return self.spark.sql(_PRESENTED.format(table=self.table))

    def show(self, where: str | None = None, limit: int | None = None):  # -> DataFrame
        self.ensure()
        sql = f"SELECT * FROM ({_PRESENTED.format(table=self.table)}) h"
        if where:
            sql += f" WHERE {where}"
        sql += " ORDER BY start_time DESC, end_time DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self.spark.sql(sql)
