"""Choosing how to refresh: NO_DATA is decided by the runner; here FULL or INCREMENTAL.

Every FULL carries a stable reason code that the user sees in history and EXPLAIN:

  INITIAL_BUILD               first refresh of the table
  REFRESH_MODE_FULL           the table was created with REFRESH_MODE = FULL
  FORCED_FULL                 a FULL refresh was asked for explicitly
  <compiler code>             the query has no delta rule (LIMIT, KEY_TYPES, ...)
  SOURCE_REPLACED             a source was dropped and created again since the last refresh
  SOURCE_HISTORY_UNAVAILABLE  the recorded source snapshot is no longer in its history
                              (expired, rolled back): its changes cannot be read
  SOURCE_SCHEMA_CHANGED       a column the query reads changed meaning (type, dropped and
                              re-added) between the recorded and the current snapshot
  STATE_MISSING               aggregate state is missing (e.g. created by an older version)
  CHANGE_TOO_LARGE            AUTO: the change is a large share of the sources (estimate recorded)
  DELTA_READS_TOO_MUCH        AUTO: a join's (or a partitioned window's) delta would read
                              at least half the rows a recompute reads and writes (its
                              unchanged side, or the input the window's changed partitions
                              lie in, cannot be pruned to the change's keys); estimated from
                              Iceberg's file statistics before anything is written
                              (estimate recorded)
  WINDOW_OVER_ALL_ROWS        AUTO: the query ranks all its input rows (a window without
                              PARTITION BY, or ORDER BY ... LIMIT, over the sources' rows):
                              any change re-ranks every row, and recomputing reads the
                              input once where the window's delta rule reads it twice
                              (old and new)
  INCONSISTENT_STATE          the incremental result disagreed with the table; recomputed
  DELTA_SQL_INVALID           Spark could not parse the SQL the compiler wrote for the
                              delta (a compiler bug; the error is in stats); recomputed
  TABLE_CHANGED               the dynamic table's own table is not as the last refresh
                              left it (rolled back, or written through Spark directly)
  DELTA_ARITHMETIC_ERROR      with ANSI mode on, the delta met an arithmetic or cast
                              error (overflow, division by zero) on rows the query
                              never evaluates (a new row beside the other side's old
                              rows, a deleted value negated); recomputed, which fails
                              only if the query itself does
  SUM_OVERFLOW                a DECIMAL sum of a group the change touches left
                              DECIMAL(38)'s range (Spark's SUM is NULL there), or a
                              DECIMAL(38, s > 6) one reached 38 - s integer digits,
                              where adding two loses a digit of scale; recomputed
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dyntables.catalog.definition import DynamicTableDef, RefreshState, SourceVersion, snapshot_of
from dyntables.catalog.iceberg import IcebergTable, load_table
from dyntables.engine.checkpoint import settings_for_a_while
from dyntables.errors import IncrementalNotSupportedError
from dyntables.ivm import aggregate as agg
from dyntables.ivm.rules import ranks_all_rows
from dyntables.ivm.sqlb import W
from dyntables.plan import map_values
from dyntables.plan.build import Plan, build_plan
from dyntables.plan.not_incremental import NotIncremental
from dyntables.plan.ops import scans
from dyntables.refresh.changes import (
    NONE,
    SOURCE_REPLACED,
    SOURCE_SCHEMA_CHANGED,
    Capture,
    plan_capture,
)
from dyntables.refresh.compiled import (
    aggregate_nodes,
    state_columns,
    state_keys,
    with_exact_averages,
)
from dyntables.refresh.day import DAY_CHANGED, dated, today
from dyntables.refresh.estimate import ReadEstimate, RecomputeCheaper
from dyntables.refresh.full import (
    check_columns,
    current_sources,
    full_refresh,
    no_longer_resolves,
    pinned_query_sql,
)
from dyntables.refresh.full import qualifier as _qualifier
from dyntables.refresh.history import FULL, INCREMENTAL, NO_DATA
from dyntables.refresh.incremental import (
    SchemaMovedError,
    StateMissingError,
    incremental_refresh,
)
from dyntables.sql.tokens import TableName

if TYPE_CHECKING:
    from dyntables.catalog.registry import Registry
    from dyntables.refresh.runner import Executor, RefreshContext, WriteResult

INITIAL = "INITIAL_BUILD"
REQUESTED_FULL = "REFRESH_MODE_FULL"
FORCED_FULL = "FORCED_FULL"
STATE_MISSING = "STATE_MISSING"
CHANGE_TOO_LARGE = "CHANGE_TOO_LARGE"
DELTA_READS_TOO_MUCH = "DELTA_READS_TOO_MUCH"
WINDOW_OVER_ALL_ROWS = "WINDOW_OVER_ALL_ROWS"
WINDOW_OVER_ALL_ROWS_DETAIL = (
    f"{WINDOW_OVER_ALL_ROWS}: AUTO recomputes a window without PARTITION BY (or an "
    "ORDER BY ... LIMIT) over the sources' rows (any change re-ranks every row; "
    "recomputing reads them once, the delta rule twice); REFRESH_MODE = INCREMENTAL "
    "keeps the rule"
)
INCONSISTENT_STATE = "INCONSISTENT_STATE"
DELTA_SQL_INVALID = "DELTA_SQL_INVALID"
SUM_OVERFLOW = "SUM_OVERFLOW"
DELTA_ARITHMETIC_ERROR = "DELTA_ARITHMETIC_ERROR"
# Spark's run-time errors of arithmetic and casts (ANSI mode): a delta evaluates the
# query's expressions on rows the query never meets (a new row beside the other side's
# old rows, a deleted value negated), so its error is not the query's
_ARITHMETIC = (
    "ARITHMETIC_OVERFLOW]",  # [BINARY_...] (TINYINT, SMALLINT), [INTERVAL_...] too
    "[DIVIDE_BY_ZERO]",
    "[INTERVAL_DIVIDED_BY_ZERO]",
    "[CAST_OVERFLOW",
    "[CAST_INVALID_INPUT]",
    "[NUMERIC_VALUE_OUT_OF_RANGE]",
    "[NUMERIC_OUT_OF_SUPPORTED_RANGE]",
    "[DATETIME_OVERFLOW]",
    "[INVALID_ARRAY_INDEX",
    "[INVALID_INDEX_OF_ZERO]",
    "[CANNOT_PARSE_TIMESTAMP]",
    "[INVALID_FRACTION_OF_SECOND]",
    "Overflow in sum of decimals",
    # the classes Spark throws them as, and its hint on the errors ANSI mode raises
    # (some have no error class: make_date's "Invalid date", "year 10000 is out of range")
    "SparkArithmeticException",
    "SparkDateTimeException",
    "java.time.DateTimeException",
    '"spark.sql.ansi.enabled"',
)
TABLE_CHANGED = "TABLE_CHANGED"

# AUTO recomputes when the estimated change (or what a join's delta reads) is at least
# this share of the source rows (or of what recomputing reads), and the sources are big
# enough for the difference to matter (small tables stay incremental, so what a user
# sees on a sample is what they get on real data)
FULL_THRESHOLD = 0.5
FULL_MIN_ROWS = 100_000

# Below this many changed source rows an incremental refresh is planned for small data:
# adaptive execution off (it runs every shuffle stage as a job of its own and re-plans
# between them: an aggregate refresh ran 18 jobs instead of 7) and no more shuffle
# partitions than the cluster has cores (200 made the seeds' layers 2-4x slower on a
# 100-row change). Sizes come from Iceberg's statistics, so the small delta side of a
# join is still broadcast; large changes keep the session's settings.
SMALL_CHANGE_ROWS = 1_000_000


@dataclass(frozen=True)
class Compiled:
    plan: Plan | None
    reason: NotIncremental | None
    columns: list[str]
    source_columns: dict[str, list[str]]


def scanned_columns(plan: Plan) -> dict[str, list[str]]:
    """Per source, the columns the plan's scans read (what change capture must provide)."""
    out: dict[str, dict[str, None]] = {}
    for scan in scans(plan.root):
        out.setdefault(str(scan.table), {}).update(dict.fromkeys(scan.source_columns))
    return {k: list(v) for k, v in out.items()}


def _map_outputs(fields: list[tuple[str, str]]) -> list[int]:
    """The positions of the table's MAP columns, each written from its entries (see
    build_plan); a column holding a MAP elsewhere (in a struct, an array, a MAP's
    value), whose entries Spark could not group either, makes the query FULL."""
    positions = []
    for i, (name, type_sql) in enumerate(fields):
        value = map_values.value_type(type_sql)
        groupable = value is not None and "map<" not in type_sql.lower()[4:]
        if groupable:
            positions.append(i)
        elif "map<" in type_sql.lower():  # a delta is applied by grouping on every column
            raise NotIncremental(
                "MAP_COLUMN",
                "output",
                f"column {name} is a {type_sql}: Spark cannot group or compare it",
            )
    return positions


class Planner:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    # -- compiling ---------------------------------------------------------------------------
    def compile(
        self,
        dt: DynamicTableDef,
        spark: Any | None = None,
        pinned: Mapping[str, SourceVersion] | None = None,
        returns: list[tuple[str, str]] | None = None,
    ) -> Compiled:
        """``pinned``: a refresh's source snapshots, whose columns the plan is built over.
        A source's current columns may be newer: a column added with no write since
        made a ``SELECT *`` plan one column wider than the table and the rows it reads,
        and every refresh failed until the source's next write. ``returns``: the
        (name, type) of the query's columns at CREATE, where the table is not built yet
        (or is the one being replaced); else the table's own."""
        spark = spark or self.registry.spark
        dt = dated(dt, today(spark, dt))  # a refresh's is dated already: today's for the rest
        schema: dict[TableName, list[tuple[str, str]]] = {}
        for source in dt.sources:
            version = (pinned or {}).get(str(source))
            try:
                relation = (
                    spark.sql(f"SELECT * FROM {source.sql()} VERSION AS OF {version.snapshot}")
                    if version is not None and version.snapshot is not None
                    else spark.table(source.sql())
                )
                fields = relation.schema.fields
            except Exception:
                continue
            schema[source] = [(f.name, f.dataType.simpleString()) for f in fields]
        try:
            fields = returns or [
                (f.name, f.dataType.simpleString())
                for f in spark.table(dt.name.sql()).schema.fields
            ]
        except Exception:
            fields = []
        columns = [c for c, _ in fields]
        source_columns = {str(k): [c for c, _ in v] for k, v in schema.items()}
        try:
            plan = with_exact_averages(
                spark, build_plan(dt.query, schema, _qualifier(dt), _map_outputs(fields))
            )
            for _, node in aggregate_nodes(plan):
                code = agg.supported(node)
                if code:
                    raise NotIncremental(
                        code, "Aggregate", "COUNT(DISTINCT x) has no delta rule yet"
                    )
            for body in plan.not_provably_empty:
                if _proven_empty(spark, body):
                    raise NotIncremental(
                        "SUBQUERY_EXPRESSION",
                        "scalar subquery",
                        "Spark's optimizer proves a correlated COUNT subquery's input empty "
                        "(a condition that is always false), and Spark then answers NULL "
                        "where a COUNT over no rows is 0; recomputed, so the table shows "
                        "what Spark answers",
                    )
            scanned = scanned_columns(plan)
            for name in [c for cols in scanned.values() for c in cols] + columns:
                if name.lower() == W:  # a change is these columns plus its weight column
                    raise NotIncremental(
                        "RESERVED_COLUMN_NAME",
                        "column",
                        f"a column named {name} is the weight of a change",
                    )
        except NotIncremental as reason:
            return Compiled(None, reason, columns, source_columns)
        return Compiled(plan, None, columns, {**source_columns, **scanned})

    def compile_for_create(
        self,
        dt: DynamicTableDef,
        columns: list[str],
        returns: list[tuple[str, str]] | None = None,
    ) -> Compiled:
        compiled = self.compile(dt, returns=returns)
        compiled = replace(compiled, columns=columns)
        if dt.refresh_mode == "INCREMENTAL" and compiled.plan is None:
            reason = compiled.reason
            assert reason is not None
            raise IncrementalNotSupportedError(
                f"dynamic table {dt.name} cannot be refreshed incrementally: {reason.code} at {reason.operator} "
                f"({reason.detail}); use REFRESH_MODE = AUTO or FULL"
            )
        return compiled

    # -- choosing ----------------------------------------------------------------------------
    def choose(
        self,
        dt: DynamicTableDef,
        previous: RefreshState | None,
        pinned: dict[str, SourceVersion],
        force_full: bool,
        spark: Any | None = None,
        loaded: Mapping[str, IcebergTable] | None = None,
    ) -> tuple[str, str | None, Executor]:
        """``loaded``: the sources as the runner loaded them to pin ``pinned``, so that
        they are not read from the catalog a second time."""
        compiled = self.compile(dt, spark, pinned)
        if compiled.plan is not None:
            check_columns(
                dt,
                compiled.plan.output_names,
                compiled.columns,
                dt.plan_columns,
                lambda: _resolved_names(dt, pinned, spark or self.registry.spark),
            )
        plan = compiled.plan if dt.refresh_mode != "FULL" else None

        def full(ctx: RefreshContext) -> WriteResult:
            return full_refresh(ctx, plan, compiled.columns)

        if force_full:
            return FULL, FORCED_FULL, full
        if dt.refresh_mode == "FULL":
            return FULL, REQUESTED_FULL, full
        if previous is None:
            return FULL, INITIAL, full
        if compiled.plan is None:
            assert compiled.reason is not None
            return FULL, compiled.reason.code, full
        if set(previous.state_tables) != state_keys(compiled.plan):
            return FULL, STATE_MISSING, full
        expected = state_columns(compiled.plan)
        for key, info in previous.state_tables.items():
            state = load_table(self.registry.spark, TableName(tuple(str(info["table"]).split("."))))
            recorded_state = snapshot_of(info)
            if state is None or (
                recorded_state is not None and state.snapshot(recorded_state) is None
            ):
                # gone, or the snapshot the last refresh left expired since (a
                # maintenance job's compaction and expire_snapshots): rebuild it
                return FULL, STATE_MISSING, full
            if not expected.get(key, set()) <= set(state.column_names()):
                # kept for another plan of the query (an older version's, one that
                # finalized an AVG it now recomputes): rebuild it
                return FULL, STATE_MISSING, full
        captures: dict[str, Capture] = {}
        for name, version in pinned.items():
            recorded = previous.sources.get(name)
            table = (loaded or {}).get(name) or load_table(
                self.registry.spark, TableName(tuple(name.split(".")))
            )
            if recorded is None or table is None:
                return FULL, STATE_MISSING, full
            capture = plan_capture(table, recorded, version, compiled.source_columns.get(name, ()))
            if capture.method is None:
                assert capture.reason is not None
                return FULL, capture.reason, full
            captures[name] = capture
        changed = sum(c.changed_rows for c in captures.values() if c.method != NONE)
        total = sum(c.total_rows for c in captures.values() if c.method != NONE)
        if (
            dt.refresh_mode == "AUTO"
            and total >= FULL_MIN_ROWS
            and changed >= FULL_THRESHOLD * total
        ):

            def full_estimated(ctx: RefreshContext) -> WriteResult:
                ctx.stats["estimate.changed_rows"] = changed
                ctx.stats["estimate.source_rows"] = total
                return full(ctx)

            return FULL, CHANGE_TOO_LARGE, full_estimated
        if _auto_recomputes(dt, compiled.plan):
            return FULL, WINDOW_OVER_ALL_ROWS, full

        incremental_plan = compiled.plan
        recompute_if = _reads_too_much if dt.refresh_mode == "AUTO" else None

        def incremental(ctx: RefreshContext) -> WriteResult:
            ctx.stats["estimate.changed_rows"] = changed
            try:
                with small_change_settings(ctx.spark, changed):
                    return incremental_refresh(
                        ctx,
                        incremental_plan,
                        captures,
                        compiled.columns,
                        compiled.source_columns,
                        recompute_if,
                    )
            except RecomputeCheaper:
                return replace(full(ctx), mode=FULL, reason=DELTA_READS_TOO_MUCH)
            except Exception as exc:
                reason = _incremental_failure(exc)
                if reason is None:
                    raise
                ctx.stats["incremental_error"] = _first_line(str(exc))[:200]
                return replace(full(ctx), mode=FULL, reason=reason)

        return INCREMENTAL, None, incremental

    # -- what the user sees before a refresh (EXPLAIN / DESCRIBE / CREATE checks) ----------
    def describe(self, dt: DynamicTableDef, compiled: Compiled | None = None) -> tuple[str, str]:
        """The mode a refresh with a change will run, and why (``compiled``: already done)."""
        decided = self.sources_now(dt)
        if decided is not None:
            return decided
        if dt.refresh_mode == "FULL":
            return FULL, REQUESTED_FULL
        day = today(self.registry.spark, dt)
        if day is not None:
            table = load_table(self.registry.spark, dt.name)
            state = RefreshState.from_properties(table.properties()) if table else None
            if state is not None and state.day != day:
                return FULL, (
                    f"{DAY_CHANGED}: the query reads CURRENT_DATE, {day} now, and the last "
                    f"refresh read {state.day}: the rows a day in or out of its range are no "
                    "source's change"
                )
        compiled = compiled or self.compile(dt)
        if compiled.plan is None:
            assert compiled.reason is not None
            return FULL, f"{compiled.reason.code}: {compiled.reason.detail}"
        if _auto_recomputes(dt, compiled.plan):
            return FULL, WINDOW_OVER_ALL_ROWS_DETAIL
        return INCREMENTAL, "every operator has a delta rule"

    def sources_now(self, dt: DynamicTableDef) -> tuple[str, str] | None:
        """What the sources alone decide for the next refresh, whatever the query: NO_DATA
        when a source, or a branch or tag it reads, is gone (the runner keeps the rows);
        FULL when one was dropped and created again since the last refresh. Without
        this, DESCRIBE and EXPLAIN said UNKNOWN_SOURCE, or INCREMENTAL."""
        spark = self.registry.spark
        pinned, missing, _, _ = current_sources(spark, dt)
        if missing:
            return NO_DATA, (
                f"SOURCE_MISSING: source {missing[0]} is not found; refreshes record "
                "NO_DATA and keep the current rows until it is created again"
            )
        table = load_table(spark, dt.name)
        state = RefreshState.from_properties(table.properties()) if table is not None else None
        for name, version in pinned.items():
            recorded = state.sources.get(name) if state is not None else None
            if recorded is not None and recorded.uuid != version.uuid:
                return FULL, (
                    f"{SOURCE_REPLACED}: source {name} was dropped and created again since "
                    "the last refresh; the next refresh recomputes the table"
                )
        return None

    def explain_lines(self, dt: DynamicTableDef) -> list[tuple[str, str]]:
        from dyntables.refresh.explain import explain

        return explain(self, dt)


def _resolved_names(dt: DynamicTableDef, pinned: dict[str, SourceVersion], spark: Any) -> list[str]:
    """The names Spark gives the query's columns over the pinned sources (analysis only)."""
    from pyspark.errors import AnalysisException

    try:
        return list(spark.sql(pinned_query_sql(spark, dt, pinned)).schema.names)
    except AnalysisException as exc:
        raise no_longer_resolves(dt, exc) from exc


def _proven_empty(spark: Any, query: str) -> bool:
    """Whether Spark's optimizer turns some relation of ``query`` into an empty local one
    (planning only, no job)."""
    try:
        plan = spark.sql(query)._jdf.queryExecution().optimizedPlan().toString()
    except Exception:  # noqa: BLE001 - unknown: taken as empty, so the query recomputes
        return True
    return "LocalRelation <empty>" in plan


def _reads_too_much(estimate: ReadEstimate) -> bool:
    return (
        estimate.full_rows >= FULL_MIN_ROWS
        and estimate.delta_rows >= FULL_THRESHOLD * estimate.full_cost
    )


def _auto_recomputes(dt: DynamicTableDef, plan: Plan) -> bool:
    """AUTO's choice of FULL by the query's shape (refresh and EXPLAIN ask the same)."""
    return dt.refresh_mode == "AUTO" and ranks_all_rows(plan.root)


def small_data_settings(spark: Any) -> dict[str, str]:
    """Settings that plan for little data (see SMALL_CHANGE_ROWS): adaptive execution
    off, no more shuffle partitions than the cluster has cores."""
    cores = max(int(spark.sparkContext.defaultParallelism), 1)
    configured = int(spark.conf.get("spark.sql.shuffle.partitions", None) or 200)
    return {
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.shuffle.partitions": str(min(configured, cores)),
    }


@contextmanager
def small_change_settings(spark: Any, changed_rows: int) -> Iterator[None]:
    """The refresh session's settings for a small change (see SMALL_CHANGE_ROWS), put
    back afterwards: a FULL fallback in the same session plans for the whole data."""
    if changed_rows >= SMALL_CHANGE_ROWS:
        yield
        return
    with settings_for_a_while(spark, small_data_settings(spark)):
        yield


def _incremental_failure(exc: Exception) -> str | None:
    """The FULL reason for an incremental refresh that failed in a way a recompute
    answers; None: the error is the refresh's (a recompute would meet it too).

    A check the delta SQL makes (``RAISE_ERROR('dyntables: ...')``) fails at run time.
    Spark refusing the SQL itself is an AnalysisException, whose message quotes the SQL
    or its plan, checks and all: it was taken for a failed check. A syntax error is the
    compiler's; anything else Spark cannot resolve (a temporary function the session
    lacks) is the refresh's, and its message says what to do."""
    from pyspark.errors import AnalysisException, ParseException

    if isinstance(exc, StateMissingError):
        return STATE_MISSING
    if isinstance(exc, SchemaMovedError):
        return SOURCE_SCHEMA_CHANGED
    if isinstance(exc, ParseException):
        return DELTA_SQL_INVALID
    if isinstance(exc, AnalysisException):
        return None
    text = str(exc)
    if "dyntables: " not in text:
        return DELTA_ARITHMETIC_ERROR if any(a in text for a in _ARITHMETIC) else None
    return SUM_OVERFLOW if agg.OVERFLOW in text else INCONSISTENT_STATE


def _first_line(text: str) -> str:
    """Spark's messages may start with a blank line (a ParseException's does)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
