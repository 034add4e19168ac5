"""Change capture: a source's rows that changed between two snapshots, as a Z-set.

Cheapest correct method first:
  append        every snapshot in the range only added files: incremental append scan
  changelog     copy-on-write changes: Iceberg's changelog scan, consolidated by row so
                rows a rewrite carried over unchanged (-1 +1) cancel
  snapshot_diff delete files (merge-on-read) in the range, which changelog scans reject,
                or a source column named like a changelog metadata column
                (``_change_type``): compare the two versions (reads both; correct, not cheap)
  initial       the source was empty at the last refresh: all of it is new

Only the columns the plan scans are read, and the change is consolidated by those: a
projection of a Z-set is still a Z-set, so carried-over rows still cancel, and columns
the query never reads (a MAP Spark cannot group by, one added later) play no part.
When the range cannot be read as it was (an expired snapshot, a schema change touching
the scanned columns), the refresh is FULL with a reason code instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dyntables.catalog.definition import SourceVersion
from dyntables.catalog.iceberg import IcebergTable
from dyntables.ivm.sqlb import W

NONE = "none"
APPEND = "append"
CHANGELOG = "changelog"
SNAPSHOT_DIFF = "snapshot_diff"
INITIAL = "initial"

SOURCE_REPLACED = "SOURCE_REPLACED"
SOURCE_HISTORY_UNAVAILABLE = "SOURCE_HISTORY_UNAVAILABLE"
SOURCE_SCHEMA_CHANGED = "SOURCE_SCHEMA_CHANGED"

# metadata columns of Iceberg's changelog view: a source column of the same name makes
# the view's schema invalid ("multiple fields for name _change_type")
CHANGELOG_METADATA = frozenset({"_change_type", "_change_ordinal", "_commit_snapshot_id"})


@dataclass(frozen=True)
class Capture:
    method: str | None  # None: changes cannot be read; ``reason`` says why
    reason: str | None = None
    changed_rows: int = 0  # estimate from snapshot summaries (no job)
    total_rows: int = 0
    # rows the capture reads from the source's files, from snapshot summaries (no job):
    # added files for an append; removed and added files for a changelog (copy-on-write
    # rewrites show here); both versions whole for a snapshot diff
    read_rows: int = 0


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
        field = schema.caseInsensitiveFindField(name)
        out.append(None if field is None else (int(field.fieldId()), str(field.type().toString())))
    return tuple(out)


def _schema_ids(table: IcebergTable, *snapshot_ids: int) -> set[int | None]:
    jtable = table._t
    ids: set[int | None] = {int(jtable.schema().schemaId())}
    for sid in snapshot_ids:
        value = jtable.snapshot(sid).schemaId()
        ids.add(None if value is None else int(value))
    return ids


def _has_changelog_metadata_column(table: IcebergTable) -> bool:
    """Looked up by name: iterating the schema's columns through py4j ends in a Java
    exception that PySpark converts (~15 ms a refresh)."""
    schema = table._t.schema()
    return any(schema.caseInsensitiveFindField(name) is not None for name in CHANGELOG_METADATA)


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
    changed = sum(
        int(s.summary.get("added-records", "0") or 0)
        + int(s.summary.get("deleted-records", "0") or 0)
        for s in chain
    )
    if all(s.operation == "append" for s in chain):
        return Capture(APPEND, changed_rows=changed, total_rows=total, read_rows=changed)
    both = total + int(start.summary.get("total-records", "0") or 0)
    if any(_delete_files(s.summary) for s in chain) or _delete_files(start.summary):
        return Capture(SNAPSHOT_DIFF, changed_rows=changed, total_rows=total, read_rows=both)
    if _has_changelog_metadata_column(table):  # the changelog view cannot be built
        return Capture(SNAPSHOT_DIFF, changed_rows=changed, total_rows=total, read_rows=both)
    return Capture(CHANGELOG, changed_rows=changed, total_rows=total, read_rows=changed)


def read_changes(
    spark: Any,
    name: str,
    columns: list[str],
    capture: Capture,
    old: SourceVersion,
    new: SourceVersion,
):  # noqa: ANN201 - DataFrame
    """The consolidated delta as a DataFrame with the source's columns plus ``__w``."""
    from pyspark.sql import functions as F

    cols = [F.col(f"`{c}`") for c in columns]
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
    if capture.method == CHANGELOG:
        df = (
            spark.read.format("iceberg")
            .option("start-snapshot-id", str(old.snapshot))
            .option("end-snapshot-id", str(new.snapshot))
            .load(f"{name}.changes")
        )
        weight = (
            F.when(F.col("_change_type").isin("INSERT", "UPDATE_AFTER"), F.lit(1))
            .otherwise(F.lit(-1))
            .cast("bigint")
        )
        return _consolidate(df.select(*cols, weight.alias(W)), columns)
    if capture.method == SNAPSHOT_DIFF:
        new_df = spark.read.format("iceberg").option("snapshot-id", str(new.snapshot)).load(name)
        old_df = spark.read.format("iceberg").option("snapshot-id", str(old.snapshot)).load(name)
        both = new_df.select(*cols, F.lit(1).cast("bigint").alias(W)).unionByName(
            old_df.select(*cols, F.lit(-1).cast("bigint").alias(W))
        )
        return _consolidate(both, columns)
    raise ValueError(f"no changes to read for capture {capture}")


def _consolidate(df: Any, columns: list[str]):  # noqa: ANN202
    from pyspark.sql import functions as F

    grouped = df.groupBy(*[F.col(f"`{c}`") for c in columns]).agg(F.sum(W).alias(W))
    return grouped.where(F.col(W) != 0)
