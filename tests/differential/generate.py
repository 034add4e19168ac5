"""Random schemas, queries and change streams for the differential suite. Pure: no Spark.

Everything is drawn through a :class:`Chooser`, a source of bounded integers:

* :class:`RandomChooser` replays a seed (``python -m tests.differential.fuzz --seed N``),
* :class:`HypothesisChooser` draws from hypothesis, so a failing example shrinks:
  every choice shrinks towards 0, and every list here is ordered simplest first, so a
  shrunk scenario has fewer tables, rows, joins, mutations and optional features.

A :class:`Scenario` is a list of steps (SQL statements, dynamic table definitions,
refreshes and checks) over short table names (``t0``, ``dt0``); the harness renames
them per run. :meth:`Scenario.to_text` / :func:`parse_scenario` are the regression
corpus format (``tests/differential/scenarios/*.scn``), documented in its README.

Queries are built to be deterministic (the oracle must have one right answer):
ROW_NUMBER is ordered by every output column (so tied rows are identical), DOUBLE
values computed by aggregation are never compared, grouped or ordered on, and
``ORDER BY ... LIMIT`` orders by every output column.
"""

from __future__ import annotations

import functools
import itertools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

T = TypeVar("T")

# recomputed calls wrapped in a scalar function: (start, end) around the aggregate call's
# own closing parenthesis, where a FILTER must go
WRAPPED_CALLS = (("CAST(", " AS INT)"), ("SIZE(", ")"), ("ARRAY_JOIN(", "), ',')"))


# -- choosers -------------------------------------------------------------------------------


class Chooser(Protocol):
    def int(self, lo: int, hi: int) -> int: ...


class RandomChooser:
    """Seeded choices; the same seed gives the same scenario."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self._rng.randint(lo, hi)


class HypothesisChooser:
    """Choices drawn from hypothesis (``draw`` of ``st.composite`` or ``data.draw``)."""

    def __init__(self, draw: Callable[..., int]) -> None:
        from hypothesis import strategies as st

        self._draw = draw
        self._st = st

    def int(self, lo: int, hi: int) -> int:
        return self._draw(self._st.integers(lo, hi))


def pick(ch: Chooser, seq: Sequence[T]) -> T:
    """One element; shrinks towards the first."""
    return seq[ch.int(0, len(seq) - 1)]


def chance(ch: Chooser, p: float) -> bool:
    """True with probability ``p``; shrinks towards False (the feature left out)."""
    return ch.int(0, 999) >= round((1 - p) * 1000)


def subset(ch: Chooser, seq: Sequence[T], lo: int, hi: int) -> list[T]:
    """``lo``..``hi`` distinct elements, in the order of ``seq``."""
    pool = list(seq)
    n = ch.int(lo, min(hi, len(pool)))
    chosen: list[T] = []
    for _ in range(n):
        chosen.append(pool.pop(ch.int(0, len(pool) - 1)))
    return [x for x in seq if x in chosen]


# -- types, columns, literals ----------------------------------------------------------------

INT, BIGINT, DEC, DBL, STR, DATE, TS = (
    "INT",
    "BIGINT",
    "DECIMAL(10,2)",
    "DOUBLE",
    "STRING",
    "DATE",
    "TIMESTAMP",
)
INTEGRAL = (INT, BIGINT)
ORDERABLE = (INT, BIGINT, DEC, DBL, STR, DATE, TS)
# a nested column: selected, grouped, ranked and compared whole, its fields read in
# expressions (``l0.st.a`` an INT, ``l0.st.b`` a STRING)
ST = "STRUCT<a: INT, b: STRING>"
ST_FIELDS = (("a", INT), ("b", STR))
# a MAP column: never selected or compared whole (Spark cannot group it), read through
# what takes it apart (a value at a key, its size, keys and JSON, a LATERAL VIEW of it);
# ``m['a']`` is a key: its values are the keys' (or NULL, also where 'a' is absent)
MP = "MAP<STRING, INT>"


# a scope's column read out of a MAP column (``l0.m['a']``, ``size(l0.m)``)
MAP_READ = re.compile(r"\bl\d+\.m\b")


def unmapped(scope: Sequence[Ref]) -> list[Ref]:
    """``scope`` without what is read out of a MAP: Spark refuses a subquery correlated
    with a MAP (UNSUPPORTED_CORRELATED_REFERENCE_DATA_TYPE), also through a value of it."""
    return [r for r in scope if not MAP_READ.search(r.sql)] or list(scope)


def map_reads(m: str) -> list[Ref]:
    """The scope's columns read out of the MAP column ``m`` (``l0.m``)."""
    return [
        Ref(f"{m}['a']", INT, True),
        Ref(f"element_at({m}, 'b')", INT),
        Ref(f"size({m})", INT),
        Ref(f"to_json({m})", STR),
        Ref(f"array_join(map_keys({m}), ',')", STR),
    ]


def same_kind(a: str, b: str) -> bool:
    return a == b or (a in INTEGRAL and b in INTEGRAL)


@dataclass(frozen=True)
class Col:
    name: str
    type: str
    key: bool = False  # a join/group key with a tiny domain (0..3 and NULL)
    exact: bool = True  # False: a DOUBLE computed by aggregation; never compared or grouped on


MERGE_ON_READ = (
    "TBLPROPERTIES ('write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
    "'write.merge.mode'='merge-on-read')"
)


@dataclass(frozen=True)
class Table:
    name: str
    cols: tuple[Col, ...]
    options: str = ""  # e.g. PARTITIONED BY (k), or merge-on-read deletes (delete files)

    def ddl(self) -> str:
        cols = ", ".join(f"{c.name} {c.type}" for c in self.cols)
        return f"CREATE TABLE {self.name} ({cols})" + (f" {self.options}" if self.options else "")


# optional columns of a source table, simplest first; ``k INT`` is always there
OPTIONAL_COLS = (
    Col("n", INT),
    Col("s", STR),
    Col("j", BIGINT, key=True),
    Col("d", DEC),
    Col("x", DBL),
    Col("dd", DATE),
    Col("ts", TS),
    Col("st", ST),
    Col("m", MP),
)

KEY_VALUES = ("1", "2", "0", "3", "NULL")
VALUES: dict[str, tuple[str, ...]] = {
    INT: ("1", "0", "2", "-1", "5", "NULL", "9"),
    BIGINT: ("1", "2", "0", "3", "NULL"),
    DEC: ("1.50", "0.00", "2.25", "-1.25", "NULL", "10.10", "3.33"),
    DBL: (
        "1.5",
        "0.0",
        "0.1",
        "2.25",
        "NULL",
        "-3.5",
        "0.3",
        "CAST('NaN' AS DOUBLE)",
        "CAST('-Infinity' AS DOUBLE)",
        "-0.0",
    ),
    STR: ("'a'", "'b'", "''", "'ab'", "NULL", "'B'"),
    DATE: (
        "DATE '2024-02-29'",
        "DATE '2024-01-31'",
        "DATE '2023-12-31'",
        "NULL",
        "DATE '2024-03-01'",
    ),
    TS: (
        "TIMESTAMP '2024-01-31 23:30:00'",
        "TIMESTAMP '2024-02-29 00:00:00'",
        "NULL",
        "TIMESTAMP '2023-12-31 12:15:30'",
    ),
    MP: (
        "map('a', 1, 'b', 2)",
        "map('b', 0, 'a', 2)",
        "map('a', NULL, 'c', 3)",
        "NULL",
        "map()",
        "map('b', 1)",
        "map('a', 3)",
    ),
    ST: (
        "named_struct('a', 1, 'b', 'a')",
        "named_struct('a', NULL, 'b', 'b')",
        "NULL",
        "named_struct('a', 2, 'b', NULL)",
        "named_struct('a', 0, 'b', 'a')",
    ),
}


# Doubles whose sums depend on the order of additions (1 + 2 + 1e17 - 1e17 is 0 or 3):
# Spark's own SUM is not exact either, so the oracle and an equally right dynamic table
# may differ by more than rounding. Left out unless asked for
# (``python -m tests.differential.fuzz --ill-conditioned``).
EXTREME_VALUES: dict[str, tuple[str, ...]] = {
    **VALUES,
    DBL: (*VALUES[DBL], "1e17", "-1e17"),
}


def value(ch: Chooser, col: Col, pools: dict[str, tuple[str, ...]] = VALUES) -> str:
    """A literal for a column in INSERT/UPDATE/MERGE (Spark casts it on write)."""
    return pick(ch, KEY_VALUES if col.key else pools[col.type])


def typed_literal(ch: Chooser, typ: str, allow_null: bool = False) -> str:
    """A literal of exactly ``typ`` for use inside a query expression."""
    raw = pick(ch, [v for v in VALUES[typ] if v != "NULL"] + (["NULL"] if allow_null else []))
    if raw == "NULL":
        return f"CAST(NULL AS {typ})"
    if typ in (DEC, DBL):
        return f"CAST({raw} AS {typ})"
    return raw


# -- query building ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """A column reference in scope: its SQL, type, and whether it is a key / exact."""

    sql: str
    type: str
    key: bool = False
    exact: bool = True


@dataclass
class Rel:
    from_sql: str
    scope: list[Ref]
    tables: set[str]
    tags: set[str] = field(default_factory=set)
    grammar: bool = True
    where: list[str] = field(default_factory=list)  # conditions of comma / CROSS joins

    def where_sql(self, extra: Sequence[str] = ()) -> str:
        conj = [*self.where, *extra]
        return f" WHERE {' AND '.join(conj)}" if conj else ""


@dataclass
class Query:
    sql: str
    cols: list[Col]
    tags: set[str]
    tables: set[str]
    grammar: bool = True  # False: built on purpose outside the compiler's grammar


SHAPES = (
    "filter",
    "inner_join",
    "outer_join",
    "semi_join",
    "anti_join",
    "group_by",
    "global_agg",
    "distinct",
    "union_all",
    "union",
    "window_dedup",
    "window_rank",
    "window_agg",
    "subquery",
    "cte",
    "not_in",
    "scalar_subquery",
    "grouping_sets",
    "top_n",
    "dt_over_dt",
    "pivot",
    "rejected",
)

REJECTED_KINDS = (
    "tablesample",
    "key_types",
    "outer_non_equi",
)


class QueryGen:
    def __init__(self, ch: Chooser, tables: Sequence[Table]) -> None:
        self.ch = ch
        self.tables = list(tables)
        self._ids = itertools.count()

    def alias(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    # -- expressions -------------------------------------------------------------------------
    def cols_of(self, scope: Sequence[Ref], typ: str) -> list[Ref]:
        return [r for r in scope if r.exact and same_kind(r.type, typ)]

    def atom(self, scope: Sequence[Ref], typ: str) -> str:
        cols = self.cols_of(scope, typ)
        if cols and not chance(self.ch, 0.15):
            return pick(self.ch, cols).sql
        return typed_literal(self.ch, typ)

    def expr(self, scope: Sequence[Ref], typ: str, depth: int = 1) -> str:
        """An expression of type ``typ`` over ``scope``."""
        ch = self.ch
        if depth <= 0 or not chance(ch, 0.45):
            return self.atom(scope, typ)
        d = depth - 1
        sub = lambda t: self.expr(scope, t, d)  # noqa: E731
        if typ in INTEGRAL:
            forms: list[Callable[[], str]] = [
                lambda: f"({sub(INT)} + {sub(INT)})",
                lambda: f"coalesce({sub(INT)}, 0)",
                lambda: f"({sub(INT)} * 2)",
                lambda: f"({sub(INT)} - {sub(INT)})",
                lambda: f"abs({sub(INT)})",
                lambda: f"year({sub(DATE)})",
                lambda: f"month({sub(TS)})",
                lambda: f"day({sub(DATE)})",
                lambda: f"hour({sub(TS)})",
                lambda: f"minute({sub(TS)})",
                lambda: f"datediff({sub(DATE)}, DATE '2024-01-01')",
                lambda: f"dayofweek({sub(DATE)})",
                lambda: f"length({sub(STR)})",
                lambda: f"CAST({sub(DEC)} AS INT)",
                lambda: f"CAST({sub(DBL)} AS INT)",
                lambda: f"pmod({sub(INT)}, 3)",
                lambda: f"CASE WHEN {self.pred(scope, d)} THEN {sub(INT)} ELSE {sub(INT)} END",
            ]
        elif typ == DEC:
            forms = [
                lambda: f"({sub(DEC)} + {sub(DEC)})",
                lambda: f"coalesce({sub(DEC)}, CAST(0 AS DECIMAL(10,2)))",
                lambda: f"({sub(DEC)} * 2)",
                lambda: f"round({sub(DEC)}, 1)",
                lambda: f"CAST({sub(INT)} AS DECIMAL(10,2))",
                lambda: f"abs({sub(DEC)})",
                lambda: f"CASE WHEN {self.pred(scope, d)} THEN {sub(DEC)} ELSE {sub(DEC)} END",
            ]
        elif typ == DBL:
            forms = [
                lambda: f"({sub(DBL)} + {sub(DBL)})",
                lambda: f"coalesce({sub(DBL)}, CAST(0 AS DOUBLE))",
                lambda: f"({sub(DBL)} * 0.5)",
                lambda: f"CAST({sub(INT)} AS DOUBLE)",
                lambda: f"CAST({sub(DEC)} AS DOUBLE)",
                lambda: f"abs({sub(DBL)})",
                lambda: f"CASE WHEN {self.pred(scope, d)} THEN {sub(DBL)} ELSE {sub(DBL)} END",
            ]
        elif typ == STR:
            forms = [
                lambda: f"upper({sub(STR)})",
                lambda: f"concat({sub(STR)}, '_')",
                lambda: f"coalesce({sub(STR)}, 'none')",
                lambda: f"lower({sub(STR)})",
                lambda: f"concat({sub(STR)}, CAST({sub(INT)} AS STRING))",
                lambda: f"substr({sub(STR)}, 1, 1)",
                lambda: f"CAST({sub(DATE)} AS STRING)",
                lambda: f"date_format({sub(TS)}, 'yyyy-MM HH')",
                lambda: f"CASE WHEN {self.pred(scope, d)} THEN {sub(STR)} ELSE {sub(STR)} END",
            ]
        elif typ == DATE:
            forms = [
                lambda: f"date_add({sub(DATE)}, 1)",
                lambda: f"CAST({sub(TS)} AS DATE)",
                lambda: f"coalesce({sub(DATE)}, DATE '2024-01-01')",
                lambda: f"last_day({sub(DATE)})",
                lambda: f"trunc({sub(DATE)}, 'MM')",
                lambda: f"to_date({sub(TS)})",
            ]
        else:  # TIMESTAMP
            forms = [
                lambda: f"coalesce({sub(TS)}, TIMESTAMP '2024-01-01 00:00:00')",
                lambda: f"date_trunc('{pick(ch, ['HOUR', 'DAY', 'MONTH'])}', {sub(TS)})",
                lambda: f"CAST({sub(DATE)} AS TIMESTAMP)",
                lambda: f"({sub(TS)} + INTERVAL 90 MINUTES)",
            ]
        return pick(ch, forms)()

    def any_type(self, scope: Sequence[Ref], types: Sequence[str] = ORDERABLE) -> str:
        """A type the scope has an exact column of (else INT)."""
        have = [t for t in types if self.cols_of(scope, t)]
        return pick(self.ch, have) if have else INT

    @staticmethod
    def compared(typ: str, left: str, op: str, right: str) -> str:
        """``left op right``; for DOUBLE, each side ``+ 0D`` so that Spark cannot push it
        to Iceberg as ``column op literal``. Iceberg skips a file whose non-NaN
        values lie outside the range, also when it holds NaNs (its bounds leave NaN out,
        apache/iceberg#9130), where Spark orders NaN above every number: Spark's own
        answer to ``x > 0.5`` then depends on how the rows lie in files, and a compaction
        changes it (README, Known limitations)."""
        if typ == DBL and op != "<>":
            left, right = f"({left} + 0D)", f"({right} + 0D)"
        return f"{left} {op} {right}"

    def pred(self, scope: Sequence[Ref], depth: int = 1) -> str:
        ch = self.ch
        typ = self.any_type(scope)
        forms: list[Callable[[], str]] = [
            lambda: f"{self.atom(scope, typ)} = {typed_literal(ch, typ)}",
            lambda: f"{self.atom(scope, typ)} IS NULL",
            lambda: f"{self.atom(scope, typ)} IS NOT NULL",
            lambda: self.compared(
                typ,
                self.expr(scope, typ, depth),
                pick(ch, ["<", ">", "<=", ">=", "<>"]),
                self.expr(scope, typ, depth),
            ),
            lambda: f"{self.atom(scope, typ)} <=> {self.atom(scope, typ)}",
        ]
        if self.cols_of(scope, INT):
            forms += [
                lambda: f"{self.atom(scope, INT)} IN (1, 2)",
                lambda: f"{self.atom(scope, INT)} BETWEEN 0 AND 1",
            ]
        if self.cols_of(scope, STR):
            forms.append(lambda: f"{self.atom(scope, STR)} LIKE 'a%'")
        if depth > 0:
            forms += [
                lambda: f"({self.pred(scope, depth - 1)} AND {self.pred(scope, depth - 1)})",
                lambda: f"({self.pred(scope, depth - 1)} OR {self.pred(scope, depth - 1)})",
                lambda: f"NOT ({self.pred(scope, depth - 1)})",
            ]
        return pick(ch, forms)()

    def projection(
        self, scope: Sequence[Ref], lo: int = 1, hi: int = 4, prefix: str = "c"
    ) -> tuple[list[str], list[Col]]:
        """SELECT items ``expr AS c<i>``: at least one plain column, then expressions."""
        ch = self.ch
        items: list[str] = []
        cols: list[Col] = []
        exact = [r for r in scope if r.exact]
        for i in range(ch.int(lo, hi)):
            name = f"{prefix}{i}"
            if exact and (i == 0 or chance(ch, 0.4)):
                ref = pick(ch, exact)
                items.append(f"{ref.sql} AS {name}")
                cols.append(Col(name, ref.type, ref.key))
                continue
            typ = pick(ch, ORDERABLE)
            items.append(f"{self.expr(scope, typ, 2)} AS {name}")
            cols.append(Col(name, typ))
        return items, cols

    def with_map(self, rel: Rel, items: list[str], cols: list[Col]) -> None:
        """Maybe one more item, ``... AS m``: a MAP the dynamic table holds, passed on
        whole from a source, built from one, or built from the row (a query's last
        projection only: nothing compares or groups it)."""
        ch, scope = self.ch, rel.scope
        if not chance(ch, 0.25):
            return
        rel.tags.add("map_output")
        maps = [r.sql[: -len("['a']")] for r in scope if r.sql.endswith(".m['a']")]
        forms = [lambda: f"map('n', {self.expr(scope, INT, 1)})"]
        if maps:
            m = pick(ch, maps)
            forms += [
                lambda: m,
                lambda: m,
                lambda: f"map_concat({m}, map('zz', {self.atom(scope, INT)}))",
                lambda: f"map_filter({m}, (x, y) -> y > 1)",
                lambda: f"coalesce({m}, map('a', 0))",
            ]
        items.append(f"{pick(ch, forms)()} AS m")
        cols.append(Col("m", MP))

    # -- FROM ----------------------------------------------------------------------------------
    def scan(self, table: Table) -> Rel:
        a = self.alias("l")
        scope = [Ref(f"{a}.{c.name}", c.type, c.key, c.exact) for c in table.cols if c.type != MP]
        scope += [
            Ref(f"{a}.{c.name}.{f}", t) for c in table.cols if c.type == ST for f, t in ST_FIELDS
        ]
        scope += [r for c in table.cols if c.type == MP for r in map_reads(f"{a}.{c.name}")]
        return Rel(f"{table.name} AS {a}", scope, {table.name})

    def star(self, rel: Rel) -> None:
        """A scan's table as a derived table of all its columns (a staging model's
        ``WITH src AS (SELECT * FROM ...)``), maybe filtered: the same scope, every
        column (a MAP too) passed on whole by a projection."""
        table, alias = rel.from_sql.split(" AS ")
        first = rel.scope[0].sql.split(".", 1)[1]  # k, or an upstream dynamic table's c0
        where = pick(self.ch, ["", f" WHERE {first} IS NOT NULL"])
        rel.from_sql = f"(SELECT * FROM {table}{where}) AS {alias}"
        rel.tags.add("star")

    def constant(self) -> Rel:
        """Rows of literals joined like a table (an inline mapping table): VALUES or
        SELECTs without FROM, with a duplicate and NULLs; the same at every snapshot."""
        a = self.alias("l")
        scope = [Ref(f"{a}.k", INT, True), Ref(f"{a}.s", STR)]
        if chance(self.ch, 0.5):
            rows = "VALUES (0, 'a'), (1, NULL), (NULL, 'c'), (2, 'a'), (2, 'b')"
            return Rel(f"({rows}) AS {a}(k, s)", scope, set(), {"constant"})
        rows = "SELECT 1 AS k, 'x' AS s UNION ALL SELECT 3, 'y' UNION ALL SELECT NULL, 'z'"
        return Rel(f"({rows}) AS {a}", scope, set(), {"constant"})

    def key_of(self, scope: Sequence[Ref]) -> Ref:
        """A join / partition key: an integral key column, else an integral column, else
        ``pmod(hash(col), 4)`` (an INT with a tiny domain, comparable with any key)."""
        keys = [r for r in scope if r.key and r.exact] or [
            r for r in scope if r.type in INTEGRAL and r.exact
        ]
        if keys:
            return pick(self.ch, keys)
        ref = pick(self.ch, [r for r in scope if r.exact] or list(scope))
        # typed, so that the compiler can tell the join compares integers
        return Ref(f"CAST(pmod(hash({ref.sql}), 4) AS INT)", INT, True)

    def from_clause(
        self, max_tables: int = 3, outer: bool = True, first: Table | None = None
    ) -> Rel:
        ch = self.ch
        rel = self.scan(first or pick(ch, self.tables))
        if chance(ch, 0.08):
            self.star(rel)
        for _ in range(ch.int(1, max_tables) - 1):
            table = pick(ch, self.tables)
            right = self.constant() if chance(ch, 0.08) else self.scan(table)
            if right.tables and chance(ch, 0.06):
                self.star(right)
            kinds = (
                [
                    "JOIN",
                    "LEFT JOIN",
                    "RIGHT JOIN",
                    "FULL JOIN",
                    "LEFT SEMI JOIN",
                    "LEFT ANTI JOIN",
                    "CROSS JOIN",
                    ",",
                ]
                if outer
                else ["JOIN", "CROSS JOIN", ","]
            )
            kind = pick(ch, kinds)
            lk, rk = self.key_of(rel.scope), self.key_of(right.scope)
            left_key = lk.sql
            if chance(ch, 0.1):  # a key expression: NULL keys match 0
                left_key = f"coalesce({lk.sql}, 0)"
                rel.tags.add("join_expression")
            cond = f"{left_key} = {rk.sql}"
            if chance(ch, 0.08):  # NULL keys do match
                cond = f"{left_key} <=> {rk.sql}"
                rel.tags.add("null_safe_join")
            keyless = ("JOIN", "LEFT JOIN", "RIGHT JOIN", "LEFT SEMI JOIN", "LEFT ANTI JOIN")
            if kind in keyless and chance(ch, 0.1):  # no equality at all (a band join)
                cond = f"{lk.sql} {pick(ch, ['<', '<=', '<>'])} {rk.sql}"
                rel.tags.add("non_equi_join")
            if chance(ch, 0.2):
                lk2, rk2 = self.key_of(rel.scope), self.key_of(right.scope)
                cond += f" AND {lk2.sql} = {rk2.sql}"
            if chance(ch, 0.15):
                if kind == "JOIN":
                    cond += f" AND {self.pred(rel.scope + right.scope, 0)}"
                    rel.tags.add("join_residual")
                elif kind in ("LEFT JOIN", "LEFT SEMI JOIN", "LEFT ANTI JOIN") and chance(ch, 0.5):
                    cond += f" AND {self.pred(right.scope, 0)}"  # right side only: pushed below the join
                    rel.tags.add("join_residual")
                elif kind not in ("CROSS JOIN", ","):
                    # over both sides: the rows of the keys a change touches are matched again
                    typ = self.any_type(rel.scope + right.scope)
                    both = f"{self.atom(rel.scope, typ)} {pick(ch, ['<', '<=', '<>', '>'])} {self.atom(right.scope, typ)}"
                    cond += f" AND {both}"
                    rel.tags |= {"join_residual", "residual_both_sides"}
            if table.name in right.tables & rel.tables:
                rel.tags.add("self_join")
            rel.tags.add(
                {
                    "JOIN": "inner_join",
                    "LEFT JOIN": "left_join",
                    "RIGHT JOIN": "right_join",
                    "FULL JOIN": "full_join",
                    "LEFT SEMI JOIN": "semi_join",
                    "LEFT ANTI JOIN": "anti_join",
                    "CROSS JOIN": "cross_join",
                    ",": "cross_join",
                }[kind]
            )
            if kind == ",":
                from_sql = f"{rel.from_sql}, {right.from_sql}"
            elif kind == "CROSS JOIN":
                from_sql = f"{rel.from_sql} CROSS JOIN {right.from_sql}"
            else:
                from_sql = f"{rel.from_sql} {kind} {right.from_sql} ON {cond}"
            scope = rel.scope if "SEMI" in kind or "ANTI" in kind else rel.scope + right.scope
            rel = Rel(
                from_sql,
                scope,
                rel.tables | right.tables,
                rel.tags | right.tags,
                rel.grammar,
                list(rel.where),
            )
            if kind in (",", "CROSS JOIN"):
                rel.where.append(cond)  # the join condition, in WHERE
        return rel

    def where(self, rel: Rel, semi: bool = True) -> str:
        """A WHERE clause (may be empty) with plain predicates and EXISTS / IN subqueries."""
        ch = self.ch
        conj: list[str] = []
        if chance(ch, 0.6):
            conj.append(self.pred(rel.scope, 1))
            rel.tags.add("filter")
        if semi and chance(ch, 0.25):
            conj.append(self.semi(rel, pick(ch, ["exists", "in", "not_exists", "not_in"])))
        if semi and chance(ch, 0.08):
            conj.append(self.compared_with_scalar(rel))
        if semi and chance(ch, 0.06):  # counted, not a semi join (Spark: equalities only)
            kind = pick(ch, ["exists", "in", "not_exists", "not_in"])
            conj.append(f"({self.pred(rel.scope, 0)} OR {self.semi(rel, kind, equi_only=True)})")
            rel.tags.add("truth_subquery")
        return rel.where_sql(conj)

    def compared_with_scalar(self, rel: Rel) -> str:
        sql, typ, _ = self.scalar(rel)
        op = pick(self.ch, ["<", ">", "<=", ">=", "=", "<>"])
        return f"{self.atom(rel.scope, typ)} {op} {sql}"

    def scalar(self, rel: Rel, correlated: bool | None = None) -> tuple[str, str, bool]:
        """(SQL, type, exact) of a scalar subquery aggregating a table: uncorrelated (one
        row, even over no rows), or correlated with ``rel`` by equalities or comparisons
        (no matching rows: COUNT 0, anything else NULL)."""
        ch = self.ch
        inner = self.scan(pick(ch, self.tables))
        rel.tables |= inner.tables
        rel.tags.add("scalar_subquery")
        call, typ, exact = self.agg_call(inner.scope, rel.tags)
        if typ in INTEGRAL and chance(ch, 0.15):
            call = f"({call} + 1)"  # a COUNT over no rows is 0, so this is 1 there
        conj: list[str] = []
        if correlated if correlated is not None else chance(ch, 0.6):
            rel.tags.add("correlated_subquery")
            for _ in range(1 + chance(ch, 0.2)):
                op = "="
                if chance(ch, 0.3):  # no inner key: aggregated per distinct outer value
                    rel.tags.add("correlated_by_range")
                    op = pick(ch, ["<", ">=", "<>", "<=>"])
                outer = self.key_of(unmapped(rel.scope)).sql
                conj.append(f"{self.key_of(inner.scope).sql} {op} {outer}")
        if chance(ch, 0.4):
            conj.append(self.pred(inner.scope, 0))
        where = f" WHERE {' AND '.join(conj)}" if conj else ""
        return f"(SELECT {call} FROM {inner.from_sql}{where})", typ, exact

    def semi(self, rel: Rel, kind: str, equi_only: bool = False) -> str:
        """``kind`` (exists, in, not_exists, not_in) of a table; ``equi_only``: EXISTS
        correlated by one equality alone (Spark refuses other outer references in a
        subquery under OR or in a select list)."""
        ch = self.ch
        table = pick(ch, self.tables)
        inner = self.scan(table)
        rel.tables |= inner.tables
        outer_key = self.key_of(rel.scope if kind in ("in", "not_in") else unmapped(rel.scope))
        inner_key = self.key_of(inner.scope)
        local = f" AND {self.pred(inner.scope, 0)}" if chance(ch, 0.4) else ""
        if kind == "not_in":  # a NULL on either side, or no rows at all, decides a lot
            rel.tags.add("not_in")
            where = f" WHERE {self.pred(inner.scope, 0)}" if local else ""
            if chance(ch, 0.3):  # a pair: a NULL in either column of either side
                outer2, inner2 = self.key_of(rel.scope), self.key_of(inner.scope)
                rel.tags.add("not_in_tuple")
                return (
                    f"({outer_key.sql}, {outer2.sql}) NOT IN "
                    f"(SELECT {inner_key.sql}, {inner2.sql} FROM {inner.from_sql}{where})"
                )
            body = self.set_operand(rel, f"SELECT {inner_key.sql} FROM {inner.from_sql}{where}")
            return f"{outer_key.sql} NOT IN ({body})"
        if kind == "in":
            rel.tags.add("semi_join")
            where = f" WHERE {self.pred(inner.scope, 0)}" if local else ""
            if chance(ch, 0.2):  # a pair of values
                outer2, inner2 = self.key_of(rel.scope), self.key_of(inner.scope)
                rel.tags.add("in_tuple")
                return (
                    f"({outer_key.sql}, {outer2.sql}) IN "
                    f"(SELECT {inner_key.sql}, {inner2.sql} FROM {inner.from_sql}{where})"
                )
            body = self.set_operand(rel, f"SELECT {inner_key.sql} FROM {inner.from_sql}{where}")
            return f"{outer_key.sql} IN ({body})"
        neg = "NOT " if kind == "not_exists" else ""
        rel.tags.add("anti_join" if neg else "semi_join")
        if not equi_only and chance(ch, 0.25):  # beyond the equality: matched again per key
            typ = self.any_type(inner.scope + rel.scope)
            inner_side = self.atom(inner.scope, typ)
            op = pick(ch, ["<", "<=", "<>", ">="])
            outer_side = self.atom(unmapped(rel.scope), typ)
            local += f" AND {self.compared(typ, inner_side, op, outer_side)}"
            rel.tags.add("residual_both_sides")
        correlation = f"{inner_key.sql} = {outer_key.sql}"
        if not equi_only and chance(ch, 0.1):  # no equality: all matched again on a change
            correlation = f"{inner_key.sql} {pick(ch, ['<', '>=', '<>'])} {outer_key.sql}"
            rel.tags.add("non_equi_join")
        return f"{neg}EXISTS (SELECT 1 FROM {inner.from_sql} WHERE {correlation}{local})"

    def set_operand(self, rel: Rel, body: str) -> str:
        """An IN's one-column ``body``, sometimes the first branch of a set operation
        whose second branch reads a key of another (or the same) table."""
        ch = self.ch
        if not chance(ch, 0.2):
            return body
        other = self.scan(pick(ch, self.tables))
        rel.tables |= other.tables
        where = f" WHERE {self.pred(other.scope, 0)}" if chance(ch, 0.5) else ""
        op = pick(ch, ["UNION", "UNION ALL", "EXCEPT", "INTERSECT"])
        rel.tags.add("in_set_operation")
        return f"{body} {op} SELECT {self.key_of(other.scope).sql} FROM {other.from_sql}{where}"

    def lateral_view(self, rel: Rel) -> None:
        """A LATERAL VIEW after ``rel``'s joins: each row beside 0 to 3 rows of its own
        (none for a NULL key), or beside the parts of one of its strings; the view's
        column (an INT key, or a STRING) is in scope for keys, groups and IN."""
        ch = self.ch
        a = self.alias("g")
        outer_view = " OUTER" if chance(ch, 0.5) else ""
        strings = self.cols_of(rel.scope, STR)
        maps = [r.sql[: -len("['a']")] for r in rel.scope if r.sql.endswith(".m['a']")]
        if maps and chance(ch, 0.3):  # the MAP's entries: a key and its value
            rel.from_sql += f" LATERAL VIEW{outer_view} explode({pick(ch, maps)}) {a} AS mk, v"
            rel.scope = [*rel.scope, Ref(f"{a}.mk", STR), Ref(f"{a}.v", INT, True)]
            rel.tags.add("generator")
            return
        if strings and chance(ch, 0.3):
            call, ref = f"explode(split({pick(ch, strings).sql}, 'a'))", Ref(f"{a}.v", STR)
        else:
            key = self.key_of(rel.scope).sql
            call, ref = f"explode(sequence(0, pmod({key}, 4) - 1))", Ref(f"{a}.v", INT, True)
        rel.from_sql += f" LATERAL VIEW{outer_view} {call} {a} AS v"
        rel.scope = [*rel.scope, ref]
        rel.tags.add("generator")

    # -- query shapes ----------------------------------------------------------------------------
    def spj(
        self, max_tables: int = 3, outer: bool = True, semi: bool = True, prefix: str = "c"
    ) -> Query:
        ch = self.ch
        rel = self.from_clause(max_tables, outer)
        if chance(ch, 0.08):
            self.lateral_view(rel)
        where = self.where(rel, semi)
        items, cols = self.projection(rel.scope, prefix=prefix)
        if chance(ch, 0.06):  # a generator in the SELECT list, named or as Spark names it
            unnamed = len(cols) % 2 == 0  # drawn from nothing: the seeds' scenarios stay
            name = "col" if unnamed else f"{prefix}{len(cols)}"
            call = f"explode_outer(split({self.atom(rel.scope, STR)}, 'a'))"
            items.append(call if unnamed else f"{call} AS {name}")
            cols.append(Col(name, STR))
            rel.tags.add("generator")
        if semi and chance(ch, 0.06):  # a flag column: Spark's existence flag, counted
            name = f"{prefix}{len(cols)}"
            truth = self.semi(
                rel, pick(ch, ["exists", "in", "not_exists", "not_in"]), equi_only=True
            )
            items.append(f"CASE WHEN {truth} THEN 1 ELSE 0 END AS {name}")
            cols.append(Col(name, INT))
            rel.tags.add("truth_subquery")
        sql = f"SELECT {', '.join(items)} FROM {rel.from_sql}{where}"
        return Query(sql, cols, set(rel.tags), rel.tables, rel.grammar)

    def top_n(self) -> Query:
        """ORDER BY ... LIMIT [OFFSET] over joined rows or over groups, ordered by every
        column (by name or position, either direction, NULLs first or last), so that
        tied rows are identical and the answer is one."""
        ch = self.ch
        q = self.spj(2)
        if chance(ch, 0.6):
            for _ in range(3):
                groups = self.aggregate()
                if all(c.exact for c in groups.cols):
                    q = groups
                    break
        if not all(c.exact for c in q.cols):
            q = self.spj(2)
        keys = [str(i + 1) if chance(ch, 0.25) else c.name for i, c in enumerate(q.cols)]
        if chance(ch, 0.5):
            keys.reverse()
        order = ", ".join(
            k + pick(ch, ["", " DESC", " DESC NULLS FIRST", " NULLS LAST"]) for k in keys
        )
        offset = f" OFFSET {pick(ch, ['1', '2'])}" if chance(ch, 0.2) else ""
        q.sql += f" ORDER BY {order} LIMIT {pick(ch, ['1', '2', '3', '5'])}{offset}"
        q.tags = q.tags | {"top_n"}
        return q

    def aggregate(
        self,
        global_: bool = False,
        prefix: str = "c",
        rel: Rel | None = None,
        sets: bool | None = None,
        last: bool = False,
    ) -> Query:
        """``sets``: group by ROLLUP / CUBE / GROUPING SETS of the keys (None: now and
        then); ``last``: the query's last projection, which may return a MAP."""
        ch = self.ch
        if rel is None:
            rel = self.from_clause(2)
            if chance(ch, 0.06):
                self.lateral_view(rel)
        where = self.where(rel)
        tags = set(rel.tags)
        items: list[str] = []
        cols: list[Col] = []
        keys: list[str] = []
        columns: list[Ref] = []  # the keys that are columns
        if not global_:
            tags.add("group_by")
            for _ in range(ch.int(1, 2)):
                bucketable = self.cols_of(rel.scope, TS)
                if bucketable and "time_bucket" not in tags and chance(ch, 0.15):
                    # Spark's time bucket (one per SELECT): a struct, or its start/end
                    size = pick(
                        ch,
                        [
                            "'1 hour'",
                            "'30 minutes'",
                            "'1 day'",
                            "'1 hour', '1 hour', '15 minutes'",
                            "'1 hour', '20 minutes'",  # sliding: a row in three windows
                        ],
                    )
                    key = f"window({pick(ch, bucketable).sql}, {size})"
                    typ = pick(ch, [TS, TS, ""])
                    key = f"{key}.{pick(ch, ['start', 'end'])}" if typ else key
                    keys.append(key)
                    cols.append(Col(f"{prefix}{len(items)}", typ or "STRUCT", False, bool(typ)))
                    tags.add("time_bucket")
                elif chance(ch, 0.3):
                    typ = self.any_type(rel.scope, (INT, STR, DATE, DEC, DBL, TS))
                    key = self.expr(rel.scope, typ, 1)
                    if re.fullmatch(r"-?\d+", key):  # GROUP BY 5 would be an ordinal
                        key = f"CAST({key} AS INT)"
                    keys.append(key)
                    cols.append(Col(f"{prefix}{len(items)}", typ, typ in INTEGRAL))
                else:
                    ref = self.key_of(rel.scope)
                    keys.append(ref.sql)
                    cols.append(Col(f"{prefix}{len(items)}", ref.type, ref.key))
                    if "hash(" not in ref.sql:  # a column: a subquery may refer to it
                        columns.append(ref)
                items.append(f"{keys[-1]} AS {prefix}{len(items)}")
        else:
            tags.add("global_agg")
        aggs = [self.agg_call(rel.scope, tags) for _ in range(ch.int(1, 3))]
        for call, typ, exact in aggs:
            name = f"{prefix}{len(items)}"
            if keys and chance(ch, 0.1):
                call = f"coalesce({call}, 0)" if typ in INTEGRAL else call
            items.append(f"{call} AS {name}")
            cols.append(Col(name, typ, False, exact))
        if keys and chance(ch, 0.15):  # an expression over a grouping key
            name = f"{prefix}{len(items)}"
            items.append(f"concat(CAST({keys[0]} AS STRING), '#') AS {name}")
            cols.append(Col(name, STR))
        if chance(ch, 0.15):  # expressions over aggregates
            name = f"{prefix}{len(items)}"
            form = pick(
                ch,
                [
                    f"COUNT(*) * 2 + COUNT({self.atom(rel.scope, self.any_type(rel.scope))})",
                    f"SUM(CASE WHEN {self.pred(rel.scope, 0)} THEN 1 ELSE 0 END)",
                    "CASE WHEN COUNT(*) > 1 THEN 'many' ELSE 'one' END",
                    f"coalesce(MAX({self.atom(rel.scope, INT)}) - MIN({self.atom(rel.scope, INT)}), -1)",
                ],
            )
            items.append(f"{form} AS {name}")
            cols.append(Col(name, STR if "many" in form else BIGINT))
            tags.add("agg_expression")
        if chance(ch, 0.08):  # a one-row subquery joined to every group (a share of a total)
            name = f"{prefix}{len(items)}"
            sub, typ, exact = self.scalar(rel, correlated=False)
            if typ in INTEGRAL:
                items.append(f"COUNT(*) * 100 - {sub} AS {name}")
                cols.append(Col(name, BIGINT))
            else:
                items.append(f"{sub} AS {name}")
                cols.append(Col(name, typ, False, exact))
            tags.add("scalar_subquery")
        if keys and chance(ch, 0.1):  # a window over the aggregate's output
            name = f"{prefix}{len(items)}"
            items.append(f"RANK() OVER (ORDER BY COUNT(*)) AS {name}")
            cols.append(Col(name, INT))
            tags.add("window_rank")
        picked_map = last and self.picked_map(rel, items, tags)
        grouping = ""
        windowed = any("OVER (" in item for item in items)
        if keys and (sets if sets is not None else chance(ch, 0.1)):
            # one GROUP BY per set, the keys a set lacks shown as NULL
            form = pick(ch, ["ROLLUP", "CUBE", "SETS", "WITH"])
            if form == "SETS":
                grouping = f"GROUPING SETS (({', '.join(keys)}), ({keys[-1]}), ())"
            elif form == "WITH":
                grouping = f"{', '.join(keys)} WITH {pick(ch, ['ROLLUP', 'CUBE'])}"
            else:
                grouping = f"{form}({', '.join(keys)})"
            name = f"{prefix}{len(items)}"
            items.append(f"GROUPING({keys[0]}) AS {name}")
            cols.append(Col(name, INT))  # a TINYINT, compared like one
            tags.add("grouping_sets")
        sql = f"SELECT {', '.join(items)} FROM {rel.from_sql}{where}"
        if grouping:
            sql += f" GROUP BY {grouping}"
        elif keys and not windowed and chance(ch, 0.1):
            # every item without an aggregate is a key or a function of the keys
            sql += " GROUP BY ALL"
            tags.add("group_by_all")
        elif keys:
            sql += " GROUP BY " + ", ".join(keys)
        having = [self.having(rel.scope)] if chance(ch, 0.3) else []
        if columns and not windowed and not grouping and chance(ch, 0.1):
            having.append(self.having_subquery(rel, pick(ch, unmapped(columns))))
            tags.add("having_subquery")
        if having:
            tags.add("having")
            sql += " HAVING " + pick(ch, [" AND ", " OR "]).join(having)
        if (
            not grouping and not picked_map and chance(ch, 0.1) and all(c.exact for c in cols)
        ):  # DISTINCT over the aggregate's rows
            sql = sql.replace("SELECT ", "SELECT DISTINCT ", 1)
            tags.add("distinct")
        return Query(sql, cols, tags, rel.tables, rel.grammar)

    def picked_map(self, rel: Rel, items: list[str], tags: set[str]) -> bool:
        """Maybe one more item, ``... AS m``: one row's MAP of a source's (MAX_BY, MIN_BY,
        its ties told apart by the MAP itself so the answer is one), the whole of it, a
        value at a key or its keys. Whether there is one: nothing may group or compare it."""
        ch = self.ch
        maps = [r.sql[: -len("['a']")] for r in rel.scope if r.sql.endswith(".m['a']")]
        if not maps or not chance(ch, 0.3):
            return False
        m = pick(ch, maps)
        by = self.atom(rel.scope, self.any_type(rel.scope))
        call = f"{pick(ch, ['MAX_BY', 'MIN_BY'])}({m}, STRUCT({by}, to_json({m})))"
        form = pick(ch, [call, call, f"{call}['a']", f"map_keys({call})"])
        items.append(f"{form} AS m")
        tags.update(("map_output", "picked_map"))
        return True

    def agg_call(self, scope: Sequence[Ref], tags: set[str]) -> tuple[str, str, bool]:
        """(SQL, result type, exact) of one aggregate call, sometimes with a FILTER."""
        sql, typ, exact = self._agg_call(scope, tags)
        if chance(self.ch, 0.1):
            tags.add("agg_filter")
            where = f"FILTER (WHERE {self.pred(scope, 0)})"
            for start, end in WRAPPED_CALLS:  # the call's, inside what wraps it
                if sql.startswith(start) and sql.endswith(end):
                    sql = f"{sql[: -len(end)]} {where}{end}"
                    break
            else:
                sql = f"{sql} {where}"
        return sql, typ, exact

    def _agg_call(self, scope: Sequence[Ref], tags: set[str]) -> tuple[str, str, bool]:
        ch = self.ch
        func = pick(ch, ["COUNT(*)", "SUM", "COUNT", "MIN", "MAX", "AVG", "OTHER"])
        if func == "COUNT(*)":
            return "COUNT(*)", BIGINT, True
        if func == "OTHER":  # no running state: recomputed for the groups a change touches
            return self._recomputed_call(scope, tags)
        if func in ("SUM", "AVG"):
            typ = self.any_type(scope, (INT, DEC, DBL))
            arg = self.expr(scope, typ, 1)
            if func == "AVG":
                tags.add("avg")
                return f"AVG({arg})", DEC if typ == DEC else DBL, typ == DEC
            return f"SUM({arg})", BIGINT if typ in INTEGRAL else typ, typ != DBL
        typ = self.any_type(scope)
        arg = self.expr(scope, typ, 1)
        if func == "COUNT":
            return f"COUNT({arg})", BIGINT, True
        tags.add("min_max")
        if chance(ch, 0.1):
            return f"{func}(DISTINCT {arg})", typ, True
        return f"{func}({arg})", typ, True

    def _recomputed_call(self, scope: Sequence[Ref], tags: set[str]) -> tuple[str, str, bool]:
        """An aggregate kept whole and recomputed per touched group (STDDEV, MEDIAN,
        BOOL_AND, ...), or COUNT_IF, which is a COUNT."""
        ch = self.ch
        tags.add("recomputed_agg")
        kind = pick(
            ch,
            [
                "float",
                "float",
                "bool",
                "bits",
                "try_sum",
                "corr",
                "count_if",
                "collection",
                "picked",
            ],
        )
        if kind == "picked":  # among ties: ordered by the value too, so the answer is one
            typ = self.any_type(scope, (INT, DEC, STR, DATE))
            x = self.expr(scope, typ, 1)
            form = pick(ch, ["MAX_BY", "MIN_BY", "PERCENTILE_APPROX"])
            if form == "PERCENTILE_APPROX":  # exact over fewer rows than its summary holds
                typ = self.any_type(scope, (INT, DEC))
                return f"PERCENTILE_APPROX({self.expr(scope, typ, 1)}, 0.5)", typ, True
            y = self.expr(scope, self.any_type(scope), 1)
            return f"{form}({x}, STRUCT({y}, {x}))", typ, True
        if kind == "collection":  # of the group's values, whatever order they come in
            x = self.expr(scope, self.any_type(scope, (INT, DEC, STR, DATE)), 1)
            form = pick(ch, ["sorted", "size", "estimate"])
            if form == "size":
                return f"SIZE(COLLECT_{pick(ch, ['SET', 'LIST'])}({x}))", INT, True
            if form == "estimate":
                return f"APPROX_COUNT_DISTINCT({x})", BIGINT, True
            sort = pick(ch, ["SORT_ARRAY(COLLECT_SET", "ARRAY_SORT(COLLECT_LIST"])
            return f"ARRAY_JOIN({sort}(CAST({x} AS STRING))), ',')", STR, True
        if kind == "bool":
            func = pick(ch, ["BOOL_AND", "BOOL_OR", "EVERY", "SOME", "ANY"])
            return f"CAST({func}({self.pred(scope, 0)}) AS INT)", INT, True
        if kind == "count_if":
            return f"COUNT_IF({self.pred(scope, 0)})", BIGINT, True
        if kind == "bits":
            func = pick(ch, ["BIT_AND", "BIT_OR", "BIT_XOR"])
            return f"{func}({self.expr(scope, INT, 1)})", INT, True
        if kind == "try_sum":
            typ = self.any_type(scope, (INT, DEC))
            return f"TRY_SUM({self.expr(scope, typ, 1)})", BIGINT if typ == INT else DEC, True
        typ = self.any_type(scope, (INT, DEC, DBL))
        x = self.expr(scope, typ, 1)
        if kind == "corr":
            func = pick(ch, ["CORR", "COVAR_POP", "REGR_SLOPE", "REGR_COUNT"])
            y = self.expr(scope, self.any_type(scope, (INT, DBL)), 1)
            if func == "REGR_COUNT":
                return f"REGR_COUNT({x}, {y})", BIGINT, True
            return f"{func}({x}, {y})", DBL, False
        func = pick(
            ch, ["STDDEV", "VAR_POP", "VARIANCE", "STDDEV_POP", "MEDIAN", "PERCENTILE", "SKEWNESS"]
        )
        if func == "PERCENTILE":
            return f"PERCENTILE({x}, {pick(ch, ['0.25', '0.5', '0.9'])})", DBL, False
        if chance(ch, 0.1):
            return f"{func}(DISTINCT {x})", DBL, False
        return f"{func}({x})", DBL, False

    def having(self, scope: Sequence[Ref]) -> str:
        ch = self.ch
        typ = self.any_type(scope, (INT, DEC, STR, DATE))
        forms = [
            lambda: f"COUNT(*) > {pick(ch, ['1', '0', '2'])}",
            lambda: f"SUM({self.atom(scope, INT)}) > 1",
            lambda: f"MIN({self.atom(scope, typ)}) IS NOT NULL",
            lambda: f"MAX({self.atom(scope, typ)}) <> {typed_literal(ch, typ)}",
            lambda: f"(COUNT(*) > 1 OR MAX({self.atom(scope, typ)}) IS NULL)",
        ]
        return pick(ch, forms)()

    def having_subquery(self, rel: Rel, key: Ref) -> str:
        """A subquery in HAVING, correlated with a grouping key that is a column (Spark
        refuses a correlation with a column inside a grouped expression), maintained as
        the WHERE of a query over the groups (plan/having.py)."""
        ch = self.ch
        inner = self.scan(pick(ch, self.tables))
        rel.tables |= inner.tables
        outer = key.sql if key.type in INTEGRAL else f"CAST(pmod(hash({key.sql}), 4) AS INT)"
        mine = self.key_of(inner.scope).sql
        local = f" AND {self.pred(inner.scope, 0)}" if chance(ch, 0.4) else ""
        body = f"FROM {inner.from_sql} WHERE {mine} = {outer}{local}"
        kind = pick(ch, ["in", "not_in", "exists", "not_exists", "scalar"])
        if kind == "scalar":  # Spark reads a COUNT(*) there as the outer query's
            return f"COUNT(*) > (SELECT COUNT({mine}) {body})"
        if kind in ("exists", "not_exists"):
            return f"{'NOT ' if kind == 'not_exists' else ''}EXISTS (SELECT 1 {body})"
        where = f" WHERE {self.pred(inner.scope, 0)}" if local else ""
        negated = " NOT" if kind == "not_in" else ""
        return f"{outer}{negated} IN (SELECT {mine} FROM {inner.from_sql}{where})"

    def pivot(self) -> Query:
        """PIVOT (maintained as a GROUP BY, plan/pivot.py) or UNPIVOT (a LATERAL VIEW) of a
        subquery over the FROM clause, read by an outer SELECT."""
        ch = self.ch
        rel = self.from_clause(2)
        where = self.where(rel)
        exact = [r for r in rel.scope if r.exact and r.type != DBL]
        if chance(ch, 0.4):
            return self._unpivot(rel, where, exact)
        pivoted = pick(ch, [r for r in exact if r.type in (INT, BIGINT, STR, DATE, DEC)] or exact)
        group = pick(ch, exact)
        value = pick(ch, [r for r in rel.scope if r.exact])
        body = (
            f"SELECT {group.sql} AS g0, {pivoted.sql} AS p0, {value.sql} AS v0 "
            f"FROM {rel.from_sql}{where}"
        )
        raw = [v for v in VALUES[pivoted.type] if v != "NULL" and "CAST" not in v]
        values = subset(ch, raw, 1, min(3, len(raw))) + (["NULL"] if chance(ch, 0.3) else [])
        named = [f"{v} AS w{i}" for i, v in enumerate(values)]
        numeric = value.type in (INT, BIGINT, DEC, DBL)
        kinds = ["COUNT(*)", "COUNT(v0)", "MIN(v0)", "MAX(v0)"]
        kinds += ["SUM(v0)", "AVG(v0)"] if numeric else []
        aggs = subset(ch, kinds, 1, 2)
        single = len(aggs) == 1
        tags = rel.tags | {"pivot", "group_by"}
        calls = ", ".join(a if single else f"{a} AS a{i}" for i, a in enumerate(aggs))
        cells: list[Col] = []
        items = ["g0 AS c0"]  # Spark's grammar has no alias for a PIVOT
        for i in range(len(values)):
            for j, a in enumerate(aggs):
                name = f"w{i}" if single else f"w{i}_a{j}"
                items.append(f"{name} AS c{len(items)}")
                if a.startswith("COUNT"):
                    cells.append(Col(f"c{len(cells) + 1}", BIGINT))
                elif a.startswith(("MIN", "MAX")):
                    cells.append(Col(f"c{len(cells) + 1}", value.type))
                else:
                    cells.append(Col(f"c{len(cells) + 1}", DBL, exact=False))
        sql = (
            f"SELECT {', '.join(items)} FROM ({body}) PIVOT ({calls} FOR p0 IN "
            f"({', '.join(named)}))"
        )
        if chance(ch, 0.3):
            sql += " WHERE g0 IS NOT NULL"
        return Query(sql, [Col("c0", group.type, group.key), *cells], tags, rel.tables)

    def _unpivot(self, rel: Rel, where: str, exact: Sequence[Ref]) -> Query:
        ch = self.ch
        families = [
            [r for r in exact if r.type in (INT, BIGINT, DEC)],
            [r for r in exact if r.type == STR],
            [r for r in exact if r.type == DATE],
        ]
        # Spark needs the listed columns to share a type: no family of two, one column
        family = pick(ch, [f for f in families if len(f) >= 2] or [[r] for r in exact])
        listed = subset(ch, family, 1, 3)
        kept = pick(ch, exact)
        items = [f"{kept.sql} AS i0"] + [f"{r.sql} AS u{i}" for i, r in enumerate(listed)]
        body = f"SELECT {', '.join(items)} FROM {rel.from_sql}{where}"
        names = [f"u{i}" if chance(ch, 0.5) else f"u{i} AS `U{i}x`" for i in range(len(listed))]
        nulls = " INCLUDE NULLS" if chance(ch, 0.4) else ""
        same = len({r.type for r in listed}) == 1
        sql = (
            f"SELECT up.i0 AS c0, up.name AS c1, up.val AS c2 FROM ({body}) UNPIVOT{nulls} "
            f"(val FOR name IN ({', '.join(names)})) AS up"
        )
        cols = [
            Col("c0", kept.type, kept.key),
            Col("c1", STR),
            Col("c2", listed[0].type if same else DBL, exact=same),
        ]
        return Query(sql, cols, rel.tags | {"unpivot", "generator"}, rel.tables)

    def distinct(self) -> Query:
        q = self.spj(max_tables=2)
        q.sql = q.sql.replace("SELECT ", "SELECT DISTINCT ", 1)
        q.tags.add("distinct")
        return q

    def union(self, distinct: bool) -> Query:
        ch = self.ch
        types = [pick(ch, (INT, STR, DEC, DATE)) for _ in range(ch.int(1, 3))]
        branches: list[str] = []
        tags: set[str] = {"union" if distinct else "union_all"}
        tables: set[str] = set()
        for b in range(ch.int(2, 3)):
            if b and chance(ch, 0.1):  # a branch of literals (a totals or default row)
                literals = [typed_literal(ch, typ, allow_null=True) for typ in types]
                branches.append("SELECT " + ", ".join(literals))
                tags.add("constant")
                continue
            rel = self.from_clause(2, outer=False)
            where = self.where(rel, semi=False)
            items = []
            for i, typ in enumerate(types):
                if chance(
                    ch, 0.15
                ):  # another type in this branch: the output type is the wider one
                    typ = pick(
                        ch, {INT: (DEC, DBL, STR), STR: (INT,), DEC: (INT, DBL), DATE: (TS,)}[typ]
                    )
                    tags.add("union_mixed_types")
                items.append(f"{self.expr(rel.scope, typ, 1)} AS c{i}")
            branches.append(f"SELECT {', '.join(items)} FROM {rel.from_sql}{where}")
            tags |= rel.tags
            tables |= rel.tables
        sql = branches[0]
        for branch in branches[1:]:  # INTERSECT binds tighter than UNION and EXCEPT
            ops = ("UNION", "UNION", "INTERSECT", "EXCEPT")
            op = pick(ch, ops) if distinct else pick(ch, tuple(f"{o} ALL" for o in ops))
            tags.add(op.split()[0].lower() if op != "UNION ALL" else "union_all")
            sql += f" {op} {branch}"
        cols = [Col(f"c{i}", t, t in INTEGRAL) for i, t in enumerate(types)]
        if (
            "union_mixed_types" in tags
        ):  # the widened type is not tracked: no predicates on it downstream
            cols = [Col(c.name, c.type, False, False) for c in cols]
        return Query(sql, cols, tags, tables)

    def window_func(
        self, kind: str, rel: Rel, exprs: list[str], cols: list[Col]
    ) -> tuple[str, str, bool, str]:
        """(SQL, type, exact, tag) of one deterministic window function. Functions that
        depend on the order among tied rows are ordered by every output column, so tied
        rows are identical and the multiset of results is determined. Then by every other
        column in scope: a second window function can tell tied rows apart by a column
        the output does not show (seed 490363: DENSE_RANK by a date beside NTILE)."""
        ch = self.ch
        part = "" if chance(ch, 0.15) else f"PARTITION BY {self.key_of(rel.scope).sql} "
        full = "ORDER BY " + ", ".join(
            [f"{e} {pick(ch, ['ASC', 'DESC'])}" for e in exprs]
            + [r.sql for r in rel.scope if r.type in (*ORDERABLE, ST) and r.sql not in exprs]
        )
        numeric = [
            (e, c)
            for e, c in zip(exprs, cols, strict=True)
            if c.type in (INT, BIGINT, DEC) and c.exact
        ]
        if kind == "rank":
            fn = pick(
                ch,
                [
                    "RANK",
                    "ROW_NUMBER",
                    "DENSE_RANK",
                    "NTILE",
                    "PERCENT_RANK",
                    "CUME_DIST",
                    "LAG",
                    "LEAD",
                    "FIRST_VALUE",
                    "LAST_VALUE",
                    "NTH_VALUE",
                ],
            )
            if fn in ("RANK", "DENSE_RANK", "PERCENT_RANK", "CUME_DIST"):
                order = f"ORDER BY {self.atom(rel.scope, self.any_type(rel.scope))}"
                typ = DBL if fn in ("PERCENT_RANK", "CUME_DIST") else BIGINT
                return f"{fn}() OVER ({part}{order})", typ, True, "window_rank"
            if fn == "ROW_NUMBER":
                return f"ROW_NUMBER() OVER ({part}{full})", BIGINT, True, "window_rownum"
            if fn == "NTILE":
                return f"NTILE(2) OVER ({part}{full})", BIGINT, True, "window_rownum"
            i = ch.int(0, len(exprs) - 1)
            typ, exact = cols[i].type, cols[i].exact
            if fn in ("FIRST_VALUE", "LAST_VALUE"):
                nulls = " IGNORE NULLS" if chance(ch, 0.3) else ""
                frame = pick(ch, ["", " ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"])
                return (
                    f"{fn}({exprs[i]}){nulls} OVER ({part}{full}{frame})",
                    typ,
                    exact,
                    "window_lag",
                )
            if fn == "NTH_VALUE":
                arg = f"{exprs[i]}, {pick(ch, ['1', '2', '3'])}"
            elif typ in ORDERABLE and chance(ch, 0.4):  # a farther row, a default value
                arg = f"{exprs[i]}, {pick(ch, ['1', '2', '3'])}, {typed_literal(ch, typ)}"
            else:
                arg = f"{exprs[i]}, 1"
            return f"{fn}({arg}) OVER ({part}{full})", typ, exact, "window_lag"
        fn = pick(ch, ["SUM", "COUNT", "MIN", "MAX", "AVG"])
        if numeric and chance(ch, 0.25):  # a ROWS frame: needs the full order
            e, c = pick(ch, numeric)
            frame = pick(
                ch,
                [
                    "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW",
                    "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
                    "ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING",
                    "ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING",
                    "ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING",
                ],
            )
            fn = pick(ch, ["SUM", "COUNT", "MAX"])
            typ = BIGINT if fn == "COUNT" or c.type in INTEGRAL else c.type
            return f"{fn}({e}) OVER ({part}{full} {frame})", typ, True, "window_frame"
        ranged = [r for r in rel.scope if r.exact and r.type in (INT, BIGINT, DATE)]
        if ranged and chance(ch, 0.15):  # a RANGE frame of a range of values: peers together
            by = pick(ch, ranged)
            # a DATE's range is a number of days: Spark 3.5 refuses an INTERVAL there
            # (RANGE_FRAME_INVALID_TYPE, seed 660166); no draw, so other seeds stay
            n = "1" if by.type == DATE else pick(ch, ["1", "2"])
            frame = pick(
                ch,
                [
                    f"RANGE BETWEEN {n} PRECEDING AND CURRENT ROW",
                    f"RANGE BETWEEN CURRENT ROW AND {n} FOLLOWING",
                    f"RANGE BETWEEN {n} PRECEDING AND {n} FOLLOWING",
                    "RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
                ],
            )
            order = f"ORDER BY {by.sql} {pick(ch, ['ASC', 'DESC'])}"
            if numeric and chance(ch, 0.6):
                e, c = pick(ch, numeric)
                fn = pick(ch, ["SUM", "MIN", "MAX"])
                typ = BIGINT if fn == "SUM" and c.type in INTEGRAL else c.type
                return f"{fn}({e}) OVER ({part}{order} {frame})", typ, True, "window_frame"
            return f"COUNT(*) OVER ({part}{order} {frame})", BIGINT, True, "window_frame"
        if chance(ch, 0.15):  # values Spark reads in no fixed order, the answer made one
            typ = self.any_type(rel.scope, (INT, DEC, STR, DATE))
            x = self.atom(rel.scope, typ)
            order = ""
            if chance(ch, 0.5):  # a RANGE frame to the last peer: peers in no order
                order = f"ORDER BY {self.atom(rel.scope, self.any_type(rel.scope))}"
            over = f"OVER ({part}{order})".replace(" )", ")")
            if chance(ch, 0.5):
                listed = f"COLLECT_LIST(CAST({x} AS STRING)) {over}"
                return f"ARRAY_JOIN(SORT_ARRAY({listed}), ',')", STR, True, "window_agg"
            y = self.atom(rel.scope, self.any_type(rel.scope))
            fn = pick(ch, ["MAX_BY", "MIN_BY"])
            return f"{fn}({x}, STRUCT({y}, {x})) {over}", typ, True, "window_agg"
        typ = self.any_type(rel.scope, (INT, DEC, DBL))
        order = (
            f"ORDER BY {self.atom(rel.scope, self.any_type(rel.scope))}" if chance(ch, 0.3) else ""
        )
        func = f"{fn}({self.atom(rel.scope, typ)}) OVER ({part}{order})".replace(" )", ")")
        if fn == "COUNT":
            return func, BIGINT, True, "window_agg"
        if fn == "AVG":
            return func, DEC if typ == DEC else DBL, typ == DEC, "window_agg"
        return (
            func,
            BIGINT if typ in INTEGRAL else typ,
            not (fn == "SUM" and typ == DBL),
            "window_agg",
        )

    def window(self, kind: str) -> Query:
        ch = self.ch
        rel = self.from_clause(2)
        if chance(ch, 0.06):
            self.lateral_view(rel)
        where = self.where(rel, semi=False)
        tags = set(rel.tags)
        items, cols = self.projection(rel.scope, 1, 3, prefix="i" if kind == "dedup" else "c")
        exprs = [i.rsplit(" AS ", 1)[0] for i in items]
        if kind == "dedup":
            part = "" if chance(ch, 0.15) else f"PARTITION BY {self.key_of(rel.scope).sql} "
            order = ", ".join(f"{e} {pick(ch, ['ASC', 'DESC'])}" for e in exprs)
            inner = f"SELECT {', '.join(items)}, ROW_NUMBER() OVER ({part}ORDER BY {order}) AS rn FROM {rel.from_sql}{where}"
            q = self.alias("q")
            outer = ", ".join(f"{q}.{c.name} AS c{i}" for i, c in enumerate(cols))
            tags |= {"window_dedup", "window_rownum"}
            out_cols = [Col(f"c{i}", c.type, c.key, c.exact) for i, c in enumerate(cols)]
            return Query(
                f"SELECT {outer} FROM ({inner}) AS {q} WHERE {q}.rn = 1", out_cols, tags, rel.tables
            )
        funcs = [self.window_func(kind, rel, exprs, cols)]
        if chance(ch, 0.3):  # a second window, maybe over another partition
            funcs.append(self.window_func(pick(ch, ["rank", "agg"]), rel, exprs, cols))
        first_name = f"c{len(cols)}"
        for func, typ, exact, tag in funcs:
            name = f"c{len(cols)}"
            items.append(f"{func} AS {name}")
            cols.append(Col(name, typ, False, exact))
            tags.add(tag)
        sql = f"SELECT {', '.join(items)} FROM {rel.from_sql}{where}"
        first = next(c for c in cols if c.name == first_name)
        if (
            chance(ch, 0.3) and first.exact and first.type in (INT, BIGINT)
        ):  # filter on a window's value
            q = self.alias("q")
            outer = ", ".join(f"{q}.{c.name} AS {c.name}" for c in cols)
            cond = f"{q}.{first.name} > 1" if chance(ch, 0.5) else f"{q}.{first.name} IS NOT NULL"
            sql = f"SELECT {outer} FROM ({sql}) AS {q} WHERE {cond}"
            tags.add("subquery")
        return Query(sql, cols, tags, rel.tables)

    def inner_query(self) -> Query:
        """A query usable in FROM (output columns i0..)."""
        ch = self.ch
        kind = pick(ch, ["spj", "aggregate", "distinct", "union_all"])
        if kind == "spj":
            return self.spj(2, prefix="i")
        if kind == "aggregate":
            return self.aggregate(prefix="i")
        if kind == "distinct":
            q = self.spj(1, prefix="i")
            q.sql = q.sql.replace("SELECT ", "SELECT DISTINCT ", 1)
            q.tags.add("distinct")
            return q
        q = self.union(False)
        q.sql = re.sub(r"\bAS c(\d+)", r"AS i\1", q.sql)
        q.cols = [Col(f"i{i}", c.type, c.key, c.exact) for i, c in enumerate(q.cols)]
        return q

    def derived(self, inner: Query, name: str, alias: str | None = None) -> Rel:
        alias = alias or self.alias("q")
        scope = [Ref(f"{alias}.{c.name}", c.type, c.key, c.exact) for c in inner.cols]
        return Rel(f"{name} AS {alias}", scope, set(inner.tables), set(inner.tags))

    def outer_over(self, rel: Rel, tags: set[str]) -> Query:
        """SELECT over a derived relation, maybe joined to a source, maybe aggregated."""
        ch = self.ch
        if chance(ch, 0.4):
            table = pick(ch, self.tables)
            right = self.scan(table)
            kind = pick(ch, ["JOIN", "LEFT JOIN"])
            cond = f"{self.key_of(rel.scope).sql} = {self.key_of(right.scope).sql}"
            rel = Rel(
                f"{rel.from_sql} {kind} {right.from_sql} ON {cond}",
                rel.scope + right.scope,
                rel.tables | right.tables,
                rel.tags | {"inner_join" if kind == "JOIN" else "left_join"},
            )
        if chance(ch, 0.3):
            q = self.aggregate(rel=rel)
            q.tags |= tags
            if rel.tags & {"group_by", "global_agg"}:
                q.tags.add("nested_agg")
            return q
        where = self.where(rel)
        items, cols = self.projection(rel.scope)
        return Query(
            f"SELECT {', '.join(items)} FROM {rel.from_sql}{where}",
            cols,
            rel.tags | tags,
            rel.tables,
        )

    def subquery(self) -> Query:
        inner = self.inner_query()
        return self.outer_over(self.derived(inner, f"({inner.sql})"), {"subquery"})

    def cte(self) -> Query:
        ch = self.ch
        inner = self.inner_query()
        w = self.alias("w")
        rel = self.derived(inner, w)
        if chance(ch, 0.3):  # the CTE read twice: a self-join of a derived relation
            other = self.derived(inner, w)
            kind = pick(ch, ["JOIN", "LEFT JOIN"])
            cond = f"{rel.scope[0].sql} = {other.scope[0].sql}"
            rel = Rel(
                f"{rel.from_sql} {kind} {other.from_sql} ON {cond}",
                rel.scope + other.scope,
                rel.tables,
                rel.tags | {"self_join"},
            )
        q = self.outer_over(rel, {"cte"})
        q.sql = f"WITH {w} AS ({inner.sql}) {q.sql}"
        return q

    def rejected(self) -> Query:
        """A query outside the compiler's grammar: it must refresh FULL, and correctly."""
        ch = self.ch
        kind = pick(ch, REJECTED_KINDS)
        tags = {"rejected", f"rejected:{kind}"}
        if kind == "tablesample":  # every row, but a sample has no delta rule
            rel = self.scan(pick(ch, self.tables))
            items, cols = self.projection(rel.scope)
            q = Query(
                f"SELECT {', '.join(items)} FROM {rel.from_sql.replace(' AS ', ' TABLESAMPLE (100 PERCENT) AS ')}",
                cols,
                set(),
                rel.tables,
            )
        elif kind == "key_types":  # a string beside a number: '1' and '1.0' meet 1.0
            left, right = self.scan(pick(ch, self.tables)), self.scan(pick(ch, self.tables))
            lk, rk = self.key_of(left.scope), self.key_of(right.scope)
            cond = f"CAST({lk.sql} AS STRING) = CAST({rk.sql} AS DOUBLE)"
            items, cols = self.projection(left.scope + right.scope)
            q = Query(
                f"SELECT {', '.join(items)} FROM {left.from_sql} LEFT JOIN {right.from_sql} "
                f"ON {cond}",
                cols,
                {"left_join"},
                left.tables | right.tables,
            )
        else:  # outer_non_equi: no equality to key the match by
            left, right = self.scan(pick(ch, self.tables)), self.scan(pick(ch, self.tables))
            cond = f"{self.key_of(left.scope).sql} < {self.key_of(right.scope).sql}"
            scope = left.scope + right.scope
            items, cols = self.projection(scope)
            q = Query(
                f"SELECT {', '.join(items)} FROM {left.from_sql} FULL JOIN {right.from_sql} ON {cond}",
                cols,
                {"full_join"},
                left.tables | right.tables,
            )
        q.tags |= tags
        q.grammar = False
        return q

    def query(self, shape: str) -> Query:
        ch = self.ch
        if shape == "filter":
            rel = self.from_clause(1)
            rel.tags.add("filter")
            items, cols = self.projection(rel.scope)
            self.with_map(rel, items, cols)
            return Query(
                f"SELECT {', '.join(items)} FROM {rel.from_sql} WHERE {self.pred(rel.scope, 2)}",
                cols,
                rel.tags,
                rel.tables,
            )
        if shape == "inner_join":
            rel = self.from_clause(1)
            for _ in range(ch.int(1, 2)):
                right = self.scan(pick(ch, self.tables))
                cond = f"{self.key_of(rel.scope).sql} = {self.key_of(right.scope).sql}"
                rel = Rel(
                    f"{rel.from_sql} JOIN {right.from_sql} ON {cond}",
                    rel.scope + right.scope,
                    rel.tables | right.tables,
                    rel.tags
                    | {"inner_join"}
                    | ({"self_join"} if right.tables & rel.tables else set()),
                )
            where = self.where(rel)
            items, cols = self.projection(rel.scope)
            self.with_map(rel, items, cols)
            return Query(
                f"SELECT {', '.join(items)} FROM {rel.from_sql}{where}", cols, rel.tags, rel.tables
            )
        if shape == "outer_join":
            rel = self.from_clause(1)
            right = self.scan(pick(ch, self.tables))
            kind = pick(ch, ["LEFT JOIN", "RIGHT JOIN", "FULL JOIN"])
            cond = f"{self.key_of(rel.scope).sql} = {self.key_of(right.scope).sql}"
            tag = kind.split()[0].lower() + "_join"
            rel = Rel(
                f"{rel.from_sql} {kind} {right.from_sql} ON {cond}",
                rel.scope + right.scope,
                rel.tables | right.tables,
                {tag},
            )
            if chance(ch, 0.4):
                more = self.scan(pick(ch, self.tables))
                kind2 = pick(ch, ["JOIN", "LEFT JOIN", "FULL JOIN"])
                rel = Rel(
                    f"{rel.from_sql} {kind2} {more.from_sql} ON {self.key_of(rel.scope).sql} = "
                    f"{self.key_of(more.scope).sql}",
                    rel.scope + more.scope,
                    rel.tables | more.tables,
                    rel.tags
                    | {
                        {"JOIN": "inner_join", "LEFT JOIN": "left_join", "FULL JOIN": "full_join"}[
                            kind2
                        ]
                    },
                )
            where = self.where(rel, semi=False)
            items, cols = self.projection(rel.scope)
            self.with_map(rel, items, cols)
            return Query(
                f"SELECT {', '.join(items)} FROM {rel.from_sql}{where}", cols, rel.tags, rel.tables
            )
        if shape in ("semi_join", "anti_join"):
            rel = self.from_clause(2, outer=False)
            kinds = ["exists", "in"] if shape == "semi_join" else ["not_exists"]
            conj = [self.semi(rel, pick(ch, kinds))]
            if chance(ch, 0.4):
                conj.append(self.pred(rel.scope, 1))
                rel.tags.add("filter")
            items, cols = self.projection(rel.scope)
            self.with_map(rel, items, cols)
            return Query(
                f"SELECT {', '.join(items)} FROM {rel.from_sql}{rel.where_sql(conj)}",
                cols,
                rel.tags,
                rel.tables,
            )
        if shape == "group_by":
            return self.aggregate(last=True)
        if shape == "global_agg":
            return self.aggregate(global_=True, last=True)
        if shape == "grouping_sets":
            return self.aggregate(sets=True, last=True)
        if shape == "top_n":
            return self.top_n()
        if shape == "distinct":
            return self.distinct()
        if shape in ("union_all", "union"):
            return self.union(shape == "union")
        if shape == "window_dedup":
            return self.window("dedup")
        if shape == "window_rank":
            return self.window("rank")
        if shape == "window_agg":
            return self.window("agg")
        if shape == "subquery":
            return self.subquery()
        if shape == "cte":
            return self.cte()
        if shape == "not_in":
            rel = self.from_clause(2)
            conj = [self.semi(rel, "not_in")]
            if chance(ch, 0.4):
                conj.append(self.pred(rel.scope, 1))
            items, cols = self.projection(rel.scope)
            self.with_map(rel, items, cols)
            sql = f"SELECT {', '.join(items)} FROM {rel.from_sql}{rel.where_sql(conj)}"
            return Query(sql, cols, rel.tags, rel.tables)
        if shape == "scalar_subquery":
            rel = self.from_clause(2)
            conj = [self.compared_with_scalar(rel)] if chance(ch, 0.5) else []
            items, cols = self.projection(rel.scope)
            sub, typ, exact = self.scalar(rel)
            items.append(f"{sub} AS c{len(items)}")
            cols.append(Col(f"c{len(cols)}", typ, False, exact))
            self.with_map(rel, items, cols)
            sql = f"SELECT {', '.join(items)} FROM {rel.from_sql}{rel.where_sql(conj)}"
            return Query(sql, cols, rel.tags, rel.tables)
        if shape == "pivot":
            return self.pivot()
        if shape == "rejected":
            return self.rejected()
        raise ValueError(f"unknown shape {shape}")


# -- scenarios -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One step of a scenario.

    op: "sql" (args: text) | "create_dt" (name, query) | "refresh" (name) |
        "refresh_full" (name) | "fault" (name, point) | "no_data" (name) |
        "same" (a, b) | "expect" (name, VALUES sql) | "expect_mode" (name, mode) |
        "next_day" (): the refreshes after it read CURRENT_DATE a day later
    """

    op: str
    args: tuple[str, ...]


@dataclass
class Scenario:
    name: str
    steps: list[Step]
    tags: dict[str, set[str]] = field(default_factory=dict)  # dynamic table -> shape tags
    seed: int | None = None
    shape: str | None = None
    bug: str | None = None  # set: a known bug (runs as a strict xfail)
    slow: str | None = None  # set: a corpus file left to CI (.ci/run), with why
    notes: list[str] = field(default_factory=list)

    @property
    def dynamic_tables(self) -> list[str]:
        return [s.args[0] for s in self.steps if s.op == "create_dt"]

    @property
    def tables(self) -> list[str]:
        out = []
        for s in self.steps:
            if s.op == "sql":
                m = re.match(r"\s*CREATE\s+TABLE\s+(\w+)", s.args[0], re.I)
                if m:
                    out.append(m.group(1))
        return out

    @property
    def refreshes(self) -> int:
        return sum(1 for s in self.steps if s.op in ("refresh", "refresh_full", "fault", "no_data"))

    def to_text(self) -> str:
        lines = [f"-- name: {self.name}"]
        if self.bug:
            lines.append(f"-- bug: {self.bug}")
        if self.slow:
            lines.append(f"-- slow: {self.slow}")
        if self.seed is not None:
            lines.append(f"-- seed: {self.seed}" + (f" shape: {self.shape}" if self.shape else ""))
        for dt, tags in sorted(self.tags.items()):
            lines.append(f"-- tags {dt}: {', '.join(sorted(tags))}")
        for note in self.notes:
            lines.append(f"-- {note}")
        lines.append("")
        for step in self.steps:
            lines.append(step_text(step) + ";")
        return "\n".join(lines) + "\n"


def step_text(step: Step) -> str:
    a = step.args
    if step.op == "sql":
        return a[0]
    if step.op == "create_dt":
        return f"CREATE DYNAMIC TABLE {a[0]} AS {a[1]}"
    if step.op == "refresh":
        return f"REFRESH DYNAMIC TABLE {a[0]}"
    return f"@{step.op} {' '.join(a)}".rstrip()


def _strip_comment(line: str) -> str:
    quoted = False
    for i, c in enumerate(line):
        if c == "'":
            quoted = not quoted
        elif c == "-" and not quoted and line[i : i + 2] == "--":
            return line[:i]
    return line


def split_statements(text: str) -> list[str]:
    """Statements separated by ``;`` (outside quotes), comments removed."""
    body = "\n".join(_strip_comment(line) for line in text.splitlines())
    out, cur, quoted = [], [], False
    for c in body:
        if c == "'":
            quoted = not quoted
        if c == ";" and not quoted:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return [" ".join(s.split()) if not s.startswith("@expect ") else s for s in out if s]


def parse_scenario(text: str, name: str = "scenario") -> Scenario:
    sc = Scenario(name, [])
    for line in text.splitlines():
        m = re.match(r"--\s*(name|bug|slow|seed|tags\s+(\w+)):\s*(.*)$", line.strip())
        if not m:
            continue
        key, value = m.group(1), m.group(3).strip()
        if key == "name":
            sc.name = value
        elif key == "bug":
            sc.bug = value
        elif key == "slow":
            sc.slow = value
        elif key == "seed":
            parts = value.split()
            sc.seed = int(parts[0])
            if "shape:" in parts:
                sc.shape = parts[parts.index("shape:") + 1]
        else:
            sc.tags[m.group(2)] = {t.strip() for t in value.split(",") if t.strip()}
    for stmt in split_statements(text):
        m = re.match(r"CREATE\s+DYNAMIC\s+TABLE\s+(\w+)\s+AS\s+(.*)$", stmt, re.I | re.S)
        if m:
            sc.steps.append(Step("create_dt", (m.group(1), m.group(2).strip())))
            continue
        m = re.match(r"REFRESH\s+DYNAMIC\s+TABLE\s+(\w+)$", stmt, re.I)
        if m:
            sc.steps.append(Step("refresh", (m.group(1),)))
            continue
        if stmt.startswith("@"):
            op, *rest = stmt[1:].split(None, 2 if stmt.startswith("@expect ") else 10)
            if op == "expect":
                sc.steps.append(Step("expect", (rest[0], " ".join(rest[1].split()))))
            else:
                if op not in (
                    "refresh_full",
                    "fault",
                    "no_data",
                    "same",
                    "expect_mode",
                    "equality_delete",
                    "next_day",
                ):
                    raise ValueError(f"unknown directive @{op}")
                sc.steps.append(Step(op, tuple(rest)))
            continue
        sc.steps.append(Step("sql", (stmt,)))
    return sc


# -- generating scenarios ------------------------------------------------------------------------

FAULT_POINTS = (
    "after_pin_sources",
    "after_read_changes",
    "after_compute",
    "after_write",
    "before_publish",
    "after_publish_state",
    "after_publish",
)


def gen_tables(ch: Chooser, count: int | None = None) -> list[Table]:
    n = count if count is not None else ch.int(2, 4)
    tables = []
    for i in range(n):
        extra = subset(ch, OPTIONAL_COLS, 1, 4)
        options = ""
        if chance(ch, 0.1):
            options = "PARTITIONED BY (k)"
        elif chance(ch, 0.1):
            options = MERGE_ON_READ
        tables.append(Table(f"t{i}", (Col("k", INT, key=True), *extra), options))
    return tables


def gen_rows(
    ch: Chooser,
    table: Table,
    lo: int,
    hi: int,
    pool: list[tuple[str, ...]],
    pools: dict[str, tuple[str, ...]] = VALUES,
) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for _ in range(ch.int(lo, hi)):
        if (rows or pool) and chance(ch, 0.2):
            rows.append(pick(ch, rows + pool))  # a duplicate
        else:
            rows.append(tuple(value(ch, c, pools) for c in table.cols))
    return rows


def values_sql(rows: Sequence[tuple[str, ...]]) -> str:
    return ", ".join("(" + ", ".join(r) + ")" for r in rows)


def mutation_step(stmt: str) -> Step:
    """The step of one of _mutation's statements: SQL, or a directive (``@op args``)."""
    if stmt.startswith("@"):
        op, *args = stmt[1:].split()
        return Step(op, tuple(args))
    return Step("sql", (stmt,))


def _mutation(
    ch: Chooser,
    table: Table,
    known: list[tuple[str, ...]],
    qg: QueryGen,
    pools: dict[str, tuple[str, ...]] = VALUES,
    evolved: set[str] | None = None,
) -> list[str]:
    """One or two statements (commits) changing ``table``; ``evolved`` collects the
    tables whose partition spec a statement changed (once per table: Iceberg refuses a
    second field with the same transform)."""
    t = table.name
    scope = [Ref(c.name, c.type, c.key) for c in table.cols]
    others = [c for c in table.cols if c.name != "k"]
    kinds = [
        "insert",
        "update_key",
        "delete",
        "update",
        "delete_extreme",
        "merge",
        "reinsert",
        "overwrite",
        "noop_update",
        "delete_all",
        "compact",
    ]
    if "merge-on-read" in table.options and chance(ch, 0.2):
        # Flink's upsert sink: delete by key with an equality delete file (Spark writes
        # only position deletes), then, often, the keys' new rows
        keys = subset(ch, KEY_VALUES, 1, 2)
        upsert = [f"@equality_delete {t} {','.join(keys)}"]
        if chance(ch, 0.6):
            rows = gen_rows(ch, table, 1, 2, [], pools)
            rows = [(pick(ch, keys), *row[1:]) for row in rows]
            upsert.append(f"INSERT INTO {t} VALUES {values_sql(rows)}")
        return upsert
    # rarely: the snapshot the last refresh recorded is expired (the next one recomputes)
    kind = "expire" if chance(ch, 0.03) else pick(ch, kinds)
    if evolved is not None and t not in evolved and chance(ch, 0.05):
        # partition evolution: older files keep their spec; a compaction rewrites them
        # into the new one, so a change after it, in a few of the buckets, mixes specs
        # in one range. A table partitioned by k gains a second field on k (Iceberg
        # projects one field's predicate onto the other) or loses its only field.
        evolved.add(t)
        compact = [
            f"CALL lakehouse.system.rewrite_data_files(table => 'public.{t}', "
            "options => map('min-input-files', '1'))"
        ]
        evolve = f"ALTER TABLE {t} ADD PARTITION FIELD bucket(4, k)"
        if "PARTITIONED" in table.options and chance(ch, 0.5):
            evolve = f"ALTER TABLE {t} DROP PARTITION FIELD k"
        return [
            evolve,
            *(compact if chance(ch, 0.5) else []),
            *_mutation(ch, table, known, qg, pools),
        ]
    if kind == "insert":
        return [f"INSERT INTO {t} VALUES {values_sql(gen_rows(ch, table, 1, 3, known, pools))}"]
    if kind == "update_key":  # moves rows to another group / join partner
        return [f"UPDATE {t} SET k = {pick(ch, KEY_VALUES)} WHERE {qg.pred(scope, 0)}"]
    if kind == "update":
        col = pick(ch, others)
        return [f"UPDATE {t} SET {col.name} = {value(ch, col, pools)} WHERE {qg.pred(scope, 0)}"]
    if kind == "delete":
        if chance(ch, 0.5):  # empties a group
            return [f"DELETE FROM {t} WHERE k = {pick(ch, KEY_VALUES[:4])}"]
        return [f"DELETE FROM {t} WHERE {qg.pred(scope, 0)}"]
    if kind == "delete_extreme":  # the current MIN / MAX
        col = pick(ch, [c for c in table.cols if c.type != MP])
        fn = pick(ch, ["MAX", "MIN"])
        return [f"DELETE FROM {t} WHERE {col.name} = (SELECT {fn}({col.name}) FROM {t})"]
    if kind == "merge":
        col = pick(ch, others)
        keys = subset(ch, KEY_VALUES[:4], 1, 3)
        src = ", ".join(f"({k}, {value(ch, col, pools)})" for k in keys)
        return [
            f"MERGE INTO {t} AS tgt USING (SELECT * FROM VALUES {src} AS v(k, val)) AS src ON tgt.k = src.k "
            f"WHEN MATCHED AND src.val IS NULL THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET tgt.{col.name} = src.val "
            f"WHEN NOT MATCHED THEN INSERT (k, {col.name}) VALUES (src.k, src.val)"
        ]
    if kind == "reinsert" and known:  # delete a row and insert it again: two commits, no net change
        row = pick(ch, known)
        # a struct or a map is compared as JSON: Iceberg cannot take one as a filter (nor Spark compare maps)
        cond = " AND ".join(
            (f"{c.name} IS NULL" if v == "NULL" else f"to_json({c.name}) = to_json({v})")
            if c.type in (ST, MP)
            else f"{c.name} <=> {v}"
            for c, v in zip(table.cols, row, strict=True)
        )
        return [f"DELETE FROM {t} WHERE {cond}", f"INSERT INTO {t} VALUES {values_sql([row])}"]
    if kind == "overwrite":  # rewrites every file, changes nothing
        return [f"INSERT OVERWRITE {t} SELECT * FROM {t}"]
    if kind == "noop_update":  # a commit that matches no row
        return [f"UPDATE {t} SET k = k WHERE k = 99"]
    if kind == "delete_all":
        return [f"DELETE FROM {t}"]
    if kind == "compact":  # a "replace" snapshot: same rows, new files
        return [
            f"CALL lakehouse.system.rewrite_data_files(table => 'public.{t}', options => map('min-input-files', '1'))"
        ]
    if (
        kind == "expire"
    ):  # the snapshot a refresh recorded may be gone: the next refresh must recompute
        return [
            f"CALL lakehouse.system.expire_snapshots(table => 'public.{t}', "
            f"older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
        ]
    return [f"INSERT INTO {t} VALUES {values_sql(gen_rows(ch, table, 1, 2, known, pools))}"]


def downstream_query(
    ch: Chooser, qg: QueryGen, upstream: str, q0: Query, tables: Sequence[Table]
) -> Query:
    """A query over the dynamic table ``upstream`` (whose query is ``q0``), maybe joined
    with a source table."""
    dt0 = Table(upstream, tuple(Col(c.name, c.type, c.key, True) for c in q0.cols))
    qg1 = QueryGen(ch, [dt0])
    qg1._ids = qg._ids
    inner_shape = pick(
        ch, ["filter", "group_by", "inner_join", "window_rank", "distinct", "global_agg"]
    )
    if inner_shape != "inner_join":
        return qg1.query(inner_shape)
    rel = qg1.scan(dt0)
    right = qg1.scan(pick(ch, tables))
    cond = f"{qg1.key_of(rel.scope).sql} = {qg1.key_of(right.scope).sql}"
    items, cols = qg1.projection(rel.scope + right.scope)
    return Query(
        f"SELECT {', '.join(items)} FROM {rel.from_sql} JOIN {right.from_sql} ON {cond}",
        cols,
        {"inner_join"},
        {upstream, right.tables.pop()},
    )


def gen_scenario(
    ch: Chooser,
    shape: str | None = None,
    *,
    faults: bool = False,
    name: str = "generated",
    seed: int | None = None,
    batches: tuple[int, int] = (2, 3),
    ill_conditioned: bool = False,
) -> Scenario:
    """Tables with rows, one or two dynamic tables (maybe a twin), then batches of
    mutations each followed by refreshes; checks the harness runs are steps too."""
    shape = shape or pick(ch, SHAPES)
    pools = EXTREME_VALUES if ill_conditioned else VALUES
    tables = gen_tables(ch)
    steps: list[Step] = []
    known: dict[str, list[tuple[str, ...]]] = {}
    evolved: set[str] = set()
    for t in tables:
        steps.append(Step("sql", (t.ddl(),)))
        if chance(ch, 0.9):  # else: no snapshot at all when the DT is created
            rows = gen_rows(ch, t, 1, 7, [], pools)
            known[t.name] = rows
            steps.append(Step("sql", (f"INSERT INTO {t.name} VALUES {values_sql(rows)}",)))
        else:
            known[t.name] = []
    qg = QueryGen(ch, tables)
    q0 = qg.query(
        "group_by"
        if shape == "dt_over_dt" and chance(ch, 0.5)
        else (
            pick(ch, [s for s in SHAPES if s not in ("dt_over_dt",)])
            if shape == "dt_over_dt"
            else shape
        )
    )
    tags = {"dt0": set(q0.tags)}
    steps.append(Step("create_dt", ("dt0", q0.sql)))
    dts = ["dt0"]
    if shape == "dt_over_dt" or chance(ch, 0.1):
        q1 = downstream_query(ch, qg, "dt0", q0, tables)
        tags["dt1"] = q1.tags | {"dt_over_dt"}
        q0.tables |= q1.tables - {"dt0"}
        steps.append(Step("create_dt", ("dt1", q1.sql)))
        dts.append("dt1")
    twin = chance(ch, 0.25)
    if twin:
        steps.append(Step("create_dt", ("tw0", q0.sql)))
        tags["tw0"] = set(q0.tags) | {"twin"}
    used = sorted(q0.tables - {"dt0"}) or [tables[0].name]
    by_name = {t.name: t for t in tables}
    for _ in range(ch.int(*batches)):
        for _ in range(0 if chance(ch, 0.1) else ch.int(1, 3)):
            table = by_name[pick(ch, used)] if chance(ch, 0.85) else pick(ch, tables)
            for stmt in _mutation(ch, table, known[table.name], qg, pools, evolved):
                steps.append(mutation_step(stmt))
        order = list(dts)
        if len(order) > 1 and chance(ch, 0.4):
            order.reverse()  # the downstream DT first: it sees the upstream's old contents
        for dt in order:
            if faults and chance(ch, 0.15):
                steps.append(Step("fault", (dt, pick(ch, FAULT_POINTS))))
            steps.append(Step("refresh", (dt,)))
        if chance(ch, 0.25):
            steps.append(Step("no_data", (pick(ch, dts),)))
        if chance(ch, 0.15):
            steps.append(Step("refresh_full", (pick(ch, dts),)))
    last = [s.args[0] for s in steps[-2:] if s.op == "refresh"]
    if len(dts) > 1 and last != ["dt0", "dt1"]:  # end with the downstream table up to date
        steps.append(Step("refresh", ("dt0",)))
        steps.append(Step("refresh", ("dt1",)))
    if twin:
        if [s.args[0] for s in steps[-1:] if s.op == "refresh"] != ["dt0"] and "dt0" not in last:
            steps.append(Step("refresh", ("dt0",)))
        steps.append(Step("refresh", ("tw0",)))
        steps.append(Step("same", ("dt0", "tw0")))
    if seed is not None:
        steps = _with_settings(steps, random.Random(f"settings-{seed}"))
        steps = _with_current_date(steps, random.Random(f"current-date-{seed}"))
    return Scenario(name, steps, tags, seed=seed, shape=shape)


# a setting a result depends on: (what in a query it changes, key, the value CREATE runs
# under, None: as it is; the value the refreshes after it run under), the rarest first
SETTING_CHANGES = (
    (
        r"\b(STDDEV|VARIANCE|VAR_SAMP|SKEWNESS)\(",
        "spark.sql.legacy.statisticalAggregate",
        "true",
        "false",
    ),
    (
        r"\b(STDDEV|VARIANCE|VAR_SAMP|SKEWNESS)\(",
        "spark.sql.legacy.statisticalAggregate",
        None,
        "true",
    ),
    (r"\bSIZE\(", "spark.sql.legacy.sizeOfNull", "false", "true"),
    (r"\bSIZE\(", "spark.sql.legacy.sizeOfNull", None, "false"),
    (r"(?i)\b(hour|date_trunc|window)\(", "spark.sql.session.timeZone", None, "America/New_York"),
    (r"\bd\b|DECIMAL", "spark.sql.decimalOperations.allowPrecisionLoss", "false", "true"),
    (r"\bd\b|DECIMAL", "spark.sql.decimalOperations.allowPrecisionLoss", None, "false"),
)


def _with_settings(steps: list[Step], rng: random.Random) -> list[Step]:
    """One scenario in four whose queries compute something a setting changes creates
    its dynamic tables under one value of the setting and refreshes them under another:
    the refreshes must compute as CREATE did. Chosen by a generator of its own, so the
    scenarios of other seeds stay as they were (the harness puts the settings back
    after each scenario)."""
    creates = [i for i, step in enumerate(steps) if step.op == "create_dt"]
    text = " ".join(steps[i].args[1] for i in creates)
    changes = [c for c in SETTING_CHANGES if re.search(c[0], text)]
    if not creates or not changes or rng.random() >= 1 / 4:
        return steps
    # the first setting that applies (the rarer ones come first), in one of its forms
    _, key, at_create, later = rng.choice([c for c in changes if c[1] == changes[0][1]])
    out = list(steps)
    out.insert(creates[-1] + 1, Step("sql", (f"SET {key} = {later}",)))
    if at_create is not None:
        out.insert(creates[0], Step("sql", (f"SET {key} = {at_create}",)))
    return out


# the DATE literal a query may read instead as CURRENT_DATE (datediff's origin, a
# coalesce's default): a refresh reads the day it runs on, and the oracle that day
DAY_LITERAL = "DATE '2024-01-01'"


def _with_current_date(steps: list[Step], rng: random.Random) -> list[Step]:
    """One scenario in two whose dynamic tables' queries read ``DAY_LITERAL`` read
    ``current_date()`` there instead: the day is written into each refresh's statements
    as a literal, wherever the query reads it (a filter, a group key, an aggregate's
    argument, a join). In one of those in two the clock moves on a day before a refresh
    that more changes follow (@next_day): that refresh recomputes, and the ones after it
    maintain what it built. Chosen by a generator of its own, as _with_settings is."""
    if not any(s.op == "create_dt" and DAY_LITERAL in s.args[1] for s in steps):
        return steps
    if rng.random() >= 1 / 2:
        return steps
    out = [
        Step(s.op, (s.args[0], s.args[1].replace(DAY_LITERAL, "current_date()")))
        if s.op == "create_dt"
        else s
        for s in steps
    ]
    changes = [i for i, s in enumerate(out) if s.op == "sql"]
    refreshes = [i for i, s in enumerate(out) if s.op == "refresh" and i < changes[-1]]
    if refreshes and rng.random() < 1 / 2:
        out.insert(rng.choice(refreshes), Step("next_day", ()))
    return out


def gen_combined(
    ch: Chooser, shapes: Sequence[str], name: str, seed: int | None = None
) -> Scenario:
    """One dynamic table per shape over one set of tables, one batch of mutations, every
    table refreshed (and checked), then a NO_DATA refresh: the unit of
    the quick profile, where the setup and mutations of a scenario are shared by many
    queries (``dt_over_dt`` reads ``dt0``)."""
    tables = gen_tables(ch, 3)
    steps: list[Step] = []
    known: dict[str, list[tuple[str, ...]]] = {}
    for t in tables:
        steps.append(Step("sql", (t.ddl(),)))
        rows = gen_rows(ch, t, 2, 7, [])
        known[t.name] = rows
        steps.append(Step("sql", (f"INSERT INTO {t.name} VALUES {values_sql(rows)}",)))
    qg = QueryGen(ch, tables)
    tags: dict[str, set[str]] = {}
    queries: dict[str, Query] = {}
    for shape in shapes:
        dt = f"dt{len(queries)}"
        if shape == "dt_over_dt":
            assert queries, "dt_over_dt needs an upstream dynamic table first"
            q = downstream_query(ch, qg, "dt0", queries["dt0"], tables)
            q.tags.add("dt_over_dt")
        else:
            q = qg.query(shape)
        queries[dt] = q
        tags[dt] = set(q.tags)
        steps.append(Step("create_dt", (dt, q.sql)))
    used = sorted(set().union(*(q.tables for q in queries.values())) - set(queries))
    by_name = {t.name: t for t in tables}
    # every table a query reads changes (in one or two commits), one maybe twice
    for table in used + ([pick(ch, used)] if chance(ch, 0.5) else []):
        for stmt in _mutation(ch, by_name[table], known[table], qg):
            steps.append(mutation_step(stmt))
    order = list(queries)
    if chance(ch, 0.4):
        order.reverse()  # downstream tables first: they see their upstream's old contents
    steps += [Step("refresh", (dt,)) for dt in order]
    if order[0] != "dt0" and any(dt != "dt0" and "dt0" in q.tables for dt, q in queries.items()):
        # the upstream moved after its downstream refreshed: bring those up to date
        steps += [Step("refresh", (dt,)) for dt, q in queries.items() if "dt0" in q.tables]
    steps.append(Step("no_data", (pick(ch, order),)))
    return Scenario(name, steps, tags, seed=seed, shape="+".join(shapes))


# The quick profile (``make test``): every shape once, in three scenarios of shared tables.
QUICK_GROUPS: tuple[tuple[str, ...], ...] = (
    ("filter", "inner_join", "outer_join", "semi_join", "anti_join", "subquery", "not_in"),
    (
        "group_by",
        "global_agg",
        "distinct",
        "union_all",
        "union",
        "cte",
        "scalar_subquery",
        "grouping_sets",
    ),
    ("window_rank", "window_dedup", "window_agg", "top_n", "dt_over_dt", "pivot", "rejected"),
)


@functools.cache
def quick_combined_seed(group: tuple[str, ...], base: int = 9000) -> int:
    """The first seed from ``base`` whose combined scenario of ``group`` changes a source of
    every query, with at least two kinds of change (INSERT / UPDATE / DELETE / MERGE) on
    two tables, empties at most one table, and whose queries have the shapes (tags)
    asked for. Deterministic for a given generator."""
    for seed in range(base, base + 2000):
        sc = gen_combined(RandomChooser(seed), group, f"quick-{seed}", seed)
        tags = set().union(*sc.tags.values())
        changed = [_changed_table(s.args[0]) for s in sc.steps if s.op == "sql"]
        removals = [t for t, kind in changed if kind in ("UPDATE", "DELETE", "MERGE")]
        reads = {
            s.args[0]: set(re.findall(r"\b(t\d+)\b", s.args[1]))
            for s in sc.steps
            if s.op == "create_dt"
        }
        every_dt_changes = all(r & {t for t, _ in changed if t} for r in reads.values() if r)
        emptied = [
            s for s in sc.steps if s.op == "sql" and re.fullmatch(r"DELETE FROM t\d+", s.args[0])
        ]
        if (
            len(set(removals)) >= 2
            and len({kind for _, kind in changed if kind}) >= 2
            and len(emptied) <= 1
            and every_dt_changes
            and all(tags & SHAPE_TAGS.get(shape, {shape}) for shape in group)
        ):
            return seed
    raise ValueError(f"no combined scenario of {group} from seed {base}")


def _changed_table(stmt: str) -> tuple[str | None, str | None]:
    """(table, kind) of a statement that changes rows (a no-op UPDATE, an overwrite with
    the same rows or a compaction change none)."""
    m = re.match(r"(INSERT INTO|UPDATE|DELETE FROM|MERGE INTO) (t\d+)\b", stmt)
    if m is None or stmt.endswith("WHERE k = 99"):
        return None, None
    return m.group(2), m.group(1).split()[0]


def quick_scenarios() -> list[Scenario]:
    """The quick profile's generated scenarios (replay one with ``python -m
    tests.differential.fuzz --quick``)."""
    seeds = [quick_combined_seed(g, 9000 + 100 * i) for i, g in enumerate(QUICK_GROUPS)]
    return [
        gen_combined(RandomChooser(seed), g, f"quick-{seed}", seed)
        for g, seed in zip(QUICK_GROUPS, seeds, strict=True)
    ]


def scenario_from_seed(
    seed: int, shape: str | None = None, *, faults: bool = False, ill_conditioned: bool = False
) -> Scenario:
    """The scenario of a seed. ``ill_conditioned``: also doubles whose sums depend on the
    order of additions (see ``EXTREME_VALUES``)."""
    return gen_scenario(
        RandomChooser(seed),
        shape,
        faults=faults,
        name=f"seed-{seed}",
        seed=seed,
        ill_conditioned=ill_conditioned,
    )


def scenarios(shape: str | None = None, *, faults: bool = False, batches: tuple[int, int] = (2, 3)):
    """Hypothesis strategy of scenarios (shrinks towards fewer/simpler everything)."""
    from hypothesis import strategies as st

    @st.composite
    def build(draw: Callable[..., int]) -> Scenario:
        return gen_scenario(
            HypothesisChooser(draw), shape, faults=faults, name="hypothesis", batches=batches
        )

    return build()


# -- the quick profile ---------------------------------------------------------------------------

SHAPE_TAGS: dict[str, set[str]] = {
    "outer_join": {"left_join", "right_join", "full_join"},
    "window_rank": {"window_rank", "window_rownum", "window_lag"},
    "window_agg": {"window_agg", "window_frame"},
    "dt_over_dt": {"dt_over_dt"},
    "pivot": {"pivot", "unpivot"},
}


def cost(scenario: Scenario) -> int:
    """Refreshes and CREATEs: what a scenario costs (each ~1-3 s of fixed overhead)."""
    return sum(
        1 for s in scenario.steps if s.op in ("create_dt", "refresh", "refresh_full", "fault")
    )


@functools.cache
def quick_seed(shape: str, base: int = 7000) -> int:
    """The first seed from ``base`` whose scenario of ``shape`` is cheap (at most 3 refreshes
    and CREATEs; 6 with two dynamic tables), really has the shape, and changes a source with
    something other than an INSERT. Deterministic for a given generator."""
    for seed in range(base, base + 5000):
        sc = scenario_from_seed(seed, shape)
        tags = set().union(*sc.tags.values())
        mutations = [
            s.args[0]
            for s in sc.steps
            if s.op == "sql" and s.args[0].startswith(("UPDATE", "DELETE", "MERGE"))
        ]
        limit = 6 if shape == "dt_over_dt" else 3
        if tags & SHAPE_TAGS.get(shape, {shape}) and cost(sc) <= limit and mutations:
            return seed
    raise ValueError(f"no cheap scenario of shape {shape} from seed {base}")
