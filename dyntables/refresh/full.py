"""FULL refresh: recompute the query over the pinned sources and replace the contents.

Runs as one WAP-staged INSERT OVERWRITE, so the old contents stay current until the
runner publishes the new snapshot together with the source snapshots it reflects. When
the query compiles to an incremental plan, the FULL also rebuilds the aggregate state
(and computes the contents from it), so the next refresh can be incremental again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from sqlglot import exp

from dyntables.catalog.definition import DynamicTableDef, SourceVersion
from dyntables.catalog.iceberg import IcebergTable, load_table
from dyntables.engine.errors import spark_message
from dyntables.errors import QueryColumnsChangedError, SourceSchemaChangedError
from dyntables.plan.build import Plan
from dyntables.plan.query import METADATA_COLUMNS, parse_query, pin_sources, refs_read
from dyntables.plan.render import spark_sql
from dyntables.refresh.compiled import drop_state_tables, full_build
from dyntables.refresh.widen import column_change, narrowings, widen_table
from dyntables.sql.tokens import TableName

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from dyntables.refresh.runner import RefreshContext, WriteResult

_T = TypeVar("_T")


def qualifier(dt: DynamicTableDef) -> Callable[[TableName], TableName]:
    """Resolve names written in the DT's query where CREATE resolved them: the creating
    session's catalog and namespace (the table's own for a table created before they
    were recorded)."""
    catalog, namespace = dt.query_namespace or dt.name.parts[:2]

    def qualify(name: TableName) -> TableName:
        if len(name.parts) == 1:
            return TableName((catalog, namespace, name.parts[0]))
        if len(name.parts) == 2:
            return TableName((catalog, *name.parts))
        return name

    return qualify


_AS_OF = re.compile(r"\bAS\s+OF\b", re.IGNORECASE)


def refs_of(dt: DynamicTableDef) -> dict[TableName, frozenset[str]]:
    """The branches and tags the query reads by name, by source (see
    :func:`~dyntables.plan.query.refs_read`); parsed only when the text reads AS OF."""
    if not _AS_OF.search(dt.query):
        return {}
    return refs_read(parse_query(dt.query), qualifier(dt))


class CurrentSources(NamedTuple):
    """What :func:`current_sources` found. ``tables`` are the loaded sources, handed on
    so that a later step in the same refresh does not read the catalog again."""

    pinned: dict[str, SourceVersion]
    missing: list[str]
    rows: int | None
    tables: dict[str, IcebergTable]


def current_sources(spark: Any, dt: DynamicTableDef) -> CurrentSources:
    """The sources' current snapshots, the sources that are gone (a table, or a branch
    or tag the query reads VERSION AS OF), and the rows the sources hold together (None
    when a snapshot does not say). A refresh with one gone records NO_DATA."""
    from dyntables.refresh.sessions import rows_together

    pinned: dict[str, SourceVersion] = {}
    missing: list[str] = []
    counts: list[int | None] = []
    tables: dict[str, IcebergTable] = {}
    refs = refs_of(dt)
    for source in dt.sources:
        table = load_table(spark, source)
        if table is None:
            missing.append(str(source))
            continue
        version = table.version(refs.get(source, ()))
        missing += [f"{source} VERSION AS OF '{ref}'" for ref, snap in version.refs if snap is None]
        pinned[str(source)] = version
        tables[str(source)] = table
        counts.append(table.total_records())
    return CurrentSources(pinned, missing, rows_together(counts), tables)


def pinned_query_sql(spark: Any, dt: DynamicTableDef, pinned: dict[str, SourceVersion]) -> str:
    """The DT's query with every source read at its pinned snapshot."""
    return pinned_sql(spark, parse_query(dt.query), qualifier(dt), pinned)


def pinned_sql(
    spark: Any,
    query: exp.Query,
    qualify: Callable[[TableName], TableName],
    pinned: dict[str, SourceVersion],
) -> str:
    """``query`` with every source read at its pinned snapshot (see
    :func:`~dyntables.plan.query.pin_sources`)."""
    versions = {TableName(tuple(k.split("."))): v.snapshot for k, v in pinned.items()}
    refs = {TableName(tuple(k.split("."))): dict(v.refs) for k, v in pinned.items()}
    shadowed = _shadowed(spark, [name for name, snap in versions.items() if snap is None])
    return spark_sql(pin_sources(query, qualify, versions, refs, shadowed))


def _shadowed(spark: Any, never_written: list[TableName]) -> dict[TableName, set[str]]:
    """The never-written sources' own columns named like the Iceberg metadata columns
    the filter that reads them as empty uses (``_pos``, ...), which hide those (Iceberg
    refuses to read such a column at all, but a query may leave it unread). One
    analysis of the table each, and sources are seldom never written."""
    from pyspark.errors import AnalysisException

    shadowed = {}
    for name in never_written:
        try:
            columns = {c.lower() for c in spark.table(name.sql()).columns}
        except AnalysisException:  # gone: the query fails anyway, and says so
            columns = set(METADATA_COLUMNS)
        shadowed[name] = columns & METADATA_COLUMNS
    return shadowed


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
        return f"SELECT * FROM ({pinned_query_sql(spark, dt, pinned)}) AS q", {}
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
    states: dict[str, dict[str, object]] = {}
    try:
        sql, states = _resolving(
            ctx, lambda: contents_sql(ctx.spark, dt, plan, ctx.pinned, columns, ctx.job_id)
        )
        returns = _resolving(ctx, lambda: ctx.spark.sql(sql).schema)  # analysis: no job
        if plan is None:  # the query as written: its columns are what Spark resolves now
            check_columns(dt, returns.names, columns, dt.query_columns)
        if dt.query_columns:  # checked against CREATE's names: a position is one column
            widened = widen_table(ctx.spark, dt.name, returns)
            if widened:
                ctx.stats["widened_columns"] = "; ".join(widened)
            query_types = (
                returns
                if plan is None
                else _resolving(
                    ctx, lambda: ctx.spark.sql(pinned_query_sql(ctx.spark, dt, ctx.pinned)).schema
                )
            )
            lossy = narrowings(ctx.spark, dt.name, query_types)
            if lossy:
                raise _does_not_fit(dt, lossy, "writing them would change their values")
        _write(ctx, sql, returns)
        _source_read_stats(ctx)
        table = load_table(ctx.spark, dt.name)
        snap = table.staged_snapshot(ctx.job_id) if table is not None else None
    except Exception:  # nothing was published: the state built for it is no one's
        drop_state_tables(ctx.spark, [str(v["table"]) for v in states.values()])
        raise
    if snap is None:
        return WriteResult(0, 0, state_tables=states)
    added = int(snap.summary.get("added-records", "0"))
    deleted = int(snap.summary.get("deleted-records", "0"))
    return WriteResult(added, deleted, state_tables=states)


def _write(ctx: RefreshContext, sql: str, returns: StructType) -> None:
    """The INSERT OVERWRITE. When it fails and the rows' types are not the table's (a
    source's type changed in a way Iceberg cannot promote the table's column to follow,
    such as a DECIMAL's scale), say which columns, not Spark's cast error alone."""
    name = ctx.dt.name.sql()
    try:
        ctx.spark.sql(f"INSERT OVERWRITE {name} {sql}")
    except Exception as exc:
        table = ctx.spark.table(name).schema
        differ = [
            column_change(have, want)
            for have, want in zip(table.fields, returns.fields, strict=False)
            if have.dataType.simpleString() != want.dataType.simpleString()
        ]
        if not differ:
            raise
        raise _does_not_fit(ctx.dt, differ, spark_message(exc)[:300]) from exc


def _does_not_fit(dt: DynamicTableDef, columns: list[str], detail: str) -> SourceSchemaChangedError:
    return SourceSchemaChangedError(
        f"the rows of {dt.name} no longer fit its columns ({'; '.join(columns)}): {detail}; "
        "a source's type changed in a way the table cannot follow in place: drop the "
        "dynamic table and create it again"
    )


def _resolving(ctx: RefreshContext, step: Callable[[], _T]) -> _T:
    """Run a step that analyzes SQL written from the query (the state's build, the
    contents' columns). When the query itself no longer resolves over its sources, say
    so, and not with the plan of the SQL dyntables wrote; any other failure is the
    step's own."""
    from pyspark.errors import AnalysisException

    try:
        return step()
    except AnalysisException as exc:
        try:
            ctx.spark.sql(pinned_query_sql(ctx.spark, ctx.dt, ctx.pinned))
        except AnalysisException:
            raise no_longer_resolves(ctx.dt, exc) from exc
        raise


def no_longer_resolves(dt: DynamicTableDef, exc: Exception) -> SourceSchemaChangedError:
    """The error for a query that Spark no longer resolves over its pinned sources: nearly
    always a source column renamed, dropped or retyped since CREATE."""
    message = re.sub(r";?\s*line \d+ pos \d+", "", spark_message(exc))
    return SourceSchemaChangedError(
        f"the query of {dt.name} no longer resolves over its sources: {message.rstrip('.; ')}; "
        "if a source's column was renamed, dropped or retyped since the table was created, "
        "restore it, or redefine the table with CREATE OR REPLACE DYNAMIC TABLE"
    )


def _source_read_stats(ctx: RefreshContext) -> None:
    """A FULL refresh reads every source whole: say how many rows that was."""
    for name, version in ctx.pinned.items():
        table = load_table(ctx.spark, TableName(tuple(name.split("."))))
        rows = 0
        if table is not None and version.snapshot is not None:
            snap = table.snapshot(version.snapshot)
            rows = int(snap.summary.get("total-records", "0")) if snap else 0
        ctx.stats[f"rows_read.{name.split('.')[-1]}"] = rows
