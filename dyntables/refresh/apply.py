"""Applying a Z-set delta to the dynamic table, with exact bag semantics.

The table has exactly the query's columns, no hidden key. So a row value with net
weight +n gets n more copies (an append), and a value with net weight -n has all its
copies replaced by (current - n) copies, in a single MERGE. A value whose copies would
go negative means the table and the delta disagree: the MERGE fails with
``INCONSISTENT`` and the refresh falls back to FULL instead of writing a wrong table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from dyntables.engine.checkpoint import cached_alone, forget_view
from dyntables.engine.frames import AS_NUMBERS, PRUNABLE_TYPES, literal, number_literal
from dyntables.ivm.sqlb import W, null_safe_eq_all, raise_error
from dyntables.plan.render import spark_sql
from dyntables.sql.tokens import back_quoted

DYNTABLES_PREFIX = "dyntables: "  # an error with it falls back to FULL (planner.py)
INCONSISTENT = f"{DYNTABLES_PREFIX}dynamic table and delta disagree"

# Up to this many rows, a table that loses rows is rewritten whole in one job instead of
# MERGEd: a MERGE costs several jobs plus a join against the table, a rewrite of a small
# table (an aggregate, a leaderboard) costs one.
REWRITE_MAX_ROWS = 200_000

# Up to this many rows, a table is rewritten whatever its delta, in a single job that
# also counts the rows inserted and deleted (observed metrics): no consolidation job, no
# count job. Measured (an aggregate of N groups, 100 new rows, medians of 8 alternating
# refreshes): 1k groups 1.09 s vs 1.26 s counting first, 10k 0.87 vs 1.00, 50k 1.02 vs
# 1.19, 200k 1.08 vs 1.26. Kept below 200k: a delta of inserts only would otherwise be
# appended without reading the table at all.
SINGLE_JOB_MAX_ROWS = 50_000

# A table partitioned by a column of the delta (by hour/day/month/year, or by its value)
# takes a delta that removes rows by overwriting the partitions holding them: one read
# and one write of those partitions, where a MERGE reads them three times (counting the
# current copies, finding the files with a match, rewriting them). Only when the
# partitions are few and hold no more data files than values lose copies (so a MERGE
# would rewrite about every one of them anyway). Measured (scratch A/B, alternating
# rounds on two copies of the pipeline's dwd, 10M orders, ~3k rows deleted or updated
# in two days' partitions and 7k new): MERGE 1.98 s, overwrite 0.85 s, medians of 6.
OVERWRITE_MAX_PARTITIONS = 64
OVERWRITE_FILES_PER_VALUE = 1  # files in those partitions per value losing copies, at most
_TIME_TRANSFORMS = ("hour", "day", "month", "year")
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")

# how long to wait for a finished write's observed counts (they arrive through Spark's
# listener bus, normally within milliseconds)
OBSERVED_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Applied:
    rows_inserted: int
    rows_deleted: int
    # the table was rewritten with the rows it had: its staged snapshot must not be
    # published (downstream would see a change of nothing)
    unchanged: bool = False


def _helper(name: str, columns: list[str]) -> str:
    """``name`` for a helper column next to the table's own, made unique: a table may have
    a column called ``_n`` (or ``_op``, ``__i``...) itself."""
    taken = {c.lower() for c in columns}
    while name.lower() in taken:
        name += "_"
    return name


def _read(columns: list[str], maps: frozenset[str]) -> str:
    """Select items reading the table's ``columns`` as a delta holds them: a MAP as its
    entries (``maps``: see Plan.entries), which Spark can group and compare."""
    return ", ".join(
        f"map_entries({back_quoted(c)}) AS {back_quoted(c)}" if c in maps else back_quoted(c)
        for c in columns
    )


def _written(columns: list[str], maps: frozenset[str], qualifier: str = "") -> str:
    """Select items writing a delta's ``columns`` into the table: a MAP's entries as the
    MAP, under the column's name (a DataFrame write matches columns by name); or, of
    relation ``qualifier``, a MERGE's values (which take no names)."""
    items = []
    for c in columns:
        ref = f"{qualifier}.{back_quoted(c)}" if qualifier else back_quoted(c)
        if c in maps:
            ref = f"map_from_entries({ref})" + ("" if qualifier else f" AS {back_quoted(c)}")
        items.append(ref)
    return ", ".join(items)


def apply_delta(
    spark: Any,
    table_sql: str,
    columns: list[str],
    delta_sql: str,
    view_prefix: str,
    table_rows: int | None = None,
    partitioning: Partitioning | None = None,
    maps: frozenset[str] = frozenset(),
) -> Applied:
    """``partitioning``: the table's partition fields and a way to count the data files
    in some of its partitions (see :class:`Partitioning`), so a delta that removes rows
    can overwrite the partitions holding them instead of MERGing. ``maps``: the columns
    whose delta holds a MAP as its entries (read and written so, see :func:`_read`)."""
    if table_rows is not None and table_rows <= SINGLE_JOB_MAX_ROWS:
        return _rewrite_counted(spark, table_sql, columns, delta_sql, view_prefix, maps)
    cols = ", ".join(back_quoted(c) for c in columns)
    i = _helper("__i", columns)
    stored, consolidated = cached_alone(
        spark.sql(
            f"SELECT {cols}, CAST(SUM({W}) AS BIGINT) AS {W} FROM ({delta_sql}) _d GROUP BY {cols} HAVING SUM({W}) <> 0"
        ),
        f"{view_prefix}_apply",
    )
    try:
        view = f"{view_prefix}_apply"
        consolidated.createOrReplaceTempView(view)
        # collect, not first(): first() is a take(1), which runs a job on one partition
        # and then a second one for the rest
        merges = table_rows is None or table_rows > REWRITE_MAX_ROWS
        bounded = _bounded_columns(consolidated.schema.fields) if merges else []
        field = (
            _partition_field(consolidated.schema.fields, partitioning.fields)
            if merges and partitioning is not None
            else None
        )
        (row,) = spark.sql(
            f"SELECT COALESCE(SUM(IF({W} > 0, {W}, 0)), 0) AS ins, COALESCE(SUM(IF({W} < 0, -{W}, 0)), 0) AS del, "
            f"COUNT_IF({W} < 0) AS neg_values{_bounds_items(bounded)}{_units_items(field)} FROM {view}"
        ).collect()
        inserted, deleted, negatives = int(row["ins"]), int(row["del"]), int(row["neg_values"])
        if inserted == 0 and deleted == 0:
            return Applied(0, 0)
        if negatives == 0:
            spark.sql(
                f"INSERT INTO {table_sql} SELECT {_written(columns, maps)} FROM "
                f"(SELECT *, explode(sequence(1, {W})) AS {i} FROM {view}) _x"
            )
            return Applied(inserted, deleted)
        condition = (
            _overwrite_condition(field, row, negatives, partitioning)
            if field is not None and partitioning is not None
            else None
        )
        if condition is not None:
            _overwrite(spark, table_sql, columns, view, condition, maps)
        elif merges:
            _merge(spark, table_sql, columns, view, _losing_ranges(bounded, row), maps)
        else:
            _rewrite_counted(spark, table_sql, columns, f"SELECT * FROM {view}", view_prefix, maps)
        return Applied(inserted, deleted)
    finally:
        stored.unpersist()


def append_delta(
    spark: Any,
    table_sql: str,
    columns: list[str],
    delta_sql: str,
    maps: frozenset[str] = frozenset(),
) -> None:
    """Append a delta known to hold only positive weights (see
    :func:`dyntables.ivm.rules.keeps_inserts_positive`): one job, no consolidation, no
    count (the staged snapshot's summary says how many rows were added)."""
    i = _helper("__i", columns)
    spark.sql(
        f"INSERT INTO {table_sql} SELECT {_written(columns, maps)} FROM "
        f"(SELECT *, explode(sequence(1, {W})) AS {i} FROM ({delta_sql}) _d) _x"
    )


def _checked_count(expr: exp.Expr) -> str:
    return spark_sql(
        exp.If(
            this=exp.LT(this=expr, expression=exp.Literal.number(0)),
            true=raise_error(INCONSISTENT),
            false=expr.copy(),
        )
    )


def _rewrite_counted(
    spark: Any,
    table_sql: str,
    columns: list[str],
    delta_sql: str,
    view_prefix: str,
    maps: frozenset[str] = frozenset(),
) -> Applied:
    """New contents = current rows + delta, counted per value, in one overwrite that
    also reports (as observed metrics) how many copies the delta added and removed."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    cols = ", ".join(back_quoted(c) for c in columns)
    n, d, m, i = (_helper(h, columns) for h in ("_n", "_d", "_m", "__i"))
    counted = spark.sql(
        f"SELECT {cols}, SUM({n}) AS {n}, SUM({d}) AS {d} FROM ("
        f"SELECT {_read(columns, maps)}, CAST(1 AS BIGINT) AS {n}, CAST(0 AS BIGINT) AS {d} FROM {table_sql} "
        f"UNION ALL SELECT {cols}, CAST(0 AS BIGINT), CAST({W} AS BIGINT) FROM ({delta_sql}) _x"
        f") _u GROUP BY {cols}"
    )
    observation = Observation(f"{view_prefix}_counts")
    counted = counted.observe(
        observation,
        F.expr(f"COALESCE(SUM(IF({d} > 0, {d}, 0)), 0)").alias("ins"),
        F.expr(f"COALESCE(SUM(IF({d} < 0, -{d}, 0)), 0)").alias("del"),
    )
    view = f"{view_prefix}_counted"
    counted.createOrReplaceTempView(view)
    try:
        checked = _checked_count(exp.Add(this=exp.column(n), expression=exp.column(d)))
        spark.sql(
            f"INSERT OVERWRITE {table_sql} SELECT {_written(columns, maps)} FROM (SELECT *, explode(sequence(1, {m})) AS {i} FROM "
            f"(SELECT {cols}, {checked} AS {m} FROM {view}) _k WHERE {m} > 0) _e"
        )
    finally:
        forget_view(spark, view)
    counts = observed(observation, ("ins", "del"))
    inserted, deleted = int(counts["ins"]), int(counts["del"])
    return Applied(inserted, deleted, unchanged=inserted == 0 and deleted == 0)


def observed(observation: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The observation's metrics ``names``; Spark's own ``get`` waits for ever if they
    never come, and iterates the whole map through py4j, whose end is a Java exception
    PySpark converts (~15 ms), so the metrics are looked up by name."""
    import threading

    def fetch() -> None:
        jmap = observation._jo.getAsJava()  # blocks until the write reported them
        out.update({name: jmap.get(name) for name in names})

    out: dict[str, Any] = {}
    waiter = threading.Thread(target=fetch, daemon=True)
    waiter.start()
    waiter.join(OBSERVED_TIMEOUT_S)
    if not out:
        raise RuntimeError(f"{DYNTABLES_PREFIX}the rewrite's row counts were not reported")
    return out


def _bounded_columns(fields: Any) -> list[tuple[str, str]]:
    """(name, type) of the delta's columns whose bounds can prune the table's files:
    those with exact literals, and timestamps (carried as microseconds since the epoch,
    so no time zone comes between the value and its literal)."""
    out = []
    for f in fields:
        type_sql = f.dataType.simpleString()
        if f.name != W and (PRUNABLE_TYPES.match(type_sql) or type_sql == "timestamp"):
            out.append((f.name, type_sql))
    return out


def _bounds_items(bounded: list[tuple[str, str]]) -> str:
    """MIN, MAX and NULL count of each column over the values that lose copies, as more
    columns of the counting job (no job of their own)."""
    items = []
    for k, (name, type_sql) in enumerate(bounded):
        c = back_quoted(name)
        if type_sql in AS_NUMBERS:
            c = f"{AS_NUMBERS[type_sql][0]}({c})"
        items.append(
            f", MIN(IF({W} < 0, {c}, NULL)) AS _lo{k}, MAX(IF({W} < 0, {c}, NULL)) AS _hi{k}, "
            f"COUNT_IF({W} < 0 AND {c} IS NULL) AS _nl{k}"
        )
    return "".join(items)


def _losing_ranges(bounded: list[tuple[str, str]], row: Any) -> str | None:
    """A filter on the table (alias ``t``) that every row equal to a value losing copies
    passes: each column within those values' MIN..MAX (or NULL where one of them is).
    Exact, and pushed to Iceberg as literals, so a MERGE reads and rewrites only the
    files whose column bounds overlap the change (recent orders, one day's partition)
    instead of the whole table."""
    parts: list[exp.Expr] = []
    for k, (name, type_sql) in enumerate(bounded):
        column = exp.column(name, "t", quoted=True)
        lo, hi, nulls = row[f"_lo{k}"], row[f"_hi{k}"], int(row[f"_nl{k}"])
        is_null = exp.Is(this=column.copy(), expression=exp.null())
        if lo is None:  # every such value is NULL here
            parts.append(is_null)
            continue
        low: exp.Expr
        high: exp.Expr
        if type_sql in AS_NUMBERS:
            low, high = number_literal(lo, type_sql), number_literal(hi, type_sql)
        else:
            low, high = literal(lo, type_sql), literal(hi, type_sql)
        between = exp.Between(this=column.copy(), low=low, high=high)
        parts.append(exp.paren(exp.or_(between, is_null)) if nulls else between)
    return spark_sql(exp.and_(*parts)) if parts else None


@dataclass(frozen=True)
class Partitioning:
    """The table's partition fields, (source column, Iceberg transform) each, and
    ``count_files(column, transform, values)``: the data files in the partitions whose
    transform of the column is one of the values (None: the NULL partition)."""

    fields: tuple[tuple[str, str], ...]
    count_files: Callable[[str, str, list[int | None]], int]


@dataclass(frozen=True)
class _Field:
    """A partition field the delta's rows can be sorted into: ``unit`` is the SQL giving
    a row's partition as Iceberg numbers it (hours, days, months or years since 1970,
    or the value itself; days for a date)."""

    name: str  # the delta's column
    source: str  # the column as the table's spec names it
    transform: str
    type_sql: str

    @property
    def unit(self) -> str:
        c = back_quoted(self.name)
        if self.type_sql == "date":
            day = f"unix_date({c})"
        elif self.type_sql == "timestamp":
            if self.transform == "hour":
                return f"CAST(floor(unix_micros({c}) / 3600000000) AS BIGINT)"
            day = f"CAST(floor(unix_micros({c}) / 86400000000) AS INT)"
        else:  # an integral identity
            return f"CAST({c} AS BIGINT)"
        if self.transform == "month":
            d = f"date_from_unix_date({day})"
            return f"((year({d}) - 1970) * 12 + month({d}) - 1)"
        if self.transform == "year":
            return f"(year(date_from_unix_date({day})) - 1970)"
        return day


def _partition_field(fields: Any, spec: tuple[tuple[str, str], ...]) -> _Field | None:
    """The first partition field that is a time transform of a timestamp or date column
    of the delta, or the identity of a date or integral one."""
    types = {f.name.lower(): (f.name, f.dataType.simpleString()) for f in fields}
    for source, transform in spec:
        name, type_sql = types.get(source.lower(), (None, None))
        if name is None or type_sql is None:
            continue
        timed = type_sql in ("timestamp", "date") and transform in _TIME_TRANSFORMS
        if timed and not (type_sql == "date" and transform == "hour"):
            return _Field(name, source, transform, type_sql)
        if transform == "identity" and (type_sql == "date" or type_sql in _INTEGRAL):
            return _Field(name, source, transform, type_sql)
    return None


def _units_items(field: _Field | None) -> str:
    """The partitions of the values that lose copies (up to one more than may be
    overwritten: the job only has to tell "too many"), as more columns of the counting
    job."""
    if field is None:
        return ""
    return (
        f", slice(array_sort(collect_set(IF({W} < 0, {field.unit}, NULL))), 1, "
        f"{OVERWRITE_MAX_PARTITIONS + 1}) AS _pu, "
        f"COUNT_IF({W} < 0 AND {back_quoted(field.name)} IS NULL) AS _pn"
    )


def _unit_bounds(field: _Field, unit: int) -> tuple[str, str]:
    """The literals bounding one partition, ``[low, high)``, on the column's own type:
    instants in UTC for a timestamp (Iceberg's transforms are in UTC); a date's identity
    partition is its day. Computed as day and microsecond numbers, not Python dates,
    which stop at year 9999 where Spark's go on."""
    if field.transform == "hour":
        hour = 3_600_000_000
        return f"timestamp_micros({unit * hour})", f"timestamp_micros({(unit + 1) * hour})"
    if field.transform == "month":
        days = [_epoch_day(1970 + u // 12, u % 12 + 1) for u in (unit, unit + 1)]
    elif field.transform == "year":
        days = [_epoch_day(1970 + u, 1) for u in (unit, unit + 1)]
    else:
        days = [unit, unit + 1]
    if field.type_sql == "date":
        return f"date_from_unix_date({days[0]})", f"date_from_unix_date({days[1]})"
    day = 86_400_000_000
    return f"timestamp_micros({days[0] * day})", f"timestamp_micros({days[1] * day})"


def _epoch_day(year: int, month: int) -> int:
    """Days from 1970-01-01 to the first of ``month`` in ``year``, in the proleptic
    Gregorian calendar Spark and Iceberg use (H. Hinnant's days_from_civil)."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _overwrite_condition(
    field: _Field, row: Any, negatives: int, partitioning: Partitioning
) -> str | None:
    """A filter selecting whole partitions, exactly those holding the values that lose
    copies (every copy of such a value lies in its one partition); None when a MERGE is
    the better way (too many partitions, or many more files in them than values)."""
    units: list[int] = sorted(int(u) for u in (row["_pu"] or []))
    nulls = int(row["_pn"]) > 0
    if len(units) + nulls > OVERWRITE_MAX_PARTITIONS:
        return None
    values: list[int | None] = [*units, *([None] if nulls else [])]
    files = partitioning.count_files(field.source, field.transform, values)
    if files > negatives * OVERWRITE_FILES_PER_VALUE:
        return None
    c = back_quoted(field.name)
    parts = []
    if field.transform == "identity" and field.type_sql != "date":  # an integral column
        parts = [f"{c} IN ({', '.join(str(u) for u in units)})"] if units else []
    else:
        runs: list[list[int]] = []
        for u in units:  # adjacent partitions make one range
            if runs and runs[-1][1] == u - 1:
                runs[-1][1] = u
            else:
                runs.append([u, u])
        for lo, hi in runs:
            low, high = _unit_bounds(field, lo)[0], _unit_bounds(field, hi)[1]
            parts.append(f"({c} >= {low} AND {c} < {high})")
    if nulls:
        parts.append(f"{c} IS NULL")
    return " OR ".join(parts) if parts else None


def _overwrite(
    spark: Any,
    table_sql: str,
    columns: list[str],
    view: str,
    condition: str,
    maps: frozenset[str] = frozenset(),
) -> None:
    """The partitions ``condition`` selects, rewritten with their rows plus the delta's,
    counted per value; the delta's rows outside them (values that only gain copies) are
    added in the same commit."""
    from pyspark.sql import functions as F

    cols = ", ".join(back_quoted(c) for c in columns)
    n, m, i = (_helper(h, columns) for h in ("_n", "_m", "__i"))
    checked = _checked_count(exp.column(n))
    rows = spark.sql(
        f"SELECT {_written(columns, maps)} FROM (SELECT *, explode(sequence(1, {m})) AS {i} FROM ("
        f"SELECT {cols}, {checked} AS {m} FROM ("
        f"SELECT {cols}, SUM({n}) AS {n} FROM ("
        f"SELECT {_read(columns, maps)}, CAST(1 AS BIGINT) AS {n} FROM {table_sql} WHERE {condition} "
        f"UNION ALL SELECT {cols}, {W} FROM {view}) _u GROUP BY {cols}) _s) _k WHERE {m} > 0) _e"
    )
    rows.writeTo(table_sql).overwrite(F.expr(condition))


def _merge(
    spark: Any,
    table_sql: str,
    columns: list[str],
    view: str,
    ranges: str | None = None,
    maps: frozenset[str] = frozenset(),
) -> None:
    """Values that lose copies: deleted and inserted back (current - n) times; values
    that gain copies: inserted. ``ranges`` (see :func:`_losing_ranges`) limits which of
    the table's rows are compared."""
    where = f" WHERE {ranges}" if ranges else ""
    cols = ", ".join(back_quoted(c) for c in columns)
    one, cur, n, i, op = (_helper(h, columns) for h in ("_one", "_cur", "_n", "__i", "_op"))
    match = spark_sql(
        null_safe_eq_all(
            [exp.column(c, "v") for c in columns], [exp.column(c, "t") for c in columns]
        )
    )
    # current copies of every value that loses copies
    current = (
        f"SELECT v.*, COUNT(t.{one}) AS {cur} FROM (SELECT * FROM {view} WHERE {W} < 0) v "
        f"LEFT JOIN (SELECT {_read(columns, maps)}, 1 AS {one} FROM {table_sql} t{where}) t "
        f"ON {match} GROUP BY ALL"
    )
    checked = _checked_count(exp.Add(this=exp.column(cur), expression=exp.column(W)))
    source = (
        f"SELECT {cols}, 'D' AS {op} FROM {view} WHERE {W} < 0 "
        f"UNION ALL SELECT {cols}, 'I' AS {op} FROM (SELECT *, explode(sequence(1, {n})) AS {i} FROM "
        f"(SELECT *, {checked} AS {n} FROM ({current}) _c) _k WHERE {n} > 0) _e "
        f"UNION ALL SELECT {cols}, 'I' AS {op} FROM (SELECT *, explode(sequence(1, {W})) AS {i} FROM {view} "
        f"WHERE {W} > 0) _p"
    )
    target = [
        exp.Anonymous(this="map_entries", expressions=[exp.column(c, "t", quoted=True)])
        if c in maps
        else exp.column(c, "t")
        for c in columns
    ]
    on = spark_sql(null_safe_eq_all(target, [exp.column(c, "s") for c in columns]))
    names = ", ".join(back_quoted(c) for c in columns)
    values = _written(columns, maps, "s")
    spark.sql(
        f"MERGE INTO {table_sql} t USING ({source}) s ON s.{op} = 'D' AND {on}{' AND ' + ranges if ranges else ''} "
        f"WHEN MATCHED THEN DELETE WHEN NOT MATCHED AND s.{op} = 'I' THEN INSERT ({names}) VALUES ({values})"
    )
