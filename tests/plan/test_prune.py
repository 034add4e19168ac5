"""Scans read only the columns a plan uses, pure (no Spark): a CTE's or derived
table's SELECT * scans what is read above it (plan/prune.py)."""

from __future__ import annotations

import pytest

from dyntables.plan.build import build_plan
from dyntables.plan.ops import (
    scans,
)
from tests.plan.test_build import SCHEMA, T0, scanned
from tests.plan.test_query import qualify


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT l0.k, l0.n FROM t0 AS l0 WHERE l0.n > 5", [("t0", ("k", "n"))]),
        ("SELECT t0.k, t1.s FROM t0 JOIN t1 ON t0.k = t1.k", [("t0", ("k",)), ("t1", ("k", "s"))]),
        ("SELECT COUNT(*) AS c FROM t0", [("t0", ("k",))]),  # one column still counts rows
        ("SELECT z FROM t0 UNION ALL SELECT k FROM t1", [("t0", ("z",)), ("t1", ("k",))]),
        ("SELECT k, SUM(n) AS s FROM t0 WHERE z > 0 GROUP BY k", [("t0", ("k", "n", "z"))]),
        (
            "SELECT k FROM t0 WHERE EXISTS (SELECT 1 FROM t1 WHERE t1.k = t0.k)",
            [("t0", ("k",)), ("t1", ("k",))],
        ),
        (
            "SELECT k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY n) AS r FROM t0",
            [("t0", ("k", "n"))],
        ),
        # a CTE named like its source, and its body's table read once, only the columns
        # read above it
        ("WITH t0 AS (SELECT k, n FROM t0 WHERE k > 1) SELECT k FROM t0", [("t0", ("k",))]),
        ("WITH s AS (SELECT * FROM t0) SELECT n FROM s WHERE z > 0", [("t0", ("n", "z"))]),
        (
            "SELECT x.k FROM (SELECT * FROM t0) AS x JOIN t1 ON x.n = t1.k",
            [("t0", ("k", "n")), ("t1", ("k",))],
        ),
        ("SELECT public.t0.k FROM public.t0", [("t0", ("k",))]),
        # a time bucket's projection passes on only the columns the query names
        (
            "SELECT window(ts, '1 hour') AS w, SUM(n) AS s FROM t0 GROUP BY window(ts, '1 hour')",
            [("t0", ("n", "ts"))],
        ),
        # columns named by the table's alias: FROM t AS x(a, b) reads k as a
        ("SELECT a, b FROM t1 AS x(a, b) WHERE x.a > 1", [("t1", ("k", "s"))]),
        ("SELECT b FROM t1 AS x(a, b)", [("t1", ("s",))]),
    ],
)
def test_scans_read_only_the_columns_the_query_uses(
    sql: str, expected: list[tuple[str, tuple[str, ...]]]
) -> None:
    assert scanned(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 AS one FROM (SELECT * FROM t0 WHERE k > 1) AS x",
        "SELECT k FROM t1 EXCEPT ALL SELECT 1 AS c FROM (SELECT * FROM t0) AS x",
    ],
)
def test_a_derived_table_none_of_whose_columns_is_read_scans_one_that_is_no_map(
    sql: str,
) -> None:
    """A row still counts where nothing of it is read: one column is kept, not the MAP
    (the query was FULL MAP_COLUMN)."""
    plan = build_plan(sql, SCHEMA, qualify)
    assert [s.source_columns for s in scans(plan.root) if s.table == T0] == [("k",)]


def test_a_map_passed_on_and_never_read_is_not_scanned() -> None:
    plan = build_plan(
        "SELECT t1.s FROM (SELECT * FROM t0 WHERE k > 1) AS x JOIN t1 ON x.k = t1.k",
        SCHEMA,
        qualify,
    )
    assert scans(plan.root)[0].source_columns == ("k",)  # not the MAP, nor n, z, ts
