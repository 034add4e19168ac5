"""FULL refresh: recompute the query over the pinned sources and replace the contents.

Runs as one WAP-staged INSERT OVERWRITE, so the old contents stay current until the
runner publishes the new snapshot together with the source snapshots it reflects. When
the query compiles to an incremental plan, the FULL also rebuilds the aggregate state
(and computes the contents from it), so the next refresh can be incremental again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from dyntables.catalog.definition import DynamicTableDef, SourceVersion
from dyntables.catalog.iceberg import load_table
from dyntables.engine.errors import first_line
from dyntables.errors import QueryColumnsChangedError, SourceSchemaChangedError
from dyntables.plan.build import Plan
from dyntables.plan.query import parse_query, pin_sources
from dyntables.plan.render import spark_sql
from dyntables.refresh.compiled import drop_state_tables, full_build
from dyntables.refresh.widen import widenings
from dyntables.sql.tokens import TableName

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from dyntables.refresh.runner import RefreshContext, WriteResult

_T = TypeVar("_T")


def qualifier(dt: DynamicTableDef) -> Callable[[TableName], TableName]:
    """Resolve names written in the DT's query in the DT's own catalog and namespace."""
    catalog, namespace = dt.name.parts[0], dt.name.parts[1]

    def qualify(name: TableName) -> TableName:
        if len(name.parts) == 1:
            return TableName((catalog, namespace, name.parts[0]))
        if len(name.parts) == 2:
            return TableName((catalog, *name.parts))
        return name

    return qualify


def pinned_query_sql(dt: DynamicTableDef, pinned: dict[str, SourceVersion]) -> str:
    """The DT's query with every source read at its pinned snapshot."""
    versions = {TableName(tuple(k.split("."))): v.snapshot for k, v in pinned.items()}
    return spark_sql(pin_sources(parse_query(dt.query), qualifier(dt), versions))


def contents_sql(
    spark: object,
    dt: DynamicTableDef,
    plan: Plan | None,
    pinned: dict[str, SourceVersion],
    columns: list[str],
    generation: str,
) -> tuple[str, dict[str, dict[str, object]]]:
    """SQL of the table's full contents, plus the state tables built for it (if any)."""
    if plan is None:
        return f"SELECT * FROM ({pinned_query_sql(dt, pinned)}) AS q", {}
    new = {k: v.snapshot for k, v in pinned.items()}
    return full_build(spark, plan, dt.catalog, dt.dt_id, generation, new, columns)


def check_columns(
    dt: DynamicTableDef,
    names: Sequence[str],
    columns: Sequence[str],
    created: Sequence[str] = (),
    resolve: Callable[[], Sequence[str]] | None = None,
) -> None:
    """Refuse to write rows whose columns are not the table's: the query's ``*`` is
    expanded at each refresh, so a column a source gained, lost or moved changes what it
    returns, and rows are written by position.

    ``created`` are the names the same namer (Spark, or the compiler) gave the query's
    columns at CREATE: any difference is a changed ``*``. ``resolve`` gives Spark's names
    now, to settle a difference the compiler's naming alone could make (a newer compiler
    naming a column otherwise). A table created before the names were recorded has only
    its own columns to go by, which a CREATE may have named: there, beyond a count that
    changed, only the table's own names in another order are refused."""
    if created:
        if _lowered(names) == _lowered(created):
            return
        if resolve is not None and dt.query_columns:
            names, created = resolve(), dt.query_columns
            if _lowered(names) == _lowered(created):
                return
        _refuse(dt, names, f"at CREATE it returned ({', '.join(created)})")
    query, table = _lowered(names), _lowered(columns)
    if not table or query == table:
        return
    if len(query) == len(table) and sorted(query) != sorted(table):
        return
    _refuse(dt, names, f"the table has ({', '.join(columns)})")


def _lowered(names: Sequence[str]) -> list[str]:
    return [n.lower() for n in names]


def _refuse(dt: DynamicTableDef, names: Sequence[str], before: str) -> None:
    raise QueryColumnsChangedError(
        f"the query of {dt.name} now returns the columns ({', '.join(names)}), {before}: "
        "a source's columns changed under SELECT *; recreate it with CREATE OR REPLACE "
        "DYNAMIC TABLE, or name the columns in its query"
    )


def full_refresh(ctx: RefreshContext, plan: Plan | None, columns: list[str]) -> WriteResult:
    from dyntables.refresh.runner import WriteResult

    dt = ctx.dt
    sql, states = _contents(ctx, plan, columns)
    try:
        returns = _analyzed(ctx, lambda: ctx.spark.sql(sql).schema)
        if plan is None:  # the query as written: its columns are what Spark resolves now
            check_columns(dt, returns.names, columns, dt.query_columns)
        widened = widen_table(ctx.spark, dt, returns)
        if widened:
            ctx.stats["widened_columns"] = "; ".join(widened)
        ctx.spark.sql(f"INSERT OVERWRITE {dt.name.sql()} {sql}")
    except BaseException:  # nothing was published: the state built for it is no one's
        drop_state_tables(ctx.spark, [str(v["table"]) for v in states.values()])
        raise
    _source_read_stats(ctx)
    table = load_table(ctx.spark, dt.name)
    snap = table.staged_snapshot(ctx.job_id) if table is not None else None
    if snap is None:
        return WriteResult(0, 0, state_tables=states)
    added = int(snap.summary.get("added-records", "0"))
    deleted = int(snap.summary.get("deleted-records", "0"))
    return WriteResult(added, deleted, state_tables=states)


def _contents(
    ctx: RefreshContext, plan: Plan | None, columns: list[str]
) -> tuple[str, dict[str, dict[str, object]]]:
    return _analyzed(
        ctx, lambda: contents_sql(ctx.spark, ctx.dt, plan, ctx.pinned, columns, ctx.job_id)
    )


def _analyzed(ctx: RefreshContext, analyze: Callable[[], _T]) -> _T:
    """Run a step that analyzes the query (the state's build, the contents' columns). A
    query that no longer resolves is nearly always a source column renamed, dropped or
    retyped: say so, and not with the plan of the SQL dyntables wrote."""
    from pyspark.errors import AnalysisException

    try:
        return analyze()
    except AnalysisException as exc:
        message = re.sub(
            r"^\[[A-Z_.]+\]\s*|;?\s*line \d+ pos \d+", "", first_line(str(exc))
        ).rstrip(".; ")
        raise SourceSchemaChangedError(
            f"the query of {ctx.dt.name} no longer resolves over its sources: {message}; "
            f"if a source's column was renamed, dropped or retyped since the table was "
            f"created, restore it, or redefine the table with CREATE OR REPLACE DYNAMIC TABLE"
        ) from exc


def widen_table(spark: Any, dt: DynamicTableDef, returns: StructType) -> list[str]:
    """Promote the table's columns a source's promotion widened (see widen.py); the
    clauses run, for the refresh's stats. A schema change commits at once, outside the
    refresh's staged snapshot: if the refresh then fails, the table is only wider."""
    clauses = widenings(spark.table(dt.name.sql()).schema, returns)
    for clause in clauses:
        spark.sql(f"ALTER TABLE {dt.name.sql()} {clause}")
    return clauses


def _source_read_stats(ctx: RefreshContext) -> None:
    """A FULL refresh reads every source whole: say how many rows that was."""
    for name, version in ctx.pinned.items():
        table = load_table(ctx.spark, TableName(tuple(name.split("."))))
        rows = 0
        if table is not None and version.snapshot is not None:
            snap = table.snapshot(version.snapshot)
            rows = int(snap.summary.get("total-records", "0")) if snap else 0
        ctx.stats[f"rows_read.{name.split('.')[-1]}"] = rows
