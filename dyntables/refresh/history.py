"""The refresh history: a durable Iceberg table with the seeds' columns.

Stored with ``duration_ms`` (Iceberg has no interval type); ``SHOW DYNAMIC TABLE REFRESH
HISTORY`` presents it exactly as the seeds print it (``0 00:00:00.327000000``).

A refresh does not write the table itself: a Spark job and an Iceberg commit per row
would be most of the cost of a NO_DATA refresh (and all of an idle scheduler's CPU). It
writes its row to a journal file in the warehouse (one small file, no Spark job), which
is durable at once; the journal is moved into the table in one INSERT when it holds
``FLUSH_EVERY`` rows, before the history is read, and when the lakehouse closes. A move
that crashed after its commit is not applied twice: rows already in the table (same
``job_id`` and ``state``) are skipped.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import astuple, dataclass, fields
from datetime import UTC, datetime
from typing import Any

from sqlglot import exp

from dyntables.catalog.filesystem import FileSystem
from dyntables.engine.frames import values_sql
from dyntables.refresh.retention import metadata_properties_sql
from dyntables.sql.tokens import TableName

SYSTEM_NAMESPACE = "dyntables_sys"
HISTORY_TABLE = "refresh_history"

SUCCEED = "SUCCEED"
FAILED = "FAILED"
QUEUED = "QUEUED"
MANUAL = "MANUAL"
SYSTEM_SCHEDULED = "SYSTEM_SCHEDULED"
NO_DATA = "NO_DATA"
# journal rows moved into the table at once; also moved before every read of the history
FLUSH_EVERY = 100
FULL = "FULL"
INCREMENTAL = "INCREMENTAL"

_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
  workspace_name STRING, schema_name STRING, name STRING, virtual_cluster STRING,
  start_time TIMESTAMP, end_time TIMESTAMP, duration_ms BIGINT, state STRING,
  refresh_trigger STRING, suspended_reason STRING, refresh_mode STRING, error_message STRING,
  source_tables STRING, stats STRING, completion_target STRING, job_id STRING
) USING iceberg TBLPROPERTIES ('write.parquet.compression-codec'='zstd', {metadata})
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
    refresh_mode: str | None  # None: failed before it chose a mode
    error_message: str | None
    source_tables: str
    stats: str
    completion_target: str | None
    job_id: str


def source_tables_json(sources: Sequence[Any]) -> str:
    """[{"schema": ..., "table_name": ..., "workspace": ...}] as in the seeds."""
    return json.dumps(
        [
            {"schema": s.parts[1], "table_name": s.parts[2], "workspace": s.parts[0]}
            for s in sources
        ],
        separators=(",", ":"),
    )


def stats_json(stats: Mapping[str, object]) -> str:
    """Stats values are strings, as in the seeds."""
    return json.dumps({k: str(v) for k, v in sorted(stats.items())}, separators=(",", ":"))


_TIMES = ("start_time", "end_time")


def _to_json(record: HistoryRecord) -> dict[str, object]:
    row: dict[str, object] = {f.name: getattr(record, f.name) for f in fields(HistoryRecord)}
    for name in _TIMES:
        row[name] = int(getattr(record, name).timestamp() * 1_000_000)
    return row


def _from_json(row: Mapping[str, Any]) -> HistoryRecord:
    values = dict(row)
    for name in _TIMES:
        values[name] = datetime.fromtimestamp(int(values[name]) / 1_000_000, UTC)
    return HistoryRecord(**values)


def record_text(record: HistoryRecord) -> str:
    """One row as JSON text, as a table property carries it (see runner.RECORD)."""
    return json.dumps(_to_json(record), separators=(",", ":"))


def record_from_text(text: str) -> HistoryRecord:
    return _from_json(json.loads(text))


class History:
    def __init__(self, spark: Any, catalog: str, system_root: str | None = None) -> None:
        self.spark = spark
        self.table = TableName((catalog, SYSTEM_NAMESPACE, HISTORY_TABLE)).sql()
        self._catalog = catalog
        self._ready = False
        self._lock = threading.RLock()
        # None: no shared folder (a catalog without a warehouse path): write the table directly
        self._journal = system_root.rstrip("/") + "/_history_journal" if system_root else None
        self._fs = FileSystem(spark) if self._journal else None
        self._written = 0  # journal files this process wrote since its last flush
        self._root = system_root
        self._locks: Any = None

    def ensure(self) -> None:
        if self._ready:
            return
        self.spark.sql(
            f"CREATE NAMESPACE IF NOT EXISTS {TableName((self._catalog, SYSTEM_NAMESPACE)).sql()}"
        )
        self.spark.sql(_DDL.format(table=self.table, metadata=metadata_properties_sql()))
        self._ready = True

    def append(self, records: Sequence[HistoryRecord]) -> None:
        """Record rows durably; cheap (one small file), the table catches up in batches."""
        if not records:
            return
        if self._fs is None:
            self._insert(records)
            return
        body = json.dumps([_to_json(r) for r in records], separators=(",", ":"))
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}.json"
        self._fs.publish_text(f"{self._journal}/{name}", body)
        with self._lock:
            self._written += 1
            due = self._written >= FLUSH_EVERY
        if due:
            try:
                self.flush()
            except Exception:
                # the row is durable in the journal already; the next flush (or read of
                # the history) moves it. Raising here failed a refresh that had committed,
                # and recorded it twice, SUCCEED and FAILED (helper-24)
                with self._lock:
                    self._written = 0

    def flush(self) -> int:
        """Move the journal into the table (one INSERT); returns the rows moved."""
        if self._fs is None or self._journal is None:
            return 0
        with self._lock, self._flush_lease():
            self._written = 0
            paths = self._fs.list_files(self._journal)
            if not paths:
                return 0
            records: list[HistoryRecord] = []
            for path in paths:
                try:
                    records += [_from_json(r) for r in json.loads(self._fs.read_text(path))]
                except Exception:
                    # gone (another process moved it) or torn (a crash mid-write): set a
                    # torn file aside rather than failing every later read of the history
                    if self._fs.exists(path):
                        self._fs.move(path, f"{self._journal}_unreadable/{path.rsplit('/', 1)[-1]}")
            if records:
                self._insert(records, skip_present=True)
            for path in paths:
                self._fs.delete(path)
            return len(records)

    @contextmanager
    def _flush_lease(self) -> Iterator[None]:
        """One mover at a time across processes, so a row is never moved twice."""
        from dyntables.refresh.locks import RefreshLocks

        if self._locks is None:
            self._locks = RefreshLocks(self.spark, self._root)
        lease = self._locks.acquire("_history_flush", wait=True, timeout=60)
        if lease is None:
            raise TimeoutError(
                "the refresh history journal is being moved by another process; try again"
            )
        with lease:
            yield

    def _insert(self, records: Sequence[HistoryRecord], skip_present: bool = False) -> None:
        if skip_present:
            # one row per refresh, also within a batch: a paused holder taken over as
            # stale records its row after the process that took over has recorded it
            # from the commit (runner._record_lost); the later-written row is kept
            records = list({(r.job_id, r.state): r for r in records}.values())
        types = {"start_time": "timestamp", "end_time": "timestamp", "duration_ms": "bigint"}
        columns = [(f.name, types.get(f.name, "string")) for f in fields(HistoryRecord)]
        rows = values_sql(columns, [astuple(r) for r in records])
        with self._lock:
            self.ensure()
            if not skip_present:
                self.spark.sql(f"INSERT INTO {self.table} {rows}")
                return
            earliest = min(r.start_time for r in records)
            present = (
                f"SELECT job_id, state FROM {self.table} "
                f"WHERE start_time >= timestamp_micros({int(earliest.timestamp() * 1_000_000)})"
            )
            self.spark.sql(
                f"INSERT INTO {self.table} SELECT r.* FROM ({rows}) r LEFT ANTI JOIN ({present}) h "
                "ON r.job_id = h.job_id AND r.state = h.state"
            )

    def recorded(self, job_id: str) -> bool:
        """Whether a row of ``job_id`` is in the history (the journal moved in first)."""
        self.flush()
        self.ensure()
        wanted = exp.Literal.string(job_id).sql("spark")
        found = self.spark.sql(f"SELECT 1 FROM {self.table} WHERE job_id = {wanted} LIMIT 1").take(
            1
        )
        return bool(found)

    def presented(self):  # -> DataFrame
        self.flush()
        self.ensure()
        return self.spark.sql(_PRESENTED.format(table=self.table))

    def show(self, where: str | None = None, limit: int | None = None):  # -> DataFrame
        self.flush()
        self.ensure()
        sql = f"SELECT * FROM ({_PRESENTED.format(table=self.table)}) h"
        if where:
            sql += f" WHERE {where}"
        sql += " ORDER BY start_time DESC, end_time DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self.spark.sql(sql)

    def current_table(self) -> str:
        """The table's name, with the journal moved in first: for readers of the raw table."""
        self.flush()
        self.ensure()
        return self.table
