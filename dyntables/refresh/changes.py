"""Change capture: a source's rows that changed between two snapshots, as a Z-set.

Cheapest correct method first:
  append        every snapshot in the range only added files: incremental append scan
  files         copy-on-write changes: the data files the range removed (-1) and added
                (+1), netted over the range (a file a later commit rewrote again is read
                by neither side), consolidated by row so rows a rewrite carried over
                unchanged (-1 +1) cancel
  snapshot_diff delete files (merge-on-read) at either end or in the range: the scan
                tasks of the two snapshots, compared by data file and the delete files
                applying to it; the files whose rows differ are read as they were (-1) and
                as they are (+1), with their deletes, and consolidated the same way
  initial       the source was empty at the last refresh: all of it is new

Both diffs read a file as Iceberg's scan would, through a staged scan task set (the way
Iceberg's own compaction reads the files it picked), so they read only the files that
changed, never a whole version of the table; compaction (``replace``) commits change no
row and are skipped.

Only the columns the plan scans are read, and the change is consolidated by those: a
projection of a Z-set is still a Z-set, so carried-over rows still cancel, and columns
the query never reads (a MAP Spark cannot group by, one added later) play no part.
When the range cannot be read as it was (an expired snapshot, a schema change touching
the scanned columns), the refresh is FULL with a reason code instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from py4j.protocol import Py4JJavaError

from dyntables.catalog.definition import SourceVersion
from dyntables.catalog.iceberg import IcebergTable
from dyntables.ivm.sqlb import W
from dyntables.plan import map_values
from dyntables.sql.tokens import back_quoted

NONE = "none"
APPEND = "append"
FILES = "files"
SNAPSHOT_DIFF = "snapshot_diff"
INITIAL = "initial"

SOURCE_REPLACED = "SOURCE_REPLACED"
SOURCE_HISTORY_UNAVAILABLE = "SOURCE_HISTORY_UNAVAILABLE"
SOURCE_SCHEMA_CHANGED = "SOURCE_SCHEMA_CHANGED"


@dataclass(frozen=True)
class FileDiff:
    """The scan tasks (Java ``FileScanTask``) whose rows left the source (read with weight
    -1) and arrived (+1), and the records of their data files: what reading them costs."""

    left: tuple[Any, ...]
    arrived: tuple[Any, ...]
    records: int


@dataclass(frozen=True)
class Capture:
    method: str | None  # None: changes cannot be read; ``reason`` says why
    reason: str | None = None
    # rows the capture reads, from Iceberg's metadata (no job): AUTO weighs it against the
    # source's rows
    changed_rows: int = 0
    total_rows: int = 0
    # rows the capture reads from the source's files (no job): the added files of an
    # append; the records of the files a diff reads (copy-on-write rewrites show here)
    read_rows: int = 0
    diff: FileDiff | None = field(default=None, compare=False, repr=False)


def _delete_files(summary: dict[str, str] | Any) -> bool:
    keys = (
        "added-delete-files",
        "added-position-delete-files",
        "added-equality-delete-files",
        "total-delete-files",
    )
    return any(int(summary.get(k, "0") or 0) > 0 for k in keys)


def _fields(
    table: IcebergTable, snapshot_id: int | None, columns: Sequence[str]
) -> tuple[Any, ...]:
    """(field id, type) of ``columns`` in the schema of a snapshot (None: the current
    schema), resolved case-insensitively like Spark does; one py4j call per column."""
    jtable = table._t  # the loaded org.apache.iceberg.Table
    schema = jtable.schema()
    if snapshot_id is not None:
        schema_id = jtable.snapshot(snapshot_id).schemaId()
        if schema_id is not None:
            schema = jtable.schemas().get(schema_id)
    out = []
    for name in columns:
        field = schema.caseInsensitiveFindField(map_values.base_column(name))
        out.append(None if field is None else (int(field.fieldId()), str(field.type().toString())))
    return tuple(out)


def columns_moved(table: IcebergTable, snapshot_id: int, columns: Sequence[str]) -> bool:
    """Whether ``columns`` (by field id and type) are other in ``table``'s current schema
    than in the snapshot's: a read of that snapshot's files bound now reads the current
    ones (a column dropped and added again reads NULL from the older files)."""
    return _fields(table, None, columns) != _fields(table, snapshot_id, columns)


def _schema_ids(table: IcebergTable, *snapshot_ids: int) -> set[int | None]:
    jtable = table._t
    ids: set[int | None] = {int(jtable.schema().schemaId())}
    for sid in snapshot_ids:
        value = jtable.snapshot(sid).schemaId()
        ids.add(None if value is None else int(value))
    return ids


# Iceberg's metadata columns that say where a row is stored: a compaction changes them
_FILE_METADATA = re.compile(r"\b_(file|pos|spec_id|partition|deleted)\b", re.IGNORECASE)


def reads_file_metadata(query: str) -> bool:
    """Whether ``query`` may read where its rows are stored (``_file``, ``_pos``, ...),
    which a compaction changes: its result then moves with every compaction. A match in
    a string or a column of that name only costs the compaction shortcut."""
    return _FILE_METADATA.search(query) is not None


def compacted_only(table: IcebergTable, old: SourceVersion, new: SourceVersion) -> bool:
    """Whether ``table`` went from ``old`` to ``new`` by compactions alone (``replace``
    snapshots), under one schema: then the same query gives the same rows."""
    if old.uuid != new.uuid or old.refs != new.refs:
        return False
    if old.snapshot is None or new.snapshot is None:
        return False
    newest = table.snapshot(new.snapshot)
    if newest is None or newest.operation != "replace" or table.snapshot(old.snapshot) is None:
        # the newest commit settles the common case (rows were written) without walking
        # the range, which costs JVM calls per snapshot
        return False
    if len(_schema_ids(table, old.snapshot, new.snapshot)) > 1:
        return False
    chain = table.ancestors_between(new.snapshot, old.snapshot)
    return chain is not None and bool(chain) and all(s.operation == "replace" for s in chain)


def plan_capture(
    table: IcebergTable, old: SourceVersion, new: SourceVersion, columns: Sequence[str] = ()
) -> Capture:
    """How to read the change of ``table`` from ``old`` to ``new``; ``columns``: the
    source columns the plan scans (their meaning must not have changed in the range)."""
    if old == new:
        return Capture(NONE)
    if old.uuid != new.uuid:
        return Capture(None, SOURCE_REPLACED)
    if new.snapshot is None:
        return Capture(None, SOURCE_HISTORY_UNAVAILABLE)
    newest = table.snapshot(new.snapshot)
    total = int(newest.summary.get("total-records", "0")) if newest else 0
    if old.snapshot is None:
        read = [map_values.base_column(c) for c in columns]
        if read and any(len(t) > 1 for t in table.types_ever(read).values()):
            # the table was empty at the last refresh, so no snapshot says which schema
            # it had then. When a scanned column's type ever changed (ALTER COLUMN ...
            # TYPE, CREATE OR REPLACE TABLE keeping the table's history), the rows read
            # now may have other types than the table's columns and state were built for
            # (a DOUBLE written into an INT column, a BIGINT overflowing one): recompute,
            # which follows the new types or says why it cannot. A change older than
            # the dynamic table costs one needless recompute of what is read whole anyway
            return Capture(None, SOURCE_SCHEMA_CHANGED)
        return Capture(INITIAL, changed_rows=total, total_rows=total, read_rows=total)
    start = table.snapshot(old.snapshot)
    if start is None:
        # expired (expire_snapshots) or rolled away: the newer snapshots' parent ids still
        # name it, so the chain below looks whole, but its files may be gone and neither
        # the changes nor the old version can be read
        return Capture(None, SOURCE_HISTORY_UNAVAILABLE)
    chain = table.ancestors_between(new.snapshot, old.snapshot)
    if chain is None:
        return Capture(None, SOURCE_HISTORY_UNAVAILABLE)
    if columns and len(_schema_ids(table, old.snapshot, new.snapshot)) > 1:
        # a schema change in the range: fine if the scanned columns are the same fields
        # (ADD COLUMN of a column the query does not read), else the old rows would be
        # read with another meaning (a dropped and re-added column, a type change)
        seen = {_fields(table, sid, columns) for sid in (old.snapshot, new.snapshot, None)}
        if len(seen) > 1:
            return Capture(None, SOURCE_SCHEMA_CHANGED)
    if all(s.operation == "replace" for s in chain):  # compaction only: no row changed
        return Capture(NONE, total_rows=total)
    if all(s.operation == "append" for s in chain):
        added = sum(int(s.summary.get("added-records", "0") or 0) for s in chain)
        return Capture(APPEND, changed_rows=added, total_rows=total, read_rows=added)
    try:
        if any(_delete_files(s.summary) for s in chain) or _delete_files(start.summary):
            method = SNAPSHOT_DIFF
            diff = _segmented_diff(table, start, chain)
        else:
            method = FILES
            diff = _file_diff(table, (s.snapshot_id for s in chain))
    except (LookupError, Py4JJavaError):
        # a file's partition spec was removed, or a partition field's source column was
        # dropped (Iceberg cannot bind the old spec to read the manifests): the range's
        # files cannot be read
        return Capture(None, SOURCE_HISTORY_UNAVAILABLE)
    if not diff.left and not diff.arrived:
        return Capture(NONE, total_rows=total)
    return Capture(
        method, changed_rows=diff.records, total_rows=total, read_rows=diff.records, diff=diff
    )


def _file_diff(table: IcebergTable, snapshot_ids: Iterable[int]) -> FileDiff:
    removed, added = table.net_file_changes(snapshot_ids)
    records = sum(int(f.recordCount()) for f in removed + added)
    return FileDiff(tuple(table.file_tasks(removed)), tuple(table.file_tasks(added)), records)


def _segmented_diff(table: IcebergTable, start: Any, chain: list[Any]) -> FileDiff:
    """The change of a range with delete files, read between the compactions in it.

    A compaction (``replace``) rewrites files and their delete files without changing a
    row, so the change of the range is the sum of the changes of the stretches between
    its compactions. Diffing the range's two ends instead would read every file the
    compaction rewrote, twice, in every partition the range changed: after a nightly
    compaction, a one-row INSERT read its whole partition as it was and as it is. A
    stretch of appends reads only its new files: a delete file never applies to a data
    file committed after it."""
    parts: list[FileDiff] = []
    before, stretch = start, []
    for snap in [*chain, None]:
        if snap is not None and snap.operation != "replace":
            stretch.append(snap)
            continue
        if stretch:
            ids = [s.snapshot_id for s in stretch]
            appends = all(s.operation == "append" for s in stretch)
            if appends or not any(_delete_files(s.summary) for s in [before, *stretch]):
                parts.append(_file_diff(table, ids))
            else:
                parts.append(_task_diff(table, before.snapshot_id, ids[-1], ids))
        before, stretch = snap, []
    return FileDiff(
        tuple(t for p in parts for t in p.left),
        tuple(t for p in parts for t in p.arrived),
        sum(p.records for p in parts),
    )


def _task_diff(table: IcebergTable, old: int, new: int, chain: list[int]) -> FileDiff:
    """Tasks whose file or deletes differ between the snapshots: a data file gained (or
    lost) delete files, or was added or removed, and is read as it was and as it is.
    Only the partitions the range changed are planned."""
    touched = table.touched_partitions(chain)
    left, arrived = _differing_tasks(table, old, new, touched)
    if touched is not None and any(_filters_rows(task) for task in left + arrived):
        # a file of another partition spec (e.g. written before ADD PARTITION FIELD and
        # compacted since) is planned whole, with the filter left as its residual; the
        # staged read would not apply it (Iceberg uses a residual to skip row groups,
        # Spark's own Filter does the rest), so read every differing file in full
        left, arrived = _differing_tasks(table, old, new, None)
    records = sum(int(task.file().recordCount()) for task in left + arrived)
    return FileDiff(left, arrived, records)


def _differing_tasks(
    table: IcebergTable, old: int, new: int, row_filter: Any | None
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    before, after = table.scan_tasks(old, row_filter), table.scan_tasks(new, row_filter)
    left = tuple(task for key, task in before.items() if key not in after)
    arrived = tuple(task for key, task in after.items() if key not in before)
    return left, arrived


def _filters_rows(task: Any) -> bool:
    """Whether a planned task keeps a residual: reading it whole gives more rows than
    the filter selected."""
    return str(task.residual().op().name()) != "TRUE"


class StagedScans:
    """The scan task sets one refresh hands to Iceberg to read. Iceberg keeps a staged set
    in a driver-wide map until it is removed, so the refresh removes its sets when it
    ends (after the DataFrames reading them are unpersisted)."""

    def __init__(self, spark: Any, prefix: str) -> None:
        self.spark = spark
        self.prefix = prefix
        self._staged: list[tuple[Any, str]] = []

    def read(self, table: IcebergTable, tasks: Sequence[Any]):  # noqa: ANN201 - DataFrame
        from dyntables.engine.jvm import java_class

        set_id = f"{self.prefix}-{len(self._staged)}"
        jtasks = java_class(self.spark, "java.util.ArrayList")()
        for task in tasks:
            jtasks.add(task)
        self._manager().stageTasks(table._t, set_id, jtasks)
        self._staged.append((table._t, set_id))
        return (
            self.spark.read.format("iceberg")
            .option("scan-task-set-id", set_id)
            .load(table.name.sql())
        )

    def close(self) -> None:
        while self._staged:
            jtable, set_id = self._staged.pop()
            self._manager().removeTasks(jtable, set_id)

    def _manager(self) -> Any:
        from dyntables.engine.jvm import java_class

        return java_class(self.spark, "org.apache.iceberg.spark.ScanTaskSetManager").get()


def read_changes(
    spark: Any,
    name: str,
    columns: list[str],
    capture: Capture,
    old: SourceVersion,
    new: SourceVersion,
    staged: StagedScans | None = None,
    table: IcebergTable | None = None,
):  # noqa: ANN201 - DataFrame
    """The consolidated delta as a DataFrame with the source's columns plus ``__w``;
    ``staged`` and ``table`` (the source, loaded) are needed for the two diffs."""
    from pyspark.sql import functions as F

    cols = [
        F.col(back_quoted(c))
        if map_values.base_column(c) == c
        else F.expr(map_values.source_sql(c)).alias(c)
        for c in columns
    ]
    if capture.method == APPEND:
        df = (
            spark.read.format("iceberg")
            .option("start-snapshot-id", str(old.snapshot))
            .option("end-snapshot-id", str(new.snapshot))
            .load(name)
        )
        return df.select(*cols, F.lit(1).cast("bigint").alias(W))
    if capture.method == INITIAL:
        df = spark.read.format("iceberg").option("snapshot-id", str(new.snapshot)).load(name)
        return df.select(*cols, F.lit(1).cast("bigint").alias(W))
    if capture.method in (FILES, SNAPSHOT_DIFF):
        diff = capture.diff
        if diff is None or staged is None or table is None:
            raise ValueError(f"a {capture.method} capture of {name} needs its files and table")
        sides = [
            staged.read(table, tasks).select(*cols, F.lit(weight).cast("bigint").alias(W))
            for tasks, weight in ((diff.left, -1), (diff.arrived, 1))
            if tasks
        ]
        both = sides[0] if len(sides) == 1 else sides[0].unionByName(sides[1])
        return _consolidate(both, columns)
    raise ValueError(f"no changes to read for capture {capture}")


def _consolidate(df: Any, columns: list[str]):  # noqa: ANN202
    from pyspark.sql import functions as F

    grouped = df.groupBy(*[F.col(back_quoted(c)) for c in columns]).agg(F.sum(W).alias(W))
    return grouped.where(F.col(W) != 0)
